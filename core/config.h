// SPDX-License-Identifier: Apache-2.0
// Configuration: the core's table of AFMESH_* variables, the settings the
// modules declare (ABI 1.4, collected by the loader), the StepMesh/ps-lite
// aliases, and a Config object built from the environment and/or API calls.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "afmesh/hal/module.h"
#include "job_env.h"
#include "status.h"

namespace afmesh {

enum class VarType { kString, kInt, kEnum, kList, kBool };

/** One row of the variable table. */
struct VarSpec {
    const char *name;
    VarType type;
    const char *default_value;  // "" when unset means "not set"
    const char *choices;        // kEnum: "a|b|c"; otherwise nullptr
    int64_t min, max;           // kInt bounds (inclusive)
    const char *doc;
};

/** The core's own AFMESH_* variables, in display order. */
std::span<const VarSpec> config_vars();
/** The core's row for `name`, or nullptr. */
const VarSpec *find_var(std::string_view name);
/** The name closest to `unknown` (edit distance) among the core's and the modules' settings, or "" if none is close. */
std::string suggest_var(std::string_view unknown);
/** Whether `value` is one `spec` accepts; the error names the variable and what it accepts. */
Status check_var(const VarSpec &spec, const std::string &value);

/** The settings one module declared (ABI 1.4), in its order. */
struct ModuleVars {
    afmesh_module_kind kind;
    std::string module;                 // the module's name
    std::vector<const VarSpec *> vars;  // the core's copies: valid for the life of the process
};

/**
 * Adds the settings module `module` of `kind` declares to those the core
 * knows, copying them. Refused as a whole (INVALID_ARGUMENT, nothing kept)
 * when a name does not read AFMESH_[A-Z0-9_]+, is the core's, is listed
 * twice, or is declared otherwise by another module, or when a type is
 * unknown, an enum has no choices, bounds are reversed, a doc is missing or
 * a default fails its own type. A module declaring again is a no-op: the
 * first declaration stays, so the pointers handed out stay valid.
 */
Status declare_module_vars(afmesh_module_kind kind, const std::string &module, std::span<const VarSpec> vars);
/** The declared row for `name`, or nullptr when no module declared it (yet). */
const VarSpec *find_module_var(std::string_view name);
/** Every module that declared settings, in the order they did. */
std::vector<ModuleVars> module_vars();

class Config {
public:
    /** Reads AFMESH_* variables and the StepMesh/ps-lite aliases from `envp`. */
    static Config from_env(char **envp);
    /** The process's configuration, read from the environment once; its notes are logged once. */
    static const Config &process();

    /**
     * Sets a variable (API-struct configuration): a core setting, or one a
     * module queried so far declared. INVALID_ARGUMENT for an unknown name or bad value.
     */
    Status set(std::string_view name, std::string value);
    /** Whether the variable was set (by the environment, an alias or set()) to a value its type accepts. */
    bool is_set(std::string_view name) const;
    /**
     * The value, or the default when unset: the core table's, or the
     * declaring module's. "" for a name that is neither the core's nor
     * declared by a module (such a variable is ignored).
     */
    std::string get(std::string_view name) const;
    /** The value as an integer (validated at set time). */
    int64_t get_int(std::string_view name) const;
    /** The value split on ',' (empty items dropped). */
    std::vector<std::string> get_list(std::string_view name) const;
    /** The value (or non-empty default) as a C string, else nullptr; stable until the next set(). */
    const char *c_str(std::string_view name) const;

    /**
     * Warnings collected while reading the core's settings: aliases used,
     * conflicts, bad values. Variables outside the core's table are
     * check_module_vars()'s.
     */
    const std::vector<std::string> &notes() const { return notes_; }
    /** First invalid value of a core setting met while reading the environment, if any. */
    const Status &env_error() const { return env_error_; }

    /** The AFMESH_* variables of the environment outside the core's table, whoever declares them. */
    std::vector<std::string> module_var_names() const;
    /**
     * Checks the variables of module_var_names() against the settings the
     * modules declared so far: a name none declared is a note ("unknown
     * variable ... is ignored", with a did-you-mean over every known
     * setting); a value its declared type refuses is a note and the error
     * returned (the first, by name), and reads as the default.
     */
    Status check_module_vars(std::vector<std::string> *notes) const;

    /** The job manager that started this process, when its variables were found (job_env.h). */
    const std::optional<JobPlace> &job_place() const { return job_place_; }
    /** What AFMESH_LAYOUT made of job_place(): set when the role, rank and scheduler came from the launcher. */
    const std::optional<JobRole> &job_role() const { return job_role_; }

private:
    /** The value of a declared module setting when its type accepts it, else nullptr. */
    const std::string *module_value(std::string_view name) const;
    void apply_env_value(const std::string &name, std::string value, const std::string &origin);
    void adopt_job(const EnvMap &env);
    void fail_env(const Status &error);

    std::map<std::string, std::string, std::less<>> values_;
    // Variables outside the core's table, as given: which module (if any)
    // declares them is known only once the loader has queried it.
    std::map<std::string, std::string, std::less<>> module_values_;
    std::vector<std::string> notes_;
    Status env_error_;
    std::optional<JobPlace> job_place_;
    std::optional<JobRole> job_role_;
};

}  // namespace afmesh
