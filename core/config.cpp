// SPDX-License-Identifier: Apache-2.0
#include "config.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>

#include "log.h"
#include "thread_annotations.h"

extern char **environ;

namespace afmesh {
namespace {

// The core's table: the settings the core reads or offers to every module
// (AFMESH_NET_DEVICES, AFMESH_SYSFS_ROOT, AFMESH_CONNECT_TIMEOUT_MS). A
// setting only one module reads is that module's to declare (ABI 1.4), with
// its default, so that the default is written once, beside the code that
// uses it. Keep it sorted by topic; `afmesh info` prints it in this order.
constexpr VarSpec kVars[] = {
    {"AFMESH_DEVICE", VarType::kList, "auto", nullptr, 0, 0,
     "device module: 'auto' (cuda > hip > ze > cpu) or an ordered list such as 'cuda,cpu'"},
    {"AFMESH_TRANSPORT", VarType::kList, "auto", nullptr, 0, 0,
     "transport module: 'auto' (ibverbs > fabric > tcp) or an ordered list such as 'fabric,tcp'"},
    {"AFMESH_MODULE_PATH", VarType::kString, "", nullptr, 0, 0,
     "extra module directories, ':'-separated, searched before the built-in ones"},
    {"AFMESH_DEVICE_ID", VarType::kInt, "0", nullptr, 0, 1 << 20,
     "index of the accelerator this process uses (StepMesh: STEPMESH_GPU)"},
    {"AFMESH_NET_DEVICES", VarType::kList, "", nullptr, 0, 0,
     "NIC allow-list for RDMA transports, e.g. 'mlx5_0:1,mlx5_1:1' (unset: the RDMA NIC nearest this process's GPU, "
     "ties shared out by local rank; see afmesh info --topology)"},
    {"AFMESH_SCHEDULER", VarType::kString, "", nullptr, 0, 0, "host:port of the scheduler"},
    {"AFMESH_ROLE", VarType::kEnum, "", "scheduler|worker|server", 0, 0, "this process's role"},
    {"AFMESH_LAYOUT", VarType::kString, "", nullptr, 0, 0,
     "under a job manager (Open MPI, PMI, Slurm, torchrun, LeaderWorkerSet) and without AFMESH_ROLE: which "
     "processes are servers, 'servers:S' (global ranks 0..S-1), 'workers:W' (0..W-1 are workers) or "
     "'workers-per-host:W' (each host's first W local ranks are workers); role, rank, counts and scheduler "
     "then come from the launcher, and global rank 0 runs the scheduler too"},
    {"AFMESH_NUM_WORKERS", VarType::kInt, "1", nullptr, 0, 1 << 20, "number of worker (attention) processes"},
    {"AFMESH_NUM_SERVERS", VarType::kInt, "1", nullptr, 0, 1 << 20, "number of server (FFN) processes"},
    {"AFMESH_RANK", VarType::kInt, "-1", nullptr, -1, 1 << 20,
     "rank requested within the role (-1: the scheduler assigns one)"},
    {"AFMESH_GROUP_SIZE", VarType::kInt, "1", nullptr, 1, 1 << 20,
     "processes per host group (StepMesh DMLC_GROUP_SIZE); worker and server counts are per group"},
    {"AFMESH_CONNECT_TIMEOUT_MS", VarType::kInt, "30000", nullptr, 1, 86400000,
     "how long a node waits for the scheduler and all other nodes to appear"},
    {"AFMESH_HEARTBEAT_MS", VarType::kInt, "1000", nullptr, 10, 3600000,
     "interval between heartbeats: to the scheduler, and on every data link between workers and servers"},
    {"AFMESH_PEER_TIMEOUT_MS", VarType::kInt, "5000", nullptr, 50, 86400000,
     "silence after which a node is declared dead and operations involving it fail"},
    {"AFMESH_SCHEDULER_RECONNECT_MS", VarType::kInt, "0", nullptr, 0, 86400000,
     "how long a node that lost the scheduler keeps trying to rejoin one restarted at the same address (0: never)"},
    {"AFMESH_POLL", VarType::kEnum, "adaptive", "busy|adaptive|blocking", 0, 0,
     "completion polling: busy (spin, lowest latency), adaptive (spin briefly then sleep), blocking"},
    {"AFMESH_POLL_SPIN_US", VarType::kInt, "50", nullptr, 0, 1000000,
     "adaptive polling: how long a waiting thread spins after the last completion before it sleeps (us); "
     "unset, 1000 for transports without a wait fd (their sleep is a blind nap)"},
    {"AFMESH_STAGING_CHUNK", VarType::kInt, "524288", nullptr, 4096, int64_t{1} << 30,
     "bytes per piece when a device push is staged through pinned host memory: each piece is sent while the "
     "next is copied (a value above the tensor's size: one copy, then one send)"},
    {"AFMESH_EAGER_BYTES", VarType::kInt, "4096", nullptr, 0, 1 << 20,
     "tensors of up to this many bytes in all (per request, per answer) travel inside the request or response "
     "message instead of in a write of their own, within the transport's message limit (0: never; unset: up to "
     "the transport's measured eager size, which afmesh info shows, or 4096 for modules before ABI 1.5)"},
    {"AFMESH_MAILBOX_ENTRIES", VarType::kInt, "64", nullptr, 0, 1 << 16,
     "per peer, how many REQUESTs (worker) or RESPONSEs may ride on a tensor write at once where the transport "
     "gathers writes: each entry is 2 KiB of registered memory per peer; beyond that, or at 0, the messages go "
     "as sends of their own (one more transport operation each way)"},
    {"AFMESH_SYSFS_ROOT", VarType::kString, "/", nullptr, 0, 0,
     "where the PCI topology is read from (root of sys/; tests point it at a machine's layout)"},
    {"AFMESH_CPU_CORES", VarType::kList, "", nullptr, 0, 0,
     "CPUs the progress thread may run on, e.g. '4,5' or '0-7,64-71' (unset: those local to the chosen RDMA NIC, "
     "or anywhere without one)"},
    {"AFMESH_AUTH_TOKEN", VarType::kString, "", nullptr, 0, 0,
     "shared secret every node must present at HELLO (empty: no check)"},
    {"AFMESH_LOG_LEVEL", VarType::kEnum, "warn", "error|warn|info|debug|trace", 0, 0, "log verbosity"},
};

struct Alias {
    const char *alias;
    const char *target;
};

// StepMesh / ps-lite names kept working so their launch scripts run unchanged.
constexpr Alias kAliases[] = {
    {"DMLC_ROLE", "AFMESH_ROLE"},
    {"DMLC_NUM_WORKER", "AFMESH_NUM_WORKERS"},
    {"DMLC_NUM_SERVER", "AFMESH_NUM_SERVERS"},
    {"DMLC_NODE_RANK", "AFMESH_RANK"},
    {"DMLC_GROUP_SIZE", "AFMESH_GROUP_SIZE"},
    {"STEPMESH_GPU", "AFMESH_DEVICE_ID"},
    {"STEPMESH_BACKEND", "AFMESH_DEVICE"},
    {"STEPMESH_BAKCEND", "AFMESH_DEVICE"},  // the spelling StepMesh's code actually reads
};

size_t edit_distance(std::string_view a, std::string_view b) {
    std::vector<size_t> row(b.size() + 1);
    for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= b.size(); ++j) {
            size_t up = row[j];
            row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
            diag = up;
        }
    }
    return row[b.size()];
}

