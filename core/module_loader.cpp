// SPDX-License-Identifier: Apache-2.0
#include "module_loader.h"

#include <dirent.h>
#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstddef>
#include <cstring>
#include <map>
#include <set>
#include <span>

#include "log.h"
#include "thread_annotations.h"

#ifndef AFMESH_INSTALL_MODULE_DIR
#error "the build must define AFMESH_INSTALL_MODULE_DIR"
#endif

namespace afmesh {
namespace {

constexpr const char *kDevicePrefix = "libafmesh_dev_";
constexpr const char *kTransportPrefix = "libafmesh_net_";

// Auto-selection priority: the first of these that initialises wins; modules
// not listed (third-party ones) come after the listed ones but before the
// last entry, the portable fallback.
constexpr const char *kDeviceOrder[] = {"cuda", "hip", "ze", "cpu"};
constexpr const char *kTransportOrder[] = {"ibverbs", "fabric", "tcp"};

// Settings the core chose for the modules where the user set none (e.g.
// AFMESH_NET_DEVICES: the NIC nearest the GPU). A value, once given, is never
// replaced or freed: modules keep the pointers host_get_config returns.
struct OfferedSettings {
    Mutex mu;
    std::map<std::string, std::string, std::less<>> values AFMESH_GUARDED_BY(mu);
};

OfferedSettings &offered_settings() {
    static OfferedSettings offered;
    return offered;
}

const char *host_get_config(const char *name) {
    if (!name) return nullptr;
    if (const char *value = Config::process().c_str(name)) return value;
    OfferedSettings &offered = offered_settings();
    MutexLock lock(&offered.mu);
    auto it = offered.values.find(std::string_view(name));
    return it == offered.values.end() ? nullptr : it->second.c_str();
}

// log() and set_module_error() have exactly the services' signatures.
const afmesh_host_services kHostServices = {
    sizeof(afmesh_host_services),
    log,
    set_module_error,
    host_get_config,
};

// Sizes of the operation tables at ABI 1.0: later minors append entries, and
// a module built against 1.0 must still load.
constexpr uint32_t kDeviceOpsSize1_0 = offsetof(afmesh_device_ops, dmabuf_export) + sizeof(void *);
constexpr uint32_t kNetOpsSize1_0 = offsetof(afmesh_net_ops, arm) + sizeof(void *);

// The first mandatory entry a module left NULL, or nullptr. Optional ones
// (flags, dma-buf, wait fd) may be NULL and are checked where used.
const char *missing_required_entry(afmesh_module_kind kind, const void *ops) {
#define AFMESH_REQUIRE(table, entry) \
    if (!table->entry) return #entry
    if (kind == AFMESH_MODULE_DEVICE) {
        auto *d = static_cast<const afmesh_device_ops *>(ops);
        AFMESH_REQUIRE(d, init); AFMESH_REQUIRE(d, fini); AFMESH_REQUIRE(d, device_count);
        AFMESH_REQUIRE(d, device_info); AFMESH_REQUIRE(d, set_device); AFMESH_REQUIRE(d, mem_alloc);
        AFMESH_REQUIRE(d, mem_free); AFMESH_REQUIRE(d, pointer_query); AFMESH_REQUIRE(d, memcpy_sync);
        AFMESH_REQUIRE(d, memcpy_async); AFMESH_REQUIRE(d, stream_create); AFMESH_REQUIRE(d, stream_destroy);
        AFMESH_REQUIRE(d, stream_sync); AFMESH_REQUIRE(d, event_create); AFMESH_REQUIRE(d, event_destroy);
        AFMESH_REQUIRE(d, event_record); AFMESH_REQUIRE(d, event_query); AFMESH_REQUIRE(d, event_sync);
    } else {
        auto *n = static_cast<const afmesh_net_ops *>(ops);
        AFMESH_REQUIRE(n, init); AFMESH_REQUIRE(n, fini); AFMESH_REQUIRE(n, listen); AFMESH_REQUIRE(n, connect);
        AFMESH_REQUIRE(n, accept); AFMESH_REQUIRE(n, close); AFMESH_REQUIRE(n, mem_register);
        AFMESH_REQUIRE(n, mem_deregister); AFMESH_REQUIRE(n, write_imm); AFMESH_REQUIRE(n, send); AFMESH_REQUIRE(n, poll);
    }
#undef AFMESH_REQUIRE
    return nullptr;
}

bool is_directory(const std::string &path) {
    struct stat st;
    return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// Parses "libafmesh_dev_cpu.so" into (DEVICE, "cpu").
bool parse_module_file_name(const std::string &file, afmesh_module_kind *kind, std::string *name) {
    const std::string suffix = ".so";
    if (file.size() <= suffix.size() || file.compare(file.size() - suffix.size(), suffix.size(), suffix) != 0)
        return false;
    std::string stem = file.substr(0, file.size() - suffix.size());
    for (auto [prefix, k] : {std::pair{kDevicePrefix, AFMESH_MODULE_DEVICE}, {kTransportPrefix, AFMESH_MODULE_TRANSPORT}}) {
        size_t len = strlen(prefix);
        if (stem.size() > len && stem.compare(0, len, prefix) == 0) {
            *kind = k;
            *name = stem.substr(len);
            return true;
        }
    }
    return false;
}

const char *kind_word(afmesh_module_kind kind) { return kind == AFMESH_MODULE_DEVICE ? "device" : "transport"; }
const char *kind_variable(afmesh_module_kind kind) {
    return kind == AFMESH_MODULE_DEVICE ? "AFMESH_DEVICE" : "AFMESH_TRANSPORT";
}

std::string describe_failure(const char *what, int rc) {
    std::string reason = take_module_error();
    if (reason.empty()) reason = std::string(what) + " returned " + code_name(static_cast<Code>(rc));
    return reason;
}

// The auto order for `kind`, over the modules actually found.
std::vector<std::string> auto_order(afmesh_module_kind kind, const std::vector<ModuleRecord> &found) {
    std::vector<std::string> listed;
    if (kind == AFMESH_MODULE_DEVICE)
        listed.assign(std::begin(kDeviceOrder), std::end(kDeviceOrder));
    else
        listed.assign(std::begin(kTransportOrder), std::end(kTransportOrder));
    std::vector<std::string> order(listed.begin(), listed.end() - 1);
    for (const ModuleRecord &r : found)
        if (r.kind == kind && r.state != ModuleState::kShadowed &&
            std::find(listed.begin(), listed.end(), r.name) == listed.end())
            order.push_back(r.name);
    order.push_back(listed.back());
    return order;
}

// The file that holds the core: libafmesh.so, or a program linking it
// statically. dladdr names the main program by its argv[0], which may be a
// bare name found on PATH or a symlink elsewhere, so the kernel's name for
// the executable is used instead.
std::string core_object_path() {
    Dl_info info{};
    if (!dladdr(reinterpret_cast<void *>(&core_object_path), &info) || !info.dli_fname) return "";
    if (strcmp(info.dli_fname, program_invocation_name) == 0) {
        char exe[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (n > 0) return std::string(exe, static_cast<size_t>(n));
    }
    return info.dli_fname;
}

std::string joined_search_dirs(const Config &config) {
    std::string dirs;
    for (const std::string &d : module_search_dirs(config)) dirs += (dirs.empty() ? "" : ", ") + d;
    return dirs;
}

// Modules keep process-wide state (the host services pointer, runtime
// handles) set by query and init: they are opened one at a time, under `mu`.
struct Loading {
    Mutex mu;
    // The files opened and queried, whatever they answered, so that checking
    // the environment opens none of them a second time.
    std::set<std::string> asked AFMESH_GUARDED_BY(mu);
};

Loading &loading() {
    static Loading state;
    return state;
}

// Hands the settings a module declared (ABI 1.4) over to the configuration.
// Nothing of a module answering 1.3 or less is read: the fields are not its.
Status declare_settings(const ModuleRecord &record, const afmesh_module_desc &desc) {
    if (desc.abi_minor < 4 || desc.setting_count == 0) return Status::ok();
    // A bound against garbage in the count, far above any real table.
    constexpr uint32_t kMaxSettings = 1024;
    if (!desc.settings || desc.setting_count > kMaxSettings)
        return {Code::kInvalidArgument, "the module's settings table is missing or claims " +
                                            std::to_string(desc.setting_count) + " entries"};
    std::vector<VarSpec> vars;
    for (const afmesh_module_setting &s : std::span(desc.settings, desc.setting_count)) {
        VarType type;
        switch (s.type) {
        case AFMESH_SETTING_STRING: type = VarType::kString; break;
        case AFMESH_SETTING_INT: type = VarType::kInt; break;
        case AFMESH_SETTING_BOOL: type = VarType::kBool; break;
        case AFMESH_SETTING_ENUM: type = VarType::kEnum; break;
        default:
            return {Code::kInvalidArgument, std::string("setting ") + (s.name ? s.name : "(null)") + " has type " +
                                                std::to_string(s.type) + ", which ABI " +
                                                std::to_string(AFMESH_HAL_ABI_MAJOR) + "." +
                                                std::to_string(AFMESH_HAL_ABI_MINOR) + " does not define"};
        }
        vars.push_back({s.name, type, s.default_value, s.choices, s.min, s.max, s.doc});
    }
    return declare_module_vars(record.kind, record.name, vars);
}

}  // namespace

bool offer_module_setting(const std::string &name, const std::string &value) {
    OfferedSettings &offered = offered_settings();
    MutexLock lock(&offered.mu);
    const auto [it, added] = offered.values.emplace(name, value);
    return added || it->second == value;
}

const char *module_state_name(ModuleState state) {
    switch (state) {
    case ModuleState::kFound: return "found";
    case ModuleState::kLoaded: return "loaded";
    case ModuleState::kNotPresent: return "not present";
    case ModuleState::kError: return "error";
    case ModuleState::kShadowed: return "shadowed";
    }
    return "?";
}

const afmesh_host_services *host_services() { return &kHostServices; }

Module::~Module() {
    if (ctx_) {
        if (kind_ == AFMESH_MODULE_DEVICE)
            device().fini(ctx_);
        else
            net().fini(ctx_);
    }
    if (handle_) dlclose(handle_);
}

uint32_t Module::write_segs() const {
    if (kind_ != AFMESH_MODULE_TRANSPORT || abi_minor_ < 2) return 0;
    const afmesh_net_ops &ops = net();
    if (ops.struct_size < offsetof(afmesh_net_ops, write_imm_v) + sizeof ops.write_imm_v || !ops.write_imm_v)
        return 0;
    return caps_.max_write_segs >= 2 ? caps_.max_write_segs : 0;
}

uint32_t Module::eager_send_size() const {
    if (kind_ != AFMESH_MODULE_TRANSPORT || abi_minor_ < 5) return 0;
    return std::min(caps_.eager_send_size, caps_.max_send_size);
}

Status Module::counters(std::vector<afmesh_net_counter> *out) const {
    out->clear();
    if (kind_ != AFMESH_MODULE_TRANSPORT || !ctx_ || abi_minor_ < 3) return Status::ok();
    const afmesh_net_ops &ops = net();
    if (ops.struct_size < offsetof(afmesh_net_ops, counters) + sizeof ops.counters || !ops.counters) return Status::ok();
    out->resize(16);
    for (;;) {
        take_module_error();
        const int n = ops.counters(ctx_, out->data(), static_cast<uint32_t>(out->size()));
        if (n < 0)
            return {static_cast<Code>(n), "transport " + name_ + ": counters failed: " + take_module_error()};
        const bool fitted = static_cast<size_t>(n) <= out->size();
        out->resize(static_cast<size_t>(n));  // the module has more: ask again with room for all
        if (fitted) return Status::ok();
    }
}

Status Module::syscalls(uint64_t *out) const {
    *out = 0;
    std::vector<afmesh_net_counter> found;
    if (Status s = counters(&found); !s) return s;
    for (const afmesh_net_counter &c : found)
        if (c.name && strcmp(c.name, "syscalls") == 0) *out = c.value;
    return Status::ok();
}

std::string Module::describe() const {
    if (kind_ != AFMESH_MODULE_TRANSPORT || !ctx_) return {};
    const afmesh_net_ops &ops = net();
    if (ops.struct_size < offsetof(afmesh_net_ops, describe) + sizeof ops.describe || !ops.describe) return {};
    char text[4096] = "";
    if (ops.describe(ctx_, text, sizeof text) != AFMESH_HAL_OK) return {};
    text[sizeof text - 1] = '\0';  // never trust a module to terminate it
    std::string out = text;
    while (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
}

std::vector<std::string> module_search_dirs(const Config &config) {
    std::vector<std::string> dirs;
    auto add = [&dirs](std::string dir) {
        while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
        if (!dir.empty() && std::find(dirs.begin(), dirs.end(), dir) == dirs.end()) dirs.push_back(dir);
    };
    std::string user = config.get("AFMESH_MODULE_PATH");
    for (size_t start = 0; start <= user.size();) {
        size_t colon = user.find(':', start);
        if (colon == std::string::npos) colon = user.size();
        add(user.substr(start, colon - start));
        start = colon + 1;
    }
    // Beside the object that holds the core: lib/afmesh next to libafmesh.so,
    // or, for a program linking the core statically from bin/, ../lib/afmesh.
    std::string self = core_object_path();
    if (!self.empty()) {
        std::string dir = self.find('/') == std::string::npos ? "." : self.substr(0, self.rfind('/'));
        for (const char *relative : {"/afmesh", "/../lib/afmesh"}) {
            char resolved[PATH_MAX];
            if (realpath((dir + relative).c_str(), resolved) && is_directory(resolved)) add(resolved);
        }
    }
    add(AFMESH_INSTALL_MODULE_DIR);
    return dirs;
}

std::vector<ModuleRecord> discover_modules(const Config &config) {
    std::vector<ModuleRecord> records;
    std::set<std::pair<int, std::string>> seen;
    for (const std::string &dir : module_search_dirs(config)) {
        DIR *d = opendir(dir.c_str());
        if (!d) continue;
        std::vector<std::string> files;
        while (dirent *e = readdir(d)) files.emplace_back(e->d_name);
        closedir(d);
        std::sort(files.begin(), files.end());
        for (const std::string &file : files) {
            ModuleRecord r;
            if (!parse_module_file_name(file, &r.kind, &r.name)) continue;
            r.path = dir + "/" + file;
            if (!seen.insert({r.kind, r.name}).second) {
                r.state = ModuleState::kShadowed;
                auto winner = std::find_if(records.begin(), records.end(), [&](const ModuleRecord &o) {
                    return o.kind == r.kind && o.name == r.name && o.state != ModuleState::kShadowed;
                });
                r.reason = "shadowed by " + winner->path;
            }
            records.push_back(std::move(r));
        }
    }
    return records;
}

namespace {

// Records why `record` cannot be used and returns that as an error naming the file.
Status record_failure(ModuleRecord &record, ModuleState state, Code code, const std::string &reason) {
    record.state = state;
    record.reason = reason;
    return Status(code, std::string(kind_word(record.kind)) + " module '" + record.name + "' (" + record.path +
                            "): " + reason);
}

// A module file opened and queried, not initialised.
struct Queried {
    std::unique_ptr<void, int (*)(void *)> handle{nullptr, dlclose};
    afmesh_module_desc desc{};
};

// dlopen, the query, every check of its answer, and the settings it
// declares: all of loading a module but init().
Status query_module(Loading &state, ModuleRecord &record, Queried *out) AFMESH_REQUIRES(state.mu) {
    auto fail = [&record](ModuleState st, Code code, const std::string &reason) {
        return record_failure(record, st, code, reason);
    };
    state.asked.insert(record.path);
    // NODELETE: a module's thread-locals and vendor runtimes may outlive dlclose.
    out->handle.reset(dlopen(record.path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE));
    if (!out->handle) {
        // A vendor library the module links (libamdhip64, libze_loader...) is
        // absent: this host simply lacks that runtime, like init()'s NOT_PRESENT.
        std::string error = dlerror();
        const bool runtime_missing = error.find("cannot open shared object file") != std::string::npos &&
                                     error.rfind(record.path, 0) != 0;
        if (runtime_missing)
            return fail(ModuleState::kNotPresent, Code::kNotPresent, "its runtime library is not installed: " + error);
        return fail(ModuleState::kError, Code::kError, "dlopen failed: " + error);
    }
    dlerror();
    auto query = reinterpret_cast<afmesh_module_query_fn>(dlsym(out->handle.get(), AFMESH_MODULE_QUERY_SYMBOL));
    if (!query) {
        const char *err = dlerror();
        return fail(ModuleState::kError, Code::kError,
                    std::string("no symbol " AFMESH_MODULE_QUERY_SYMBOL) + (err ? std::string(": ") + err : ""));
    }
    afmesh_module_desc &desc = out->desc;
    desc.struct_size = sizeof desc;
    take_module_error();
    int rc = query(AFMESH_HAL_ABI_MAJOR, host_services(), &desc);
    record.abi_major = desc.abi_major;
    record.abi_minor = desc.abi_minor;
    record.version = desc.version ? desc.version : "";
    if (rc == AFMESH_HAL_UNSUPPORTED_VERSION || (rc == AFMESH_HAL_OK && desc.abi_major != AFMESH_HAL_ABI_MAJOR))
        return fail(ModuleState::kError, Code::kUnsupportedVersion,
                    "unsupported ABI version: the core speaks " + std::to_string(AFMESH_HAL_ABI_MAJOR) +
                        ".x, the module " + std::to_string(desc.abi_major) + "." + std::to_string(desc.abi_minor));
    if (rc != AFMESH_HAL_OK) return fail(ModuleState::kError, Code::kError, describe_failure("query", rc));
    if (desc.kind != static_cast<uint32_t>(record.kind))
        return fail(ModuleState::kError, Code::kError,
                    std::string("the file name says ") + kind_word(record.kind) + " but the module says otherwise");
    if (!desc.name || record.name != desc.name)
        return fail(ModuleState::kError, Code::kError,
                    std::string("the module calls itself '") + (desc.name ? desc.name : "(null)") +
                        "', which does not match its file name");
    const uint32_t min_ops_size = record.kind == AFMESH_MODULE_DEVICE ? kDeviceOpsSize1_0 : kNetOpsSize1_0;
    if (!desc.ops || *static_cast<const uint32_t *>(desc.ops) < min_ops_size)
        return fail(ModuleState::kError, Code::kError, "operations table missing or shorter than ABI 1.0's");
    if (const char *missing = missing_required_entry(record.kind, desc.ops))
        return fail(ModuleState::kError, Code::kError, std::string("required entry '") + missing + "' is NULL");
    // Before init(): a module may read its settings there, and one that is not
    // present on this host still declares them (to `afmesh info`, to the check).
    if (Status s = declare_settings(record, desc); !s) return fail(ModuleState::kError, Code::kError, s.message());
    return Status::ok();
}

// The check of the AFMESH_* variables outside the core's table, as node
// start-up runs it from select_module.
struct StartupCheck {
    // A node selects a device and a transport; once a process has selected
    // both, the modules it uses (and those it tried before them) have
    // declared their settings, and only a variable none of them declares
    // makes the check query the other modules.
    std::atomic<bool> device_selected{false}, transport_selected{false};
    Mutex mu;
    std::set<std::string> warned AFMESH_GUARDED_BY(mu);  // each note is logged once per process
};

StartupCheck &startup_check() {
    static StartupCheck check;
    return check;
}

void check_after_selection(const Config &config, afmesh_module_kind kind) {
    StartupCheck &check = startup_check();
    (kind == AFMESH_MODULE_DEVICE ? check.device_selected : check.transport_selected).store(true);
    if (!check.device_selected.load() || !check.transport_selected.load()) return;
    std::vector<std::string> notes;
    // A bad value reads as the default; afmesh info fails on it, a node warns.
    (void)check_module_variables(config, &notes);
    MutexLock lock(&check.mu);
    for (const std::string &note : notes)
        if (check.warned.insert(note).second) log(AFMESH_LOG_WARN, "config", "%s", note.c_str());
}

}  // namespace

Status load_module(ModuleRecord &record, std::unique_ptr<Module> *out) {
    Loading &state = loading();
    MutexLock lock(&state.mu);
    // Timed whatever the outcome: a slow probe costs every process that starts.
    struct ProbeTimer {
        ModuleRecord &record;
        std::chrono::steady_clock::time_point began = std::chrono::steady_clock::now();
        ~ProbeTimer() {
            record.probe_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - began).count();
        }
    } timer{record};
    Queried queried;
    if (Status s = query_module(state, record, &queried); !s) return s;
    std::unique_ptr<Module> module(new Module());
    module->kind_ = record.kind;
    module->handle_ = queried.handle.release();
    module->ops_ = queried.desc.ops;
    module->name_ = queried.desc.name;
    module->version_ = record.version;
    module->abi_minor_ = record.abi_minor;

    int rc;
    take_module_error();
    if (record.kind == AFMESH_MODULE_DEVICE) {
        rc = module->device().init(&module->ctx_);
    } else {
        module->caps_.struct_size = sizeof module->caps_;
        rc = module->net().init(&module->ctx_, &module->caps_);
    }
    if (rc == AFMESH_HAL_NOT_PRESENT) {
        module->ctx_ = nullptr;
        return record_failure(record, ModuleState::kNotPresent, Code::kNotPresent, describe_failure("init", rc));
    }
    if (rc != AFMESH_HAL_OK) {
        module->ctx_ = nullptr;
        return record_failure(record, ModuleState::kError, Code::kError, describe_failure("init", rc));
    }
    record.state = ModuleState::kLoaded;
    record.reason.clear();
    record.details = module->describe();
    *out = std::move(module);
    return Status::ok();
}

void declare_all_module_settings(const Config &config) {
    Loading &state = loading();
    MutexLock lock(&state.mu);
    for (ModuleRecord &record : discover_modules(config)) {
        if (record.state == ModuleState::kShadowed || state.asked.count(record.path)) continue;
        Queried queried;
        (void)query_module(state, record, &queried);  // one that cannot answer declares nothing
    }
}

Status check_module_variables(const Config &config, std::vector<std::string> *notes) {
    const std::vector<std::string> names = config.module_var_names();
    if (!std::all_of(names.begin(), names.end(), [](const std::string &name) { return find_module_var(name); }))
        declare_all_module_settings(config);
    return config.check_module_vars(notes);
}

Status select_module(const Config &config, afmesh_module_kind kind, std::unique_ptr<Module> *out,
                     std::vector<ModuleRecord> *report) {
    std::vector<ModuleRecord> found = discover_modules(config);
    std::vector<std::string> wanted = config.get_list(kind_variable(kind));
    const bool automatic = wanted.empty() || (wanted.size() == 1 && wanted[0] == "auto");
    if (automatic) wanted = auto_order(kind, found);

    std::string failures;
    for (const std::string &name : wanted) {
        auto it = std::find_if(found.begin(), found.end(), [&](const ModuleRecord &r) {
            return r.kind == kind && r.name == name && r.state != ModuleState::kShadowed;
        });
        if (it == found.end()) {
            if (!automatic) {
                failures += "\n  " + name + ": no file " +
                            (kind == AFMESH_MODULE_DEVICE ? kDevicePrefix : kTransportPrefix) + name + ".so in " +
                            joined_search_dirs(config);
            }
            continue;
        }
        Status s = load_module(*it, out);
        if (report) report->push_back(*it);
        AFMESH_LOG(AFMESH_LOG_DEBUG, "%s module '%s' probed in %.1f ms: %s", kind_word(kind), name.c_str(),
                   it->probe_ms, module_state_name(it->state));
        if (s) {
            AFMESH_LOG(AFMESH_LOG_INFO, "%s module '%s' selected (%s)", kind_word(kind), name.c_str(), it->path.c_str());
            check_after_selection(config, kind);
            return s;
        }
        if (automatic) AFMESH_LOG(AFMESH_LOG_INFO, "%s", s.message().c_str());
        failures += "\n  " + s.message();
    }
    if (automatic) {
        return {Code::kNotFound,
                std::string("no usable ") + kind_word(kind) + " module in " + joined_search_dirs(config) + failures};
    }
    return {Code::kNotFound, std::string("none of the ") + kind_word(kind) + " modules named by " +
                                 kind_variable(kind) + "=" + config.get(kind_variable(kind)) + " could be used:" +
                                 failures};
}

}  // namespace afmesh
