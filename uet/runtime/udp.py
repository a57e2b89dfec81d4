"""Live mode: the real end point on real UDP sockets, under the real clock.

:class:`UdpNode` runs one end point — by default the real :class:`uet.endpoint.fep.FabricEndpoint`
(SES + PDS + CMS) — on ``(ip, 4793)``: the UET bytes of what it sends (``encode_uet``: no
Ethernet, IP or UDP header, the kernel adds those) leave towards ``(dst_ip, 4793)`` from a
socket bound to ``(ip, ev)``, so the EV rides in the UDP source port, with the frame's
DSCP/ECN in the IP TOS byte; received datagrams are decoded (``decode_uet`` with the
sender's address, the source port as EV and the received TOS byte) and handed to the end
point. Sockets: :class:`uet.runtime.sockets.EvSocketPool`, shared with ``uet serve``.

``node.host`` is a :class:`LiveHost`: the operation API of the virtual fabric's
:class:`uet.runtime.host.Host` (``register``, ``write``, ``read``, ``send``, ``post_recv``,
``atomic`` ...) with timeouts in picoseconds of real time. Other end points with the
fabric's ``FrameEndpoint`` shape (e.g. the traffic end point) plug in with
``endpoint_factory``: their frames are cut after the UDP header and rebuilt on receipt.

Two processes: ``python -m uet.runtime.udp --ip 127.0.0.2`` serves (a sink region any
peer may WRITE and READ); ``python -m uet.runtime.udp --ip 127.0.0.3 --write 127.0.0.2
--bytes 65536`` writes a pattern there and reads it back. docs/fabric.md, "Live mode".
"""

from __future__ import annotations

import argparse
import json
import math
import random
import socket as _socket
import sys
import zlib
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple, Protocol

import trio

from uet.fabric.clock import MS, S
from uet.fabric.endpoint import EndpointFactory, FrameEndpoint, HostContext
from uet.fabric.eventlog import EventLog
from uet.fabric.qos import QosConfig
from uet.runtime.host import Host
from uet.runtime.sockets import EvSocketPool
from uet.wire.codec import (
    decode_uet,
    encode_frame,
    encode_uet,
    get_dscp_ecn,
    opens_state,
    peek_flow,
)
from uet.wire.constants import UET_DEFAULT_IP_PROTO, UET_UDP_PORT
from uet.wire.errors import DecodeError, EncodeError

__all__ = ["DatagramLoop", "LIVE_ENDPOINT_OPTIONS", "LiveHost", "UdpNode", "udp_payload"]

#: ``FabricEndpoint.factory`` options of live mode (``endpoint_options`` override them):
#: wall-clock RTTs through Python are milliseconds where the profiles expect microseconds,
#: so the RTO is fixed at 50 ms (a 100 us adaptive minimum would retransmit most packets
#: spuriously), an idle PDC closes after 100 ms (not 1 ms: back-to-back operations share
#: it) and congestion control is off (NSCC would read every RTT as congestion and slow
#: transfers down 1.5-2x; the adaptive RTO retransmitted 660 packets of 6 MiB, measured
#: on loopback); a 1 MiB sink region takes bulk WRITEs (``node.send``) and READs.
LIVE_ENDPOINT_OPTIONS: dict[str, Any] = {
    "sink_bytes": 1 << 20,
    "pds_overrides": {"rto_adaptive": False, "rto_ps": 50 * MS, "close_idle_ps": 100 * MS},
    "cms_overrides": {"algorithm": "none"},
}


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


class Outgoing(NamedTuple):
    """One datagram to send: destination, EV (source port), TOS byte, UET bytes."""

    dst_ip: str
    ev: int
    tos: int
    payload: bytes


class DatagramDriver(Protocol):
    """What :class:`DatagramLoop` drives (sans-IO, time in ps): UDP payloads in and out."""

    def datagram_in(self, now: int, payload: bytes, src_ip: str, ev: int,
                    tos: int = 0) -> Any: ...

    def datagrams_out(self, now: int) -> Iterable[Any]: ...

    def next_deadline(self) -> int | None: ...

    def handle_timer(self, now: int) -> None: ...


