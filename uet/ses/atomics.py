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
* Floating point results are IEEE 754's default results (MIN and MAX propagate NaN).
  Complex PROD is ``(ac - bd) + (ad + bc)i`` with every product and sum rounded to the
  component type. BF16 arithmetic is done in binary32 and rounded to nearest-even, FP16 in
  numpy's binary16.
* The floating-point exceptions of each arithmetic result (SUM, DIFF, PROD, MIN, MAX) are
  found exactly (:mod:`uet.ses.ieee`: the exact result against the one delivered, per
  component): NAN, OVERFLOW, UNDERFLOW, INEXACT. :func:`apply_checked` returns them; the
  target refuses the operation with AMO_FP_NAN / AMO_FP_OVERFLOW / AMO_FP_UNDERFLOW /
  AMO_FP_INEXACT (in that precedence) for the exceptions its profile's
  ``atomics.fp_exceptions`` lists, leaving memory unchanged; the others keep IEEE's
  default result.
* LONG_DOUBLE is IEEE 754 binary128 (16 bytes; the one portable "long double"), computed
  exactly and rounded to nearest-even here (numpy's longdouble is the 80-bit x87 format on
  x86 and binary64 elsewhere). LONG_DOUBLE_COMPLEX is two of them (32 bytes): SUM, DIFF,
  PROD, READ and WRITE (its value does not fit the 16-byte compare-and-swap fields).
  Python values: a :class:`fractions.Fraction` (exact) or a float (zeros, infinities,
  NaN); complex ones a pair of those.
* CSWAP variants swap when ``compare <op> current`` holds (``CSWAP_LT``: compare < current).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
else:
    class _Numpy:
        """numpy, imported on first use: only floating-point atomics need it, and importing
        it cost every ``uet run`` ~70 ms."""

        def __getattr__(self, name: str) -> Any:
            import numpy

            globals()["np"] = numpy  # later uses go straight to the module
            return getattr(numpy, name)

    np = _Numpy()

from uet.ses import ieee
from uet.wire.constants import AtomicDatatype as Dt
from uet.wire.constants import AtomicOpcode as Op
from uet.wire.constants import ReturnCode as Rc


@dataclass(frozen=True, slots=True)
class DtInfo:
    """Size (bytes), kind and component size of one atomic datatype."""

    size: int
    kind: str  # 'int' | 'uint' | 'float' | 'bf16' | 'complex'
    component: int  # bytes per component (byte-order unit)
    np_name: str | None = None  # numpy scalar type for floats / complex

    @property
    def np_type(self) -> Any:
        """The numpy scalar type (numpy is imported when first needed)."""
        return None if self.np_name is None else getattr(np, self.np_name)


DATATYPES: dict[int, DtInfo] = {
    Dt.INT8: DtInfo(1, "int", 1), Dt.UINT8: DtInfo(1, "uint", 1),
    Dt.INT16: DtInfo(2, "int", 2), Dt.UINT16: DtInfo(2, "uint", 2),
    Dt.INT32: DtInfo(4, "int", 4), Dt.UINT32: DtInfo(4, "uint", 4),
    Dt.INT64: DtInfo(8, "int", 8), Dt.UINT64: DtInfo(8, "uint", 8),
    Dt.INT128: DtInfo(16, "int", 16), Dt.UINT128: DtInfo(16, "uint", 16),
    Dt.FLOAT: DtInfo(4, "float", 4, "float32"),
    Dt.DOUBLE: DtInfo(8, "float", 8, "float64"),
    Dt.FP16: DtInfo(2, "float", 2, "float16"),
    Dt.BF16: DtInfo(2, "bf16", 2, "float32"),
    Dt.FLOAT_COMPLEX: DtInfo(8, "complex", 4, "complex64"),
    Dt.DOUBLE_COMPLEX: DtInfo(16, "complex", 8, "complex128"),
    Dt.LONG_DOUBLE: DtInfo(16, "quad", 16),
    Dt.LONG_DOUBLE_COMPLEX: DtInfo(32, "quad_complex", 16),
}
#: the IEEE format of each floating-point datatype (of each component for complex ones)
FORMATS: dict[int, ieee.Fmt] = {
    Dt.FLOAT: ieee.BINARY32, Dt.DOUBLE: ieee.BINARY64, Dt.FP16: ieee.BINARY16,
    Dt.BF16: ieee.BFLOAT16, Dt.FLOAT_COMPLEX: ieee.BINARY32, Dt.DOUBLE_COMPLEX: ieee.BINARY64,
    Dt.LONG_DOUBLE: ieee.BINARY128, Dt.LONG_DOUBLE_COMPLEX: ieee.BINARY128,
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
    "quad": _ARITH | {Op.READ, Op.WRITE} | CAS_OPS,
    "quad_complex": frozenset({Op.SUM, Op.DIFF, Op.PROD, Op.READ, Op.WRITE}),
}
_FLOATISH = ("float", "bf16", "complex", "quad", "quad_complex")


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


