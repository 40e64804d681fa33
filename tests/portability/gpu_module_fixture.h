// SPDX-License-Identifier: Apache-2.0
// A test fixture over one GPU device module (the test parameter), loaded and
// initialised. On a host without that GPU, init() reports NOT_PRESENT and
// the test skips; the fake runtimes (fake_runtimes/) make hip and ze usable
// in CI so these tests run there.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "module_loader.h"
#include "portability_support.h"

namespace afmesh::testing {

class GpuModuleTest : public ::testing::TestWithParam<std::string> {
protected:
    void SetUp() override {
        std::vector<ModuleRecord> found = discover_modules(config_without_environment());
        auto record = std::find_if(found.begin(), found.end(), [&](const ModuleRecord &r) {
            return r.kind == AFMESH_MODULE_DEVICE && r.name == GetParam() && r.state != ModuleState::kShadowed;
        });
        ASSERT_NE(record, found.end()) << "libafmesh_dev_" << GetParam() << ".so not found";
        Status s = load_module(*record, &module_);
        if (s.code() == Code::kNotPresent) GTEST_SKIP() << "not present on this host: " << record->reason;
        ASSERT_TRUE(s) << s.to_string();
        ops_ = &module_->device();
        ctx_ = module_->ctx();
    }

    std::unique_ptr<Module> module_;
    const afmesh_device_ops *ops_ = nullptr;
    void *ctx_ = nullptr;
};

/** Test names end in the module's name, e.g. ".../ze". */
inline std::string module_name_param(const ::testing::TestParamInfo<std::string> &info) { return info.param; }

}  // namespace afmesh::testing
