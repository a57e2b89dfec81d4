"""Pure-Python implementation of the ``uet.native`` API (the reference and the fallback).

Every function and class here has a C-backed twin in ``uet.native.fast`` that gives identical
results; ``tests/native`` drives both side by side.

Checksum conventions (RFC 1071): a *one's-complement sum* is the 16-bit end-around-carry sum
of the data taken as big-endian 16-bit words (an odd trailing byte is padded with a zero
byte); it is 0 only when every word (and ``initial``) is 0, and 0xFFFF for any other multiple
of 0xFFFF. ``internet_checksum`` returns the *complement* of that sum: the value to store in
a header checksum field.
"""

from __future__ import annotations

from collections.abc import Iterable

from uet.native._common import (
    DEFAULT_MAX_DISTANCE,
    MARK_RESULTS,
    MAX_COUNT_SPAN,
    MAX_DISTANCE,
    PSN_MASK,
    U64_MASK,
    BytesLike,
    InsertResult,
    MarkResult,
    PsnWindowError,
    check_nonneg,
    check_u32,
    check_window,
    window_error,
)

__all__ = [
    "IMPLEMENTATION",
    "InsertResult",
    "MarkResult",
    "PsnTracker",
    "PsnWindowError",
    "ReorderBuffer",
    "checksum_adjust",
    "checksum_impl",
    "crc32c",
    "crc32c_impl",
    "internet_checksum",
    "ipv4_header_checksum",
    "ones_sum",
    "udp_checksum_ipv4",
    "udp_checksum_ipv6",
]

IMPLEMENTATION = "python"

_UDP_PROTO = 17

# --------------------------------------------------------------------------- checksums


def _bytes_view(data: BytesLike, name: str = "data") -> bytes | bytearray | memoryview:
    """``data`` as something whose ``len`` is its size in bytes (a contiguous buffer)."""
    if isinstance(data, bytes | bytearray):
        return data
    try:
        view = memoryview(data)
    except TypeError:
        raise TypeError(f"{name} must be a bytes-like object, not {type(data).__name__}") from None
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")  # raises TypeError for non-contiguous buffers
    return view


def _words(data: bytes | bytearray | memoryview) -> int:
    """An int congruent, modulo 0xFFFF, to the sum of the 16-bit words of ``data``.

    Since 2**16 == 1 (mod 0xFFFF), the big-endian value of the whole buffer is congruent to the
    sum of its 16-bit words; an odd length is padded with one zero byte (a shift by 8 bits).
    """
    value = int.from_bytes(data, "big")
    return value << 8 if len(data) & 1 else value


def _fold(value: int) -> int:
    """End-around-carry fold of a non-negative sum to 16 bits (0 only if ``value`` is 0)."""
    folded = value % 0xFFFF
    return 0xFFFF if folded == 0 and value else folded


def ones_sum(data: BytesLike, initial: int = 0) -> int:
    """Folded (not complemented) 16-bit one's-complement sum of ``data`` plus ``initial``.

    ``initial`` (an int in [0, 2**32)) is a partial sum carried in, e.g. a pseudo-header sum
    or an earlier ``ones_sum`` of an even-length chunk, so sums chain.
    """
    check_u32(initial, "initial")
    return _fold(_words(_bytes_view(data)) + initial)


def internet_checksum(data: BytesLike, initial: int = 0) -> int:
    """RFC 1071 Internet checksum: ``~ones_sum(data, initial) & 0xFFFF``.

    Returns the complemented value, ready to be placed in a header's checksum field (with that
    field zero in ``data``). Verifying data that includes a correct checksum gives 0.
    """
    return ~ones_sum(data, initial) & 0xFFFF


def _ipv4_header(hdr: BytesLike) -> tuple[bytes | bytearray | memoryview, int]:
    view = _bytes_view(hdr, "hdr")
    if len(view) < 20:
        raise ValueError(f"IPv4 header needs at least 20 bytes, got {len(view)}")
    ihl = view[0] & 0x0F
    if ihl < 5:
        raise ValueError(f"IPv4 IHL must be >= 5 (20 bytes), got {ihl}")
    if len(view) < ihl * 4:
        raise ValueError(f"IPv4 IHL {ihl} needs {ihl * 4} bytes, got {len(view)}")
    return view, ihl * 4


