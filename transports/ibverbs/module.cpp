// The module's C ABI edge: afmesh_module_query and the afmesh_net_ops table.
// Each entry checks its context, forwards to Context, and keeps C++
// exceptions (in practice only std::bad_alloc) from crossing into C.
#include <exception>
#include <new>

#include "afmesh/hal/transport.h"
#include "context.h"
#include "host.h"
#include "wire.h"

namespace afmesh::ibverbs {
namespace {

constexpr const char *kVersion = "0.1.0 (rdma-core verbs, RC QPs, handshake version 1)";
static_assert(kWireVersion == 1, "kVersion names the handshake version");

template <class Body>
int guarded(const char *what, Body &&body) noexcept {
    try {
        return body();
    } catch (const std::bad_alloc &) {
        return host_error(AFMESH_HAL_NO_MEMORY, "%s: out of memory", what);
    } catch (const std::exception &e) {
        return host_error(AFMESH_HAL_ERROR, "%s: %s", what, e.what());
    }
}

// Runs `body` on the context, or refuses a null one.
template <class Body>
int with_context(void *ctx, const char *what, Body &&body) noexcept {
    if (!ctx) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "%s: null context", what);
    return guarded(what, [&] { return body(*static_cast<Context *>(ctx)); });
}

int module_init(void **ctx, afmesh_net_caps *caps) {
    if (!ctx || !caps) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "init: null argument");
    return guarded("init", [&] {
        Context *context = nullptr;
        const int rc = Context::create(caps, &context);
        *ctx = context;
        return rc;
    });
}

void module_fini(void *ctx) { delete static_cast<Context *>(ctx); }

int module_listen(void *ctx, void *addr, size_t *addr_len) {
    return with_context(ctx, "listen", [&](Context &c) { return c.listen(addr, addr_len); });
}

int module_connect(void *ctx, const void *addr, size_t addr_len, afmesh_net_conn **conn) {
    return with_context(ctx, "connect", [&](Context &c) { return c.connect(addr, addr_len, conn); });
}

int module_accept(void *ctx, afmesh_net_conn **conn) {
    return with_context(ctx, "accept", [&](Context &c) { return c.accept(conn); });
}

int module_close(void *ctx, afmesh_net_conn *conn) {
    return with_context(ctx, "close", [&](Context &c) { return c.close(conn); });
}

int module_mem_register(void *ctx, void *ptr, size_t bytes, const afmesh_net_mem *mem, uint32_t access, afmesh_net_mr **mr,
                     afmesh_net_rkey *rkey) {
    return with_context(ctx, "mem_register",
                        [&](Context &c) { return c.mem_register(ptr, bytes, mem, access, mr, rkey); });
}

int module_mem_deregister(void *ctx, afmesh_net_mr *mr) {
    return with_context(ctx, "mem_deregister", [&](Context &c) { return c.mem_deregister(mr); });
}

int module_write_imm(void *ctx, afmesh_net_conn *conn, const void *src, size_t bytes, afmesh_net_mr *src_mr,
                  const afmesh_net_rkey *dst, uint64_t dst_offset, uint32_t imm, uint32_t flags, uint64_t cookie) {
    return with_context(ctx, "write_imm", [&](Context &c) {
        return c.write_imm(conn, src, bytes, src_mr, dst, dst_offset, imm, flags, cookie);
    });
}

int module_send(void *ctx, afmesh_net_conn *conn, const void *buf, size_t len, uint32_t flags, uint64_t cookie) {
    return with_context(ctx, "send", [&](Context &c) { return c.send(conn, buf, len, flags, cookie); });
}

int module_poll(void *ctx, afmesh_net_event *events, int max) {
    return with_context(ctx, "poll", [&](Context &c) { return c.poll(events, max); });
}

int module_get_wait_fd(void *ctx, int *fd) {
    return with_context(ctx, "get_wait_fd", [&](Context &c) { return c.wait_fd(fd); });
}

int module_arm(void *ctx) {
    return with_context(ctx, "arm", [&](Context &c) { return c.arm(); });
}

int module_describe(void *ctx, char *buf, size_t len) {
    if (!buf || len == 0) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "describe: null buffer");
    return with_context(ctx, "describe", [&](Context &c) { return c.describe(buf, len); });
}

const afmesh_net_ops kOps = {
    sizeof(afmesh_net_ops), module_init,           module_fini,      module_listen, module_connect, module_accept,      module_close,
    module_mem_register,       module_mem_deregister, module_write_imm, module_send,   module_poll,    module_get_wait_fd, module_arm,
    module_describe,
};

}  // namespace
}  // namespace afmesh::ibverbs

extern "C" AFMESH_MODULE_EXPORT int afmesh_module_query(uint32_t host_abi_major, const afmesh_host_services *host,
                                                        afmesh_module_desc *out) {
    if (host) afmesh::ibverbs::set_host(host);
    if (host_abi_major != AFMESH_HAL_ABI_MAJOR)
        return afmesh::ibverbs::host_error(AFMESH_HAL_UNSUPPORTED_VERSION,
                                       "the ibverbs module implements ABI %d.x, the host speaks %u.x", AFMESH_HAL_ABI_MAJOR,
                                       host_abi_major);
    if (!out || out->struct_size < sizeof(afmesh_module_desc))
        return afmesh::ibverbs::host_error(AFMESH_HAL_INVALID_ARGUMENT, "module descriptor smaller than ABI 1.0's");
    out->abi_major = AFMESH_HAL_ABI_MAJOR;
    out->abi_minor = AFMESH_HAL_ABI_MINOR;
    out->kind = AFMESH_MODULE_TRANSPORT;
    out->name = "ibverbs";
    out->version = afmesh::ibverbs::kVersion;
    out->ops = &afmesh::ibverbs::kOps;
    return AFMESH_HAL_OK;
}
