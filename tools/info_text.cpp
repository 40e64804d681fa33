// SPDX-License-Identifier: Apache-2.0
// `afmesh info` as text for people.
#include <algorithm>
#include <cinttypes>
#include <cstdint>
#include <cstring>

#include "info_report.h"

namespace afmesh::tool {
namespace {

std::string join(const std::vector<std::string> &items, const char *separator) {
    std::string out;
    for (const std::string &item : items) out += (out.empty() ? "" : separator) + item;
    return out;
}

// Writes a possibly multi-line message with every line indented by `indent`.
void write_indented(FILE *out, const std::string &text, const char *indent) {
    size_t start = 0;
    while (start <= text.size()) {
        size_t end = text.find('\n', start);
        if (end == std::string::npos) end = text.size();
        fprintf(out, "%s%.*s\n", indent, static_cast<int>(end - start), text.c_str() + start);
        start = end + 1;
    }
}

std::string human_bytes(uint64_t bytes) {
    // Modules report "no limit" as the largest value.
    if (bytes == UINT64_MAX) return "unlimited";
    constexpr const char *kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    double value = static_cast<double>(bytes);
    size_t unit = 0;
    while (value >= 1024 && unit + 1 < std::size(kUnits)) {
        value /= 1024;
        ++unit;
    }
    char buf[32];
    snprintf(buf, sizeof buf, unit == 0 ? "%.0f %s" : "%.1f %s", value, kUnits[unit]);
    return buf;
}

std::string probe_time_text(const ModuleRecord &m) {
    char text[32];
    snprintf(text, sizeof text, "%.1f ms", m.probe_ms);
    return text;
}

void write_search_path(const InfoReport &report, FILE *out) {
    fprintf(out, "Module search path:\n");
    for (size_t i = 0; i < report.search_dirs.size(); ++i)
        fprintf(out, "  %zu. %s\n", i + 1, report.search_dirs[i].c_str());
}

void write_modules(const InfoReport &report, FILE *out) {
    fprintf(out, "\nModules found:%s\n", report.modules.empty() ? " none" : "");
    for (const ModuleRecord &m : report.modules) {
        std::string status = module_state_name(m.state);
        // The reason already reads "shadowed by <path>" for a shadowed module.
        if (m.state == ModuleState::kShadowed)
            status = m.reason;
        else if (!m.reason.empty())
            status += ": " + m.reason;
        fprintf(out, "  %-9s  %-10s  %s\n", module_kind_name(m.kind), m.name.c_str(), status.c_str());
        // Whatever the module's query told about itself, when it got that far.
        std::vector<std::string> told;
        if (!m.version.empty()) told.push_back("version " + m.version);
        if (m.abi_major != 0) told.push_back("ABI " + abi_text(m));
        if (was_probed(m)) told.push_back("probed in " + probe_time_text(m));
        std::string detail = told.empty() ? "" : "  (" + join(told, ", ") + ")";
        fprintf(out, "      %s%s\n", m.path.c_str(), detail.c_str());
        if (!m.details.empty()) write_indented(out, m.details, "        ");
    }
}

void write_selection(const char *what, const Selection &s, FILE *out) {
    if (!s.selected) {
        fprintf(out, "  %-9s  none:\n", what);
        write_indented(out, s.error, "      ");
        return;
    }
    fprintf(out, "  %-9s  %s  (version %s)  %s\n", what, s.name.c_str(), s.version.c_str(), s.path.c_str());
}

void write_selected(const InfoReport &report, FILE *out) {
    fprintf(out, "\nSelected (AFMESH_DEVICE, AFMESH_TRANSPORT):\n");
    write_selection("device", report.device, out);
    for (const DeviceRow &d : report.devices)
        fprintf(out, "      device %d: %s%s%s, %s\n", d.index, d.name.c_str(), d.bus_id.empty() ? "" : " at ",
                d.bus_id.c_str(), human_bytes(d.total_memory).c_str());
    write_selection("transport", report.transport, out);
    if (!report.transport.selected) return;
    const afmesh_net_caps &c = report.caps;
    std::string flags = join(cap_flag_names(c.flags), ", ");
    fprintf(out,
            "      flags: %s\n"
            "      memory kinds: %s\n"
            "      immediate: %" PRIu32 " B, inline: %" PRIu32 " B, max send: %" PRIu32
            " B, max write: %s in up to %" PRIu32 " segments, recv depth: %" PRIu32 ", address: %" PRIu32 " B\n",
            flags.empty() ? "(none)" : flags.c_str(), join(mem_kind_names(c.mem_kinds), ", ").c_str(),
            c.imm_bytes, c.max_inline, c.max_send_size, human_bytes(c.max_write_size).c_str(),
            std::max<uint32_t>(c.max_write_segs, 1), c.recv_depth, c.max_addr_size);
    const EagerPolicy &e = report.eager;
    if (e.max_bytes == 0 || e.max_message == 0)
        fprintf(out, "      eager: never (from %s); every tensor goes in a write of its own\n",
                eager_source_name(e.source));
    else
        fprintf(out,
                "      eager: up to %" PRIu64 " B of tensors ride inside a request or answer of up to %" PRIu64
                " B (from %s)\n",
                e.max_bytes, e.max_message, eager_source_name(e.source));
}

// Each row: name, where the value came from (`set_word` when set), the value, and the doc line below.
void write_rows(const std::vector<VariableRow> &rows, const char *set_word, FILE *out) {
    int width = 0;
    for (const VariableRow &v : rows) width = std::max(width, static_cast<int>(strlen(v.spec->name)));
    for (const VariableRow &v : rows) {
        const char *value = v.value.empty() ? "(empty)" : v.value.c_str();
        fprintf(out, "  %-*s  %-7s  %s\n", width, v.spec->name, v.is_set ? set_word : "default", value);
        fprintf(out, "  %-*s  %s\n", width, "", v.spec->doc);
    }
}

void write_variables(const InfoReport &report, FILE *out) {
    fprintf(out, "\nSettings:\n");
    write_rows(report.variables, "set", out);
    // A module's settings come from the environment or from its declaration.
    for (const ModuleVariables &m : report.module_variables) {
        fprintf(out, "\nSettings of %s module %s:\n", module_kind_name(m.kind), m.module.c_str());
        write_rows(m.variables, "env", out);
    }
}

void write_security(const SecurityReport &s, FILE *out) {
    fprintf(out,
            "\nSecurity:\n"
            "  data plane  authenticated: %s\n"
            "  admission   %s\n"
            "  traffic     not encrypted: this keeps strangers out, not an attacker on the path\n",
            s.data_plane.c_str(),
            s.admission_token ? "AFMESH_AUTH_TOKEN set: the scheduler admits only nodes that hold it"
                              : "open: any process that reaches the scheduler before the roster is complete may "
                                "join (set AFMESH_AUTH_TOKEN)");
}

void write_job(const InfoReport &report, FILE *out) {
    if (!report.job_place) return;
    fprintf(out, "\nJob manager:\n");
    if (report.job_role)
        write_indented(out, describe_job(*report.job_place, *report.job_role), "  ");
    else
        write_indented(out,
                       "started by " + report.job_place->launcher + " (global rank " +
                           std::to_string(report.job_place->rank) + " of " + std::to_string(report.job_place->size) +
                           "); set AFMESH_LAYOUT to take the role, rank and scheduler from it",
                       "  ");
}

void write_notes(const InfoReport &report, FILE *out) {
    if (report.notes.empty()) return;
    fprintf(out, "\nNotes:\n");
    for (const std::string &note : report.notes) write_indented(out, note, "  ");
}

}  // namespace

void write_info_text(const InfoReport &report, FILE *out) {
    fprintf(out, "afmesh %s, module ABI %d.%d\n\n", AFMESH_VERSION_STRING, AFMESH_HAL_ABI_MAJOR, AFMESH_HAL_ABI_MINOR);
    write_search_path(report, out);
    write_modules(report, out);
    write_selected(report, out);
    write_job(report, out);
    write_variables(report, out);
    write_security(report.security, out);
    write_notes(report, out);
    // Errors are not repeated here: the command writes them to stderr.
}

}  // namespace afmesh::tool
