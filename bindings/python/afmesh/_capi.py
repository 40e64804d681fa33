# SPDX-License-Identifier: Apache-2.0
"""ctypes mirror of include/afmesh/afmesh.h: structs, constants and prototypes.

(afmesh_respond_vec is not bound: Server.respond_vec answers request by
request so that, if one fails midway, it knows exactly which were answered.)

The library is loaded with ctypes.CDLL, whose foreign calls release the GIL
for their whole duration, so a thread blocked in afmesh_wait or
afmesh_get_batch lets every other Python thread run. (ctypes.PyDLL would keep
the GIL; it must not be used here.)
"""

import ctypes as C

from . import _loader

# afmesh_status
OK = 0
IN_PROGRESS = 1
ERR_INTERNAL = -1
ERR_UNSUPPORTED_VERSION = -2
ERR_INVALID_ARGUMENT = -3
ERR_NO_MEMORY = -4
ERR_NOT_SUPPORTED = -5
ERR_PEER_FAILED = -6
ERR_ACCESS = -7
ERR_TIMEOUT = -8
ERR_NOT_FOUND = -100
ERR_CLOSED = -101

# afmesh_role
ROLE_FROM_CONFIG, ROLE_WORKER, ROLE_SERVER, ROLE_SCHEDULER = 0, 1, 2, 3

# afmesh_mem_kind
MEM_HOST, MEM_CUDA, MEM_HIP, MEM_ZE = 0, 1, 2, 3

# afmesh_batch_mode
BATCH_ALL_WORKERS, BATCH_ANY = 0, 1

# afmesh_barrier groups
BARRIER_WORKERS, BARRIER_SERVERS, BARRIER_ALL = 1, 2, 3

MAX_DIMS = 16
STATS_LATENCY_BUCKETS = 24


class afmesh_dtype(C.Structure):
    _fields_ = [("code", C.c_uint8), ("bits", C.c_uint8), ("lanes", C.c_uint16)]


class afmesh_tensor(C.Structure):
    _fields_ = [
        ("data", C.c_void_p),
        ("bytes", C.c_uint64),
        ("kind", C.c_int),
        ("device", C.c_int32),
        ("dtype", afmesh_dtype),
        ("ndim", C.c_uint32),
        ("shape", C.c_int64 * MAX_DIMS),
    ]


class afmesh_config(C.Structure):
    _fields_ = [
        ("struct_size", C.c_size_t),
        ("role", C.c_int),
        ("scheduler", C.c_char_p),
        ("settings", C.POINTER(C.c_char_p)),
    ]


class afmesh_push(C.Structure):
    _fields_ = [
        ("key", C.c_uint64),
        ("tensor", afmesh_tensor),
        ("servers", C.POINTER(C.c_int32)),
        ("num_servers", C.c_uint32),
    ]


class afmesh_pull(C.Structure):
    _fields_ = [("key", C.c_uint64), ("tensor", afmesh_tensor), ("server", C.c_int32)]


class afmesh_trace(C.Structure):
    _fields_ = [
        ("server", C.c_int32),
        ("posted", C.c_uint64),
        ("arrived", C.c_uint64),
        ("processed", C.c_uint64),
        ("responded", C.c_uint64),
        ("completed", C.c_uint64),
    ]


class afmesh_stats(C.Structure):
    """Counters of a node or of one of its peers; see afmesh.h for what each counts."""

    _fields_ = [
        ("struct_size", C.c_size_t),
        # worker: push-pulls
        ("push_pulls_started", C.c_uint64),
        ("push_pulls_completed", C.c_uint64),
        ("push_pulls_peer_failed", C.c_uint64),
        ("push_pulls_failed", C.c_uint64),
        # traffic [peer]
        ("requests", C.c_uint64),
        ("responses", C.c_uint64),
        ("push_bytes", C.c_uint64),
        ("pull_bytes", C.c_uint64),
        ("eager_requests", C.c_uint64),
        ("eager_responses", C.c_uint64),
        ("mailbox_requests", C.c_uint64),
        ("mailbox_responses", C.c_uint64),
        ("credit_waits", C.c_uint64),
        # transport operations [peer]
        ("writes", C.c_uint64),
        ("gathered_writes", C.c_uint64),
        ("messages", C.c_uint64),
        ("queue_full", C.c_uint64),
        ("heartbeats_missed", C.c_uint64),
        ("protocol_errors", C.c_uint64),
        # progress [node]
        ("completions", C.c_uint64),
        ("polls", C.c_uint64),
        ("empty_polls", C.c_uint64),
        ("transport_sleeps", C.c_uint64),
        ("condvar_sleeps", C.c_uint64),
        ("naps", C.c_uint64),
        ("wakeups", C.c_uint64),
        ("yields", C.c_uint64),
        ("connections_refused", C.c_uint64),
        ("staging_copies", C.c_uint64),
        ("staging_bytes", C.c_uint64),
        ("syscalls", C.c_uint64),
        # worker: latency of push-pulls that ended OK [node]
        ("latency_ns_sum", C.c_uint64),
        ("latency_buckets", C.c_uint64 * STATS_LATENCY_BUCKETS),
        # since 0.2 [peer]
        ("eager_bytes", C.c_uint64),
    ]