def bf16_value(bits: int) -> Any:
    return np.array([bits << 16], dtype=np.uint32).view(np.float32)[0]


def _quad_bytes(value: Any) -> bytes:
    bits, _ = ieee.round_value(ieee.BINARY128, ieee.from_number(value))
    return bits.to_bytes(16, "big")


def _quad_value(data: bytes) -> Fraction | float:
    return ieee.to_number(ieee.unpack(ieee.BINARY128, int.from_bytes(data[:16], "big")))


def encode(datatype: int, value) -> bytes:
    """A Python value (int, float, complex, Fraction) as the big-endian wire operand."""
    info = DATATYPES[datatype]
    if info.kind in ("int", "uint"):
        return (int(value) & ((1 << (8 * info.size)) - 1)).to_bytes(info.size, "big")
    if info.kind == "bf16":
        return bf16_bits(value).to_bytes(2, "big")
    if info.kind == "quad":
        return _quad_bytes(value)
    if info.kind == "quad_complex":
        if isinstance(value, complex):
            re, im = value.real, value.imag
        elif isinstance(value, tuple | list):
            re, im = value
        else:
            re, im = value, 0
        return _quad_bytes(re) + _quad_bytes(im)
    with np.errstate(all="ignore"):
        return np.array([value], dtype=np.dtype(info.np_type).newbyteorder(">")).tobytes()


def decode(datatype: int, data: bytes):
    """A big-endian wire operand as a Python value (int, float or complex)."""
    info = DATATYPES[datatype]
    if info.kind in ("int", "uint"):
        return int.from_bytes(data[:info.size], "big", signed=info.kind == "int")
    if info.kind == "bf16":
        return float(bf16_value(int.from_bytes(data[:2], "big")))
    if info.kind == "quad":
        return _quad_value(data)
    if info.kind == "quad_complex":
        return (_quad_value(data[:16]), _quad_value(data[16:32]))
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
    new, old, _ = apply_checked(opcode, datatype, current_host, operand, compare)
    return new, old


_ARITH_OPS = frozenset({Op.MIN, Op.MAX, Op.SUM, Op.DIFF, Op.PROD})
_CAS_TEST: dict[int, str] = {Op.CSWAP: "==", Op.CSWAP_NE: "!=", Op.CSWAP_LE: "<=", Op.CSWAP_LT: "<",
             Op.CSWAP_GE: ">=", Op.CSWAP_GT: ">"}


def _components(fmt: ieee.Fmt, wire: bytes) -> list[tuple]:
    """The exact values of the components of a big-endian element."""
    n = fmt.nbits // 8
    return [ieee.unpack(fmt, int.from_bytes(wire[i:i + n], "big"))
            for i in range(0, len(wire), n)]


