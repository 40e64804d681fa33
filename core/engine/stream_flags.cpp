// SPDX-License-Identifier: Apache-2.0
#include "stream_flags.h"

#include "log.h"

namespace afmesh {

StreamFlags::StreamFlags(const Module &device, int device_id, size_t slots)
    : device_(device), device_id_(device_id), flags_(slots, nullptr) {}

StreamFlags::~StreamFlags() {
    for (void *flag : flags_)
        if (flag) device_.device().flag_destroy(device_.ctx(), flag);
}

Status StreamFlags::wait(uint16_t slot, void *stream, uint32_t value) {
    const afmesh_device_ops &dev = device_.device();
    if (!dev.flag_create || !dev.flag_destroy || !dev.flag_write || !dev.stream_wait_flag)
        return {Code::kNotSupported, "device module '" + device_.name() +
                                         "' cannot make a stream wait for the host (it has no flags); "
                                         "use afmesh_wait or afmesh_test"};
    take_module_error();
    if (!flags_[slot] && dev.flag_create(device_.ctx(), device_id_, &flags_[slot]) != AFMESH_HAL_OK) {
        flags_[slot] = nullptr;
        return {Code::kError, "cannot create a device flag: " + take_module_error()};
    }
    if (int rc = dev.stream_wait_flag(device_.ctx(), stream, flags_[slot], value); rc != AFMESH_HAL_OK)
        return {static_cast<Code>(rc), "cannot make the stream wait: " + take_module_error()};
    return Status::ok();
}

void StreamFlags::release(uint16_t slot, uint32_t value) {
    if (device_.device().flag_write(device_.ctx(), flags_[slot], value) != AFMESH_HAL_OK)
        AFMESH_LOG(AFMESH_LOG_ERROR, "cannot release a stream waiting for push-pull slot %u: %s", slot,
                   take_module_error().c_str());
}

}  // namespace afmesh
