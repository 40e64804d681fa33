# SPDX-License-Identifier: Apache-2.0
"""StepMesh's ``fserver`` API over afmesh: existing StepMesh programs run with
``import afmesh.fserver as fserver`` in place of ``import fserver_lib``.

The functions have StepMesh's names, argument order, defaults and results,
and the process is configured by the same variables: ``DMLC_ROLE``,
``DMLC_NUM_WORKER``, ``DMLC_NUM_SERVER``, ``DMLC_PS_ROOT_URI``,
``DMLC_PS_ROOT_PORT``, ``DMLC_NODE_RANK``, ``DMLC_GROUP_SIZE`` and
``STEPMESH_GPU`` (the ``AFMESH_*`` names work too and win when both are set).
As in StepMesh, the state is one node per process.

Tensors may be torch tensors (CPU or GPU), numpy arrays or any buffer
afmesh accepts. ``get_batch`` hands out torch tensors if the program has
imported torch, numpy arrays otherwise (numpy has no bfloat16: such tensors
appear as uint16).

Where afmesh deliberately differs from StepMesh:

* ``respond_vec(ret_buffer, tensors_vec, handler_vec)`` gives request i the
  rows ``[sum(counts[:i]), sum(counts[:i+1]))`` of ``ret_buffer``, where
  ``counts[i] = tensors_vec[i].shape[0]``. StepMesh slices every request from
  row 0, so every worker but one got another worker's rows.
* Errors are exceptions, never a process abort: ``wait`` raises
  ``afmesh.Timeout`` on timeout (StepMesh: fatal) and the handle can be
  waited again; a dead peer raises ``afmesh.PeerFailed``. A bad argument
  (StepMesh: a failed PS_CHECK) raises ``afmesh.InvalidArgument``, a
  ValueError, or ``afmesh.InvalidType``, a TypeError.
* A handle is waited once, as ``afmesh_wait`` in C: waiting it again raises
  ``afmesh.NotFound`` (StepMesh returns at once). Its pull tensors hold the
  results; ``fetch_trace`` still works.
* ``push_pull`` with S servers takes the same number of pull tensors for
  each, server-major (see ``push_pull``), and refuses any other count:
  StepMesh drops the remainder unsent, and with fewer pull tensors than
  servers (e.g. one) sends no pull at all.
* A response may be shorter than the pull buffer (dynamic token counts);
  StepMesh requires equal sizes. A longer one raises InvalidArgument. As in
  StepMesh only sizes are checked: a tensor of another dtype is sent as its
  bytes and the worker reads them as its pull tensor's dtype.
* ``get_rank()`` (not in StepMesh, whose scripts compute it from the
  environment) is this process's rank: DMLC_NODE_RANK * DMLC_GROUP_SIZE +
  STEPMESH_GPU, as StepMesh numbers it, or the scheduler's choice when
  DMLC_NODE_RANK is unset.
* ``fetch_trace`` reports the server whose answer completed last (StepMesh
  keeps whichever response arrived last), from afmesh's per-server trace:
  req.start = req.postsend = posted, req.postrecv = arrived, req.process =
  processed, rsp.start = rsp.postsend = responded, rsp.postrecv = rsp.process
  = completed. Timestamps are CLOCK_MONOTONIC ns, like ``get_nanosecond``;
  they are always recorded (StepMesh needs a TRACE build).
* ``next_event(timeout_ms=0)`` (not in StepMesh) reports a peer that
  failed or stopped, once, so a serving loop can drop its requests and go
  on (see ``afmesh.Node.next_event``).
* ``get_all_handlers(h)`` is ``[h]``: afmesh tracks a push-pull with one
  handle, not one per tensor.
* ``need_event=True`` with GPU tensors hands the current torch CUDA stream
  to afmesh, which records an event behind its work and posts the pushes
  from its progress thread once that event completes: as StepMesh does,
  the caller never blocks on the producing kernels. ``respond``'s
  ``need_event=True`` does block: it waits for that stream before answering
  (StepMesh waits in its response thread).
* ``barrier``'s ``instance_barrier`` is accepted and ignored: afmesh has one
  barrier, over every process of the chosen roles.
* Workers reach every server (StepMesh: only servers with the same GPU index).
* The ``joint`` role (worker and server in one process) is not supported.
"""

import collections
import os
import sys
import time

