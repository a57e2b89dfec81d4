"""Two ``FabricEndpoint``s joined by a list of frames in flight (no fabric, no Trio).

Each frame an end point hands out (``pop_control`` / ``pop_data``, real bytes) goes into
``flight`` with an arrival time ``delay_ps`` later; ``run_until`` delivers frames and runs
timers in time order. ``drop(frame_bytes) -> bool`` can lose frames; ``tap`` records every
frame sent as ``(t, src_ip, bytes)``. ``decoded=True`` hands the receiver decoded
``Frame`` records (``receive_frame``) instead of bytes, the path live drivers use.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

from uet.endpoint.fep import FabricEndpoint
from uet.wire.codec import decode_frame

A_IP, B_IP = "10.0.0.1", "10.0.0.2"
A_MAC, B_MAC = "02:00:0a:00:00:01", "02:00:0a:00:00:02"


def pair(profile: str = "hpc", profile_b: str | None = None, **kw) -> tuple:
    """End points A and B that know each other's MAC and fep_cap."""
    peers = {A_IP: A_MAC, B_IP: B_MAC}
    a = FabricEndpoint(ip=A_IP, mac=A_MAC, profile=profile, peers=peers, seed=1, **kw)
    b = FabricEndpoint(ip=B_IP, mac=B_MAC, profile=profile_b or profile, peers=peers, seed=2,
                       **kw)
    a.ses.initiator.set_peer_cap(B_IP, b.profile.fep_cap)
    b.ses.initiator.set_peer_cap(A_IP, a.profile.fep_cap)
    return a, b


class Wire:
    """Moves frames between two end points in time order."""

    def __init__(self, a: FabricEndpoint, b: FabricEndpoint, *, delay_ps: int = 1_000_000,
                 drop: Callable[[bytes], bool] | None = None, decoded: bool = False) -> None:
        self.eps = {a.ip: a, b.ip: b}
        self.other = {a.ip: b, b.ip: a}
        self.delay_ps = delay_ps
        self.drop = drop
        self.decoded = decoded
        self.now = 0
        self.flight: list[tuple[int, int, str, bytes]] = []
        self.tap: list[tuple[int, str, bytes]] = []
        self.dropped = 0
        self._seq = 0

    def _drain(self) -> None:
        for ip, ep in self.eps.items():
            while True:
                data = ep.pop_control(self.now)
                if data is None:
                    data = ep.pop_data(self.now)
                if data is None:
                    break
                self.tap.append((self.now, ip, data))
                if self.drop is not None and self.drop(data):
                    self.dropped += 1
                    continue
                self._seq += 1
                heapq.heappush(self.flight, (self.now + self.delay_ps, self._seq,
                                             self.other[ip].ip, data))

    def step(self) -> bool:
        """Deliver the next frame or run the next timer; False when nothing is left."""
        self._drain()
        t_frame = self.flight[0][0] if self.flight else None
        deadlines = [(d, ep) for ep in self.eps.values() if (d := ep.next_deadline()) is not None]
        t_timer, ep_timer = min(deadlines, key=lambda x: x[0]) if deadlines else (None, None)
        if t_frame is None and t_timer is None:
            return False
        if t_timer is not None and (t_frame is None or t_timer < t_frame):
            self.now = max(self.now, t_timer)
            ep_timer.handle_timer(self.now)
            return True
        t, _, dst, data = heapq.heappop(self.flight)
        self.now = max(self.now, t)
        ep = self.eps[dst]
        if self.decoded:
            ep.receive_frame(self.now, decode_frame(data, udp_port=None))
        else:
            ep.receive(self.now, data)
        return True

    def run_until(self, pred: Callable[[], bool], limit_ps: int = 10**12,
                  max_steps: int = 1_000_000) -> bool:
        """Run until ``pred()`` holds (True) or time, work or steps run out (False)."""
        for _ in range(max_steps):
            if pred():
                return True
            if self.now > limit_ps or not self.step():
                return pred()
        raise AssertionError(f"no progress after {max_steps} steps at t={self.now}")
