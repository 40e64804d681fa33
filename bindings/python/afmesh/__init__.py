# SPDX-License-Identifier: Apache-2.0
"""afmesh: tensor communication for Attention-FFN disaggregated inference.

Workers (attention) push activations to servers (FFN) and pull the results
back; a scheduler brings them together. This package drives libafmesh.so
through its C API with ctypes: nothing is compiled at install time, and every
call that waits releases the GIL.

Example (one process per node, e.g. under ``afmesh run --workers 1 --servers 1``)::

    import afmesh, numpy as np

    # worker
    with afmesh.Worker() as w:
        x, y = np.ones((128, 7168), np.float32), np.empty((128, 7168), np.float32)
        (out,) = w.push_pull(push=[(0, x)], pull=[(1, y, 0)]).wait()

    # server
    with afmesh.Server() as s:
        for r in s.get_batch():
            r.respond([r.tensors[0].numpy() * 2])

Tensors are anything with the buffer protocol, ``__dlpack__`` or
``__cuda_array_interface__`` (see :mod:`afmesh.tensor`). Failures raise
:class:`afmesh.Error` subclasses carrying the C status and message; refused
arguments raise :class:`afmesh.InvalidArgument` (a ValueError) or
:class:`afmesh.InvalidType` (a TypeError).
StepMesh's ``fserver`` API is in :mod:`afmesh.fserver`.
"""

from . import _loader, dtypes
from ._version import __version__
from ._capi import MEM_CUDA, MEM_HIP, MEM_HOST, MEM_ZE, lib as _lib
from .dtypes import DType
from .errors import AccessDenied, Closed, Error, InvalidArgument, InvalidType, NotFound, PeerFailed, Timeout
from .node import MembershipEvent, Registration, Scheduler
from .server import PullSlot, Request, Server
from .tensor import Tensor, as_tensor
from .worker import Handle, PreparedPushPull, Pull, Push, Trace, Worker

__all__ = [
    "AccessDenied", "Closed", "DType", "Error", "Handle", "InvalidArgument", "InvalidType", "MEM_CUDA", "MEM_HIP",
    "MEM_HOST", "MEM_ZE", "MembershipEvent", "NotFound", "PeerFailed", "PreparedPushPull", "Pull", "PullSlot", "Push",
    "Registration", "Request", "Scheduler", "Server", "Tensor", "Timeout", "Trace", "Worker", "__version__",
    "as_tensor", "dtypes", "library_path", "version",
]


def version():
    """The library's version, "major.minor.patch"."""
    return _lib.afmesh_version().decode()


def library_path():
    """Path of the libafmesh.so this package loaded."""
    return _loader.path_of(_lib)
