"""Links: a full-duplex cable is two :class:`Channel` s, one per direction.

A channel carries a frame from the transmitting port to the far end: the far end gets the
whole frame (store and forward) at ``tx_end + delay``. Serialisation happens in the sending
port at ``channel.rate_bps``. Impairments (``uet.fabric.impairments``) act per channel with
their own seeded generator; a clean channel costs one heap event per frame.

What the transmitter reads per frame (rate, delay, far end, ``clean``, the frame counters)
is the channel's core: :class:`PyChannelCore`, or the same fields in C
(``uet.native._event_core.ChannelCore``) when the C fabric path is in use.
"""

from __future__ import annotations

import zlib
from collections import Counter
from typing import TYPE_CHECKING, Any

from uet.fabric.clock import ps_per_byte
from uet.fabric.impairments import Impairments, ImpairmentState
from uet.fabric.scheduler import FABRIC_CORE

if TYPE_CHECKING:
    from uet.fabric.eventlog import EventLog
    from uet.fabric.scheduler import EventLoop


class PyChannelCore:
    """The per-frame fields of a channel in Python: the reference of the C ``ChannelCore``."""

    __slots__ = ("push", "rate_bps", "ppb", "delay_ps", "rx", "carry", "clean", "tx_frames",
                 "tx_bytes")


#: the channel's core in use: C unless the extension is missing or UET_PURE_PYTHON=1
ChannelCore: Any = PyChannelCore if FABRIC_CORE is None else FABRIC_CORE.ChannelCore


