// SPDX-License-Identifier: Apache-2.0
// The hip module's probe. Default device selection probes hip on every host,
// so on one without the AMD kernel driver (no <AFMESH_SYSFS_ROOT>/sys/class/kfd)
// init() must answer NOT_PRESENT from sysfs without loading the HIP runtime,
// which would cost each process tens of milliseconds; with the driver's
// directory there it loads the runtime and reports the runtime's answer.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "child_process.h"
#include "config.h"
#include "module_loader.h"

#ifndef AFMESH_BIN
#error "the build must define AFMESH_BIN (the afmesh executable)"
#endif

namespace afmesh {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

// The module file and the runtime library it loads, when this build made the module.
#ifdef AFMESH_HIP_MODULE
constexpr const char *kHipModule = AFMESH_HIP_MODULE;
constexpr const char *kHipRuntime = AFMESH_HIP_RUNTIME_SONAME;
#else
constexpr const char *kHipModule = nullptr;
constexpr const char *kHipRuntime = nullptr;
#endif
constexpr const char *kNotBuilt = "the hip module is not built (AFMESH_WITH_HIP=OFF or no HIP SDK)";

// The KFD directory the module looks for, under `sysfs_root` standing for "/".
std::string kfd_dir(std::string sysfs_root) {
    if (sysfs_root.empty() || sysfs_root.back() != '/') sysfs_root += '/';
    return sysfs_root + "sys/class/kfd";
}

// A directory standing for "/" in AFMESH_SYSFS_ROOT, removed with the object.
class SysfsRoot {
public:
    SysfsRoot() {
        std::string pattern = (fs::temp_directory_path() / "afmesh-hip-sysfs-XXXXXX").string();
        if (mkdtemp(pattern.data())) path_ = pattern;
    }
    ~SysfsRoot() {
        std::error_code ec;
        if (!path_.empty()) fs::remove_all(path_, ec);
    }
    SysfsRoot(const SysfsRoot &) = delete;
    SysfsRoot &operator=(const SysfsRoot &) = delete;

    /** Empty when the directory could not be made. */
    const std::string &path() const { return path_; }

private:
    std::string path_;
};

// The hip module's entry in `afmesh info --json` run with AFMESH_SYSFS_ROOT=`sysfs_root`.
Json hip_in_afmesh_info(const std::string &sysfs_root) {
    test::ChildResult r = test::run_tool(AFMESH_BIN, {"info", "--json"}, {"AFMESH_SYSFS_ROOT=" + sysfs_root});
    EXPECT_EQ(r.spawn_error, "");
    EXPECT_EQ(r.signal, 0) << "afmesh was killed; stderr:\n" << r.err;
    const Json doc = Json::parse(r.out, nullptr, false);
    EXPECT_FALSE(doc.is_discarded()) << "not valid JSON:\n" << r.out << "\nstderr:\n" << r.err;
    if (doc.is_discarded()) return Json::object();
    for (const Json &module : doc.value("modules", Json::array()))
        if (module.value("kind", "") == "device" && module.value("name", "") == "hip" &&
            module.value("status", "") != "shadowed")
            return module;
    ADD_FAILURE() << "afmesh info does not list the hip module:\n" << r.out;
    return Json::object();
}

TEST(hip_probe, WithoutTheKfdDriverTheRuntimeIsNeverLoaded) {
    if (!kHipModule) GTEST_SKIP() << kNotBuilt;
    // The module reads AFMESH_SYSFS_ROOT through the core, from this process's settings.
    const std::string kfd = kfd_dir(Config::process().get("AFMESH_SYSFS_ROOT"));
    std::error_code ec;
    if (fs::exists(kfd, ec)) GTEST_SKIP() << kfd << " exists: this host has the AMD GPU driver";
    ASSERT_EQ(dlopen(kHipRuntime, RTLD_NOW | RTLD_NOLOAD), nullptr)
        << kHipRuntime << " is already loaded in this process before the probe";

    const std::string dir = fs::path(kHipModule).parent_path().string();
    Config config;
    ASSERT_TRUE(config.set("AFMESH_MODULE_PATH", dir));
    std::vector<ModuleRecord> found = discover_modules(config);
    auto record = std::find_if(found.begin(), found.end(), [](const ModuleRecord &r) {
        return r.kind == AFMESH_MODULE_DEVICE && r.name == "hip" && r.state != ModuleState::kShadowed;
    });
    ASSERT_NE(record, found.end()) << "the loader did not find the hip module in " << dir;
    std::unique_ptr<Module> module;
    const Status status = load_module(*record, &module);

    EXPECT_EQ(status.code(), Code::kNotPresent) << status.to_string();
    EXPECT_EQ(record->state, ModuleState::kNotPresent);
    EXPECT_EQ(record->reason, "no AMD GPU driver: " + kfd + " is missing");
    EXPECT_EQ(dlopen(kHipRuntime, RTLD_NOW | RTLD_NOLOAD), nullptr) << "probing the hip module loaded " << kHipRuntime;
}

TEST(hip_probe, TheKfdDirectoryIsLookedForUnderTheSysfsRoot) {
    if (!kHipModule) GTEST_SKIP() << kNotBuilt;
    SysfsRoot root;
    ASSERT_FALSE(root.path().empty()) << "mkdtemp failed";
    const Json hip = hip_in_afmesh_info(root.path());
    EXPECT_EQ(hip.value("status", ""), "not present") << hip.dump();
    EXPECT_EQ(hip.value("reason", ""), "no AMD GPU driver: " + root.path() + "/sys/class/kfd is missing");
}

TEST(hip_probe, WithTheKfdDriverTheRuntimeAnswers) {
    if (!kHipModule) GTEST_SKIP() << kNotBuilt;
    SysfsRoot root;
    ASSERT_FALSE(root.path().empty()) << "mkdtemp failed";
    // What the amdgpu driver's KFD publishes: the runtime itself opens /dev/kfd and reads the real topology.
    ASSERT_TRUE(fs::create_directories(fs::path(root.path()) / "sys/class/kfd/kfd/topology/nodes"));
    const Json hip = hip_in_afmesh_info(root.path());
    if (hip.value("status", "") == "loaded") GTEST_SKIP() << "this host has an AMD GPU: " << hip.dump();
    EXPECT_EQ(hip.value("status", ""), "not present") << hip.dump();
    EXPECT_EQ(hip.value("reason", ""), "no AMD GPU: hipErrorNoDevice")
        << "the module must load the runtime and report its answer";
}

}  // namespace
}  // namespace afmesh