class DatagramLoop:
    """A :class:`DatagramDriver` on an :class:`EvSocketPool`, under the real clock.

    One task runs the loop in ticks. Each tick

    1. reads every datagram already queued in the kernel (up to ``batch``, without
       waiting);
    2. hands the driver the ones of state it already has first (ACKs, NACKs, requests and
       control packets of established PDCs: :func:`uet.wire.codec.opens_state` is False),
       then at most ``open_budget`` of the ones that would open new state (SYNs, RUDI /
       UUD requests, undecodable bytes); the rest wait in a backlog of at most
       ``backlog_limit`` datagrams, beyond which new ones are dropped (``rx_shed``);
    3. runs the driver's timers due by then (``timers``), after the datagrams, so an idle
       or close timer never fires while the packet that proves the peer alive waits in the
       socket;
    4. sends everything the driver has to send (waiting only when the kernel has no room).

    It then waits for a datagram, the driver's next deadline or :meth:`poke` (after an
    application call), unless a backlog remains (then it yields to other tasks and ticks
    again). So a burst of thousands of SYNs costs an established peer at most one tick's
    budget of waiting, and every tick's work is bounded. ``now`` is picoseconds since the
    loop started. Use as ``async with DatagramLoop(driver, ip) as loop``.
    """

    def __init__(self, driver: DatagramDriver, ip: str, port: int = UET_UDP_PORT, *,
                 max_ev_sockets: int = 256, counters: Counter[str] | None = None,
                 batch: int = 4096, open_budget: int = 64,
                 backlog_limit: int = 8192, pool: Any = None) -> None:
        if batch < 1 or open_budget < 1 or backlog_limit < 0:
            raise ValueError("DatagramLoop: batch and open_budget must be >= 1, "
                             "backlog_limit >= 0")
        self.driver = driver
        self.counters: Counter[str] = counters if counters is not None else Counter()
        #: the sockets: UDP with one socket per EV (:class:`EvSocketPool`), or ``pool``
        #: (native IP: :class:`uet.runtime.rawip.RawIpPool`)
        self.pool = pool if pool is not None else EvSocketPool(
            ip, port, max_ev_sockets=max_ev_sockets, counters=self.counters)
        self.batch = batch
        self.open_budget = open_budget
        self.backlog_limit = backlog_limit
        self._backlog: deque[tuple[bytes, str, int, int]] = deque()
        self._t0 = 0.0
        self._scope: trio.CancelScope | None = None
        self._poked = False
        self._waiters: list[tuple[Callable[[], bool], trio.Event]] = []
        self._nursery_cm: Any = None
        self._nursery: trio.Nursery | None = None

    @property
    def now(self) -> int:
        """Picoseconds since the loop started (real clock)."""
        return int((trio.current_time() - self._t0) * S)

    async def __aenter__(self) -> DatagramLoop:
        self.pool.open()
        self._t0 = trio.current_time()
        self._nursery_cm = trio.open_nursery()
        self._nursery = await self._nursery_cm.__aenter__()
        self._nursery.start_soon(self._run)
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        if exc[0] is None:
            await self.flush()  # what the last event produced (e.g. the ACK of a CLOSE)
        assert self._nursery is not None
        self._nursery.cancel_scope.cancel()
        try:
            return await self._nursery_cm.__aexit__(*exc)
        except BaseExceptionGroup as eg:
            if exc[1] is not None and len(eg.exceptions) == 1 and eg.exceptions[0] is exc[1]:
                return False
            raise
        finally:
            self.pool.close()

    def poke(self) -> None:
        """The driver changed (an application call): transmit, re-arm the timer, wake
        waiters whose condition now holds."""
        self._poked = True
        if self._scope is not None:
            self._scope.cancel()
        self._check_waiters()

    async def wait_until(self, pred: Callable[[], bool], timeout_ps: int | None = None) -> bool:
        """Wait until ``pred()`` holds (checked after every change); False on timeout."""
        if pred():
            return True
        ev = trio.Event()
        item = (pred, ev)
        self._waiters.append(item)
        try:
            with trio.move_on_after(math.inf if timeout_ps is None else timeout_ps / S):
                await ev.wait()
        finally:
            if item in self._waiters:
                self._waiters.remove(item)
        return pred()

    def _check_waiters(self) -> None:
        for pred, ev in list(self._waiters):
            if pred():
                ev.set()

    async def flush(self) -> None:
        """Send everything the driver has to send now."""
        pool = self.pool
        for dg in self.driver.datagrams_out(self.now):
            if pool.send_nowait(dg.payload, dg.dst_ip, dg.ev, dg.tos) is None:
                await pool.send(dg.payload, dg.dst_ip, dg.ev, dg.tos)

    def tick(self) -> None:
        """One tick without I/O waits: datagrams queued in the kernel (established state
        first, a bounded budget of new state), then the timers due (see the class)."""
        pool, driver, counters = self.pool, self.driver, self.counters
        backlog = self._backlog
        opening = []
        for _ in range(self.batch):
            dg = pool.receive_nowait()
            if dg is None:
                break
            if opens_state(dg[0]):
                opening.append(dg)
            else:
                driver.datagram_in(self.now, dg[0], dg[1], dg[2], dg[3])
        for dg in opening:
            if len(backlog) >= self.backlog_limit:
                counters["rx_shed"] += 1
            else:
                backlog.append(dg)
        for _ in range(min(self.open_budget, len(backlog))):
            dg = backlog.popleft()
            driver.datagram_in(self.now, dg[0], dg[1], dg[2], dg[3])
        d = driver.next_deadline()
        if d is not None:
            now = self.now
            if d <= now:
                driver.handle_timer(now)
                counters["timers"] += 1
        counters["ticks"] += 1

    async def _run(self) -> None:
        driver = self.driver
        while True:
            self.tick()
            await self.flush()
            self._check_waiters()
            if self._backlog or self._poked:
                self._poked = False
                await trio.sleep(0)  # let the application run between busy ticks
                continue
            d = driver.next_deadline()
            at = math.inf if d is None else self._t0 + d / S
            with trio.CancelScope(deadline=at) as scope:
                self._scope = scope
                await trio.lowlevel.wait_readable(self.pool.rx_socket)
            self._scope = None


