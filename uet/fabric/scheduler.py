"""The discrete-event core: ``(time_ps, seq, callback, arg)`` events run in time order.

NICs, switch ports and links are plain objects whose callbacks the core runs in time order;
no Trio here. ``uet.runtime.fabric.Fabric`` drives it from a Trio task (virtual or real time).
Equal times run in scheduling order (``seq``), so runs are deterministic.

``EventLoop`` is the C core of ``uet.native._event_core`` when it is built (one binary heap
of 32-byte event structs ordered by (time, seq), no tuple or Python-level loop per event),
else :class:`PyEventLoop`; ``UET_PURE_PYTHON=1`` forces the Python one (as for
``uet.native``). Both run the same events in the same order (tests/fabric/test_scheduler.py).

:class:`PyEventLoop` is a calendar of buckets ``BUCKET_PS`` wide (a dict of small heaps,
plus a heap of the bucket numbers): almost every event of a busy fabric is due within a link
delay, so the bucket being run holds a few dozen events and its heap stays in the CPU
cache, where one heap of tuples over every pending event (tens of thousands at 1,024 hosts:
a frame in flight on every busy link) walks ~15 levels of cold memory per event. The order
is exactly the one heap's: by time, then by ``seq``.
"""

from __future__ import annotations

from collections.abc import Callable
from heapq import heappop, heappush
from itertools import count
from typing import TYPE_CHECKING, Any

from uet.native import FORCED_PURE

Callback = Callable[[Any], None]

#: log2 of the bucket width in ps (1,024 ps: ~1/8 of a full frame at 100 Gb/s)
BUCKET_SHIFT = 10


class PyEventLoop:
    """Integer-picosecond event queue. ``now`` is the time of the event being run."""

    __slots__ = ("now", "_buckets", "_order", "_cur", "_cur_b", "_seq", "_stop", "events",
                 "push")

    def __init__(self) -> None:
        self.now = 0
        #: bucket number -> heap of events; every bucket but the current one is in _order
        self._buckets: dict[int, list[tuple[int, int, Callback, Any]]] = {}
        self._order: list[int] = []
        self._cur: list[tuple[int, int, Callback, Any]] | None = None
        self._cur_b = -1
        self._seq = count()
        self._stop = False
        #: events run so far
        self.events = 0
        buckets, order, seq = self._buckets, self._order, self._seq

        def push(t: int, fn: Callback, arg: Any) -> None:
            """Schedule ``fn(arg)`` at ``t`` (no past-time clamp: ``t >= now``)."""
            b = t >> BUCKET_SHIFT
            heap = buckets.get(b)
            if heap is None:
                buckets[b] = [(t, next(seq), fn, arg)]
                heappush(order, b)
            else:
                heappush(heap, (t, next(seq), fn, arg))

        #: the fast ``push(t, fn, arg)`` for hot paths (``t >= now`` required)
        self.push = push

    def at(self, t: int, fn: Callback, arg: Any = None) -> None:
        """Run ``fn(arg)`` at time ``t`` (ps); a time in the past runs at ``now``."""
        self.push(t if t > self.now else self.now, fn, arg)

    def after(self, dt: int, fn: Callback, arg: Any = None) -> None:
        """Run ``fn(arg)`` ``dt`` picoseconds from now."""
        self.push(self.now + max(dt, 0), fn, arg)

    def pusher(self) -> Callable[[int, Callback, Any], None]:
        """The fast ``push(t, fn, arg)`` for hot paths (no past-time clamp: ``t >= now``)."""
        return self.push

    def next_time(self) -> int | None:
        """Time of the earliest pending event, or None."""
        cur = self._cur
        best = cur[0][0] if cur else None
        if self._order:
            t = self._buckets[self._order[0]][0][0]
            if best is None or t < best:
                best = t
        return best

    def __len__(self) -> int:
        return sum(len(h) for h in self._buckets.values())

    def stop(self) -> None:
        """Make the running ``run`` return after the current event."""
        self._stop = True

    def run(self, until: int | None = None) -> int:
        """Run events with time <= ``until`` (all if None) or until ``stop()``; returns count.

        ``now`` is left at the last event's time (it does not jump to ``until``).
        """
        buckets, order = self._buckets, self._order
        limit = until if until is not None else 1 << 126
        self._stop = False
        cur, cur_b = self._cur, self._cur_b
        if cur is not None and order and order[0] < cur_b:
            # something was scheduled (from outside) before the current bucket
            if cur:
                heappush(order, cur_b)
            else:
                del buckets[cur_b]
            cur = None
        n = 0
        try:
            while True:
                if not cur:
                    if cur is not None:
                        del buckets[cur_b]
                        cur = None
                    if not order:
                        break
                    cur_b = heappop(order)
                    cur = buckets[cur_b]
                if cur[0][0] > limit:
                    break
                t, _, fn, arg = heappop(cur)
                self.now = t
                fn(arg)
                n += 1
                if self._stop:
                    break
        finally:
            self._cur, self._cur_b = cur, cur_b
            self.events += n
        return n

    def advance(self, t: int) -> None:
        """Move ``now`` forward to ``t`` (no events may be pending before it)."""
        nt = self.next_time()
        if nt is not None and nt < t:
            raise RuntimeError("advance past a pending event")
        self.now = max(self.now, t)


NativeEventLoop: Any
try:
    from uet.native import _event_core  # type: ignore[attr-defined]
except ImportError:  # the C extension was not built: the Python core
    NativeEventLoop = None
else:
    NativeEventLoop = _event_core.EventLoop

#: the C per-frame path of ports, switch ports and channels (``uet/native/fabric_core.c``:
#: ``PortCore``, ``SwitchPortCore``, ``ChannelCore``, ``SwitchCore``), in use exactly when the
#: C event core is; None: the Python cores of port.py, switch.py and link.py
FABRIC_CORE: Any = None if NativeEventLoop is None or FORCED_PURE else _event_core

if TYPE_CHECKING:  # both cores have PyEventLoop's interface
    EventLoop = PyEventLoop
else:
    #: the event core in use: the C one unless it is missing or UET_PURE_PYTHON=1
    EventLoop = PyEventLoop if NativeEventLoop is None or FORCED_PURE else NativeEventLoop
