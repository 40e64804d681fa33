# SPDX-License-Identifier: Apache-2.0
"""Shared fixtures: free ports, in-process clusters, and clusters of real processes.

In-process clusters run a scheduler, servers and workers as nodes of this one
process (node creation blocks until everyone has joined, so they are created
from threads at once). Process clusters start one Python process per node;
every process is waited for with a deadline and killed by pid if it is still
there when the test ends.
"""

import concurrent.futures
import os
import socket
import subprocess
import sys
import tempfile

import pytest

import afmesh

HERE = os.path.dirname(os.path.abspath(__file__))
DEADLINE_S = 120  # generous: a stuck test fails here instead of hanging ctest


def free_address():
    """127.0.0.1:<a port the kernel just gave out>."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


class Cluster:
    """A scheduler, `servers` servers and `workers` workers, all in this process."""

    def __init__(self, workers, servers, settings=None):
        address = free_address()
        common = {"AFMESH_NUM_WORKERS": workers, "AFMESH_NUM_SERVERS": servers, **(settings or {})}
        with concurrent.futures.ThreadPoolExecutor(workers + servers + 1) as pool:
            scheduler = pool.submit(afmesh.Scheduler, address, common)
            servers_f = [pool.submit(afmesh.Server, address, {**common, "AFMESH_RANK": r}) for r in range(servers)]
            workers_f = [pool.submit(afmesh.Worker, address, {**common, "AFMESH_RANK": r}) for r in range(workers)]
            self.scheduler = scheduler.result(DEADLINE_S)
            self.servers = [f.result(DEADLINE_S) for f in servers_f]
            self.workers = [f.result(DEADLINE_S) for f in workers_f]

    def close(self):
        """Closes every node at once (each stop waits for the others)."""
        nodes = self.workers + self.servers + [self.scheduler]
        with concurrent.futures.ThreadPoolExecutor(len(nodes)) as pool:
            for f in [pool.submit(n.close) for n in nodes]:
                f.result(DEADLINE_S)


@pytest.fixture
def cluster():
    """cluster(workers, servers) -> Cluster, closed when the test ends."""
    made = []

    def make(workers=1, servers=1, settings=None):
        made.append(Cluster(workers, servers, settings))
        return made[-1]

    yield make
    for c in made:
        c.close()


@pytest.fixture
def one_by_one(cluster):
    """(worker, server) of a 1 x 1 in-process cluster."""
    c = cluster(1, 1)
    return c.workers[0], c.servers[0]


@pytest.fixture
def pool():
    """A thread pool for running the other side of an exchange."""
    with concurrent.futures.ThreadPoolExecutor(4) as p:
        yield p


class Processes:
    """Child processes started by a test, each with its output in a file."""

    def __init__(self):
        self._children = []  # (name, Popen, output file)

    def start(self, name, argv, env):
        out = tempfile.TemporaryFile(mode="w+")
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)
        self._children.append((name, proc, out))

    def wait(self, name):
        """Waits (up to the deadline) for the child started as `name`; returns its exit code."""
        proc = next(proc for n, proc, _ in self._children if n == name)
        return proc.wait(timeout=DEADLINE_S)

    def wait_all(self):
        """Waits for every child (up to the deadline); returns {name: (exit code, output)}."""
        results = {}
        for name, proc, out in self._children:
            try:
                code = proc.wait(timeout=DEADLINE_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                code = proc.wait()
                out.write(f"\n[killed after {DEADLINE_S} s]\n")
            out.seek(0)
            results[name] = (code, out.read())
        return results

    def kill_remaining(self):
        """Kills, by pid, every child still running, and reaps it."""
        for _, proc, out in self._children:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            out.close()


@pytest.fixture
def processes():
    p = Processes()
    try:
        yield p
    finally:
        p.kill_remaining()


def node_env(role, workers, servers, address, rank=None, **extra):
    """The environment of one StepMesh-style node: DMLC_* variables only (no AFMESH_* topology)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AFMESH_", "DMLC_"))}
    host, port = address.rsplit(":", 1)
    env.update(DMLC_ROLE=role, DMLC_NUM_WORKER=str(workers), DMLC_NUM_SERVER=str(servers), DMLC_PS_ROOT_URI=host,
               DMLC_PS_ROOT_PORT=port, STEPMESH_GPU="0", PYTHONDONTWRITEBYTECODE="1")
    for name in ("AFMESH_LIBRARY", "AFMESH_MODULE_PATH"):
        if name in os.environ:
            env[name] = os.environ[name]
    if rank is not None:
        env["DMLC_NODE_RANK"] = str(rank)
    env.update({k: str(v) for k, v in extra.items()})
    return env


@pytest.fixture
def run_fserver(processes):
    """run_fserver(scenario, workers, servers) runs tests/python/fserver_node.py as a whole cluster.

    Returns {name: output}; fails the test naming any process that did not exit 0.
    """

    def run(scenario, workers=1, servers=1, *args):
        address = free_address()
        script = os.path.join(HERE, "fserver_node.py")
        argv = [sys.executable, script, scenario, *args]
        processes.start("scheduler", argv, node_env("scheduler", workers, servers, address))
        for r in range(servers):
            processes.start(f"server {r}", argv, node_env("server", workers, servers, address, r))
        for r in range(workers):
            processes.start(f"worker {r}", argv, node_env("worker", workers, servers, address, r))
        results = processes.wait_all()
        failed = {n: r for n, r in results.items() if r[0] != 0}
        assert not failed, "\n".join(f"---- {n} exited {code}\n{out}" for n, (code, out) in results.items())
        return {n: out for n, (_, out) in results.items()}

    return run
