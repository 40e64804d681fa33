# SPDX-License-Identifier: Apache-2.0
"""The FFN side: take requests from workers, answer straight into their pull buffers."""

import ctypes as C
from typing import NamedTuple, Tuple

from . import _capi, dtypes, errors
from .node import Node
from .tensor import Tensor, as_tensor

lib = _capi.lib


class PullSlot(NamedTuple):
    """One buffer a worker asked this server to fill: its key, capacity in bytes, element type and shape."""

    key: int
    nbytes: int
    dtype: dtypes.DType
    shape: Tuple[int, ...]


def _dtype(c):
    return dtypes.DType(c.dtype.code, c.dtype.bits, c.dtype.lanes)


def _shape(c):
    return tuple(c.shape[i] for i in range(c.ndim))


class Request:
    """One worker's push-pull as this server sees it.

    Attributes:
        worker: rank of the worker that sent it.
        keys: the push keys, in the worker's order.
        tensors: the pushed tensors (:class:`afmesh.Tensor`), zero-copy views
            of the receive memory, readable until the request is answered.
        pulls: the :class:`PullSlot` list this request must be answered with.
    """

    def __init__(self, server, ptr):
        self._server, self._ptr = server, ptr
        worker, num_push, num_pull = C.c_int32(), C.c_size_t(), C.c_size_t()
        errors.check(lib.afmesh_request_info(ptr, C.byref(worker), C.byref(num_push), C.byref(num_pull)))
        self.worker = worker.value
        self.keys, self.tensors, self.pulls = [], [], []
        key, t = C.c_uint64(), _capi.afmesh_tensor()
        for i in range(num_push.value):
            errors.check(lib.afmesh_request_push(ptr, i, C.byref(key), C.byref(t)))
            self.keys.append(key.value)
            self.tensors.append(Tensor(t.data or 0, t.bytes, _dtype(t), _shape(t), t.kind, t.device, owner=self,
                                       valid=self._unanswered))
        for i in range(num_pull.value):
            errors.check(lib.afmesh_request_pull(ptr, i, C.byref(key), C.byref(t)))
            self.pulls.append(PullSlot(key.value, t.bytes, _dtype(t), _shape(t)))

    def __repr__(self):
        state = "answered" if self.answered else "open"
        return f"afmesh.Request(worker={self.worker}, keys={self.keys}, pulls={len(self.pulls)}, {state})"

    def _unanswered(self):
        return self._ptr is not None

    @property
    def answered(self):
        """True once respond() has succeeded, or failed in a way that consumed the request."""
        return self._ptr is None

    @property
    def push(self):
        """The pushes as (key, tensor) pairs."""
        return list(zip(self.keys, self.tensors))

    def _check_response(self, tensors, check_dtype):
        """Validates a response before anything is sent; returns the described tensors."""
        if self.answered:
            raise errors.closed(f"request from worker {self.worker}")
        if len(tensors) != len(self.pulls):
            raise errors.invalid_argument(f"the request from worker {self.worker} has {len(self.pulls)} pull "
                                          f"slot(s); the response has {len(tensors)} tensor(s)")
        described = [as_tensor(x) for x in tensors]
        for i, (t, slot) in enumerate(zip(described, self.pulls)):
            # A uint8 slot is untyped bytes; any other type must match what the worker will read.
            if check_dtype and t.dtype != slot.dtype and slot.dtype != dtypes.uint8:
                raise errors.invalid_type(f"response {i} is {t.dtype} but worker {self.worker}'s pull buffer (key "
                                          f"{slot.key}) is {slot.dtype} (check_dtype=False sends the bytes as "
                                          "they are)")
            if t.nbytes > slot.nbytes:
                raise errors.invalid_argument(f"response {i} is {t.nbytes} bytes but worker {self.worker}'s pull "
                                              f"buffer (key {slot.key}) holds only {slot.nbytes}: the pull buffer "
                                              "is too small")
        return described

    def respond(self, tensors, *, check_dtype=True):
        """Answers with `tensors` (one per pull slot, each at most the slot's size), written straight into the
        worker's buffers. Returns once the tensors may be reused; the pushed views become invalid.

        Each tensor must have its slot's element type (or the slot be uint8):
        with check_dtype=False only sizes are checked, as StepMesh does, and
        the worker reads the bytes as its buffer's type.
        """
        self._send(self._check_response(tensors, check_dtype))

    def _send(self, described):
        c = (_capi.afmesh_tensor * len(described))(*(t.c_tensor() for t in described))
        with self._server._live as node:
            status = lib.afmesh_respond(node, self._ptr, c, len(described))
            # The header promises the request survives INVALID_ARGUMENT only; any
            # other outcome (success or a failed worker) has freed it.
            if status != _capi.ERR_INVALID_ARGUMENT:
                self._ptr = None
            errors.check(status)


