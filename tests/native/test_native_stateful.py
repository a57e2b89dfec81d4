"""Random operation sequences driving the C and the Python implementations side by side.

Each machine holds a pure-Python object, a C-backed one and a slow model, applies the same
operations to all three and requires identical results and state after every step. Start
PSNs near 2**32 exercise the wraparound; windows range over 128..65536.
"""

from __future__ import annotations

import weakref

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule
from native_models import ModelReorder, ModelTracker

import uet.native as native
from uet.native import PsnWindowError

M32 = 0xFFFFFFFF

start_psns = st.one_of(
    st.integers(M32 - 300, M32),  # wraps at 2**32 within a few hundred PSNs
    st.integers(0, 300),
    st.integers(0, M32),
    st.integers(0x7FFFFF00, 0x80000100),  # the serial half-way point
)
windows = st.one_of(
    st.sampled_from([128, 129, 191, 256, 1000, 4096, 65536]), st.integers(128, 65536)
)
# offsets relative to the current window base: mostly near it, sometimes anywhere
offsets = st.one_of(
    st.integers(-150, 150),
    st.integers(-200, 66000),
    st.integers(-(2**31), 2**31 - 1),
)


def _fast():  # type: ignore[no-untyped-def]
    if native.fast is None:
        raise AssertionError(f"the C extension is not built ({native.FAST_IMPORT_ERROR})")
    return native.fast


def _call(obj, name: str, *args):  # type: ignore[no-untyped-def]
    try:
        return getattr(obj, name)(*args)
    except PsnWindowError:
        return PsnWindowError


class TrackerMachine(RuleBasedStateMachine):
    """pure.PsnTracker vs fast.PsnTracker vs ModelTracker."""

    @initialize(start=start_psns, window=windows)
    def create(self, start: int, window: int) -> None:
        self.objs = [
            native.pure.PsnTracker(start, window),
            _fast().PsnTracker(start, window),
            ModelTracker(start, window),
        ]
        self.window = window

    def psn(self, off: int) -> int:
        return (self.objs[0].base + off) & M32

    def same(self, name: str, *args: object) -> object:
        results = [_call(obj, name, *args) for obj in self.objs]
        assert results[0] == results[1] == results[2], (name, args, results)
        return results[0]

    @rule(off=offsets)
    def mark(self, off: int) -> None:
        self.same("mark", self.psn(off))

    @rule(off=st.integers(-5, 300), n=st.integers(1, 150))
    def mark_run(self, off: int, n: int) -> None:
        first = self.psn(off)
        for i in range(n):
            self.same("mark", (first + i) & M32)

    @rule(off=offsets)
    def mark_cumulative(self, off: int) -> None:
        self.same("mark_cumulative", self.psn(off))

    @rule(off=st.one_of(st.integers(-1, 200), offsets))
    def mark_cumulative_near(self, off: int) -> None:
        self.same("mark_cumulative", self.psn(min(off, self.window - 1)))

    @rule(off=offsets, bitmap=st.integers(0, 2**64 - 1))
    def mark_bitmap(self, off: int, bitmap: int) -> None:
        self.same("mark_bitmap", self.psn(off), bitmap)

    @rule(off=offsets)
    def sack_bitmap(self, off: int) -> None:
        self.same("sack_bitmap", self.psn(off))

    @rule(off=offsets)
    def is_received(self, off: int) -> None:
        self.same("is_received", self.psn(off))

    @rule(limit=st.integers(0, 300), end=st.none() | offsets)
    def missing(self, limit: int, end: int | None) -> None:
        if end is None:
            self.same("missing", limit)
        else:
            self.same("missing", limit, self.psn(end))

    @rule(off=offsets, n=st.integers(0, 700))
    def count_received_in(self, off: int, n: int) -> None:
        self.same("count_received_in", self.psn(off), n)

    @rule(off=offsets)
    def on_packet(self, off: int) -> None:
        self.same("on_packet", self.psn(off))

    @rule(off=st.integers(-5, 300), n=st.integers(1, 150), swap=st.integers(0, 7))
    def on_packet_run(self, off: int, n: int, swap: int) -> None:
        """A stream of arrivals with every ``swap``-th pair reordered (0: in order)."""
        psns = [self.psn(off + i) for i in range(n)]
        if swap:
            for i in range(0, n - 1, swap + 1):
                psns[i], psns[i + 1] = psns[i + 1], psns[i]
        for psn in psns:
            self.same("on_packet", psn)

    @rule(off=offsets)
    def classify(self, off: int) -> None:
        self.same("classify", self.psn(off))

    @rule(off=st.none() | offsets)
    def ack_state(self, off: int | None) -> None:
        if off is None:
            self.same("ack_state")
        else:
            self.same("ack_state", self.psn(off))

    @rule(cack=st.one_of(st.integers(-3, 200), offsets), base=offsets,
          bitmap=st.integers(0, 2**64 - 1))
    def apply_ack(self, cack: int, base: int, bitmap: int) -> None:
        self.same("apply_ack", self.psn(min(cack, self.window - 1)), self.psn(base), bitmap)

    @rule(cack=offsets, bitmap=st.integers(0, 2**64 - 1))
    def apply_ack_anywhere(self, cack: int, bitmap: int) -> None:
        self.same("apply_ack", self.psn(cack), self.psn(cack + 1), bitmap)

    @rule(offs=st.lists(offsets, max_size=80))
    def mark_many(self, offs: list[int]) -> None:
        self.same("mark_many", [self.psn(off) for off in offs])

    @rule(start=start_psns)
    def reset(self, start: int) -> None:
        self.same("reset", start)

    @invariant()
    def state_agrees(self) -> None:
        if not hasattr(self, "objs"):
            return
        names = ("base", "cack_psn", "max_psn", "ooo_count", "received_count", "window")
        states = [tuple(getattr(obj, n) for n in names) for obj in self.objs]
        assert states[0] == states[1] == states[2], states
        pure, fast, _ = self.objs
        assert pure.sack_bitmap(pure.base) & 1 == fast.sack_bitmap(fast.base) & 1 == 0
        assert not pure.is_received(pure.base)


