// SPDX-License-Identifier: Apache-2.0
#include "registration.h"

#include <rdma/fi_errno.h>
#include <sys/random.h>
#include <sys/uio.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "hmem.h"
#include "libfabric_api.h"

namespace afmesh::fabric {
namespace {

// Collisions with a live key are retried; 64 in a row mean the key space is
// far too small for random keys, which no provider has.
constexpr int kKeyTries = 64;

// A random key of the provider's key size: keys are capabilities (any
// endpoint that knows our address and a key can write into the region,
// connected or not), so they must not be guessable the way 1, 2, 3... are.
bool random_key(size_t key_bytes, uint64_t *key) {
    if (getrandom(key, sizeof *key, 0) != static_cast<ssize_t>(sizeof *key)) return false;
    if (key_bytes > 0 && key_bytes < sizeof *key) *key &= (uint64_t{1} << (8 * key_bytes)) - 1;
    return true;
}

}  // namespace

Registrar::~Registrar() {
    for (Registration *r : live_) {
        fi_close(&r->mr->fid);
        delete r;
    }
}

int Registrar::register_raw(void *ptr, size_t bytes, uint32_t kind, int device, uint64_t fi_access, fid_mr **mr,
                            Reason *why) {
    iovec iov{ptr, bytes};
    fi_mr_attr attr{};
    attr.mr_iov = &iov;
    attr.iov_count = 1;
    attr.access = fi_access;
    attr.iface = FI_HMEM_SYSTEM;
    if (kind != AFMESH_MEM_HOST) {
        if (!hmem_iface_of(kind, &attr.iface)) {
            why->format("unknown memory kind %u", kind);
            return AFMESH_HAL_NOT_SUPPORTED;
        }
        attr.device.cuda = device;  // the union's members are all the device index
    }
    // Without FI_MR_PROV_KEY the application chooses keys.
    const bool choose_key = !(fabric_.mr_mode & FI_MR_PROV_KEY);
    int rc = -FI_ENOKEY;
    for (int tries = 0; rc == -FI_ENOKEY && tries < kKeyTries; ++tries) {
        if (choose_key && !random_key(fabric_.info->domain_attr->mr_key_size, &attr.requested_key)) {
            why->format("no random bytes for a registration key: getrandom: %s", strerror(errno));
            return AFMESH_HAL_ERROR;
        }
        rc = fi_mr_regattr(fabric_.domain, &attr, 0, mr);
        if (!choose_key) break;
    }
    if (rc != 0) {
        why->format("fi_mr_regattr(%zu bytes): %s", bytes, fabric_strerror(-rc));
        *mr = nullptr;
        return rc == -FI_ENOMEM ? AFMESH_HAL_NO_MEMORY : AFMESH_HAL_ERROR;
    }
    return AFMESH_HAL_OK;
}

int Registrar::add(void *ptr, size_t bytes, const afmesh_net_mem &mem, uint32_t access, Registration **out,
                   afmesh_net_rkey *rkey, Reason *why) {
    uint64_t fi_access = 0;
    if (access & AFMESH_NET_ACCESS_LOCAL) fi_access |= FI_WRITE | FI_SEND;
    if (access & AFMESH_NET_ACCESS_REMOTE_WRITE) fi_access |= FI_REMOTE_WRITE;
    auto region = std::make_unique<Registration>();
    if (int rc = register_raw(ptr, bytes, mem.kind, mem.device, fi_access, &region->mr, why); rc != AFMESH_HAL_OK)
        return rc;
    region->base = static_cast<const uint8_t *>(ptr);
    region->bytes = bytes;
    region->access = access;
    region->desc = fi_mr_desc(region->mr);
    rkey->key = fi_mr_key(region->mr);
    rkey->addr = (fabric_.mr_mode & FI_MR_VIRT_ADDR) ? reinterpret_cast<uintptr_t>(ptr) : 0;
    MutexLock lock(&mu_);
    live_.insert(region.get());
    *out = region.release();
    return AFMESH_HAL_OK;
}

bool Registrar::remove(Registration *r) {
    {
        MutexLock lock(&mu_);
        if (!live_.erase(r)) return false;
    }
    fi_close(&r->mr->fid);
    delete r;
    return true;
}

int Registrar::source_desc(const Registration *r, const void *p, size_t n, void **desc, Reason *why) {
    MutexLock lock(&mu_);
    if (!live_.count(const_cast<Registration *>(r))) {
        why->format("src_mr is not a live registration of this context");
        return AFMESH_HAL_INVALID_ARGUMENT;
    }
    if (!(r->access & AFMESH_NET_ACCESS_LOCAL)) {
        why->format("the source registration lacks AFMESH_NET_ACCESS_LOCAL");
        return AFMESH_HAL_ACCESS;
    }
    if (!r->contains(p, n)) {
        why->format("%zu bytes at %p are not inside the source registration", n, p);
        return AFMESH_HAL_ACCESS;
    }
    *desc = r->desc;
    return AFMESH_HAL_OK;
}

}  // namespace afmesh::fabric
