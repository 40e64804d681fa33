// SPDX-License-Identifier: Apache-2.0
// Probing Level Zero (init/fini): the first driver with GPU devices, one
// context over all of them, and per device a default and a synchronous
// command list. Also describing and selecting devices.
#include <cstdio>

#include "ze_internal.h"

namespace afmesh::ze {
namespace {

thread_local int t_current_device = 0;

std::vector<ze_device_handle_t> gpu_devices(ze_driver_handle_t driver) {
    uint32_t count = 0;
    if (zeDeviceGet(driver, &count, nullptr) != ZE_RESULT_SUCCESS || count == 0) return {};
    std::vector<ze_device_handle_t> all(count);
    if (zeDeviceGet(driver, &count, all.data()) != ZE_RESULT_SUCCESS) return {};
    all.resize(count);
    std::vector<ze_device_handle_t> gpus;
    for (ze_device_handle_t device : all) {
        ze_device_properties_t props{};
        props.stype = ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES;
        // Level Zero also drives NPUs and FPGAs; only GPUs do what this HAL needs.
        if (zeDeviceGetProperties(device, &props) == ZE_RESULT_SUCCESS && props.type == ZE_DEVICE_TYPE_GPU)
            gpus.push_back(device);
    }
    return gpus;
}

// The first command queue group that runs compute (and therefore copies):
// user kernels are appended to the same lists as our copies and waits.
ze_result_t compute_ordinal(ze_device_handle_t device, uint32_t *ordinal) {
    uint32_t count = 0;
    if (ze_result_t res = zeDeviceGetCommandQueueGroupProperties(device, &count, nullptr)) return res;
    std::vector<ze_command_queue_group_properties_t> groups(count);
    for (auto &group : groups) group.stype = ZE_STRUCTURE_TYPE_COMMAND_QUEUE_GROUP_PROPERTIES;
    if (ze_result_t res = zeDeviceGetCommandQueueGroupProperties(device, &count, groups.data())) return res;
    for (uint32_t i = 0; i < count; ++i) {
        if (groups[i].flags & ZE_COMMAND_QUEUE_GROUP_PROPERTY_FLAG_COMPUTE) {
            *ordinal = i;
            return ZE_RESULT_SUCCESS;
        }
    }
    return ZE_RESULT_ERROR_UNSUPPORTED_FEATURE;
}

bool can_export_dmabuf(ze_device_handle_t device) {
    ze_device_external_memory_properties_t props{};
    props.stype = ZE_STRUCTURE_TYPE_DEVICE_EXTERNAL_MEMORY_PROPERTIES;
    return zeDeviceGetExternalMemoryProperties(device, &props) == ZE_RESULT_SUCCESS &&
           (props.memoryAllocationExportTypes & ZE_EXTERNAL_MEMORY_TYPE_FLAG_DMA_BUF);
}

int set_up_device(Context &c, ze_device_handle_t handle) {
    auto d = std::make_unique<DeviceState>();
    d->handle = handle;
    if (ze_result_t res = compute_ordinal(handle, &d->compute_ordinal))
        return fail_ze(res, "finding a compute queue group on device %d", c.device_count());
    if (ze_result_t res = create_immediate_list(c, *d, ZE_COMMAND_QUEUE_MODE_ASYNCHRONOUS, &d->default_list))
        return fail_ze(res, "zeCommandListCreateImmediate (default list)");
    if (ze_result_t res = create_immediate_list(c, *d, ZE_COMMAND_QUEUE_MODE_SYNCHRONOUS, &d->sync_list)) {
        zeCommandListDestroy(d->default_list);
        return fail_ze(res, "zeCommandListCreateImmediate (synchronous list)");
    }
    d->dmabuf_export = can_export_dmabuf(handle);
    c.devices.push_back(std::move(d));
    return AFMESH_HAL_OK;
}

}  // namespace

Context::~Context() {
    events.reset();  // events before the context that owns their pools
    for (auto &d : devices) {
        if (d->sync_list) zeCommandListDestroy(d->sync_list);
        if (d->default_list) zeCommandListDestroy(d->default_list);
    }
    if (context) zeContextDestroy(context);
}

int Context::index_of(ze_device_handle_t handle) const {
    for (size_t i = 0; i < devices.size(); ++i)
        if (devices[i]->handle == handle) return static_cast<int>(i);
    return -1;
}

ze_command_list_handle_t Context::list_for(void *stream) const {
    if (stream) return static_cast<ze_command_list_handle_t>(stream);
    const int device = current_device();
    return devices[module::valid_index(device, device_count()) ? device : 0]->default_list;
}

int current_device() { return t_current_device; }

int init(void **ctx) {
    if (!ctx) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "init: null ctx");
    *ctx = nullptr;
    // Flags 0 (every driver type), not ZE_INIT_FLAG_GPU_ONLY: loaders before
    // 1.10 honour only the first zeInit of a process, and a library must not
    // narrow the drivers the application itself may want later.
    ze_result_t res = zeInit(0);
    if (res == ZE_RESULT_ERROR_UNINITIALIZED)  // the loader found no driver
        return host_error(AFMESH_HAL_NOT_PRESENT, "no Level Zero driver: zeInit: %s", result_name(res));
    if (res != ZE_RESULT_SUCCESS) return fail_ze(res, "zeInit");

