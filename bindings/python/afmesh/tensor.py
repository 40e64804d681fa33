# SPDX-License-Identifier: Apache-2.0
"""Describing the caller's memory to the C library, without copying it.

Anything that is one of these can be pushed, pulled into, registered or
answered with:

* an object with the buffer protocol: numpy arrays, bytearray, memoryview,
  bytes (read-only: push only), array.array;
* an object with ``__dlpack__``: torch tensors (CPU or GPU), cupy, jax...;
* an object with ``__cuda_array_interface__`` (numba device arrays);
* a :class:`Tensor`, e.g. from :func:`as_tensor` to send a uint16 array as
  bfloat16 (numpy has no bfloat16).

The memory must be C-contiguous; its element type (as a DLPack triple) and
shape travel with it, so the other side sees what was sent.
"""

import ctypes as C

from . import _capi, _dlpack, dtypes, errors

# ---------------------------------------------------------------- buffer protocol


class _PyBuffer(C.Structure):
    _fields_ = [
        ("buf", C.c_void_p),
        ("obj", C.c_void_p),
        ("len", C.c_ssize_t),
        ("itemsize", C.c_ssize_t),
        ("readonly", C.c_int),
        ("ndim", C.c_int),
        ("format", C.c_char_p),
        ("shape", C.c_void_p),
        ("strides", C.c_void_p),
        ("suboffsets", C.c_void_p),
        ("internal", C.c_void_p),
    ]


_get_buffer = C.PYFUNCTYPE(C.c_int, C.py_object, C.POINTER(_PyBuffer), C.c_int)(("PyObject_GetBuffer", C.pythonapi))
_release_buffer = C.PYFUNCTYPE(None, C.POINTER(_PyBuffer))(("PyBuffer_Release", C.pythonapi))
_PyBUF_SIMPLE = 0


def _address(view):
    """Address of a contiguous memoryview's first byte (read-only ones too, which ctypes.from_buffer refuses)."""
    buf = _PyBuffer()
    _get_buffer(view, C.byref(buf), _PyBUF_SIMPLE)
    try:
        return buf.buf or 0
    finally:
        _release_buffer(C.byref(buf))


# ---------------------------------------------------------------- Tensor


