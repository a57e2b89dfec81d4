"""The event core runs events exactly in (time, scheduling order), like one heap would,
whatever the bucket layout: pushes from callbacks, equal times, far timers, runs cut by
``until`` or ``stop()`` and events scheduled from outside between runs."""

from __future__ import annotations

import heapq
import random
import sys
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


class Node:
    """Holds its loop; its events hold it: a reference cycle through the loop."""

    def __init__(self, loop):
        self.loop = loop

    def tick(self, _):
        pass


def test_the_native_core_frees_cycles_and_refuses_huge_times() -> None:
    assert NativeEventLoop is not None
    import gc
    import weakref

    loop = NativeEventLoop()
    node = Node(loop)
    loop.at(5, node.tick, node)  # loop -> event -> node -> loop
    ref = weakref.ref(node)
    del loop, node
    gc.collect()
    assert ref() is None
    with pytest.raises(OverflowError, match="64-bit"):
        NativeEventLoop().at(1 << 70, print)


# ---------------------------------------------------------------- the C core's ring

def _ring_span() -> int:
    from uet.native import _event_core

    return _event_core.RING_BUCKETS << _event_core.RING_SHIFT


def _ring_width() -> int:
    from uet.native import _event_core

    return 1 << _event_core.RING_SHIFT


FAR = 10**15  # beyond any test's end


def _ring_min() -> int:
    from uet.native import _event_core

    return _event_core.RING_MIN_PENDING


def ballast(*loops) -> None:
    """Enough events pending (far beyond the test, never run) that the C core uses its
    ring for the near future: below ``RING_MIN_PENDING`` it keeps everything in its heap."""
    for loop in loops:
        for i in range(_ring_min()):
            loop.push(FAR + i, print, None)


class PushHeap(HeapLoop):
    """The reference for ``push``: no clamp to now (an event pushed into the past runs
    next, at its own time)."""

    def push(self, t: int, fn, arg) -> None:
        heapq.heappush(self.heap, (t, next(self.seq), fn, arg))

    def advance(self, t: int) -> None:
        assert not self.heap or self.heap[0][0] >= t
        self.now = max(self.now, t)


def ring_edges(loop, seed: int) -> list:
    """Events at and around the ring's far edge (one span, one span +- 1 ps, two spans),
    inside one bucket out of order, at equal times, and pushed into the past, with idle
    time skipped by ``advance``, as time moves round the ring many times; the (time, id)
    trace."""
    rng = random.Random(seed)
    span = _ring_span()
    width = _ring_width()
    trace: list = []
    ids = count()
    push = loop.push

    def event(eid: int) -> None:
        trace.append((loop.now, eid))
        if len(trace) >= 30_000:
            loop.stop()
        for _ in range(rng.choice((0, 1, 1, 2, 2))):
            r = rng.random()
            if r < 0.3:
                dt = rng.choice((span - 1, span, span + 1, span - width, 2 * span,
                                 span + rng.randrange(width)))
            elif r < 0.6:
                dt = rng.randrange(width)  # this bucket, any order
            elif r < 0.7:
                dt = 0
            elif r < 0.75:
                dt = -rng.randrange(1, 3 * width)  # the past: before the ring's start
            else:
                dt = rng.randrange(span)
            push(loop.now + dt, event, next(ids))

    ballast(loop)
    for _ in range(50):
        push(rng.randrange(3 * span), event, next(ids))
    while len(trace) < 30_000:
        loop.run(until=loop.now + rng.randrange(span))
        if rng.random() < 0.2:  # from outside between runs, beyond the ring too
            push(loop.now + rng.randrange(3 * span), event, next(ids))
        nt = loop.next_time()
        if rng.random() < 0.2 and nt is not None and nt > loop.now:  # idle time skipped
            loop.advance(rng.randrange(loop.now, nt + 1))
    return trace


@pytest.mark.skipif(NativeEventLoop is None, reason="the C core is not built")
def test_the_ring_runs_edges_the_past_and_wraps_in_heap_order() -> None:
    span = _ring_span()
    for seed in range(4):
        want = ring_edges(PushHeap(), seed)
        got = ring_edges(NativeEventLoop(), seed)
        assert got == want, seed
        assert len(want) >= 30_000 and want[-1][0] > 8 * span  # round the ring 8+ times


@pytest.mark.skipif(NativeEventLoop is None, reason="the C core is not built")
def test_a_crowded_bucket_grows_slides_and_keeps_order() -> None:
    """Thousands of events in one bucket, pushed in a shuffled time order, taken while
    more arrive (the bucket's free front is reused), then a burst at one time."""
    rng = random.Random(7)
    width = _ring_width()
    ref, loop = PushHeap(), NativeEventLoop()
    ballast(ref, loop)
    seen_ref: list = []
    seen: list = []
    times = [5 * width + rng.randrange(width) for _ in range(5000)]
    for i, t in enumerate(times):
        ref.push(t, seen_ref.append, i)
        loop.push(t, seen.append, i)
    assert len(loop) == len(ref.heap) and loop.next_time() == min(times)
    for _ in range(10):  # take some, add some: the bucket reuses the room at its front
        cut = sorted(times)[len(seen) + 200]
        ref.run(until=cut)
        loop.run(until=cut)
        for _ in range(300):
            t = max(loop.now, 5 * width + rng.randrange(width))
            ref.push(t, seen_ref.append, len(times))
            loop.push(t, seen.append, len(times))
            times.append(t)
        assert seen == seen_ref and len(loop) == len(ref.heap)
    for i in range(3000):  # one time, in scheduling order
        ref.push(9 * width, seen_ref.append, -i)
        loop.push(9 * width, seen.append, -i)
    assert loop.run(until=FAR - 1) == ref.run(until=FAR - 1)
    assert seen == seen_ref and len(seen) == 5000 + 3000 + 3000
    # in time order into one bucket: it grows to 1,024 places; half taken, the next
    # pushes fill it and slide its events to the front
    t0 = (loop.now // width + 20) * width

    def at(i: int) -> int:  # 1,600 times in order, all in the bucket starting at t0
        return t0 + i * (width - 1) // 1600

    for i in range(1000):
        ref.push(at(i), seen_ref.append, i)
        loop.push(at(i), seen.append, i)
    ref.run(until=at(500))
    loop.run(until=at(500))
    for i in range(1000, 1600):
        ref.push(at(i), seen_ref.append, i)
        loop.push(at(i), seen.append, i)
    assert loop.run(until=FAR - 1) == ref.run(until=FAR - 1) and seen == seen_ref
    assert len(loop) == len(ref.heap) == _ring_min()  # the ballast


@pytest.mark.skipif(NativeEventLoop is None, reason="the C core is not built")
def test_ring_and_heap_events_count_and_free_alike() -> None:
    import gc
    import weakref

    span = _ring_span()

    loop = NativeEventLoop()
    ballast(loop)
    node = Node(loop)
    loop.at(5, node.tick, node)  # the ring
    loop.at(3 * span, node.tick, node)  # the heap
    assert len(loop) == _ring_min() + 2 and loop.next_time() == 5
    with pytest.raises(RuntimeError, match="advance past"):
        loop.advance(6)
    loop.advance(5)
    ref = weakref.ref(node)
    del loop, node
    gc.collect()  # loop -> ring and heap events -> node -> loop
    assert ref() is None
    arg = object()
    loop = NativeEventLoop()
    ballast(loop)
    for t in (1, 2 * span):
        loop.at(t, print, arg)
    before = sys.getrefcount(arg)
    del loop  # no cycle: freed at once, both queues' references released
    assert sys.getrefcount(arg) == before - 2
