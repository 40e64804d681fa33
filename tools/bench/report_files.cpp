// SPDX-License-Identifier: Apache-2.0
// `afmesh bench --json FILE` and `--csv FILE`: one document, described by
// docs/bench-schema.json. The CSV has a line per row of the JSON's "rows",
// the run's own fields repeated on each so that a line stands alone; its
// columns are the JSON's names, nested ones joined with dots ("cost.floor.cpu_us").
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "bench_check.h"
#include "bench_report.h"

namespace afmesh::bench {
namespace {

using nlohmann::ordered_json;  // keeps fields in the order written, for people reading the files

// Bumped when a field changes meaning or goes away (adding one does not).
constexpr int kSchemaVersion = 1;

ordered_json ratio_or_null(double afmesh, double floor) {
    const std::optional<double> r = ratio(afmesh, floor);
    return r ? ordered_json(*r) : ordered_json(nullptr);
}

ordered_json latency(const Summary &s, uint64_t bytes) {
    return {{"samples", s.samples},
            {"p50_us", s.p50_us},
            {"p99_us", s.p99_us},
            {"max_us", s.max_us},
            {"gb_per_s", gb_per_s(bytes, s.p50_us)}};
}

ordered_json cost(const PerPushPull &p) {
    return {{"push_pulls", p.push_pulls},
            {"cpu_us", p.cpu_us},
            {"voluntary_switches", p.voluntary_switches},
            {"involuntary_switches", p.involuntary_switches},
            {"syscalls", p.syscalls},
            {"operations", p.operations}};
}

ordered_json row_json(const Row &r) {
    ordered_json row = {{"case", r.name},
                        {"kind", case_kind_name(r.kind)},
                        {"poll", r.poll},
                        {"push_bytes", r.push_bytes},
                        {"pull_bytes", r.pull_bytes},
                        {"bytes_per_iteration", r.bytes_per_iteration},
                        {"afmesh", latency(r.afmesh, r.bytes_per_iteration)}};
    const PerPushPull afmesh = per_push_pull(r.cost.afmesh), floor = per_push_pull(r.cost.floor);
    if (r.has_floor) {
        row["floor"] = latency(r.floor, r.bytes_per_iteration);
        row["floor_primitive"] = r.floor_primitive;
        row["ratio"] = {{"p50", ratio_or_null(r.afmesh.p50_us, r.floor.p50_us)},
                        {"p99", ratio_or_null(r.afmesh.p99_us, r.floor.p99_us)},
                        {"max", ratio_or_null(r.afmesh.max_us, r.floor.max_us)},
                        {"cpu", ratio_or_null(afmesh.cpu_us, floor.cpu_us)},
                        {"voluntary_switches", ratio_or_null(afmesh.voluntary_switches, floor.voluntary_switches)},
                        {"involuntary_switches", ratio_or_null(afmesh.involuntary_switches, floor.involuntary_switches)},
                        {"syscalls", ratio_or_null(afmesh.syscalls, floor.syscalls)},
                        {"operations", ratio_or_null(afmesh.operations, floor.operations)}};
    }
    row["cost"] = {{"afmesh", cost(afmesh)}};
    if (r.has_floor) row["cost"]["floor"] = cost(floor);
    if (!r.stages.empty()) {
        ordered_json servers = ordered_json::array();
        for (size_t s = 0; s < r.stages.size(); ++s)
            servers.push_back({{"server", s},
                               {"request_net_us", r.stages[s].request_net_us},
                               {"batch_wait_us", r.stages[s].batch_wait_us},
                               {"compute_us", r.stages[s].compute_us},
                               {"response_net_us", r.stages[s].response_net_us}});
        row["per_server"] = std::move(servers);
    }
    return row;
}

// The run's own fields: everything in the document but its rows.
ordered_json run_json(const RunInfo &info, const Options &o) {
    ordered_json run = {{"schema_version", kSchemaVersion},
                        {"afmesh_version", info.afmesh_version},
                        {"transport", info.transport}};
    if (!info.provider.empty()) run["provider"] = info.provider;
    run["device"] = info.device;
    run["workers"] = info.workers;
    run["servers"] = info.servers;
    run["batch"] = o.batch == AFMESH_BATCH_ALL_WORKERS ? "all" : "any";
    run["prepared"] = o.prepare;
    if (o.seconds > 0)
        run["seconds"] = o.seconds;
    else
        run["iterations"] = o.iters;
    run["warmup"] = o.warmup;
    run["tokens"] = o.tokens;
    run["hidden"] = o.hidden;
    run["push_dtype"] = o.push_dtype.name;
    run["pull_dtype"] = o.pull_dtype.name;
    run["microbatches"] = o.microbatches;
    run["layers"] = o.layers;
    return run;
}

// Writes `text` to `path`, or dies saying why it could not.
void write_file(const std::string &path, const std::string &text) {
    FILE *f = fopen(path.c_str(), "w");
    if (!f) die("cannot write " + path);
    const bool written = fwrite(text.data(), 1, text.size(), f) == text.size();
    if (fclose(f) != 0 || !written) die("cannot write " + path);
}

// `value`'s scalars under their dotted names (arrays by index), in order.
void flatten(const ordered_json &value, const std::string &name, ordered_json *out) {
    if (value.is_structured()) {
        for (const auto &[key, item] : value.items()) flatten(item, name.empty() ? key : name + "." + key, out);
        return;
    }
    (*out)[name] = value;
}

// One CSV field: text quoted when it must be.
std::string csv_field(const std::string &text) {
    if (text.find_first_of(",\"\n") == std::string::npos) return text;
    std::string quoted = "\"";
    for (char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
    return quoted + "\"";
}

// A scalar as a CSV field: numbers as the JSON writes them, null empty.
std::string csv_field(const ordered_json &value) {
    if (value.is_null()) return "";
    return csv_field(value.is_string() ? value.get<std::string>() : value.dump());
}

std::string csv_line(const std::vector<std::string> &fields) {
    std::string line;
    for (size_t i = 0; i < fields.size(); ++i) line += (i ? "," : "") + fields[i];
    return line + "\n";
}

std::string csv_text(const ordered_json &document) {
    ordered_json run = document;
    run.erase("rows");
    std::vector<ordered_json> lines;
    std::vector<std::string> columns;  // every name some row has, in the order they first appear
    for (const ordered_json &row : document["rows"]) {
        ordered_json line = ordered_json::object();
        flatten(run, "", &line);
        flatten(row, "", &line);
        for (const auto &[name, value] : line.items())
            if (std::find(columns.begin(), columns.end(), name) == columns.end()) columns.push_back(name);
        lines.push_back(std::move(line));
    }
    std::vector<std::string> fields;
    for (const std::string &name : columns) fields.push_back(csv_field(name));
    std::string text = csv_line(fields);
    for (const ordered_json &line : lines) {
        fields.clear();
        for (const std::string &name : columns)
            fields.push_back(line.contains(name) ? csv_field(line[name]) : std::string());
        text += csv_line(fields);
    }
    return text;
}

}  // namespace

void write_report_files(const RunInfo &info, const Options &o, const std::vector<Row> &rows) {
    if (o.json.empty() && o.csv.empty()) return;
    ordered_json document = run_json(info, o);
    document["rows"] = ordered_json::array();
    for (const Row &r : rows) document["rows"].push_back(row_json(r));
    if (!o.json.empty()) write_file(o.json, document.dump(2, ' ', false, ordered_json::error_handler_t::replace) + "\n");
    if (!o.csv.empty()) write_file(o.csv, csv_text(document));
}

}  // namespace afmesh::bench
