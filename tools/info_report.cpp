// SPDX-License-Identifier: Apache-2.0
#include "info_report.h"

#include <algorithm>
#include <memory>

#include "crypto.h"
#include "log.h"
#include "mem_kind_names.h"

namespace afmesh::tool {
namespace {

// Variables whose values must never be printed, by the words in their names.
bool is_secret(std::string_view name) {
    for (std::string_view word : {"TOKEN", "SECRET", "PASSWORD"})
        if (name.find(word) != std::string_view::npos) return true;
    return false;
}

VariableRow read_variable(const Config &config, const VarSpec &spec) {
    VariableRow row{&spec, config.get(spec.name), config.is_set(spec.name)};
    if (is_secret(spec.name) && !row.value.empty()) row.value = "********";
    return row;
}

std::vector<VariableRow> read_variables(const Config &config) {
    std::vector<VariableRow> rows;
    for (const VarSpec &spec : config_vars()) rows.push_back(read_variable(config, spec));
    return rows;
}

// After probing, when every module found has declared its settings; in the
// order the modules are listed.
std::vector<ModuleVariables> read_module_variables(const Config &config, const std::vector<ModuleRecord> &found) {
    const std::vector<ModuleVars> declared = module_vars();
    std::vector<ModuleVariables> modules;
    for (const ModuleRecord &record : found) {
        auto same = [&record](const ModuleVars &m) { return m.kind == record.kind && m.module == record.name; };
        auto it = std::find_if(declared.begin(), declared.end(), same);
        if (record.state == ModuleState::kShadowed || it == declared.end()) continue;
        ModuleVariables &shown = modules.emplace_back(ModuleVariables{it->kind, it->module, {}});
        for (const VarSpec *spec : it->vars) shown.variables.push_back(read_variable(config, *spec));
    }
    return modules;
}

Selection describe_selection(const Status &status, const std::unique_ptr<Module> &module,
                             const std::vector<ModuleRecord> &tried) {
    Selection s;
    if (!status) {
        s.error = status.message();
        return s;
    }
    s.selected = true;
    s.name = module->name();
    s.version = module->version();
    auto loaded = std::find_if(tried.rbegin(), tried.rend(),
                               [](const ModuleRecord &r) { return r.state == ModuleState::kLoaded; });
    s.path = loaded->path;
    return s;
}

// Lists the devices of the selected device module; a failure is a note, not
// an error: the module was selected, only its description is incomplete.
void list_devices(const Module &module, InfoReport &report) {
    const afmesh_device_ops &ops = module.device();
    int count = 0;
    if (ops.device_count(module.ctx(), &count) != AFMESH_HAL_OK) {
        report.notes.push_back("device module '" + module.name() + "' could not count its devices: " +
                               take_module_error());
        return;
    }
    for (int i = 0; i < count; ++i) {
        afmesh_dev_info info{};
        info.struct_size = sizeof info;
        if (ops.device_info(module.ctx(), i, &info) != AFMESH_HAL_OK) {
            report.notes.push_back("device module '" + module.name() + "' could not describe device " +
                                   std::to_string(i) + ": " + take_module_error());
            continue;
        }
        // The module's strings are fixed arrays: never trust them to be terminated.
        info.name[sizeof info.name - 1] = '\0';
        info.bus_id[sizeof info.bus_id - 1] = '\0';
        report.devices.push_back({i, info.name, info.bus_id, info.total_memory});
    }
}

// Gives every discovered module a final state: the selection already probed
// some of them; the rest are probed here (and unloaded again).
void probe_all(InfoReport &report, const std::vector<ModuleRecord> &tried) {
    for (ModuleRecord &record : report.modules) {
        auto same_file = [&record](const ModuleRecord &t) { return t.path == record.path; };
        if (auto it = std::find_if(tried.begin(), tried.end(), same_file); it != tried.end()) {
            record = *it;
        } else if (record.state == ModuleState::kFound) {
            std::unique_ptr<Module> probe;
            (void)load_module(record, &probe);  // the outcome is recorded in `record`
        }
    }
}

}  // namespace

InfoReport gather_info(const Config &config) {
    InfoReport report;
    report.job_place = config.job_place();
    report.job_role = config.job_role();
    report.search_dirs = module_search_dirs(config);
    report.modules = discover_modules(config);
    report.variables = read_variables(config);
    report.security = {std::string("mutual challenge-response on every connection, ") + crypto::describe() +
                           ", under a per-cluster key the scheduler gives the nodes it admits",
                       !config.get("AFMESH_AUTH_TOKEN").empty()};
    report.notes = config.notes();
    if (!config.env_error()) report.errors.push_back(config.env_error().message());

    std::vector<ModuleRecord> tried_devices, tried_transports;
    std::unique_ptr<Module> device, transport;
    Status device_status = select_module(config, AFMESH_MODULE_DEVICE, &device, &tried_devices);
    Status transport_status = select_module(config, AFMESH_MODULE_TRANSPORT, &transport, &tried_transports);
    report.device = describe_selection(device_status, device, tried_devices);
    report.transport = describe_selection(transport_status, transport, tried_transports);
    if (device) list_devices(*device, report);
    if (transport) {
        report.caps = transport->net_caps();
        report.eager = eager_policy(config, *transport);
    }
    for (const Selection *s : {&report.device, &report.transport})
        if (!s->selected) report.errors.push_back(s->error);

    std::vector<ModuleRecord> tried = std::move(tried_devices);
    tried.insert(tried.end(), tried_transports.begin(), tried_transports.end());
    probe_all(report, tried);
    report.module_variables = read_module_variables(config, report.modules);
    if (Status s = check_module_variables(config, &report.notes); !s) report.errors.push_back(s.message());
    return report;
}

const char *module_kind_name(afmesh_module_kind kind) {
    return kind == AFMESH_MODULE_DEVICE ? "device" : "transport";
}

std::string abi_text(const ModuleRecord &record) {
    return std::to_string(record.abi_major) + "." + std::to_string(record.abi_minor);
}

bool was_probed(const ModuleRecord &record) {
    return record.state != ModuleState::kFound && record.state != ModuleState::kShadowed;
}

std::vector<std::string> cap_flag_names(uint32_t flags) {
    std::vector<std::string> names;
    if (flags & AFMESH_NET_CAP_ORDERED) names.push_back("ordered");
    if (flags & AFMESH_NET_CAP_WAIT_FD) names.push_back("wait-fd");
    return names;
}

std::vector<std::string> mem_kind_names(uint32_t mask) {
    std::vector<std::string> names;
    for (unsigned kind = 0; kind < AFMESH_MEM_KIND_COUNT; ++kind)
        if (mask & AFMESH_MEM_BIT(kind)) names.push_back(mem_kind_name(kind));
    return names;
}

}  // namespace afmesh::tool