class EndpointDatagrams:
    """A fabric end point as a :class:`DatagramDriver` (UDP payloads in and out).

    End points with ``receive_frame`` / ``poll_frame`` (``FabricEndpoint``) exchange
    records: no Ethernet/IP/UDP bytes are built. Others (the ``FrameEndpoint`` shape) get
    whole frames rebuilt with ``encode_frame`` and give frames cut after the UDP header.
    """

    def __init__(self, ep: Any, ip: str, mac: str, port: int = UET_UDP_PORT,
                 counters: Counter[str] | None = None) -> None:
        self.ep = ep
        self.ip = ip
        self.mac = mac
        self.port = port
        self.v6 = ":" in ip
        self.counters: Counter[str] = counters if counters is not None else Counter()
        self.records = hasattr(ep, "receive_frame") and hasattr(ep, "poll_frame")
        #: a secured end point takes and gives UET bytes itself (its TSS opens and seals
        #: them); the others exchange records as before
        self.uet_bytes = getattr(ep, "tss", None) is not None

    def datagram_in(self, now: int, payload: bytes, src_ip: str, ev: int,
                    tos: int = 0) -> bool:
        """One received UDP payload; False (counted) when it does not decode."""
        if self.uet_bytes:
            ok = self.ep.receive_uet(now, payload, src_ip=src_ip, dst_ip=self.ip, ev=ev,
                                     dscp=tos >> 2, ecn=tos & 3, dst_mac=self.mac,
                                     udp_dport=self.port, udp_checksum=self.v6)
            if not ok:
                self.counters["rx_decode_errors"] += 1
            return ok
        try:
            frame = decode_uet(payload, src_ip=src_ip, dst_ip=self.ip, ev=ev, dscp=tos >> 2,
                               ecn=tos & 3, dst_mac=self.mac, udp_dport=self.port,
                               udp_checksum=self.v6)
            if not self.records:
                raw = encode_frame(frame)
        except (DecodeError, EncodeError) as exc:
            self.counters["rx_decode_errors"] += 1
            self.counters[f"rx_decode_error.{getattr(exc, 'header', 'frame')}"] += 1
            return False
        if self.records:
            self.ep.receive_frame(now, frame)
        else:
            self.ep.receive(now, raw)
        return True

    def datagrams_out(self, now: int) -> list[Outgoing]:
        """Everything the end point sends now, control class first."""
        out: list[Outgoing] = []
        ep = self.ep
        while True:
            if self.uet_bytes:
                got = ep.poll_uet(now)
                if got is None:
                    return out
                frame, data = got
                out.append(Outgoing(frame.dst_ip, frame.ev,
                                    (frame.dscp & 0x3F) << 2 | (frame.ecn & 3), data))
                continue
            if self.records:
                frame = ep.poll_frame(now)
                if frame is None:
                    return out
                try:
                    out.append(Outgoing(frame.dst_ip, frame.ev,
                                        (frame.dscp & 0x3F) << 2 | (frame.ecn & 3),
                                        encode_uet(frame)))
                except EncodeError:
                    self.counters["tx_encode_errors"] += 1
                continue
            data = ep.pop_control(now)
            if data is None:
                data = ep.pop_data(now)
            if data is None:
                return out
            try:
                dst, ev, payload = udp_payload(data)
                dscp, ecn = get_dscp_ecn(data)
            except DecodeError:
                self.counters["tx_undeliverable"] += 1
                continue
            out.append(Outgoing(dst, ev, dscp << 2 | ecn, payload))

    def next_deadline(self) -> int | None:
        return self.ep.next_deadline()

    def handle_timer(self, now: int) -> None:
        self.ep.handle_timer(now)