class Channel(ChannelCore):
    """One direction of a link: rate, propagation delay, impairments, counters."""

    __slots__ = ("name", "loop", "up", "imp", "delivered", "drops", "corrupted",
                 "duplicated", "log", "_nominal_rate", "on_change", "fcs_sink")

    if TYPE_CHECKING:  # the core's (PyChannelCore or C)
        push: Any
        rate_bps: int
        ppb: int | None
        delay_ps: int
        rx: Any
        carry: Any
        clean: bool
        tx_frames: int
        tx_bytes: int

    def __init__(self, name: str, loop: EventLoop, rate_bps: int, delay_ps: int,
                 log: EventLog) -> None:
        self.name = name
        self.loop = loop
        self.push = loop.pusher()
        self._nominal_rate = rate_bps
        self.rate_bps = rate_bps
        self.ppb = ps_per_byte(rate_bps)
        self.delay_ps = delay_ps
        self.up = True
        self.rx: Any = None  # the far end: has on_frame(data) and rx_drop(reason, data)
        self.carry = self._carry_clean
        #: no per-frame impairment and up: ports push the arrival themselves (hot path)
        self.clean = True
        self.imp: ImpairmentState | None = None
        self.tx_frames = 0
        self.tx_bytes = 0
        self.delivered = 0
        self.drops: Counter[str] = Counter()
        self.corrupted = 0
        self.duplicated = 0
        self.log = log
        #: called with this channel after it went down or up (routing, uet.fabric.routing)
        self.on_change: Any = None
        #: ``fn(frame, fcs)`` for a corrupted frame when the far end is a real wire (the
        #: live driver): the frame leaves with the good frame's FCS and the receiver checks
        #: it; None: the check is made here (virtual time, both ends in one process)
        self.fcs_sink: Any = None

    # ------------------------------------------------------------------ configuration

    def set_rate(self, rate_bps: int) -> None:
        """Change the serialisation rate (a degraded link); applies from the next frame."""
        self.rate_bps = rate_bps
        self.ppb = ps_per_byte(rate_bps)

    def impair(self, cfg: Impairments, seed: int) -> None:
        """Apply impairments to this direction (``seed`` unless ``cfg.seed`` is set)."""
        self.imp = ImpairmentState(cfg, seed)
        self.set_rate(cfg.rate_bps or self._nominal_rate)
        for t_down, t_up in cfg.down:
            self.loop.at(t_down, self.set_up, False)
            if t_up is not None:
                self.loop.at(t_up, self.set_up, True)
        self.carry = self._carry_impaired if cfg.per_frame else self._carry_clean
        self.clean = not cfg.per_frame

    def set_up(self, up: bool) -> None:
        """Bring this direction down (frames sent or arriving while down are lost) or up."""
        if up == self.up:
            return
        self.up = up
        self.carry = self._carry_impaired
        self.clean = False
        self.log.emit(self.loop.now, "link_up" if up else "link_down", link=self.name)
        if self.on_change is not None:
            self.on_change(self)

    # ------------------------------------------------------------------ data path

    def _carry_clean(self, data: bytes, t0: int, t1: int) -> None:
        self.tx_frames += 1
        self.tx_bytes += len(data)
        self.push(t1 + self.delay_ps, self.rx.on_frame, data)

    def _carry_impaired(self, data: bytes, t0: int, t1: int) -> None:
        self.tx_frames += 1
        self.tx_bytes += len(data)
        if not self.up:
            self._drop("link_down", data)
            return
        imp = self.imp
        if imp is None:
            self.push(t1 + self.delay_ps, self._arrive, (data, None))
            return
        reason = imp.lost()
        if reason is not None:
            self._drop(reason, data)
            return
        fcs = None
        bad = imp.corrupt(data)
        if bad is not None:
            fcs = zlib.crc32(data)  # the FCS the sender computed over the good frame
            data = bad
            self.corrupted += 1
        t = t1 + self.delay_ps + imp.extra_delay()
        self.push(t, self._arrive, (data, fcs))
        if imp.duplicated():
            self.duplicated += 1
            self.push(t + imp.extra_delay(), self._arrive, (data, fcs))

    def _arrive(self, item: tuple[bytes, int | None]) -> None:
        data, fcs = item
        if not self.up:
            self._drop("link_down", data)
            return
        if fcs is not None:
            if self.fcs_sink is not None:
                self.fcs_sink(data, fcs)
                return
            if zlib.crc32(data) != fcs:
                self.rx.rx_drop("fcs", data)
                return
        self.delivered += 1
        self.rx.on_frame(data)

    def _drop(self, reason: str, data: bytes) -> None:
        self.drops[reason] += 1
        log = self.log
        if log.enabled:
            log.emit(self.loop.now, "drop", where=self.name, reason=reason, bytes=len(data))

    def counters(self) -> dict[str, Any]:
        out: dict[str, Any] = {"tx_frames": self.tx_frames, "tx_bytes": self.tx_bytes,
                               "rate_bps": self.rate_bps, "up": self.up}
        if self.imp is not None:
            out["delivered"] = self.delivered
            out["corrupted"] = self.corrupted
            out["duplicated"] = self.duplicated
        for k, v in sorted(self.drops.items()):
            out[f"drop.{k}"] = v
        return out


class Link:
    """A cable between two interfaces ``a`` and ``b`` (names like ``"h0"``, ``"tor0.p0"``).

    Each direction runs on its transmitter's core (``loop`` for ``a -> b``, ``loop_b``,
    default the same, for ``b -> a``): the cable is modelled by the node that sends on it.
    """

    __slots__ = ("name", "a", "b", "ab", "ba")

    def __init__(self, a: str, b: str, loop: EventLoop, rate_bps: int, delay_ps: int,
                 log: EventLog, *, loop_b: EventLoop | None = None) -> None:
        self.a, self.b = a, b
        self.name = f"{a}<->{b}"
        self.ab = Channel(f"{a}->{b}", loop, rate_bps, delay_ps, log)
        self.ba = Channel(f"{b}->{a}", loop if loop_b is None else loop_b, rate_bps,
                          delay_ps, log)

    def channel_from(self, end: str) -> Channel:
        """The channel transmitted by interface ``end``."""
        if end == self.a:
            return self.ab
        if end == self.b:
            return self.ba
        raise KeyError(f"link {self.name} has no end {end!r}")

    def set_up(self, up: bool) -> None:
        self.ab.set_up(up)
        self.ba.set_up(up)

    def counters(self) -> dict[str, Any]:
        return {self.ab.name: self.ab.counters(), self.ba.name: self.ba.counters()}
