"""PsnTracker combined operations (on_packet, classify, ack_state, apply_ack, mark_many):
explicit cases for both implementations. Random sequences against the slow model are in
test_native_stateful.py."""

from __future__ import annotations

import random
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


def test_on_packet_results(impl: ModuleType) -> None:
    t = impl.PsnTracker(M32 - 1)  # PSNs M32 - 1, M32, 0, 1, ... across the wrap
    assert t.on_packet(M32) == (NEW, False, 1)  # a gap before it: out of order
    assert t.on_packet(M32 - 1) == (NEW, True, 1)  # fills the gap: CACK moves past M32
    assert t.cack_psn == M32
    assert t.on_packet(0) == (NEW, True, 1)
    assert t.on_packet(0) == (STALE, False, 1)
    assert t.on_packet(5) == (NEW, False, 2)
    assert t.on_packet(5) == (DUP, False, 2)
    assert t.on_packet(1 + 128) == (OOW, False, 2)  # base 1 + window 128
    assert t.on_packet(1 + 127) == (NEW, False, 3)
    assert t.on_packet(0x80000001) == (STALE, False, 3)  # half-way around reads as before
    assert (t.cack_psn, t.max_psn, t.received_count, t.ooo_count) == (0, 128, 5, 3)
    result, in_order, ooo = t.on_packet(1)
    assert result is NEW and type(in_order) is bool and in_order and ooo == 3
    assert t.cack_psn == 1


def test_on_packet_equals_mark(impl: ModuleType) -> None:
    """on_packet(psn) == (mark(psn), psn was the base and NEW, ooo_count afterwards)."""
    rng = random.Random(7)
    start = M32 - 500
    a, b = impl.PsnTracker(start, 256), impl.PsnTracker(start, 256)
    for i in range(3000):
        psn = (start + i + rng.randint(-20, 40)) & M32
        base = b.base
        r = b.mark(psn)
        assert a.on_packet(psn) == (r, r is NEW and psn == base, b.ooo_count)
        assert (a.base, a.max_psn, a.received_count) == (b.base, b.max_psn, b.received_count)


def test_on_packet_saturated_ooo_count(impl: ModuleType) -> None:
    """The C call packs ooo_count into 61 bits; beyond that the wrapper reads the counter."""
    t = impl.PsnTracker(0)
    huge = (1 << 62) + 5
    if impl.IMPLEMENTATION == "native":
        t._t.ooo_count = huge
    else:
        t._ooo = huge
    assert t.on_packet(3) == (NEW, False, huge + 1)
    assert t.on_packet(0) == (NEW, True, huge + 1)
    assert t.on_packet(0) == (STALE, False, huge + 1)


def test_classify_changes_nothing(impl: ModuleType) -> None:
    t = impl.PsnTracker(M32 - 2, 128)
    t.mark(M32)
    before = (t.base, t.max_psn, t.ooo_count, t.received_count, t.sack_bitmap(t.base))
    assert t.classify(M32 - 2) is NEW
    assert t.classify(M32) is DUP
    assert t.classify(M32 - 3) is STALE
    assert t.classify((M32 - 2 + 128) & M32) is OOW
    assert t.classify((M32 - 2 + 127) & M32) is NEW
    assert (t.base, t.max_psn, t.ooo_count, t.received_count, t.sack_bitmap(t.base)) == before


def test_ack_state(impl: ModuleType) -> None:
    t = impl.PsnTracker(M32 - 3, 256)
    assert t.ack_state() == (M32 - 4, 0)
    for psn in (M32 - 3, M32 - 1, 1, 60):
        t.mark(psn)
    # CACK M32 - 3; bitmap from M32 - 2: M32 - 1 (bit 1), 1 (bit 4), 60 (bit 63)
    assert t.ack_state() == (M32 - 3, 1 << 1 | 1 << 4 | 1 << 63)
    assert t.ack_state() == (t.cack_psn, t.sack_bitmap(t.base))
    assert t.ack_state(M32 - 10) == (M32 - 3, t.sack_bitmap(M32 - 10))
    assert t.ack_state(M32 - 10)[1] & 0xFF == 0xFF  # below the window: reads as received
    assert t.ack_state(0x7FFFFFF0) == (M32 - 3, t.sack_bitmap(0x7FFFFFF0))  # beyond, wraps
    assert t.ack_state(500) == (M32 - 3, 0)  # beyond the window


def test_apply_ack(impl: ModuleType) -> None:
    t = impl.PsnTracker(M32 - 2, 256)  # ack side: what the peer acknowledged
    # CACK 0 covers M32 - 2 .. 0; the SACK from 1 reports 2, 3 and 5
    assert t.apply_ack(0, 1, 0b10110) == [M32 - 2, M32 - 1, M32, 0, 2, 3, 5]
    assert (t.cack_psn, t.max_psn, t.received_count) == (0, 5, 7)
    # the same ACK again: nothing new; a later one fills the hole at 1 and reports 4
    assert t.apply_ack(0, 1, 0b10110) == []
    assert t.apply_ack(1, 2, 0b100) == [1, 4]
    assert t.cack_psn == 5
    # a stale CACK with a bitmap starting below the base: only the new bits count
    assert t.apply_ack(M32 - 50, 3, 0b1111) == [6]
    # bits beyond the window are ignored
    assert t.apply_ack(6, 7 + 255, 0b111) == [7 + 255]  # window: base 7 + 256
    assert t.ooo_count == 0  # the ack side never calls mark


