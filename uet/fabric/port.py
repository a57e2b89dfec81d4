"""Common part of switch ports and NICs: the transmitter and PFC pause state.

A port serialises one frame at a time onto its :class:`~uet.fabric.link.Channel`. It is
non-preemptive; MAC control (PFC) frames go before anything else; a class paused by the
peer is not served until the pause expires or is lifted. ``_dequeue(now)`` (subclass)
returns the next frame or None. After a transmission, a wake-up is scheduled at its end only
if more may be sent (``queued`` non-zero: frames waiting in a switch port; a NIC keeps it at
1 because its end point may always have more), so an idle switch port costs no events.

The per-frame part (``kick``, ``_wake``, ``_start`` and the counters they keep) is the port's
*core*: :class:`PyPortCore` here, or the same in C (``uet.native._event_core.PortCore``,
docs/native.md) when the extension is built and ``UET_PURE_PYTHON`` is not set; both run
the same events in the same order. :class:`Port` adds what is not per frame (PFC pauses,
drops, counters) to either.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from uet.fabric.clock import ser_ps
from uet.fabric.pfc import ET_MAC_CONTROL, decode_pause, encode_pause, quanta_ps
from uet.fabric.scheduler import FABRIC_CORE

if TYPE_CHECKING:
    from uet.fabric.eventlog import EventLog
    from uet.fabric.link import Channel
    from uet.fabric.scheduler import EventLoop

ET_IPV4 = b"\x08\x00"
ET_IPV6 = b"\x86\xdd"

Tap = Callable[[int, bytes, str], None]  # (now_ps, frame, direction "tx"/"rx")


def mac_bytes(mac: str) -> bytes:
    return bytes.fromhex(mac.replace(":", ""))


class PyPortCore:
    """A port's transmitter in Python: the reference of the C ``PortCore``."""

    __slots__ = ("name", "loop", "push", "log", "channel", "mac", "free_at", "wake_pending",
                 "paused_until", "pause_started", "paused_ps", "mac_ctl", "tx_frames",
                 "tx_bytes", "rx_frames", "rx_bytes", "drops", "pause_rx", "pause_tx",
                 "taps", "queued", "__weakref__")

    if TYPE_CHECKING:
        channel: Channel | None

        def _dequeue(self, now: int) -> bytes | None: ...

    def kick(self) -> None:
        """Start transmitting if idle; else make sure a wake-up is pending."""
        if self.wake_pending:
            return
        now = self.loop.now
        if now >= self.free_at:
            self._start(now)
        else:
            self.wake_pending = True
            self.push(self.free_at, self._wake, None)

    def _wake(self, _: Any) -> None:
        self.wake_pending = False
        self._start(self.loop.now)

    # _start is the hot path of the fabric: keep it flat.

    def _start(self, now: int) -> None:
        if self.mac_ctl:
            data = self.mac_ctl.popleft()
            self.pause_tx += 1
        else:
            data = self._dequeue(now)
            if data is None:
                return
        ch = self.channel
        n = len(data)
        ppb = ch.ppb
        end = now + (n * ppb if ppb else ser_ps(n, ch.rate_bps))
        self.free_at = end
        self.tx_frames += 1
        self.tx_bytes += n
        if self.taps:
            for tap in self.taps:
                tap(now, data, "tx")
        if ch.clean:
            ch.tx_frames += 1
            ch.tx_bytes += n
            self.push(end + ch.delay_ps, ch.rx.on_frame, data)
        else:
            ch.carry(data, now, end)
        if self.queued or self.mac_ctl:
            self.wake_pending = True
            self.push(end, self._wake, None)


#: the transmitter's core in use: C unless the extension is missing or UET_PURE_PYTHON=1
PortCore: Any = PyPortCore if FABRIC_CORE is None else FABRIC_CORE.PortCore


