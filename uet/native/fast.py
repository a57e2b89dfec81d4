"""C-backed implementation of the ``uet.native`` API (cffi extension ``uet.native._uet_native``).

Importing this module raises ``ImportError`` when the extension was not built. Semantics,
argument checks and exceptions are those of ``uet.native.pure``: the C code reports bad input
with status codes, and on any such status (or a cffi conversion error) the wrapper re-runs the
pure-Python check so that the exception type and message are the same.
"""

from __future__ import annotations

from collections.abc import Iterable

from uet.native import pure
from uet.native._common import (
    DEFAULT_MAX_DISTANCE,
    INSERT_RESULTS,
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
from uet.native._uet_native import ffi, lib

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
    "crc32c_slicing8",
    "crc32c_sse42",
    "internet_checksum",
    "ipv4_header_checksum",
    "ones_sum",
    "ones_sum_avx2",
    "ones_sum_portable",
    "ones_sum_sse2",
    "udp_checksum_ipv4",
    "udp_checksum_ipv6",
]

IMPLEMENTATION = "native"

lib.uetn_init()

_from_buffer = ffi.from_buffer
_unpack = ffi.unpack
_CONVERSION_ERRORS = (TypeError, OverflowError)


def _buf(data: BytesLike) -> tuple[object, int]:
    """``(pointer-compatible object, size in bytes)`` for a bytes-like object."""
    if type(data) is bytes:
        return data, len(data)
    buf = _from_buffer(data)  # TypeError for non-buffers
    return buf, len(buf)


# --------------------------------------------------------------------------- checksums

_ones_sum = lib.uetn_ones_sum
_internet_checksum = lib.uetn_internet_checksum
_ipv4_header_checksum = lib.uetn_ipv4_header_checksum
_udp4 = lib.uetn_udp_checksum_ipv4
_udp6 = lib.uetn_udp_checksum_ipv6
_adjust = lib.uetn_checksum_adjust
_crc32c = lib.uetn_crc32c


def ones_sum(data: BytesLike, initial: int = 0) -> int:
    """Folded (not complemented) one's-complement sum; see ``uet.native.pure.ones_sum``."""
    try:
        if type(data) is bytes:
            return _ones_sum(data, len(data), initial)
        buf = _from_buffer(data)
        return _ones_sum(buf, len(buf), initial)
    except _CONVERSION_ERRORS:
        return pure.ones_sum(data, initial)


def internet_checksum(data: BytesLike, initial: int = 0) -> int:
    """RFC 1071 checksum, complemented (the header field value); see ``pure``."""
    try:
        if type(data) is bytes:
            return _internet_checksum(data, len(data), initial)
        buf = _from_buffer(data)
        return _internet_checksum(buf, len(buf), initial)
    except _CONVERSION_ERRORS:
        return pure.internet_checksum(data, initial)


_CHECKSUM_PATHS = {
    lib.UETN_CSUM_PORTABLE: "portable",
    lib.UETN_CSUM_SSE2: "sse2",
    lib.UETN_CSUM_AVX2: "avx2",
}


def checksum_impl() -> str:
    """Which path the one's-complement sums use: ``"avx2"``, ``"sse2"`` (x86-64) or
    ``"portable"``; chosen at import, the best the CPU has."""
    return _CHECKSUM_PATHS[lib.uetn_checksum_path()]


def _sum_variant(path: int, name: str):  # type: ignore[no-untyped-def]
    func = lib.uetn_ones_sum_path

    def variant(data: BytesLike, initial: int = 0) -> int:
        try:
            buf, n = _buf(data)
            return func(path, buf, n, initial)
        except _CONVERSION_ERRORS:
            return pure.ones_sum(data, initial)

    variant.__name__ = variant.__qualname__ = name
    return variant