def ipv4_header_checksum(hdr: BytesLike) -> int:
    """Header checksum of the IPv4 header at the start of ``hdr``.

    The header length comes from IHL (``hdr`` may hold a whole packet); the checksum field
    (bytes 10-11) is treated as zero whatever it holds. Raises ``ValueError`` if ``hdr`` is
    shorter than 20 bytes, IHL < 5 or ``hdr`` is shorter than IHL * 4.
    """
    view, hlen = _ipv4_header(hdr)
    return ~_fold(int.from_bytes(view[0:10], "big") + int.from_bytes(view[12:hlen], "big")) & 0xFFFF


def _udp_sum(udp: bytes | bytearray | memoryview) -> int:
    # UDP header + payload with the checksum field (bytes 6-7) taken as zero.
    return int.from_bytes(udp[0:6], "big") + _words(udp[8:])


def _udp_result(total: int) -> int:
    csum = ~_fold(total) & 0xFFFF
    return csum or 0xFFFF  # RFC 768: a computed 0 is sent as 0xFFFF


def udp_checksum_ipv4(src: BytesLike, dst: BytesLike, udp: BytesLike) -> int:
    """UDP checksum over the IPv4 pseudo-header and ``udp`` (UDP header + payload).

    ``src``/``dst`` are 4-byte addresses; the pseudo-header length is ``len(udp)`` (8 to
    65535); the checksum field in ``udp`` is treated as zero. A result of 0 is returned as
    0xFFFF (RFC 768), so the value can be stored as is.
    """
    s, d, u = _bytes_view(src, "src"), _bytes_view(dst, "dst"), _bytes_view(udp, "udp")
    if len(s) != 4 or len(d) != 4:
        raise ValueError(f"IPv4 addresses must be 4 bytes, got {len(s)} and {len(d)}")
    if not 8 <= len(u) <= 0xFFFF:
        raise ValueError(f"UDP datagram must be 8 to 65535 bytes, got {len(u)}")
    total = int.from_bytes(s, "big") + int.from_bytes(d, "big") + _UDP_PROTO + len(u)
    return _udp_result(total + _udp_sum(u))


def udp_checksum_ipv6(src: BytesLike, dst: BytesLike, udp: BytesLike) -> int:
    """UDP checksum over the IPv6 pseudo-header (RFC 8200 8.1) and ``udp``.

    ``src``/``dst`` are 16-byte addresses; the upper-layer length is ``len(udp)`` (8 to
    2**32 - 1); otherwise as ``udp_checksum_ipv4`` (0 is returned as 0xFFFF).
    """
    s, d, u = _bytes_view(src, "src"), _bytes_view(dst, "dst"), _bytes_view(udp, "udp")
    if len(s) != 16 or len(d) != 16:
        raise ValueError(f"IPv6 addresses must be 16 bytes, got {len(s)} and {len(d)}")
    if not 8 <= len(u) <= PSN_MASK:
        raise ValueError(f"UDP datagram must be 8 to 2**32 - 1 bytes, got {len(u)}")
    total = int.from_bytes(s, "big") + int.from_bytes(d, "big") + _UDP_PROTO + len(u)
    return _udp_result(total + _udp_sum(u))


def checksum_adjust(csum: int, old16: int, new16: int) -> int:
    """RFC 1624 eqn. 3 incremental update: ``~(~csum + ~old16 + new16)``.

    ``csum`` is the checksum field's current value; one 16-bit word of the covered data
    changes from ``old16`` to ``new16`` (e.g. the TTL/protocol or the DSCP/ECN word of an
    IPv4 header). Returns the new field value. All arguments are in [0, 0xFFFF].
    """
    for value, name in ((csum, "csum"), (old16, "old16"), (new16, "new16")):
        check_nonneg(value, name, 0xFFFF)
    total = (~csum & 0xFFFF) + (~old16 & 0xFFFF) + new16
    total = (total & 0xFFFF) + (total >> 16)
    total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def checksum_impl() -> str:
    """Which code path the one's-complement sums use: ``"python"`` here."""
    return "python"


