// SPDX-License-Identifier: Apache-2.0
// What `afmesh bench` costs besides time: CPU, context switches, system
// calls and transport operations, per phase of the run.
//
// Every process of the run (workers and servers) keeps a CostMeter. The run
// alternates between timing afmesh and timing the floor; each process is in
// one phase at a time (workers switch in WorkerBench::enter_phase, servers
// when they handle the phase request), and the meter gives each phase what
// the process spent while in it: its getrusage(RUSAGE_SELF) delta, plus the
// system calls and operations of the side being timed (afmesh's own
// counters in an afmesh phase, the floor's in a floor phase). Idle time
// (phase switches, gathering the records) is kept by no phase.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "afmesh/afmesh.h"

namespace afmesh::bench {

class FloorEndpoint;

/** One process's spending in one phase (or a cluster's, summed). */
struct Cost {
    uint64_t cpu_ns = 0;                // user + system
    uint64_t voluntary_switches = 0;    // the process gave up the core (slept, waited)
    uint64_t involuntary_switches = 0;  // the scheduler took the core away
    uint64_t syscalls = 0;
    uint64_t operations = 0;            // transport posts: writes, gathered writes, messages
    uint64_t push_pulls = 0;            // workers only: the push-pulls run in the phase

    Cost &operator+=(const Cost &other);
};

/** A case's cost, by the side being timed. */
struct CaseCost {
    Cost afmesh, floor;

    CaseCost &operator+=(const CaseCost &other);
    /** Fixed size, so that records can be concatenated and split again. */
    static constexpr size_t kEncodedBytes = 2 * 6 * sizeof(uint64_t);
    std::vector<uint8_t> encode() const;
    static bool decode(const uint8_t *data, size_t len, CaseCost *out);
};

enum class Phase : uint8_t {
    kIdle,    // neither side is timed: control traffic, kept by no phase
    kAfmesh,  // afmesh is timed
    kFloor,   // the floor is timed
};

class CostMeter {
public:
    /** `node` and `floor` must outlive the meter. Starts idle. */
    CostMeter(afmesh_node *node, const FloorEndpoint &floor);

    Phase phase() const { return phase_; }
    /** Gives the current phase what was spent since the last switch, then switches. */
    void enter(Phase next);
    /** One push-pull of this worker, for the current phase. */
    void count_push_pull();
    /** What the phases have accumulated so far; starts them over. */
    CaseCost take();

private:
    // One side's counters: afmesh's engine, or the floor.
    struct Counters {
        uint64_t syscalls = 0, operations = 0;
    };
    // Monotonic totals of this process at one instant.
    struct Reading {
        uint64_t cpu_ns = 0, voluntary_switches = 0, involuntary_switches = 0;
        Counters afmesh, floor;
    };
    Reading read() const;

    afmesh_node *const node_;
    const FloorEndpoint &floor_;
    Phase phase_ = Phase::kIdle;
    Reading since_;
    CaseCost spent_;
    uint64_t push_pulls_ = 0;  // in the current phase, since the last switch
};

}  // namespace afmesh::bench
