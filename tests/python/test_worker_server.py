# SPDX-License-Identifier: Apache-2.0
"""Worker, Server, Handle, Request and Scheduler against in-process clusters.

The server side of each exchange runs on a pool thread: the blocking calls
release the GIL, so both sides make progress in one process.
"""

import re

import numpy as np
import pytest

import afmesh
from afmesh import dtypes
from conftest import free_address


def serve(server, answer, mode="all"):
    """One get_batch, each request answered with answer(request); returns the requests."""
    batch = server.get_batch(mode, timeout=60)
    for r in batch:
        r.respond(answer(r))
    return batch


def test_nodes_know_their_place(cluster):
    c = cluster(2, 1)
    assert sorted(w.rank for w in c.workers) == [0, 1]
    assert (c.servers[0].rank, c.servers[0].num_workers, c.servers[0].num_servers) == (0, 2, 1)
    assert (c.workers[0].device_module, c.workers[0].transport_module) == ("cpu", "tcp")
    assert "Worker(rank=" in repr(c.workers[0])


def test_push_pull_results_are_views_of_the_callers_buffers(one_by_one, pool):
    worker, server = one_by_one
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    y = np.zeros_like(x)
    served = pool.submit(serve, server, lambda r: [r.tensors[0].numpy() * 2])
    (out,) = worker.push_pull(push=[(0, x)], pull=[(1, y, 0)]).wait(timeout=60)
    (request,) = served.result()
    assert out is y and (y == 2 * x).all()
    assert (request.worker, request.keys, request.pulls) == (0, [0], [afmesh.PullSlot(1, 48, dtypes.float32, (3, 4))])


def test_shorter_answers_come_back_as_shorter_views(one_by_one, pool):
    worker, server = one_by_one
    y, raw = np.zeros((8, 4), np.float32), bytearray(64)
    served = pool.submit(serve, server, lambda r: [r.tensors[0].numpy()[:3], b"abc"])
    handle = worker.push_pull(push=[afmesh.Push(0, np.ones((8, 4), np.float32))],
                              pull=[afmesh.Pull(1, y, 0), afmesh.Pull(2, raw, 0)])
    rows, text = handle.wait(timeout=60)
    served.result()
    assert rows.shape == (3, 4) and np.shares_memory(rows, y) and (rows == 1).all()
    assert isinstance(text, memoryview) and bytes(text) == b"abc" and text.obj is raw
    assert [handle.pull_bytes(0), handle.pull_bytes(1)] == [48, 3]
    assert handle.results[0] is rows and handle.results[1] is text  # as often as asked, unlike wait()


def test_a_prepared_push_pull_carries_what_its_buffers_hold_at_each_start(one_by_one, pool):
    worker, server = one_by_one
    x, y = np.zeros((2, 4), np.float32), np.zeros((4, 4), np.float32)
    with worker.prepare(push=[(0, x)], pull=[(1, y, 0)]) as step:
        assert "open" in repr(step)
        for layer in range(3):
            x[:] = layer
            served = pool.submit(serve, server, lambda r: [r.tensors[0].numpy() + 1])
            (out,) = step.start().wait(timeout=60)
            served.result()
            assert out.shape == (2, 4) and np.shares_memory(out, y) and (out == layer + 1).all()
    with pytest.raises(afmesh.InvalidArgument, match="closed"):
        step.start()
    step.close()  # again: nothing to do
    with pytest.raises(afmesh.InvalidArgument, match="does not exist"):
        worker.prepare(push=[(0, x, [5])])


def test_torch_bfloat16_travels_as_bfloat16(one_by_one, pool):
    torch = pytest.importorskip("torch", reason="torch is not installed (python3-torch)")
    worker, server = one_by_one
    x = torch.arange(16, dtype=torch.bfloat16).reshape(2, 8)
    y = torch.zeros(2, 8, dtype=torch.bfloat16)
    served = pool.submit(serve, server, lambda r: [r.tensors[0].torch() + 1])
    (out,) = worker.push_pull(push=[(0, x)], pull=[(1, y, 0)]).wait(timeout=60)
    (request,) = served.result()
    assert request.tensors[0].dtype == dtypes.bfloat16 and request.tensors[0].shape == (2, 8)
    assert out is y and torch.equal(y, x + 1)


def test_pushes_reach_only_the_servers_named(cluster, pool):
    c = cluster(1, 2)
    worker, (s0, s1) = c.workers[0], c.servers
    y = np.zeros(4, np.float32)
    served = pool.submit(serve, s1, lambda r: [r.tensors[0].numpy() + 1], "any")
    (out,) = worker.push_pull(push=[afmesh.Push(0, np.ones(4, np.float32), servers=[1])],
                              pull=[afmesh.Pull(1, y, server=1)]).wait(timeout=60)
    assert (out == 2).all() and served.result()[0].worker == 0
    with pytest.raises(afmesh.Timeout):
        s0.get_batch("any", timeout=0)  # nothing was sent to server 0