    uint32_t driver_count = 0;
    res = zeDriverGet(&driver_count, nullptr);
    if (res == ZE_RESULT_ERROR_UNINITIALIZED || (res == ZE_RESULT_SUCCESS && driver_count == 0))
        return host_error(AFMESH_HAL_NOT_PRESENT, "no Level Zero driver: zeDriverGet found none (%s)",
                          result_name(res));
    if (res != ZE_RESULT_SUCCESS) return fail_ze(res, "zeDriverGet");
    std::vector<ze_driver_handle_t> drivers(driver_count);
    if ((res = zeDriverGet(&driver_count, drivers.data()))) return fail_ze(res, "zeDriverGet");
    drivers.resize(driver_count);

    // One driver and one context: memory, events and lists of one context
    // work across its devices; several GPU drivers in one process do not occur.
    auto c = std::make_unique<Context>();
    std::vector<ze_device_handle_t> gpus;
    for (ze_driver_handle_t driver : drivers) {
        gpus = gpu_devices(driver);
        if (!gpus.empty()) {
            c->driver = driver;
            break;
        }
    }
    if (gpus.empty())
        return host_error(AFMESH_HAL_NOT_PRESENT, "no Level Zero GPU: %u driver(s), none with a GPU device",
                          driver_count);

    const ze_context_desc_t context_desc = {ZE_STRUCTURE_TYPE_CONTEXT_DESC, nullptr, 0};
    if ((res = zeContextCreate(c->driver, &context_desc, &c->context))) return fail_ze(res, "zeContextCreate");
    for (ze_device_handle_t gpu : gpus)
        if (int rc = set_up_device(*c, gpu)) return rc;
    c->events = std::make_unique<EventSlab>(c->context);
    module::host_log(AFMESH_LOG_DEBUG, "%d GPU device(s)", c->device_count());
    *ctx = c.release();
    return AFMESH_HAL_OK;
}

void fini(void *ctx) { delete static_cast<Context *>(ctx); }

int device_count(void *ctx, int *count) {
    if (!count) return host_error(AFMESH_HAL_INVALID_ARGUMENT, "device_count: null output");
    *count = context(ctx).device_count();
    return AFMESH_HAL_OK;
}

int device_info(void *ctx, int device, afmesh_dev_info *info) {
    Context &c = context(ctx);
    if (int rc = module::check_device(device, c.device_count(), "device_info")) return rc;
    if (!info || info->struct_size < sizeof(afmesh_dev_info))
        return host_error(AFMESH_HAL_INVALID_ARGUMENT, "device_info: null info or struct_size too small");
    ze_device_handle_t handle = c.devices[device]->handle;

    ze_device_properties_t props{};
    props.stype = ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES;
    if (ze_result_t res = zeDeviceGetProperties(handle, &props)) return fail_ze(res, "zeDeviceGetProperties");
    module::copy_truncated(info->name, sizeof info->name, props.name);

    // The PCI address is an extension; without it bus_id stays empty, as the HAL allows.
    ze_pci_ext_properties_t pci{};
    pci.stype = ZE_STRUCTURE_TYPE_PCI_EXT_PROPERTIES;
    info->bus_id[0] = '\0';
    if (zeDevicePciGetPropertiesExt(handle, &pci) == ZE_RESULT_SUCCESS)
        snprintf(info->bus_id, sizeof info->bus_id, "%04x:%02x:%02x.%x", pci.address.domain, pci.address.bus,
                 pci.address.device, pci.address.function);

    uint32_t count = 0;
    if (ze_result_t res = zeDeviceGetMemoryProperties(handle, &count, nullptr))
        return fail_ze(res, "zeDeviceGetMemoryProperties");
    std::vector<ze_device_memory_properties_t> memories(count);
    for (auto &m : memories) m.stype = ZE_STRUCTURE_TYPE_DEVICE_MEMORY_PROPERTIES;
    if (ze_result_t res = zeDeviceGetMemoryProperties(handle, &count, memories.data()))
        return fail_ze(res, "zeDeviceGetMemoryProperties");
    info->total_memory = 0;
    for (uint32_t i = 0; i < count; ++i) info->total_memory += memories[i].totalSize;
    return AFMESH_HAL_OK;
}

// Level Zero has no current device; the module keeps one per thread so a NULL
// stream means "the default list of the device this thread selected".
int set_device(void *ctx, int device) {
    if (int rc = module::check_device(device, context(ctx).device_count(), "set_device")) return rc;
    t_current_device = device;
    return AFMESH_HAL_OK;
}

}  // namespace afmesh::ze