def test_apply_ack_window_error_changes_nothing(impl: ModuleType) -> None:
    t = impl.PsnTracker(100, 128)
    t.apply_ack(99, 101, 1)
    state = (t.base, t.max_psn, t.received_count, t.sack_bitmap(100))
    with pytest.raises(PsnWindowError, match="PSN 228 is at or beyond the window end"):
        t.apply_ack(228, 100, M32)
    assert (t.base, t.max_psn, t.received_count, t.sack_bitmap(100)) == state
    assert t.apply_ack(227, 228, 1) == [100, *range(102, 229)]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((-1, 0, 0), "cack must be in"),
        ((0, 1 << 32, 0), "sack_base must be in"),
        ((0, 0, 1 << 64), "bitmap must be in"),
        ((0, 0, -1), "bitmap must be in"),
    ],
)
def test_apply_ack_bad_arguments(impl: ModuleType, args: tuple, message: str) -> None:
    t = impl.PsnTracker(0)
    with pytest.raises(ValueError, match=message):
        t.apply_ack(*args)
    with pytest.raises(TypeError, match="cack must be an int"):
        t.apply_ack(1.0, 0, 0)
    assert (t.cack_psn, t.received_count) == (M32, 0)


def test_apply_ack_without_sack_bits(impl: ModuleType) -> None:
    """A zero bitmap is a cumulative ACK (the C wrapper's one-argument path): the same
    results, errors and argument checks as any other apply_ack."""
    t = impl.PsnTracker(M32 - 1, 128)
    assert t.apply_ack(1, 2, 0) == [M32 - 1, M32, 0, 1]
    assert t.apply_ack(1, 2, 0) == []
    assert t.apply_ack(M32 - 5, 0, 0) == []  # stale
    with pytest.raises(PsnWindowError, match="PSN 130 is at or beyond the window end"):
        t.apply_ack(130, 131, 0)
    with pytest.raises(ValueError, match="sack_base must be in"):
        t.apply_ack(3, 1 << 32, 0)
    with pytest.raises(ValueError, match="sack_base must be in"):
        t.apply_ack(3, -1, 0)
    with pytest.raises(TypeError, match="sack_base must be an int"):
        t.apply_ack(3, 4.0, 0)
    with pytest.raises(TypeError, match="bitmap must be an int"):
        t.apply_ack(3, 4, 0.0)
    assert (t.cack_psn, t.received_count) == (1, 4)
    assert t.apply_ack(3, 4, False) == [2, 3]  # bool is an int
    assert t.apply_ack(4, True, 0) == [4]


def test_combined_bad_psn(impl: ModuleType) -> None:
    t = impl.PsnTracker(0)
    for call in (t.on_packet, t.classify, t.ack_state):
        with pytest.raises(ValueError, match=r"must be in \[0, 2\*\*32 - 1\]"):
            call(1 << 32)
        with pytest.raises(ValueError, match=r"must be in \[0, 2\*\*32 - 1\]"):
            call(-1)
        with pytest.raises(TypeError, match="must be an int"):
            call("5")
    assert (t.cack_psn, t.received_count, t.ooo_count) == (M32, 0, 0)


def test_mark_many(impl: ModuleType) -> None:
    t = impl.PsnTracker(M32 - 1, 128)
    assert t.mark_many([]) == 0
    assert t.mark_many([M32, M32 - 1, M32, 3, 200, M32 - 5]) == 3  # dup, OOW, stale
    assert (t.cack_psn, t.max_psn, t.ooo_count) == (M32, 3, 2)
    assert t.mark_many(psn for psn in (0, 1, 2)) == 3  # any iterable
    assert t.mark_many((4, 5)) == 2
    assert t.cack_psn == 5


def test_mark_many_bad_psn_marks_nothing(impl: ModuleType) -> None:
    t = impl.PsnTracker(0)
    with pytest.raises(ValueError, match=r"psn must be in \[0, 2\*\*32 - 1\]"):
        t.mark_many([0, 1, 1 << 32])
    with pytest.raises(TypeError, match="psn must be an int"):
        t.mark_many([0, 2.5])
    assert (t.cack_psn, t.received_count) == (M32, 0)


def test_mark_many_long_stream_matches_mark(both: tuple[ModuleType, ModuleType]) -> None:
    rng = random.Random(3)
    start = M32 - 20000
    psns = [(start + i + rng.randint(-3, 3)) & M32 for i in range(50000)]
    pure, fast = both
    a, b, c = pure.PsnTracker(start, 1024), fast.PsnTracker(start, 1024), pure.PsnTracker(
        start, 1024
    )
    news = sum(1 for psn in psns if c.mark(psn) is NEW)
    assert a.mark_many(psns) == b.mark_many(psns) == news
    for t in (a, b):
        assert (t.base, t.max_psn, t.ooo_count, t.received_count) == (
            c.base,
            c.max_psn,
            c.ooo_count,
            c.received_count,
        )
