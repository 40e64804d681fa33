# SPDX-License-Identifier: Apache-2.0
"""Describing memory without copying it: what as_tensor accepts, what it refuses and why, and lending it back."""

import array

import numpy as np
import pytest

import afmesh
from afmesh import _dlpack, dtypes


@pytest.mark.parametrize("np_dtype, dtype", [
    (np.float32, dtypes.float32), (np.float16, dtypes.float16), (np.float64, dtypes.float64),
    (np.int8, dtypes.int8), (np.int16, dtypes.int16), (np.int32, dtypes.int32), (np.int64, dtypes.int64),
    (np.uint8, dtypes.uint8), (np.uint16, dtypes.uint16), (np.uint32, dtypes.uint32), (np.uint64, dtypes.uint64),
    (np.bool_, dtypes.bool_), (np.complex64, dtypes.complex64),
])
def test_numpy_arrays_are_described_in_place(np_dtype, dtype):
    a = np.zeros((3, 5), np_dtype)
    t = afmesh.as_tensor(a)
    assert (t.ptr, t.nbytes, t.dtype, t.shape, t.kind) == (a.ctypes.data, a.nbytes, dtype, (3, 5), afmesh.MEM_HOST)


def test_plain_python_buffers():
    b = bytearray(16)
    t = afmesh.as_tensor(b)
    assert (t.dtype, t.shape, t.readonly) == (dtypes.uint8, (16,), False)
    assert afmesh.as_tensor(memoryview(b)[4:]).ptr == t.ptr + 4
    assert afmesh.as_tensor(array.array("f", [1, 2])).dtype == dtypes.float32
    assert afmesh.as_tensor(b"abc").readonly


def test_a_described_bytearray_cannot_be_resized_under_the_library():
    b = bytearray(16)
    t = afmesh.as_tensor(b)
    with pytest.raises(BufferError):
        b.extend(b"more")
    del t


def test_non_contiguous_memory_is_refused_with_the_fix():
    with pytest.raises(ValueError, match="not C-contiguous.*ascontiguousarray"):
        afmesh.as_tensor(np.zeros((4, 4), np.float32)[:, ::2])
    with pytest.raises(ValueError, match="not C-contiguous"):
        afmesh.as_tensor(np.zeros((4, 3), np.float32).T)


@pytest.mark.parametrize("obj, reason", [
    (np.array([object()]), "not a plain number type"),
    (np.zeros(2, "datetime64[s]"), "cannot be sent"),
    (np.zeros(2, ">f4"), "big-endian"),
    ([1.0, 2.0], "not a tensor afmesh can use"),
])
def test_unsupported_element_types_and_objects_say_why(obj, reason):
    with pytest.raises(TypeError, match=reason):
        afmesh.as_tensor(obj)


def test_read_only_memory_cannot_be_written_into():
    with pytest.raises(ValueError, match="read-only"):
        afmesh.as_tensor(b"abcd", writable=True)
    frozen = np.zeros(4, np.float32)
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        afmesh.as_tensor(frozen, writable=True)


def test_reinterpreting_the_element_type():
    bf16 = afmesh.as_tensor(np.zeros((2, 8), np.uint16), "bfloat16")
    assert (bf16.dtype, bf16.shape) == (dtypes.bfloat16, (2, 8))
    assert afmesh.as_tensor(np.zeros((4, 8), np.uint8), np.float32).shape == (4, 2)
    with pytest.raises(ValueError, match="not a whole number of 4-byte elements"):
        afmesh.as_tensor(np.zeros((4, 3), np.uint8), "float32")
    with pytest.raises(TypeError, match="unknown element type"):
        afmesh.as_tensor(bytearray(4), "float24")


def test_too_many_dimensions():
    with pytest.raises(ValueError, match="at most 16"):
        afmesh.as_tensor(np.zeros((1,) * 17, np.float32))


def test_row_ranges_stay_in_the_same_memory():
    t = afmesh.as_tensor(np.zeros((6, 4), np.float32))
    part = t.row_range(2, 5)
    assert (part.ptr, part.nbytes, part.shape) == (t.ptr + 2 * 16, 3 * 16, (3, 4))
    with pytest.raises(ValueError, match="rows"):
        t.row_range(4, 7)


def test_lending_to_numpy_shares_memory_and_releases_the_capsule():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    view = afmesh.as_tensor(a)
    b = view.numpy()
    b[1, 2] = 42
    assert a[1, 2] == 42
    lent = len(_dlpack._lent)
    capsule = view.__dlpack__()
    assert len(_dlpack._lent) == lent + 1
    del capsule  # never consumed: its destructor must hand the tensor back
    assert len(_dlpack._lent) == lent
    assert np.from_dlpack(view).ctypes.data == a.ctypes.data


def test_memory_lent_for_an_answered_request_is_refused():
    t = afmesh.Tensor(np.zeros(4).ctypes.data, 32, dtypes.float64, (4,), valid=lambda: False)
    with pytest.raises(BufferError, match="answered"):
        t.numpy()


class FakeDeviceArray:
    """Just enough __cuda_array_interface__ (and cupy's .device.id) to be described; never dereferenced."""

    class device:
        id = 3

    def __init__(self, strides=None):
        self.__cuda_array_interface__ = {"data": (0xdead0000, False), "shape": (4, 8), "typestr": "<f2",
                                         "strides": strides, "version": 3}


def test_cuda_array_interface_objects_are_device_memory():
    t = afmesh.as_tensor(FakeDeviceArray())
    assert (t.ptr, t.kind, t.device, t.dtype, t.nbytes) == (0xdead0000, afmesh.MEM_CUDA, 3, dtypes.float16, 64)
    with pytest.raises(ValueError, match="not C-contiguous"):
        afmesh.as_tensor(FakeDeviceArray(strides=(2, 8)))


@pytest.fixture
def torch():
    """torch, or a skip saying it is missing (torch is imported only by the tests that use it)."""
    return pytest.importorskip("torch", reason="torch is not installed (python3-torch)")


def test_torch_dtype_shape_and_address_travel(torch):
    for tt, dtype in [(torch.float32, dtypes.float32), (torch.bfloat16, dtypes.bfloat16),
                      (torch.int64, dtypes.int64), (torch.float16, dtypes.float16)]:
        x = torch.zeros(3, 4, dtype=tt)
        t = afmesh.as_tensor(x)
        assert (t.ptr, t.dtype, t.shape, t.nbytes) == (x.data_ptr(), dtype, (3, 4), x.numel() * x.element_size())


def test_torch_slices_start_at_their_own_offset(torch):
    x = torch.zeros(6, 4)
    assert afmesh.as_tensor(x[2:]).ptr == x.data_ptr() + 2 * 16


def test_non_contiguous_and_grad_torch_tensors_are_refused(torch):
    with pytest.raises(ValueError, match="not C-contiguous"):
        afmesh.as_tensor(torch.zeros(3, 4).T)
    with pytest.raises(ValueError, match="DLPack"):
        afmesh.as_tensor(torch.zeros(2, requires_grad=True))


def test_lending_to_torch_keeps_bfloat16_and_shares_memory(torch):
    raw = np.zeros((2, 3), np.uint16)
    y = afmesh.as_tensor(raw, "bfloat16").torch()
    assert y.dtype == torch.bfloat16 and tuple(y.shape) == (2, 3)
    y[0, 0] = 1.0
    assert raw[0, 0] == 0x3F80  # 1.0 in bfloat16