class Tensor:
    """Memory plus what it holds: address, size, element type, shape and where it lives.

    A Tensor never owns or copies memory; it keeps the object that does
    (``owner``) alive. Tensors the library hands out (a server's received
    pushes) are also readable from other libraries without a copy:
    ``numpy.asarray(t)`` / ``t.numpy()``, ``torch.from_dlpack(t)`` / ``t.torch()``.

    Attributes:
        ptr: address of the first byte.
        nbytes: size in bytes.
        dtype: a :class:`afmesh.dtypes.DType`.
        shape: tuple of ints (row-major, contiguous).
        kind: memory kind (``afmesh.MEM_HOST``, ``MEM_CUDA``, ``MEM_HIP``, ``MEM_ZE``).
        device: device index for device memory, 0 for host memory.
        owner: the object whose memory this is, kept alive by the Tensor.
        readonly: True if the memory must not be written (e.g. ``bytes``).
    """

    __slots__ = ("ptr", "nbytes", "dtype", "shape", "kind", "device", "owner", "readonly", "_valid")

    def __init__(self, ptr, nbytes, dtype, shape, kind=_capi.MEM_HOST, device=0, owner=None, readonly=False,
                 valid=None):
        self.ptr, self.nbytes, self.dtype, self.shape = ptr, nbytes, dtype, tuple(shape)
        self.kind, self.device, self.owner, self.readonly = kind, device, owner, readonly
        # For memory lent by the library: a callable saying whether it may still be read.
        self._valid = valid

    def __repr__(self):
        where = "host" if self.kind == _capi.MEM_HOST else f"kind {self.kind} device {self.device}"
        return f"afmesh.Tensor(shape={self.shape}, dtype={self.dtype}, nbytes={self.nbytes}, {where})"

    # -- lending to other libraries

    def _check_valid(self):
        if self._valid is not None and not self._valid():
            raise BufferError("this tensor was received for a request that has been answered: its memory now "
                              "belongs to the next push (copy what you need before respond)")

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        """DLPack export (legacy capsule): zero-copy for torch.from_dlpack, numpy.from_dlpack, cupy..."""
        del stream, max_version  # memory is ready when handed out; the legacy capsule is always acceptable
        if copy:
            raise BufferError("afmesh tensors are lent without copying (copy=True is not supported)")
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError(f"cannot move {self!r} to DLPack device {tuple(dl_device)}")
        self._check_valid()
        return _dlpack.export(self.ptr, self.kind, self.device, self.dtype, self.shape, self)

    def __dlpack_device__(self):
        """(DLPack device type, device index)."""
        return _dlpack.device_of(self.kind, self.device)

    @property
    def __array_interface__(self):
        """numpy's array interface (host memory only). bfloat16 appears as uint16: numpy has no bfloat16."""
        if self.kind != _capi.MEM_HOST:
            raise AttributeError("device memory has no __array_interface__ (use __dlpack__ or .torch())")
        self._check_valid()
        return {"shape": self.shape, "typestr": _typestr(self.dtype), "data": (self.ptr, self.readonly),
                "version": 3}

    def numpy(self):
        """A numpy array over the same memory (host only; bfloat16 as uint16)."""
        import numpy

        return numpy.asarray(self)

    def torch(self):
        """A torch tensor over the same memory (any device torch knows; bfloat16 stays bfloat16)."""
        import torch

        return torch.from_dlpack(self)

    def c_tensor(self):
        """This Tensor as the C struct afmesh_tensor."""
        t = _capi.afmesh_tensor()
        t.data = self.ptr
        t.bytes = self.nbytes
        t.kind = self.kind
        t.device = self.device
        t.dtype = _capi.afmesh_dtype(self.dtype.code, self.dtype.bits, self.dtype.lanes)
        t.ndim = len(self.shape)
        for i, n in enumerate(self.shape):
            t.shape[i] = n
        return t

    def row_range(self, start, stop):
        """Rows [start, stop) along the first dimension, as a Tensor over the same memory."""
        if not self.shape:
            raise errors.invalid_argument("a 0-d tensor has no rows")
        if not 0 <= start <= stop <= self.shape[0]:
            raise errors.invalid_argument(f"rows [{start}, {stop}) requested of a tensor with {self.shape[0]}")
        row_bytes = self.nbytes // self.shape[0] if self.shape[0] else 0
        return Tensor(self.ptr + start * row_bytes, row_bytes * (stop - start), self.dtype,
                      (stop - start,) + self.shape[1:], self.kind, self.device, self.owner, self.readonly,
                      self._valid)


def _typestr(dtype):
    kind = {dtypes.INT: "i", dtypes.UINT: "u", dtypes.FLOAT: "f", dtypes.COMPLEX: "c", dtypes.BOOL: "b",
            dtypes.BFLOAT: "u"}.get(dtype.code)
    if kind is None or dtype.lanes != 1:
        raise errors.invalid_type(f"{dtype} has no numpy equivalent")
    return f"<{kind}{dtype.itemsize}"


# ---------------------------------------------------------------- describing objects


def as_tensor(obj, dtype=None, *, writable=False):
    """Describes `obj` (see the module docstring) as a :class:`Tensor`, without copying.

    Args:
        obj: the memory.
        dtype: reinterpret the elements as this type (a DType, a name such as
            'bfloat16', or numpy/torch dtype). The last dimension is rescaled
            by the ratio of element sizes, e.g. a uint8 array [4, 8] as
            float32 is [4, 2].
        writable: require writable memory (pull buffers, receive buffers).

    Raises:
        afmesh.InvalidType (a TypeError): not a supported kind of object or
            element type.
        afmesh.InvalidArgument (a ValueError): not C-contiguous, read-only
            when `writable`, too many dimensions, or a size that `dtype` does
            not divide.
    """
    if isinstance(obj, Tensor):
        t = obj
    else:
        t = _describe(obj)
    if writable and t.readonly:
        raise errors.invalid_argument(f"{type(obj).__name__} is read-only; a buffer afmesh writes into must be "
                                      "writable")
    if dtype is not None:
        t = _reinterpret(t, _known(dtypes.as_dtype, dtype))
    if len(t.shape) > _capi.MAX_DIMS:
        raise errors.invalid_argument(f"{len(t.shape)} dimensions; afmesh carries at most {_capi.MAX_DIMS}")
    return t


