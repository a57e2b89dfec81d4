"""PsnTracker: explicit cases for both implementations (random sequences: test_native_stateful)."""

from __future__ import annotations

from types import ModuleType

import pytest

from uet.native import MarkResult, PsnWindowError

M32 = 0xFFFFFFFF
NEW, DUP, STALE, OOW = (
    MarkResult.NEW,
    MarkResult.DUPLICATE,
    MarkResult.STALE,
    MarkResult.OUT_OF_WINDOW,
)


def test_initial_state(impl: ModuleType) -> None:
    t = impl.PsnTracker(1000)
    assert (t.window, t.base, t.cack_psn, t.max_psn) == (128, 1000, 999, 999)
    assert (t.ooo_count, t.received_count) == (0, 0)
    assert t.is_received(999) and not t.is_received(1000)
    assert t.sack_bitmap(1000) == 0
    assert t.sack_bitmap(990) == (1 << 10) - 1
    assert t.missing() == []
    z = impl.PsnTracker(0, window=65536)
    assert (z.cack_psn, z.max_psn, z.window) == (M32, M32, 65536)


@pytest.mark.parametrize("window", [0, 1, 64, 127, 65537, 1 << 20, -128])
def test_bad_window(impl: ModuleType, window: int) -> None:
    with pytest.raises(ValueError, match=r"window must be in \[128, 65536\]"):
        impl.PsnTracker(0, window)


@pytest.mark.parametrize("window", [128, 129, 1000, 65536])
def test_window_bounds(impl: ModuleType, window: int) -> None:
    t = impl.PsnTracker(M32 - 5, window)
    last = (M32 - 5 + window - 1) & M32
    assert t.mark(last) == NEW
    assert t.mark((last + 1) & M32) == OOW
    assert t.mark((M32 - 6) & M32) == STALE
    assert t.max_psn == last
    assert t.sack_bitmap((last - 63) & M32) == 1 << 63
    assert t.sack_bitmap((last - 62) & M32) == 1 << 62
    assert t.sack_bitmap(last) == 1


@pytest.mark.parametrize("bad", [-1, 1 << 32, 2**40])
def test_bad_psn(impl: ModuleType, bad: int) -> None:
    t = impl.PsnTracker(5)
    for call in (
        lambda: t.mark(bad),
        lambda: t.is_received(bad),
        lambda: t.sack_bitmap(bad),
        lambda: t.mark_cumulative(bad),
        lambda: t.mark_bitmap(bad, 1),
        lambda: t.reset(bad),
        lambda: t.count_received_in(bad, 1),
        lambda: t.missing(4, bad),
        lambda: impl.PsnTracker(bad),
    ):
        with pytest.raises(ValueError, match=r"must be in \[0, 2\*\*32 - 1\]"):
            call()
    with pytest.raises(TypeError):
        t.mark(1.5)
    with pytest.raises(TypeError):
        t.mark("7")
    with pytest.raises(ValueError, match="bitmap"):
        t.mark_bitmap(5, 1 << 64)
    with pytest.raises(ValueError, match="bitmap"):
        t.mark_bitmap(5, -1)
    with pytest.raises(ValueError, match="n must be"):
        t.count_received_in(5, 65537)
    assert t.received_count == 0 and t.cack_psn == 4


def test_mark_in_order_and_out_of_order(impl: ModuleType) -> None:
    t = impl.PsnTracker(10)
    assert t.mark(10) == NEW
    assert (t.cack_psn, t.ooo_count) == (10, 0)
    assert t.mark(12) == NEW
    assert t.mark(13) == NEW
    assert (t.cack_psn, t.max_psn, t.ooo_count) == (10, 13, 2)
    assert t.mark(12) == DUP
    assert t.sack_bitmap(11) == 0b110
    assert t.sack_bitmap(8) == 0b110111
    assert t.missing() == [11]
    assert t.mark(11) == NEW
    assert (t.cack_psn, t.base, t.max_psn, t.received_count, t.ooo_count) == (13, 14, 13, 4, 2)
    assert t.mark(11) == STALE
    assert t.is_received(11) and t.is_received(13) and not t.is_received(14)


def test_wraparound(impl: ModuleType) -> None:
    t = impl.PsnTracker(M32 - 1)  # first PSNs: 2**32 - 2, 2**32 - 1, 0, 1, ...
    assert t.cack_psn == M32 - 2
    assert t.mark(1) == NEW
    assert t.mark(M32) == NEW
    assert t.max_psn == 1
    assert t.sack_bitmap(M32 - 1) == 0b1010
    assert t.missing() == [M32 - 1, 0]
    assert t.mark(M32 - 1) == NEW
    assert t.cack_psn == M32
    assert t.mark(0) == NEW
    assert (t.cack_psn, t.base) == (1, 2)
    assert t.mark(M32) == STALE
    assert t.is_received(M32 - 100)
    assert t.mark(129) == NEW and t.mark(130) == OOW
    assert t.sack_bitmap(M32 - 10) == (1 << 13) - 1  # M32 - 10 .. 1 are below the base


def test_serial_half_way(impl: ModuleType) -> None:
    t = impl.PsnTracker(0)
    assert t.mark(0x7FFFFFFF) == OOW
    assert t.mark(0x80000000) == STALE  # exactly half-way around reads as "before"
    assert t.is_received(0x80000000) and not t.is_received(0x7FFFFFFF)
    # a bitmap that starts beyond the window and wraps to "before the window"
    assert t.sack_bitmap(0x7FFFFFF0) == M32 << 32 | 0xFFFF0000
    assert t.sack_bitmap(0x7FFFFFC0) == 0
    assert t.sack_bitmap(0x7FFFFFC1) == 1 << 63
    assert t.count_received_in(0x7FFFFFF0, 64) == 48