class UdpNode:
    """One end point on ``(ip, port)`` under the real clock: ``async with UdpNode(...) as
    node``.

    By default the end point is a :class:`uet.endpoint.fep.FabricEndpoint` of ``profile`` (default
    ``"ai-base"``) built with :data:`LIVE_ENDPOINT_OPTIONS` updated by ``endpoint_options``
    (``sink_bytes``, ``pds_overrides``, ``cms_overrides``, ``job_id``, ``mode`` ...);
    ``endpoint_factory(ctx)`` replaces it. ``peers`` maps host indices to the IPs of other
    nodes (so operations may name a peer by index; this node is ``index``). ``node.host``
    is the operation API (:class:`LiveHost`), ``node.ep`` the end point, ``node.counters``
    the socket counters.

    ``seed`` (None: a fresh one per node, as a restarted NIC would pick) seeds the end
    point (start PSNs, PDC IDs, EVs) and, with the address, its SES initiator ID: a process
    restarted at the same address must not look like its previous incarnation, whose
    message IDs the peers still remember (they would drop the new messages as
    duplicates). ``linger_ps``: on a clean exit, wait up to this long until the end point's
    PDCs have closed (an initiator closes after ``close_idle_ps`` of idleness, then the CLOSE
    handshake; a target when its peer closes), so that no peer is left retrying a CLOSE
    to a node that is gone; 0 exits at once.
    """

    def __init__(self, endpoint_factory: EndpointFactory | None = None, *,
                 ip: str = "127.0.0.1", port: int = UET_UDP_PORT, profile: Any = None,
                 endpoint_options: Mapping[str, Any] | None = None,
                 mac: str = "02:00:7f:00:00:01", qos: QosConfig | None = None,
                 peers: Mapping[int, str] | None = None, index: int = 0,
                 max_ev_sockets: int = 256, eventlog: EventLog | None = None,
                 seed: int | None = None, rate_bps: int = 100 * 10**9,
                 linger_ps: int = 1 * S, encap: str = "udp",
                 ip_proto: int = UET_DEFAULT_IP_PROTO) -> None:
        try:
            _socket.inet_pton(_socket.AF_INET6 if ":" in ip else _socket.AF_INET, ip)
        except OSError:
            raise ValueError(f"ip={ip!r}: not an IPv4 or IPv6 address") from None
        if encap not in ("udp", "native-ip"):
            raise ValueError(f"encap={encap!r}: allowed udp, native-ip")
        if endpoint_factory is not None and (profile is not None or endpoint_options):
            raise ValueError("UdpNode: give either endpoint_factory or profile / "
                             "endpoint_options, not both")
        if seed is None:
            seed = random.SystemRandom().getrandbits(32)
        self.ip = ip
        self.port = port
        self.mac = mac
        self.index = index
        self.seed = seed
        self.linger_ps = linger_ps
        self.name = f"udp:{ip}"
        self.log = eventlog or EventLog()
        log = self.log
        self.peers: dict[int, str] = {index: ip, **{int(i): p for i, p in
                                                    (peers or {}).items() if i != index}}
        self._ip_index = {p: i for i, p in self.peers.items()}
        ctx = HostContext(index=index, name=self.name, ip=ip, mac=mac, rate_bps=rate_bps,
                          qos=qos or QosConfig(), seed=seed,
                          peers={i: (p, "02:ff:ff:ff:ff:ff") for i, p in self.peers.items()},
                          log=lambda now, event, **f: log.emit(now, event, **f))
        if endpoint_factory is None:
            from uet.endpoint.fep import FabricEndpoint

            opts = {**LIVE_ENDPOINT_OPTIONS,
                    "initiator_id": zlib.crc32(f"{ip}#{seed}".encode()),
                    **dict(endpoint_options or {})}
            for key in ("pds_overrides", "cms_overrides"):
                opts[key] = {**LIVE_ENDPOINT_OPTIONS[key], **dict(opts.get(key) or {})}
            endpoint_factory = FabricEndpoint.factory(profile=profile or "ai-base", **opts)
        self.ep: FrameEndpoint = endpoint_factory(ctx)
        self.counters: Counter[str] = Counter()
        self.driver = EndpointDatagrams(self.ep, ip, mac, port, self.counters)
        #: 'udp' (UDP port ``port``, the EV in the source port) or 'native-ip' (a raw IP
        #: socket of protocol ``ip_proto``, the EV in the entropy header; needs root)
        self.encap = encap
        pool = None
        if encap == "native-ip":
            from uet.runtime.rawip import RawIpPool

            pool = RawIpPool(ip, ip_proto, counters=self.counters)
        self.loop = DatagramLoop(self.driver, ip, port, max_ev_sockets=max_ev_sockets,
                                 counters=self.counters, pool=pool)
        self.host = LiveHost(self)

    # ---------------------------------------------------------------- lifecycle

    async def __aenter__(self) -> UdpNode:
        await self.loop.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        try:
            if exc[0] is None and self.linger_ps:
                await self.wait_until(lambda: not self.open_pdcs(), self.linger_ps)
            return await self.loop.__aexit__(*exc)
        finally:
            self.log.close()

    @property
    def now(self) -> int:
        """Picoseconds since the node started (real clock)."""
        return self.loop.now

    def open_pdcs(self) -> int:
        """PDCs of the end point not closed yet (0 for end points without a PDS)."""
        mgr = getattr(getattr(self.ep, "pds", None), "mgr", None)
        return len(mgr.open_pdcs()) if mgr is not None else 0

    @property
    def ev_ports(self) -> list[int]:
        """EVs that have a bound socket now."""
        return self.loop.pool.ev_ports

    # ---------------------------------------------------------------- acting

    def submit(self, fn: Callable[[Any, int], Any]) -> Any:
        """Call ``fn(endpoint, now)`` now, then let the node transmit; returns its result."""
        out = fn(self.ep, self.now)
        self.loop.poke()
        return out

    async def wait_until(self, pred: Callable[[], bool], timeout_ps: int | None = None) -> bool:
        """Wait (real time) until ``pred()`` holds; False after ``timeout_ps``."""
        return await self.loop.wait_until(pred, timeout_ps)

    async def sleep(self, dt_ps: int) -> None:
        """Sleep ``dt_ps`` picoseconds of real time."""
        await trio.sleep(dt_ps / S)

    def start_message(self, dst: Any, nbytes: int) -> Any:
        """Start a bulk message (end points with ``send_message``: with the real end point
        an RMA WRITE into the peer's sink region, which must hold ``nbytes``)."""
        dst_ip = self.host_ip(dst)
        return self.submit(lambda ep, now: ep.send_message(now, dst_ip, nbytes))

    async def send(self, dst: Any, nbytes: int, timeout_ps: int | None = None) -> Any:
        """Send a bulk message and wait for it; returns the message handle (``.done``,
        ``.fct_ps``)."""
        msg = self.start_message(dst, nbytes)
        await self.wait_until(lambda: msg.done, timeout_ps)
        return msg

    # ---------------------------------------------------------------- what Host asks

    def endpoint(self, index: int) -> Any:
        """The end point (``index`` must be this node's)."""
        if index != self.index:
            raise ValueError(f"{self.name} is host {self.index}; it has no end point {index}")
        return self.ep

    def host_ip(self, host: Any) -> str:
        """IP of a destination given as an IP, a peer index or a (Live)Host."""
        if isinstance(host, Host):
            return host.ip
        if isinstance(host, str):
            try:
                _socket.inet_pton(_socket.AF_INET6 if ":" in host else _socket.AF_INET, host)
            except OSError:
                raise ValueError(f"{host!r} is not an IP address") from None
            return host
        if isinstance(host, bool) or not isinstance(host, int):
            raise TypeError(f"a destination is an IP, a peer index or a Host, not "
                            f"{type(host).__name__}")
        ip = self.peers.get(host)
        if ip is None:
            raise ValueError(f"no peer {host}; peers: "
                             + ", ".join(f"{i}={p}" for i, p in sorted(self.peers.items())))
        return ip

    def host_index(self, ip: str | None) -> int | None:
        """Index of the peer with this IP (from ``peers``), or None."""
        return self._ip_index.get(ip) if ip is not None else None

    def __repr__(self) -> str:
        return f"<UdpNode {self.ip}:{self.port} {type(self.ep).__name__}>"


