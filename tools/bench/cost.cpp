// SPDX-License-Identifier: Apache-2.0
#include "cost.h"

#include <sys/resource.h>

#include "bench_check.h"
#include "byte_codec.h"
#include "floor.h"

namespace afmesh::bench {
namespace {

uint64_t ns_of(const timeval &t) {
    return static_cast<uint64_t>(t.tv_sec) * 1000000000u + static_cast<uint64_t>(t.tv_usec) * 1000u;
}

// The fields of a Cost, in one order for every loop over them.
constexpr uint64_t Cost::*kFields[] = {&Cost::cpu_ns,   &Cost::voluntary_switches, &Cost::involuntary_switches,
                                       &Cost::syscalls, &Cost::operations,         &Cost::push_pulls};
static_assert(CaseCost::kEncodedBytes == 2 * std::size(kFields) * sizeof(uint64_t));

}  // namespace

Cost &Cost::operator+=(const Cost &other) {
    for (auto field : kFields) this->*field += other.*field;
    return *this;
}

CaseCost &CaseCost::operator+=(const CaseCost &other) {
    afmesh += other.afmesh;
    floor += other.floor;
    return *this;
}

std::vector<uint8_t> CaseCost::encode() const {
    std::vector<uint8_t> out;
    ByteWriter w(out);
    for (const Cost *side : {&afmesh, &floor})
        for (auto field : kFields) w.u64(side->*field);
    return out;
}

bool CaseCost::decode(const uint8_t *data, size_t len, CaseCost *out) {
    ByteReader r(data, len);
    for (Cost *side : {&out->afmesh, &out->floor})
        for (auto field : kFields) side->*field = r.u64();
    return r.done();
}

CostMeter::CostMeter(afmesh_node *node, const FloorEndpoint &floor) : node_(node), floor_(floor), since_(read()) {}

CostMeter::Reading CostMeter::read() const {
    Reading now;
    rusage usage{};
    if (getrusage(RUSAGE_SELF, &usage) != 0) die("getrusage failed");
    now.cpu_ns = ns_of(usage.ru_utime) + ns_of(usage.ru_stime);
    now.voluntary_switches = static_cast<uint64_t>(usage.ru_nvcsw);
    now.involuntary_switches = static_cast<uint64_t>(usage.ru_nivcsw);
    afmesh_stats stats{};
    stats.struct_size = sizeof stats;
    check(afmesh_stats_get(node_, &stats), "stats");
    now.afmesh = {stats.syscalls, stats.writes + stats.gathered_writes + stats.messages};
    uint64_t floor_syscalls = 0;
    if (Status s = floor_.syscalls(&floor_syscalls); !s) die(s.message());
    now.floor = {floor_syscalls, floor_.operations()};
    return now;
}

void CostMeter::enter(Phase next) {
    const Reading now = read();
    if (phase_ != Phase::kIdle) {
        const bool afmesh = phase_ == Phase::kAfmesh;
        Cost &side = afmesh ? spent_.afmesh : spent_.floor;
        const Counters &timed_now = afmesh ? now.afmesh : now.floor;
        const Counters &timed_since = afmesh ? since_.afmesh : since_.floor;
        side.cpu_ns += now.cpu_ns - since_.cpu_ns;
        side.voluntary_switches += now.voluntary_switches - since_.voluntary_switches;
        side.involuntary_switches += now.involuntary_switches - since_.involuntary_switches;
        side.syscalls += timed_now.syscalls - timed_since.syscalls;
        side.operations += timed_now.operations - timed_since.operations;
        side.push_pulls += push_pulls_;
    }
    since_ = now;
    push_pulls_ = 0;
    phase_ = next;
}

void CostMeter::count_push_pull() { ++push_pulls_; }

CaseCost CostMeter::take() {
    CaseCost spent = spent_;
    spent_ = {};
    return spent;
}

}  // namespace afmesh::bench
