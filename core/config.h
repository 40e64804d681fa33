// SPDX-License-Identifier: Apache-2.0
// Configuration: the one table of AFMESH_* variables, their StepMesh/ps-lite
// aliases, and a Config object built from the environment and/or API calls.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "job_env.h"
#include "status.h"

namespace afmesh {

enum class VarType { kString, kInt, kEnum, kList };

/** One row of the variable table. */
struct VarSpec {
    const char *name;
    VarType type;
    const char *default_value;  // "" when unset means "not set"
    const char *choices;        // kEnum: "a|b|c"; otherwise nullptr
    int64_t min, max;           // kInt bounds (inclusive)
    const char *doc;
};

/** Every AFMESH_* variable, in display order. */
std::span<const VarSpec> config_vars();
/** The row for `name`, or nullptr. */
const VarSpec *find_var(std::string_view name);
/** The known name closest to `unknown` (edit distance), or "" if none is close. */
std::string suggest_var(std::string_view unknown);

class Config {
public:
    /** Reads AFMESH_* variables and the StepMesh/ps-lite aliases from `envp`. */
    static Config from_env(char **envp);
    /** The process's configuration, read from the environment once; its notes are logged once. */
    static const Config &process();

    /** Sets a variable (API-struct configuration). INVALID_ARGUMENT for an unknown name or bad value. */
    Status set(std::string_view name, std::string value);
    /** Whether the variable was set (by the environment, an alias or set()). */
    bool is_set(std::string_view name) const;
    /** The value, or the table default when unset. `name` must be in the table. */
    std::string get(std::string_view name) const;
    /** The value as an integer (validated at set time). */
    int64_t get_int(std::string_view name) const;
    /** The value split on ',' (empty items dropped). */
    std::vector<std::string> get_list(std::string_view name) const;
    /** The value (or non-empty default) as a C string, else nullptr; stable until the next set(). */
    const char *c_str(std::string_view name) const;

    /** Warnings collected while reading: unknown names, aliases used, conflicts, bad values. */
    const std::vector<std::string> &notes() const { return notes_; }
    /** First invalid value met while reading the environment, if any. */
    const Status &env_error() const { return env_error_; }

    /** The job manager that started this process, when its variables were found (job_env.h). */
    const std::optional<JobPlace> &job_place() const { return job_place_; }
    /** What AFMESH_LAYOUT made of job_place(): set when the role, rank and scheduler came from the launcher. */
    const std::optional<JobRole> &job_role() const { return job_role_; }

private:
    Status check(const VarSpec &spec, const std::string &value) const;
    void apply_env_value(const std::string &name, std::string value, const std::string &origin);
    void adopt_job(const EnvMap &env);
    void fail_env(const Status &error);

    std::map<std::string, std::string, std::less<>> values_;
    std::vector<std::string> notes_;
    Status env_error_;
    std::optional<JobPlace> job_place_;
    std::optional<JobRole> job_role_;
};

}  // namespace afmesh
