"""The event core runs events exactly in (time, scheduling order), like one heap would,
whatever the bucket layout: pushes from callbacks, equal times, far timers, runs cut by
``until`` or ``stop()`` and events scheduled from outside between runs."""

from __future__ import annotations

import heapq
import random
from itertools import count

import pytest

from uet.fabric.scheduler import BUCKET_SHIFT, NativeEventLoop, PyEventLoop

CORES = [PyEventLoop] + ([NativeEventLoop] if NativeEventLoop is not None else [])
IDS = ["python", "native"][:len(CORES)]


class HeapLoop:
    """The reference: one heap of (t, seq, fn, arg)."""

    def __init__(self) -> None:
        self.now = 0
        self.heap: list = []
        self.seq = count()
        self.stopped = False

    def at(self, t: int, fn, arg=None) -> None:
        heapq.heappush(self.heap, (max(t, self.now), next(self.seq), fn, arg))

    def stop(self) -> None:
        self.stopped = True

    def run(self, until=None) -> int:
        n = 0
        self.stopped = False
        while self.heap and (until is None or self.heap[0][0] <= until):
            t, _, fn, arg = heapq.heappop(self.heap)
            self.now = t
            fn(arg)
            n += 1
            if self.stopped:
                break
        return n

    def next_time(self):
        return self.heap[0][0] if self.heap else None

    def __len__(self) -> int:
        return len(self.heap)


def scenario(loop, seed: int) -> list:
    """A seeded random workload; returns the (time, event id) trace."""
    rng = random.Random(seed)
    trace: list = []
    ids = count()
    width = 1 << BUCKET_SHIFT

    def event(eid: int) -> None:
        trace.append((loop.now, eid))
        for _ in range(rng.choice((0, 0, 1, 1, 2, 3))):
            kind = rng.random()
            if kind < 0.2:
                dt = 0  # same time: after everything already due now
            elif kind < 0.5:
                dt = rng.randrange(width)  # same or next bucket
            elif kind < 0.95:
                dt = rng.randrange(1, 3 * 10**6)  # a frame time or a link delay
            else:
                dt = rng.randrange(10**8)  # a timer far out
            loop.at(loop.now + dt, event, next(ids))
        if rng.random() < 0.03:
            loop.stop()

    for _ in range(20):
        loop.at(rng.randrange(5 * width), event, next(ids))
    while len(loop) and len(trace) < 2000:
        if rng.random() < 0.3:
            nt = loop.next_time()
            assert nt is not None
            loop.run(until=nt + rng.randrange(4 * width))
        else:
            loop.run()
        # from outside, between runs: possibly before the bucket the loop stopped in
        for _ in range(rng.randrange(3)):
            loop.at(loop.now + rng.randrange(2 * width), event, next(ids))
    return trace


@pytest.mark.parametrize("EventLoop", CORES, ids=IDS)
def test_core_runs_in_heap_order(EventLoop) -> None:
    for seed in range(12):
        want = scenario(HeapLoop(), seed)
        got = scenario(EventLoop(), seed)
        assert got == want, seed
        assert len(want) > 100


def deep(loop, seed: int) -> list:
    """Tens of thousands of pending events (a large fabric's queue: ~16 heap levels), many
    at equal times, events scheduling more as they run; the (time, id) trace."""
    rng = random.Random(seed)
    trace: list = []
    ids = count()

    def event(eid: int) -> None:
        trace.append((loop.now, eid))
        if rng.random() < 0.45:
            loop.at(loop.now + rng.choice((0, rng.randrange(64), rng.randrange(10**5))),
                    event, next(ids))

    for _ in range(40_000):
        loop.at(rng.randrange(10**6) & ~0x3F, event, next(ids))  # ties on purpose
    loop.run()
    return trace


@pytest.mark.parametrize("EventLoop", CORES, ids=IDS)
def test_core_pops_a_deep_heap_in_order(EventLoop) -> None:
    for seed in (1, 2):
        want = deep(HeapLoop(), seed)
        assert deep(EventLoop(), seed) == want, seed
        assert len(want) > 60_000


@pytest.mark.parametrize("EventLoop", CORES, ids=IDS)
def test_len_next_time_and_events(EventLoop) -> None:
    loop = EventLoop()
    assert loop.next_time() is None and len(loop) == 0
    seen: list = []
    loop.at(5 << BUCKET_SHIFT, seen.append, "b")
    loop.at(3, seen.append, "a")
    loop.after(10**9, seen.append, "c")
    assert len(loop) == 3 and loop.next_time() == 3
    assert loop.run(until=5 << BUCKET_SHIFT) == 2 and seen == ["a", "b"]
    assert loop.now == 5 << BUCKET_SHIFT and loop.next_time() == 10**9
    loop.at(0, seen.append, "late")  # in the past: runs at now, before "c"
    assert loop.run() == 2 and seen == ["a", "b", "late", "c"] and loop.events == 4
    assert len(loop) == 0


def test_the_native_core_is_built_and_used() -> None:
    """pip install builds it; without UET_PURE_PYTHON the fabric runs on it."""
    import os

    from uet.fabric import scheduler

    assert NativeEventLoop is not None
    pure = os.environ.get("UET_PURE_PYTHON", "").strip() not in ("", "0")
    assert scheduler.EventLoop is (PyEventLoop if pure else NativeEventLoop)


@pytest.mark.parametrize("EventLoop", CORES, ids=IDS)
def test_errors_stop_the_run_and_keep_the_rest(EventLoop) -> None:
    """A callback that raises ends run() with its exception; the events before it are
    counted, the ones after it stay queued."""
    loop = EventLoop()
    seen: list = []

    def boom(_):
        raise KeyError("x")

    loop.at(1, seen.append, 1)
    loop.at(2, boom, None)
    loop.at(3, seen.append, 3)
    with pytest.raises(KeyError):
        loop.run()
    assert seen == [1] and loop.events == 1 and len(loop) == 1 and loop.now == 2
    assert loop.run() == 1 and seen == [1, 3]
    with pytest.raises(RuntimeError, match="advance past"):
        loop.at(10, seen.append, 10)
        loop.advance(11)
    loop.run()
    loop.advance(20)
    assert loop.now == 20 and loop.run(until=30) == 0


def test_the_native_core_frees_cycles_and_refuses_huge_times() -> None:
    assert NativeEventLoop is not None
    import gc
    import weakref

    class Node:
        def __init__(self, loop):
            self.loop = loop

        def tick(self, _):
            pass

    loop = NativeEventLoop()
    node = Node(loop)
    loop.at(5, node.tick, node)  # loop -> event -> node -> loop
    ref = weakref.ref(node)
    del loop, node
    gc.collect()
    assert ref() is None
    with pytest.raises(OverflowError, match="64-bit"):
        NativeEventLoop().at(1 << 70, print)