# --------------------------------------------------------------------------- CRC-32C


def _crc_table() -> tuple[int, ...]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return tuple(table)


_CRC_TABLE = _crc_table()


def crc32c(data: BytesLike, crc: int = 0) -> int:
    """CRC-32C (Castagnoli, reflected, init/xorout 0xFFFFFFFF) of ``data``.

    Chainable: ``crc32c(b, crc32c(a)) == crc32c(a + b)``. ``crc32c(b"123456789")`` is
    0xE3069283.
    """
    check_u32(crc, "crc")
    table = _CRC_TABLE
    crc ^= PSN_MASK
    for byte in _bytes_view(data):
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ PSN_MASK


def crc32c_impl() -> str:
    """Which CRC-32C code path is in use: ``"python"`` here."""
    return "python"


# --------------------------------------------------------------------------- PSN tracker

_NEW, _DUPLICATE, _STALE, _OUT_OF_WINDOW = MARK_RESULTS


def check_ack_args(cack: int, sack_base: int, bitmap: int) -> None:
    """Validate the arguments of ``PsnTracker.apply_ack`` (shared with ``fast``)."""
    check_u32(cack, "cack")
    check_u32(sack_base, "sack_base")
    check_nonneg(bitmap, "bitmap", U64_MASK)


def _set_bit_offsets(bits: int) -> list[int]:
    """Offsets of the set bits of ``bits``, ascending."""
    if bits & (bits - 1) == 0:  # zero or one bit set: the common cases
        return [bits.bit_length() - 1] if bits else []
    text = format(bits, "b")
    top = len(text) - 1
    return [top - i for i, ch in enumerate(text) if ch == "1"][::-1]


