// SPDX-License-Identifier: Apache-2.0
// GPU-waits-on-host flags, end to end on every GPU module that finds a device:
// work enqueued behind stream_wait_flag must not run until the host writes a
// value that reaches the wait, and flag values only move forward.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "gpu_module_fixture.h"
#include "log.h"

namespace afmesh::testing {
namespace {

class GpuFlagWait : public GpuModuleTest {
protected:
    void SetUp() override {
        GpuModuleTest::SetUp();
        if (IsSkipped() || HasFatalFailure()) return;
        ASSERT_NE(ops_->flag_create, nullptr) << "GPU modules provide flags";
    }
};

TEST_P(GpuFlagWait, LaterWorkWaitsUntilTheHostWritesTheFlag) {
    const size_t bytes = 64 * 1024;
    void *src = nullptr, *dev = nullptr, *flag = nullptr, *stream = nullptr, *event = nullptr;
    ASSERT_EQ(ops_->mem_alloc(ctx_, 0, AFMESH_ALLOC_HOST_PINNED, bytes, &src), AFMESH_HAL_OK) << take_module_error();
    ASSERT_EQ(ops_->mem_alloc(ctx_, 0, AFMESH_ALLOC_DEVICE, bytes, &dev), AFMESH_HAL_OK) << take_module_error();
    ASSERT_EQ(ops_->flag_create(ctx_, 0, &flag), AFMESH_HAL_OK) << take_module_error();
    ASSERT_EQ(ops_->stream_create(ctx_, 0, &stream), AFMESH_HAL_OK) << take_module_error();
    ASSERT_EQ(ops_->event_create(ctx_, 0, &event), AFMESH_HAL_OK) << take_module_error();
    memset(src, 0x5a, bytes);

    ASSERT_EQ(ops_->flag_write(ctx_, flag, 1), AFMESH_HAL_OK);
    ASSERT_EQ(ops_->stream_wait_flag(ctx_, stream, flag, 3), AFMESH_HAL_OK) << take_module_error();
    ASSERT_EQ(ops_->memcpy_async(ctx_, dev, src, bytes, stream), AFMESH_HAL_OK) << take_module_error();
    ASSERT_EQ(ops_->event_record(ctx_, event, stream), AFMESH_HAL_OK) << take_module_error();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_EQ(ops_->event_query(ctx_, event), AFMESH_HAL_AGAIN)
        << "the stream ran past a wait for 3 with the flag at 1";
    ASSERT_EQ(ops_->flag_write(ctx_, flag, 2), AFMESH_HAL_OK);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_EQ(ops_->event_query(ctx_, event), AFMESH_HAL_AGAIN)
        << "the stream ran past a wait for 3 with the flag at 2";
    ASSERT_EQ(ops_->flag_write(ctx_, flag, 3), AFMESH_HAL_OK);
    ASSERT_EQ(ops_->event_sync(ctx_, event), AFMESH_HAL_OK) << take_module_error();

    std::vector<uint8_t> back(bytes, 0);
    ASSERT_EQ(ops_->memcpy_sync(ctx_, back.data(), dev, bytes), AFMESH_HAL_OK) << take_module_error();
    EXPECT_TRUE(std::all_of(back.begin(), back.end(), [](uint8_t b) { return b == 0x5a; }));

    // Values the flag already passed complete at once.
    ASSERT_EQ(ops_->stream_wait_flag(ctx_, stream, flag, 2), AFMESH_HAL_OK);
    ASSERT_EQ(ops_->stream_wait_flag(ctx_, stream, flag, 3), AFMESH_HAL_OK);
    ASSERT_EQ(ops_->stream_sync(ctx_, stream), AFMESH_HAL_OK) << take_module_error();

    EXPECT_EQ(ops_->event_destroy(ctx_, event), AFMESH_HAL_OK);
    EXPECT_EQ(ops_->stream_destroy(ctx_, stream), AFMESH_HAL_OK);
    EXPECT_EQ(ops_->flag_destroy(ctx_, flag), AFMESH_HAL_OK);
    EXPECT_EQ(ops_->mem_free(ctx_, AFMESH_ALLOC_DEVICE, dev), AFMESH_HAL_OK);
    EXPECT_EQ(ops_->mem_free(ctx_, AFMESH_ALLOC_HOST_PINNED, src), AFMESH_HAL_OK);
}

TEST_P(GpuFlagWait, FlagValuesOnlyMoveForward) {
    void *flag = nullptr;
    ASSERT_EQ(ops_->flag_create(ctx_, 0, &flag), AFMESH_HAL_OK) << take_module_error();
    EXPECT_EQ(ops_->flag_write(ctx_, flag, 10), AFMESH_HAL_OK);
    EXPECT_EQ(ops_->flag_write(ctx_, flag, 10), AFMESH_HAL_OK) << "rewriting the current value is harmless";
    EXPECT_EQ(ops_->flag_write(ctx_, flag, 9), AFMESH_HAL_INVALID_ARGUMENT);
    EXPECT_NE(take_module_error().find("9"), std::string::npos) << "the reason names the refused value";
    EXPECT_EQ(ops_->flag_destroy(ctx_, flag), AFMESH_HAL_OK);
}

INSTANTIATE_TEST_SUITE_P(Built, GpuFlagWait, ::testing::ValuesIn(built_gpu_modules()), module_name_param);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(GpuFlagWait);

}  // namespace
}  // namespace afmesh::testing