def test_registered_receive_buffers_hold_the_pushes(cluster, pool):
    c = cluster(2, 1)
    server = c.servers[0]
    recv = np.zeros((2, 4), np.float32)
    server.register_recv_buffer(recv, [0, 1], [7, 7])
    with pytest.raises(ValueError, match="one of each per slice"):
        server.register_recv_buffer(recv, [0], [7, 8])
    for f in [pool.submit(node.barrier, "all", 60) for node in c.workers + c.servers]:
        f.result()
    regs = [w.register(np.zeros(1)) for w in c.workers]
    pulls = [np.zeros(4, np.float32) for _ in c.workers]
    handles = [w.push_pull(push=[(7, np.full(4, w.rank + 1, np.float32))], pull=[(8, pulls[w.rank], 0)])
               for w in c.workers]
    batch = server.get_batch(timeout=60)
    assert [r.worker for r in batch] == [0, 1]
    assert [r.tensors[0].ptr for r in batch] == [recv.ctypes.data, recv.ctypes.data + 16]
    assert (recv == [[1] * 4, [2] * 4]).all()
    for r in batch:
        r.respond([r.tensors[0]])  # answering straight from the receive memory
    assert [h.wait(timeout=60)[0][0] for h in handles] == [1, 2]
    for r in regs:
        with r:
            pass
        r.close()  # twice is harmless


def test_respond_vec_gives_each_request_its_own_rows(cluster, pool):
    c = cluster(2, 1)
    server = c.servers[0]
    pulls = [np.full((4, 2), -1, np.float32) for _ in c.workers]
    handles = [w.push_pull(push=[(0, np.zeros(1))], pull=[(1, pulls[w.rank], 0)]) for w in c.workers]
    batch = server.get_batch(timeout=60)
    out = np.array([[10, 10], [20, 20], [21, 21]], np.float32)
    server.respond_vec(out, [1, 2], batch)
    assert (handles[0].wait(timeout=60)[0] == [[10, 10]]).all()
    assert (handles[1].wait(timeout=60)[0] == [[20, 20], [21, 21]]).all()
    assert all(r.answered for r in batch)


def test_handle_test_trace_and_poll_modes(one_by_one):
    worker, server = one_by_one
    for mode in ("busy", "blocking", "adaptive"):
        worker.set_poll_mode(mode)
    with pytest.raises(afmesh.InvalidArgument, match="busy, adaptive or blocking"):
        worker.set_poll_mode("spin")
    handle = worker.push_pull(push=[(0, np.ones(2))], pull=[(1, np.zeros(2), 0)])
    (request,) = server.get_batch(timeout=60)
    assert handle.test() is False and not handle.done  # the server has not answered yet
    request.respond([np.full(2, 5.0)])
    handle.wait(timeout=60)
    assert handle.done
    (trace,) = handle.trace()
    assert trace.server == 0
    assert trace.posted <= trace.completed and trace.arrived <= trace.processed <= trace.responded


def test_a_second_wait_is_refused_as_in_c(one_by_one):
    """afmesh_wait frees the handle: C answers a second wait (or test) NOT_FOUND, and so does Python."""
    worker, server = one_by_one
    y = np.zeros(2, np.float32)
    handle = worker.push_pull(push=[(0, np.ones(2, np.float32))], pull=[(1, y, 0)])
    (request,) = server.get_batch(timeout=60)
    request.respond([np.full(2, 7, np.float32)])
    (out,) = handle.wait(timeout=60)
    with worker._live as ptr:
        c_status = afmesh._lib.afmesh_wait(ptr, handle.id, 0)
    assert c_status == afmesh._capi.ERR_NOT_FOUND
    for again in (handle.wait, handle.test):
        with pytest.raises(afmesh.NotFound, match=f"push_pull {handle.id} was already waited: wait each handle once"):
            again()
    assert out is y and handle.results[0] is y and (y == 7).all()  # the results stay readable
    assert [t.server for t in handle.trace()] == [0]


def test_a_failed_push_pull_is_reported_once_too(cluster, pool):
    c = cluster(1, 1)
    worker, server = c.workers[0], c.servers[0]
    handle = worker.push_pull(push=[(0, np.ones(2))], pull=[(1, np.zeros(2), 0)])
    server.get_batch(timeout=60)
    closing = pool.submit(server.close)  # leaves without answering: the push-pull fails
    with pytest.raises(afmesh.PeerFailed, match="server 0"):
        handle.wait(timeout=60)
    with pytest.raises(afmesh.NotFound, match="already waited"):
        handle.wait(timeout=60)
    with pytest.raises(afmesh.PeerFailed):
        handle.results  # noqa: B018 (the property raises the failure)
    c.close()  # the others, so the server's clean stop can complete
    closing.result(timeout=60)


