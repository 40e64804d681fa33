// SPDX-License-Identifier: Apache-2.0
#include "hmem.h"

#include <dlfcn.h>

#include "afmesh/hal/module.h"
#include "mem_kind_names.h"

namespace afmesh::fabric {
namespace {

struct DeviceRuntime {
    uint32_t kind;
    fi_hmem_iface iface;
    const char *library;  // what libfabric's FI_HMEM code for this iface loads
};

constexpr DeviceRuntime kRuntimes[] = {
    {AFMESH_MEM_CUDA, FI_HMEM_CUDA, "libcuda.so.1"},
    {AFMESH_MEM_HIP, FI_HMEM_ROCR, "libhsa-runtime64.so.1"},
    {AFMESH_MEM_ZE, FI_HMEM_ZE, "libze_loader.so.1"},
};

}  // namespace

HmemProbe HmemProbe::run() {
    HmemProbe probe;
    for (const DeviceRuntime &r : kRuntimes) {
        void *handle = dlopen(r.library, RTLD_LAZY | RTLD_LOCAL);
        if (handle) {
            dlclose(handle);
            probe.kinds_ |= AFMESH_MEM_BIT(r.kind);
        }
        if (!probe.summary_.empty()) probe.summary_ += ", ";
        probe.summary_ += std::string(mem_kind_name(r.kind)) + " (" + r.library + (handle ? " loads)" : " missing)");
    }
    return probe;
}

bool hmem_iface_of(uint32_t kind, fi_hmem_iface *iface) {
    for (const DeviceRuntime &r : kRuntimes)
        if (r.kind == kind) {
            *iface = r.iface;
            return true;
        }
    return false;
}

}  // namespace afmesh::fabric
