# SPDX-License-Identifier: Apache-2.0
"""A failed server is replaced under its rank while the rest of the cluster runs on.

The worker, server 0 and the scheduler live in this process; server 1 is a
child process, SIGKILLed mid-run and started again under the same rank. The
worker sees PEER_DOWN for the old incarnation, PEER_UP for the new one, and
then push-pulls to server 1 again, every answer checked.
"""

import concurrent.futures
import os
import signal
import subprocess
import sys
import tempfile

import numpy as np
import pytest

import afmesh
from conftest import DEADLINE_S, free_address

HERE = os.path.dirname(os.path.abspath(__file__))
SETTINGS = {"AFMESH_NUM_WORKERS": 1, "AFMESH_NUM_SERVERS": 2}


def start_server_1(address):
    """server 1 in a child process, its output in a file (a pipe nobody reads could fill up)."""
    argv = [sys.executable, os.path.join(HERE, "replaceable_server.py"), address, "1", "1", "2"]
    output = tempfile.TemporaryFile(mode="w+")
    proc = subprocess.Popen(argv, stdout=output, stderr=subprocess.STDOUT)
    proc.output = output
    return proc


def output_of(proc):
    proc.output.seek(0)
    return proc.output.read()


def serve_forever(server):
    """server 0: answers push + 1000 until every worker has stopped."""
    try:
        while True:
            for request in server.get_batch("any", timeout=None):
                request.respond([request.tensors[0].numpy() + 1000])
    except afmesh.Closed:
        pass


def exchange(worker, server, value):
    """One push-pull with `server`; returns the answer."""
    push = np.full(8, value, np.float32)
    out = np.zeros(8, np.float32)
    handle = worker.push_pull(push=[afmesh.Push(0, push, servers=[server])], pull=[afmesh.Pull(1, out, server=server)])
    (answer,) = handle.wait(timeout=DEADLINE_S)
    return answer


def next_event(worker):
    event = worker.next_event(timeout=DEADLINE_S)
    assert event is not None, "no membership event within the deadline"
    return event


@pytest.fixture
def children():
    started = []
    yield started
    for proc in started:  # by pid, whatever the test did
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def test_a_killed_server_is_replaced_and_push_pulls_resume(children):
    address = free_address()
    children.append(start_server_1(address))
    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        scheduler_f = pool.submit(afmesh.Scheduler, address, SETTINGS)
        server_f = pool.submit(afmesh.Server, address, {**SETTINGS, "AFMESH_RANK": 0})
        worker_f = pool.submit(afmesh.Worker, address, {**SETTINGS, "AFMESH_RANK": 0})
        scheduler, server0, worker = (f.result(DEADLINE_S) for f in (scheduler_f, server_f, worker_f))
        serving0 = pool.submit(serve_forever, server0)

        assert (exchange(worker, 0, 1) == 1001).all()
        assert (exchange(worker, 1, 2) == 2002).all()

        children[0].send_signal(signal.SIGKILL)
        children[0].wait()
        down = next_event(worker)
        assert (down.type, down.role, down.rank) == ("peer_down", "server", 1), down
        assert isinstance(down.error, afmesh.PeerFailed), down
        with pytest.raises(afmesh.PeerFailed, match="server 1"):
            exchange(worker, 1, 3)
        assert (exchange(worker, 0, 4) == 1004).all(), "server 0 carries on"

        children.append(start_server_1(address))
        up = next_event(worker)
        assert (up.type, up.role, up.rank, up.error) == ("peer_up", "server", 1, None), up
        assert up.incarnation not in (0, down.incarnation), "a new incarnation"
        for value in range(5, 15):
            assert (exchange(worker, 1, value) == value + 2000).all(), "the replacement answers"
            assert (exchange(worker, 0, value) == value + 1000).all()
        assert worker.next_event(timeout=0) is None, "nothing else happened"

        # Each stop waits for every other node's: all at once.
        for f in [pool.submit(n.close) for n in (worker, server0, scheduler)]:
            f.result(DEADLINE_S)
        serving0.result(DEADLINE_S)
        assert children[1].wait(DEADLINE_S) == 0, output_of(children[1])