#: ``ones_sum`` through one code path whatever the CPU (for tests and benchmarks); a path
#: the CPU lacks falls back to the best below it (AVX2 -> SSE2 -> portable).
ones_sum_portable = _sum_variant(lib.UETN_CSUM_PORTABLE, "ones_sum_portable")
ones_sum_sse2 = _sum_variant(lib.UETN_CSUM_SSE2, "ones_sum_sse2")
ones_sum_avx2 = _sum_variant(lib.UETN_CSUM_AVX2, "ones_sum_avx2")


def ipv4_header_checksum(hdr: BytesLike) -> int:
    """IPv4 header checksum (checksum field taken as zero); see ``pure``."""
    try:
        buf, n = _buf(hdr)
    except TypeError:
        return pure.ipv4_header_checksum(hdr)
    rc = _ipv4_header_checksum(buf, n)
    return rc if rc >= 0 else pure.ipv4_header_checksum(hdr)


def udp_checksum_ipv4(src: BytesLike, dst: BytesLike, udp: BytesLike) -> int:
    """UDP checksum over the IPv4 pseudo-header; 0 is returned as 0xFFFF; see ``pure``."""
    try:
        s, sn = _buf(src)
        d, dn = _buf(dst)
        u, un = _buf(udp)
    except TypeError:
        return pure.udp_checksum_ipv4(src, dst, udp)
    rc = _udp4(s, sn, d, dn, u, un)
    return rc if rc >= 0 else pure.udp_checksum_ipv4(src, dst, udp)


def udp_checksum_ipv6(src: BytesLike, dst: BytesLike, udp: BytesLike) -> int:
    """UDP checksum over the IPv6 pseudo-header; 0 is returned as 0xFFFF; see ``pure``."""
    try:
        s, sn = _buf(src)
        d, dn = _buf(dst)
        u, un = _buf(udp)
    except TypeError:
        return pure.udp_checksum_ipv6(src, dst, udp)
    rc = _udp6(s, sn, d, dn, u, un)
    return rc if rc >= 0 else pure.udp_checksum_ipv6(src, dst, udp)


def checksum_adjust(csum: int, old16: int, new16: int) -> int:
    """RFC 1624 eqn. 3 incremental checksum update; see ``pure``."""
    try:
        rc = _adjust(csum, old16, new16)
    except _CONVERSION_ERRORS:
        return pure.checksum_adjust(csum, old16, new16)
    return rc if rc >= 0 else pure.checksum_adjust(csum, old16, new16)


def crc32c(data: BytesLike, crc: int = 0) -> int:
    """CRC-32C (Castagnoli), chainable; SSE4.2 instruction when the CPU has it."""
    try:
        if type(data) is bytes:
            return _crc32c(data, len(data), crc)
        buf = _from_buffer(data)
        return _crc32c(buf, len(buf), crc)
    except _CONVERSION_ERRORS:
        return pure.crc32c(data, crc)


def _crc_variant(func):  # type: ignore[no-untyped-def]
    def variant(data: BytesLike, crc: int = 0) -> int:
        try:
            buf, n = _buf(data)
            return func(buf, n, crc)
        except _CONVERSION_ERRORS:
            return pure.crc32c(data, crc)

    return variant


#: The portable table-driven path, whatever the CPU (for tests and benchmarks).
crc32c_slicing8 = _crc_variant(lib.uetn_crc32c_slicing8)
#: The SSE4.2 path (falls back to slicing-by-8 on CPUs without it).
crc32c_sse42 = _crc_variant(lib.uetn_crc32c_sse42)


def crc32c_impl() -> str:
    """Which CRC-32C code path ``crc32c`` uses: ``"sse4.2"`` or ``"slicing8"``."""
    return "sse4.2" if lib.uetn_crc32c_uses_sse42() else "slicing8"


# --------------------------------------------------------------------------- PSN tracker