TrackerMachine.TestCase.settings = settings(max_examples=200, stateful_step_count=50)
test_tracker_side_by_side = TrackerMachine.TestCase


class Item:
    """A payload object that can be weakly referenced (to check for leaks)."""

    def __init__(self, psn: int, serial: int) -> None:
        self.psn, self.serial = psn, serial

    def __repr__(self) -> str:
        return f"Item({self.psn}, {self.serial})"


class ReorderMachine(RuleBasedStateMachine):
    """pure.ReorderBuffer vs fast.ReorderBuffer vs ModelReorder, items compared by identity."""

    @initialize(
        max_items=st.integers(1, 40),
        max_bytes=st.integers(0, 20000),
        next_psn=start_psns,
        max_distance=st.one_of(st.integers(1, 300), st.just(65536), st.just(1 << 20)),
    )
    def create(self, max_items: int, max_bytes: int, next_psn: int, max_distance: int) -> None:
        args = (max_items, max_bytes, next_psn, max_distance)
        self.objs = [
            native.pure.ReorderBuffer(*args),
            _fast().ReorderBuffer(*args),
            ModelReorder(*args),
        ]
        self.serial = 0
        self.released: list[weakref.ref] = []

    def psn(self, off: int) -> int:
        return (self.objs[0].next_psn + off) & M32

    @rule(
        off=st.one_of(
            st.integers(-3, 50), st.integers(-(2**31), 2**31 - 1), st.integers(0, 1 << 21)
        ),
        nbytes=st.one_of(st.integers(0, 1500), st.integers(0, M32)),
    )
    def insert(self, off: int, nbytes: int) -> None:
        psn = self.psn(off)
        self.serial += 1
        item = Item(psn, self.serial)
        results = [obj.insert(psn, item, nbytes) for obj in self.objs]
        assert results[0] == results[1] == results[2], results
        if results[0] != native.InsertResult.OK:
            self.released.append(weakref.ref(item))  # rejected: nobody may keep it

    @rule(n=st.integers(1, 40))
    def insert_run_backwards(self, n: int) -> None:
        for off in range(n - 1, -1, -1):
            self.insert(off, 100)

    @rule()
    def pop_ready(self) -> None:
        results = [obj.pop_ready() for obj in self.objs]
        assert len(results[0]) == len(results[1]) == len(results[2])
        for a, b, c in zip(*results, strict=True):
            assert a is b is c
        psns = [item.psn for item in results[0]]
        assert psns == [(psns[0] + i) & M32 for i in range(len(psns))] if psns else True
        self.released.extend(weakref.ref(item) for item in results[0])

    @rule(off=st.integers(-3, 60))
    def contains(self, off: int) -> None:
        psn = self.psn(off)
        assert (psn in self.objs[0]) == (psn in self.objs[1]) == (psn in self.objs[2].held)

    @rule(next_psn=start_psns)
    def reset(self, next_psn: int) -> None:
        held = [item for item, _ in self.objs[2].held.values()]
        results = [obj.reset(next_psn) for obj in self.objs]
        assert results[0] == results[1] == results[2]
        self.released.extend(weakref.ref(item) for item in held)

    @invariant()
    def state_agrees(self) -> None:
        if not hasattr(self, "objs"):
            return
        states = [(obj.items, obj.bytes, obj.next_psn) for obj in self.objs]
        assert states[0] == states[1] == states[2], states
        # Items released, dropped or rejected are not kept alive by either implementation.
        assert all(ref() is None for ref in self.released), [r() for r in self.released]


ReorderMachine.TestCase.settings = settings(max_examples=200, stateful_step_count=50)
test_reorder_side_by_side = ReorderMachine.TestCase
