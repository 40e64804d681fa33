// SPDX-License-Identifier: Apache-2.0
// `afmesh info --json`: the same report as one JSON object, for scripts.
#include <algorithm>

#include "info_report.h"
#include "json_writer.h"

namespace afmesh::tool {
namespace {

void write_strings(JsonWriter &json, const std::vector<std::string> &items) {
    json.begin_array();
    for (const std::string &item : items) json.string(item);
    json.end_array();
}

// A string, or null for "the module did not say" (shadowed, or failed before its query).
void string_or_null(JsonWriter &json, bool known, const std::string &text) {
    if (known)
        json.string(text);
    else
        json.null();
}

void write_module(JsonWriter &json, const ModuleRecord &m) {
    json.begin_object();
    json.key("kind").string(module_kind_name(m.kind));
    json.key("name").string(m.name);
    json.key("path").string(m.path);
    json.key("status").string(module_state_name(m.state));
    json.key("reason").string(m.reason);
    json.key("version");
    string_or_null(json, !m.version.empty(), m.version);
    json.key("abi");
    string_or_null(json, m.abi_major != 0, abi_text(m));
    json.key("details").begin_array();
    for (size_t start = 0; start < m.details.size();) {
        size_t end = std::min(m.details.find('\n', start), m.details.size());
        json.string(m.details.substr(start, end - start));
        start = end + 1;
    }
    json.end_array();
    json.end_object();
}

// Opens the selection's object and writes the fields common to both kinds;
// the caller adds its own and closes it.
void begin_selection(JsonWriter &json, const char *key, const Selection &s) {
    json.key(key).begin_object();
    json.key("selected").boolean(s.selected);
    if (!s.selected) {
        json.key("error").string(s.error);
        return;
    }
    json.key("name").string(s.name);
    json.key("path").string(s.path);
    json.key("version").string(s.version);
}

void write_device(JsonWriter &json, const InfoReport &report) {
    begin_selection(json, "device", report.device);
    if (report.device.selected) {
        json.key("devices").begin_array();
        for (const DeviceRow &d : report.devices) {
            json.begin_object();
            json.key("index").number(int64_t{d.index});
            json.key("name").string(d.name);
            json.key("bus_id").string(d.bus_id);
            json.key("total_memory").number(d.total_memory);
            json.end_object();
        }
        json.end_array();
    }
    json.end_object();
}

void write_transport(JsonWriter &json, const InfoReport &report) {
    begin_selection(json, "transport", report.transport);
    if (report.transport.selected) {
        const afmesh_net_caps &c = report.caps;
        json.key("caps").begin_object();
        json.key("flags");
        write_strings(json, cap_flag_names(c.flags));
        json.key("mem_kinds");
        write_strings(json, mem_kind_names(c.mem_kinds));
        json.key("imm_bytes").number(uint64_t{c.imm_bytes});
        json.key("max_inline").number(uint64_t{c.max_inline});
        json.key("max_send_size").number(uint64_t{c.max_send_size});
        json.key("max_write_size").number(c.max_write_size);
        json.key("max_write_segs").number(uint64_t{c.max_write_segs});
        json.key("recv_depth").number(uint64_t{c.recv_depth});
        json.key("max_addr_size").number(uint64_t{c.max_addr_size});
        json.end_object();
    }
    json.end_object();
}

void write_variables(JsonWriter &json, const InfoReport &report) {
    json.key("variables").begin_array();
    for (const VariableRow &v : report.variables) {
        json.begin_object();
        json.key("name").string(v.spec->name);
        json.key("value").string(v.value);
        json.key("set").boolean(v.is_set);
        json.key("default").string(v.spec->default_value);
        json.key("doc").string(v.spec->doc);
        json.end_object();
    }
    json.end_array();
}

}  // namespace

void write_info_json(const InfoReport &report, FILE *out) {
    JsonWriter json(out);
    json.begin_object();
    json.key("ok").boolean(report.ok());
    json.key("version").string(AFMESH_VERSION_STRING);
    json.key("abi").string(std::to_string(AFMESH_HAL_ABI_MAJOR) + "." + std::to_string(AFMESH_HAL_ABI_MINOR));
    json.key("search_dirs");
    write_strings(json, report.search_dirs);
    json.key("modules").begin_array();
    for (const ModuleRecord &m : report.modules) write_module(json, m);
    json.end_array();
    write_device(json, report);
    write_transport(json, report);
    write_variables(json, report);
    json.key("security").begin_object();
    json.key("data_plane").string(report.security.data_plane);
    json.key("admission").string(report.security.admission_token ? "token" : "open");
    json.key("encrypted").boolean(false);
    json.end_object();
    json.key("notes");
    write_strings(json, report.notes);
    json.key("errors");
    write_strings(json, report.errors);
    json.end_object();
    json.finish();
}

}  // namespace afmesh::tool
