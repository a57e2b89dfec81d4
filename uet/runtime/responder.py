"""``uet serve``: the built-in end point on a real UDP socket, as a responder.

A :class:`Responder` runs one :class:`~uet.conformance.driver.FepDriver` (a FabricEndpoint
with the well-known setup) under the real clock: datagrams received on ``(ip, port)`` go in
with their source address, source port (the EV) and TOS byte; what the end point sends
leaves from a socket bound to ``(ip, ev)`` (one per EV; beyond ``max_ev_sockets`` the least
recently used one is closed, so the EV is never lost; an EV whose port cannot be bound
leaves from the listening socket: counted as ``ev_fallback``) towards ``(dst, port)`` with
the frame's DSCP/ECN in the TOS byte. Timers run at the end point's ``next_deadline``.
Sockets and loop are live mode's (:mod:`uet.runtime.sockets`, :mod:`uet.runtime.udp`).

This is how the conformance suite reaches the built-in end point across processes, and how
other implementations can test against ours.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import trio

from uet.conformance.driver import FepDriver
from uet.conformance.setup import DutSetup
from uet.runtime.udp import DatagramLoop
from uet.wire.constants import UET_UDP_PORT


class Responder:
    """One end point serving on ``(ip, port)``; use as ``async with Responder(...) as r``.

    The sockets and the real-clock loop are live mode's
    (:class:`uet.runtime.udp.DatagramLoop` on :class:`uet.runtime.sockets.EvSocketPool`);
    the driver is the conformance suite's :class:`FepDriver`."""

    def __init__(self, setup: DutSetup, ip: str, port: int = UET_UDP_PORT, *,
                 max_ev_sockets: int = 256, driver: FepDriver | None = None) -> None:
        self.setup = setup
        self.ip = ip
        self.port = port
        self.driver = driver or FepDriver(setup, ip)
        self.counters: Counter[str] = Counter()
        self.loop = DatagramLoop(self.driver, ip, port, max_ev_sockets=max_ev_sockets,
                                 counters=self.counters)

    @property
    def now(self) -> int:
        """Picoseconds since the responder started (real clock)."""
        return self.loop.now

    async def __aenter__(self) -> Responder:
        await self.loop.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        return await self.loop.__aexit__(*exc)

    def stats(self) -> dict[str, int]:
        out = {f"udp.{k}": v for k, v in self.counters.items()}
        out.update({f"driver.{k}": v for k, v in self.driver.counters.items()})
        out.update(self.driver.ep.stats)
        return out


async def serve(setup: DutSetup, ip: str, port: int, duration_s: float | None,
                announce: Any = print, log: Any = None, tss: Any = None) -> dict[str, int]:
    """Serve until ``duration_s`` elapsed (None: until cancelled); returns the counters.
    ``log(now, kind, **fields)`` receives the end point's structured events; ``tss`` (a
    :class:`uet.tss.TssConfig` or its dict) secures the end point."""
    driver = FepDriver(setup, ip, log=log, tss=tss) if log is not None or tss is not None \
        else None
    async with Responder(setup, ip, port, driver=driver) as r:
        announce(f"ready udp:{ip}:{port}" if ":" not in ip else f"ready udp:[{ip}]:{port}")
        import signal

        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals, \
                trio.move_on_after(math.inf if duration_s is None else duration_s):
            async for _sig in signals:
                break
        stats = r.stats()
    return stats
