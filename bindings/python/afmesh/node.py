# SPDX-License-Identifier: Apache-2.0
"""Cluster membership: the node lifecycle shared by Worker, Server and Scheduler."""

import collections
import ctypes as C
import threading
import time

from . import _capi, errors
from .tensor import as_tensor

lib = _capi.lib

# Blocking C calls run in slices of this length so that Ctrl-C (Python runs
# signal handlers only between calls) and close() from another thread are
# noticed within it. A completed operation returns at once, whatever the slice.
_SLICE_MS = 100


def _settings_array(settings):
    """A NULL-terminated char*[] from {"NAME": value} or ["NAME=value", ...] (None: no overrides)."""
    if not settings:
        return None
    items = [f"{k}={v}" for k, v in settings.items()] if hasattr(settings, "items") else list(settings)
    array = (C.c_char_p * (len(items) + 1))(*(s.encode() for s in items), None)
    return C.cast(array, C.POINTER(C.c_char_p))


def _create(role, scheduler, settings):
    config = _capi.afmesh_config()
    config.struct_size = C.sizeof(config)
    config.role = role
    config.scheduler = scheduler.encode() if scheduler else None
    config.settings = _settings_array(settings)
    node = _capi.node_p()
    errors.check(lib.afmesh_node_create(C.byref(config), C.byref(node)))
    return node.value


def _stats_dict(stats):
    """{field: value} of an afmesh_stats, without struct_size; latency_buckets as a list."""
    return {name: list(getattr(stats, name)) if name == "latency_buckets" else getattr(stats, name)
            for name, _ in stats._fields_ if name != "struct_size"}


# The roles a Node can have, by afmesh_role.
_ROLE_NAMES = {_capi.ROLE_WORKER: "worker", _capi.ROLE_SERVER: "server"}
_PEER_ROLE_NAMES = {**_ROLE_NAMES, _capi.ROLE_SCHEDULER: "scheduler"}


class MembershipEvent(collections.namedtuple("MembershipEvent", "type role rank incarnation error")):
    """A change in the cluster's membership (:meth:`Node.next_event`).

    type: 'peer_down', or 'peer_up' when a failed peer's replacement has
    connected. role: 'worker', 'server' or 'scheduler'. rank: the peer's rank
    in its role (-1 for the scheduler). incarnation: which process holds or
    held that rank (0 for the scheduler). error: for 'peer_down', what its
    failed operations raised, :class:`afmesh.Closed` for a peer that stopped
    and :class:`afmesh.PeerFailed` otherwise, with the reason as its message;
    None for 'peer_up'.
    """


def timeout_ms(timeout):
    """Seconds (None: forever) as the C API's milliseconds (negative: forever)."""
    if timeout is None:
        return -1
    if timeout < 0:
        raise errors.invalid_argument(f"timeout must be None (forever) or >= 0 seconds, not {timeout}")
    return int(timeout * 1000)


class _Live:
    """The C node pointer, and the calls in flight on it.

    ``with live as ptr:`` brackets every C call; close() refuses new calls,
    waits for those in flight (blocking ones return within a slice), and only
    then lets the node be destroyed, so no call ever runs on a freed node.
    """

    def __init__(self, ptr, what):
        self._ptr, self._what, self._active = ptr, what, 0
        self._cond = threading.Condition()

    def __enter__(self):
        with self._cond:
            if self._ptr is None:
                raise errors.closed(self._what)
            self._active += 1
            return self._ptr

    def __exit__(self, *exc):
        with self._cond:
            self._active -= 1
            if not self._active:
                self._cond.notify_all()

    @property
    def closing(self):
        """True once close() has begun."""
        return self._ptr is None

    def close(self):
        """Refuses new calls, waits for running ones, returns the pointer (None if already closed)."""
        with self._cond:
            ptr, self._ptr = self._ptr, None
            self._cond.wait_for(lambda: not self._active)
            return ptr


