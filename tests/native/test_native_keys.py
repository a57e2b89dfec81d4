"""The C tracker registry behind ``uet.native.fast``: the per-packet methods pass
``key | psn`` (key = registry slot << 32) to one-argument C functions. Trackers must stay
independent, bad PSNs must never reach another tracker's slot, and C must refuse keys that
name no tracker."""

from __future__ import annotations

import enum
import gc
import random
import re
from types import ModuleType

import pytest

M32 = 0xFFFFFFFF


def _state(t: object) -> tuple:
    return (t.base, t.max_psn, t.ooo_count, t.received_count, t.sack_bitmap(t.base),
            t.ack_state())  # fmt: skip


def _drive(rng: random.Random, pair: tuple, start: int) -> None:
    """A few random operations on a (pure, fast) pair of trackers, results compared."""
    py, c = pair
    for _ in range(rng.randrange(1, 12)):
        op = rng.randrange(6)
        psn = (start + rng.randrange(-40, 300)) & M32
        if op == 0:
            assert c.on_packet(psn) == py.on_packet(psn)
        elif op == 1:
            assert c.classify(psn) is py.classify(psn)
        elif op == 2:
            assert c.ack_state(psn) == py.ack_state(psn)
        elif op == 3:
            bitmap = rng.choice((0, rng.getrandbits(64)))
            try:
                want = py.apply_ack(psn, (psn + 1) & M32, bitmap)
            except ValueError as exc:
                with pytest.raises(type(exc), match=re.escape(str(exc))):
                    c.apply_ack(psn, (psn + 1) & M32, bitmap)
            else:
                assert c.apply_ack(psn, (psn + 1) & M32, bitmap) == want
        elif op == 4:
            assert c.mark(psn) is py.mark(psn)
        else:
            assert c.is_received(psn) == py.is_received(psn)
    assert _state(c) == _state(py)


def test_many_trackers_stay_independent(both: tuple[ModuleType, ModuleType]) -> None:
    """Hundreds of trackers created, used in turn and dropped (their slots reused)."""
    pure, fast = both
    rng = random.Random(32)
    live: list[tuple[tuple, int]] = []
    for round_ in range(6):
        for _ in range(120):
            start = rng.randrange(1 << 32)
            window = rng.choice((128, 200, 1024, 65536))
            live.append(((pure.PsnTracker(start, window), fast.PsnTracker(start, window)), start))
        keys = [c._k for (_, c), _ in live]
        assert len(set(keys)) == len(keys)  # one slot per live tracker
        for _ in range(600):
            pair, start = rng.choice(live)
            _drive(rng, pair, start)
        for pair, _ in live:  # the others were not touched by anyone else's calls
            assert _state(pair[1]) == _state(pair[0])
        rng.shuffle(live)
        del live[: len(live) // 2 + round_]
        gc.collect()


@pytest.mark.parametrize("high", [1, 2, 3, 1 << 20, (1 << 31) - 1, 1 << 31, (1 << 32) - 1])
def test_psn_above_32_bits_never_reaches_another_slot(
    both: tuple[ModuleType, ModuleType], high: int
) -> None:
    pure, fast = both
    trackers = [fast.PsnTracker(100, 128) for _ in range(8)]
    reference = pure.PsnTracker(100, 128)
    for t in trackers:
        t.mark(101)
    reference.mark(101)
    for t in trackers:
        for low in (100, 102):
            bad = high << 32 | low
            for call in (t.mark, t.on_packet, t.classify, t.is_received, t.sack_bitmap,
                         t.ack_state, t.mark_cumulative):  # fmt: skip
                with pytest.raises(ValueError, match=r"must be in \[0, 2\*\*32 - 1\]"):
                    call(bad)
            with pytest.raises(ValueError, match="cack must be in"):
                t.apply_ack(bad, 0, 0)
            with pytest.raises(ValueError, match="cack must be in"):
                t.apply_ack(bad, 0, 1)
    for t in trackers:
        assert _state(t) == _state(reference)


class Psn(enum.IntEnum):
    A = 100
    B = 101


def test_int_subclasses_are_psns(both: tuple[ModuleType, ModuleType]) -> None:
    """bool and IntEnum values are ints: accepted by both, with the same results."""
    for impl in both:
        t = impl.PsnTracker(0, 128)
        assert t.on_packet(False) == (impl.MarkResult.NEW, True, 0)
        assert t.mark(True) is impl.MarkResult.NEW
        assert t.classify(Psn.A) is impl.MarkResult.NEW
        assert t.on_packet(Psn.B) == (impl.MarkResult.NEW, False, 1)
        assert t.is_received(Psn.B) and t.sack_bitmap(True) == 1
        assert t.ack_state(Psn.A) == (1, 0b10)
        assert t.apply_ack(Psn.A, Psn.B, 0) == list(range(2, 101))
        assert t.mark_cumulative(True) == []
        assert (t.cack_psn, t.received_count) == (101, 102)


@pytest.mark.parametrize("bad", [1.0, "5", None, 2**64, -1])
def test_bad_psn_types_raise_like_pure(both: tuple[ModuleType, ModuleType], bad: object) -> None:
    pure, fast = both
    for name in ("mark", "on_packet", "classify", "is_received", "sack_bitmap", "ack_state",
                 "mark_cumulative"):  # fmt: skip
        errors = []
        if bad is None and name == "ack_state":
            continue  # ack_state(None): the default base
        for impl in (pure, fast):
            t = impl.PsnTracker(7, 128)
            with pytest.raises((TypeError, ValueError)) as info:
                getattr(t, name)(bad)
            errors.append((type(info.value), str(info.value)))
            assert (t.cack_psn, t.received_count) == (6, 0)
        assert errors[0] == errors[1], name


def test_c_refuses_keys_of_no_tracker(fast_impl: ModuleType) -> None:
    lib = fast_impl.lib
    t = fast_impl.PsnTracker(5, 128)
    t._outbuf()
    key = t._k
    assert lib.uetn_tk_on_packet(key | 5) & 3 == 0  # the live tracker
    del t
    gc.collect()
    unknown = [key, (1 << 31) - 1 << 32, 1 << 62]
    for k in unknown:
        for func in (lib.uetn_tk_mark, lib.uetn_tk_classify, lib.uetn_tk_is_received,
                     lib.uetn_tk_on_packet, lib.uetn_tk_cack,
                     lib.uetn_tk_mark_cumulative):  # fmt: skip
            assert func(k | 5) == lib.UETN_ERR_KEY
        assert lib.uetn_tk_apply_ack(k | 5, 6, 1) == lib.UETN_ERR_KEY
        assert lib.uetn_tk_sack_bitmap(k | 5) == 0
        assert lib.uetn_tk_ack_bitmap(k) == 0


def test_bulk_calls_need_the_output_buffer(fast_impl: ModuleType) -> None:
    """Before the wrapper allocated the tracker's output buffer, C writes nothing."""
    lib = fast_impl.lib
    t = fast_impl.PsnTracker(5, 128)
    assert lib.uetn_tk_mark_cumulative(t._k | 9) == lib.UETN_ERR_CAPACITY
    assert lib.uetn_tk_apply_ack(t._k | 9, 10, 1) == lib.UETN_ERR_CAPACITY
    assert t.received_count == 0
    assert t.apply_ack(9, 10, 0) == [5, 6, 7, 8, 9]  # the wrapper allocates it first
