/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libafmesh_dev_fakegpu.so: a device module that pretends to be a GPU, so
 * the engine's device paths run on hosts without one.
 *
 *  - "Device memory" has kind AFMESH_MEM_CUDA but is host memory from this
 *    module's allocator. A transport that registers host memory only (tcp)
 *    refuses it by kind, so the engine must stage it.
 *  - Streams are lazy in-order queues: queued work runs only when someone
 *    synchronises with the stream (stream_sync; event_sync and event_query
 *    run it up to the event's record, no further). That makes ordering
 *    mistakes deterministic: code that reads a buffer without waiting for
 *    the stream that writes it sees the old bytes, and code that sends what
 *    an event covers must not assume what follows it has run.
 *  - Flags are host words. A stream waiting on one blocks its synchroniser
 *    (stream_sync / event_sync; event_query reports AGAIN) until flag_write,
 *    which then runs the released work at once, as a GPU would: work queued
 *    behind the wait sees exactly what the host had written before the flag.
 * Fresh device memory is filled with 0xA5 so unwritten bytes show.
 *  - FAKEGPU_FAIL_COPY_INTO_DEVICE=N (FAKEGPU_FAIL_COPY_FROM_DEVICE=N)
 *    makes the process's Nth synchronous copy into (out of) device memory
 *    fail, once: the engine must lose nothing.
 *  - FAKEGPU_FAIL_ASYNC_COPY_FROM_DEVICE=N makes the process's Nth queued
 *    copy out of device memory fail when the stream runs it: it copies
 *    nothing, and the next event recorded behind it reports the failure.
 *    Unlike a real GPU's sticky errors, the stream then carries on, so a
 *    test sees what happens to the work after a failure.
 *  - FAKEGPU_BUS_IDS=dddd:bb:dd.f,... gives that many devices with those PCI
 *    bus ids (for the topology tests); unset, one device with none. Every
 *    device is the same host memory.
 * One lock guards everything: simple, and no test here measures speed.
 */
#define _POSIX_C_SOURCE 200809L /* posix_memalign */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "afmesh/hal/device.h"

static const afmesh_host_services *g_host;

enum op_kind { OP_COPY, OP_MARK, OP_WAIT };

struct event;
struct stream;
struct flag {
    uint32_t value;
    struct stream *waiter; /* the last stream queued to wait on it: run by flag_write */
};
struct op {
    enum op_kind kind;
    void *dst;
    const void *src;
    size_t bytes;
    struct event *event; /* OP_MARK */
    uint64_t mark;
    struct flag *flag; /* OP_WAIT */
    uint32_t value;
    int fails; /* OP_COPY picked by FAKEGPU_FAIL_ASYNC_COPY_FROM_DEVICE */
    struct op *next;
};
struct stream {
    struct op *head, *tail;
    int failed; /* a copy failed since the last event ran */
};
struct event {
    struct stream *stream; /* of the last record */
    uint64_t recorded, completed;
    int failed; /* the stream failed before the record ran */
};
struct allocation {
    char *ptr;
    size_t bytes;
    struct allocation *next;
};

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_flag_written = PTHREAD_COND_INITIALIZER;
static struct stream g_default_stream; /* the NULL stream */
static struct allocation *g_device_allocations;
static int g_context;

static int fail(int status, const char *what) {
    g_host->set_error("fakegpu: %s", what);
    return status;
}

static struct stream *stream_of(void *stream) { return stream ? (struct stream *)stream : &g_default_stream; }

/* Runs `s`'s queued work in order, with g_mu held, up to and including
 * `until`'s latest record (all of it for NULL). Returns 1 when that is done;
 * 0 when it stopped at an unsatisfied flag wait and !block. */
static int drain(struct stream *s, int block, const struct event *until) {
    while (s->head) {
        struct op *op = s->head;
        if (op->kind == OP_WAIT && op->flag->value < op->value) {
            if (!block) return 0;
            pthread_cond_wait(&g_flag_written, &g_mu);
            continue;
        }
        int last = 0;
        if (op->kind == OP_COPY) {
            if (op->fails) s->failed = 1;
            else memmove(op->dst, op->src, op->bytes);
        }
        if (op->kind == OP_MARK) {
            op->event->completed = op->mark;
            op->event->failed = s->failed;
            s->failed = 0;
            last = op->event == until && op->mark == until->recorded;
        }
        s->head = op->next;
        if (!s->head) s->tail = NULL;
        free(op);
        if (last) break;
    }
    return 1;
}

static int enqueue(void *stream, struct op *proto) {
    struct op *op = malloc(sizeof *op);
    if (!op) return fail(AFMESH_HAL_NO_MEMORY, "out of memory");
    *op = *proto;
    op->next = NULL;
    pthread_mutex_lock(&g_mu);
    struct stream *s = stream_of(stream);
    if (op->kind == OP_MARK) {
        op->event->stream = s;
        op->mark = ++op->event->recorded;
    }
    if (op->kind == OP_WAIT) op->flag->waiter = s;
    if (s->tail) s->tail->next = op;
    else s->head = op;
    s->tail = op;
    pthread_mutex_unlock(&g_mu);
    return AFMESH_HAL_OK;
}

/* Countdowns to the copy that fails; -1: none. */
static long g_fail_copy_into_device = -1;       /* FAKEGPU_FAIL_COPY_INTO_DEVICE */
static long g_fail_copy_from_device = -1;       /* FAKEGPU_FAIL_COPY_FROM_DEVICE */
static long g_fail_async_copy_from_device = -1; /* FAKEGPU_FAIL_ASYNC_COPY_FROM_DEVICE */
static pthread_once_t g_read_settings = PTHREAD_ONCE_INIT;

/* FAKEGPU_BUS_IDS, one entry per device. */
enum { kMaxDevices = 16 };
static char g_bus_ids[kMaxDevices][32];
static int g_device_count = 1;

static void read_bus_ids(void) {
    const char *list = getenv("FAKEGPU_BUS_IDS");
    if (!list || !*list) return;
    g_device_count = 0;
    while (*list && g_device_count < kMaxDevices) {
        size_t len = strcspn(list, ",");
        if (len >= sizeof g_bus_ids[0]) len = sizeof g_bus_ids[0] - 1;
        memcpy(g_bus_ids[g_device_count], list, len);
        g_bus_ids[g_device_count++][len] = '\0';
        list += strcspn(list, ",");
        if (*list == ',') ++list;
    }
}

static void read_settings(void) {
    const struct {
        const char *name;
        long *countdown;
    } settings[] = {{"FAKEGPU_FAIL_COPY_INTO_DEVICE", &g_fail_copy_into_device},
                    {"FAKEGPU_FAIL_COPY_FROM_DEVICE", &g_fail_copy_from_device},
                    {"FAKEGPU_FAIL_ASYNC_COPY_FROM_DEVICE", &g_fail_async_copy_from_device}};
    for (size_t i = 0; i < sizeof settings / sizeof settings[0]; ++i) {
        const char *n = getenv(settings[i].name);
        if (n) *settings[i].countdown = atol(n);
    }
    read_bus_ids();
}

static int fg_init(void **ctx) {
    pthread_once(&g_read_settings, read_settings);
    *ctx = &g_context;
    return AFMESH_HAL_OK;
}
static void fg_fini(void *ctx) { (void)ctx; }
static int fg_device_count(void *ctx, int *count) {
    (void)ctx;
    *count = g_device_count;
    return AFMESH_HAL_OK;
}
static int fg_device_info(void *ctx, int device, afmesh_dev_info *info) {
    (void)ctx;
    if (device < 0 || device >= g_device_count || !info)
        return fail(AFMESH_HAL_INVALID_ARGUMENT, "no such device (FAKEGPU_BUS_IDS says how many)");
    snprintf(info->name, sizeof info->name, "fake GPU (host memory)");
    snprintf(info->bus_id, sizeof info->bus_id, "%s", g_bus_ids[device]);
    info->total_memory = 1ull << 30;
    return AFMESH_HAL_OK;
}
static int fg_set_device(void *ctx, int device) {
    (void)ctx;
    return device >= 0 && device < g_device_count
               ? AFMESH_HAL_OK
               : fail(AFMESH_HAL_INVALID_ARGUMENT, "no such device (FAKEGPU_BUS_IDS says how many)");
}

static int fg_mem_alloc(void *ctx, int device, uint32_t where, size_t bytes, void **ptr) {
    (void)ctx;
    if (device != 0 || bytes == 0 || !ptr || where > AFMESH_ALLOC_HOST_PINNED)
        return fail(AFMESH_HAL_INVALID_ARGUMENT, "mem_alloc needs device 0, a known placement and bytes > 0");
    void *p = NULL;
    if (posix_memalign(&p, 4096, bytes) != 0) return fail(AFMESH_HAL_NO_MEMORY, "posix_memalign failed");
    if (where == AFMESH_ALLOC_DEVICE) {
        struct allocation *a = malloc(sizeof *a);
        if (!a) {
            free(p);
            return fail(AFMESH_HAL_NO_MEMORY, "out of memory");
        }
        memset(p, 0xA5, bytes);
        a->ptr = p;
        a->bytes = bytes;
        pthread_mutex_lock(&g_mu);
        a->next = g_device_allocations;
        g_device_allocations = a;
        pthread_mutex_unlock(&g_mu);
    }
    *ptr = p;
    return AFMESH_HAL_OK;
}

static int fg_mem_free(void *ctx, uint32_t where, void *ptr) {
    (void)ctx;
    if (!ptr) return AFMESH_HAL_OK;
    if (where == AFMESH_ALLOC_DEVICE) {
        pthread_mutex_lock(&g_mu);
        for (struct allocation **a = &g_device_allocations; *a; a = &(*a)->next) {
            if ((*a)->ptr != ptr) continue;
            struct allocation *gone = *a;
            *a = gone->next;
            free(gone);
            break;
        }
        pthread_mutex_unlock(&g_mu);
    }
    free(ptr);
    return AFMESH_HAL_OK;
}

static int fg_pointer_query(void *ctx, const void *ptr, uint32_t *kind, int *device) {
    (void)ctx;
    if (!ptr || !kind || !device) return fail(AFMESH_HAL_INVALID_ARGUMENT, "pointer_query: null argument");
    *kind = AFMESH_MEM_HOST;
    *device = -1;
    pthread_mutex_lock(&g_mu);
    for (struct allocation *a = g_device_allocations; a; a = a->next) {
        if ((const char *)ptr >= a->ptr && (const char *)ptr < a->ptr + a->bytes) {
            *kind = AFMESH_MEM_CUDA;
            *device = 0;
        }
    }
    pthread_mutex_unlock(&g_mu);
    return AFMESH_HAL_OK;
}

/* Whether a copy involving device memory at `device_ptr` is the one a
 * FAKEGPU_FAIL_* countdown picked. */
static int injected_failure(const void *device_ptr, long *countdown) {
    uint32_t kind;
    int device, picked = 0;
    fg_pointer_query(NULL, device_ptr, &kind, &device);
    pthread_mutex_lock(&g_mu);
    if (kind == AFMESH_MEM_CUDA && *countdown > 0) picked = --*countdown == 0;
    pthread_mutex_unlock(&g_mu);
    return picked;
}

static int fg_memcpy_sync(void *ctx, void *dst, const void *src, size_t bytes) {
    (void)ctx;
    if (bytes && (!dst || !src)) return fail(AFMESH_HAL_INVALID_ARGUMENT, "memcpy: null pointer");
    if (bytes && injected_failure(dst, &g_fail_copy_into_device))
        return fail(AFMESH_HAL_ERROR, "injected copy failure (FAKEGPU_FAIL_COPY_INTO_DEVICE)");
    if (bytes && injected_failure(src, &g_fail_copy_from_device))
        return fail(AFMESH_HAL_ERROR, "injected copy failure (FAKEGPU_FAIL_COPY_FROM_DEVICE)");
    if (bytes) memmove(dst, src, bytes);
    return AFMESH_HAL_OK;
}

static int fg_memcpy_async(void *ctx, void *dst, const void *src, size_t bytes, void *stream) {
    (void)ctx;
    if (bytes && (!dst || !src)) return fail(AFMESH_HAL_INVALID_ARGUMENT, "memcpy_async: null pointer");
    struct op op = {OP_COPY, dst, src, bytes, NULL, 0, NULL, 0, 0, NULL};
    op.fails = bytes && injected_failure(src, &g_fail_async_copy_from_device);
    return enqueue(stream, &op);
}

static int fg_stream_create(void *ctx, int device, void **stream) {
    (void)ctx;
    if (device != 0 || !stream) return fail(AFMESH_HAL_INVALID_ARGUMENT, "bad stream_create arguments");
    *stream = calloc(1, sizeof(struct stream));
    return *stream ? AFMESH_HAL_OK : fail(AFMESH_HAL_NO_MEMORY, "out of memory");
}
static int fg_stream_destroy(void *ctx, void *stream) {
    (void)ctx;
    pthread_mutex_lock(&g_mu);
    drain(stream_of(stream), 1, NULL); /* like the real runtimes: queued work still runs */
    pthread_mutex_unlock(&g_mu);
    if (stream) free(stream);
    return AFMESH_HAL_OK;
}
static int fg_stream_sync(void *ctx, void *stream) {
    (void)ctx;
    pthread_mutex_lock(&g_mu);
    drain(stream_of(stream), 1, NULL);
    pthread_mutex_unlock(&g_mu);
    return AFMESH_HAL_OK;
}

static int fg_event_create(void *ctx, int device, void **event) {
    (void)ctx;
    if (device != 0 || !event) return fail(AFMESH_HAL_INVALID_ARGUMENT, "bad event_create arguments");
    *event = calloc(1, sizeof(struct event));
    return *event ? AFMESH_HAL_OK : fail(AFMESH_HAL_NO_MEMORY, "out of memory");
}
static int fg_event_destroy(void *ctx, void *event) {
    (void)ctx;
    free(event);
    return AFMESH_HAL_OK;
}
static int fg_event_record(void *ctx, void *event, void *stream) {
    (void)ctx;
    if (!event) return fail(AFMESH_HAL_INVALID_ARGUMENT, "event_record: null event");
    struct op op = {OP_MARK, NULL, NULL, 0, event, 0, NULL, 0, 0, NULL};
    return enqueue(stream, &op);
}
static int event_wait(void *event, int block) {
    struct event *e = event;
    if (!e) return fail(AFMESH_HAL_INVALID_ARGUMENT, "null event");
    pthread_mutex_lock(&g_mu);
    if (e->stream) drain(e->stream, block, e);
    int done = e->completed >= e->recorded, failed = done && e->failed;
    pthread_mutex_unlock(&g_mu);
    if (failed) return fail(AFMESH_HAL_ERROR, "injected stream failure (FAKEGPU_FAIL_ASYNC_COPY_FROM_DEVICE)");
    return done ? AFMESH_HAL_OK : AFMESH_HAL_AGAIN;
}
static int fg_event_query(void *ctx, void *event) {
    (void)ctx;
    return event_wait(event, 0);
}
static int fg_event_sync(void *ctx, void *event) {
    (void)ctx;
    return event_wait(event, 1);
}

static int fg_flag_create(void *ctx, int device, void **flag) {
    (void)ctx;
    if (device != 0 || !flag) return fail(AFMESH_HAL_INVALID_ARGUMENT, "bad flag_create arguments");
    *flag = calloc(1, sizeof(struct flag));
    return *flag ? AFMESH_HAL_OK : fail(AFMESH_HAL_NO_MEMORY, "out of memory");
}
static int fg_flag_destroy(void *ctx, void *flag) {
    (void)ctx;
    free(flag);
    return AFMESH_HAL_OK;
}
static int fg_flag_write(void *ctx, void *flag, uint32_t value) {
    (void)ctx;
    if (!flag) return fail(AFMESH_HAL_INVALID_ARGUMENT, "flag_write: null flag");
    pthread_mutex_lock(&g_mu);
    struct flag *f = flag;
    if (value > f->value) f->value = value;
    if (f->waiter) drain(f->waiter, 0, NULL);
    pthread_cond_broadcast(&g_flag_written);
    pthread_mutex_unlock(&g_mu);
    return AFMESH_HAL_OK;
}
static int fg_stream_wait_flag(void *ctx, void *stream, void *flag, uint32_t value) {
    (void)ctx;
    if (!flag) return fail(AFMESH_HAL_INVALID_ARGUMENT, "stream_wait_flag: null flag");
    struct op op = {OP_WAIT, NULL, NULL, 0, NULL, 0, flag, value, 0, NULL};
    return enqueue(stream, &op);
}

static const afmesh_device_ops kOps = {
    sizeof(afmesh_device_ops),
    AFMESH_MEM_CUDA,
    fg_init,
    fg_fini,
    fg_device_count,
    fg_device_info,
    fg_set_device,
    fg_mem_alloc,
    fg_mem_free,
    fg_pointer_query,
    fg_memcpy_sync,
    fg_memcpy_async,
    fg_stream_create,
    fg_stream_destroy,
    fg_stream_sync,
    fg_event_create,
    fg_event_destroy,
    fg_event_record,
    fg_event_query,
    fg_event_sync,
    fg_flag_create,
    fg_flag_destroy,
    fg_flag_write,
    fg_stream_wait_flag,
    NULL, /* dmabuf_export: nothing to export */
};

AFMESH_MODULE_EXPORT int afmesh_module_query(uint32_t host_abi_major, const afmesh_host_services *host,
                                             afmesh_module_desc *out) {
    g_host = host;
    return afmesh_module_describe(host_abi_major, out, AFMESH_MODULE_DEVICE, "fakegpu", "test-fakegpu", &kOps);
}