class Port:
    """Transmitter + receive-side pause handling. ``channel`` is the outgoing direction.

    A mixin over a port core (``class Nic(Port, PortCore)``): it holds no fields of its
    own, so that the C core's layout is the instance's.
    """

    __slots__ = ()

    if TYPE_CHECKING:  # the core's fields and per-frame methods (PyPortCore or C)
        name: str
        loop: EventLoop
        push: Callable[[int, Callable[[Any], None], Any], None]
        log: EventLog
        channel: Channel | None
        mac: bytes
        free_at: int
        wake_pending: bool
        paused_until: list[int]
        pause_started: list[int]
        paused_ps: list[int]
        mac_ctl: deque[bytes]
        tx_frames: int
        tx_bytes: int
        rx_frames: int
        rx_bytes: int
        drops: Counter[str]
        pause_rx: int
        pause_tx: int
        taps: list[Tap]
        queued: int

        def kick(self) -> None: ...
        def _wake(self, _: Any) -> None: ...
        def _start(self, now: int) -> None: ...

    def __init__(self, name: str, loop: EventLoop, log: EventLog, mac: str) -> None:
        self.name = name
        self.loop = loop
        self.push = loop.pusher()
        self.log = log
        self.channel = None
        self.mac = mac_bytes(mac)
        self.free_at = 0
        self.wake_pending = False
        self.paused_until = [0] * 8
        self.pause_started = [-1] * 8
        self.paused_ps = [0] * 8
        self.mac_ctl = deque()
        self.tx_frames = 0
        self.tx_bytes = 0
        self.rx_frames = 0
        self.rx_bytes = 0
        self.drops = Counter()
        self.pause_rx = 0
        self.pause_tx = 0
        self.taps = []
        self.queued = 0

    # ---------------------------------------------------------------- PFC

    def send_pause(self, times: dict[int, int]) -> None:
        """Queue a PFC frame (``{priority: quanta}``, 0 = resume) ahead of all traffic."""
        self.mac_ctl.append(encode_pause(self.mac, times))
        self.kick()

    def is_paused(self, tc: int) -> bool:
        return self.paused_until[tc] > self.loop.now

    def _on_pause(self, data: bytes) -> None:
        times = decode_pause(data)
        if times is None:
            self._drop("mac_control", data)
            return
        self.pause_rx += 1
        now = self.loop.now
        rate = self.channel.rate_bps if self.channel is not None else 100_000_000_000
        for prio, q in times.items():
            if q:
                until = now + quanta_ps(q, rate)
                if self.paused_until[prio] <= now:
                    self.pause_started[prio] = now
                    if self.log.enabled:
                        self.log.emit(now, "pause_on", port=self.name, prio=prio, quanta=q)
                self.paused_until[prio] = until
                self.push(until, self._pause_expiry, prio)
            else:
                self._resume(prio, now)
        self.kick()

    def _pause_expiry(self, prio: int) -> None:
        now = self.loop.now
        if 0 < self.paused_until[prio] <= now:
            self._resume(prio, now)
            self.kick()

    def _resume(self, prio: int, now: int) -> None:
        if self.pause_started[prio] >= 0:
            self.paused_ps[prio] += now - self.pause_started[prio]
            self.pause_started[prio] = -1
            if self.log.enabled:
                self.log.emit(now, "pause_off", port=self.name, prio=prio)
        self.paused_until[prio] = 0

    # ---------------------------------------------------------------- receive helpers

    def rx_drop(self, reason: str, data: bytes) -> None:
        """A frame that arrived but is dropped here (e.g. ``fcs``)."""
        self.rx_frames += 1
        self.rx_bytes += len(data)
        self._drop(reason, data)

    def _drop(self, reason: str, data: bytes) -> None:
        self.drops[reason] += 1
        if self.log.enabled:
            self.log.emit(self.loop.now, "drop", where=self.name, reason=reason,
                          bytes=len(data))

    def counters(self) -> dict[str, Any]:
        now = self.loop.now
        paused = [p + (now - s if s >= 0 else 0)
                  for p, s in zip(self.paused_ps, self.pause_started, strict=True)]
        out: dict[str, Any] = {
            "tx_frames": self.tx_frames, "tx_bytes": self.tx_bytes,
            "rx_frames": self.rx_frames, "rx_bytes": self.rx_bytes,
            "pause_tx": self.pause_tx, "pause_rx": self.pause_rx,
        }
        for prio, ps in enumerate(paused):
            if ps:
                out[f"paused_ps.{prio}"] = ps
        for k, v in sorted(self.drops.items()):
            out[f"drop.{k}"] = v
        return out


__all__ = ["Port", "PortCore", "PyPortCore", "Tap", "ET_IPV4", "ET_IPV6", "ET_MAC_CONTROL",
           "mac_bytes"]