class _Member:
    """What every node has: a lifetime, close() and the context-manager protocol."""

    _role_name = "node"

    def __init__(self, role, scheduler, settings):
        self._live = _Live(_create(role, scheduler, settings), f"this {self._role_name}")

    def close(self):
        """Leaves the cluster cleanly (waiting a bounded time for the others) and frees the node.

        Calls blocked on this node in other threads raise :class:`afmesh.Closed`
        within 0.1 s, as do calls made afterwards. The node is freed even if the
        others do not stop in time; that still raises Timeout naming who did not.
        Safe to call twice.
        """
        ptr = self._live.close()
        if ptr is not None:
            errors.check(lib.afmesh_node_destroy(ptr))

    @property
    def closed(self):
        """True once close() has been called."""
        return self._live.closing

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _blocking(self, call, timeout, what):
        """Runs call(ptr, ms) in slices until it does not time out, `timeout` seconds pass, or close() begins.

        Returns the final status; a timeout of the whole wait raises Timeout naming `what`.
        """
        deadline = None if timeout is None else time.monotonic() + timeout_ms(timeout) / 1000
        with self._live as ptr:
            while True:
                left = _SLICE_MS if deadline is None else max(0, int((deadline - time.monotonic()) * 1000))
                status = call(ptr, min(left, _SLICE_MS))
                if status != _capi.ERR_TIMEOUT:
                    return status
                if deadline is not None and time.monotonic() >= deadline:
                    raise errors.error_for(status, f"{what}: not done within {timeout} s")
                if self._live.closing:
                    raise errors.closed(f"this {self._role_name}")


class Scheduler(_Member):
    """The rendezvous point: serves until close(), which waits for every node to stop.

    close() raises what the cluster came to: Timeout when it never formed
    (saying who was missing), PeerFailed naming the nodes that failed.

    Example::

        with afmesh.Scheduler("127.0.0.1:29500", {"AFMESH_NUM_WORKERS": 2}):
            ...  # workers and servers join from other processes
    """

    _role_name = "scheduler"

    def __init__(self, address=None, settings=None):
        """Listens on `address` ("host:port"; None: AFMESH_SCHEDULER). `settings` override AFMESH_* variables."""
        super().__init__(_capi.ROLE_SCHEDULER, address, settings)


class NodeResource:
    """Something a node made and frees again: close() it, or leave a ``with`` block.

    Closing twice does nothing, nor does closing once the node is closed
    (which freed it). Subclasses name the C call that frees it (``_free``).
    """

    def __init__(self, node, handle):
        self._node, self._handle = node, handle

    @staticmethod
    def _free(node_ptr, handle):
        raise NotImplementedError

    def close(self):
        """Frees it (safe to call twice; a no-op once the node is closed)."""
        handle, self._handle = self._handle, None
        if handle is None or self._node.closed:
            return
        with self._node._live as ptr:
            errors.check(self._free(ptr, handle))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Registration(NodeResource):
    """Memory registered with a node for the fast path; drop it with close() or a `with` block.

    Keeps the registered object alive while registered.
    """

    def __init__(self, node, tensor, mr):
        super().__init__(node, mr)
        self.tensor = tensor

    @staticmethod
    def _free(node_ptr, mr):
        return lib.afmesh_deregister_buffer(node_ptr, mr)