from . import _capi, errors
from .node import Scheduler
from .server import Server
from .tensor import as_tensor
from .worker import Worker

_node = None
# Handles and requests by the integer ids StepMesh programs hold. Finished
# handles stay for fetch_trace until _KEEP_HANDLES newer ones push them out.
_handles = collections.OrderedDict()
_requests = {}
_next_request = 0
_KEEP_HANDLES = 4096


def _role():
    role = os.environ.get("AFMESH_ROLE") or os.environ.get("DMLC_ROLE")
    if role not in ("worker", "server", "scheduler"):
        raise errors.invalid_argument(f"DMLC_ROLE (or AFMESH_ROLE) must be worker, server or scheduler, not {role!r}"
                                      + (" (the joint role is not supported)" if role == "joint" else ""))
    return role


def _need(*classes):
    """The node, if init() made one of `classes`; raises saying why not otherwise."""
    if _node is None:
        raise errors.closed("fserver (call init() first)")
    if not isinstance(_node, classes):
        wanted = " or ".join(c._role_name for c in classes)
        raise errors.invalid_argument(f"this process is a {_node._role_name}; that call needs a {wanted}")
    return _node


def init():
    """Joins the cluster as DMLC_ROLE says; returns once every node is connected."""
    global _node
    if _node is not None:
        raise errors.invalid_argument("init() was already called; stop() first")
    _node = {"worker": Worker, "server": Server, "scheduler": Scheduler}[_role()]()


def get_rank():
    """This worker's or server's rank within its role (not in StepMesh): what the launcher asked for with
    DMLC_NODE_RANK (times DMLC_GROUP_SIZE, plus STEPMESH_GPU), or the scheduler's choice.
    """
    return _need(Worker, Server).rank


