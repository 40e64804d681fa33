// SPDX-License-Identifier: Apache-2.0
// Driver API entry points, resolved at run time through the runtime
// (cudaGetDriverEntryPointByVersion, as NCCL's cudawrap does) so the module
// never links libcuda and one build serves old and new drivers.
#include "cuda_internal.h"

namespace afmesh::cuda {
namespace {

// Each symbol is requested at the CUDA version that introduced the ABI its
// PFN_*_v<version> typedef describes: older drivers that have that ABI still
// resolve it, and newer drivers keep returning that ABI rather than a later,
// differently shaped one.
template <class Fn>
Fn resolve(const char *symbol, unsigned int cuda_version) {
    void *fn = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    cudaError_t err = cudaGetDriverEntryPointByVersion(symbol, &fn, cuda_version, cudaEnableDefault, &found);
    if (err != cudaSuccess || found != cudaDriverEntryPointSuccess || !fn) {
        (void)cudaGetLastError();
        module::host_log(AFMESH_LOG_INFO, "the NVIDIA driver has no %s (ABI of CUDA %u.%u): %s", symbol,
                         cuda_version / 1000, cuda_version % 1000 / 10,
                         err != cudaSuccess ? cudaGetErrorName(err)
                         : found == cudaDriverEntryPointVersionNotSufficent ? "driver too old"
                                                                            : "symbol not found");
        return nullptr;
    }
    return reinterpret_cast<Fn>(fn);
}

}  // namespace

DriverApi resolve_driver_api() {
    DriverApi api;
    api.get_error_name = resolve<PFN_cuGetErrorName_v6000>("cuGetErrorName", 6000);
    api.stream_wait_value32 = resolve<PFN_cuStreamWaitValue32_v11070>("cuStreamWaitValue32", 11070);
    api.get_handle_for_address_range =
        resolve<PFN_cuMemGetHandleForAddressRange_v11070>("cuMemGetHandleForAddressRange", 11070);
    return api;
}

}  // namespace afmesh::cuda