def test_argument_errors_are_afmesh_errors_and_builtin_ones(one_by_one):
    worker, server = one_by_one
    refused = [
        (lambda: worker.push_pull(push=[(0, "text")]), afmesh.InvalidType, TypeError, "not a tensor afmesh can use"),
        (lambda: worker.push_pull(push=[(0,)]), afmesh.InvalidType, TypeError, "give afmesh.Push(...) or a tuple"),
        (lambda: worker.push_pull(stream="the current one"), afmesh.InvalidType, TypeError, "not a stream"),
        (lambda: worker.push_pull(push=[(0, np.zeros((4, 4))[:, 1])]), afmesh.InvalidArgument, ValueError,
         "numpy.ascontiguousarray"),
        (lambda: afmesh.as_tensor(np.zeros(3, np.uint8), "float32"), afmesh.InvalidArgument, ValueError,
         "not a whole number of 4-byte elements"),
        (lambda: afmesh.as_tensor(np.zeros(3), "float33"), afmesh.InvalidType, TypeError, "unknown element type"),
        (lambda: server.get_batch("some"), afmesh.InvalidArgument, ValueError, "mode must be 'all' or 'any'"),
        (lambda: server.barrier("everyone"), afmesh.InvalidArgument, ValueError, "barrier group"),
        (lambda: server.get_batch(timeout=-1), afmesh.InvalidArgument, ValueError, ">= 0 seconds"),
    ]
    for call, kind, builtin, says in refused:
        with pytest.raises(kind, match=re.escape(says)) as raised:
            call()
        assert isinstance(raised.value, builtin) and isinstance(raised.value, afmesh.InvalidArgument)
        assert raised.value.status == afmesh._capi.ERR_INVALID_ARGUMENT


def test_check_dtype_false_sends_another_dtype_of_the_same_size(one_by_one):
    worker, server = one_by_one
    y = np.zeros((2, 4), np.float32)
    handle = worker.push_pull(push=[(0, np.ones(1))], pull=[(1, y, 0)])
    (request,) = server.get_batch(timeout=60)
    answer = np.arange(8, dtype=np.float32).reshape(2, 4)
    as_half = answer.view(np.float16)  # [2, 8]: the same 32 bytes
    with pytest.raises(afmesh.InvalidType, match="is float16 but .* is float32 .check_dtype=False"):
        request.respond([as_half])
    request.respond([as_half], check_dtype=False)
    (out,) = handle.wait(timeout=60)
    assert out is y and y.tobytes() == answer.tobytes()


def test_barrier_groups(cluster, pool):
    c = cluster(2, 1)
    assert all(f.result() is None for f in [pool.submit(w.barrier, "workers", 60) for w in c.workers])
    c.servers[0].barrier("servers", 60)
    with pytest.raises(ValueError, match="barrier group"):
        c.servers[0].barrier("everyone")


def test_bad_responses_are_refused_and_leave_the_request_answerable(one_by_one):
    worker, server = one_by_one
    handle = worker.push_pull(push=[(0, np.ones(2, np.float32))], pull=[(1, np.zeros(4, np.float32), 0)])
    (request,) = server.get_batch(timeout=60)
    with pytest.raises(TypeError, match="float64 but worker 0's pull buffer .* is float32"):
        request.respond([np.zeros(4)])
    with pytest.raises(ValueError, match="pull buffer is too small"):
        request.respond([np.zeros(8, np.float32)])
    with pytest.raises(ValueError, match="1 pull slot"):
        request.respond([])
    with pytest.raises(ValueError, match="counts"):
        server.respond_vec(np.zeros((2, 2), np.float32), [3], [request])
    assert not request.answered
    view = request.tensors[0]
    request.respond([np.arange(4, dtype=np.float32)])
    assert (handle.wait(timeout=60)[0] == [0, 1, 2, 3]).all()
    with pytest.raises(afmesh.Closed, match="request from worker 0"):
        request.respond([np.zeros(4, np.float32)])
    with pytest.raises(BufferError, match="answered"):
        view.numpy()


