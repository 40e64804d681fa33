// SPDX-License-Identifier: Apache-2.0
// The HIP runtime's entry points, resolved at run time. The module compiles
// against the HIP headers but does not link libamdhip64: loading that loads
// the whole ROCm stack (libhsa-runtime64, libdrm, ...), some 14 ms per
// process with the files cached and several times that without, and the
// default device selection probes hip on every host, most of which have no
// AMD GPU. init() loads the runtime only once it sees the kernel driver
// (hip_devices.cpp).
#pragma once

#include <hip/hip_runtime_api.h>

namespace afmesh::hip {

// Every runtime function the module calls, with the symbol version the
// linker records for it against libamdhip64.so.5 (objdump -T), so a later
// library that versions a changed ABI under a new node still hands out the
// one these headers describe. A function added here needs its version too.
#define AFMESH_HIP_RUNTIME_FUNCTIONS(X)    \
    X(hipGetDeviceCount, "hip_4.2")        \
    X(hipGetDevice, "hip_4.2")             \
    X(hipSetDevice, "hip_4.2")             \
    X(hipGetDeviceProperties, "hip_4.2")   \
    X(hipDeviceGetAttribute, "hip_4.2")    \
    X(hipGetErrorName, "hip_4.2")          \
    X(hipGetErrorString, "hip_4.2")        \
    X(hipGetLastError, "hip_4.2")          \
    X(hipMalloc, "hip_4.2")                \
    X(hipExtMallocWithFlags, "hip_4.2")    \
    X(hipHostMalloc, "hip_4.2")            \
    X(hipFree, "hip_4.2")                  \
    X(hipHostFree, "hip_4.2")              \
    X(hipPointerGetAttributes, "hip_4.2")  \
    X(hipMemcpyAsync, "hip_4.2")           \
    X(hipStreamCreateWithFlags, "hip_4.2") \
    X(hipStreamDestroy, "hip_4.2")         \
    X(hipStreamSynchronize, "hip_4.2")     \
    X(hipStreamAddCallback, "hip_4.2")     \
    X(hipStreamWaitValue64, "hip_4.4")     \
    X(hipEventCreateWithFlags, "hip_4.2")  \
    X(hipEventDestroy, "hip_4.2")          \
    X(hipEventRecord, "hip_4.2")           \
    X(hipEventQuery, "hip_4.2")            \
    X(hipEventSynchronize, "hip_4.2")

/** The runtime functions, each member named and typed as the function it holds. */
struct HipRuntimeApi {
#define AFMESH_HIP_RUNTIME_MEMBER(name, version) decltype(&::name) name;
    AFMESH_HIP_RUNTIME_FUNCTIONS(AFMESH_HIP_RUNTIME_MEMBER)
#undef AFMESH_HIP_RUNTIME_MEMBER
};

/**
 * Loads the runtime once per process and resolves every function.
 * AFMESH_HAL_OK, or NOT_PRESENT when the library is not installed, or ERROR
 * when it lacks a function, each with the reason set through the host; later
 * calls give the same answer without trying again.
 */
int load_runtime();

/** The runtime's functions. Only after load_runtime() succeeded. */
const HipRuntimeApi &runtime();

}  // namespace afmesh::hip
