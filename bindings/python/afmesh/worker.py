# SPDX-License-Identifier: Apache-2.0
"""The attention side: push activations to servers, pull their results back."""

import ctypes as C
import dataclasses
from dataclasses import dataclass
from typing import Any, NamedTuple, Optional, Sequence

from . import _capi, errors
from .node import Node, NodeResource
from .tensor import Tensor, as_tensor

lib = _capi.lib


@dataclass
class Push:
    """One tensor to push under `key`: to every server (servers=None) or only to the listed ones."""

    key: int
    tensor: Any
    servers: Optional[Sequence[int]] = None


@dataclass
class Pull:
    """One buffer for `server` to fill, answering under `key`; its size is the most the server may send."""

    key: int
    tensor: Any
    server: int = 0


class Trace(NamedTuple):
    """Timestamps (ns, CLOCK_MONOTONIC of the node that took each) of one push-pull at one server."""

    server: int
    posted: int      # worker: request sent
    arrived: int     # server: request complete
    processed: int   # server: handed out by get_batch (the later of the call and `arrived`)
    responded: int   # server: respond() posted
    completed: int   # worker: response complete


def stream_pointer(stream):
    """The native stream handle (cudaStream_t, hipStream_t, ...) of `stream`, as an int.

    Accepts an int (the handle itself), a torch.cuda.Stream (``cuda_stream``)
    or a CuPy stream (``ptr``).
    """
    if isinstance(stream, int) and not isinstance(stream, bool):
        return stream
    for attribute in ("cuda_stream", "ptr"):
        value = getattr(stream, attribute, None)
        if isinstance(value, int):
            return value
    raise errors.invalid_type(f"not a stream: {stream!r} (give an int handle, a torch.cuda.Stream or a CuPy stream)")


def _as_item(item, cls):
    if isinstance(item, cls):
        return item
    try:
        return cls(*item)
    except TypeError:  # not a sequence, or one of the wrong length
        fields = ", ".join(f.name for f in dataclasses.fields(cls))
        raise errors.invalid_type(f"{item!r} is not a {cls.__name__}: give afmesh.{cls.__name__}(...) or a tuple "
                                  f"({fields}), the last optional") from None