def test_mark_cumulative(impl: ModuleType) -> None:
    t = impl.PsnTracker(M32 - 2, window=256)
    assert t.mark(1) == NEW
    assert t.mark(3) == NEW
    assert t.mark_cumulative(2) == [M32 - 2, M32 - 1, M32, 0, 2]
    assert (t.cack_psn, t.max_psn, t.received_count, t.ooo_count) == (3, 3, 7, 2)
    assert t.mark_cumulative(3) == []
    assert t.mark_cumulative(M32 - 10) == []  # stale: nothing to do
    assert t.mark_cumulative(4 + 255) == list(range(4, 260))
    assert (t.cack_psn, t.max_psn) == (259, 259)
    with pytest.raises(PsnWindowError, match="beyond the window"):
        t.mark_cumulative(260 + 256)
    with pytest.raises(ValueError):
        t.mark_cumulative(0x7FFFFFFF)
    assert t.cack_psn == 259  # unchanged by the failed call


def test_mark_cumulative_max_psn_kept(impl: ModuleType) -> None:
    t = impl.PsnTracker(0)
    t.mark(100)
    assert t.mark_cumulative(50) == list(range(51))
    assert (t.cack_psn, t.max_psn) == (50, 100)


def test_mark_bitmap(impl: ModuleType) -> None:
    t = impl.PsnTracker(100)
    assert t.mark(101) == NEW
    # base 96: PSNs 96..99 are stale, 101 is already marked; 100, 102 and 159 are new
    bitmap = 0b1111 | 1 << 4 | 1 << 5 | 1 << 6 | 1 << 63
    assert t.mark_bitmap(96, bitmap) == [100, 102, 159]
    assert (t.cack_psn, t.max_psn, t.received_count, t.ooo_count) == (102, 159, 4, 1)
    assert t.mark_bitmap(200, M32 << 32 | M32) == [200, 201, 202, 203, 204, 205, 206, 207, 208,
        209, 210, 211, 212, 213, 214, 215, 216, 217, 218, 219, 220, 221, 222, 223, 224, 225, 226,
        227, 228, 229, 230]  # fmt: skip
    assert t.mark_bitmap(300, 1) == []  # beyond the window (base 103 + 128)
    assert t.mark_bitmap(0, 0) == []


def test_sack_bitmap_spec_example(impl: ModuleType) -> None:
    # reference 2.4: 0x123456789ABCDEF0 -> base+4..+7, +9..+12, +14, +15, ... received
    t = impl.PsnTracker(5000, 256)
    assert t.mark_bitmap(5001, 0x123456789ABCDEF0) != []
    assert t.sack_bitmap(5001) == 0x123456789ABCDEF0
    assert t.count_received_in(5001, 64) == bin(0x123456789ABCDEF0).count("1")


def test_missing_and_count(impl: ModuleType) -> None:
    t = impl.PsnTracker(M32 - 3, 1000)
    for psn in (M32 - 1, 1, 2, 5, 900):
        assert t.mark(psn) == NEW
    holes = [M32 - 3, M32 - 2, M32, 0, 3, 4, *range(6, 900)]
    assert t.missing(limit=2000) == holes
    assert t.missing() == holes[:64]
    assert t.missing(limit=3) == holes[:3]
    assert t.missing(limit=0) == []
    assert t.missing(limit=10, end=2) == [M32 - 3, M32 - 2, M32, 0]
    assert t.missing(limit=10, end=M32 - 10) == []
    assert len(t.missing(limit=5000, end=5000)) == 1000 - 5
    assert t.count_received_in(M32 - 100, 0) == 0
    assert t.count_received_in(M32 - 100, 97) == 97
    assert t.count_received_in(M32 - 100, 200) == 97 + 4
    assert t.count_received_in(0, 65536) == 4


def test_reset(impl: ModuleType) -> None:
    t = impl.PsnTracker(0, 300)
    for psn in (0, 1, 5, 7):
        t.mark(psn)
    t.reset(M32)
    assert (t.base, t.cack_psn, t.max_psn, t.ooo_count, t.received_count, t.window) == (
        M32,
        M32 - 1,
        M32 - 1,
        0,
        0,
        300,
    )
    assert t.sack_bitmap(M32) == 0
    assert not t.is_received(5)
    assert t.mark(5) == NEW


def test_big_window_long_run(impl: ModuleType) -> None:
    t = impl.PsnTracker(M32 - 1000, 65536)
    for psn in range(2, 65000, 2):  # every other PSN beyond the wrap point
        t.mark((M32 - 1000 + psn) & M32)
    assert t.cack_psn == M32 - 1001 and t.ooo_count == 32499
    assert t.count_received_in(M32 - 1000, 65536) == 32499
    new = t.mark_cumulative((M32 - 1000 + 65535) & M32)
    assert len(new) == 65536 - 32499
    assert t.cack_psn == (M32 - 1000 + 65535) & M32
    assert t.received_count == 65536


def test_results_are_the_shared_enum(impl: ModuleType) -> None:
    t = impl.PsnTracker(0)
    res = t.mark(0)
    assert res is MarkResult.NEW and type(res) is MarkResult
    assert impl.MarkResult is MarkResult
