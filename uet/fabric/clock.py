"""Time units and conversions: virtual time is an integer count of picoseconds."""

from __future__ import annotations

PS = 1
NS = 1_000
US = 1_000_000
MS = 1_000_000_000
S = 1_000_000_000_000

_BITS_PS = 8 * S  # picoseconds-bits per second: bytes * 8 * 1e12 / rate


def ser_ps(nbytes: int, rate_bps: int) -> int:
    """Serialisation time of ``nbytes`` at ``rate_bps``, in picoseconds (rounded up)."""
    return -(-(nbytes * _BITS_PS) // rate_bps)


def ps_per_byte(rate_bps: int) -> int | None:
    """Exact picoseconds per byte at ``rate_bps`` (80 at 100 Gb/s), or None if not integral."""
    q, r = divmod(_BITS_PS, rate_bps)
    return q if r == 0 else None


def seconds(ps: int) -> float:
    """Picoseconds to float seconds (for reports only)."""
    return ps / S


def to_ps(seconds_: float) -> int:
    """Float seconds to integer picoseconds (rounded to nearest)."""
    return round(seconds_ * S)
