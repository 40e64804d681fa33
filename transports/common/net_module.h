// SPDX-License-Identifier: Apache-2.0
// What every transport module's C ABI edge needs, written once: the
// afmesh_net_ops table that forwards each entry to the module's Context class
// while keeping C++ exceptions (in practice only std::bad_alloc) from
// crossing into C, the answer to afmesh_module_query, and the caller's event
// array for poll(). The host services (failure reasons, logging,
// configuration) are common/module_binding.h, which device modules share.
// Header-only, like the binding: each module is its own shared object with
// hidden visibility and gets a private copy; no module links another.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <new>
#include <span>

#include "afmesh/hal/transport.h"
#include "module_binding.h"

namespace afmesh::net_module {

using module::host_error;

/** Runs `body`, turning an escaping exception into a status and a reason. */
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

/**
 * The afmesh_net_ops table of a module whose state is `Context`, which
 * provides: static int create(afmesh_net_caps *, Context **), and the
 * members listen, connect, accept, close, mem_register, mem_deregister,
 * write_imm, send, poll, wait_fd, arm, describe, counters and write_imm_v
 * (which also gets the segments' total, checked not to overflow) with the
 * entries' arguments less the context. Each entry refuses a null context
 * and malformed arguments before the module sees them.
 */
template <class Context>
class NetOps {
public:
    static const afmesh_net_ops *table() { return &kTable; }

private:
    // Every flag of write_imm and send this ABI defines (MORE is a hint a module may ignore).
    static constexpr uint32_t kPostFlags = AFMESH_NET_SIGNAL | AFMESH_NET_MORE;

    template <class Body>
    static int with_context(void *ctx, const char *what, Body &&body) noexcept {
        if (!ctx) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "%s: null context", what);
        return guarded(what, [&] { return body(*static_cast<Context *>(ctx)); });
    }

    static int init(void **ctx, afmesh_net_caps *caps) {
        if (!ctx || !caps) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "init: null argument");
        if (caps->struct_size < AFMESH_NET_CAPS_SIZE_1_0)
            return host_error(AFMESH_HAL_INVALID_ARGUMENT, "init: caps.struct_size %u is below ABI 1.0's %zu",
                              caps->struct_size, AFMESH_NET_CAPS_SIZE_1_0);
        return guarded("init", [&] {
            // The module fills in every field it knows; the caller gets those its struct has room for.
            afmesh_net_caps full{};
            full.struct_size = sizeof full;
            Context *context = nullptr;
            const int rc = Context::create(&full, &context);
            const uint32_t caller_size = caps->struct_size;
            memcpy(caps, &full, caller_size < sizeof full ? caller_size : sizeof full);
            caps->struct_size = caller_size;
            *ctx = context;
            return rc;
        });
    }
    static void fini(void *ctx) { delete static_cast<Context *>(ctx); }
    static int listen(void *ctx, void *addr, size_t *addr_len) {
        return with_context(ctx, "listen", [&](Context &c) { return c.listen(addr, addr_len); });
    }
    static int connect(void *ctx, const void *addr, size_t addr_len, afmesh_net_conn **conn) {
        return with_context(ctx, "connect", [&](Context &c) { return c.connect(addr, addr_len, conn); });
    }
    static int accept(void *ctx, afmesh_net_conn **conn) {
        return with_context(ctx, "accept", [&](Context &c) { return c.accept(conn); });
    }
    static int close(void *ctx, afmesh_net_conn *conn) {
        return with_context(ctx, "close", [&](Context &c) { return c.close(conn); });
    }
    // The arguments' shape is checked here; which memory kinds register is the module's call.
    static int mem_register(void *ctx, void *ptr, size_t bytes, const afmesh_net_mem *mem, uint32_t access,
                            afmesh_net_mr **mr, afmesh_net_rkey *rkey) {
        if (!ptr || !mem || !mr || !rkey)
            return host_error(AFMESH_HAL_INVALID_ARGUMENT, "mem_register: null pointer argument");
        if (mem->struct_size < sizeof(afmesh_net_mem))
            return host_error(AFMESH_HAL_INVALID_ARGUMENT, "mem_register: mem.struct_size %u is below ABI 1.0's %zu",
                              mem->struct_size, sizeof(afmesh_net_mem));
        constexpr uint32_t kKnownAccess = AFMESH_NET_ACCESS_LOCAL | AFMESH_NET_ACCESS_REMOTE_WRITE;
        if (access == 0 || (access & ~kKnownAccess) != 0)
            return host_error(AFMESH_HAL_INVALID_ARGUMENT,
                              "mem_register: access 0x%x is not a set of AFMESH_NET_ACCESS_* bits", access);
        if (bytes > UINTPTR_MAX - reinterpret_cast<uintptr_t>(ptr))
            return host_error(AFMESH_HAL_INVALID_ARGUMENT, "mem_register: %zu bytes at %p wrap the address space",
                              bytes, ptr);
        return with_context(ctx, "mem_register",
                            [&](Context &c) { return c.mem_register(ptr, bytes, mem, access, mr, rkey); });
    }
    static int mem_deregister(void *ctx, afmesh_net_mr *mr) {
        return with_context(ctx, "mem_deregister", [&](Context &c) { return c.mem_deregister(mr); });
    }
    static int write_imm(void *ctx, afmesh_net_conn *conn, const void *src, size_t bytes, afmesh_net_mr *src_mr,
                         const afmesh_net_rkey *dst, uint64_t dst_offset, uint32_t imm, uint32_t flags,
                         uint64_t cookie) {
        if (!conn || !dst || (bytes > 0 && !src))
            return host_error(AFMESH_HAL_INVALID_ARGUMENT, "write_imm: null connection, destination or source");
        if ((flags & ~kPostFlags) != 0)
            return host_error(AFMESH_HAL_INVALID_ARGUMENT, "write_imm: unknown flags 0x%x", flags);
        return with_context(ctx, "write_imm", [&](Context &c) {
            return c.write_imm(conn, src, bytes, src_mr, dst, dst_offset, imm, flags, cookie);
        });
    }
    static int write_imm_v(void *ctx, afmesh_net_conn *conn, const afmesh_net_write_seg *segs, uint32_t count,
                           uint32_t imm, uint32_t flags, uint64_t cookie) {
        if (!conn || (count > 0 && !segs))
            return host_error(AFMESH_HAL_INVALID_ARGUMENT, "write_imm_v: null connection or segments");
        if ((flags & ~kPostFlags) != 0)
            return host_error(AFMESH_HAL_INVALID_ARGUMENT, "write_imm_v: unknown flags 0x%x", flags);
        if (count == 0) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "write_imm_v: no segments");
        uint64_t total = 0;
        for (uint32_t i = 0; i < count; ++i) {
            const afmesh_net_write_seg &seg = segs[i];
            if (!seg.src || !seg.dst || seg.bytes == 0)
                return host_error(AFMESH_HAL_INVALID_ARGUMENT,
                                  "write_imm_v: segment %u has a null source or destination, or no bytes", i);
            if (seg.bytes > UINT64_MAX - total)
                return host_error(AFMESH_HAL_INVALID_ARGUMENT, "write_imm_v: the segments' sizes overflow");
            total += seg.bytes;
        }
        return with_context(ctx, "write_imm_v",
                            [&](Context &c) { return c.write_imm_v(conn, segs, count, total, imm, flags, cookie); });
    }
    static int send(void *ctx, afmesh_net_conn *conn, const void *buf, size_t len, uint32_t flags, uint64_t cookie) {
        if (!conn || (len > 0 && !buf)) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "send: null connection or buffer");
        if ((flags & ~kPostFlags) != 0) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "send: unknown flags 0x%x", flags);
        return with_context(ctx, "send", [&](Context &c) { return c.send(conn, buf, len, flags, cookie); });
    }
    static int poll(void *ctx, afmesh_net_event *events, int max) {
        return with_context(ctx, "poll", [&](Context &c) { return c.poll(events, max); });
    }
    static int get_wait_fd(void *ctx, int *fd) {
        if (!fd) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "get_wait_fd: null pointer");
        return with_context(ctx, "get_wait_fd", [&](Context &c) { return c.wait_fd(fd); });
    }
    static int arm(void *ctx) {
        return with_context(ctx, "arm", [&](Context &c) { return c.arm(); });
    }
    static int describe(void *ctx, char *buf, size_t len) {
        if (!buf || len == 0) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "describe: null buffer");
        return with_context(ctx, "describe", [&](Context &c) { return c.describe(buf, len); });
    }
    static int counters(void *ctx, afmesh_net_counter *out, uint32_t capacity) {
        if (!out && capacity > 0) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "counters: null array");
        return with_context(ctx, "counters", [&](Context &c) { return c.counters(out, capacity); });
    }

    static constexpr afmesh_net_ops kTable = {
        sizeof(afmesh_net_ops), init, fini, listen,      connect, accept, close,   mem_register,
        mem_deregister,         write_imm, send, poll, get_wait_fd, arm, describe, write_imm_v, counters,
    };
};

