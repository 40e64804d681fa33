// SPDX-License-Identifier: Apache-2.0
// Link hygiene: the core artifacts (the afmesh tool, libafmesh*.so, and this
// test, which links the core statically) need no vendor library, so one build
// runs on any host; and every module exports only its query symbol, so no
// module's vendor runtime or helper can interpose on the program's own.
#include <dirent.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <string>
#include <vector>

#include "config.h"
#include "elf_dynamic.h"
#include "module_loader.h"
#include "portability_support.h"

namespace afmesh::testing {
namespace {

// Sonames of GPU runtimes, RDMA stacks and collective libraries, by prefix.
const char *const kVendorLibraries[] = {
    "libcuda.",     "libcudart.", "libnvidia-ml.", "libnvrtc.",   "libnccl.",     "libamdhip64.", "libhsa-runtime",
    "libhsakmt.",   "libamd_comgr", "librccl.",    "libze_loader.", "libze_intel", "libibverbs.",  "librdmacm.",
    "libmlx5.",     "libefa.",    "libfabric.",    "libucp.",     "libucs.",      "libuct.",
};

std::string directory_of_this_program() {
    char path[PATH_MAX];
    const ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
    if (n <= 0) return ".";
    path[n] = '\0';
    std::string self(path);
    return self.substr(0, self.rfind('/'));
}

bool is_file(const std::string &path) { return access(path.c_str(), R_OK) == 0; }

// This program, bin/afmesh when it is built, and lib/libafmesh*.so.
std::vector<std::string> core_artifacts() {
    const std::string bin = directory_of_this_program();
    std::vector<std::string> artifacts = {"/proc/self/exe"};
    if (is_file(bin + "/afmesh")) artifacts.push_back(bin + "/afmesh");
    const std::string lib = bin + "/../lib";
    if (DIR *dir = opendir(lib.c_str())) {
        while (dirent *entry = readdir(dir)) {
            const std::string name = entry->d_name;
            if (name.rfind("libafmesh", 0) != 0 || name.find(".so") == std::string::npos) continue;
            // libafmesh.so and libafmesh.so.0 are links to one file: read it once.
            char real[PATH_MAX];
            if (realpath((lib + "/" + name).c_str(), real) &&
                std::find(artifacts.begin(), artifacts.end(), real) == artifacts.end())
                artifacts.push_back(real);
        }
        closedir(dir);
    }
    return artifacts;
}

TEST(LinkHygiene, CoreArtifactsNeedNoVendorLibrary) {
    for (const std::string &artifact : core_artifacts()) {
        ElfDynamic elf;
        std::string error;
        ASSERT_TRUE(read_elf_dynamic(artifact, &elf, &error)) << error;
        for (const std::string &needed : elf.needed)
            for (const char *vendor : kVendorLibraries)
                EXPECT_NE(needed.rfind(vendor, 0), 0u) << artifact << " needs " << needed;
    }
}

// libafmesh.so exports the C API alone (cmake/libafmesh.map): no libstdc++
// template or engine symbol a host program could bind to by accident. The
// one other name is the version node's own (an absolute symbol the linker
// defines), which shows the symbols are versioned.
TEST(LinkHygiene, TheLibraryExportsOnlyTheCApi) {
    const std::string library = directory_of_this_program() + "/../lib/libafmesh.so";
    if (!is_file(library)) GTEST_SKIP() << "no " << library << " in this build";
    ElfDynamic elf;
    std::string error;
    ASSERT_TRUE(read_elf_dynamic(library, &elf, &error)) << error;
    for (const std::string &symbol : elf.exported)
        EXPECT_TRUE(symbol == "AFMESH_0" || symbol.rfind("afmesh_", 0) == 0) << symbol;
    for (const char *api : {"AFMESH_0", "afmesh_node_create", "afmesh_push_pull", "afmesh_stats_get",
                            "afmesh_set_log_handler"})
        EXPECT_NE(std::find(elf.exported.begin(), elf.exported.end(), api), elf.exported.end()) << api;
}

TEST(LinkHygiene, ModulesExportOnlyTheQuerySymbol) {
    const std::vector<ModuleRecord> modules = discover_modules(config_without_environment());
    if (modules.empty()) GTEST_SKIP() << "no module found on the search path";
    for (const ModuleRecord &module : modules) {
        if (module.state == ModuleState::kShadowed) continue;
        ElfDynamic elf;
        std::string error;
        ASSERT_TRUE(read_elf_dynamic(module.path, &elf, &error)) << error;
        EXPECT_EQ(elf.exported, std::vector<std::string>{AFMESH_MODULE_QUERY_SYMBOL}) << module.path;
    }
}

// The CUDA module links the runtime statically precisely so that it needs
// no CUDA library at all: it must load wherever the core does.
TEST(LinkHygiene, CudaModuleNeedsNoCudaLibrary) {
    if (!is_built_gpu_module("cuda")) GTEST_SKIP() << "the cuda module is not part of this build";
    for (const ModuleRecord &module : discover_modules(config_without_environment())) {
        if (module.kind != AFMESH_MODULE_DEVICE || module.name != "cuda" || module.state == ModuleState::kShadowed)
            continue;
        ElfDynamic elf;
        std::string error;
        ASSERT_TRUE(read_elf_dynamic(module.path, &elf, &error)) << error;
        for (const std::string &needed : elf.needed)
            EXPECT_EQ(needed.find("cuda"), std::string::npos) << module.path << " needs " << needed;
        return;
    }
    FAIL() << "the cuda module was built but is not on the search path";
}

}  // namespace
}  // namespace afmesh::testing