class LiveHost(Host):
    """The operation API of :class:`uet.runtime.host.Host` on a :class:`UdpNode`.

    Same methods and handles (``await node.host.write(dst, key, offset, data)``,
    ``read``, ``send``, ``post_recv``, ``atomic`` ...); destinations are IPs, peer indices
    or hosts; ``timeout_ps`` counts picoseconds of real time. Needs the real end point.
    """

    def __init__(self, node: UdpNode) -> None:  # noqa: D107 - no Fabric behind it
        self.fab = node  # what Host calls: submit via _submit, wait_until, now, host_ip ...
        self.node = node
        self.index = node.index
        self.name = node.name
        self.ip = node.ip
        self.timeout_ps: int | None = None

    def _submit(self, fn: Callable[[Any, int], Any]) -> Any:
        self.fep  # noqa: B018 - a clear TypeError before anything runs
        return self.node.submit(fn)

    def __repr__(self) -> str:
        return f"<LiveHost {self.name}>"


# ---------------------------------------------------------------------- command line


def _pattern(n: int, seed: int | None) -> bytes:
    return random.Random(seed or 0).randbytes(n)


async def _run(args: argparse.Namespace) -> int:
    from uet.endpoint.fep import SINK_INDEX, SINK_KEY

    opts: dict[str, Any] = {"sink_bytes": max(args.sink_bytes, args.bytes)}
    if args.tss:
        opts["tss"] = {"key_file": args.tss}
    async with UdpNode(ip=args.ip, port=args.port, profile=args.profile,
                       endpoint_options=opts, seed=args.seed, encap=args.encap,
                       ip_proto=args.ip_proto) as node:
        if args.encap == "native-ip":
            print(f"ready ip:{args.ip} proto {args.ip_proto}", flush=True)
        else:
            print(f"ready udp:{args.ip}:{args.port}" if ":" not in args.ip
                  else f"ready udp:[{args.ip}]:{args.port}", flush=True)
        rc = 0
        if args.write:
            host = node.host
            data = _pattern(args.bytes, args.seed)
            t0 = node.now
            w = await host.write(args.write, SINK_KEY, 0, data, index=SINK_INDEX,
                                 timeout_ps=int(args.timeout * S))
            t1 = node.now
            r = await host.read(args.write, SINK_KEY, 0, args.bytes, index=SINK_INDEX,
                                timeout_ps=int(args.timeout * S))
            t2 = node.now
            same = r.data == data
            rc = 0 if same else 1
            report = {"write_bytes": w.modified_length, "write_ms": (t1 - t0) / MS,
                      "read_ms": (t2 - t1) / MS, "equal": same}
            print(json.dumps(report) if args.json else
                  f"wrote {args.bytes} B to {args.write} in {report['write_ms']:.1f} ms, "
                  f"read back in {report['read_ms']:.1f} ms: "
                  f"{'equal' if same else 'DIFFERENT'}", flush=True)
        else:
            import signal

            with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals, \
                    trio.move_on_after(math.inf if args.duration is None else args.duration):
                async for _sig in signals:
                    break
        stats = {**{f"udp.{k}": v for k, v in node.counters.items()},
                 **getattr(node.ep, "stats", {})}
        print(json.dumps({"counters": stats}) if args.json else
              "counters: " + ", ".join(f"{k}={v}" for k, v in sorted(stats.items())),
              flush=True)
    return rc


