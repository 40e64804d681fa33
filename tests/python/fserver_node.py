# SPDX-License-Identifier: Apache-2.0
"""One process of an afmesh.fserver cluster, configured by DMLC_* like a StepMesh node.

    fserver_node.py stepmesh [--torch]   StepMesh's fserver/test_fserver.py, ported
    fserver_node.py respond_vec          workers send different row counts; each must get its own rows back
    fserver_node.py full                 registered receive buffers, barriers, several servers, traces, misuse
    fserver_node.py tripups              what trips StepMesh users up: pulls per server, respond's dtype,
                                         get_rank, argument error classes, waiting twice
    fserver_node.py events               the server stops at once; the worker hears of it from next_event
    fserver_node.py replacement          the server SIGKILLs itself after a few batches (the first incarnation
                                         only, which creates $REPLACEMENT_MARKER); the test starts it again;
                                         the worker waits for its PEER_UP, retries and checks every answer

Exits 0 when every check held; an assertion or afmesh error exits non-zero with the reason.
"""

import os
import signal
import sys

import numpy as np

import afmesh
import afmesh.fserver as f

ROLE = os.environ["DMLC_ROLE"]
ITERATIONS = 10


def xp_for(use_torch):
    """(make [rows, cols] float32 tensor from numpy, to numpy) for torch or numpy tensors."""
    if use_torch:
        import torch

        return (lambda a: torch.from_numpy(np.ascontiguousarray(a, np.float32))), (lambda t: t.numpy())
    return (lambda a: np.ascontiguousarray(a, np.float32)), np.asarray


def stepmesh(use_torch):
    """test_fserver.py: 3 pushes of [1, 8192] float32, 1 pull; the server answers their sum."""
    make, to_np = xp_for(use_torch)
    f.init()
    if ROLE == "worker":
        for i in range(ITERATIONS):
            push = [make(np.random.default_rng(i * 3 + k).standard_normal((1, 8192))) for k in range(3)]
            pull = [make(np.zeros((1, 8192)))]
            handle = f.push_pull(push, [0, 1, 2], pull, [3])
            f.wait(handle)
            assert np.allclose(sum(to_np(p) for p in push), to_np(pull[0])), f"iteration {i}: wrong sum"
        print(f"worker: {ITERATIONS} sums correct")
    elif ROLE == "server":
        for _ in range(ITERATIONS):
            for handler, tensors, keys in f.get_batch():
                assert keys == [0, 1, 2], keys
                if use_torch:
                    import torch

                    assert all(isinstance(t, torch.Tensor) for t in tensors), "torch programs get torch tensors"
                f.respond([sum(tensors[1:], tensors[0])], handler)
    f.stop()


def respond_vec():
    """Worker w sends w + 1 rows of value w; the server answers all with one respond_vec of 10 * x."""
    f.init()
    if ROLE == "worker":
        rank = int(os.environ["DMLC_NODE_RANK"])
        for i in range(ITERATIONS):
            x = np.full((rank + 1, 16), rank + i, np.float32)
            y = np.full((8, 16), -1, np.float32)
            f.wait(f.push_pull([x], [0], [y], [1]))
            assert (y[:rank + 1] == 10 * x).all(), f"worker {rank} got another worker's rows: {y[:, 0]}"
            assert (y[rank + 1:] == -1).all(), "rows past the answer were written"
        print(f"worker {rank}: own rows every time")
    elif ROLE == "server":
        for _ in range(ITERATIONS):
            batch = f.get_batch()
            handlers = [h for h, _, _ in batch]
            tensors = [t[0] for _, t, _ in batch]
            f.respond_vec(np.concatenate([10 * t for t in tensors]), tensors, handlers)
    f.stop()


def expect_error(kind, call, *also, says=""):
    """The `kind` error that call() raised, checked to be every class in `also` and to contain `says` too."""
    try:
        call()
    except kind as e:
        assert all(isinstance(e, c) for c in also), f"{e!r} is not a {[c.__name__ for c in also]}"
        assert says in str(e), f"{e} does not say {says!r}"
        return e
    raise AssertionError(f"{call} did not raise {kind.__name__}")


