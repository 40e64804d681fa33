// SPDX-License-Identifier: Apache-2.0
// Device selection on a host without GPUs: automatic selection ends at cpu,
// and naming a GPU module explicitly fails with the runtime's reason.
#include <gtest/gtest.h>

#include <memory>

#include "module_loader.h"
#include "portability_support.h"

namespace afmesh::testing {
namespace {

TEST(DeviceSelection, AutoFallsBackToCpuWithoutAGpu) {
    std::unique_ptr<Module> module;
    const Status status = select_module(config_without_environment(), AFMESH_MODULE_DEVICE, &module);
    ASSERT_TRUE(status) << status.to_string();
    if (module->name() != "cpu" && is_built_gpu_module(module->name()))
        GTEST_SKIP() << "a real GPU is present: auto selected " << module->name() << " (" << module->version() << ")";
    EXPECT_EQ(module->name(), "cpu");
}

TEST(DeviceSelection, ExplicitCudaFailsNamingTheCudaError) {
    if (!is_built_gpu_module("cuda")) GTEST_SKIP() << "the cuda module is not part of this build (AFMESH_WITH_CUDA)";
    Config config = config_without_environment();
    ASSERT_TRUE(config.set("AFMESH_DEVICE", "cuda"));
    std::unique_ptr<Module> module;
    const Status status = select_module(config, AFMESH_MODULE_DEVICE, &module);
    if (status) GTEST_SKIP() << "CUDA is usable on this host (" << module->version() << ")";
    EXPECT_EQ(status.code(), Code::kNotFound) << status.to_string();
    EXPECT_NE(status.message().find("AFMESH_DEVICE=cuda"), std::string::npos) << status.message();
    const bool names_cuda_error = status.message().find("cudaErrorInsufficientDriver") != std::string::npos ||
                                  status.message().find("cudaErrorStubLibrary") != std::string::npos ||
                                  status.message().find("cudaErrorNoDevice") != std::string::npos;
    EXPECT_TRUE(names_cuda_error) << status.message();
}

}  // namespace
}  // namespace afmesh::testing
