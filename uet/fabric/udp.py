"""Live mode: an end point on real UDP sockets, under the real clock.

The same sans-IO :class:`~uet.fabric.endpoint.FrameEndpoint` runs unchanged: frames it
transmits are cut after the UDP header and the UET bytes (``encode_uet`` form) are sent to
``(dst_ip, 4793)``; datagrams received on ``(ip, 4793)`` are rebuilt into whole frames
(``decode_uet`` + ``encode_frame``, with the sender's address, our address and the
datagram's source port as EV) and handed to ``receive``.

EV choice: the EV must be the UDP source port, which a bound socket fixes. A node therefore
keeps a pool of sockets, one bound to ``(ip, ev)`` per EV it uses (up to
``max_ev_sockets``, default 256). When the pool is full or a port cannot be bound, the
datagram goes out from the 4793 socket (counted as ``ev_fallback``): the EV is then lost on
the wire. DSCP/ECN of received datagrams are not read (the rebuilt frame has DSCP 0,
Not-ECT).

Run a responder from the shell: ``python -m uet.fabric.udp --ip 127.0.0.2 --duration 10``.
"""

from __future__ import annotations

import argparse
import math
import socket as _socket
import sys
from collections import Counter
from collections.abc import Callable
from typing import Any

import trio

from uet.fabric.clock import MS, S
from uet.fabric.endpoint import EndpointFactory, FrameEndpoint, HostContext
from uet.fabric.eventlog import EventLog
from uet.fabric.qos import QosConfig
from uet.wire.codec import decode_uet, encode_frame, peek_flow
from uet.wire.constants import UET_UDP_PORT
from uet.wire.errors import DecodeError

_RCVBUF = 8 << 20


def udp_payload(data: bytes) -> tuple[str, int, bytes]:
    """``(dst_ip, ev, uet_bytes)`` of a whole UET-over-UDP frame."""
    src, dst, proto, sport, dport = peek_flow(data)
    if proto != 17:
        raise DecodeError("ip", 14, f"protocol {proto} is not UDP (live mode needs UDP)")
    if len(dst) == 4:
        l4 = 14 + (data[14] & 0xF) * 4
        end = 14 + int.from_bytes(data[16:18], "big")
    else:
        l4 = 54
        end = 54 + int.from_bytes(data[18:20], "big")
    return _socket.inet_ntop(_socket.AF_INET6 if len(dst) == 16 else _socket.AF_INET, dst), \
        sport, bytes(data[l4 + 8:end])


