# SPDX-License-Identifier: Apache-2.0
"""Failures of the C library as Python exceptions.

Every failed C call raises an :class:`Error` (or a subclass chosen by its
status) carrying the status code and the library's ``afmesh_last_error()``
message. The subclasses also derive from the matching built-in exception, so
``except TimeoutError`` or ``except ValueError`` work as a Python user expects.

Arguments refused by the package itself, before any C call, raise the same
classes: :class:`InvalidArgument` (a ``ValueError``) for a bad value,
:class:`InvalidType` (a ``TypeError``, and an InvalidArgument) for an object
of a kind afmesh cannot use.
"""

from . import _capi


class Error(Exception):
    """A failed afmesh call.

    Attributes:
        status: the C status code (an ``afmesh_status``, e.g. -8).
        name: its name, e.g. ``"AFMESH_ERR_TIMEOUT"``.
        message: what the library said went wrong.
    """

    def __init__(self, status, message):
        self.status = status
        self.name = _capi.lib.afmesh_strerror(status).decode()
        self.message = message
        super().__init__(f"{self.name}: {message}")


class InvalidArgument(Error, ValueError):
    """AFMESH_ERR_INVALID_ARGUMENT: a bad argument or configuration."""


class InvalidType(InvalidArgument, TypeError):
    """An argument of a kind afmesh cannot use (not a tensor, a stream or a known element type).

    Status AFMESH_ERR_INVALID_ARGUMENT like every refused argument; a TypeError
    so that ``except TypeError`` catches it as it catches Python's own.
    """


class Timeout(Error, TimeoutError):
    """AFMESH_ERR_TIMEOUT: the wait ran out; the operation may still complete (wait again)."""


class PeerFailed(Error, ConnectionError):
    """AFMESH_ERR_PEER_FAILED: a peer died, was declared dead or broke the protocol."""


class AccessDenied(Error, PermissionError):
    """AFMESH_ERR_ACCESS: outside a registered region, or a wrong auth token."""


class NotFound(Error, LookupError):
    """AFMESH_ERR_NOT_FOUND: no usable module, or an unknown key or handle."""


class Closed(Error):
    """AFMESH_ERR_CLOSED: the node, or every peer the call waits for, has stopped.

    Also raised, without calling the library, when a closed node, an answered
    request or a dropped registration is used again.
    """


_BY_STATUS = {
    _capi.ERR_INVALID_ARGUMENT: InvalidArgument,
    _capi.ERR_TIMEOUT: Timeout,
    _capi.ERR_PEER_FAILED: PeerFailed,
    _capi.ERR_ACCESS: AccessDenied,
    _capi.ERR_NOT_FOUND: NotFound,
    _capi.ERR_CLOSED: Closed,
}


def error_for(status, message=None):
    """The exception for `status`, with `message` or else the calling thread's last C error."""
    if message is None:
        message = _capi.lib.afmesh_last_error().decode(errors="replace")
    return _BY_STATUS.get(status, Error)(status, message)


def check(status):
    """Raises the matching Error unless `status` is AFMESH_OK; returns it otherwise."""
    if status != _capi.OK:
        raise error_for(status)
    return status


def invalid_argument(message):
    """The InvalidArgument raised, without a C call, for an argument value the package refuses."""
    return InvalidArgument(_capi.ERR_INVALID_ARGUMENT, message)


def invalid_type(message):
    """The InvalidType raised, without a C call, for an argument of a kind the package cannot use."""
    return InvalidType(_capi.ERR_INVALID_ARGUMENT, message)


def closed(what):
    """The Closed error raised, without a C call, for a use after close."""
    return Closed(_capi.ERR_CLOSED, f"{what} is closed")
