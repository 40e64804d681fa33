// SPDX-License-Identifier: Apache-2.0
// Memory registration under every mode a provider may require:
//  FI_MR_LOCAL      local buffers (write sources, message buffers) are
//                   registered too and their descriptor passed with each op;
//  FI_MR_VIRT_ADDR  peers address a region by virtual address, so the rkey
//                   carries the base address and writes add the offset to it;
//  FI_MR_PROV_KEY   the provider picks the key; otherwise the module asks for
//                   a unique one per context;
//  FI_MR_ALLOCATED  only allocated, backed memory may be registered: every
//                   buffer registered here is caller-allocated;
//  FI_MR_HMEM       device memory must be registered, with its FI_HMEM_*
//                   interface given through fi_mr_regattr.
// FI_MR_ENDPOINT (a region bound to one endpoint) is not requested: a
// context may open an endpoint per connection (context.h), and a region
// serves them all.
#pragma once

#include <rdma/fi_domain.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <unordered_set>

#include "afmesh/hal/transport.h"
#include "errors.h"
#include "fabric.h"
#include "thread_annotations.h"

namespace afmesh::fabric {

/** One registration; its address is the afmesh_net_mr handle. */
struct Registration {
    fid_mr *mr = nullptr;
    const uint8_t *base = nullptr;
    size_t bytes = 0;
    uint32_t access = 0;  // AFMESH_NET_ACCESS_*
    void *desc = nullptr;

    bool contains(const void *p, size_t n) const {
        const auto *q = static_cast<const uint8_t *>(p);
        return q >= base && n <= bytes && static_cast<size_t>(q - base) <= bytes - n;
    }
};

class Registrar {
public:
    explicit Registrar(const Fabric &fabric) : fabric_(fabric) {}
    ~Registrar();
    Registrar(const Registrar &) = delete;
    Registrar &operator=(const Registrar &) = delete;

    /**
     * Registers [ptr, ptr+bytes) of `kind` (host or an FI_HMEM device kind)
     * with libfabric access flags `fi_access`. Fills `mr`; on failure says why.
     */
    int register_raw(void *ptr, size_t bytes, uint32_t kind, int device, uint64_t fi_access, fid_mr **mr,
                     Reason *why);

    /** mem_register(): a user region, remembered for validation; fills `rkey`. */
    int add(void *ptr, size_t bytes, const afmesh_net_mem &mem, uint32_t access, Registration **out,
            afmesh_net_rkey *rkey, Reason *why);
    /** mem_deregister(); false when `r` is not a live registration. */
    bool remove(Registration *r);
    /**
     * The descriptor of a live registration that covers [p, p+n) with
     * `access`, for a write source. Returns OK, INVALID_ARGUMENT or ACCESS with why.
     */
    int source_desc(const Registration *r, const void *p, size_t n, void **desc, Reason *why);

private:
    const Fabric &fabric_;
    Mutex mu_;
    std::unordered_set<Registration *> live_ AFMESH_GUARDED_BY(mu_);
};

}  // namespace afmesh::fabric
