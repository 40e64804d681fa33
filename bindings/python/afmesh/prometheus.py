# SPDX-License-Identifier: Apache-2.0
"""A node's counters as Prometheus metrics, read at scrape time.

One line in a serving process (needs prometheus_client, python3-prometheus-client)::

    import afmesh.prometheus
    afmesh.prometheus.register(worker)      # then prometheus_client.start_http_server(...)

Every metric carries the node's ``role`` and ``rank``. Per peer (a server of a
worker, a worker of a server; label ``peer``): ``afmesh_push_pulls_total``
(label ``status``: started, completed, peer_failed, failed) and
``afmesh_<field>_total`` for each traffic and transport-operation field of
``afmesh_stats``. For the node: ``afmesh_<field>_total`` for each progress
field, the histogram ``afmesh_push_pull_seconds`` of push-pull completion
times, and ``afmesh_transport_<name>_total`` for each counter of the
transport module.
"""

import logging

from prometheus_client import REGISTRY
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from . import errors

_log = logging.getLogger(__name__)

# The push_pulls_<status> fields of a peer, as values of the label "status".
_PUSH_PULL_STATUSES = ("started", "completed", "peer_failed", "failed")

# [peer] fields of afmesh_stats: (field, help).
_PEER_FIELDS = (
    ("requests", "REQUESTs sent (worker) or received (server)."),
    ("responses", "RESPONSEs received (worker) or sent (server)."),
    ("push_bytes", "Tensor bytes pushed: sent (worker) or received (server)."),
    ("pull_bytes", "Tensor bytes answered: received (worker) or sent (server)."),
    ("eager_requests", "REQUESTs that carried their push tensors inline."),
    ("eager_responses", "RESPONSEs that carried their answers inline."),
    ("eager_bytes", "Tensor bytes inside REQUESTs and RESPONSEs, each copied once on this side (a write copies none)."),
    ("mailbox_requests", "REQUESTs that rode a tensor write into the server's mailbox."),
    ("mailbox_responses", "RESPONSEs that rode an answer write into the worker's mailbox."),
    ("credit_waits", "Worker: parts that waited for a receive slice."),
    ("writes", "One-sided writes with an immediate posted to the transport."),
    ("gathered_writes", "Gathered writes (a tensor and a mailbox message in one) posted to the transport."),
    ("messages", "Two-sided messages posted to the transport."),
    ("queue_full", "Posts the transport refused for a full send queue (queued and retried)."),
    ("heartbeats_missed", "Heartbeat intervals in which the peer was silent."),
    ("protocol_errors", "Messages that broke the protocol (the peer is failed)."),
)

# [node] fields of afmesh_stats: (field, help).
_NODE_FIELDS = (
    ("polls", "Transport polls that found something."),
    ("empty_polls", "Transport polls that found nothing."),
    ("transport_sleeps", "Sleeps on the transport's wait fd."),
    ("condvar_sleeps", "Sleeps on the condition variable (a waiter while another thread polls)."),
    ("naps", "Naps of the progress thread while a caller polls, or without a wait fd."),
    ("wakeups", "Wake-ups sent to a sleeping thread."),
    ("yields", "sched_yield() calls of spinning threads."),
    ("syscalls", "System calls of the engine and those the transport module counts."),
    ("completions", "Transport events polled."),
    ("connections_refused", "Data connections dropped in the handshake."),
    ("staging_copies", "Copies between device memory and pinned host staging buffers."),
    ("staging_bytes", "Bytes moved by staging copies."),
)


def register(node, registry=REGISTRY):
    """Registers a collector of `node`'s counters with `registry`; returns it (for registry.unregister)."""
    collector = NodeCollector(node)
    registry.register(collector)
    return collector


def histogram_buckets(latency_buckets):
    """Cumulative (le, count) pairs in seconds: bucket i ends at 2**i us, the last at +Inf."""
    pairs, total = [], 0
    for i, count in enumerate(latency_buckets):
        total += count
        last = i == len(latency_buckets) - 1
        pairs.append(("+Inf" if last else floatToGoString(2**i / 1e6), total))
    return pairs


class NodeCollector(Collector):
    """Reads a Worker's or Server's counters at each scrape; yields nothing once the node is closed."""

    def __init__(self, node):
        self._node = node
        self._base = {"role": node.role, "rank": str(node.rank)}
        self._logged_closed = False

    def collect(self):
        """The node's metric families (none if the node is closed)."""
        readings = self._read()
        if readings is None:
            return
        stats, peers, transport = readings
        yield from self._peer_families(peers)
        yield from self._node_families(stats)
        yield self._latency_family(stats)
        yield from self._transport_families(transport)

    def _read(self):
        """(node stats, {peer: stats}, transport counters), or None (logged once) if the node is closed."""
        try:
            node = self._node
            return node.stats(), {p: node.peer_stats(p) for p in node.peers}, node._transport_counters()
        except errors.Closed:
            if not self._logged_closed:
                self._logged_closed = True
                _log.warning("afmesh %s %s is closed: its metrics are no longer exported", *self._base.values())
            return None

    def _counter(self, name, help_text, labels=()):
        """A counter family with the node's labels and then `labels`."""
        return CounterMetricFamily(name, help_text, labels=[*self._base, *labels])

    def _peer_families(self, peers):
        """The per-peer counters: push-pulls by status, then every [peer] field."""
        push_pulls = self._counter("afmesh_push_pulls", "Push-pulls that involved the peer, by how its part ended.",
                                   ["peer", "status"])
        for peer, stats in peers.items():
            for status in _PUSH_PULL_STATUSES:
                push_pulls.add_metric([*self._base.values(), str(peer), status], stats[f"push_pulls_{status}"])
        yield push_pulls
        for field, help_text in _PEER_FIELDS:
            family = self._counter(f"afmesh_{field}", help_text, ["peer"])
            for peer, stats in peers.items():
                family.add_metric([*self._base.values(), str(peer)], stats[field])
            yield family

    def _node_families(self, stats):
        """The [node] counters."""
        for field, help_text in _NODE_FIELDS:
            family = self._counter(f"afmesh_{field}", help_text)
            family.add_metric(list(self._base.values()), stats[field])
            yield family

    def _latency_family(self, stats):
        """The histogram of the completion times of push-pulls that ended OK (a server's stays empty)."""
        family = HistogramMetricFamily("afmesh_push_pull_seconds", "Completion time of push-pulls that ended OK.",
                                       labels=list(self._base))
        family.add_metric(list(self._base.values()), histogram_buckets(stats["latency_buckets"]),
                          stats["latency_ns_sum"] / 1e9)
        return family

    def _transport_families(self, transport):
        """The transport module's own counters."""
        for name, help_text, value in transport:
            family = self._counter(f"afmesh_transport_{name}", help_text)
            family.add_metric(list(self._base.values()), value)
            yield family