def main(argv: list[str] | None = None) -> int:
    """Run the real end point on UDP: serve a sink region, or WRITE then READ a peer's."""
    ap = argparse.ArgumentParser(prog="python -m uet.runtime.udp", description=main.__doc__)
    ap.add_argument("--ip", default="127.0.0.2", help="address to bind (default 127.0.0.2)")
    ap.add_argument("--port", type=int, default=UET_UDP_PORT,
                    help=f"UDP port, ours and the peers' (default {UET_UDP_PORT})")
    ap.add_argument("--profile", default="ai-base", help="ai-base, ai-full, hpc or a file")
    ap.add_argument("--sink-bytes", type=int, default=1 << 20, metavar="N",
                    help="size of the sink region peers may WRITE and READ (default 1 MiB)")
    ap.add_argument("--duration", type=float, default=None, metavar="S",
                    help="serve S seconds (default: until interrupted)")
    ap.add_argument("--write", default=None, metavar="IP",
                    help="client: WRITE --bytes into the sink of the node at IP, READ them "
                         "back and compare (exit 1 if they differ)")
    ap.add_argument("--bytes", type=int, default=65536, metavar="N",
                    help="bytes to WRITE and READ with --write (default 65536)")
    ap.add_argument("--timeout", type=float, default=10.0, metavar="S",
                    help="seconds each operation may take with --write (default 10)")
    ap.add_argument("--seed", type=int, default=None,
                    help="seed of the end point (default: a fresh one per run)")
    ap.add_argument("--tss", default=None, metavar="KEYFILE",
                    help="secure the node's job with the secure domains of this key file "
                         "(docs/tss.md); peers without the key get nothing through")
    ap.add_argument("--json", action="store_true", help="results and counters as JSON")
    ap.add_argument("--encap", choices=("udp", "native-ip"), default="udp",
                    help="udp (default) or native-ip: UET right after the IP header, the "
                         "EV in the 4-byte entropy header, from a raw IP socket (needs root)")
    ap.add_argument("--ip-proto", type=int, default=UET_DEFAULT_IP_PROTO, metavar="N",
                    help=f"IP protocol of native-ip (default {UET_DEFAULT_IP_PROTO})")
    args = ap.parse_args(argv)
    if not 0 <= args.ip_proto <= 255 or args.ip_proto in (6, 17):
        ap.error(f"--ip-proto {args.ip_proto}: allowed 0..255 except 6 (TCP) and 17 (UDP)")
    from uet.ses.errors import SesError

    try:
        return trio.run(_run, args)
    except (ValueError, TimeoutError, SesError) as exc:  # TimeoutError before OSError
        print(f"python -m uet.runtime.udp: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"python -m uet.runtime.udp: cannot use {args.ip}:{args.port}: "
              f"{exc.strerror or exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
