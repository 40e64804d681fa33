// SPDX-License-Identifier: Apache-2.0
// Device HAL conformance: every device module found on the search path must
// behave as hal/afmesh/hal/device.h documents. A module whose init() reports
// NOT_PRESENT (no driver or device here) is skipped with its reason.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <numeric>
#include <vector>

#include "log.h"
#include "module_params.h"

namespace afmesh {
namespace {

class DeviceConformance : public ::testing::TestWithParam<ModuleRecord> {
protected:
    void SetUp() override {
        ModuleRecord record = GetParam();
        Status s = load_module(record, &module_);
        if (s.code() == Code::kNotPresent) GTEST_SKIP() << "not present on this host: " << record.reason;
        ASSERT_TRUE(s) << s.to_string();
        ops_ = &module_->device();
        ctx_ = module_->ctx();
    }

    // Allocates and registers the pointer for release at teardown.
    void *alloc(uint32_t where, size_t bytes) {
        void *p = nullptr;
        EXPECT_EQ(ops_->mem_alloc(ctx_, 0, where, bytes, &p), AFMESH_HAL_OK) << take_module_error();
        if (p) allocations_.push_back({where, p});
        return p;
    }

    void TearDown() override {
        for (auto [where, p] : allocations_) EXPECT_EQ(ops_->mem_free(ctx_, where, p), AFMESH_HAL_OK);
    }