class Node(_Member):
    """A worker or a server: the common part of :class:`afmesh.Worker` and :class:`afmesh.Server`."""

    _role = _capi.ROLE_FROM_CONFIG

    def __init__(self, scheduler=None, settings=None):
        """Joins the cluster; returns once every node is connected.

        Args:
            scheduler: "host:port" of the scheduler (None: AFMESH_SCHEDULER, or
                DMLC_PS_ROOT_URI and DMLC_PS_ROOT_PORT).
            settings: overrides of AFMESH_* variables, as {"AFMESH_RANK": 1} or
                ["AFMESH_RANK=1"]. Anything not given comes from the environment.
        """
        super().__init__(self._role, scheduler, settings)
        role, rank, workers, servers = C.c_int(), C.c_int32(), C.c_int32(), C.c_int32()
        device, transport, replacement = C.c_char_p(), C.c_char_p(), C.c_int()
        with self._live as ptr:
            errors.check(lib.afmesh_node_info(ptr, C.byref(role), C.byref(rank), C.byref(workers), C.byref(servers)))
            errors.check(lib.afmesh_node_modules(ptr, C.byref(device), C.byref(transport)))
            errors.check(lib.afmesh_node_is_replacement(ptr, C.byref(replacement)))
        #: True when this node took a failed node's place in a running cluster: the others
        #: passed the start-up long ago, so it must not wait for them in start-up barriers.
        self.replacement = bool(replacement.value)
        self.role = _ROLE_NAMES[role.value]
        self.rank, self.num_workers, self.num_servers = rank.value, workers.value, servers.value
        self.device_module, self.transport_module = device.value.decode(), transport.value.decode()

    def __repr__(self):
        state = "closed" if self.closed else f"{self.device_module}/{self.transport_module}"
        return (f"afmesh.{type(self).__name__}(rank={self.rank}, workers={self.num_workers}, "
                f"servers={self.num_servers}, {state})")

    def barrier(self, group="all", timeout=None):
        """Waits until every node of `group` ('workers', 'servers' or 'all') reaches this barrier."""
        groups = {"workers": _capi.BARRIER_WORKERS, "servers": _capi.BARRIER_SERVERS, "all": _capi.BARRIER_ALL}
        if group not in groups:
            raise errors.invalid_argument(f"barrier group must be one of {sorted(groups)}, not {group!r}")
        with self._live as ptr:
            errors.check(lib.afmesh_barrier(ptr, groups[group], timeout_ms(timeout)))

    def set_poll_mode(self, mode):
        """How completions are awaited: 'busy' (lowest latency, burns a core), 'adaptive' or 'blocking'."""
        with self._live as ptr:
            errors.check(lib.afmesh_set_poll_mode(ptr, mode.encode()))

    def register(self, obj):
        """Registers `obj`'s memory once, off the hot path; returns a :class:`Registration`.

        Buffers used without registering work too, registered on first use and cached.
        """
        t = as_tensor(obj)
        mr = _capi.mr_p()
        with self._live as ptr:
            errors.check(lib.afmesh_register_buffer(ptr, t.ptr, t.nbytes, t.kind, t.device, C.byref(mr)))
        return Registration(self, t, mr.value)

    @property
    def peers(self):
        """Ranks of this node's peers: the servers of a worker, the workers of a server."""
        return range(self.num_servers if self.role == "worker" else self.num_workers)

    def stats(self):
        """What this node has done since it was created (afmesh_stats_get), as {field: value}.

        Every field is a counter that only grows (see ``afmesh_stats`` in afmesh.h
        for what each counts); ``latency_buckets`` is a list of 24 counts, bucket i
        counting the push-pulls that completed within 2**i microseconds.
        """
        return self._read_stats(lib.afmesh_stats_get)

    def peer_stats(self, rank):
        """As :meth:`stats`, the share of one peer (afmesh_peer_stats_get).

        `rank` is a server's on a worker, a worker's on a server (see :attr:`peers`);
        NotFound for a rank outside the cluster. [node] fields read 0.
        """
        return self._read_stats(lambda ptr, stats: lib.afmesh_peer_stats_get(ptr, rank, stats))

    def transport_counters(self):
        """The transport module's own counters (afmesh_transport_counters), as {name: value}."""
        return {name: value for name, _, value in self._transport_counters()}

    def next_event(self, timeout=None):
        """The oldest membership event not taken yet (afmesh_next_event), as a :class:`MembershipEvent`.

        Waits up to `timeout` seconds (None: until one comes) and returns None
        when none came. Each peer process's going down is reported once, however
        it was found. Raises Closed once this node is closing.
        """
        event = _capi.afmesh_event()
        event.struct_size = C.sizeof(event)
        try:
            status = self._blocking(lambda ptr, ms: lib.afmesh_next_event(ptr, C.byref(event), ms), timeout,
                                    "next_event")
        except errors.Timeout:
            return None
        errors.check(status)
        role = _PEER_ROLE_NAMES[event.role]
        if event.type == _capi.EVENT_PEER_UP:
            return MembershipEvent("peer_up", role, event.rank, event.incarnation, None)
        reason = event.reason.decode(errors="replace")
        return MembershipEvent("peer_down", role, event.rank, event.incarnation, errors.error_for(event.status, reason))

    def _read_stats(self, get):
        """{field: value} filled in by get(ptr, stats)."""
        stats = _capi.afmesh_stats()
        stats.struct_size = C.sizeof(stats)
        with self._live as ptr:
            errors.check(get(ptr, C.byref(stats)))
        return _stats_dict(stats)

    def _transport_counters(self):
        """The transport module's counters as a list of (name, help, value)."""
        capacity = 64
        while True:
            counters, count = (_capi.afmesh_counter * capacity)(), C.c_size_t()
            with self._live as ptr:
                errors.check(lib.afmesh_transport_counters(ptr, counters, capacity, C.byref(count)))
            if count.value <= capacity:
                return [(c.name.decode(), c.help.decode(), c.value) for c in counters[:count.value]]
            capacity = count.value
