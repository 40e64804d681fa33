// SPDX-License-Identifier: Apache-2.0
// Every GPU device module this build made must be found by the loader, load
// (dlopen, query, ABI check) and, on a host without that GPU, answer init()
// with NOT_PRESENT and a reason naming the vendor runtime's error. On a host
// with the GPU, init() succeeds and the test skips: it guards GPU-less hosts.
// A module that fails to load is an error here, never a skip.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>

#include "module_loader.h"
#include "portability_support.h"

namespace afmesh::testing {
namespace {

// What each runtime reports when its driver or device is missing.
const std::map<std::string, std::vector<std::string>> kVendorErrors = {
    // No libcuda.so.1 / the toolkit's stub libcuda / a driver but no GPU.
    {"cuda", {"cudaErrorInsufficientDriver", "cudaErrorStubLibrary", "cudaErrorNoDevice"}},
    // No AMD kernel driver (seen in sysfs, before loading the runtime) / the
    // driver but no ROCm / no /dev/kfd or no GPU agent / a driver too old.
    {"hip",
     {"no AMD GPU driver: ", "the HIP runtime library is not installed", "hipErrorNoDevice",
      "hipErrorInsufficientDriver"}},
    // The loader found no driver / drivers but none with a GPU.
    {"ze", {"ZE_RESULT_ERROR_UNINITIALIZED", "no Level Zero driver", "no Level Zero GPU"}},
};

class GpuModuleOnThisHost : public ::testing::TestWithParam<std::string> {};

TEST_P(GpuModuleOnThisHost, LoadsAndReportsNotPresentWithTheVendorError) {
    const std::string name = GetParam();
    const Config config = config_without_environment();
    std::vector<ModuleRecord> found = discover_modules(config);
    auto record = std::find_if(found.begin(), found.end(), [&](const ModuleRecord &r) {
        return r.kind == AFMESH_MODULE_DEVICE && r.name == name && r.state != ModuleState::kShadowed;
    });
    std::string searched;
    for (const std::string &dir : module_search_dirs(config)) searched += " " + dir;
    ASSERT_NE(record, found.end()) << "the loader did not find libafmesh_dev_" << name << ".so in:" << searched;

    std::unique_ptr<Module> module;
    const Status status = load_module(*record, &module);
    if (status) GTEST_SKIP() << name << " found a usable device on this host (" << module->version() << ")";
    ASSERT_EQ(status.code(), Code::kNotPresent)
        << "the module must load and report NOT_PRESENT on a host without the GPU; got " << status.to_string();
    EXPECT_EQ(record->state, ModuleState::kNotPresent);
    EXPECT_FALSE(record->version.empty()) << "the query must describe the module before init";

    const std::vector<std::string> &expected = kVendorErrors.at(name);
    const bool names_vendor_error = std::any_of(expected.begin(), expected.end(), [&](const std::string &e) {
        return record->reason.find(e) != std::string::npos;
    });
    EXPECT_TRUE(names_vendor_error) << "reason does not name the runtime's error: " << record->reason;
}

INSTANTIATE_TEST_SUITE_P(Built, GpuModuleOnThisHost, ::testing::ValuesIn(built_gpu_modules()),
                         [](const ::testing::TestParamInfo<std::string> &info) { return info.param; });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(GpuModuleOnThisHost);

}  // namespace
}  // namespace afmesh::testing