def full():
    """2 x 2: registered receive slices, server-major pulls, barrier, traces, and calls in the wrong role."""
    if ROLE == "scheduler":
        f.init()
        f.stop()
        return
    expect_error(afmesh.Closed, lambda: f.barrier(True, True))  # before init
    f.init()
    expect_error(afmesh.InvalidArgument, f.init)  # twice
    workers, servers = int(os.environ["DMLC_NUM_WORKER"]), int(os.environ["DMLC_NUM_SERVER"])
    if ROLE == "server":
        rank = int(os.environ["DMLC_NODE_RANK"])
        expect_error(afmesh.InvalidArgument, lambda: f.push_pull([], [], [], []))
        recv = np.zeros((workers, 4, 32), np.float32)  # one slice per worker for key 5
        f.register_recv_buffer(recv, list(range(workers)), [5] * workers)
        f.barrier(True, True)
        for _ in range(ITERATIONS):
            batch = f.get_batch()
            assert [keys for _, _, keys in batch] == [[5]] * workers
            for w, (handler, (x,), _) in enumerate(batch):
                assert np.shares_memory(x, recv[w]), "pushes land in the registered slice of their worker"
                f.respond([x + 100 * (rank + 1)], handler)
        expect_error(afmesh.NotFound, lambda: f.respond([recv[0]], 12345))
    else:
        rank = int(os.environ["DMLC_NODE_RANK"])
        expect_error(afmesh.InvalidArgument, f.get_batch)
        f.barrier(True, True)  # the servers' receive buffers exist now
        x = np.zeros((4, 32), np.float32)
        for i in range(ITERATIONS):
            x[:] = rank * 1000 + i
            pulls = [np.zeros((4, 32), np.float32) for _ in range(servers)]  # server-major, one per server
            before = f.get_nanosecond()
            handle = f.push_pull([x], [5], pulls, [6] * servers)
            f.wait(handle)
            after = f.get_nanosecond()
            for s, y in enumerate(pulls):
                assert (y == x + 100 * (s + 1)).all(), f"pull {s} was not filled by server {s}"
            assert f.get_all_handlers(handle) == [handle]
            trace = f.fetch_trace(handle)
            assert len(trace) == 8
            req_start, req_send, _, _, _, _, rsp_recv, rsp_process = trace
            assert before <= req_start <= req_send <= rsp_recv <= rsp_process <= after, trace
        expect_error(afmesh.NotFound, lambda: f.wait(987654321))
        print(f"worker {rank}: {ITERATIONS} rounds from {servers} servers, traces in order")
    f.barrier(True, True)
    f.stop()
    expect_error(afmesh.Closed, lambda: f.barrier(True, True))  # after stop


