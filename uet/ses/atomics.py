"""Atomic operations: datatypes, operand encoding and the arithmetic the target performs.

Conventions (ref. 4.4, docs/ses.md):

* Operands travel big-endian. Target memory holds values little-endian (host order of the
  emulated hosts), so the target converts at the boundary; fetched values go back
  big-endian.
* Complex values are (real, imaginary), each component in the byte order above.
* Every non-CAS opcode carries exactly one operand of the element size (READ too: it is
  ignored); MSWAP carries the swap value then the mask; the CSWAP family carries its
  compare and swap values in the 36-byte extension, ``request_length`` 32, each value
  right-aligned in its 16-byte field.
* Floating point follows IEEE 754 default (non-trapping) handling; MIN and MAX propagate
  NaN; the AMO_FP_* return codes are never produced. Complex PROD is
  ``(ac - bd) + (ad + bc)i`` with every product and sum rounded to the component type.
  BF16 arithmetic is done in binary32 and rounded to nearest-even, FP16 in numpy's
  binary16.
* LONG_DOUBLE and LONG_DOUBLE_COMPLEX (no portable encoding) get AMO_UNSUPPORTED_DT.
* CSWAP variants swap when ``compare <op> current`` holds (``CSWAP_LT``: compare < current).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from uet.wire.constants import AtomicDatatype as Dt
from uet.wire.constants import AtomicOpcode as Op
from uet.wire.constants import ReturnCode as Rc


@dataclass(frozen=True, slots=True)
class DtInfo:
    """Size (bytes), kind and component size of one atomic datatype."""

    size: int
    kind: str  # 'int' | 'uint' | 'float' | 'bf16' | 'complex'
    component: int  # bytes per component (byte-order unit)
    np_type: Any = None  # numpy scalar type for floats / complex


DATATYPES: dict[int, DtInfo] = {
    Dt.INT8: DtInfo(1, "int", 1), Dt.UINT8: DtInfo(1, "uint", 1),
    Dt.INT16: DtInfo(2, "int", 2), Dt.UINT16: DtInfo(2, "uint", 2),
    Dt.INT32: DtInfo(4, "int", 4), Dt.UINT32: DtInfo(4, "uint", 4),
    Dt.INT64: DtInfo(8, "int", 8), Dt.UINT64: DtInfo(8, "uint", 8),
    Dt.INT128: DtInfo(16, "int", 16), Dt.UINT128: DtInfo(16, "uint", 16),
    Dt.FLOAT: DtInfo(4, "float", 4, np.float32),
    Dt.DOUBLE: DtInfo(8, "float", 8, np.float64),
    Dt.FP16: DtInfo(2, "float", 2, np.float16),
    Dt.BF16: DtInfo(2, "bf16", 2, np.float32),
    Dt.FLOAT_COMPLEX: DtInfo(8, "complex", 4, np.complex64),
    Dt.DOUBLE_COMPLEX: DtInfo(16, "complex", 8, np.complex128),
}

CAS_OPS = frozenset({Op.CSWAP, Op.CSWAP_NE, Op.CSWAP_LE, Op.CSWAP_LT, Op.CSWAP_GE,
                     Op.CSWAP_GT})
CAS_REQUEST_LENGTH = 32
_ARITH = frozenset({Op.MIN, Op.MAX, Op.SUM, Op.DIFF, Op.PROD})
_LOGICAL = frozenset({Op.LOR, Op.LAND, Op.LXOR})
_BITWISE = frozenset({Op.BOR, Op.BAND, Op.BXOR})
_ALL = _ARITH | _LOGICAL | _BITWISE | {Op.READ, Op.WRITE, Op.MSWAP} | CAS_OPS
_SUPPORTED_BY_KIND = {
    "int": _ALL,
    "uint": _ALL,
    "float": _ARITH | {Op.READ, Op.WRITE} | CAS_OPS,
    "bf16": _ARITH | {Op.READ, Op.WRITE} | CAS_OPS,
    "complex": frozenset({Op.SUM, Op.DIFF, Op.PROD, Op.READ, Op.WRITE, Op.CSWAP,
                          Op.CSWAP_NE}),
}


def datatype_info(datatype: int) -> DtInfo | None:
    """Size/kind of a datatype, or None if the emulator does not support it."""
    return DATATYPES.get(datatype)


def is_supported(opcode: int, datatype: int) -> bool:
    """Whether the opcode is defined for the datatype (e.g. no BXOR on FLOAT)."""
    info = DATATYPES.get(datatype)
    return info is not None and opcode in _SUPPORTED_BY_KIND[info.kind]


def alignment(datatype: int) -> int:
    """Required alignment of the target address: the component size."""
    return DATATYPES[datatype].component


def operand_length(opcode: int, datatype: int) -> int:
    """The request_length an atomic of this opcode and datatype must carry."""
    size = DATATYPES[datatype].size
    if opcode in CAS_OPS:
        return CAS_REQUEST_LENGTH
    if opcode == Op.MSWAP:
        return 2 * size
    return size


def validate(opcode: int, datatype: int, request_length: int, has_cas_ext: bool) -> Rc | None:
    """The AMO_* code for a malformed atomic request, or None if it is well formed."""
    if opcode not in _ALL:
        return Rc.AMO_UNSUPPORTED_OP
    info = DATATYPES.get(datatype)
    if info is None:
        return Rc.AMO_UNSUPPORTED_DT
    if opcode not in _SUPPORTED_BY_KIND[info.kind]:
        return Rc.AMO_UNSUPPORTED_OP
    if (opcode in CAS_OPS) != has_cas_ext:
        return Rc.AMO_UNSUPPORTED_SIZE
    if request_length != operand_length(opcode, datatype):
        return Rc.AMO_UNSUPPORTED_SIZE
    return None


# --------------------------------------------------------------------------- byte order


def swap_order(datatype: int, data: bytes) -> bytes:
    """Big-endian <-> little-endian, component by component."""
    c = DATATYPES[datatype].component
    if c == 1:
        return bytes(data)
    return b"".join(data[i:i + c][::-1] for i in range(0, len(data), c))


def bf16_bits(x: float) -> int:
    """Round a value (via binary32) to bfloat16 bits, to nearest even; NaN stays quiet NaN."""
    with np.errstate(all="ignore"):
        b = int(np.array([x], dtype=np.float32).view(np.uint32)[0])
    if (b & 0x7F800000) == 0x7F800000 and (b & 0x007FFFFF):
        return ((b >> 16) | 0x0040) & 0xFFFF
    b += 0x7FFF + ((b >> 16) & 1)
    return (b >> 16) & 0xFFFF


def bf16_value(bits: int) -> np.float32:
    return np.array([bits << 16], dtype=np.uint32).view(np.float32)[0]


def encode(datatype: int, value) -> bytes:
    """A Python value (int, float, complex) as the big-endian wire operand."""
    info = DATATYPES[datatype]
    if info.kind in ("int", "uint"):
        return (int(value) & ((1 << (8 * info.size)) - 1)).to_bytes(info.size, "big")
    if info.kind == "bf16":
        return bf16_bits(value).to_bytes(2, "big")
    with np.errstate(all="ignore"):
        return np.array([value], dtype=np.dtype(info.np_type).newbyteorder(">")).tobytes()


def decode(datatype: int, data: bytes):
    """A big-endian wire operand as a Python value (int, float or complex)."""
    info = DATATYPES[datatype]
    if info.kind in ("int", "uint"):
        return int.from_bytes(data[:info.size], "big", signed=info.kind == "int")
    if info.kind == "bf16":
        return float(bf16_value(int.from_bytes(data[:2], "big")))
    v = np.frombuffer(data[:info.size], dtype=np.dtype(info.np_type).newbyteorder(">"))[0]
    return complex(v) if info.kind == "complex" else float(v)


# --------------------------------------------------------------------------- arithmetic


def _load(info: DtInfo, be: bytes):
    """Wire bytes -> computation value (int for integers, numpy scalar otherwise)."""
    if info.kind in ("int", "uint"):
        return int.from_bytes(be, "big", signed=info.kind == "int")
    if info.kind == "bf16":
        return bf16_value(int.from_bytes(be, "big"))
    return np.frombuffer(be, dtype=np.dtype(info.np_type).newbyteorder(">"))[0].astype(
        info.np_type)


def _store(info: DtInfo, datatype: int, value) -> bytes:
    """Computation value -> wire bytes."""
    if info.kind in ("int", "uint"):
        return (value & ((1 << (8 * info.size)) - 1)).to_bytes(info.size, "big")
    if info.kind == "bf16":
        return bf16_bits(value).to_bytes(2, "big")
    return np.array([value], dtype=np.dtype(info.np_type).newbyteorder(">")).tobytes()


def _complex_prod(info: DtInfo, a, b):
    """Textbook complex product, every multiply and add rounded to the component type."""
    f = np.float32 if info.np_type is np.complex64 else np.float64
    ar, ai, br, bi = f(a.real), f(a.imag), f(b.real), f(b.imag)
    re = f(ar * br) - f(ai * bi)
    im = f(ar * bi) + f(ai * br)
    return info.np_type(complex(re, im))


def _cas_holds(opcode: int, compare, current) -> bool:
    if opcode == Op.CSWAP:
        return bool(compare == current)
    if opcode == Op.CSWAP_NE:
        return bool(compare != current)
    if opcode == Op.CSWAP_LE:
        return bool(compare <= current)
    if opcode == Op.CSWAP_LT:
        return bool(compare < current)
    if opcode == Op.CSWAP_GE:
        return bool(compare >= current)
    return bool(compare > current)  # CSWAP_GT


def apply(opcode: int, datatype: int, current_host: bytes, operand: bytes,
          compare: bytes | None = None) -> tuple[bytes, bytes]:
    """Perform one atomic.

    ``current_host`` is the element in target memory (little-endian); ``operand`` the
    big-endian operand (swap value for CSWAP, swap value + mask for MSWAP); ``compare`` the
    big-endian compare value of CSWAP. Returns ``(new_host, old_wire)``: the new memory
    content and the previous value as the big-endian bytes a fetching atomic returns.
    The caller has already checked :func:`validate`.
    """
    info = DATATYPES[datatype]
    size = info.size
    old_wire = swap_order(datatype, current_host)
    old = _load(info, old_wire)
    x = _load(info, operand[:size])
    integer = info.kind in ("int", "uint")
    with np.errstate(all="ignore"):
        if opcode == Op.MIN:
            new = min(old, x) if integer else np.minimum(old, x)
        elif opcode == Op.MAX:
            new = max(old, x) if integer else np.maximum(old, x)
        elif opcode == Op.SUM:
            new = old + x
        elif opcode == Op.DIFF:
            new = old - x
        elif opcode == Op.PROD:
            new = _complex_prod(info, old, x) if info.kind == "complex" else old * x
        elif opcode == Op.LOR:
            new = int(bool(old) or bool(x))
        elif opcode == Op.LAND:
            new = int(bool(old) and bool(x))
        elif opcode == Op.LXOR:
            new = int(bool(old) != bool(x))
        elif opcode == Op.BOR:
            new = old | x
        elif opcode == Op.BAND:
            new = old & x
        elif opcode == Op.BXOR:
            new = old ^ x
        elif opcode == Op.READ:
            new = old
        elif opcode == Op.WRITE:
            new = x
        elif opcode == Op.MSWAP:
            mask = _load(info, operand[size:2 * size])
            new = (old & ~mask) | (x & mask)
        elif opcode in CAS_OPS:
            assert compare is not None  # validate() requires it for CAS
            c = _load(info, compare[:size])
            new = x if _cas_holds(opcode, c, old) else old
        else:  # pragma: no cover - validate() refuses it
            raise ValueError(f"atomic opcode {opcode:#x}")
        new_wire = _store(info, datatype, new)
    return swap_order(datatype, new_wire), old_wire


def to_cas_field(value_be: bytes) -> int:
    """A big-endian element as the right-aligned 128-bit compare/swap field value."""
    return int.from_bytes(value_be, "big")


def from_cas_field(field: int, datatype: int) -> bytes:
    """The element (big-endian) right-aligned in a 128-bit compare/swap field."""
    size = DATATYPES[datatype].size
    return (field & ((1 << 128) - 1)).to_bytes(16, "big")[16 - size:]
