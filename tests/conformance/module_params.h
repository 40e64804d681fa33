// SPDX-License-Identifier: Apache-2.0
// Helpers shared by the conformance suites: the modules of one kind found on
// the search path, as GoogleTest parameters with readable names.
#pragma once

#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <vector>

#include "module_loader.h"

namespace afmesh {

/** Every module of `kind` the loader would consider (shadowed copies left out). */
inline std::vector<ModuleRecord> modules_of_kind(afmesh_module_kind kind) {
    std::vector<ModuleRecord> out;
    for (ModuleRecord &r : discover_modules(Config::process()))
        if (r.kind == kind && r.state != ModuleState::kShadowed) out.push_back(r);
    return out;
}

/** Test-name suffix: the module's name. */
inline std::string module_param_name(const ::testing::TestParamInfo<ModuleRecord> &info) { return info.param.name; }

/** How GoogleTest prints a parameter in test listings and failures. */
inline void PrintTo(const ModuleRecord &record, std::ostream *os) { *os << record.name << " (" << record.path << ")"; }

}  // namespace afmesh
