"""The NIC: drives one sans-IO :class:`~uet.fabric.endpoint.FrameEndpoint`.

Transmit: one frame at a time at the link rate. PFC frames first, then frames held back
because their class was paused, then ``pop_control`` (if the control class is not paused),
then ``pop_data`` (if the data class is not paused). A popped frame whose DSCP maps to a
paused class is held in a per-class queue until the pause ends. Receive: PFC frames pause
the transmitter; everything else goes to ``endpoint.receive``. The end point's timer
(``next_deadline``) is one event on the core, re-armed lazily.

The per-frame glue is the NIC's core: :class:`PyNicCore`, or the same in C
(``uet.native._event_core.NicCore``) when the C fabric path is in use.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from uet.fabric.port import ET_IPV4, ET_MAC_CONTROL, Port, PyPortCore
from uet.fabric.qos import QosConfig
from uet.fabric.scheduler import FABRIC_CORE

if TYPE_CHECKING:
    from uet.fabric.endpoint import FrameEndpoint
    from uet.fabric.eventlog import EventLog
    from uet.fabric.scheduler import EventLoop


class PyNicCore(PyPortCore):
    """A NIC's per-frame glue in Python: the reference of the C ``NicCore``."""

    __slots__ = ("ep", "held", "held_n", "held_hwm", "tos_tc", "data_tc", "control_tc",
                 "prio", "timer_at", "on_change", "timers", "delivered")

    if TYPE_CHECKING:
        ep: FrameEndpoint | None

    # ---------------------------------------------------------------- transmit

    def _tc_of(self, data: bytes) -> int:
        if data[12:14] == ET_IPV4:
            return self.tos_tc[data[15]]
        return self.tos_tc[(data[14] & 0x0F) << 4 | data[15] >> 4]

    def _dequeue(self, now: int) -> bytes | None:
        pu = self.paused_until
        if self.held_n:
            for tc in self.prio:
                if self.held[tc] and pu[tc] <= now:
                    self.held_n -= 1
                    return self.held[tc].popleft()
        ep = self.ep
        data = None
        while True:
            data = ep.pop_control(now) if pu[self.control_tc] <= now else None
            if data is None and pu[self.data_tc] <= now:
                data = ep.pop_data(now)
            if data is None:
                break
            tc = self._tc_of(data)
            if pu[tc] <= now:
                break
            self.held[tc].append(data)
            self.held_n += 1
            if self.held_n > self.held_hwm:
                self.held_hwm = self.held_n
            data = None
        self._retimer()
        return data

    # ---------------------------------------------------------------- receive

    def on_frame(self, data: bytes) -> None:
        """A whole frame arrived from the link."""
        self.rx_frames += 1
        self.rx_bytes += len(data)
        now = self.loop.now
        if self.taps:
            for tap in self.taps:
                tap(now, data, "rx")
        if data[12:14] == ET_MAC_CONTROL:
            self._on_pause(data)
            return
        self.delivered += 1
        self.ep.receive(now, data)
        self._retimer()
        if not self.wake_pending and now >= self.free_at:
            self._start(now)
        if self.on_change is not None:
            self.on_change(self)

    # ---------------------------------------------------------------- timers

    def _retimer(self) -> None:
        d = self.ep.next_deadline()
        if d is None:
            return
        ta = self.timer_at
        if ta is None or d < ta:
            now = self.loop.now
            t = d if d > now else now
            self.timer_at = t
            self.push(t, self._on_timer, None)

    def _on_timer(self, _: Any) -> None:
        now = self.loop.now
        if self.timer_at != now:
            return  # superseded by an earlier timer
        self.timer_at = None
        d = self.ep.next_deadline()
        if d is not None and d <= now:
            self.timers += 1
            self.ep.handle_timer(now)
            d2 = self.ep.next_deadline()
            if d2 is not None and d2 <= now:  # guard against an end point that spins
                self.timer_at = now + 1
                self.push(now + 1, self._on_timer, None)
            self.kick()
            if self.on_change is not None:
                self.on_change(self)
        self._retimer()


#: the NIC's core in use: C unless the extension is missing or UET_PURE_PYTHON=1
NicCore: Any = PyNicCore if FABRIC_CORE is None else FABRIC_CORE.NicCore


class Nic(Port, NicCore):
    """Host interface ``h<i>`` with its end point ``ep``."""

    __slots__ = ("index",)

    if TYPE_CHECKING:  # the core's (PyNicCore or C)
        ep: FrameEndpoint | None
        held: list[deque[bytes]]
        held_n: int
        held_hwm: int
        tos_tc: list[int]
        data_tc: int
        control_tc: int
        prio: tuple[int, ...]
        timer_at: int | None
        on_change: Callable[[Nic], None] | None
        timers: int
        delivered: int

        def on_frame(self, data: bytes) -> None: ...
        def _retimer(self) -> None: ...
        def _on_timer(self, _: Any) -> None: ...

    #: the Python receive path the C core falls back on (a frame that is not bytes)
    _on_frame_py = PyNicCore.on_frame

    def __init__(self, name: str, index: int, loop: EventLoop, log: EventLog, mac: str,
                 qos: QosConfig) -> None:
        super().__init__(name, loop, log, mac)
        self.index = index
        self.ep = None
        self.held = [deque() for _ in range(8)]
        self.held_n = 0
        self.held_hwm = 0
        self.tos_tc = qos.tos_table()
        self.data_tc = qos.data_tc
        self.control_tc = qos.control_tc
        self.prio = qos.priority
        self.timer_at = None
        self.on_change = None
        self.timers = 0
        self.delivered = 0
        self.queued = 1  # the end point may always have more: wake after every frame

    def poke(self) -> None:
        """Call after changing the end point from outside (e.g. a new message)."""
        self._retimer()
        self.kick()
        if self.on_change is not None:
            self.on_change(self)

    def counters(self) -> dict[str, Any]:
        out = super().counters()
        out["delivered"] = self.delivered
        out["timers"] = self.timers
        out["held_hwm"] = self.held_hwm
        return out
