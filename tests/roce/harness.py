"""Test harness: RoCE end points on a real emulated fabric, with a receive-side filter that
drops, duplicates or records chosen frames (to script losses exactly), and helpers to
read what went over the wire."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from uet.fabric.endpoint import HostContext
from uet.fabric.network import Network
from uet.fabric.topology import build
from uet.roce.codec import decode_frame
from uet.roce.config import RoceConfig
from uet.roce.endpoint import RoceEndpoint
from uet.roce.records import RoceFrame

#: decides what happens to a frame arriving at host ``host``: None (deliver), "drop",
#: or "dup" (deliver twice)
Rule = Callable[[int, RoceFrame, int], str | None]


class Filtered:
    """A RoCE end point behind a receive filter (same FrameEndpoint shape)."""

    def __init__(self, ep: RoceEndpoint, host: int, rule: Rule | None, log: list) -> None:
        self.ep = ep
        self.host = host
        self.rule = rule
        self.log = log
        self.n = 0

    def receive(self, now: int, data: bytes) -> None:
        f = decode_frame(data, check_icrc=False)
        self.n += 1
        verdict = self.rule(self.host, f, self.n) if self.rule is not None else None
        self.log.append((now, self.host, f, verdict))
        if verdict == "drop":
            return
        self.ep.receive(now, data)
        if verdict == "dup":
            self.ep.receive(now, data)

    def pop_control(self, now: int) -> bytes | None:
        return self.ep.pop_control(now)

    def pop_data(self, now: int) -> bytes | None:
        return self.ep.pop_data(now)

    def next_deadline(self) -> int | None:
        return self.ep.next_deadline()

    def handle_timer(self, now: int) -> None:
        self.ep.handle_timer(now)


@dataclass
class Rig:
    net: Network
    eps: list[RoceEndpoint]
    log: list = field(default_factory=list)
    delivered: list = field(default_factory=list)

    def run(self, until: int | None = None) -> None:
        self.net.loop.run(until)

    def poke(self, host: int) -> None:
        self.net.nics[host].poke()

    def arrivals(self, host: int, opcode: int | None = None) -> list[RoceFrame]:
        """Frames that reached ``host`` (before the filter), in order."""
        return [f for _t, h, f, _v in self.log
                if h == host and (opcode is None or f.bth.opcode == opcode)]


def rig(cfg: RoceConfig | None = None, *, topology: dict[str, Any] | None = None,
        rule: Rule | None = None, sink_bytes: int = 1 << 22, seed: int = 1,
        trace_rates: bool = False) -> Rig:
    """Hosts of ``topology`` (default two hosts back to back) running RoCE end points."""
    net = build(Network(seed=seed), topology or {"kind": "back_to_back"})
    r = Rig(net, [])

    def make(ctx: HostContext) -> Filtered:
        def deliver(*args: Any, host: int = ctx.index) -> None:
            r.delivered.append((host, *args))  # (host, peer_ip, qpn, kind, psn, va, n, last)

        ep = RoceEndpoint(ctx, cfg or RoceConfig(), sink_bytes=sink_bytes,
                          trace_rates=trace_rates, on_deliver=deliver)
        r.eps.append(ep)
        return Filtered(ep, ctx.index, rule, r.log)

    net.attach(make)
    return r