def _exact(opcode: int, a: list[tuple], b: list[tuple]) -> list[tuple]:
    """The exact result of an arithmetic atomic, component by component (complex PROD:
    the exact complex product)."""
    if opcode == Op.SUM:
        return [ieee.add(x, y) for x, y in zip(a, b, strict=True)]
    if opcode == Op.DIFF:
        return [ieee.sub(x, y) for x, y in zip(a, b, strict=True)]
    if opcode == Op.MIN:
        return [ieee.minimum(a[0], b[0])]
    if opcode == Op.MAX:
        return [ieee.maximum(a[0], b[0])]
    if len(a) == 1:  # PROD
        return [ieee.mul(a[0], b[0])]
    ar, ai = a
    br, bi = b
    return [ieee.sub(ieee.mul(ar, br), ieee.mul(ai, bi)),
            ieee.add(ieee.mul(ar, bi), ieee.mul(ai, br))]


def _quad_apply(opcode: int, a: list[tuple], b: list[tuple], cmp: list[tuple] | None
                ) -> tuple[list[int], set[str]]:
    """LONG_DOUBLE(_COMPLEX): the result encodings (binary128) and the exceptions."""
    fmt = ieee.BINARY128
    flags: set[str] = set()

    def rnd(v: tuple) -> tuple:
        bits, f = ieee.round_value(fmt, v)
        flags.update(f)
        return ieee.unpack(fmt, bits)

    if opcode == Op.READ:
        out = a
    elif opcode == Op.WRITE:
        out = b
    elif opcode in _CAS_TEST:
        assert cmp is not None
        out = b if ieee.compare(_CAS_TEST[opcode], cmp[0], a[0]) else a
    elif opcode == Op.PROD and len(a) == 2:  # textbook formula, each step rounded
        ar, ai = a
        br, bi = b
        re = rnd(ieee.sub(rnd(ieee.mul(ar, br)), rnd(ieee.mul(ai, bi))))
        im = rnd(ieee.add(rnd(ieee.mul(ar, bi)), rnd(ieee.mul(ai, br))))
        out = [re, im]
    else:
        out = [rnd(v) for v in _exact(opcode, a, b)]
    return [ieee.round_value(fmt, v)[0] for v in out], flags


def apply_checked(opcode: int, datatype: int, current_host: bytes, operand: bytes,
                  compare: bytes | None = None) -> tuple[bytes, bytes, set[str]]:
    """:func:`apply`, plus the floating-point exceptions of the result (a set of
    :data:`uet.ses.ieee.FLAGS` names; empty for integers and for READ, WRITE, MSWAP and the
    CSWAPs, which compute nothing)."""
    info = DATATYPES[datatype]
    if info.kind in ("quad", "quad_complex"):
        fmt = ieee.BINARY128
        old_wire = swap_order(datatype, current_host)
        a = _components(fmt, old_wire)
        b = _components(fmt, operand[:info.size])
        cmp = _components(fmt, compare[:info.size]) if compare is not None else None
        bits, quad_flags = _quad_apply(opcode, a, b, cmp)
        new_wire = b"".join(x.to_bytes(16, "big") for x in bits)
        return swap_order(datatype, new_wire), old_wire, quad_flags
    new_host, old_wire = _apply(opcode, datatype, current_host, operand, compare)
    if info.kind not in _FLOATISH or opcode not in _ARITH_OPS:
        return new_host, old_wire, set()
    fmt = FORMATS[datatype]
    a = _components(fmt, old_wire)
    b = _components(fmt, operand[:info.size])
    finite = all(v[0] == "n" for v in a + b)
    exact = _exact(opcode, a, b)
    n = fmt.nbits // 8
    got = swap_order(datatype, new_host)
    flags: set[str] = set()
    for i, v in enumerate(exact):
        flags |= ieee.check(fmt, v, int.from_bytes(got[i * n:(i + 1) * n], "big"), finite)
    return new_host, old_wire, flags


def _apply(opcode: int, datatype: int, current_host: bytes, operand: bytes,
           compare: bytes | None = None) -> tuple[bytes, bytes]:
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
