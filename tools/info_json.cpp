// SPDX-License-Identifier: Apache-2.0
// `afmesh info --json`: the same report as one JSON object, for scripts.
#include <nlohmann/json.hpp>

#include "info_report.h"

namespace afmesh::tool {
namespace {

using nlohmann::ordered_json;  // keeps fields in the order written, for people reading the output

// A string, or null for "the module did not say" (shadowed, or failed before its query).
ordered_json string_or_null(bool known, const std::string &text) {
    return known ? ordered_json(text) : ordered_json(nullptr);
}

ordered_json module_json(const ModuleRecord &m) {
    ordered_json details = ordered_json::array();
    for (size_t start = 0; start < m.details.size();) {
        const size_t end = std::min(m.details.find('\n', start), m.details.size());
        details.push_back(m.details.substr(start, end - start));
        start = end + 1;
    }
    return {{"kind", module_kind_name(m.kind)},
            {"name", m.name},
            {"path", m.path},
            {"status", module_state_name(m.state)},
            {"reason", m.reason},
            {"version", string_or_null(!m.version.empty(), m.version)},
            {"abi", string_or_null(m.abi_major != 0, abi_text(m))},
            {"probe_ms", was_probed(m) ? ordered_json(m.probe_ms) : ordered_json(nullptr)},
            {"details", details}};
}

// The fields common to the device and the transport selections.
ordered_json selection_json(const Selection &s) {
    if (!s.selected) return {{"selected", false}, {"error", s.error}};
    return {{"selected", true}, {"name", s.name}, {"path", s.path}, {"version", s.version}};
}

ordered_json device_json(const InfoReport &report) {
    ordered_json device = selection_json(report.device);
    if (!report.device.selected) return device;
    ordered_json &devices = device["devices"] = ordered_json::array();
    for (const DeviceRow &d : report.devices)
        devices.push_back(
            {{"index", d.index}, {"name", d.name}, {"bus_id", d.bus_id}, {"total_memory", d.total_memory}});
    return device;
}

ordered_json transport_json(const InfoReport &report) {
    ordered_json transport = selection_json(report.transport);
    if (!report.transport.selected) return transport;
    const afmesh_net_caps &c = report.caps;
    transport["caps"] = {{"flags", cap_flag_names(c.flags)},
                         {"mem_kinds", mem_kind_names(c.mem_kinds)},
                         {"imm_bytes", c.imm_bytes},
                         {"max_inline", c.max_inline},
                         {"max_send_size", c.max_send_size},
                         {"max_write_size", c.max_write_size},
                         {"max_write_segs", c.max_write_segs},
                         {"recv_depth", c.recv_depth},
                         {"max_addr_size", c.max_addr_size},
                         {"eager_send_size", c.eager_send_size}};
    transport["eager"] = {{"max_bytes", report.eager.max_bytes},
                          {"max_message", report.eager.max_message},
                          {"source", eager_source_name(report.eager.source)}};
    return transport;
}

ordered_json variables_json(const std::vector<VariableRow> &rows) {
    ordered_json variables = ordered_json::array();
    for (const VariableRow &v : rows)
        variables.push_back({{"name", v.spec->name},
                             {"value", v.value},
                             {"set", v.is_set},
                             {"default", v.spec->default_value},
                             {"doc", v.spec->doc}});
    return variables;
}

// A module's settings come from the environment or from its declaration: "source" says which.
ordered_json module_variables_json(const InfoReport &report) {
    ordered_json modules = ordered_json::array();
    for (const ModuleVariables &m : report.module_variables) {
        ordered_json variables = variables_json(m.variables);
        for (ordered_json &v : variables) v["source"] = v["set"].get<bool>() ? "environment" : "default";
        modules.push_back({{"kind", module_kind_name(m.kind)}, {"module", m.module}, {"variables", variables}});
    }
    return modules;
}

// null outside a job manager; "role" is null until AFMESH_LAYOUT says what the place makes this process.
ordered_json job_json(const InfoReport &report) {
    if (!report.job_place) return nullptr;
    const JobPlace &p = *report.job_place;
    ordered_json job = {{"launcher", p.launcher},     {"rank", p.rank},
                        {"size", p.size},             {"local_rank", p.local_rank},
                        {"local_size", p.local_size}, {"first_host", p.first_host},
                        {"role", nullptr}};
    if (const std::optional<JobRole> &r = report.job_role)
        job["role"] = {{"role", r->worker ? "worker" : "server"}, {"rank", r->rank},
                       {"num_workers", r->num_workers},           {"num_servers", r->num_servers},
                       {"scheduler", r->scheduler},               {"runs_scheduler", r->runs_scheduler}};
    return job;
}

}  // namespace

void write_info_json(const InfoReport &report, FILE *out) {
    ordered_json modules = ordered_json::array();
    for (const ModuleRecord &m : report.modules) modules.push_back(module_json(m));
    const ordered_json document = {
        {"ok", report.ok()},
        {"version", AFMESH_VERSION_STRING},
        {"abi", std::to_string(AFMESH_HAL_ABI_MAJOR) + "." + std::to_string(AFMESH_HAL_ABI_MINOR)},
        {"search_dirs", report.search_dirs},
        {"modules", modules},
        {"device", device_json(report)},
        {"transport", transport_json(report)},
        {"job", job_json(report)},
        {"variables", variables_json(report.variables)},
        {"module_variables", module_variables_json(report)},
        {"security",
         {{"data_plane", report.security.data_plane},
          {"admission", report.security.admission_token ? "token" : "open"},
          {"encrypted", false}}},
        {"notes", report.notes},
        {"errors", report.errors},
    };
    // A module's text is not ours to trust as UTF-8: replace what is not, rather than throw.
    const std::string text = document.dump(2, ' ', false, ordered_json::error_handler_t::replace);
    fprintf(out, "%s\n", text.c_str());
}

}  // namespace afmesh::tool