class Server(Node):
    """An FFN node. Example::

        with afmesh.Server() as s:
            for r in s.get_batch():              # one request from every worker
                x = r.tensors[0].numpy()
                r.respond([ffn(x)])
    """

    _role = _capi.ROLE_SERVER
    _role_name = "server"

    def __init__(self, scheduler=None, settings=None):
        super().__init__(scheduler, settings)
        self._recv_buffers = []  # registered receive memory must outlive the node

    def register_recv_buffer(self, obj, worker_ranks, keys):
        """Receives pushes into `obj`: cut into len(keys) equal slices, slice i for key keys[i] from worker
        worker_ranks[i]. Call before those workers push those keys (e.g. before a barrier).
        """
        if len(worker_ranks) != len(keys):
            raise errors.invalid_argument(f"{len(worker_ranks)} worker ranks but {len(keys)} keys: one of each per "
                                          "slice")
        t = as_tensor(obj, writable=True)
        ranks = (C.c_int32 * len(keys))(*worker_ranks)
        c_keys = (C.c_uint64 * len(keys))(*keys)
        with self._live as ptr:
            errors.check(lib.afmesh_register_recv_buffer(ptr, t.ptr, t.nbytes, t.kind, t.device, ranks, c_keys,
                                                         len(keys)))
        self._recv_buffers.append(t)

    def get_batch(self, mode="all", timeout=None, capacity=None):
        """Waits for requests and returns them as :class:`Request` objects.

        Args:
            mode: 'all' (one request from every worker, in rank order: the AF
                barrier) or 'any' (whatever has arrived, at least one).
            timeout: seconds (None: forever); raises Timeout when it passes.
            capacity: the most requests to return (default: one per worker in
                'all' mode, 64 per worker in 'any' mode).
        """
        modes = {"all": _capi.BATCH_ALL_WORKERS, "any": _capi.BATCH_ANY}
        if mode not in modes:
            raise errors.invalid_argument(f"mode must be 'all' or 'any', not {mode!r}")
        if capacity is None:
            capacity = self.num_workers * (1 if mode == "all" else 64)
        requests = (_capi.request_p * capacity)()
        count = C.c_size_t()
        status = self._blocking(
            lambda ptr, ms: lib.afmesh_get_batch(ptr, modes[mode], ms, requests, capacity, C.byref(count)),
            timeout, "get_batch")
        errors.check(status)
        with self._live:
            return [Request(self, requests[i]) for i in range(count.value)]

    def respond(self, request, tensors, *, check_dtype=True):
        """Same as request.respond(tensors, check_dtype=check_dtype)."""
        request.respond(tensors, check_dtype=check_dtype)

    def respond_vec(self, buffer, counts, requests, *, check_dtype=True):
        """Answers several requests from one buffer: request i gets the next counts[i] rows of `buffer`.

        Everything is checked before anything is sent, so a bad argument
        answers no request. Each request must have exactly one pull slot.
        `check_dtype` as in :meth:`Request.respond`.
        """
        if len(counts) != len(requests):
            raise errors.invalid_argument(f"{len(counts)} counts for {len(requests)} requests")
        t = as_tensor(buffer)
        if not t.shape:
            raise errors.invalid_argument("respond_vec needs a buffer with rows (at least one dimension)")
        if any(c < 0 for c in counts) or sum(counts) > t.shape[0]:
            raise errors.invalid_argument(f"counts {list(counts)} need {sum(counts)} rows; the buffer has "
                                          f"{t.shape[0]}")
        slices, start = [], 0
        for count, request in zip(counts, requests):
            slices.append(request._check_response([t.row_range(start, start + count)], check_dtype))
            start += count
        for described, request in zip(slices, requests):
            request._send(described)