class PsnTracker:
    """One direction of a PDC: which PSNs have arrived (or been acknowledged).

    A bitmap window of ``window`` PSNs (MP_RANGE, 128 to 65536) starts at ``base`` (=
    ``cack_psn + 1``, always un-received). PSNs are 32-bit and compared with serial arithmetic:
    a PSN up to 2**31 - 1 before ``base`` is *stale* (received and shifted out), one in
    ``[base, base + window)`` is in the window, anything else is out of the window.
    """

    __slots__ = ("_base", "_bits", "_max", "_ooo", "_received", "_window")

    def __init__(self, start_psn: int, window: int = 128) -> None:
        self._window = check_window(window)
        self.reset(start_psn)

    def reset(self, start_psn: int) -> None:
        """Forget everything: ``cack_psn = start_psn - 1``; counters back to zero."""
        check_u32(start_psn, "start_psn")
        self._base = start_psn
        self._bits = 0  # bit i: PSN base + i received (bit 0 is always clear)
        self._max = (start_psn - 1) & PSN_MASK
        self._ooo = 0
        self._received = 0

    # -- properties
    @property
    def window(self) -> int:
        """Window size in PSNs (MP_RANGE)."""
        return self._window

    @property
    def base(self) -> int:
        """First PSN not yet received (``cack_psn + 1``)."""
        return self._base

    @property
    def cack_psn(self) -> int:
        """Cumulative PSN: every PSN up to and including it has been received."""
        return (self._base - 1) & PSN_MASK

    @property
    def max_psn(self) -> int:
        """Highest PSN received (serially), or ``cack_psn`` if none beyond it."""
        return self._max

    @property
    def ooo_count(self) -> int:
        """Number of ``mark`` calls that returned NEW for a PSN other than ``base``."""
        return self._ooo

    @property
    def received_count(self) -> int:
        """Number of PSNs newly marked (by ``mark``, ``mark_cumulative``, ``mark_bitmap``)."""
        return self._received

    # -- internals
    def _advance(self) -> None:
        bits = self._bits
        if bits & 1:
            run = (bits ^ (bits + 1)).bit_length() - 1  # trailing ones
            self._bits = bits >> run
            self._base = (self._base + run) & PSN_MASK

    def _raise_max(self, psn: int) -> None:
        if (psn - self._max) & PSN_MASK < 0x80000000 and psn != self._max:
            self._max = psn

    # -- single PSN
    def mark(self, psn: int) -> MarkResult:
        """Record the arrival of ``psn``; see ``MarkResult``."""
        check_u32(psn, "psn")
        off = (psn - self._base) & PSN_MASK
        if off >= 0x80000000:
            return MarkResult.STALE
        if off >= self._window:
            return MarkResult.OUT_OF_WINDOW
        bit = 1 << off
        if self._bits & bit:
            return MarkResult.DUPLICATE
        self._bits |= bit
        self._received += 1
        self._raise_max(psn)
        if off:
            self._ooo += 1
        else:
            self._advance()
        return MarkResult.NEW

    def is_received(self, psn: int) -> bool:
        """True if ``psn`` has been received (always for PSNs before ``base``)."""
        check_u32(psn, "psn")
        off = (psn - self._base) & PSN_MASK
        if off >= 0x80000000:
            return True
        return off < self._window and bool(self._bits >> off & 1)

    def sack_bitmap(self, base: int) -> int:
        """64-bit SACK bitmap: bit i set iff PSN ``base + i`` has been received.

        PSNs before the window base read as 1, PSNs at or beyond its end as 0 (ref. 2.4).
        """
        check_u32(base, "base")
        off = (base - self._base) & PSN_MASK
        if off >= 0x80000000:  # starts before the window
            below = 0x100000000 - off
            if below >= 64:
                return U64_MASK
            return ((self._bits << below) | ((1 << below) - 1)) & U64_MASK
        if off < self._window:
            return (self._bits >> off) & U64_MASK
        # Beyond the window: zeros, until base + i wraps (serially) to before the window.
        wrap = 0x80000000 - off
        return 0 if wrap >= 64 else U64_MASK ^ ((1 << wrap) - 1)

    def count_received_in(self, start: int, n: int) -> int:
        """How many of the ``n`` PSNs ``[start, start + n)`` are received (0 <= n <= 65536)."""
        check_u32(start, "start")
        check_nonneg(n, "n", MAX_COUNT_SPAN)
        total = 0
        for chunk in range(0, n, 64):
            bm = self.sack_bitmap((start + chunk) & PSN_MASK)
            if n - chunk < 64:
                bm &= (1 << (n - chunk)) - 1
            total += bm.bit_count()
        return total

    def missing(self, limit: int = 64, end: int | None = None) -> list[int]:
        """The first ``limit`` un-received PSNs from ``base`` up to ``end`` (default ``max_psn``).

        ``end`` is clipped to the window; an ``end`` before ``base`` gives an empty list.
        """
        check_nonneg(limit, "limit", MAX_COUNT_SPAN)
        last = self._max if end is None else check_u32(end, "end")
        span = ((last - self._base) & PSN_MASK) + 1
        if span > 0x80000000:  # end before base
            return []
        if not limit:
            return []
        holes = ~self._bits & ((1 << min(span, self._window)) - 1)
        base = self._base
        return [(base + off) & PSN_MASK for off in _set_bit_offsets(holes)[:limit]]

    # -- bulk (ack side)
    def mark_cumulative(self, psn: int) -> list[int]:
        """Mark every PSN up to and including ``psn`` received (a CACK arrived).

        Returns the newly marked PSNs in order (empty if ``psn`` is before ``base``). Raises
        ``PsnWindowError`` (a ``ValueError``), changing nothing, if ``psn`` is at or beyond
        ``base + window``.
        """
        check_u32(psn, "psn")
        off = (psn - self._base) & PSN_MASK
        if off >= 0x80000000:
            return []
        if off >= self._window:
            raise window_error(psn, self._base, self._window)
        mask = (1 << (off + 1)) - 1
        base = self._base
        new = [(base + i) & PSN_MASK for i in _set_bit_offsets(~self._bits & mask)]
        self._bits |= mask
        self._received += len(new)
        self._raise_max(psn)
        self._advance()
        return new

    def mark_bitmap(self, base: int, bitmap: int) -> list[int]:
        """Mark the PSNs a 64-bit SACK bitmap reports (bit i = ``base + i``).

        PSNs outside the window are ignored. Returns the newly marked PSNs in bit order.
        """
        check_u32(base, "base")
        check_nonneg(bitmap, "bitmap", U64_MASK)
        new = []
        bits = self._bits
        window = self._window
        for i in _set_bit_offsets(bitmap):
            psn = (base + i) & PSN_MASK
            off = (psn - self._base) & PSN_MASK
            if off < window and not bits >> off & 1:
                bits |= 1 << off
                new.append(psn)
        if new:
            self._bits = bits
            self._received += len(new)
            self._raise_max(new[-1])
            self._advance()
        return new

    # -- combined operations: one call per received packet / per ACK
    def on_packet(self, psn: int) -> tuple[MarkResult, bool, int]:
        """Record the arrival of ``psn``; returns ``(result, in_order, ooo_count)``.

        ``result`` is what ``mark`` returns, ``in_order`` is True when ``psn`` was the window
        base (a NEW arrival that moved the CACK), ``ooo_count`` the counter after the arrival:
        what a receiving PDC needs per data packet (its congestion control gets both flags).
        """
        if type(psn) is not int or psn < 0 or psn > PSN_MASK:
            check_u32(psn, "psn")  # raises, unless an int subclass in range
        off = (psn - self._base) & PSN_MASK
        if off >= 0x80000000:
            return _STALE, False, self._ooo
        if off >= self._window:
            return _OUT_OF_WINDOW, False, self._ooo
        bits = self._bits
        bit = 1 << off
        if bits & bit:
            return _DUPLICATE, False, self._ooo
        self._received += 1
        d = (psn - self._max) & PSN_MASK
        if 0 < d < 0x80000000:
            self._max = psn
        if off:
            self._bits = bits | bit
            self._ooo += 1
            return _NEW, False, self._ooo
        bits |= 1
        run = (bits ^ (bits + 1)).bit_length() - 1  # trailing ones: the CACK moves past them
        self._bits = bits >> run
        self._base = (self._base + run) & PSN_MASK
        return _NEW, True, self._ooo

    def classify(self, psn: int) -> MarkResult:
        """What ``mark(psn)`` would return, without marking anything."""
        check_u32(psn, "psn")
        off = (psn - self._base) & PSN_MASK
        if off >= 0x80000000:
            return _STALE
        if off >= self._window:
            return _OUT_OF_WINDOW
        return _DUPLICATE if self._bits >> off & 1 else _NEW

    def ack_state(self, base: int | None = None) -> tuple[int, int]:
        """``(cack_psn, sack_bitmap(base))`` for building one ACK; ``base`` defaults to
        ``cack_psn + 1`` (the usual SACK base)."""
        if base is None:
            return (self._base - 1) & PSN_MASK, self._bits & U64_MASK
        return (self._base - 1) & PSN_MASK, self.sack_bitmap(base)

    def apply_ack(self, cack: int, sack_base: int, bitmap: int) -> list[int]:
        """Ack side: an ACK with CACK ``cack`` and a SACK ``bitmap`` from ``sack_base`` arrived.

        ``mark_cumulative(cack)`` then ``mark_bitmap(sack_base, bitmap)`` in one call; returns
        the newly marked PSNs (those the CACK covers, in order, then the bitmap's). Raises
        ``PsnWindowError``, changing nothing, if ``cack`` is beyond the window.
        """
        check_ack_args(cack, sack_base, bitmap)
        new = self.mark_cumulative(cack)
        if bitmap:
            new += self.mark_bitmap(sack_base, bitmap)
        return new

    def mark_many(self, psns: Iterable[int]) -> int:
        """``mark`` each PSN of ``psns`` in order; returns how many were NEW.

        Every PSN is checked first: a bad one raises and marks nothing.
        """
        seq = psns if type(psns) in (list, tuple) else list(psns)
        for psn in seq:
            check_u32(psn, "psn")
        mark = self.mark
        return sum(1 for psn in seq if mark(psn) is _NEW)

    def __repr__(self) -> str:
        return (
            f"PsnTracker(cack_psn={self.cack_psn}, window={self._window}, "
            f"max_psn={self._max}, received={self._received}, ooo={self._ooo})"
        )