_t_mark_cumulative = lib.uetn_tracker_mark_cumulative
_t_mark_bitmap = lib.uetn_tracker_mark_bitmap
_t_missing = lib.uetn_tracker_missing
_t_count = lib.uetn_tracker_count_received_in
_t_mark_many = lib.uetn_tracker_mark_many
# By key: ``tracker key | psn`` in one integer, so the call is a one-argument cffi function
# (no argument tuple, no pointer type check): about a third of a two-argument call.
_k_mark = lib.uetn_tk_mark
_k_classify = lib.uetn_tk_classify
_k_is_received = lib.uetn_tk_is_received
_k_on_packet = lib.uetn_tk_on_packet
_k_sack_bitmap = lib.uetn_tk_sack_bitmap
_k_cack = lib.uetn_tk_cack
_k_ack_bitmap = lib.uetn_tk_ack_bitmap
_k_mark_cumulative = lib.uetn_tk_mark_cumulative
_k_apply_ack = lib.uetn_tk_apply_ack
_OOO_SATURATED = lib.UETN_OOO_SATURATED
_NULL = ffi.NULL
_ZERO = 0  # `x is _ZERO`: x is the int 0 (not False, 0.0 or an int subclass)


def _u32(value: int, name: str) -> int:
    """``value`` as a plain int in [0, 2**32) (the fast paths OR it into a key), or the
    exception ``pure`` raises for it."""
    check_u32(value, name)
    return int(value)


def _new_u32(seq: list[int] | tuple[int, ...]):  # type: ignore[no-untyped-def]
    return ffi.new("uint32_t[]", seq) if seq else _EMPTY_U32


_EMPTY_U32 = ffi.new("uint32_t[]", 1)


