# SPDX-License-Identifier: Apache-2.0
"""Element types as DLPack describes them: (type code, bits, lanes).

These are the values that travel with every tensor (``afmesh_dtype``), so a
server sees what the worker pushed, whatever library either side uses.
"""

from dataclasses import dataclass

# DLPack type codes (dlpack.h, DLDataTypeCode).
INT, UINT, FLOAT, BFLOAT, COMPLEX, BOOL = 0, 1, 2, 4, 5, 6


@dataclass(frozen=True)
class DType:
    """One element type: DLPack ``code``, ``bits`` per lane and ``lanes``."""

    code: int
    bits: int
    lanes: int = 1

    @property
    def itemsize(self):
        """Bytes per element."""
        return self.bits * self.lanes // 8

    @property
    def name(self):
        """Conventional name, e.g. 'float32' or 'bfloat16' (a DLPack triple if it has none)."""
        return _NAMES.get(self, f"dtype(code={self.code}, bits={self.bits}, lanes={self.lanes})")

    def __str__(self):
        return self.name

    def __repr__(self):
        return f"DType({self.name})"


int8, int16, int32, int64 = (DType(INT, b) for b in (8, 16, 32, 64))
uint8, uint16, uint32, uint64 = (DType(UINT, b) for b in (8, 16, 32, 64))
float16, float32, float64 = (DType(FLOAT, b) for b in (16, 32, 64))
bfloat16 = DType(BFLOAT, 16)
complex64, complex128 = DType(COMPLEX, 64), DType(COMPLEX, 128)
bool_ = DType(BOOL, 8)

_NAMES = {
    int8: "int8", int16: "int16", int32: "int32", int64: "int64",
    uint8: "uint8", uint16: "uint16", uint32: "uint32", uint64: "uint64",
    float16: "float16", float32: "float32", float64: "float64", bfloat16: "bfloat16",
    complex64: "complex64", complex128: "complex128", bool_: "bool",
}
_BY_NAME = {name: dtype for dtype, name in _NAMES.items()}
_BY_NAME["bool_"] = bool_


def as_dtype(value):
    """A DType from a DType, a name ('bfloat16'), or anything with a name such as numpy.float32 or torch.bfloat16."""
    if isinstance(value, DType):
        return value
    name = value if isinstance(value, str) else str(getattr(value, "__name__", value))
    name = name.removeprefix("torch.").removeprefix("numpy.")
    try:
        return _BY_NAME[name]
    except KeyError:
        raise TypeError(f"unknown element type {value!r}; known: {', '.join(sorted(_BY_NAME))}") from None


# Buffer-protocol format characters (struct module, native size) -> DType.
# 'l'/'L' are resolved by the buffer's itemsize, which is what the exporter says it holds.
_FORMAT_CODES = {
    "b": INT, "h": INT, "i": INT, "l": INT, "q": INT, "n": INT,
    "B": UINT, "H": UINT, "I": UINT, "L": UINT, "Q": UINT, "N": UINT, "c": UINT,
    "e": FLOAT, "f": FLOAT, "d": FLOAT,
    "?": BOOL,
}


def from_format(fmt, itemsize):
    """The DType of a buffer-protocol format string, or TypeError naming what is unsupported."""
    text = fmt or "B"
    if text[0] in "@=<":  # native or little-endian: this library only runs on little-endian hosts
        text = text[1:]
    elif text[0] in ">!":
        raise TypeError(f"big-endian element format {fmt!r} is not supported: convert to native byte order")
    complex_ = text.startswith("Z") and len(text) == 2 and text[1] in "fd"
    if complex_:
        return DType(COMPLEX, itemsize * 8)
    if len(text) != 1 or text not in _FORMAT_CODES:
        raise TypeError(f"element format {fmt!r} is not a plain number type (object, record and string arrays "
                        "cannot be sent)")
    return DType(_FORMAT_CODES[text], itemsize * 8)
