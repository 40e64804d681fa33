# SPDX-License-Identifier: Apache-2.0
"""Node.stats, peer_stats, transport_counters and afmesh.prometheus against a 2 x 2 in-process cluster.

Each worker does PUSH_PULLS push-pulls, each pushing PUSH_BYTES to every
server and pulling PULL_BYTES from each; the servers answer in pool threads.
The metrics are then scraped over HTTP, as Prometheus would, and checked
against what the cluster did. Heartbeats keep flowing afterwards, so only the
counters of the exchange itself are compared exactly.
"""

import logging
import threading
import urllib.request
from wsgiref.simple_server import WSGIRequestHandler, make_server

import numpy as np
import pytest
from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.parser import text_string_to_metric_families

import afmesh
import afmesh.prometheus

PUSH_PULLS = 5
PUSH_BYTES = 1024
PULL_BYTES = 512
TRAFFIC = ("requests", "responses", "push_bytes", "pull_bytes")


def work(worker):
    """PUSH_PULLS push-pulls: one tensor to every server, one answer from each."""
    x = np.ones(PUSH_BYTES // 4, np.float32)
    pulls = [np.zeros(PULL_BYTES // 4, np.float32) for _ in worker.peers]
    for _ in range(PUSH_PULLS):
        worker.push_pull(push=[(0, x)], pull=[(1 + s, pulls[s], s) for s in worker.peers]).wait(timeout=60)


def serve(server):
    """Answers PUSH_PULLS batches of one request from every worker."""
    answer = np.full(PULL_BYTES // 4, server.rank, np.float32)
    for _ in range(PUSH_PULLS):
        for request in server.get_batch(timeout=60):
            request.respond([answer])


@pytest.fixture
def busy_cluster(cluster, pool):
    """A 2 x 2 cluster after every worker's PUSH_PULLS push-pulls."""
    c = cluster(2, 2)
    done = [pool.submit(serve, s) for s in c.servers] + [pool.submit(work, w) for w in c.workers]
    for f in done:
        f.result(timeout=120)
    return c


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, *args):
        """Keeps the access log out of the test output."""


def scrape(registry):
    """Serves `registry` on a free port, scrapes it once over HTTP and stops; returns the exposition text."""
    httpd = make_server("127.0.0.1", 0, make_wsgi_app(registry), handler_class=_QuietHandler)
    thread = threading.Thread(target=httpd.serve_forever)
    thread.start()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{httpd.server_port}/metrics", timeout=60) as response:
            return response.read().decode()
    finally:
        httpd.shutdown()
        thread.join()
        httpd.server_close()


def scraped_samples(node):
    """{(sample name, ((label, value), ...)): value} of `node`'s metrics, scraped from a fresh registry."""
    registry = CollectorRegistry()
    afmesh.prometheus.register(node, registry)
    families = text_string_to_metric_families(scrape(registry))
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for f in families for s in f.samples}


def labels(node, **extra):
    """The sorted label items of a sample of `node`, with `extra` labels."""
    return tuple(sorted({"role": node.role, "rank": str(node.rank), **extra}.items()))


def test_stats_count_the_exchange(busy_cluster):
    worker, server = busy_cluster.workers[0], busy_cluster.servers[1]
    for node, peers in ((worker, 2), (server, 2)):
        shares = [node.peer_stats(p) for p in node.peers]
        assert len(shares) == peers
        for share in shares:
            assert [share[f] for f in TRAFFIC] == [PUSH_PULLS, PUSH_PULLS, PUSH_PULLS * PUSH_BYTES,
                                                   PUSH_PULLS * PULL_BYTES]
            assert share["polls"] == 0 and share["latency_buckets"] == [0] * 24
        totals = node.stats()
        assert [totals[f] for f in TRAFFIC] == [sum(s[f] for s in shares) for f in TRAFFIC]
    totals = worker.stats()
    assert (totals["push_pulls_started"], totals["push_pulls_completed"]) == (PUSH_PULLS, PUSH_PULLS)
    assert sum(totals["latency_buckets"]) == PUSH_PULLS and totals["latency_ns_sum"] > 0
    counters = worker.transport_counters()
    assert all(isinstance(k, str) and isinstance(v, int) for k, v in counters.items())


def test_peer_stats_of_a_stranger_and_of_a_closed_node(cluster):
    c = cluster(1, 1)
    with pytest.raises(afmesh.NotFound):
        c.workers[0].peer_stats(5)
    c.close()
    with pytest.raises(afmesh.Closed):
        c.workers[0].stats()
    with pytest.raises(afmesh.Closed):
        c.servers[0].transport_counters()


def test_worker_metrics_over_http(busy_cluster):
    worker = busy_cluster.workers[1]
    samples = scraped_samples(worker)
    for peer in map(str, worker.peers):
        for status, count in (("started", PUSH_PULLS), ("completed", PUSH_PULLS), ("peer_failed", 0), ("failed", 0)):
            assert samples["afmesh_push_pulls_total", labels(worker, peer=peer, status=status)] == count
        assert samples["afmesh_push_bytes_total", labels(worker, peer=peer)] == PUSH_PULLS * PUSH_BYTES
        assert samples["afmesh_pull_bytes_total", labels(worker, peer=peer)] == PUSH_PULLS * PULL_BYTES
        assert samples["afmesh_requests_total", labels(worker, peer=peer)] == PUSH_PULLS
        assert samples["afmesh_responses_total", labels(worker, peer=peer)] == PUSH_PULLS
        assert ("afmesh_protocol_errors_total", labels(worker, peer=peer)) in samples
    assert samples["afmesh_push_pull_seconds_count", labels(worker)] == PUSH_PULLS
    assert samples["afmesh_push_pull_seconds_bucket", labels(worker, le="+Inf")] == PUSH_PULLS
    assert samples["afmesh_push_pull_seconds_sum", labels(worker)] > 0
    buckets = sorted((float(dict(k)["le"]), v) for (name, k), v in samples.items() if name.endswith("_bucket"))
    assert len(buckets) == 24 and buckets[0][0] == 1e-6
    assert [v for _, v in buckets] == sorted(v for _, v in buckets)  # cumulative
    assert ("afmesh_polls_total", labels(worker)) in samples
    assert ("afmesh_staging_bytes_total", labels(worker)) in samples
    for name in worker.transport_counters():
        assert (f"afmesh_transport_{name}_total", labels(worker)) in samples


def test_server_metrics_over_http(busy_cluster):
    server = busy_cluster.servers[0]
    samples = scraped_samples(server)
    for peer in map(str, server.peers):
        assert samples["afmesh_requests_total", labels(server, peer=peer)] == PUSH_PULLS
        assert samples["afmesh_push_bytes_total", labels(server, peer=peer)] == PUSH_PULLS * PUSH_BYTES
        assert samples["afmesh_pull_bytes_total", labels(server, peer=peer)] == PUSH_PULLS * PULL_BYTES
    assert samples["afmesh_push_pull_seconds_count", labels(server)] == 0


def test_a_closed_node_exports_nothing_and_says_so_once(cluster, caplog):
    c = cluster(1, 1)
    registry = CollectorRegistry()
    afmesh.prometheus.register(c.workers[0], registry)
    assert any(f.name == "afmesh_requests" for f in registry.collect())
    c.close()
    with caplog.at_level(logging.WARNING, logger="afmesh.prometheus"):
        assert scrape(registry) == ""
        assert list(registry.collect()) == []
    assert [r.getMessage() for r in caplog.records] == ["afmesh worker 0 is closed: its metrics are no longer exported"]