/**
 * The body of a transport module's afmesh_module_query: binds the host
 * services, checks the ABI and fills `out` with `name`, `version`,
 * Context's operation table and the settings the module reads besides the
 * core's (ABI 1.4; static storage, none by default).
 */
template <class Context>
int answer_query(uint32_t host_abi_major, const afmesh_host_services *host, afmesh_module_desc *out, const char *name,
                 const char *version, std::span<const afmesh_module_setting> settings = {}) {
    if (host) module::bind_host(host, name);
    if (host_abi_major != AFMESH_HAL_ABI_MAJOR)
        return host_error(AFMESH_HAL_UNSUPPORTED_VERSION, "the %s module implements ABI %d.x, the host speaks %u.x",
                          name, AFMESH_HAL_ABI_MAJOR, host_abi_major);
    if (!out || out->struct_size < AFMESH_MODULE_DESC_SIZE_1_0)
        return host_error(AFMESH_HAL_INVALID_ARGUMENT, "module descriptor smaller than ABI 1.0's");
    return afmesh_module_describe_settings(host_abi_major, out, AFMESH_MODULE_TRANSPORT, name, version,
                                           NetOps<Context>::table(), settings.data(),
                                           static_cast<uint32_t>(settings.size()));
}

/** The caller's event array for one poll() call, filled front to back. */
class EventSink {
public:
    EventSink(afmesh_net_event *events, int capacity) : events_(events), capacity_(capacity) {}

    bool full() const { return count_ >= capacity_; }
    /** Events that still fit. */
    int room() const { return capacity_ - count_; }
    int count() const { return count_; }

    /** The next event, cleared and typed. Requires !full(). */
    afmesh_net_event &add(afmesh_net_event_type type, afmesh_net_conn *conn) {
        afmesh_net_event &event = events_[count_++];
        event = afmesh_net_event{};
        event.type = type;
        event.conn = conn;
        return event;
    }

private:
    afmesh_net_event *const events_;
    const int capacity_;
    int count_ = 0;
};

}  // namespace afmesh::net_module
