// SPDX-License-Identifier: Apache-2.0
// The configuration parser (core/config.cpp) as a process's environment
// feeds it: the input is a list of NAME=value entries separated by newlines
// or NULs, handed to Config::from_env as its envp. AFMESH_* names, their
// StepMesh/ps-lite aliases and the DMLC_PS_ROOT_URI/PORT pair all go through
// it.
//
// Properties: every variable it accepted holds a value its table row allows
// (set() on a fresh Config takes it; integers are within their bounds); the
// accepted values, written back as AFMESH_* entries, parse to the same
// configuration without a note; a bad value leaves a note; the getters
// answer for every variable in the table, set or not. AFMESH_LAYOUT is the
// one setting read in the context of other variables (a job manager's): it
// is consumed, and what it derives (role, rank, sizes) is written back in
// its place, so it is left out of the round trip.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "config.h"
#include "fuzz_support.h"

namespace {

using afmesh::Config;
using afmesh::VarSpec;
using afmesh::VarType;
namespace fuzz = afmesh::fuzz;

std::vector<std::string> split_entries(const uint8_t *data, size_t size) {
    std::vector<std::string> entries(1);
    for (size_t i = 0; i < size; ++i) {
        const char c = static_cast<char>(data[i]);
        if (c == '\n' || c == '\0')
            entries.emplace_back();
        else
            entries.back().push_back(c);
    }
    return entries;
}

Config parse(std::vector<std::string> &entries) {
    std::vector<char *> envp;
    for (std::string &e : entries) envp.push_back(e.data());
    envp.push_back(nullptr);
    return Config::from_env(envp.data());
}

/** The getters for one variable, and what its value must satisfy. */
void check_value(const Config &config, const VarSpec &spec) {
    const std::string value = config.get(spec.name);
    (void)config.get_list(spec.name);
    (void)config.c_str(spec.name);
    if (spec.type == VarType::kInt) {
        // Set or the table's default, the value parses within the row's bounds.
        const int64_t v = config.get_int(spec.name);
        fuzz::check(v >= spec.min && v <= spec.max, "an integer setting is outside its bounds", spec.name);
    }
    if (config.is_set(spec.name)) {
        Config fresh;
        fuzz::check(fresh.set(spec.name, value).is_ok(), "the parser accepted a value set() refuses", spec.name);
    }
}

bool consumed_in_context(const VarSpec &spec) { return std::string_view(spec.name) == "AFMESH_LAYOUT"; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    std::vector<std::string> entries = split_entries(data, size);
    const Config config = parse(entries);
    fuzz::check(config.env_error().is_ok() || !config.notes().empty(), "a bad value was refused without a note");

    std::vector<std::string> accepted;
    for (const VarSpec &spec : afmesh::config_vars()) {
        check_value(config, spec);
        if (config.is_set(spec.name) && !consumed_in_context(spec)) accepted.push_back(std::string(spec.name) + "=" + config.get(spec.name));
    }
    const Config again = parse(accepted);
    fuzz::check(again.env_error().is_ok() && again.notes().empty(), "accepted settings, read again, leave a note",
                again.notes().empty() ? "" : again.notes().front().c_str());
    for (const VarSpec &spec : afmesh::config_vars()) {
        if (consumed_in_context(spec)) continue;
        fuzz::check(again.is_set(spec.name) == config.is_set(spec.name) && again.get(spec.name) == config.get(spec.name),
                    "accepted settings, read again, differ", spec.name);
    }
    return 0;
}