bool parse_int(const std::string &text, int64_t *out) {
    // strtoll skips leading blanks but stops at trailing ones: refuse both alike.
    if (text.empty() || isspace(static_cast<unsigned char>(text[0]))) return false;
    errno = 0;
    char *end = nullptr;
    long long v = strtoll(text.c_str(), &end, 10);
    if (errno != 0 || *end != '\0') return false;
    *out = v;
    return true;
}

bool enum_contains(const char *choices, std::string_view value) {
    std::string_view rest = choices;
    while (!rest.empty()) {
        size_t bar = rest.find('|');
        if (rest.substr(0, bar) == value) return true;
        if (bar == std::string_view::npos) break;
        rest.remove_prefix(bar + 1);
    }
    return false;
}

// A module's setting as the core keeps it: copies of the module's strings,
// which `spec` points into. Built in place in a deque and never moved or
// removed, so `spec` may be handed out for the life of the process.
struct DeclaredVar {
    std::string name, default_value, choices, doc;
    VarSpec spec{};
};

struct DeclaredSettings {
    Mutex mu;
    std::deque<DeclaredVar> vars AFMESH_GUARDED_BY(mu);
    std::vector<ModuleVars> modules AFMESH_GUARDED_BY(mu);
};

DeclaredSettings &declared_settings() {
    static DeclaredSettings declared;
    return declared;
}

