// SPDX-License-Identifier: Apache-2.0
// Device memory through libfabric's FI_HMEM: which device runtimes this
// host can load (libfabric dlopens the same libraries), and the FI_HMEM_*
// interface for each afmesh memory kind.
#pragma once

#include <rdma/fi_domain.h>

#include <cstdint>
#include <string>

namespace afmesh::fabric {

class HmemProbe {
public:
    /** Tries to load each device runtime libfabric's FI_HMEM support needs. */
    static HmemProbe run();

    /** Whether any device runtime is present (only then is FI_HMEM worth asking for). */
    bool any() const { return kinds_ != 0; }
    /** AFMESH_MEM_BIT()s of the device kinds whose runtime loaded. */
    uint32_t device_kinds() const { return kinds_; }
    /** "cuda (libcuda.so.1) missing, ..." for describe(). */
    const std::string &summary() const { return summary_; }

private:
    uint32_t kinds_ = 0;
    std::string summary_;
};

/** The FI_HMEM interface for an afmesh device memory kind; false for host or unknown kinds. */
bool hmem_iface_of(uint32_t kind, fi_hmem_iface *iface);

}  // namespace afmesh::fabric
