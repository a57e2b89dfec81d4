"""``uet serve``: the built-in end point on a real UDP socket, as a responder.

A :class:`Responder` runs one :class:`~uet.conformance.driver.FepDriver` (a FabricEndpoint
with the well-known setup) under the real clock: datagrams received on ``(ip, port)`` go in
with their source address, source port (the EV) and TOS byte; what the end point sends
leaves from a socket bound to ``(ip, ev)`` (one per EV; beyond ``max_ev_sockets`` the least
recently used one is closed, so the EV is never lost; an EV whose port cannot be bound
leaves from the listening socket: counted as ``ev_fallback``) towards ``(dst, port)`` with
the frame's DSCP/ECN in the TOS byte. Timers run at the end point's ``next_deadline``.

This is how the conformance suite reaches the built-in end point across processes, and how
other implementations can test against ours.
"""

from __future__ import annotations

import math
import socket as _socket
from collections import Counter, OrderedDict
from typing import Any

import trio

from uet.wire.constants import UET_UDP_PORT

from .driver import FepDriver
from .setup import DutSetup
from .udp_io import ANCILLARY, RCVBUF, enable_tos, family_of, tos_cmsg, tos_from

PS_PER_S = 10**12


class Responder:
    """One end point serving on ``(ip, port)``; use as ``async with Responder(...) as r``."""

    def __init__(self, setup: DutSetup, ip: str, port: int = UET_UDP_PORT, *,
                 max_ev_sockets: int = 256, driver: FepDriver | None = None) -> None:
        self.setup = setup
        self.ip = ip
        self.port = port
        self.family = family_of(ip)
        self.driver = driver or FepDriver(setup, ip)
        self.max_ev_sockets = max_ev_sockets
        self.counters: Counter[str] = Counter()
        self._rx: Any = None
        self._ev_socks: OrderedDict[int, Any] = OrderedDict()
        self._bad_evs: set[int] = set()
        self._kick = trio.Event()
        self._t0 = 0.0
        self._nursery_cm: Any = None
        self._nursery: trio.Nursery | None = None

    @property
    def now(self) -> int:
        """Picoseconds since the responder started (real clock)."""
        return int((trio.current_time() - self._t0) * PS_PER_S)

    async def __aenter__(self) -> Responder:
        rx = trio.socket.socket(self.family, _socket.SOCK_DGRAM)
        rx.setsockopt(_socket.SOL_SOCKET, _socket.SO_RCVBUF, RCVBUF)
        enable_tos(rx, self.family)
        await rx.bind((self.ip, self.port))
        self._rx = rx
        self._t0 = trio.current_time()
        self._nursery_cm = trio.open_nursery()
        self._nursery = await self._nursery_cm.__aenter__()
        self._nursery.start_soon(self._rx_loop)
        self._nursery.start_soon(self._timer_loop)
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        self._nursery.cancel_scope.cancel()
        try:
            return await self._nursery_cm.__aexit__(*exc)
        finally:
            self._rx.close()
            for s in self._ev_socks.values():
                s.close()

    async def _sock_for(self, ev: int) -> Any:
        socks = self._ev_socks
        s = socks.get(ev)
        if s is not None:
            socks.move_to_end(ev)
            return s
        if ev in self._bad_evs or ev == self.port:
            self.counters["ev_fallback"] += 1
            return self._rx
        if len(socks) >= self.max_ev_sockets:  # least recently used EV gives way
            _old, old_sock = socks.popitem(last=False)
            old_sock.close()
            self.counters["ev_socket_recycled"] += 1
        s = trio.socket.socket(self.family, _socket.SOCK_DGRAM)
        try:
            await s.bind((self.ip, ev))
        except OSError:
            s.close()
            self._bad_evs.add(ev)
            self.counters["ev_fallback"] += 1
            return self._rx
        self._ev_socks[ev] = s
        return s

    async def _flush(self) -> None:
        for dg in self.driver.datagrams_out(self.now):
            sock = await self._sock_for(dg.ev)
            try:
                await sock.sendmsg([dg.payload], tos_cmsg(self.family, dg.tos), 0,
                                   (dg.dst_ip, self.port))
            except OSError:
                self.counters["tx_error"] += 1
                continue
            self.counters["tx_datagrams"] += 1
        self._kick.set()

    async def _rx_loop(self) -> None:
        while True:
            data, anc, _flags, addr = await self._rx.recvmsg(65536, ANCILLARY)
            self.counters["rx_datagrams"] += 1
            self.driver.datagram_in(self.now, data, addr[0], addr[1], tos_from(anc))
            await self._flush()

    async def _timer_loop(self) -> None:
        driver = self.driver
        while True:
            d = driver.next_deadline()
            self._kick = trio.Event()
            at = math.inf if d is None else self._t0 + d / PS_PER_S
            with trio.move_on_at(at):
                await self._kick.wait()
            d = driver.next_deadline()
            now = self.now
            if d is not None and d <= now:
                driver.handle_timer(now)
                self.counters["timers"] += 1
                await self._flush()

    def stats(self) -> dict[str, int]:
        out = {f"udp.{k}": v for k, v in self.counters.items()}
        out.update({f"driver.{k}": v for k, v in self.driver.counters.items()})
        out.update(self.driver.ep.stats)
        return out


async def serve(setup: DutSetup, ip: str, port: int, duration_s: float | None,
                announce: Any = print) -> dict[str, int]:
    """Serve until ``duration_s`` elapsed (None: until cancelled); returns the counters."""
    async with Responder(setup, ip, port) as r:
        announce(f"ready udp:{ip}:{port}" if ":" not in ip else f"ready udp:[{ip}]:{port}")
        import signal

        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals, \
                trio.move_on_after(math.inf if duration_s is None else duration_s):
            async for _sig in signals:
                break
        stats = r.stats()
    return stats
