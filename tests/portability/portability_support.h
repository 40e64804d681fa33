// SPDX-License-Identifier: Apache-2.0
// What the portability tests share: a configuration that ignores the
// environment, and the GPU device modules this build made.
#pragma once

#include <sstream>
#include <string>
#include <vector>

#include "config.h"

#ifndef AFMESH_BUILT_GPU_MODULES
#error "tests/portability/CMakeLists.txt must define AFMESH_BUILT_GPU_MODULES"
#endif

namespace afmesh::testing {

/** A configuration read from an empty environment: what a user with no AFMESH_* variables gets. */
inline Config config_without_environment() {
    char *empty[] = {nullptr};
    return Config::from_env(empty);
}

/** The GPU device modules this build made ("cuda", "hip", "ze"), from CMake. */
inline std::vector<std::string> built_gpu_modules() {
    std::vector<std::string> names;
    std::stringstream list(AFMESH_BUILT_GPU_MODULES);
    for (std::string name; std::getline(list, name, ',');)
        if (!name.empty()) names.push_back(name);
    return names;
}

inline bool is_built_gpu_module(const std::string &name) {
    for (const std::string &built : built_gpu_modules())
        if (built == name) return true;
    return false;
}

}  // namespace afmesh::testing