def _trimmed(obj, tensor, nbytes):
    """The caller's pull buffer `obj` cut to the rows the server wrote: a view, never a copy."""
    if nbytes == tensor.nbytes or not tensor.shape:
        return obj
    row_bytes = tensor.nbytes // tensor.shape[0]
    rows = -(-nbytes // row_bytes)  # a partly written last row is still returned
    if isinstance(obj, Tensor):
        return obj.row_range(0, rows)
    if any(hasattr(obj, a) for a in ("__dlpack__", "__array_interface__", "__cuda_array_interface__")):
        return obj[:rows]  # numpy, torch, cupy: basic slicing is a view
    view = memoryview(obj)  # bytearray, array.array...: slicing those would copy
    return view[:rows] if view.ndim == 1 else view.cast("B")[:rows * row_bytes]


def _c_arrays(push, pull):
    """The C arrays of a push-pull; the objects whose memory they point into; the pulls, described."""
    pushes = [_as_item(p, Push) for p in push]
    pulls = [_as_item(p, Pull) for p in pull]
    c_push = (_capi.afmesh_push * len(pushes))()
    c_pull = (_capi.afmesh_pull * len(pulls))()
    keepalive = []
    for c, p in zip(c_push, pushes):
        t = as_tensor(p.tensor)
        c.key, c.tensor = p.key, t.c_tensor()
        if p.servers is not None:
            servers = (C.c_int32 * len(p.servers))(*p.servers)
            c.servers, c.num_servers = servers, len(p.servers)
            keepalive.append(servers)
        keepalive.append(t)
    described = []
    for c, p in zip(c_pull, pulls):
        t = as_tensor(p.tensor, writable=True)
        c.key, c.tensor, c.server = p.key, t.c_tensor(), p.server
        described.append((p.tensor, t))
    return c_push, c_pull, keepalive, described


class Handle:
    """One push-pull in flight. Its buffers must stay untouched until it completes.

    ``wait()`` returns the results: each pull buffer, cut to the rows its
    server actually wrote (a view of your own buffer). As with afmesh_wait in
    C, a handle is waited once; :attr:`results` reads them again.
    """

    def __init__(self, worker, handle, keepalive, pulls):
        self.id = handle
        self._worker = worker
        self._keepalive = keepalive  # the pushed objects: their memory is being read
        self._pulls = pulls          # [(caller's object, Tensor)]
        self._results = None
        self._error = None
        self._waited = False  # wait() has given its outcome, which C reports once

    def __repr__(self):
        state = "failed" if self._error else "done" if self._results is not None else "in flight"
        return f"afmesh.Handle({self.id}, {state})"

    @property
    def done(self):
        """True once the push-pull has completed or failed (as far as wait() or test() found)."""
        return self._results is not None or self._error is not None

    def _finish(self, status):
        """Records the outcome of the C handle (waited, so no longer pending there)."""
        self._keepalive = None
        if status != _capi.OK:
            self._error = errors.error_for(status)
        else:
            self._results = [_trimmed(obj, t, self.pull_bytes(i)) for i, (obj, t) in enumerate(self._pulls)]

    def _check_not_waited(self):
        # afmesh_wait frees the C handle, so C answers a second wait (or test) NOT_FOUND; so does Python.
        if self._waited:
            raise errors.error_for(_capi.ERR_NOT_FOUND,
                                   f"push_pull {self.id} was already waited: wait each handle once, as afmesh_wait "
                                   "allows (the results are in its pull buffers, and in Handle.results)")

    def wait(self, timeout=None):
        """Waits for completion (`timeout` in seconds; None: forever) and returns the results.

        Raises Timeout (the handle stays valid: wait again), PeerFailed (a
        server it involved failed; the message names it), or Closed. Any
        other outcome is reported once: a second wait raises NotFound, as
        afmesh_wait does in C (:attr:`results` has the results).
        """
        self._check_not_waited()
        if not self.done:
            status = self._worker._blocking(lambda ptr, ms: lib.afmesh_wait(ptr, self.id, ms), timeout,
                                            f"push_pull {self.id}")
            self._finish(status)
        self._waited = True
        return self.results

    def test(self):
        """True if complete (results are then ready), False if still in flight; raises if it failed.

        Like afmesh_test, it may be called until the handle is waited, and raises NotFound after.
        """
        self._check_not_waited()
        if not self.done:
            with self._worker._live as ptr:
                status = lib.afmesh_test(ptr, self.id)
                if status == _capi.IN_PROGRESS:
                    return False
                if status == _capi.OK:  # complete: retire the C handle so it frees its slot
                    status = lib.afmesh_wait(ptr, self.id, 0)
            self._finish(status)
        if self._error:
            raise self._error
        return True

    def stream_wait(self, stream):
        """Makes `stream` wait (on the device, the CPU never blocks) until this push-pull has ended.

        Work queued on `stream` afterwards sees the pulled results. Still
        wait() or test() the handle for its outcome. Raises NotSupported when
        the device module cannot make a stream wait for the host (cpu).
        """
        with self._worker._live as ptr:
            errors.check(lib.afmesh_stream_wait(ptr, self.id, stream_pointer(stream)))

    @property
    def results(self):
        """The results of a completed push-pull (see wait()), as often as asked; raises its failure, or
        InvalidArgument if it has not completed."""
        if self._error:
            raise self._error
        if self._results is None:
            raise errors.invalid_argument(f"push_pull {self.id} has not completed: wait() first")
        return self._results

    def pull_bytes(self, index):
        """Bytes the server actually wrote into pull `index` (after completion)."""
        n = C.c_uint64()
        with self._worker._live as ptr:
            errors.check(lib.afmesh_pull_bytes(ptr, self.id, index, C.byref(n)))
        return n.value

    def trace(self):
        """Per-server :class:`Trace` timestamps of this push-pull (after completion)."""
        count = C.c_size_t()
        capacity = max(self._worker.num_servers, 1)
        traces = (_capi.afmesh_trace * capacity)()
        with self._worker._live as ptr:
            errors.check(lib.afmesh_trace_get(ptr, self.id, traces, capacity, C.byref(count)))
        return [Trace(t.server, t.posted, t.arrived, t.processed, t.responded, t.completed)
                for t in traces[:min(count.value, capacity)]]


class Worker(Node):
    """An attention node. Example::

        with afmesh.Worker() as w:              # role, rank, scheduler from AFMESH_*
            h = w.push_pull(push=[(7, x)], pull=[(8, y, 0)])
            (y0,) = h.wait()                    # y0 is y, cut to what server 0 wrote
    """

    _role = _capi.ROLE_WORKER
    _role_name = "worker"

    def push_pull(self, push=(), pull=(), stream=None):
        """Starts a push-pull without blocking; returns its :class:`Handle`.

        Args:
            push: :class:`Push` items or (key, tensor[, servers]) tuples.
            pull: :class:`Pull` items or (key, tensor[, server]) tuples; each
                buffer must be writable and large enough for its answer.
            stream: the device stream producing the pushed device tensors
                (see :func:`stream_pointer`): they are sent once its work so
                far has finished, without this call waiting. None: nothing
                to wait for.
        """
        c_push, c_pull, keepalive, described = _c_arrays(push, pull)
        handle = _capi.handle_t()
        with self._live as ptr:
            if stream is None:
                errors.check(lib.afmesh_push_pull(ptr, c_push, len(c_push), c_pull, len(c_pull), C.byref(handle)))
            else:
                errors.check(lib.afmesh_push_pull_on_stream(ptr, c_push, len(c_push), c_pull, len(c_pull),
                                                            stream_pointer(stream), C.byref(handle)))
        return Handle(self, handle.value, keepalive, described)

    def prepare(self, push=(), pull=()):
        """Describes a push-pull once, to start it many times; returns a :class:`PreparedPushPull`.

        For the exchange every layer repeats (the same keys, buffers and
        servers): each ``start()`` skips checking and grouping the tensors
        and encoding their metadata, which :meth:`push_pull` does at every
        call. Only the buffers' contents change between starts. Arguments
        as :meth:`push_pull`'s.
        """
        c_push, c_pull, keepalive, described = _c_arrays(push, pull)
        prepared = _capi.prepared_p()
        with self._live as ptr:
            errors.check(lib.afmesh_prepare_push_pull(ptr, c_push, len(c_push), c_pull, len(c_pull),
                                                      C.byref(prepared)))
        return PreparedPushPull(self, prepared.value, keepalive, described)


class PreparedPushPull(NodeResource):
    """A push-pull described once (:meth:`Worker.prepare`); ``start()`` it as often as needed.

    It holds on to its buffers; ``close()`` (or leaving a ``with`` block)
    frees it, and the worker frees those left when it closes. Example::

        step = w.prepare(push=[(7, x)], pull=[(8, y, 0)])
        for layer in range(n):
            x[:] = ...                        # new contents, same buffer
            (y0,) = step.start().wait()
    """

    def __init__(self, worker, prepared, keepalive, pulls):
        super().__init__(worker, prepared)
        self._keepalive = keepalive
        self._pulls = pulls

    def __repr__(self):
        return f"afmesh.PreparedPushPull({'closed' if self._handle is None else 'open'})"

    @staticmethod
    def _free(node_ptr, prepared):
        return lib.afmesh_prepared_free(node_ptr, prepared)

    def start(self, stream=None):
        """Starts the push-pull as prepared; returns its :class:`Handle` (``stream`` as in :meth:`Worker.push_pull`)."""
        if self._handle is None:
            raise errors.invalid_argument("this prepared push-pull was closed")
        handle = _capi.handle_t()
        native_stream = None if stream is None else stream_pointer(stream)
        with self._node._live as ptr:
            errors.check(lib.afmesh_push_pull_start(ptr, self._handle, native_stream, C.byref(handle)))
        return Handle(self._node, handle.value, self._keepalive, self._pulls)