class PsnTracker:
    """C-backed ``PsnTracker``; see ``uet.native.pure.PsnTracker`` for the semantics.

    The per-packet methods pass ``key | psn`` (the tracker's registry key, ``slot << 32``) to
    one-argument C functions; a PSN that is not a plain int in [0, 2**32) takes the checking
    path first, so it can never reach another tracker's slot.
    """

    __slots__ = ("_cap", "_k", "_last", "_last_v", "_out", "_t", "_view")

    def __init__(self, start_psn: int, window: int = 128) -> None:
        check_window(window)
        check_u32(start_psn, "start_psn")
        t = lib.uetn_tracker_new(start_psn, window)
        if t == _NULL:
            raise MemoryError("uetn_tracker_new failed")
        self._t = ffi.gc(t, lib.uetn_tracker_free)
        self._k = lib.uetn_tracker_key(t)
        self._out = None  # the tracker's uint32_t[window + 64], once a bulk operation ran
        self._view = None  # a memoryview of it: view[:n].tolist() is cheaper than unpack
        self._cap = 0
        # on_packet's last packed C result and the tuple made from it
        self._last_v = -1
        self._last = None

    def _outbuf(self):  # type: ignore[no-untyped-def]
        out = self._out
        if out is None:
            # window + 64: apply_ack writes a cumulative run and a bitmap's worth; C owns it
            # (freed with the tracker, which this object keeps alive)
            out = lib.uetn_tracker_outbuf(self._t)
            if out == _NULL:
                raise MemoryError("uetn_tracker_outbuf failed")
            self._cap = cap = self._t.window + 64
            self._view = memoryview(ffi.buffer(out, 4 * cap)).cast("I")
            self._out = out
        return out

    def reset(self, start_psn: int) -> None:
        """Forget everything: ``cack_psn = start_psn - 1``; counters back to zero."""
        check_u32(start_psn, "start_psn")
        lib.uetn_tracker_reset(self._t, start_psn)

    @property
    def window(self) -> int:
        """Window size in PSNs (MP_RANGE)."""
        return self._t.window

    @property
    def base(self) -> int:
        """First PSN not yet received (``cack_psn + 1``)."""
        return self._t.base

    @property
    def cack_psn(self) -> int:
        """Cumulative PSN: every PSN up to and including it has been received."""
        return _k_cack(self._k)

    @property
    def max_psn(self) -> int:
        """Highest PSN received (serially), or ``cack_psn`` if none beyond it."""
        return self._t.max_psn

    @property
    def ooo_count(self) -> int:
        """Number of ``mark`` calls that returned NEW for a PSN other than ``base``."""
        return self._t.ooo_count

    @property
    def received_count(self) -> int:
        """Number of PSNs newly marked (by ``mark``, ``mark_cumulative``, ``mark_bitmap``)."""
        return self._t.received_count

    def mark(self, psn: int) -> MarkResult:
        """Record the arrival of ``psn``; see ``MarkResult``."""
        if psn.__class__ is not int or psn > PSN_MASK:
            psn = _u32(psn, "psn")
        try:
            return MARK_RESULTS[_k_mark(self._k | psn)]
        except OverflowError:  # negative
            _u32(psn, "psn")
            raise

    def is_received(self, psn: int) -> bool:
        """True if ``psn`` has been received (always for PSNs before ``base``)."""
        if psn.__class__ is not int or psn > PSN_MASK:
            psn = _u32(psn, "psn")
        try:
            return _k_is_received(self._k | psn) == 1
        except OverflowError:
            _u32(psn, "psn")
            raise

    def sack_bitmap(self, base: int) -> int:
        """64-bit SACK bitmap from ``base`` (before the window: 1, beyond it: 0)."""
        if base.__class__ is not int or base > PSN_MASK:
            base = _u32(base, "base")
        try:
            return _k_sack_bitmap(self._k | base)
        except OverflowError:
            _u32(base, "base")
            raise

    def count_received_in(self, start: int, n: int) -> int:
        """How many of the ``n`` PSNs ``[start, start + n)`` are received (0 <= n <= 65536)."""
        check_u32(start, "start")
        check_nonneg(n, "n", MAX_COUNT_SPAN)
        return _t_count(self._t, start, n)

    def missing(self, limit: int = 64, end: int | None = None) -> list[int]:
        """The first ``limit`` un-received PSNs from ``base`` to ``end`` (default ``max_psn``)."""
        check_nonneg(limit, "limit", MAX_COUNT_SPAN)
        t = self._t
        last = t.max_psn if end is None else check_u32(end, "end")
        out = self._outbuf()
        n = _t_missing(t, last, limit, out, self._cap)
        if n < 0:  # cannot happen: the span is clipped to the window
            raise RuntimeError(f"uetn_tracker_missing failed ({n})")
        return self._view[:n].tolist()

    def mark_cumulative(self, psn: int) -> list[int]:
        """Mark every PSN up to ``psn`` received; returns the newly marked, in order.

        Raises ``PsnWindowError`` (a ``ValueError``) if ``psn`` is beyond the window.
        """
        if self._out is None:
            self._outbuf()
        if psn.__class__ is not int or psn > PSN_MASK:
            psn = _u32(psn, "psn")
        try:
            n = _k_mark_cumulative(self._k | psn)
        except OverflowError:
            _u32(psn, "psn")
            raise
        return self._bulk_result(n, psn)

    def _bulk_result(self, n: int, psn: int) -> list[int]:
        """The list of the ``n`` PSNs a bulk C call wrote, or its error (``psn``: the CACK)."""
        if n > 0:
            return self._view[:n].tolist()
        if n == 0:
            return []
        if n == lib.UETN_ERR_WINDOW:
            raise window_error(psn, self._t.base, self._t.window)
        raise RuntimeError(f"uetn_tracker bulk operation failed ({n})")

    def mark_bitmap(self, base: int, bitmap: int) -> list[int]:
        """Mark the PSNs a 64-bit SACK bitmap reports; returns the newly marked."""
        try:
            out = self._outbuf()
            n = _t_mark_bitmap(self._t, base, bitmap, out, self._cap)
        except _CONVERSION_ERRORS:
            check_u32(base, "base")
            check_nonneg(bitmap, "bitmap", U64_MASK)
            raise
        return self._view[:n].tolist() if n else []

    # -- combined operations: one C call per received packet / per ACK
    def on_packet(self, psn: int) -> tuple[MarkResult, bool, int]:
        """Record the arrival of ``psn``; returns ``(result, in_order, ooo_count)``."""
        if psn.__class__ is not int or psn > PSN_MASK:
            psn = _u32(psn, "psn")
        try:
            v = _k_on_packet(self._k | psn)
        except OverflowError:
            _u32(psn, "psn")
            raise
        # v = result | in_order << 2 | ooo_count << 3 determines the tuple: consecutive
        # packets that change neither (in-order arrivals, duplicates) get the same one
        if v == self._last_v:
            return self._last
        ooo = v >> 3
        if ooo == _OOO_SATURATED:  # the real counter does not fit: read it, do not keep
            return MARK_RESULTS[v & 3], v & 4 != 0, self._t.ooo_count
        self._last_v = v
        r = self._last = MARK_RESULTS[v & 3], v & 4 != 0, ooo
        return r

    def classify(self, psn: int) -> MarkResult:
        """What ``mark(psn)`` would return, without marking anything."""
        if psn.__class__ is not int or psn > PSN_MASK:
            psn = _u32(psn, "psn")
        try:
            return MARK_RESULTS[_k_classify(self._k | psn)]
        except OverflowError:
            _u32(psn, "psn")
            raise

    def ack_state(self, base: int | None = None) -> tuple[int, int]:
        """``(cack_psn, sack_bitmap(base))``; ``base`` defaults to ``cack_psn + 1``."""
        k = self._k
        if base is None:
            return _k_cack(k), _k_ack_bitmap(k)
        if base.__class__ is not int or base > PSN_MASK:
            base = _u32(base, "base")
        try:
            return _k_cack(k), _k_sack_bitmap(k | base)
        except OverflowError:
            _u32(base, "base")
            raise

    def apply_ack(self, cack: int, sack_base: int, bitmap: int) -> list[int]:
        """``mark_cumulative(cack)`` then ``mark_bitmap(sack_base, bitmap)``; newly marked."""
        if self._out is None:
            self._outbuf()
        if cack.__class__ is not int or cack > PSN_MASK:
            pure.check_ack_args(cack, sack_base, bitmap)
            cack = int(cack)
        try:
            if bitmap is _ZERO and sack_base.__class__ is int and 0 <= sack_base <= PSN_MASK:
                # no SACK bits: a cumulative ACK, through the one-argument call
                n = _k_mark_cumulative(self._k | cack)
            else:
                n = _k_apply_ack(self._k | cack, sack_base, bitmap)
        except _CONVERSION_ERRORS:
            pure.check_ack_args(cack, sack_base, bitmap)
            raise
        if n > 0:
            return self._view[:n].tolist()
        return self._bulk_result(n, cack)

    def mark_many(self, psns: Iterable[int]) -> int:
        """``mark`` each PSN of ``psns`` in order; returns how many were NEW."""
        seq = psns if type(psns) in (list, tuple) else list(psns)
        try:
            arr = _new_u32(seq)
        except _CONVERSION_ERRORS:
            for psn in seq:
                check_u32(psn, "psn")
            raise
        return _t_mark_many(self._t, arr, len(seq))

    def __repr__(self) -> str:
        t = self._t
        return (
            f"PsnTracker(cack_psn={self.cack_psn}, window={t.window}, "
            f"max_psn={t.max_psn}, received={t.received_count}, ooo={t.ooo_count})"
        )


