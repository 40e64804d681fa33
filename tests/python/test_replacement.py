# SPDX-License-Identifier: Apache-2.0
"""A failed node is replaced under its rank while the rest of the cluster runs on.

The scheduler and the surviving nodes live in this process; the node that
fails is a child process (replaceable_node.py), SIGKILLed mid-run and started
again under the same rank. The survivors see PEER_DOWN for the old
incarnation, PEER_UP for the new one, and then exchange with it again, every
answer checked.
"""

import concurrent.futures
import os
import signal
import subprocess
import sys
import tempfile
import threading

import numpy as np
import pytest

import afmesh
from conftest import DEADLINE_S, free_address

HERE = os.path.dirname(os.path.abspath(__file__))
SETTINGS = {"AFMESH_NUM_WORKERS": 1, "AFMESH_NUM_SERVERS": 2}


def start_node(*args):
    """replaceable_node.py ARGS in a child process, its output in a file (a pipe nobody reads could fill up)."""
    argv = [sys.executable, os.path.join(HERE, "replaceable_node.py"), *map(str, args)]
    output = tempfile.TemporaryFile(mode="w+")
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=output, stderr=subprocess.STDOUT)
    proc.output = output
    return proc


def output_of(proc):
    proc.output.seek(0)
    return proc.output.read()


def serve_forever(server, answered=None):
    """server 0: answers push + 1000 until every worker has stopped; answered(worker) after each answer.

    A worker that fails is reported once (PeerFailed) and the loop goes on: it may be replaced.
    """
    while True:
        try:
            batch = server.get_batch("any", timeout=None)
        except afmesh.PeerFailed:
            continue
        except afmesh.Closed:
            return
        for request in batch:
            request.respond([request.tensors[0].numpy() + 1000])
            if answered:
                answered(request.worker)


def exchange(worker, server, value):
    """One push-pull with `server`; returns the answer."""
    push = np.full(8, value, np.float32)
    out = np.zeros(8, np.float32)
    handle = worker.push_pull(push=[afmesh.Push(0, push, servers=[server])], pull=[afmesh.Pull(1, out, server=server)])
    (answer,) = handle.wait(timeout=DEADLINE_S)
    return answer


def next_event(node):
    event = node.next_event(timeout=DEADLINE_S)
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
    children.append(start_node("server", address, 1, 1, 2))
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

        children.append(start_node("server", address, 1, 1, 2))
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
    assert "replacement: False" in output_of(children[0]) and "replacement: True" in output_of(children[1])
    assert not (worker.replacement or server0.replacement)


def test_a_killed_worker_is_replaced_and_batches_over_all_workers_resume(children):
    address = free_address()
    settings = {"AFMESH_NUM_WORKERS": 2, "AFMESH_NUM_SERVERS": 1}
    children.append(start_node("worker", address, 1, 2, 1, -1))  # one exchange, then waits to be killed
    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        scheduler_f = pool.submit(afmesh.Scheduler, address, settings)
        server_f = pool.submit(afmesh.Server, address, {**settings, "AFMESH_RANK": 0})
        worker_f = pool.submit(afmesh.Worker, address, {**settings, "AFMESH_RANK": 0})
        scheduler, server, worker = (f.result(DEADLINE_S) for f in (scheduler_f, server_f, worker_f))

        def exchange_round(value):
            """worker 0 and worker 1 each push once; one batch over all workers answers both."""
            out = np.zeros(2, np.float32)
            push = np.array([0, value], np.float32)
            handle = worker.push_pull(push=[afmesh.Push(0, push, servers=[0])], pull=[afmesh.Pull(1, out, server=0)])
            batch = server.get_batch("all", timeout=DEADLINE_S)
            assert sorted(r.worker for r in batch) == [0, 1]
            for r in batch:
                r.respond([r.tensors[0].numpy() + 1000])
            (answer,) = handle.wait(timeout=DEADLINE_S)
            assert (answer == push + 1000).all(), answer

        exchange_round(0)
        children[0].send_signal(signal.SIGKILL)
        children[0].wait()
        down = next_event(server)
        assert (down.type, down.role, down.rank) == ("peer_down", "worker", 1), down
        with pytest.raises(afmesh.PeerFailed, match="worker 1"):
            server.get_batch("all", timeout=DEADLINE_S)

        children.append(start_node("worker", address, 1, 2, 1, 3))  # three exchanges, then stops
        up = next_event(server)
        assert (up.type, up.role, up.rank, up.error) == ("peer_up", "worker", 1, None), up
        assert up.incarnation not in (0, down.incarnation), "a new incarnation"
        for value in range(1, 4):
            exchange_round(value)
        # The replacement stops after its three exchanges: that may already have been heard.
        later = server.next_event(timeout=0)
        assert later is None or (later.type, later.rank, later.incarnation) == ("peer_down", 1, up.incarnation), later
        assert later is None or isinstance(later.error, afmesh.Closed), later

        for f in [pool.submit(n.close) for n in (worker, server, scheduler)]:
            f.result(DEADLINE_S)
        assert children[1].wait(DEADLINE_S) == 0, output_of(children[1])


def test_a_worker_is_replaced_while_a_server_is_still_down(children):
    """Worker 1 and server 1 of a 2x2 cluster die. Worker 1's replacement joins while server 1 is still
    down: it neither dials nor waits for it, and exchanges with server 0. Then server 1's replacement
    joins, and both workers hear PEER_UP for it."""
    address = free_address()
    settings = {"AFMESH_NUM_WORKERS": 2, "AFMESH_NUM_SERVERS": 2}
    children.append(start_node("server", address, 1, 2, 2))
    children.append(start_node("worker", address, 1, 2, 2, -1))  # one exchange with server 0, then waits
    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        scheduler_f = pool.submit(afmesh.Scheduler, address, settings)
        server_f = pool.submit(afmesh.Server, address, {**settings, "AFMESH_RANK": 0})
        worker_f = pool.submit(afmesh.Worker, address, {**settings, "AFMESH_RANK": 0})
        scheduler, server0, worker = (f.result(DEADLINE_S) for f in (scheduler_f, server_f, worker_f))
        from_worker_1 = threading.Semaphore(0)
        serving0 = pool.submit(serve_forever, server0, lambda w: w == 1 and from_worker_1.release())
        assert from_worker_1.acquire(timeout=DEADLINE_S), "the first worker 1 exchanged nothing"

        for proc in children:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        down = next_event(worker)
        assert (down.type, down.role, down.rank) == ("peer_down", "server", 1), down

        children.append(start_node("worker", address, 1, 2, 2, 3, "--linger"))  # three exchanges with server 0
        for _ in range(3):
            assert from_worker_1.acquire(timeout=DEADLINE_S), "the replacement of worker 1 did not exchange\n" + \
                output_of(children[-1])

        children.append(start_node("server", address, 1, 2, 2))
        up = next_event(worker)
        assert (up.type, up.role, up.rank) == ("peer_up", "server", 1), up
        assert (exchange(worker, 1, 7) == 7 + 2000).all(), "the replaced server answers"

        children[2].stdin.close()  # the lingering worker 1 may stop now
        for f in [pool.submit(n.close) for n in (worker, server0, scheduler)]:
            f.result(DEADLINE_S)
        serving0.result(DEADLINE_S)
    for replacement in children[2:]:
        assert replacement.wait(DEADLINE_S) == 0, output_of(replacement)