# --------------------------------------------------------------------------- ROD reorder buffer


class ReorderBuffer:
    """ROD reorder buffer: holds out-of-order items by PSN, releases them in order.

    Bounded by ``max_items`` items and ``max_bytes`` bytes (the caller says how many bytes each
    item costs) and by ``max_distance`` PSNs ahead of ``next_psn``. The item for ``next_psn``
    itself is always accepted (so a full buffer can drain), which may take ``items``/``bytes``
    one item past the limits until ``pop_ready`` releases it.
    """

    __slots__ = ("_bytes", "_held", "_max_bytes", "_max_distance", "_max_items", "_next")

    def __init__(
        self,
        max_items: int,
        max_bytes: int,
        next_psn: int,
        max_distance: int = DEFAULT_MAX_DISTANCE,
    ) -> None:
        self._max_items = check_nonneg(max_items, "max_items", PSN_MASK)
        self._max_bytes = check_nonneg(max_bytes, "max_bytes", 1 << 63)
        self._max_distance = check_nonneg(max_distance, "max_distance", MAX_DISTANCE)
        if max_items < 1 or max_distance < 1:
            raise ValueError("max_items and max_distance must be at least 1")
        self._held: dict[int, tuple[object, int]] = {}
        self._bytes = 0
        self._next = check_u32(next_psn, "next_psn")

    @property
    def items(self) -> int:
        """Number of items held."""
        return len(self._held)

    @property
    def bytes(self) -> int:
        """Sum of the ``nbytes`` of the items held."""
        return self._bytes

    @property
    def next_psn(self) -> int:
        """The PSN the next released item must have."""
        return self._next

    @property
    def max_items(self) -> int:
        return self._max_items

    @property
    def max_bytes(self) -> int:
        return self._max_bytes

    @property
    def max_distance(self) -> int:
        return self._max_distance

    def insert(self, psn: int, item: object, nbytes: int) -> InsertResult:
        """Store ``item`` for ``psn``; nothing is stored unless the result is ``OK``."""
        check_u32(psn, "psn")
        check_nonneg(nbytes, "nbytes", PSN_MASK)
        off = (psn - self._next) & PSN_MASK
        if off >= 0x80000000:
            return InsertResult.STALE
        if off >= self._max_distance:
            return InsertResult.OUT_OF_RANGE
        if psn in self._held:
            return InsertResult.DUPLICATE
        if off and (len(self._held) >= self._max_items or self._bytes + nbytes > self._max_bytes):
            return InsertResult.FULL
        self._held[psn] = (item, nbytes)
        self._bytes += nbytes
        return InsertResult.OK

    def pop_ready(self) -> list:
        """Release the items of the in-order run starting at ``next_psn``, advancing it."""
        held = self._held
        psn = self._next
        out = []
        while psn in held:
            item, nbytes = held.pop(psn)
            self._bytes -= nbytes
            out.append(item)
            psn = (psn + 1) & PSN_MASK
        self._next = psn
        return out

    def __contains__(self, psn: int) -> bool:
        return psn in self._held

    def reset(self, next_psn: int) -> int:
        """Drop every held item and restart at ``next_psn``; returns how many were dropped."""
        check_u32(next_psn, "next_psn")
        dropped = len(self._held)
        self._held.clear()
        self._bytes = 0
        self._next = next_psn
        return dropped

    def __repr__(self) -> str:
        return (
            f"ReorderBuffer(next_psn={self._next}, items={len(self._held)}/{self._max_items}, "
            f"bytes={self._bytes}/{self._max_bytes})"
        )
