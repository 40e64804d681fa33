// SPDX-License-Identifier: Apache-2.0
#include "memory_registry.h"

#include <algorithm>

#include "log.h"

namespace afmesh {

MemoryRegistry::~MemoryRegistry() {
    for (auto &[base, reg] : by_base_)
        if (reg->mr) transport_.net().mem_deregister(transport_.ctx(), reg->mr);
}

const Registration *MemoryRegistry::find_locked(uintptr_t p, uint64_t n, uint32_t kind) const {
    // Registrations may overlap (a cached one inside a later user one): walk
    // back from the last one starting at or before p.
    for (auto it = by_base_.upper_bound(p); it != by_base_.begin();) {
        --it;
        const Registration &r = *it->second;
        if (r.kind == kind && r.covers(p, n)) return &r;
    }
    return nullptr;
}

Status MemoryRegistry::add_locked(void *ptr, uint64_t bytes, uint32_t kind, int device, bool cached,
                                  const Registration **out) {
    if (!ptr || bytes == 0) return {Code::kInvalidArgument, "cannot register a null pointer or zero bytes"};
    const afmesh_net_caps &caps = transport_.net_caps();
    const bool staged = kind < AFMESH_MEM_KIND_COUNT && (staged_kinds_ & AFMESH_MEM_BIT(kind));
    if (kind >= AFMESH_MEM_KIND_COUNT || !(staged || (caps.mem_kinds & AFMESH_MEM_BIT(kind))))
        return {Code::kNotSupported, "transport '" + transport_.name() + "' cannot register memory of kind " +
                                         std::to_string(kind) + ", and the device module does not stage it"};
    auto reg = std::make_unique<Registration>();
    reg->base = reinterpret_cast<uintptr_t>(ptr);
    reg->bytes = bytes;
    reg->kind = kind;
    reg->device = kind == AFMESH_MEM_HOST ? -1 : device;
    reg->cached = cached;
    afmesh_net_mem mem{};
    mem.struct_size = sizeof mem;
    mem.kind = kind;
    mem.device = reg->device;
    mem.dmabuf_fd = -1;
    if (staged) {
        *out = reg.get();
        by_base_.emplace(reg->base, std::move(reg));
        return Status::ok();
    }
    take_module_error();
    int rc = transport_.net().mem_register(transport_.ctx(), ptr, bytes, &mem,
                                           AFMESH_NET_ACCESS_LOCAL | AFMESH_NET_ACCESS_REMOTE_WRITE, &reg->mr,
                                           &reg->rkey);
    if (rc != AFMESH_HAL_OK) return {static_cast<Code>(rc), "registering memory failed: " + take_module_error()};
    *out = reg.get();
    by_base_.emplace(reg->base, std::move(reg));
    return Status::ok();
}

Status MemoryRegistry::add(void *ptr, uint64_t bytes, uint32_t kind, int device, const Registration **out) {
    MutexLock lock(&mu_);
    return add_locked(ptr, bytes, kind, device, false, out);
}

Status MemoryRegistry::remove(const Registration *registration) {
    MutexLock lock(&mu_);
    auto [first, last] = by_base_.equal_range(registration ? registration->base : 0);
    for (auto it = first; it != last; ++it) {
        if (it->second.get() != registration) continue;
        if (it->second->mr) transport_.net().mem_deregister(transport_.ctx(), it->second->mr);
        std::replace(recent_.begin(), recent_.end(), registration, static_cast<const Registration *>(nullptr));
        by_base_.erase(it);
        removals_.fetch_add(1, std::memory_order_release);
        return Status::ok();
    }
    return {Code::kNotFound, "not a registration of this node"};
}

void MemoryRegistry::remember(const Registration *found) {
    std::copy_backward(recent_.begin(), recent_.end() - 1, recent_.end());
    recent_[0] = found;
}

Status MemoryRegistry::find_or_add(void *ptr, uint64_t bytes, uint32_t kind, int device, const Registration **out) {
    const auto p = reinterpret_cast<uintptr_t>(ptr);
    MutexLock lock(&mu_);
    for (const Registration *r : recent_) {
        if (r && r->kind == kind && r->covers(p, bytes)) {
            *out = r;
            return Status::ok();
        }
    }
    if (!(*out = find_locked(p, bytes, kind))) {
        AFMESH_LOG(AFMESH_LOG_INFO, "registering %p (%llu bytes) on the hot path; register buffers up front", ptr,
                   static_cast<unsigned long long>(bytes));
        if (Status s = add_locked(ptr, bytes, kind, device, true, out); !s) return s;
    }
    remember(*out);
    return Status::ok();
}

}  // namespace afmesh
