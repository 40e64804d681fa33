// SPDX-License-Identifier: Apache-2.0
#include "counters.h"

#include <algorithm>
#include <bit>

namespace afmesh {

void OutcomeCounters::add_to(afmesh_stats *out) const {
    out->push_pulls_started += started.get();
    out->push_pulls_completed += completed.get();
    out->push_pulls_peer_failed += peer_failed.get();
    out->push_pulls_failed += failed.get();
}

void PeerCounters::count(const wire::Request &m) {
    const uint64_t bytes = wire::eager_bytes(m);  // its pushes' bytes, eager or not
    requests.add();
    if (!m.aborted) push_bytes.add(bytes);
    if (m.eager) {
        eager_requests.add();
        eager_bytes.add(bytes);
    }
    if (m.carried) mailbox_requests.add();
}

void PeerCounters::count(const wire::Response &m) {
    const uint64_t bytes = wire::eager_bytes(m);  // its answers' bytes, eager or not
    responses.add();
    pull_bytes.add(bytes);
    if (m.eager) {
        eager_responses.add();
        eager_bytes.add(bytes);
    }
    if (m.carried) mailbox_responses.add();
}

void PeerCounters::add_traffic_to(afmesh_stats *out) const {
    out->requests += requests.get();
    out->responses += responses.get();
    out->push_bytes += push_bytes.get();
    out->pull_bytes += pull_bytes.get();
    out->eager_requests += eager_requests.get();
    out->eager_responses += eager_responses.get();
    out->eager_bytes += eager_bytes.get();
    out->mailbox_requests += mailbox_requests.get();
    out->mailbox_responses += mailbox_responses.get();
    out->credit_waits += credit_waits.get();
    out->writes += writes.get();
    out->gathered_writes += gathered_writes.get();
    out->messages += messages.get();
    out->queue_full += queue_full.get();
    out->heartbeats_missed += heartbeats_missed.get();
    out->protocol_errors += protocol_errors.get();
}

uint64_t ProgressCounters::syscalls() const {
    return transport_sleeps.get() + condvar_sleeps.get() + naps.get() + wakeups.get() + drains.get() + yields.get();
}

void ProgressCounters::add_to(afmesh_stats *out) const {
    out->completions += completions.get();
    out->polls += polls.get();
    out->empty_polls += empty_polls.get();
    out->transport_sleeps += transport_sleeps.get();
    out->condvar_sleeps += condvar_sleeps.get();
    out->naps += naps.get();
    out->wakeups += wakeups.get();
    out->yields += yields.get();
    out->syscalls += syscalls();
}

void LatencyHistogram::record(uint64_t ns) {
    sum_ns_.add(ns);
    // Bucket i holds (2^(i-1), 2^i] microseconds; bucket 0 everything up to 1 us.
    const uint64_t us = (ns + 999) / 1000;
    const unsigned bucket = us <= 1 ? 0 : static_cast<unsigned>(std::bit_width(us - 1));
    buckets_[std::min<unsigned>(bucket, AFMESH_STATS_LATENCY_BUCKETS - 1)].add();
}

void LatencyHistogram::add_to(afmesh_stats *out) const {
    out->latency_ns_sum += sum_ns_.get();
    for (int i = 0; i < AFMESH_STATS_LATENCY_BUCKETS; ++i) out->latency_buckets[i] += buckets_[i].get();
}

void NodeCounters::add_to(afmesh_stats *out) const {
    push_pulls.add_to(out);
    for (size_t i = 0; i < num_peers_; ++i) peers_[i].add_traffic_to(out);
    latency.add_to(out);
    out->connections_refused += connections_refused.get();
}

}  // namespace afmesh