# --------------------------------------------------------------------------- ROD reorder buffer

_r_insert = lib.uetn_rob_insert
_r_pop_one = lib.uetn_rob_pop_one
_r_pop_ready = lib.uetn_rob_pop_ready
_MORE = 1 << 32
_HANDLE = _MORE - 1


class ReorderBuffer:
    """C-backed ``ReorderBuffer``; see ``uet.native.pure.ReorderBuffer`` for the semantics.

    The C ring holds, per PSN, a handle it allocated: an index into ``_objs``, the Python list
    that owns the items (so they stay alive exactly while held; a released slot is set to
    None and its handle reused by C).
    """

    __slots__ = ("_objs", "_out", "_r", "_ready")

    def __init__(
        self,
        max_items: int,
        max_bytes: int,
        next_psn: int,
        max_distance: int = DEFAULT_MAX_DISTANCE,
    ) -> None:
        check_nonneg(max_items, "max_items", PSN_MASK)
        check_nonneg(max_bytes, "max_bytes", 1 << 63)
        check_nonneg(max_distance, "max_distance", MAX_DISTANCE)
        if max_items < 1 or max_distance < 1:
            raise ValueError("max_items and max_distance must be at least 1")
        check_u32(next_psn, "next_psn")
        r = lib.uetn_rob_new(max_items, max_bytes, next_psn, max_distance)
        if r == _NULL:
            raise MemoryError("uetn_rob_new failed")
        self._r = ffi.gc(r, lib.uetn_rob_free)
        self._objs: list = []
        self._out = None  # uint32_t[64] scratch for long runs, allocated on first use
        # True once the item for next_psn is stored: only then can pop_ready release anything
        self._ready = False

    @property
    def items(self) -> int:
        """Number of items held."""
        return self._r.items

    @property
    def bytes(self) -> int:
        """Sum of the ``nbytes`` of the items held."""
        return self._r.bytes

    @property
    def next_psn(self) -> int:
        """The PSN the next released item must have."""
        return self._r.next_psn

    @property
    def max_items(self) -> int:
        return self._r.max_items

    @property
    def max_bytes(self) -> int:
        return self._r.max_bytes

    @property
    def max_distance(self) -> int:
        return self._r.max_distance

    def insert(self, psn: int, item: object, nbytes: int) -> InsertResult:
        """Store ``item`` for ``psn``; nothing is stored unless the result is ``OK``."""
        try:
            rc = _r_insert(self._r, psn, nbytes)
        except _CONVERSION_ERRORS:
            check_u32(psn, "psn")
            check_nonneg(nbytes, "nbytes", PSN_MASK)
            raise
        if rc < 0:
            if rc < -4:
                raise MemoryError(f"uetn_rob_insert failed ({rc})")
            return INSERT_RESULTS[-rc]
        handle = rc >> 1
        objs = self._objs
        if handle == len(objs):
            objs.append(item)
        else:
            objs[handle] = item
        if rc & 1:
            self._ready = True
        return InsertResult.OK

    def pop_ready(self) -> list:
        """Release the items of the in-order run starting at ``next_psn``, advancing it."""
        if not self._ready:
            return []
        self._ready = False
        objs = self._objs
        v = _r_pop_one(self._r)
        handle = v & _HANDLE
        items = [objs[handle]]
        objs[handle] = None
        if v & _MORE:  # a longer run: the rest in bulk
            out = self._out
            if out is None:
                out = self._out = ffi.new("uint32_t[]", 64)
            n = 64
            while n == 64:
                n = _r_pop_ready(self._r, out, 64)
                for handle in _unpack(out, n):
                    items.append(objs[handle])
                    objs[handle] = None
        return items

    def __contains__(self, psn: int) -> bool:
        if not isinstance(psn, int) or not 0 <= psn <= PSN_MASK:
            return False
        return bool(lib.uetn_rob_contains(self._r, psn))

    def reset(self, next_psn: int) -> int:
        """Drop every held item and restart at ``next_psn``; returns how many were dropped."""
        check_u32(next_psn, "next_psn")
        n = lib.uetn_rob_reset(self._r, next_psn)
        self._ready = False
        self._objs.clear()
        return n

    def __repr__(self) -> str:
        r = self._r
        return (
            f"ReorderBuffer(next_psn={r.next_psn}, items={r.items}/{r.max_items}, "
            f"bytes={r.bytes}/{r.max_bytes})"
        )
