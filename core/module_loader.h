// SPDX-License-Identifier: Apache-2.0
// The module loader: finds libafmesh_{dev,net}_<name>.so files on the search
// path, checks their ABI, probes them with init(), and selects the device and
// transport the configuration asks for.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "afmesh/hal/device.h"
#include "afmesh/hal/transport.h"
#include "config.h"
#include "status.h"

namespace afmesh {

/** What became of one module file. */
enum class ModuleState {
    kFound,       // on the search path, not loaded yet
    kLoaded,      // dlopen, ABI check and init() succeeded
    kNotPresent,  // init() said there is no driver/device here (normal)
    kError,       // dlopen, the query symbol, the ABI or init() failed
    kShadowed,    // a file of the same name earlier on the search path wins
};
const char *module_state_name(ModuleState state);

/** One module file found on the search path. */
struct ModuleRecord {
    afmesh_module_kind kind = AFMESH_MODULE_DEVICE;
    std::string name;  // "cpu", "tcp"...
    std::string path;
    ModuleState state = ModuleState::kFound;
    std::string reason;   // why it is not loaded, or what shadows it
    std::string version;  // from the descriptor, once queried
    unsigned abi_major = 0, abi_minor = 0;
    std::string details;  // a loaded transport's own account (ABI 1.1 describe), one item per line
    double probe_ms = 0;  // how long dlopen, the query and init() took, once tried (whatever the outcome)
};

/** A loaded and initialised module: owns the dlopen handle and the module context. */
class Module {
public:
    ~Module();
    Module(const Module &) = delete;
    Module &operator=(const Module &) = delete;

    const std::string &name() const { return name_; }
    const std::string &version() const { return version_; }
    /** The ABI minor the module answered with: what it understands beyond 1.0. */
    unsigned abi_minor() const { return abi_minor_; }
    afmesh_module_kind kind() const { return kind_; }
    void *ctx() const { return ctx_; }
    /** Valid for device modules. */
    const afmesh_device_ops &device() const { return *static_cast<const afmesh_device_ops *>(ops_); }
    /** Valid for transport modules. */
    const afmesh_net_ops &net() const { return *static_cast<const afmesh_net_ops *>(ops_); }
    const afmesh_net_caps &net_caps() const { return caps_; }
    /** A transport's describe() text (ABI 1.1), or "" when it has none. */
    std::string describe() const;
    /** Most segments the transport's write_imm_v (ABI 1.2) takes; 0 when it has none. */
    uint32_t write_segs() const;
    /** A transport's caps.eager_send_size (ABI 1.5), at most its max_send_size; 0 when it gives none. */
    uint32_t eager_send_size() const;
    /** A transport's own counters (ABI 1.3 counters()): none when it counts nothing; an error when it fails. */
    Status counters(std::vector<afmesh_net_counter> *out) const;
    /** A transport's "syscalls" counter: 0 when it has none; an error when counters() fails. */
    Status syscalls(uint64_t *out) const;

private:
    friend Status load_module(ModuleRecord &record, std::unique_ptr<Module> *out);
    Module() = default;

    void *handle_ = nullptr;
    const void *ops_ = nullptr;
    void *ctx_ = nullptr;
    afmesh_module_kind kind_ = AFMESH_MODULE_DEVICE;
    std::string name_, version_;
    unsigned abi_minor_ = 0;
    afmesh_net_caps caps_{};
};

/** The host services handed to every module. */
const afmesh_host_services *host_services();

/**
 * Gives the modules `value` for the setting `name` when neither the
 * environment nor the table's default sets it: a choice the core made for
 * them (the NIC nearest the GPU). Modules read it as any setting, through
 * the host services. The first value offered stays for the process: false
 * when a different one was offered before.
 */
bool offer_module_setting(const std::string &name, const std::string &value);

/** Directories searched, in order: AFMESH_MODULE_PATH, beside the core, the install dir. */
std::vector<std::string> module_search_dirs(const Config &config);

/** Every module file on the search path, earliest first; later duplicates are kShadowed. */
std::vector<ModuleRecord> discover_modules(const Config &config);

/**
 * dlopen()s `record`, checks its ABI and kind, hands the settings it
 * declares (ABI 1.4) to the configuration, and runs init(). Updates
 * record.state/reason/version. NOT_PRESENT and errors carry the reason.
 */
Status load_module(ModuleRecord &record, std::unique_ptr<Module> *out);

/**
 * Checks the AFMESH_* variables of `config` outside the core's table
 * (Config::check_module_vars) against the settings the modules declare
 * (ABI 1.4). The loader knows the settings of every module it has queried;
 * only when some variable is declared by none of them are the other
 * modules on the search path queried (dlopen and query, never init()), so
 * that a name is called unknown only when no module declares it.
 */
Status check_module_variables(const Config &config, std::vector<std::string> *notes);

/**
 * Queries every module on the search path not queried yet (dlopen and
 * query, never init()), so that every setting a module declares is known:
 * for a name that may be any module's, such as one given in
 * afmesh_config.settings before any module was loaded.
 */
void declare_all_module_settings(const Config &config);

/**
 * Selects the device (kind DEVICE, variable AFMESH_DEVICE) or transport
 * (kind TRANSPORT, AFMESH_TRANSPORT) module. With 'auto' the first of the
 * built-in priority order whose init succeeds wins and failures are info
 * lines; a module named explicitly that fails is an error carrying its
 * reason, and a name that is not on the search path is an error naming the
 * directories searched. `report`, when given, receives every record tried.
 * Once the process has selected a module of each kind (a node's start-up),
 * a successful selection also runs check_module_variables() and logs each
 * of its notes once.
 */
Status select_module(const Config &config, afmesh_module_kind kind, std::unique_ptr<Module> *out,
                     std::vector<ModuleRecord> *report = nullptr);

}  // namespace afmesh
