// SPDX-License-Identifier: Apache-2.0
// dma-buf export of device memory (for GPUDirect RDMA registration), on every
// GPU module that finds a device and offers the entry.
#include <unistd.h>

#include "gpu_module_fixture.h"
#include "log.h"

namespace afmesh::testing {
namespace {

using GpuDmabufExport = GpuModuleTest;

TEST_P(GpuDmabufExport, ExportsARangeInsideADeviceAllocation) {
    if (!ops_->dmabuf_export) GTEST_SKIP() << GetParam() << " has no dma-buf export";
    const size_t bytes = size_t{1} << 20;
    void *dev = nullptr;
    ASSERT_EQ(ops_->mem_alloc(ctx_, 0, AFMESH_ALLOC_DEVICE, bytes, &dev), AFMESH_HAL_OK) << take_module_error();
    const size_t inside = 4096 + 100;  // deliberately not page-aligned
    int fd = -1;
    uint64_t offset = ~uint64_t{0};
    const int rc = ops_->dmabuf_export(ctx_, static_cast<char *>(dev) + inside, 8192, &fd, &offset);
    if (rc == AFMESH_HAL_NOT_SUPPORTED) {
        std::string reason = take_module_error();
        EXPECT_EQ(ops_->mem_free(ctx_, AFMESH_ALLOC_DEVICE, dev), AFMESH_HAL_OK);
        GTEST_SKIP() << "the driver cannot export here: " << reason;
    }
    ASSERT_EQ(rc, AFMESH_HAL_OK) << take_module_error();
    EXPECT_GE(fd, 0);
    EXPECT_LE(offset, inside) << "the dma-buf starts at or before the exported pointer";
    if (fd >= 0) close(fd);

    std::vector<char> host(4096);
    EXPECT_NE(ops_->dmabuf_export(ctx_, host.data(), host.size(), &fd, &offset), AFMESH_HAL_OK)
        << "plain host memory is not device memory to export";
    EXPECT_FALSE(take_module_error().empty()) << "a refusal comes with a reason";
    EXPECT_EQ(ops_->mem_free(ctx_, AFMESH_ALLOC_DEVICE, dev), AFMESH_HAL_OK);
}

INSTANTIATE_TEST_SUITE_P(Built, GpuDmabufExport, ::testing::ValuesIn(built_gpu_modules()), module_name_param);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(GpuDmabufExport);

}  // namespace
}  // namespace afmesh::testing
