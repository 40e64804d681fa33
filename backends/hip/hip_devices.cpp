// SPDX-License-Identifier: Apache-2.0
// Probing the HIP runtime (init/fini) and describing and selecting devices.
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>
#include <string>

#include "hip_internal.h"

namespace afmesh::hip {
namespace {

// ROCm's runtime finds GPUs through the AMD kernel driver (KFD: /dev/kfd and
// its topology under /sys/class/kfd) and answers hipErrorNoDevice without
// it. Loading the runtime to hear that costs tens of milliseconds per
// process (hip_runtime_table.h), so a host without the driver is answered
// from sysfs. AFMESH_SYSFS_ROOT stands for "/", as for the PCI topology.
int require_kfd_driver() {
    const char *sysfs_root = module::host_config("AFMESH_SYSFS_ROOT");
    std::string kfd = sysfs_root ? sysfs_root : "/";
    if (kfd.back() != '/') kfd += '/';
    kfd += "sys/class/kfd";
    struct stat st;
    if (stat(kfd.c_str(), &st) == 0) return AFMESH_HAL_OK;
    if (errno == ENOENT) return host_error(AFMESH_HAL_NOT_PRESENT, "no AMD GPU driver: %s is missing", kfd.c_str());
    return host_error(AFMESH_HAL_NOT_PRESENT, "no AMD GPU driver: %s: %s", kfd.c_str(), strerror(errno));
}

}  // namespace

int init(void **ctx) {
    if (!ctx) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "init: null ctx");
    *ctx = nullptr;
    if (int rc = require_kfd_driver()) return rc;
    if (int rc = load_runtime()) return rc;
    int count = 0;
    const hipError_t err = runtime().hipGetDeviceCount(&count);
    switch (err) {
    case hipSuccess:
        break;
    case hipErrorNoDevice:  // no /dev/kfd, no GPU agent, or HIP_VISIBLE_DEVICES hides them all
        (void)runtime().hipGetLastError();
        return host_error(AFMESH_HAL_NOT_PRESENT, "no AMD GPU: %s", runtime().hipGetErrorName(err));
    case hipErrorInsufficientDriver:
        (void)runtime().hipGetLastError();
        return host_error(AFMESH_HAL_NOT_PRESENT, "no usable AMD driver: %s", runtime().hipGetErrorName(err));
    default:
        return fail_hip(err, "hipGetDeviceCount");
    }
    if (count == 0) return host_error(AFMESH_HAL_NOT_PRESENT, "no AMD GPU: hipGetDeviceCount found 0 devices");

    auto *c = new (std::nothrow) Context;
    if (c) c->devices.reset(new (std::nothrow) DeviceState[static_cast<size_t>(count)]);
    if (!c || !c->devices) {
        delete c;
        return host_error(AFMESH_HAL_NO_MEMORY, "init: out of memory");
    }
    c->device_count = count;
    for (int device = 0; device < count; ++device) {
        int can_wait = 0;
        if (runtime().hipDeviceGetAttribute(&can_wait, hipDeviceAttributeCanUseStreamWaitValue, device) != hipSuccess) {
            (void)runtime().hipGetLastError();
            can_wait = 0;
        }
        c->devices[device].can_wait_on_memory = can_wait != 0;
        if (!can_wait)
            module::host_log(
                AFMESH_LOG_INFO,
                "device %d cannot wait on memory (hipStreamWaitValue): its flag waits run as host callbacks", device);
    }
    module::host_log(AFMESH_LOG_DEBUG, "%d device(s)", count);
    *ctx = c;
    return AFMESH_HAL_OK;
}

void fini(void *ctx) {
    Context *c = static_cast<Context *>(ctx);
    if (!c) return;
    for (int device = 0; device < c->device_count; ++device) {
        if (!c->devices[device].copy_stream) continue;
        ScopedDevice scope;
        if (scope.enter(device) == hipSuccess) (void)runtime().hipStreamDestroy(c->devices[device].copy_stream);
    }
    (void)runtime().hipGetLastError();
    delete c;
}

int device_count(void *ctx, int *count) {
    if (!count) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "device_count: null output");
    *count = context(ctx).device_count;
    return AFMESH_HAL_OK;
}

int device_info(void *ctx, int device, afmesh_dev_info *info) {
    if (int rc = module::check_device(device, context(ctx).device_count, "device_info")) return rc;
    if (!info || info->struct_size < sizeof(afmesh_dev_info))
        return host_error(AFMESH_HAL_INVALID_ARGUMENT, "device_info: null info or struct_size too small");
    hipDeviceProp_t prop{};
    if (hipError_t err = runtime().hipGetDeviceProperties(&prop, device))
        return fail_hip(err, "hipGetDeviceProperties(%d)", device);
    module::copy_truncated(info->name, sizeof info->name, prop.name);
    snprintf(info->bus_id, sizeof info->bus_id, "%04x:%02x:%02x.0", static_cast<unsigned>(prop.pciDomainID),
             static_cast<unsigned>(prop.pciBusID), static_cast<unsigned>(prop.pciDeviceID));
    info->total_memory = prop.totalGlobalMem;
    return AFMESH_HAL_OK;
}

int set_device(void *ctx, int device) {
    if (int rc = module::check_device(device, context(ctx).device_count, "set_device")) return rc;
    if (hipError_t err = runtime().hipSetDevice(device)) return fail_hip(err, "hipSetDevice(%d)", device);
    return AFMESH_HAL_OK;
}

}  // namespace afmesh::hip