class afmesh_counter(C.Structure):
    _fields_ = [("name", C.c_char_p), ("help", C.c_char_p), ("value", C.c_uint64)]


# afmesh_event_type
EVENT_PEER_DOWN = 1
EVENT_PEER_UP = 2
EVENT_REASON_BYTES = 256


class afmesh_event(C.Structure):
    _fields_ = [
        ("struct_size", C.c_size_t),
        ("type", C.c_int),
        ("role", C.c_int),
        ("rank", C.c_int32),
        ("incarnation", C.c_uint64),
        ("status", C.c_int),
        ("reason", C.c_char * EVENT_REASON_BYTES),
    ]


node_p = C.c_void_p
request_p = C.c_void_p
mr_p = C.c_void_p
prepared_p = C.c_void_p
handle_t = C.c_uint64
status_t = C.c_int

# afmesh_log_handler(level, line, user). The library calls it from its own
# threads: keep the instance alive while it is installed, and pass
# log_handler_t() (a null function pointer; ctypes refuses None) to restore
# stderr.
log_handler_t = C.CFUNCTYPE(None, C.c_int, C.c_char_p, C.c_void_p)

_P = C.POINTER
_PROTOTYPES = {
    "afmesh_strerror": (C.c_char_p, [status_t]),
    "afmesh_last_error": (C.c_char_p, []),
    "afmesh_version": (C.c_char_p, []),
    "afmesh_node_create": (status_t, [_P(afmesh_config), _P(node_p)]),
    "afmesh_node_destroy": (status_t, [node_p]),
    "afmesh_node_info": (status_t, [node_p, _P(C.c_int), _P(C.c_int32), _P(C.c_int32), _P(C.c_int32)]),
    "afmesh_node_modules": (status_t, [node_p, _P(C.c_char_p), _P(C.c_char_p)]),
    "afmesh_node_is_replacement": (status_t, [node_p, _P(C.c_int)]),
    "afmesh_barrier": (status_t, [node_p, C.c_int, C.c_int]),
    "afmesh_set_poll_mode": (status_t, [node_p, C.c_char_p]),
    "afmesh_register_buffer": (status_t, [node_p, C.c_void_p, C.c_uint64, C.c_int, C.c_int, _P(mr_p)]),
    "afmesh_deregister_buffer": (status_t, [node_p, mr_p]),
    "afmesh_push_pull": (
        status_t,
        [node_p, _P(afmesh_push), C.c_size_t, _P(afmesh_pull), C.c_size_t, _P(handle_t)],
    ),
    "afmesh_push_pull_on_stream": (
        status_t,
        [node_p, _P(afmesh_push), C.c_size_t, _P(afmesh_pull), C.c_size_t, C.c_void_p, _P(handle_t)],
    ),
    "afmesh_prepare_push_pull": (
        status_t,
        [node_p, _P(afmesh_push), C.c_size_t, _P(afmesh_pull), C.c_size_t, _P(prepared_p)],
    ),
    "afmesh_push_pull_start": (status_t, [node_p, prepared_p, C.c_void_p, _P(handle_t)]),
    "afmesh_prepared_free": (status_t, [node_p, prepared_p]),
    "afmesh_stream_wait": (status_t, [node_p, handle_t, C.c_void_p]),
    "afmesh_wait": (status_t, [node_p, handle_t, C.c_int]),
    "afmesh_test": (status_t, [node_p, handle_t]),
    "afmesh_pull_bytes": (status_t, [node_p, handle_t, C.c_size_t, _P(C.c_uint64)]),
    "afmesh_trace_get": (status_t, [node_p, handle_t, _P(afmesh_trace), C.c_size_t, _P(C.c_size_t)]),
    "afmesh_register_recv_buffer": (
        status_t,
        [node_p, C.c_void_p, C.c_uint64, C.c_int, C.c_int, _P(C.c_int32), _P(C.c_uint64), C.c_size_t],
    ),
    "afmesh_get_batch": (status_t, [node_p, C.c_int, C.c_int, _P(request_p), C.c_size_t, _P(C.c_size_t)]),
    "afmesh_request_info": (status_t, [request_p, _P(C.c_int32), _P(C.c_size_t), _P(C.c_size_t)]),
    "afmesh_request_push": (status_t, [request_p, C.c_size_t, _P(C.c_uint64), _P(afmesh_tensor)]),
    "afmesh_request_pull": (status_t, [request_p, C.c_size_t, _P(C.c_uint64), _P(afmesh_tensor)]),
    "afmesh_respond": (status_t, [node_p, request_p, _P(afmesh_tensor), C.c_size_t]),
    "afmesh_stats_get": (status_t, [node_p, _P(afmesh_stats)]),
    "afmesh_peer_stats_get": (status_t, [node_p, C.c_int32, _P(afmesh_stats)]),
    "afmesh_transport_counters": (status_t, [node_p, _P(afmesh_counter), C.c_size_t, _P(C.c_size_t)]),
    "afmesh_next_event": (status_t, [node_p, _P(afmesh_event), C.c_int]),
    "afmesh_set_log_handler": (status_t, [log_handler_t, C.c_void_p]),
}


def _bind(lib):
    for name, (restype, argtypes) in _PROTOTYPES.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes
    return lib


lib = _bind(_loader.load())
