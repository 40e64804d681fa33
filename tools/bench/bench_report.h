// SPDX-License-Identifier: Apache-2.0
// What `afmesh bench` found, and how worker 0 reports it: the tables on
// stdout (report_table.cpp), and --json / --csv (report_files.cpp), whose
// schema is docs/bench-schema.json.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bench_options.h"
#include "cost.h"
#include "latency_stats.h"

namespace afmesh::bench {

/** The run as a whole. */
struct RunInfo {
    std::string afmesh_version, transport, device;
    std::string provider;  // the fabric provider when known, else ""
    int workers = 0, servers = 0;
};

enum class CaseKind {
    kSize,        // one of --sizes, pushed and pulled
    kAfShape,     // --tokens x --hidden, one push-pull at a time
    kAfPipeline,  // the AF shape, --layers x --microbatches in flight (floor: floor_lanes())
};
const char *case_kind_name(CaseKind kind);

/** Where one server's share of a pipeline push-pull's time goes (--trace): p50 of each stage, us. */
struct ServerStages {
    double request_net_us = 0;   // the request on the wire
    double batch_wait_us = 0;    // waiting for get_batch (the AF barrier)
    double compute_us = 0;       // the server's own work
    double response_net_us = 0;  // the answer on the wire
};

/** One case in one polling mode. */
struct Row {
    std::string name, poll;
    CaseKind kind = CaseKind::kSize;
    uint64_t push_bytes = 0, pull_bytes = 0;  // per server, per push-pull
    uint64_t bytes_per_iteration = 0;         // both directions, every server
    Summary afmesh, floor;
    bool has_floor = false;
    std::string floor_primitive;  // the faster raw exchange: "write" or "send" (floor.h)
    CaseCost cost;                      // the whole cluster's
    std::vector<ServerStages> stages;  // one per server, with --trace on pipeline rows
};

/** A side's cost per push-pull: the cluster's total over the workers' push-pulls. */
struct PerPushPull {
    uint64_t push_pulls = 0;
    double cpu_us = 0, voluntary_switches = 0, involuntary_switches = 0, syscalls = 0, operations = 0;
};
PerPushPull per_push_pull(const Cost &cost);

/** afmesh / floor; none when the floor's figure is 0. */
std::optional<double> ratio(double afmesh, double floor);
/** GB/s moved at this latency. */
double gb_per_s(uint64_t bytes, double latency_us);

/** The latency table, the cost table and, with --trace, the per-server stages. */
void print_tables(const RunInfo &info, const Options &o, const std::vector<Row> &rows);
/** --json and --csv, where asked for. */
void write_report_files(const RunInfo &info, const Options &o, const std::vector<Row> &rows);

}  // namespace afmesh::bench