def tripups():
    """1 worker x 2 servers: each server answers push x with 2 * x + its rank, server 1 in another dtype."""
    f.init()
    if ROLE == "scheduler":
        f.stop()
        return
    rank = f.get_rank()
    assert rank == int(os.environ["DMLC_NODE_RANK"]), f"get_rank() {rank}, launched as {os.environ['DMLC_NODE_RANK']}"
    servers = int(os.environ["DMLC_NUM_SERVER"])
    if ROLE == "worker":
        x = np.arange(32, dtype=np.float32).reshape(4, 8)
        one = [np.zeros((4, 8), np.float32)]
        expect_error(afmesh.InvalidArgument, lambda: f.push_pull([x], [0], one, [1]), ValueError,
                     says=f"1 pull tensors for {servers} servers: every server fills its own pull tensors")
        expect_error(afmesh.InvalidArgument, lambda: f.push_pull([x], [0, 1], one * servers, [1] * servers),
                     ValueError, says="one key per tensor")
        expect_error(afmesh.InvalidType, lambda: f.push_pull(["text"], [0], [], []), TypeError, afmesh.InvalidArgument,
                     says="not a tensor afmesh can use")
        pulls = [np.zeros((4, 8), np.float32) for _ in range(servers)]
        handle = f.push_pull([x], [0], pulls, [1] * servers)
        f.wait(handle)
        for s, y in enumerate(pulls):
            assert y.tobytes() == (2 * x + s).tobytes(), f"server {s} answered {y}"
        expect_error(afmesh.NotFound, lambda: f.wait(handle), LookupError,
                     says=f"push_pull {handle} was already waited")
        assert len(f.fetch_trace(handle)) == 8, "a waited handle keeps its trace"
        print(f"worker {rank}: each server's pull tensor filled, server 1's from float16 bytes")
    else:
        expect_error(afmesh.InvalidArgument, lambda: f.barrier(False, False), ValueError,
                     says="needs include_server or include_client")
        ((handler, (x,), keys),) = f.get_batch()
        assert keys == [0], keys
        answer = 2 * x + rank
        if rank == 1:  # same bytes, another dtype: StepMesh checks only the size
            answer = answer.view(np.float16)
            assert answer.shape == (4, 16) and answer.nbytes == x.nbytes
        expect_error(afmesh.InvalidArgument, lambda: f.respond([np.concatenate([answer, answer])], handler),
                     ValueError, says="the pull buffer is too small")
        f.respond([answer], handler, need_event=True)
        print(f"server {rank}: answered in {answer.dtype}")
    f.stop()


def events():
    """The server leaves as soon as it has joined; the worker learns it from a membership event, once."""
    f.init()
    if ROLE == "worker":
        event = f.next_event(60000)
        assert event is not None, "no event within a minute"
        assert (event.type, event.role, event.rank) == ("peer_down", "server", 0), event
        assert event.incarnation != 0 and isinstance(event.error, afmesh.Closed), event
        assert f.next_event(0) is None, "reported once"
        print(f"worker: server 0 stopped: {event.error}")
    f.stop()


def replacement():
    """A serving loop that survives its server being replaced (issue 26)."""
    f.init()
    if ROLE == "server":
        first = not os.path.exists(os.environ["REPLACEMENT_MARKER"])
        if first:
            open(os.environ["REPLACEMENT_MARKER"], "w").close()
        print(f"server: replacement {_node_is_replacement()}", flush=True)
        batches = 0
        try:
            while True:
                for handler, tensors, _ in f.get_batch():
                    f.respond([np.asarray(tensors[0]) + 1], handler)
                batches += 1
                if first and batches == 3:
                    print("server: dying on purpose", flush=True)
                    os.kill(os.getpid(), signal.SIGKILL)
        except afmesh.PeerFailed as e:
            # A batch over all workers ends with PEER_FAILED once the worker has stopped.
            assert "it has stopped" in str(e), e
    elif ROLE == "worker":
        retried = 0
        for i in range(ITERATIONS):
            push = np.full(16, i, np.float32)
            while True:
                out = np.zeros(16, np.float32)
                try:
                    f.wait(f.push_pull([push], [0], [out], [1]), 60000)
                    break
                except afmesh.PeerFailed as e:
                    retried += 1
                    print(f"worker: iteration {i} failed ({e}); waiting for the server's replacement", flush=True)
                    while True:
                        event = f.next_event(60000)
                        assert event is not None, "no membership event within a minute"
                        if event.type == "peer_up":
                            break
            assert (out == push + 1).all(), (i, out)
        assert retried >= 1, "the server's death was never noticed"
        print(f"worker: {ITERATIONS} iterations checked, {retried} retried after the replacement", flush=True)
    f.stop()


def _node_is_replacement():
    return f._need(afmesh.Server).replacement


if __name__ == "__main__":
    scenario = sys.argv[1]
    if scenario == "stepmesh":
        stepmesh("--torch" in sys.argv)
    elif scenario == "respond_vec":
        respond_vec()
    elif scenario == "full":
        full()
    elif scenario == "tripups":
        tripups()
    elif scenario == "events":
        events()
    elif scenario == "replacement":
        replacement()
    else:
        sys.exit(f"unknown scenario {scenario}")
