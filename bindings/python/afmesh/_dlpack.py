# SPDX-License-Identifier: Apache-2.0
"""DLPack over ctypes: reading another library's tensor, and lending ours.

Reading (:func:`parse`) calls ``obj.__dlpack__()`` and reads the DLTensor in
the capsule without consuming it: the capsule's own destructor then returns
it to the producer, while the caller keeps ``obj`` (and so its memory) alive.
This works for torch, numpy, cupy or jax without importing any of them.

Lending (:func:`export`) builds a DLManagedTensor over memory afmesh owns or
received, so ``torch.from_dlpack(view)`` / ``numpy.from_dlpack(view)`` see it
without a copy. Only the legacy (unversioned) capsule is produced and read:
every producer must still return it when no ``max_version`` is asked for.
"""

import ctypes as C
import itertools
import threading

from . import _capi

# DLDeviceType values (dlpack.h) -> (afmesh memory kind, device index is meaningful).
_DL_CPU, _DL_CUDA, _DL_CUDA_HOST, _DL_ROCM, _DL_ROCM_HOST, _DL_CUDA_MANAGED, _DL_ONEAPI = 1, 2, 3, 10, 11, 13, 14
_KIND_OF_DEVICE = {
    _DL_CPU: _capi.MEM_HOST,
    _DL_CUDA_HOST: _capi.MEM_HOST,
    _DL_ROCM_HOST: _capi.MEM_HOST,
    _DL_CUDA: _capi.MEM_CUDA,
    _DL_CUDA_MANAGED: _capi.MEM_CUDA,
    _DL_ROCM: _capi.MEM_HIP,
    _DL_ONEAPI: _capi.MEM_ZE,
}
_DEVICE_OF_KIND = {_capi.MEM_HOST: _DL_CPU, _capi.MEM_CUDA: _DL_CUDA, _capi.MEM_HIP: _DL_ROCM, _capi.MEM_ZE: _DL_ONEAPI}


class DLDevice(C.Structure):
    _fields_ = [("device_type", C.c_int32), ("device_id", C.c_int32)]


class DLDataType(C.Structure):
    _fields_ = [("code", C.c_uint8), ("bits", C.c_uint8), ("lanes", C.c_uint16)]


class DLTensor(C.Structure):
    _fields_ = [
        ("data", C.c_void_p),
        ("device", DLDevice),
        ("ndim", C.c_int32),
        ("dtype", DLDataType),
        ("shape", C.POINTER(C.c_int64)),
        ("strides", C.POINTER(C.c_int64)),
        ("byte_offset", C.c_uint64),
    ]


class DLManagedTensor(C.Structure):
    pass


_Deleter = C.CFUNCTYPE(None, C.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", C.c_void_p), ("deleter", _Deleter)]

_NAME = b"dltensor"
# The capsule keeps the name pointer it is given: it must outlive every capsule.
_NAME_STORAGE = C.create_string_buffer(_NAME)

# Two views of the same C functions: with py_object while the capsule is alive,
# with a raw pointer in the destructor, where the object is already dying and
# must not be touched by reference counting.
_get_pointer = C.PYFUNCTYPE(C.c_void_p, C.py_object, C.c_char_p)(("PyCapsule_GetPointer", C.pythonapi))
_new_capsule = C.PYFUNCTYPE(C.py_object, C.c_void_p, C.c_void_p, C.c_void_p)(("PyCapsule_New", C.pythonapi))
_raw_is_valid = C.PYFUNCTYPE(C.c_int, C.c_void_p, C.c_char_p)(("PyCapsule_IsValid", C.pythonapi))
_raw_get_pointer = C.PYFUNCTYPE(C.c_void_p, C.c_void_p, C.c_char_p)(("PyCapsule_GetPointer", C.pythonapi))


class Parsed:
    """What a DLPack producer said about its tensor (the memory stays the producer's)."""

    __slots__ = ("ptr", "kind", "device", "code", "bits", "lanes", "shape", "contiguous")


def parse(obj):
    """Reads ``obj.__dlpack__()``; raises TypeError for devices afmesh cannot address."""
    capsule = obj.__dlpack__()
    managed = DLManagedTensor.from_address(_get_pointer(capsule, _NAME))
    t = managed.dl_tensor
    kind = _KIND_OF_DEVICE.get(t.device.device_type)
    if kind is None:
        raise TypeError(f"DLPack device type {t.device.device_type} is not one afmesh can send from")
    p = Parsed()
    p.ptr = (t.data or 0) + t.byte_offset
    p.kind = kind
    p.device = t.device.device_id if kind != _capi.MEM_HOST else 0
    p.code, p.bits, p.lanes = t.dtype.code, t.dtype.bits, t.dtype.lanes
    p.shape = tuple(t.shape[i] for i in range(t.ndim))
    strides = tuple(t.strides[i] for i in range(t.ndim)) if t.strides else None
    p.contiguous = strides is None or is_compact(p.shape, strides)
    return p  # `capsule` dies here unconsumed: its destructor hands the tensor back


def is_compact(shape, strides):
    """True if element strides describe a row-major layout without gaps (size-1 dims may have any stride)."""
    if 0 in shape:
        return True
    expected = 1
    for size, stride in zip(reversed(shape), reversed(strides)):
        if size != 1 and stride != expected:
            return False
        expected *= size
    return True


# Lent tensors, by manager_ctx, kept alive until the consumer calls the deleter.
_lent = {}
_lent_lock = threading.Lock()
_ids = itertools.count(1)


@_Deleter
def _deleter(managed):
    with _lent_lock:
        _lent.pop(managed.contents.manager_ctx, None)


@C.CFUNCTYPE(None, C.c_void_p)
def _capsule_destructor(capsule):
    # A consumer renames the capsule once it owns the tensor; still named
    # "dltensor" means nobody took it, so the tensor is released here.
    if _raw_is_valid(capsule, _NAME):
        _deleter(C.cast(_raw_get_pointer(capsule, _NAME), C.POINTER(DLManagedTensor)))


def export(ptr, kind, device, dtype, shape, owner):
    """A DLPack capsule over [ptr, ...) that keeps `owner` alive until the consumer lets go."""
    managed = DLManagedTensor()
    shape_array = (C.c_int64 * max(len(shape), 1))(*shape)
    t = managed.dl_tensor
    t.data = ptr
    t.device = DLDevice(_DEVICE_OF_KIND[kind], device if kind != _capi.MEM_HOST else 0)
    t.ndim = len(shape)
    t.dtype = DLDataType(dtype.code, dtype.bits, dtype.lanes)
    t.shape = shape_array
    t.strides = None  # compact row-major
    t.byte_offset = 0
    ctx = next(_ids)
    managed.manager_ctx = ctx
    managed.deleter = _deleter
    with _lent_lock:
        _lent[ctx] = (managed, shape_array, owner)
    return _new_capsule(C.addressof(managed), C.addressof(_NAME_STORAGE), C.cast(_capsule_destructor, C.c_void_p))


def device_of(kind, device):
    """The ``__dlpack_device__`` pair for an afmesh memory kind and device index."""
    return (_DEVICE_OF_KIND[kind], device if kind != _capi.MEM_HOST else 0)
