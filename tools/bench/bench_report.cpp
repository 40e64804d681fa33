// SPDX-License-Identifier: Apache-2.0
// The figures both the tables and the files derive from a Row.
#include "bench_report.h"

namespace afmesh::bench {

const char *case_kind_name(CaseKind kind) {
    switch (kind) {
    case CaseKind::kSize:
        return "size";
    case CaseKind::kAfShape:
        return "af_shape";
    case CaseKind::kAfPipeline:
        break;
    }
    return "af_pipeline";
}

PerPushPull per_push_pull(const Cost &cost) {
    PerPushPull p;
    p.push_pulls = cost.push_pulls;
    if (cost.push_pulls == 0) return p;
    const auto each = [&](uint64_t total) { return static_cast<double>(total) / static_cast<double>(cost.push_pulls); };
    p.cpu_us = each(cost.cpu_ns) / 1e3;
    p.voluntary_switches = each(cost.voluntary_switches);
    p.involuntary_switches = each(cost.involuntary_switches);
    p.syscalls = each(cost.syscalls);
    p.operations = each(cost.operations);
    return p;
}

std::optional<double> ratio(double afmesh, double floor) {
    if (floor == 0) return std::nullopt;
    return afmesh / floor;
}

double gb_per_s(uint64_t bytes, double latency_us) {
    return latency_us > 0 ? static_cast<double>(bytes) / (latency_us * 1e3) : 0;
}

}  // namespace afmesh::bench