    std::unique_ptr<Module> module_;
    const afmesh_device_ops *ops_ = nullptr;
    void *ctx_ = nullptr;
    std::vector<std::pair<uint32_t, void *>> allocations_;
};

std::vector<uint8_t> pattern(size_t bytes, uint8_t seed) {
    std::vector<uint8_t> v(bytes);
    for (size_t i = 0; i < bytes; ++i) v[i] = static_cast<uint8_t>(i * 131 + seed);
    return v;
}

TEST_P(DeviceConformance, DescribesItsDevices) {
    int count = 0;
    ASSERT_EQ(ops_->device_count(ctx_, &count), AFMESH_HAL_OK);
    ASSERT_GE(count, 1);
    afmesh_dev_info info{};
    info.struct_size = sizeof info;
    ASSERT_EQ(ops_->device_info(ctx_, 0, &info), AFMESH_HAL_OK);
    EXPECT_GT(strnlen(info.name, sizeof info.name), 0u);
    EXPECT_LT(strnlen(info.name, sizeof info.name), sizeof info.name) << "name must be NUL-terminated";
    EXPECT_GT(info.total_memory, 0u);
    EXPECT_EQ(ops_->device_info(ctx_, count, &info), AFMESH_HAL_INVALID_ARGUMENT);
    EXPECT_EQ(ops_->device_info(ctx_, -1, &info), AFMESH_HAL_INVALID_ARGUMENT);
}

TEST_P(DeviceConformance, SetDeviceChecksTheIndex) {
    int count = 0;
    ASSERT_EQ(ops_->device_count(ctx_, &count), AFMESH_HAL_OK);
    EXPECT_EQ(ops_->set_device(ctx_, 0), AFMESH_HAL_OK);
    EXPECT_EQ(ops_->set_device(ctx_, count), AFMESH_HAL_INVALID_ARGUMENT);
    EXPECT_FALSE(take_module_error().empty()) << "an error must come with a reason";
}

TEST_P(DeviceConformance, AllocatesAlignedMemoryOfBothPlacements) {
    for (uint32_t where : {AFMESH_ALLOC_DEVICE, AFMESH_ALLOC_HOST_PINNED}) {
        for (size_t bytes : {size_t{1}, size_t{4096}, size_t{1} << 20}) {
            void *p = alloc(where, bytes);
            ASSERT_NE(p, nullptr);
            EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 256, 0u) << "where=" << where << " bytes=" << bytes;
        }
    }
}

TEST_P(DeviceConformance, RejectsBadAllocations) {
    void *p = nullptr;
    EXPECT_EQ(ops_->mem_alloc(ctx_, 0, AFMESH_ALLOC_DEVICE, 0, &p), AFMESH_HAL_INVALID_ARGUMENT);
    EXPECT_EQ(ops_->mem_alloc(ctx_, 1 << 20, AFMESH_ALLOC_DEVICE, 64, &p), AFMESH_HAL_INVALID_ARGUMENT);
    EXPECT_EQ(p, nullptr);
    EXPECT_EQ(ops_->mem_free(ctx_, AFMESH_ALLOC_DEVICE, nullptr), AFMESH_HAL_OK);
}

TEST_P(DeviceConformance, PointerQueryReportsTheModulesKind) {
    void *dev = alloc(AFMESH_ALLOC_DEVICE, 4096);
    ASSERT_NE(dev, nullptr);
    uint32_t kind = 99;
    int device = -2;
    ASSERT_EQ(ops_->pointer_query(ctx_, dev, &kind, &device), AFMESH_HAL_OK);
    EXPECT_EQ(kind, ops_->mem_kind);
    if (ops_->mem_kind != AFMESH_MEM_HOST) {
        EXPECT_EQ(device, 0);
    }

    std::vector<uint8_t> host(64);
    ASSERT_EQ(ops_->pointer_query(ctx_, host.data(), &kind, &device), AFMESH_HAL_OK);
    EXPECT_EQ(kind, static_cast<uint32_t>(AFMESH_MEM_HOST));
    EXPECT_EQ(device, -1);
}

TEST_P(DeviceConformance, SyncCopiesRoundTripEveryByte) {
    const size_t bytes = (size_t{1} << 20) + 17;  // not a multiple of any page or vector size
    std::vector<uint8_t> src = pattern(bytes, 7), back(bytes, 0);
    void *dev_a = alloc(AFMESH_ALLOC_DEVICE, bytes);
    void *dev_b = alloc(AFMESH_ALLOC_DEVICE, bytes);
    void *pinned = alloc(AFMESH_ALLOC_HOST_PINNED, bytes);
    ASSERT_TRUE(dev_a && dev_b && pinned);
    ASSERT_EQ(ops_->memcpy_sync(ctx_, dev_a, src.data(), bytes), AFMESH_HAL_OK);  // host -> device
    ASSERT_EQ(ops_->memcpy_sync(ctx_, dev_b, dev_a, bytes), AFMESH_HAL_OK);       // device -> device
    ASSERT_EQ(ops_->memcpy_sync(ctx_, pinned, dev_b, bytes), AFMESH_HAL_OK);      // device -> pinned
    ASSERT_EQ(ops_->memcpy_sync(ctx_, back.data(), pinned, bytes), AFMESH_HAL_OK);
    EXPECT_EQ(back, src);
}

TEST_P(DeviceConformance, AsyncCopyCompletesThroughEventAndStream) {
    const size_t bytes = 256 * 1024;
    std::vector<uint8_t> src = pattern(bytes, 3), back(bytes, 0);
    void *dev = alloc(AFMESH_ALLOC_DEVICE, bytes);
    void *pinned = alloc(AFMESH_ALLOC_HOST_PINNED, bytes);
    ASSERT_TRUE(dev && pinned);
    memcpy(pinned, src.data(), bytes);

    void *stream = nullptr, *event = nullptr;
    ASSERT_EQ(ops_->stream_create(ctx_, 0, &stream), AFMESH_HAL_OK);
    ASSERT_EQ(ops_->event_create(ctx_, 0, &event), AFMESH_HAL_OK);
    ASSERT_EQ(ops_->memcpy_async(ctx_, dev, pinned, bytes, stream), AFMESH_HAL_OK);
    ASSERT_EQ(ops_->event_record(ctx_, event, stream), AFMESH_HAL_OK);
    ASSERT_EQ(ops_->event_sync(ctx_, event), AFMESH_HAL_OK);
    EXPECT_EQ(ops_->event_query(ctx_, event), AFMESH_HAL_OK) << "a synchronised event must read as complete";
    ASSERT_EQ(ops_->memcpy_async(ctx_, back.data(), dev, bytes, stream), AFMESH_HAL_OK);
    ASSERT_EQ(ops_->stream_sync(ctx_, stream), AFMESH_HAL_OK);
    EXPECT_EQ(back, src);
    EXPECT_EQ(ops_->event_destroy(ctx_, event), AFMESH_HAL_OK);
    EXPECT_EQ(ops_->stream_destroy(ctx_, stream), AFMESH_HAL_OK);
}

TEST_P(DeviceConformance, StreamWaitsForAHostFlag) {
    if (!ops_->flag_create) GTEST_SKIP() << "module has no GPU-waits-on-host flags";
    ASSERT_TRUE(ops_->flag_destroy && ops_->flag_write && ops_->stream_wait_flag) << "flags are all-or-nothing";
    void *stream = nullptr, *flag = nullptr;
    ASSERT_EQ(ops_->stream_create(ctx_, 0, &stream), AFMESH_HAL_OK);
    ASSERT_EQ(ops_->flag_create(ctx_, 0, &flag), AFMESH_HAL_OK);
    // Written before the wait is enqueued: the stream must not block.
    ASSERT_EQ(ops_->flag_write(ctx_, flag, 5), AFMESH_HAL_OK);
    ASSERT_EQ(ops_->stream_wait_flag(ctx_, stream, flag, 5), AFMESH_HAL_OK);
    ASSERT_EQ(ops_->stream_wait_flag(ctx_, stream, flag, 3), AFMESH_HAL_OK);
    ASSERT_EQ(ops_->stream_sync(ctx_, stream), AFMESH_HAL_OK);
    EXPECT_EQ(ops_->flag_destroy(ctx_, flag), AFMESH_HAL_OK);
    EXPECT_EQ(ops_->stream_destroy(ctx_, stream), AFMESH_HAL_OK);
}

INSTANTIATE_TEST_SUITE_P(Modules, DeviceConformance, ::testing::ValuesIn(modules_of_kind(AFMESH_MODULE_DEVICE)),
                         module_param_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(DeviceConformance);

}  // namespace
}  // namespace afmesh
