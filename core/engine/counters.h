// SPDX-License-Identifier: Apache-2.0
// The engine's counters: what a node did, kept on the hot path without a
// lock or a system call, read at any time by afmesh_stats_get.
//
// A Tally is a relaxed atomic: bumping one costs an uncontended locked add
// (nanoseconds), reading one never stops the writer, and tsan sees no race.
// Most tallies are bumped with the engine lock held, so they are exact
// once traffic has stopped; the set is never one snapshot under traffic.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "afmesh/afmesh.h"
#include "engine/wire.h"

namespace afmesh {

class Tally {
public:
    void add(uint64_t n = 1) { value_.fetch_add(n, std::memory_order_relaxed); }
    uint64_t get() const { return value_.load(std::memory_order_relaxed); }

private:
    std::atomic<uint64_t> value_{0};
};

/** How push-pulls ended: a worker's, or a worker's with one server (its part). */
struct OutcomeCounters {
    Tally started, completed, peer_failed, failed;
    void add_to(afmesh_stats *out) const;
};

/** What the engine counts per peer: the [peer] fields of afmesh_stats, and the push-pulls that involved it. */
struct PeerCounters {
    OutcomeCounters push_pulls;
    Tally requests, responses, push_bytes, pull_bytes;
    Tally eager_requests, eager_responses, eager_bytes, mailbox_requests, mailbox_responses;
    Tally credit_waits;
    Tally writes, gathered_writes, messages, queue_full;
    Tally heartbeats_missed, protocol_errors;

    /** A REQUEST sent (worker) or taken in (server): the same counts on both sides. */
    void count(const wire::Request &m);
    /** A RESPONSE sent (server) or taken in (worker). */
    void count(const wire::Response &m);
    /** Adds the [peer] fields to `out`. */
    void add_traffic_to(afmesh_stats *out) const;
};

/** What a Progress counts: the [node] progress fields of afmesh_stats. */
struct ProgressCounters {
    Tally completions, polls, empty_polls;
    Tally transport_sleeps, condvar_sleeps, naps, wakeups, yields;
    Tally drains;  // reads that consume a wake-up: system calls, exported only inside `syscalls`

    /** System calls among these: every sleep, wake-up, drain and yield (the condition variable's futex included). */
    uint64_t syscalls() const;
    void add_to(afmesh_stats *out) const;
};

/** Push-pull completion times (the worker's, node-wide), in log2 microsecond buckets. */
class LatencyHistogram {
public:
    void record(uint64_t ns);
    void add_to(afmesh_stats *out) const;

private:
    Tally sum_ns_;
    Tally buckets_[AFMESH_STATS_LATENCY_BUCKETS];
};

/** A node's counters: one PeerCounters per peer (the servers of a worker, the workers of a server) and its own. */
class NodeCounters {
public:
    explicit NodeCounters(size_t peers) : peers_(std::make_unique<PeerCounters[]>(peers)), num_peers_(peers) {}

    size_t num_peers() const { return num_peers_; }
    /** The counters of peer `rank`, which the caller has checked is below num_peers(). */
    PeerCounters &peer(int32_t rank) { return peers_[static_cast<size_t>(rank)]; }
    const PeerCounters &peer(int32_t rank) const { return peers_[static_cast<size_t>(rank)]; }

    OutcomeCounters push_pulls;  // whole push-pulls (a peer's count their parts)
    LatencyHistogram latency;
    Tally connections_refused;

    /** Adds the node's totals, but for the progress fields, to `out`. */
    void add_to(afmesh_stats *out) const;

private:
    std::unique_ptr<PeerCounters[]> peers_;
    const size_t num_peers_;
};

}  // namespace afmesh