def _known(parse, *args):
    """parse(*args), its TypeError (an element type or device afmesh does not know) raised as afmesh.InvalidType."""
    try:
        return parse(*args)
    except TypeError as e:
        raise errors.invalid_type(str(e)) from e


def _describe(obj):
    try:
        view = memoryview(obj)
    except TypeError:
        view = None
    except ValueError as e:  # numpy refuses buffers of datetime and similar types
        raise errors.invalid_type(f"{type(obj).__name__} cannot be sent: {e}") from e
    if view is not None:
        return _from_buffer(obj, view)
    if hasattr(obj, "__dlpack__"):
        return _from_dlpack(obj)
    if hasattr(obj, "__cuda_array_interface__"):
        return _from_cuda_array_interface(obj)
    raise errors.invalid_type(f"{type(obj).__name__} is not a tensor afmesh can use: pass an object with the buffer "
                              "protocol (numpy, bytearray, memoryview), __dlpack__ (torch) or __cuda_array_interface__")


def _not_contiguous(obj):
    return errors.invalid_argument(f"{type(obj).__name__} is not C-contiguous; afmesh sends and receives contiguous "
                                   "memory only (use numpy.ascontiguousarray(x) or x.contiguous())")


def _from_buffer(obj, view):
    if not view.c_contiguous:
        raise _not_contiguous(obj)
    dtype = _known(dtypes.from_format, view.format, view.itemsize)
    ptr = _address(view) if view.nbytes else 0
    # The memoryview is kept as the owner: while it lives, a bytearray cannot be resized under us.
    return Tensor(ptr, view.nbytes, dtype, view.shape, owner=(obj, view), readonly=view.readonly)


def _from_dlpack(obj):
    try:
        p = _known(_dlpack.parse, obj)
    except (BufferError, RuntimeError) as e:  # e.g. torch: a tensor that requires grad
        raise errors.invalid_argument(f"{type(obj).__name__} cannot be lent through DLPack: {e}") from e
    if not p.contiguous:
        raise _not_contiguous(obj)
    dtype = dtypes.DType(p.code, p.bits, p.lanes)
    count = 1
    for n in p.shape:
        count *= n
    return Tensor(p.ptr, count * dtype.itemsize, dtype, p.shape, p.kind, p.device, owner=obj)


def _from_cuda_array_interface(obj):
    cai = obj.__cuda_array_interface__
    typestr, shape = cai["typestr"], tuple(cai["shape"])
    itemsize = int(typestr[2:])
    codes = {"i": dtypes.INT, "u": dtypes.UINT, "f": dtypes.FLOAT, "c": dtypes.COMPLEX, "b": dtypes.BOOL}
    if typestr[0] == ">" or typestr[1] not in codes:
        raise errors.invalid_type(f"__cuda_array_interface__ typestr {typestr!r} is not a little-endian number type")
    strides = cai.get("strides")
    if strides is not None and not _dlpack.is_compact(shape, tuple(s // itemsize for s in strides)):
        raise _not_contiguous(obj)
    count = 1
    for n in shape:
        count *= n
    ptr, readonly = cai["data"]
    # The interface does not name the device; objects that know it say so as .device.id (cupy).
    device = getattr(getattr(obj, "device", None), "id", 0)
    return Tensor(ptr or 0, count * itemsize, dtypes.DType(codes[typestr[1]], itemsize * 8), shape, _capi.MEM_CUDA,
                  device, owner=obj, readonly=readonly)


def _reinterpret(t, dtype):
    if dtype == t.dtype:
        return t
    shape = t.shape or (1,)
    last_bytes = shape[-1] * t.dtype.itemsize
    if last_bytes % dtype.itemsize:
        raise errors.invalid_argument(f"cannot view {t.dtype} shape {t.shape} as {dtype}: the last dimension's "
                                      f"{last_bytes} bytes are not a whole number of {dtype.itemsize}-byte elements")
    shape = shape[:-1] + (last_bytes // dtype.itemsize,)
    return Tensor(t.ptr, t.nbytes, dtype, shape, t.kind, t.device, t.owner, t.readonly, t._valid)