class UdpNode:
    """One end point bound to ``(ip, port)``; use as ``async with UdpNode(...) as node``."""

    def __init__(self, endpoint_factory: EndpointFactory | None = None, *,
                 ip: str = "127.0.0.1", port: int = UET_UDP_PORT,
                 mac: str = "02:00:7f:00:00:01", qos: QosConfig | None = None,
                 peers: dict[int, str] | None = None, max_ev_sockets: int = 256,
                 eventlog: EventLog | None = None, seed: int = 0) -> None:
        self.ip = ip
        self.port = port
        self.mac = mac
        self.family = _socket.AF_INET6 if ":" in ip else _socket.AF_INET
        self.log = eventlog or EventLog()
        qos = qos or QosConfig()
        log = self.log
        ctx = HostContext(index=0, name=f"udp:{ip}", ip=ip, mac=mac, rate_bps=100 * 10**9,
                          qos=qos, seed=seed,
                          peers={i: (p, "02:ff:ff:ff:ff:ff") for i, p in (peers or {}).items()},
                          log=lambda now, event, **f: log.emit(now, event, **f))
        if endpoint_factory is None:
            from uet.fabric.traffic_endpoint import factory

            endpoint_factory = factory(evs=8, rto_ps=50 * MS)
        self.ep: FrameEndpoint = endpoint_factory(ctx)
        self.max_ev_sockets = max_ev_sockets
        self.counters: Counter[str] = Counter()
        self._rx: Any = None
        self._ev_socks: dict[int, Any] = {}
        self._bad_evs: set[int] = set()
        self._kick = trio.Event()
        self._waiters: list[tuple[Callable[[], bool], trio.Event]] = []
        self._t0 = 0.0
        self._nursery_cm: Any = None
        self._nursery: trio.Nursery | None = None

    # ---------------------------------------------------------------- lifecycle

    async def __aenter__(self) -> UdpNode:
        self._rx = trio.socket.socket(self.family, _socket.SOCK_DGRAM)
        self._rx.setsockopt(_socket.SOL_SOCKET, _socket.SO_RCVBUF, _RCVBUF)
        await self._rx.bind((self.ip, self.port))
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
        except BaseExceptionGroup as eg:
            if exc[1] is not None and len(eg.exceptions) == 1 and eg.exceptions[0] is exc[1]:
                return False
            raise
        finally:
            self._rx.close()
            for s in self._ev_socks.values():
                s.close()
            self.log.close()

    @property
    def now(self) -> int:
        """Picoseconds since the node started (real clock)."""
        return int((trio.current_time() - self._t0) * S)

    # ---------------------------------------------------------------- acting

    async def submit(self, fn: Callable[[Any, int], Any]) -> Any:
        """Call ``fn(endpoint, now)`` and transmit what it produced."""
        out = fn(self.ep, self.now)
        await self._changed()
        return out

    async def send(self, dst: str, nbytes: int, timeout_s: float = 10.0) -> Any:
        """Send a message (end points with ``send_message``) and wait for completion."""
        msg = await self.submit(lambda ep, now: ep.send_message(now, dst, nbytes))
        await self.wait_until(lambda: msg.done, timeout_s)
        return msg

    async def wait_until(self, pred: Callable[[], bool], timeout_s: float | None = None) -> bool:
        """Wait (real time) until ``pred()`` holds; False on timeout."""
        if pred():
            return True
        ev = trio.Event()
        item = (pred, ev)
        self._waiters.append(item)
        try:
            with trio.move_on_after(math.inf if timeout_s is None else timeout_s):
                await ev.wait()
        finally:
            if item in self._waiters:
                self._waiters.remove(item)
        return pred()

    # ---------------------------------------------------------------- internals

    async def _changed(self) -> None:
        await self._flush()
        self._kick.set()
        for pred, ev in list(self._waiters):
            if pred():
                ev.set()

    async def _sock_for(self, ev: int) -> Any:
        s = self._ev_socks.get(ev)
        if s is not None:
            return s
        if ev in self._bad_evs or len(self._ev_socks) >= self.max_ev_sockets or ev == self.port:
            self.counters["ev_fallback"] += 1
            return self._rx
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
        ep = self.ep
        while True:
            now = self.now
            data = ep.pop_control(now)
            if data is None:
                data = ep.pop_data(now)
            if data is None:
                return
            try:
                dst, ev, payload = udp_payload(data)
            except DecodeError:
                self.counters["tx_undeliverable"] += 1
                continue
            sock = await self._sock_for(ev)
            try:
                await sock.sendto(payload, (dst, self.port))
            except OSError:
                self.counters["tx_error"] += 1
                continue
            self.counters["tx_datagrams"] += 1
            self.counters["tx_bytes"] += len(payload)

    async def _rx_loop(self) -> None:
        while True:
            data, addr = await self._rx.recvfrom(65536)
            self.counters["rx_datagrams"] += 1
            try:
                frame = decode_uet(data, src_ip=addr[0], dst_ip=self.ip, ev=addr[1],
                                   dst_mac=self.mac, udp_dport=self.port,
                                   udp_checksum=self.family == _socket.AF_INET6)
                raw = encode_frame(frame)
            except DecodeError:
                self.counters["rx_decode_errors"] += 1
                continue
            self.ep.receive(self.now, raw)
            await self._changed()

    async def _timer_loop(self) -> None:
        while True:
            d = self.ep.next_deadline()
            self._kick = trio.Event()
            at = math.inf if d is None else self._t0 + d / S
            with trio.move_on_at(at):
                await self._kick.wait()
            d = self.ep.next_deadline()
            now = self.now
            if d is not None and d <= now:
                self.ep.handle_timer(now)
                self.counters["timers"] += 1
                await self._changed()


async def _serve(ip: str, port: int, duration: float) -> None:
    async with UdpNode(ip=ip, port=port) as node:
        print(f"ready {ip}:{port}", flush=True)
        await trio.sleep(duration)
        print(dict(node.counters), getattr(node.ep, "stats", {}), flush=True)


def main(argv: list[str] | None = None) -> int:
    """Run a UDP responder with the fabric's traffic end point."""
    ap = argparse.ArgumentParser(prog="python -m uet.fabric.udp", description=main.__doc__)
    ap.add_argument("--ip", default="127.0.0.2")
    ap.add_argument("--port", type=int, default=UET_UDP_PORT)
    ap.add_argument("--duration", type=float, default=10.0, help="seconds to serve")
    args = ap.parse_args(argv)
    trio.run(_serve, args.ip, args.port, args.duration)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
