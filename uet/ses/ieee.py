"""IEEE 754 binary interchange formats, exactly: for the atomics' floating-point checks.

The atomic unit computes FLOAT, DOUBLE, FP16 and BF16 results with numpy (as before), and
LONG_DOUBLE (no portable native type) here. What numpy does not say is whether a result was
exact: the ``AMO_FP_*`` return codes (ref 4.6) need that. This module decodes any operand
into an exact value (a :class:`fractions.Fraction` with its sign, or an infinity, or NaN),
computes SUM / DIFF / PROD / MIN / MAX exactly, rounds to nearest-even into a format, and
compares an exact result with the one delivered:

* NAN: the delivered result is a NaN (an invalid operation such as inf - inf or 0 x inf, or
  a NaN operand propagated);
* OVERFLOW: finite operands, an infinite result;
* UNDERFLOW: a non-zero result below the smallest normal number that is not exact (IEEE's
  tininess before rounding);
* INEXACT: the delivered result differs from the exact one.

Values are tuples: ``("n", sign, magnitude)`` finite (``magnitude`` a Fraction >= 0, sign
0 or 1), ``("i", sign)`` infinite, ``("q",)`` NaN.
"""

from __future__ import annotations

from fractions import Fraction
from typing import NamedTuple

Value = tuple

NAN: Value = ("q",)

#: flag names, in the order the return codes take precedence
FLAGS = ("NAN", "OVERFLOW", "UNDERFLOW", "INEXACT")


class Fmt(NamedTuple):
    """A binary interchange format: exponent and fraction (trailing significand) bits."""

    name: str
    ebits: int
    mbits: int

    @property
    def nbits(self) -> int:
        return 1 + self.ebits + self.mbits

    @property
    def bias(self) -> int:
        return (1 << (self.ebits - 1)) - 1

    @property
    def emin(self) -> int:
        return 1 - self.bias

    @property
    def emax(self) -> int:
        return self.bias


BINARY16 = Fmt("binary16", 5, 10)
BFLOAT16 = Fmt("bfloat16", 8, 7)
BINARY32 = Fmt("binary32", 8, 23)
BINARY64 = Fmt("binary64", 11, 52)
BINARY128 = Fmt("binary128", 15, 112)


def unpack(fmt: Fmt, bits: int) -> Value:
    """The exact value of an encoding."""
    sign = bits >> (fmt.nbits - 1) & 1
    e = bits >> fmt.mbits & ((1 << fmt.ebits) - 1)
    m = bits & ((1 << fmt.mbits) - 1)
    if e == (1 << fmt.ebits) - 1:
        return ("i", sign) if m == 0 else NAN
    if e == 0:
        return ("n", sign, Fraction(m, 1 << fmt.mbits) * _pow2(fmt.emin))
    return ("n", sign, Fraction((1 << fmt.mbits) + m, 1 << fmt.mbits) * _pow2(e - fmt.bias))


def _pow2(e: int) -> Fraction:
    return Fraction(1 << e) if e >= 0 else Fraction(1, 1 << -e)


def _floor_log2(x: Fraction) -> int:
    """floor(log2(x)) for x > 0."""
    e = x.numerator.bit_length() - x.denominator.bit_length()
    if _pow2(e) > x:
        e -= 1
    elif _pow2(e + 1) <= x:
        e += 1
    return e


def round_value(fmt: Fmt, v: Value) -> tuple[int, set[str]]:
    """Round ``v`` to nearest-even in ``fmt``: (encoding, flags of that rounding)."""
    top = fmt.nbits - 1
    emask = (1 << fmt.ebits) - 1
    if v[0] == "q":
        return emask << fmt.mbits | 1 << (fmt.mbits - 1), {"NAN"}
    sign = v[1]
    if v[0] == "i":
        return sign << top | emask << fmt.mbits, set()
    mag: Fraction = v[2]
    if mag == 0:
        return sign << top, set()
    e = max(_floor_log2(mag), fmt.emin)
    quantum = _pow2(e - fmt.mbits)
    q = mag / quantum
    n = q.numerator // q.denominator
    rem = q - n
    if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and n & 1):
        n += 1
    flags: set[str] = set()
    if rem:
        flags.add("INEXACT")
        if mag < _pow2(fmt.emin):
            flags.add("UNDERFLOW")
    if n >> (fmt.mbits + 1):  # the rounding carried into the next binade
        n >>= 1
        e += 1
    if n >> fmt.mbits == 0:  # subnormal (or rounded to zero)
        return sign << top | n, flags
    if e > fmt.emax:
        return sign << top | emask << fmt.mbits, flags | {"OVERFLOW", "INEXACT"}
    return sign << top | (e + fmt.bias) << fmt.mbits | n & ((1 << fmt.mbits) - 1), flags