def _producing_stream(tensors):
    """need_event: the current torch CUDA stream of the first GPU tensor (their producer), or None."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    for t in tensors:
        if isinstance(t, torch.Tensor) and t.is_cuda:
            return torch.cuda.current_stream(t.device)
    return None


def push_pull(push_tensors, push_keys, pull_tensors, pull_keys, need_event=True):
    """Pushes every push tensor to every server and pulls pull_tensors back; returns a handle (int).

    With S servers, ``pull_tensors`` holds P = len/S buffers per server,
    server-major: ``pull_tensors[s*P + j]`` is filled by server s under
    ``pull_keys[s*P + j]``.
    """
    worker = _need(Worker)
    if len(push_tensors) != len(push_keys) or len(pull_tensors) != len(pull_keys):
        raise errors.invalid_argument(f"{len(push_tensors)} push tensors for {len(push_keys)} keys, "
                                      f"{len(pull_tensors)} pull tensors for {len(pull_keys)} keys: one key per tensor")
    servers = worker.num_servers
    if len(pull_tensors) % servers:
        # Each server writes its own answers: one buffer cannot take several servers' answers.
        raise errors.invalid_argument(
            f"{len(pull_tensors)} pull tensors for {servers} servers: every server fills its own pull tensors, so "
            f"give the same number for each, server-major (pull_tensors[s*P + j] is server s's j-th answer; one "
            f"answer from each server is {servers} pull tensors)")
    per_server = len(pull_tensors) // servers
    stream = _producing_stream(list(push_tensors) + list(pull_tensors)) if need_event else None
    handle = worker.push_pull(
        push=list(zip(push_keys, push_tensors)),
        pull=[(key, t, i // per_server) for i, (key, t) in enumerate(zip(pull_keys, pull_tensors))],
        stream=stream)
    _handles[handle.id] = handle
    while len(_handles) > _KEEP_HANDLES and next(iter(_handles.values())).done:
        _handles.popitem(last=False)
    return handle.id


def _handle(handler):
    try:
        return _handles[handler]
    except KeyError:
        raise errors.error_for(_capi.ERR_NOT_FOUND, f"unknown or expired handle {handler}") from None


def wait(handler, timeout_ms=10000):
    """Waits until every server answered push_pull `handler`; raises afmesh.Timeout after timeout_ms.

    Raises afmesh.NotFound for a handle already waited (see the module docstring).
    """
    _need(Worker)
    _handle(handler).wait(None if timeout_ms is None or timeout_ms < 0 else timeout_ms / 1000)


def _as_user_tensor(t):
    return t.torch() if "torch" in sys.modules else t.numpy()


def get_batch():
    """Waits for one request from every worker; returns [(handler, [push tensors], [push keys])] in worker order.

    The push tensors are views of the receive memory, valid until the request is answered.
    """
    global _next_request
    batch = []
    for request in _need(Server).get_batch("all"):
        _next_request += 1
        _requests[_next_request] = request
        batch.append((_next_request, [_as_user_tensor(t) for t in request.tensors], list(request.keys)))
    return batch


def _request(handler):
    try:
        return _requests[handler]
    except KeyError:
        raise errors.error_for(_capi.ERR_NOT_FOUND, f"unknown or already answered request {handler}") from None


def _forget_answered(handlers):
    for h in handlers:
        if h in _requests and _requests[h].answered:
            del _requests[h]


def _sync_device_work(tensors):
    """need_event: waits for the current torch CUDA stream of the GPU tensors, their producer.

    The library reads a response as soon as it is given; StepMesh records an
    event that its response thread waits for, here the caller waits.
    """
    stream = _producing_stream(tensors)
    if stream is not None:
        stream.synchronize()


def respond(tensors, handler, need_event=False):
    """Answers request `handler` with `tensors`, one per pull buffer of the request, in its order.

    As in StepMesh only sizes are checked: each tensor may have any dtype and at most its pull buffer's bytes.
    """
    server = _need(Server)
    if need_event:
        _sync_device_work(tensors)
    try:
        server.respond(_request(handler), list(tensors), check_dtype=False)
    finally:
        _forget_answered([handler])


def respond_vec(ret_buffer, tensors_vec, handler_vec):
    """Answers request handler_vec[i] with the next tensors_vec[i].shape[0] rows of ret_buffer (see the module
    docstring: each request gets its own rows, unlike StepMesh).
    """
    server = _need(Server)
    if len(tensors_vec) != len(handler_vec):
        raise errors.invalid_argument(f"{len(tensors_vec)} tensors for {len(handler_vec)} handlers")
    counts = [as_tensor(t).shape[0] for t in tensors_vec]
    try:
        server.respond_vec(ret_buffer, counts, [_request(h) for h in handler_vec], check_dtype=False)
    finally:
        _forget_answered(handler_vec)


def register_recv_buffer(tensor, worker_ranks, push_keys):
    """Receives pushes into `tensor`, cut into len(push_keys) equal slices: slice i for push_keys[i] from worker
    worker_ranks[i]. Call before those workers push (e.g. before a barrier).
    """
    _need(Server).register_recv_buffer(tensor, list(worker_ranks), list(push_keys))


def barrier(include_server, include_client, instance_barrier=True):
    """Waits for every server (include_server) and/or worker (include_client) process."""
    del instance_barrier  # afmesh has one barrier, over every process of the chosen roles
    groups = {(True, True): "all", (True, False): "servers", (False, True): "workers"}
    group = groups.get((bool(include_server), bool(include_client)))
    if group is None:
        raise errors.invalid_argument("barrier needs include_server or include_client")
    _need(Worker, Server).barrier(group)


def stop():
    """Leaves the cluster cleanly and frees this process's node (init() may be called again)."""
    global _node
    node, _node = _node, None
    _handles.clear()
    _requests.clear()
    if node is not None:
        node.close()


def next_event(timeout_ms=0):
    """The next membership event, or None when none came within timeout_ms (not in StepMesh).

    See afmesh.Node.next_event: a peer that failed or stopped is reported once,
    as a MembershipEvent; a negative timeout_ms waits until one comes.
    """
    return _need(Worker, Server).next_event(None if timeout_ms < 0 else timeout_ms / 1000)


def fetch_trace(handler):
    """[req.start, req.postsend, req.postrecv, req.process, rsp.start, rsp.postsend, rsp.postrecv, rsp.process]
    in ns for a completed push_pull (see the module docstring for what each is).
    """
    _need(Worker)
    traces = _handle(handler).trace()
    if not traces:
        return [0] * 8
    t = max(traces, key=lambda t: t.completed)
    return [t.posted, t.posted, t.arrived, t.processed, t.responded, t.responded, t.completed, t.completed]


def get_all_handlers(handler):
    """The handles of one push_pull: just [handler] in afmesh."""
    _handle(handler)
    return [handler]


def get_nanosecond():
    """Now, in ns of CLOCK_MONOTONIC: the clock fetch_trace's timestamps use."""
    return time.monotonic_ns()