def test_bad_buffers_are_refused_before_anything_is_sent(one_by_one):
    worker, server = one_by_one
    with pytest.raises(ValueError, match="not C-contiguous"):
        worker.push_pull(push=[(0, np.zeros((4, 4))[:, 1])])
    with pytest.raises(ValueError, match="read-only"):
        worker.push_pull(pull=[(1, b"immutable", 0)])
    with pytest.raises(TypeError, match="not a tensor"):
        worker.push_pull(push=[(0, "text")])
    with pytest.raises(afmesh.InvalidArgument, match="not a worker"):
        afmesh.Worker.push_pull(server, push=[(0, np.zeros(1))])  # the C library checks the role too
    with pytest.raises(afmesh.Timeout, match="get_batch"):
        server.get_batch(timeout=0.05)  # nothing was pushed: the failed calls sent nothing
    with pytest.raises(ValueError, match="mode"):
        server.get_batch("some")


def test_a_stopping_server_is_one_membership_event(cluster, pool):
    c = cluster(1, 2)
    worker = c.workers[0]
    assert worker.next_event(timeout=0) is None
    leaving = pool.submit(c.servers[1].close)  # returns once the others stop too
    event = worker.next_event(timeout=60)
    assert event is not None, "no event within a minute"
    assert (event.type, event.role, event.rank) == ("peer_down", "server", 1), event
    assert event.incarnation != 0 and isinstance(event.error, afmesh.Closed), event
    assert "stopped" in str(event.error)
    assert worker.next_event(timeout=0) is None, "reported once"
    c.close()
    leaving.result(timeout=60)
    with pytest.raises(afmesh.Closed):
        worker.next_event(timeout=0)


def test_closing_ends_blocked_calls_and_later_calls_raise_closed(cluster, pool):
    c = cluster(1, 1)
    worker, server = c.workers[0], c.servers[0]
    pending = worker.push_pull(pull=[(1, np.zeros(1), 0)])  # never answered
    blocked = pool.submit(pending.wait)  # waits forever: close() must end it
    closing = pool.submit(worker.close)  # ends the wait before the worker (or any peer) stops in C
    with pytest.raises(afmesh.Closed, match="worker is closed"):
        blocked.result(timeout=60)
    c.close()  # the others, so the worker's clean stop can complete
    closing.result(timeout=60)
    with pytest.raises(afmesh.Closed, match="worker is closed"):
        worker.push_pull()
    with pytest.raises(afmesh.Closed):
        pending.trace()
    assert worker.closed and server.closed
    worker.close()  # closing twice is harmless


def test_errors_carry_the_status_and_the_librarys_reason():
    with pytest.raises(afmesh.InvalidArgument) as info:
        afmesh.Worker("127.0.0.1:1", {"AFMESH_NUM_WORKER": 2})
    e = info.value
    assert (e.status, e.name) == (-3, "AFMESH_ERR_INVALID_ARGUMENT")
    assert "did you mean AFMESH_NUM_WORKERS" in e.message and isinstance(e, ValueError)
    assert issubclass(afmesh.Timeout, TimeoutError) and issubclass(afmesh.PeerFailed, ConnectionError)


def test_a_missing_peer_times_out_and_the_message_says_who():
    address, settings = free_address(), {"AFMESH_CONNECT_TIMEOUT_MS": 500, "AFMESH_NUM_WORKERS": 1}
    # The scheduler, too, says the cluster never formed, when it is closed.
    with pytest.raises(afmesh.Timeout, match="no complete cluster"):
        with afmesh.Scheduler(address, settings):
            with pytest.raises(afmesh.Timeout, match="worker"):
                afmesh.Server(address, settings)  # the one worker never comes


def test_a_stream_is_accepted_and_host_tensors_do_not_wait_for_it(one_by_one, pool):
    worker, server = one_by_one
    x, y = np.arange(4, dtype=np.float32), np.zeros(4, np.float32)
    served = pool.submit(serve, server, lambda r: [r.tensors[0].numpy() + 1])
    # 0 is the default stream of a device module; the cpu module has no work on it.
    handle = worker.push_pull(push=[(0, x)], pull=[(1, y, 0)], stream=0)
    (out,) = handle.wait(timeout=60)
    served.result()
    assert out is y and (y == x + 1).all()


def test_streams_are_checked_and_the_cpu_device_cannot_make_one_wait(one_by_one, pool):
    worker, server = one_by_one
    with pytest.raises(TypeError, match="not a stream"):
        worker.push_pull(push=[(0, np.ones(4, np.float32))], stream="the current one")
    served = pool.submit(serve, server, lambda r: [])
    handle = worker.push_pull(push=[(0, np.ones(4, np.float32))])
    with pytest.raises(afmesh.Error, match="cannot make a stream wait") as raised:
        handle.stream_wait(1)
    assert raised.value.status == afmesh._capi.ERR_NOT_SUPPORTED
    handle.wait(timeout=60)
    served.result()
