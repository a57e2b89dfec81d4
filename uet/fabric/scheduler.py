"""The discrete-event core: a heap of ``(time_ps, seq, callback, arg)``.

NICs, switch ports and links are plain objects whose callbacks the core runs in time order;
no Trio here. ``uet.runtime.fabric.Fabric`` drives it from a Trio task (virtual or real time).
Equal times run in scheduling order (``seq``), so runs are deterministic.
"""

from __future__ import annotations

from collections.abc import Callable
from heapq import heappop, heappush
from itertools import count
from typing import Any

Callback = Callable[[Any], None]


class EventLoop:
    """Integer-picosecond event heap. ``now`` is the time of the event being run."""

    __slots__ = ("now", "_heap", "_seq", "_stop", "events")

    def __init__(self) -> None:
        self.now = 0
        self._heap: list[tuple[int, int, Callback, Any]] = []
        self._seq = count()
        self._stop = False
        #: events run so far
        self.events = 0

    def at(self, t: int, fn: Callback, arg: Any = None) -> None:
        """Run ``fn(arg)`` at time ``t`` (ps); a time in the past runs at ``now``."""
        if t < self.now:
            t = self.now
        heappush(self._heap, (t, next(self._seq), fn, arg))

    def after(self, dt: int, fn: Callback, arg: Any = None) -> None:
        """Run ``fn(arg)`` ``dt`` picoseconds from now."""
        heappush(self._heap, (self.now + max(dt, 0), next(self._seq), fn, arg))

    def heap_and_seq(self) -> tuple[list, Any]:
        """The raw heap and sequence counter, for hot paths that push
        ``(t, next(seq), fn, arg)`` themselves (``t >= now`` required)."""
        return self._heap, self._seq

    def pusher(self) -> Callable[[int, Callback, Any], None]:
        """A fast ``push(t, fn, arg)`` for hot paths (no past-time clamp: ``t >= now``)."""
        heap, seq = self._heap, self._seq

        def push(t: int, fn: Callback, arg: Any) -> None:
            heappush(heap, (t, next(seq), fn, arg))

        return push

    def next_time(self) -> int | None:
        """Time of the earliest pending event, or None."""
        return self._heap[0][0] if self._heap else None

    def __len__(self) -> int:
        return len(self._heap)

    def stop(self) -> None:
        """Make the running ``run`` return after the current event."""
        self._stop = True

    def run(self, until: int | None = None) -> int:
        """Run events with time <= ``until`` (all if None) or until ``stop()``; returns count.

        ``now`` is left at the last event's time (it does not jump to ``until``).
        """
        heap = self._heap
        limit = until if until is not None else 1 << 126
        self._stop = False
        n = 0
        try:
            while heap and heap[0][0] <= limit:
                t, _, fn, arg = heappop(heap)
                self.now = t
                fn(arg)
                n += 1
                if self._stop:
                    break
        finally:
            self.events += n
        return n

    def advance(self, t: int) -> None:
        """Move ``now`` forward to ``t`` (no events may be pending before it)."""
        if self._heap and self._heap[0][0] < t:
            raise RuntimeError("advance past a pending event")
        self.now = max(self.now, t)