const VarSpec *find_declared(DeclaredSettings &declared, std::string_view name) AFMESH_REQUIRES(declared.mu) {
    for (const DeclaredVar &var : declared.vars)
        if (var.name == name) return &var.spec;
    return nullptr;
}

bool is_setting_name(std::string_view name) {
    if (name.size() <= 7 || name.substr(0, 7) != "AFMESH_") return false;
    return std::all_of(name.begin(), name.end(),
                       [](char c) { return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'; });
}

// Two declarations of one name agree on everything that decides its values.
bool declared_alike(const VarSpec &a, const VarSpec &b) {
    auto same = [](const char *x, const char *y) {
        return std::string_view(x ? x : "") == std::string_view(y ? y : "");
    };
    return a.type == b.type && same(a.default_value, b.default_value) &&
           (a.type != VarType::kEnum || same(a.choices, b.choices)) &&
           (a.type != VarType::kInt || (a.min == b.min && a.max == b.max));
}

// Why module `module` may not declare `var` (its other rows being `rows`), or "".
std::string refusal(const VarSpec &var, std::span<const VarSpec> rows, const std::string &module,
                    DeclaredSettings &declared) AFMESH_REQUIRES(declared.mu) {
    const std::string name = var.name ? var.name : "";
    if (!is_setting_name(name)) return "setting name '" + name + "' is not AFMESH_ followed by A-Z, 0-9 and _";
    if (find_var(name)) return name + " is a core setting: read it without declaring it";
    if (std::count_if(rows.begin(), rows.end(), [&](const VarSpec &r) { return r.name && name == r.name; }) > 1)
        return name + " is listed twice";
    if (!var.doc || !*var.doc) return name + " has no doc line";
    if (var.type == VarType::kEnum && (!var.choices || !*var.choices)) return name + " is an enum without choices";
    if (var.type == VarType::kInt && var.min > var.max) return name + " has its bounds reversed";
    if (var.default_value && *var.default_value)
        if (Status s = check_var(var, var.default_value); !s) return "its own default fails: " + s.message();
    for (const ModuleVars &other : declared.modules) {
        if (other.module == module) continue;
        for (const VarSpec *theirs : other.vars)
            if (name == theirs->name && !declared_alike(var, *theirs))
                return name + " is declared otherwise by module " + other.module;
    }
    return "";
}

// The default for `name`: the core table's, else the declaring module's; nullptr for neither.
const char *default_of(std::string_view name) {
    const VarSpec *spec = find_var(name);
    if (!spec) spec = find_module_var(name);
    return spec ? spec->default_value : nullptr;
}

// StepMesh's backend names are "GPU" (CUDA) and "CPU".
std::string translate_alias_value(std::string_view alias, std::string value) {
    if (alias == "STEPMESH_BACKEND" || alias == "STEPMESH_BAKCEND") {
        if (strcasecmp(value.c_str(), "GPU") == 0) return "cuda";
        std::transform(value.begin(), value.end(), value.begin(), [](unsigned char c) { return std::tolower(c); });
    }
    return value;
}

}  // namespace

std::span<const VarSpec> config_vars() { return kVars; }

const VarSpec *find_var(std::string_view name) {
    for (const VarSpec &spec : kVars)
        if (name == spec.name) return &spec;
    return nullptr;
}

std::string suggest_var(std::string_view unknown) {
    const char *best = nullptr;
    size_t best_distance = SIZE_MAX;
    auto consider = [&](const char *name) {
        size_t d = edit_distance(unknown, name);
        if (d < best_distance) {
            best_distance = d;
            best = name;
        }
    };
    for (const VarSpec &spec : kVars) consider(spec.name);
    DeclaredSettings &declared = declared_settings();
    MutexLock lock(&declared.mu);
    for (const DeclaredVar &var : declared.vars) consider(var.spec.name);
    // Accept a typo of up to a third of the name's length (at least 2 edits).
    size_t limit = std::max<size_t>(2, unknown.size() / 3);
    return best && best_distance <= limit ? best : "";
}

Status declare_module_vars(afmesh_module_kind kind, const std::string &module, std::span<const VarSpec> vars) {
    DeclaredSettings &declared = declared_settings();
    MutexLock lock(&declared.mu);
    for (const ModuleVars &known : declared.modules)
        if (known.kind == kind && known.module == module) return Status::ok();
    for (const VarSpec &var : vars)
        if (std::string why = refusal(var, vars, module, declared); !why.empty())
            return {Code::kInvalidArgument, "module " + module + " declares a bad setting: " + why};
    ModuleVars added{kind, module, {}};
    for (const VarSpec &var : vars) {
        if (const VarSpec *same = find_declared(declared, var.name)) {  // another module's, declared alike
            added.vars.push_back(same);
            continue;
        }
        DeclaredVar &kept = declared.vars.emplace_back();
        kept.name = var.name;
        kept.default_value = var.default_value ? var.default_value : "";
        kept.choices = var.choices ? var.choices : "";
        kept.doc = var.doc;
        kept.spec = {kept.name.c_str(), var.type, kept.default_value.c_str(),
                     var.type == VarType::kEnum ? kept.choices.c_str() : nullptr, var.min, var.max, kept.doc.c_str()};
        added.vars.push_back(&kept.spec);
    }
    if (!added.vars.empty()) declared.modules.push_back(std::move(added));
    return Status::ok();
}

const VarSpec *find_module_var(std::string_view name) {
    DeclaredSettings &declared = declared_settings();
    MutexLock lock(&declared.mu);
    return find_declared(declared, name);
}

std::vector<ModuleVars> module_vars() {
    DeclaredSettings &declared = declared_settings();
    MutexLock lock(&declared.mu);
    return declared.modules;
}

Status check_var(const VarSpec &spec, const std::string &value) {
    switch (spec.type) {
    case VarType::kInt: {
        int64_t v = 0;
        if (!parse_int(value, &v))
            return {Code::kInvalidArgument, std::string(spec.name) + "='" + value + "' is not an integer"};
        if (v < spec.min || v > spec.max)
            return {Code::kInvalidArgument, std::string(spec.name) + "=" + value + " is outside [" +
                                                std::to_string(spec.min) + ", " + std::to_string(spec.max) + "]"};
        return Status::ok();
    }
    case VarType::kEnum:
        if (!enum_contains(spec.choices, value))
            return {Code::kInvalidArgument,
                    std::string(spec.name) + "='" + value + "' is not one of " + spec.choices};
        return Status::ok();
    case VarType::kBool:
        if (value != "0" && value != "1")
            return {Code::kInvalidArgument, std::string(spec.name) + "='" + value + "' is not 0 or 1"};
        return Status::ok();
    case VarType::kString:
    case VarType::kList:
        return Status::ok();
    }
    return Status::ok();
}

Status Config::set(std::string_view name, std::string value) {
    if (const VarSpec *spec = find_var(name)) {
        if (Status s = check_var(*spec, value); !s) return s;
        values_[spec->name] = std::move(value);
        return Status::ok();
    }
    if (const VarSpec *spec = find_module_var(name)) {
        if (Status s = check_var(*spec, value); !s) return s;
        module_values_[spec->name] = std::move(value);
        return Status::ok();
    }
    std::string hint = suggest_var(name);
    return {Code::kInvalidArgument,
            "unknown setting " + std::string(name) + (hint.empty() ? "" : " (did you mean " + hint + "?)")};
}

void Config::apply_env_value(const std::string &name, std::string value, const std::string &origin) {
    Status s = set(name, std::move(value));
    if (!s) {
        notes_.push_back(s.message() + " (from " + origin + "); using the default");
        if (env_error_.is_ok()) env_error_ = s;
    }
}

void Config::fail_env(const Status &error) {
    notes_.push_back(error.message());
    if (env_error_.is_ok()) env_error_ = error;
}

// A launcher's place is looked up always (afmesh info shows it) but acted on
// only with AFMESH_LAYOUT, and never over AFMESH_ROLE: RANK or PMI_RANK
// alone may mean something else to the program.
void Config::adopt_job(const EnvMap &env) {
    if (Status s = detect_job_place(env, &job_place_); !s) {
        if (is_set("AFMESH_LAYOUT")) fail_env(s);
        return;
    }
    if (!is_set("AFMESH_LAYOUT")) return;
    if (is_set("AFMESH_ROLE")) {
        notes_.push_back("AFMESH_LAYOUT is ignored: AFMESH_ROLE is set and wins");
        return;
    }
    if (!job_place_) {
        fail_env({Code::kInvalidArgument, "AFMESH_LAYOUT is set, but no job manager's variables are (Open MPI "
                                          "OMPI_COMM_WORLD_*, PMI_RANK/PMI_SIZE, Slurm SLURM_PROCID/SLURM_NTASKS, "
                                          "torchrun RANK/WORLD_SIZE, LeaderWorkerSet LWS_*)"});
        return;
    }
    JobRole role;
    if (Status s = derive_job_role(*job_place_, get("AFMESH_LAYOUT"), get("AFMESH_SCHEDULER"), &role); !s) {
        fail_env(s);
        return;
    }
    const std::pair<const char *, std::string> derived[] = {
        {"AFMESH_ROLE", role.worker ? "worker" : "server"},
        {"AFMESH_RANK", std::to_string(role.rank)},
        {"AFMESH_NUM_WORKERS", std::to_string(role.num_workers)},
        {"AFMESH_NUM_SERVERS", std::to_string(role.num_servers)},
        {"AFMESH_SCHEDULER", role.scheduler},
    };
    for (const auto &[name, value] : derived) {
        if (is_set(name) && get(name) != value) {
            fail_env({Code::kInvalidArgument, std::string(name) + "=" + get(name) + " contradicts AFMESH_LAYOUT under " +
                                                  job_place_->launcher + ", which gives " + value});
            return;
        }
        apply_env_value(name, value, job_place_->launcher);
    }
    job_role_ = role;
}

Config Config::from_env(char **envp) {
    Config config;
    EnvMap env;
    for (char **p = envp; p && *p; ++p) {
        const char *eq = strchr(*p, '=');
        if (eq) env.emplace(std::string(*p, static_cast<size_t>(eq - *p)), std::string(eq + 1));
    }
    for (const auto &[name, value] : env) {
        if (name.rfind("AFMESH_", 0) != 0) continue;
        if (name == "AFMESH_LIBRARY") continue;  // read by the Python binding, not the library
        if (find_var(name))
            config.apply_env_value(name, value, name);
        else
            config.module_values_.emplace(name, value);  // a module's, or a typo: check_module_vars() tells
    }
    // The aliases taken, named in one note: a StepMesh launch sets six or seven of
    // them, and a warning line for each buried the warnings that matter.
    std::string aliases_used;
    auto used = [&aliases_used](const std::string &what) {
        aliases_used += (aliases_used.empty() ? "using " : ", ") + what;
    };
    for (const Alias &alias : kAliases) {
        auto it = env.find(alias.alias);
        if (it == env.end()) continue;
        std::string value = translate_alias_value(alias.alias, it->second);
        if (env.count(alias.target)) {
            if (config.get(alias.target) != value)
                config.notes_.push_back(std::string(alias.alias) + "=" + it->second + " is ignored: " +
                                        alias.target + " is set and wins");
            continue;
        }
        used(std::string(alias.alias) + " as " + alias.target);
        config.apply_env_value(alias.target, value, alias.alias);
    }
    // ps-lite names the scheduler with two variables.
    auto uri = env.find("DMLC_PS_ROOT_URI"), port = env.find("DMLC_PS_ROOT_PORT");
    if (uri != env.end() && port != env.end()) {
        // An IPv6 literal needs brackets before ":port" (unless it already has them).
        bool bare_v6 = uri->second.find(':') != std::string::npos && uri->second[0] != '[';
        std::string scheduler = (bare_v6 ? "[" + uri->second + "]" : uri->second) + ":" + port->second;
        if (!env.count("AFMESH_SCHEDULER")) {
            used("DMLC_PS_ROOT_URI and DMLC_PS_ROOT_PORT as AFMESH_SCHEDULER");
            config.apply_env_value("AFMESH_SCHEDULER", scheduler, "DMLC_PS_ROOT_URI/DMLC_PS_ROOT_PORT");
        } else if (config.get("AFMESH_SCHEDULER") != scheduler) {
            config.notes_.push_back("DMLC_PS_ROOT_URI/DMLC_PS_ROOT_PORT (" + scheduler +
                                    ") are ignored: AFMESH_SCHEDULER is set and wins");
        }
    } else if ((uri != env.end()) != (port != env.end())) {
        config.notes_.push_back("DMLC_PS_ROOT_URI and DMLC_PS_ROOT_PORT must be set together; ignoring the one set");
    }
    if (!aliases_used.empty()) config.notes_.push_back(aliases_used + " (StepMesh names)");
    config.adopt_job(env);
    return config;
}

const Config &Config::process() {
    static const Config config = [] {
        Config c = from_env(environ);
        afmesh_log_level level;
        if (parse_log_level(c.get("AFMESH_LOG_LEVEL").c_str(), &level)) set_log_level(level);
        for (const std::string &note : c.notes()) log(AFMESH_LOG_WARN, "config", "%s", note.c_str());
        return c;
    }();
    return config;
}

std::vector<std::string> Config::module_var_names() const {
    std::vector<std::string> names;
    for (const auto &[name, value] : module_values_) names.push_back(name);
    return names;
}

Status Config::check_module_vars(std::vector<std::string> *notes) const {
    Status first;
    for (const auto &[name, value] : module_values_) {
        const VarSpec *spec = find_module_var(name);
        if (!spec) {
            std::string hint = suggest_var(name);
            notes->push_back("unknown variable " + name + " is ignored" +
                             (hint.empty() ? "" : " (did you mean " + hint + "?)"));
        } else if (Status s = check_var(*spec, value); !s) {
            notes->push_back(s.message() + " (from " + name + "); using the default");
            if (first.is_ok()) first = s;
        }
    }
    return first;
}

const std::string *Config::module_value(std::string_view name) const {
    auto it = module_values_.find(name);
    if (it == module_values_.end()) return nullptr;
    const VarSpec *spec = find_module_var(name);
    return spec && check_var(*spec, it->second) ? &it->second : nullptr;
}

bool Config::is_set(std::string_view name) const {
    return values_.find(name) != values_.end() || module_value(name) != nullptr;
}

std::string Config::get(std::string_view name) const {
    if (auto it = values_.find(name); it != values_.end()) return it->second;
    if (const std::string *value = module_value(name)) return *value;
    const char *fallback = default_of(name);
    return fallback ? fallback : "";
}

int64_t Config::get_int(std::string_view name) const {
    int64_t v = 0;
    parse_int(get(name), &v);
    return v;
}

std::vector<std::string> Config::get_list(std::string_view name) const {
    std::vector<std::string> items;
    std::string text = get(name);
    size_t start = 0;
    while (start <= text.size()) {
        size_t comma = text.find(',', start);
        if (comma == std::string::npos) comma = text.size();
        std::string item = text.substr(start, comma - start);
        item.erase(0, item.find_first_not_of(" \t"));
        item.erase(item.find_last_not_of(" \t") + 1);
        if (!item.empty()) items.push_back(item);
        start = comma + 1;
    }
    return items;
}

const char *Config::c_str(std::string_view name) const {
    if (auto it = values_.find(name); it != values_.end()) return it->second.c_str();
    if (const std::string *value = module_value(name)) return value->c_str();
    const char *fallback = default_of(name);
    return fallback && fallback[0] != '\0' ? fallback : nullptr;
}

}  // namespace afmesh