def from_number(x: float | int | Fraction) -> Value:
    """A Python number as an exact value (floats exactly, NaN and infinities kept)."""
    if isinstance(x, float):
        if x != x:
            return NAN
        if x in (float("inf"), float("-inf")):
            return ("i", int(x < 0))
        sign = int(x < 0 or (x == 0 and str(x).startswith("-")))
        return ("n", sign, abs(Fraction(x)))
    f = Fraction(x)
    return ("n", int(f < 0), abs(f))


def to_number(v: Value) -> Fraction | float:
    """An exact value as a Fraction (finite non-zero), or a float (zeros, inf, NaN)."""
    if v[0] == "q":
        return float("nan")
    if v[0] == "i":
        return float("-inf") if v[1] else float("inf")
    if v[2] == 0:
        return -0.0 if v[1] else 0.0
    return -v[2] if v[1] else v[2]


def _signed(v: Value) -> Fraction:
    return -v[2] if v[1] else v[2]


def neg(v: Value) -> Value:
    if v[0] == "q":
        return v
    return (v[0], 1 - v[1], *v[2:])


def add(a: Value, b: Value) -> Value:
    """a + b exactly (round-to-nearest's sign of an exact zero)."""
    if a[0] == "q" or b[0] == "q":
        return NAN
    if a[0] == "i" or b[0] == "i":
        if a[0] == "i" and b[0] == "i" and a[1] != b[1]:
            return NAN
        return a if a[0] == "i" else b
    s = _signed(a) + _signed(b)
    if s == 0:
        return ("n", a[1] & b[1], Fraction(0))
    return ("n", int(s < 0), abs(s))


def sub(a: Value, b: Value) -> Value:
    return add(a, neg(b))


def mul(a: Value, b: Value) -> Value:
    if a[0] == "q" or b[0] == "q":
        return NAN
    sign = a[1] ^ b[1]
    if a[0] == "i" or b[0] == "i":
        other = b if a[0] == "i" else a
        if other[0] == "n" and other[2] == 0:
            return NAN
        return ("i", sign)
    return ("n", sign, a[2] * b[2])


def _key(v: Value) -> Fraction | float:
    if v[0] == "i":
        return float("-inf") if v[1] else float("inf")
    return _signed(v)


def minimum(a: Value, b: Value) -> Value:
    """MIN, NaN propagating; -0 is below +0."""
    if a[0] == "q" or b[0] == "q":
        return NAN
    ka, kb = _key(a), _key(b)
    if ka == kb:
        return a if a[1] >= b[1] else b
    return a if ka < kb else b


def maximum(a: Value, b: Value) -> Value:
    if a[0] == "q" or b[0] == "q":
        return NAN
    ka, kb = _key(a), _key(b)
    if ka == kb:
        return a if a[1] <= b[1] else b
    return a if ka > kb else b


def compare(op: str, a: Value, b: Value) -> bool:
    """``a op b`` (op one of == != <= < >= >); any NaN makes it false except !=."""
    if a[0] == "q" or b[0] == "q":
        return op == "!="
    ka, kb = _key(a), _key(b)
    return {"==": ka == kb, "!=": ka != kb, "<=": ka <= kb, "<": ka < kb, ">=": ka >= kb,
            ">": ka > kb}[op]


def check(fmt: Fmt, exact: Value, delivered_bits: int, finite_operands: bool) -> set[str]:
    """The floating-point exceptions of delivering ``delivered_bits`` for ``exact``."""
    got = unpack(fmt, delivered_bits)
    if got[0] == "q":
        return {"NAN"}
    if exact[0] == "q":
        return {"NAN"}  # pragma: no cover - a NaN is never delivered as a number
    if got[0] == "i":
        if exact[0] == "i":
            return set()
        return {"OVERFLOW", "INEXACT"} if finite_operands else {"INEXACT"}
    if exact[0] == "i":
        return {"INEXACT"}
    if exact[2] == got[2] and (exact[2] == 0 or exact[1] == got[1]):
        return set()
    flags = {"INEXACT"}
    if 0 < exact[2] < _pow2(fmt.emin):
        flags.add("UNDERFLOW")
    return flags


def first(flags: set[str], wanted: frozenset[str] | set[str]) -> str | None:
    """The highest-precedence flag of ``flags`` that is in ``wanted``, or None."""
    for name in FLAGS:
        if name in flags and name in wanted:
            return name
    return None


__all__ = ["BFLOAT16", "BINARY128", "BINARY16", "BINARY32", "BINARY64", "FLAGS", "Fmt",
           "NAN", "add", "check", "compare", "first", "from_number", "maximum", "minimum",
           "mul", "neg", "round_value", "sub", "to_number", "unpack"]
