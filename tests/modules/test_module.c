/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One source for every purpose-built test module. Each module is this file
 * compiled with a different set of TM_* definitions (tests/modules/CMakeLists.txt),
 * so every outcome the loader must handle comes from a real shared object:
 *
 *   TM_KIND          AFMESH_MODULE_DEVICE or AFMESH_MODULE_TRANSPORT (what the descriptor says)
 *   TM_NAME          the descriptor's name
 *   TM_VERSION       the descriptor's version string
 *   TM_ABI_MAJOR     the only host ABI major the module accepts (default: the real one)
 *   TM_INIT_STATUS   what init() returns (default AFMESH_HAL_OK)
 *   TM_INIT_REASON   the set_error() reason init() gives when it does not return OK
 *   TM_QUERY_SYMBOL  the name the query function is exported under (default: the right one)
 *   TM_ABI_1_0       when defined, the transport table has ABI 1.0's size (no describe entry)
 *                    and the module answers with ABI minor 0
 *   TM_ABI_MINOR     the ABI minor the module answers with (default: the header's)
 *   TM_SETTING_NAME  the name of its first setting (default AFMESH_TESTMOD_GREETING)
 *
 * The operations are minimal but valid: one device / a plausible set of caps,
 * and NOT_SUPPORTED for everything a loader test never calls.
 *
 * Every variant declares two settings of its own (ABI 1.4): a string whose
 * default is "hello" and an integer within [1, 3] whose default is 1; a
 * transport's describe() says what get_config() gave for each. The table is
 * handed over whatever minor the module answers with, so that a module
 * answering 1.3 shows the core ignoring fields that such a module never wrote.
 */
#include <stdio.h>

#include "afmesh/hal/device.h"
#include "afmesh/hal/transport.h"

#ifndef TM_ABI_MAJOR
#define TM_ABI_MAJOR AFMESH_HAL_ABI_MAJOR
#endif
#ifndef TM_INIT_STATUS
#define TM_INIT_STATUS AFMESH_HAL_OK
#endif
#ifndef TM_INIT_REASON
#define TM_INIT_REASON "test module: init failed"
#endif
#ifndef TM_QUERY_SYMBOL
#define TM_QUERY_SYMBOL afmesh_module_query
#endif
#ifdef TM_ABI_1_0
#define TM_ABI_MINOR 0
#endif
#ifndef TM_ABI_MINOR
#define TM_ABI_MINOR AFMESH_HAL_ABI_MINOR
#endif
#ifndef TM_SETTING_NAME
#define TM_SETTING_NAME "AFMESH_TESTMOD_GREETING"
#endif

static const afmesh_module_setting kSettings[] = {
    {TM_SETTING_NAME, AFMESH_SETTING_STRING, "hello", NULL, 0, 0, "what a test module's describe() greets with"},
    {"AFMESH_TESTMOD_REPEAT", AFMESH_SETTING_INT, "1", NULL, 1, 3, "how often a test module would greet"},
};
#define TM_SETTING_COUNT (sizeof kSettings / sizeof kSettings[0])

static const afmesh_host_services *g_host;
static int g_context;

/* Shared by both tables: init's outcome is the point of most test modules. */
static int init_outcome(void **ctx) {
    if (TM_INIT_STATUS != AFMESH_HAL_OK) {
        g_host->set_error("%s", TM_INIT_REASON);
        return TM_INIT_STATUS;
    }
    *ctx = &g_context;
    return AFMESH_HAL_OK;
}

static int not_supported(void) {
    g_host->set_error("%s: not implemented by a test module", TM_NAME);
    return AFMESH_HAL_NOT_SUPPORTED;
}

/* ---- device table ---- */

static int dev_init(void **ctx) { return init_outcome(ctx); }
static void dev_fini(void *ctx) { (void)ctx; }
static int dev_count(void *ctx, int *count) {
    (void)ctx;
    *count = 1;
    return AFMESH_HAL_OK;
}
static int dev_info(void *ctx, int device, afmesh_dev_info *info) {
    (void)ctx;
    if (device != 0) return AFMESH_HAL_INVALID_ARGUMENT;
    snprintf(info->name, sizeof info->name, "test device '%s'", TM_NAME);
    info->bus_id[0] = '\0';
    info->total_memory = 1u << 20;
    return AFMESH_HAL_OK;
}
static int dev_set_device(void *ctx, int device) {
    (void)ctx;
    return device == 0 ? AFMESH_HAL_OK : AFMESH_HAL_INVALID_ARGUMENT;
}
static int dev_alloc(void *c, int d, uint32_t w, size_t b, void **p) {
    (void)c, (void)d, (void)w, (void)b, (void)p;
    return not_supported();
}
static int dev_free(void *c, uint32_t w, void *p) {
    (void)c, (void)w, (void)p;
    return not_supported();
}
static int dev_pointer_query(void *c, const void *p, uint32_t *k, int *d) {
    (void)c, (void)p;
    *k = AFMESH_MEM_HOST;
    *d = -1;
    return AFMESH_HAL_OK;
}
static int dev_memcpy_sync(void *c, void *d, const void *s, size_t b) {
    (void)c, (void)d, (void)s, (void)b;
    return not_supported();
}
static int dev_memcpy_async(void *c, void *d, const void *s, size_t b, void *st) {
    (void)c, (void)d, (void)s, (void)b, (void)st;
    return not_supported();
}
static int dev_stream_create(void *c, int d, void **s) {
    (void)c, (void)d, (void)s;
    return not_supported();
}
static int dev_handle_op(void *c, void *h) {
    (void)c, (void)h;
    return not_supported();
}
static int dev_event_create(void *c, int d, void **e) {
    (void)c, (void)d, (void)e;
    return not_supported();
}
static int dev_event_record(void *c, void *e, void *s) {
    (void)c, (void)e, (void)s;
    return not_supported();
}

static const afmesh_device_ops kDeviceOps = {
    .struct_size = sizeof(afmesh_device_ops),
    .mem_kind = AFMESH_MEM_HOST,
    .init = dev_init,
    .fini = dev_fini,
    .device_count = dev_count,
    .device_info = dev_info,
    .set_device = dev_set_device,
    .mem_alloc = dev_alloc,
    .mem_free = dev_free,
    .pointer_query = dev_pointer_query,
    .memcpy_sync = dev_memcpy_sync,
    .memcpy_async = dev_memcpy_async,
    .stream_create = dev_stream_create,
    .stream_destroy = dev_handle_op,
    .stream_sync = dev_handle_op,
    .event_create = dev_event_create,
    .event_destroy = dev_handle_op,
    .event_record = dev_event_record,
    .event_query = dev_handle_op,
    .event_sync = dev_handle_op,
    /* the optional flag and dma-buf entries stay NULL: unsupported */
};

/* ---- transport table ---- */

static int net_init(void **ctx, afmesh_net_caps *caps) {
    int rc = init_outcome(ctx);
    if (rc != AFMESH_HAL_OK) return rc;
    caps->flags = AFMESH_NET_CAP_ORDERED;
    caps->imm_bytes = 4;
    caps->max_inline = 64;
    caps->mem_kinds = AFMESH_MEM_BIT(AFMESH_MEM_HOST);
    caps->max_send_size = 4096;
    caps->recv_depth = 16;
    caps->max_addr_size = 64;
    caps->max_write_size = 1u << 20;
    /* ABI 1.5, where the caller's struct has room: above max_send_size, which the core must cap it at. */
    if (caps->struct_size >= offsetof(afmesh_net_caps, eager_send_size) + sizeof caps->eager_send_size)
        caps->eager_send_size = 8192;
    return AFMESH_HAL_OK;
}
static void net_fini(void *ctx) { (void)ctx; }
static int net_listen(void *c, void *a, size_t *l) {
    (void)c, (void)a, (void)l;
    return not_supported();
}
static int net_connect(void *c, const void *a, size_t l, afmesh_net_conn **conn) {
    (void)c, (void)a, (void)l, (void)conn;
    return not_supported();
}
static int net_accept(void *c, afmesh_net_conn **conn) {
    (void)c, (void)conn;
    return AFMESH_HAL_AGAIN;
}
static int net_close(void *c, afmesh_net_conn *conn) {
    (void)c, (void)conn;
    return not_supported();
}
static int net_register(void *c, void *p, size_t b, const afmesh_net_mem *m, uint32_t a, afmesh_net_mr **mr,
                        afmesh_net_rkey *k) {
    (void)c, (void)p, (void)b, (void)m, (void)a, (void)mr, (void)k;
    return not_supported();
}
static int net_deregister(void *c, afmesh_net_mr *mr) {
    (void)c, (void)mr;
    return not_supported();
}
static int net_write_imm(void *c, afmesh_net_conn *conn, const void *s, size_t b, afmesh_net_mr *mr,
                         const afmesh_net_rkey *d, uint64_t o, uint32_t i, uint32_t f, uint64_t k) {
    (void)c, (void)conn, (void)s, (void)b, (void)mr, (void)d, (void)o, (void)i, (void)f, (void)k;
    return not_supported();
}
static int net_send(void *c, afmesh_net_conn *conn, const void *buf, size_t l, uint32_t f, uint64_t k) {
    (void)c, (void)conn, (void)buf, (void)l, (void)f, (void)k;
    return not_supported();
}
static int net_poll(void *c, afmesh_net_event *e, int max) {
    (void)c, (void)e, (void)max;
    return 0;
}

#ifndef TM_ABI_1_0
/* Two lines of its own, then "NAME: value" for each of its settings, as get_config() gives them. */
static int net_describe(void *c, char *buf, size_t len) {
    (void)c;
    int used = snprintf(buf, len, "test transport '%s'\nsecond line of its account\n", TM_NAME);
    for (size_t i = 0; i < TM_SETTING_COUNT && used >= 0 && (size_t)used < len; ++i) {
        const char *value = g_host->get_config(kSettings[i].name);
        used += snprintf(buf + used, len - (size_t)used, "%s: %s\n", kSettings[i].name, value ? value : "(unset)");
    }
    return AFMESH_HAL_OK;
}
#endif

static const afmesh_net_ops kNetOps = {
#ifdef TM_ABI_1_0
    /* A module built before ABI 1.1: the core must not read past this size. */
    .struct_size = offsetof(afmesh_net_ops, describe),
#else
    .struct_size = sizeof(afmesh_net_ops),
    .describe = net_describe,
#endif
    .init = net_init,
    .fini = net_fini,
    .listen = net_listen,
    .connect = net_connect,
    .accept = net_accept,
    .close = net_close,
    .mem_register = net_register,
    .mem_deregister = net_deregister,
    .write_imm = net_write_imm,
    .send = net_send,
    .poll = net_poll,
    /* no wait fd: get_wait_fd and arm stay NULL */
};

AFMESH_MODULE_EXPORT int TM_QUERY_SYMBOL(uint32_t host_abi_major, const afmesh_host_services *host,
                                         afmesh_module_desc *out) {
    g_host = host;
    out->abi_major = TM_ABI_MAJOR;
    out->abi_minor = TM_ABI_MINOR;
    if (host_abi_major != TM_ABI_MAJOR) return AFMESH_HAL_UNSUPPORTED_VERSION;
    out->kind = TM_KIND;
    out->name = TM_NAME;
    out->version = TM_VERSION;
    out->ops = TM_KIND == AFMESH_MODULE_DEVICE ? (const void *)&kDeviceOps : (const void *)&kNetOps;
    if (out->struct_size >= AFMESH_MODULE_DESC_SIZE_1_4) {
        out->settings = kSettings;
        out->setting_count = TM_SETTING_COUNT;
    }
    return AFMESH_HAL_OK;
}
