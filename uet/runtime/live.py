"""The live fabric: NICs and switches as Trio tasks exchanging real frames on real sockets.

The same models as the virtual fabric (:mod:`uet.fabric`: ports, queues, ECN, trimming,
ECMP, PFC accounting, impairments, serialisation) driven in real time instead of virtual
time. The network is built with one event core per node
(``Network(loop_per_node=True)``); each NIC and each switch is one Trio task (with a
small nursery: one reader per port) that owns its ports' sockets and runs its own core
when Trio's clock reaches its next deadline or a frame arrives. Every emulated cable is a
pair of real sockets (:mod:`uet.runtime.wire`): VXLAN over UDP between two loopback
addresses (``backend="udp"``, tshark on ``lo`` shows Ethernet / IP / UDP 4793 / UET
inside), or a veth pair in a network namespace the fabric creates (``backend="veth"``,
root). The cable's direction is modelled by its transmitter: the port serialises at the
link rate (rate shaping by the model: a frame starts when the previous one's last bit
left, in emulated time, never by sleeping per packet), the channel applies its
impairments and, a propagation delay later, the frame (with its FCS) goes on the socket;
the receiving port checks the FCS and forwards.

**Time dilation.** Python cannot forward 3 million frames per second, so emulated time
runs ``dilation`` times slower than real time: emulated ps = real ps / dilation, for
every node, the end points included. A 100 Gb/s link at ``dilation=1000`` carries
100 Mb/s of real bytes, its 1 us delay lasts 1 ms. The end points see emulated time, so
the profiles' RTOs and congestion control work as in virtual time. ``dilation=None``
picks one from a short calibration of this machine (:func:`calibrate`); the figure used
is in ``counters()["live"]`` and in results.

What differs from virtual time: runs are not reproducible (the OS schedules the tasks),
and a node that falls behind real time runs its events late (``lag`` counters: how late,
in emulated ps); the benchmark (``benchmarks/live_fabric.py``) finds the highest rate this
machine sustains without falling behind.
"""

from __future__ import annotations

import errno
import ipaddress
import math
import os
import time
import zlib
from collections import Counter
from collections.abc import Callable, Mapping
from heapq import heappop, heappush
from itertools import count
from pathlib import Path
from typing import Any

import trio

from uet.errors import LocalError
from uet.fabric.clock import S
from uet.fabric.endpoint import EndpointFactory
from uet.fabric.eventlog import EventLog
from uet.fabric.external import ExternalEndpoint, external_factory, parse_external
from uet.fabric.network import Network
from uet.fabric.port import Port
from uet.fabric.qos import QosConfig
from uet.fabric.scheduler import EventLoop
from uet.fabric.topology import build
from uet.runtime.fabric import Fabric
from uet.runtime.wire import LiveError, Netns, PacketWire, UdpWire, check_fcs, with_fcs

__all__ = ["LiveFabric", "LiveError", "ControlLoop", "LiveClock", "live_network",
           "calibrate", "BACKENDS"]

BACKENDS = ("udp", "veth")
#: the frame size a calibration assumes (a full UET data frame)
FRAME_BYTES = 4150
#: share of one CPU the calibration plans to use (the rest: the OS, other processes, bursts)
TARGET_LOAD = 0.5
_ns_counter = count()


class LiveClock:
    """Emulated time from Trio's clock: ``now()`` = real ps since ``start`` / dilation."""

    def __init__(self, dilation: float) -> None:
        if not dilation > 0 or math.isinf(dilation):
            raise ValueError(f"dilation={dilation!r}: must be a number > 0 (1 = real time)")
        self.dilation = float(dilation)
        self._per_s = S / self.dilation
        self.t0: float | None = None

    def start(self) -> None:
        self.t0 = trio.current_time()

    def now(self) -> int:
        """Emulated picoseconds since start."""
        return int((trio.current_time() - self.t0) * self._per_s) if self.t0 is not None \
            else 0

    def real_at(self, t_ps: int | None) -> float:
        """Trio deadline of emulated time ``t_ps`` (inf for None)."""
        if t_ps is None or self.t0 is None:
            return math.inf
        return self.t0 + t_ps / self._per_s


class ControlLoop:
    """The fabric-wide core of a live fabric (users' timers, scheduled link changes, the
    runner's flow starts): :class:`~uet.fabric.scheduler.EventLoop`'s interface, run by
    the control task when real time reaches an event. ``now`` is the time of the batch
    being run (the live clock when it started), so what an event does is stamped with
    the time it really happened."""

    def __init__(self) -> None:
        self.now = 0
        self.events = 0
        self._heap: list[tuple[int, int, Callable[[Any], None], Any]] = []
        self._seq = count()
        #: called after every push (the control task re-arms its deadline)
        self.on_push: Callable[[], None] | None = None

    def push(self, t: int, fn: Callable[[Any], None], arg: Any) -> None:
        heappush(self._heap, (t, next(self._seq), fn, arg))
        if self.on_push is not None:
            self.on_push()

    def at(self, t: int, fn: Callable[[Any], None], arg: Any = None) -> None:
        self.push(max(t, self.now), fn, arg)

    def after(self, dt: int, fn: Callable[[Any], None], arg: Any = None) -> None:
        self.push(self.now + max(dt, 0), fn, arg)

    def pusher(self) -> Callable[[int, Callable[[Any], None], Any], None]:
        return self.push

    def next_time(self) -> int | None:
        return self._heap[0][0] if self._heap else None

    def __len__(self) -> int:
        return len(self._heap)

    def stop(self) -> None:
        """Nothing to stop: events run in real time."""

    def run(self, until: int | None = None) -> int:
        """Run the events due at ``until`` (the current live time)."""
        heap = self._heap
        if until is not None and until > self.now:
            self.now = until
        n = 0
        while heap and (until is None or heap[0][0] <= until):
            _t, _, fn, arg = heappop(heap)
            fn(arg)
            n += 1
        self.events += n
        return n


def live_network(*, seed: int = 0, qos: QosConfig | None = None, log: EventLog | None = None,
                 ecmp_seed: int | None = None) -> Network:
    """An empty :class:`Network` for a live fabric: one core per node, the fabric-wide
    events on a :class:`ControlLoop`; fill it with :func:`uet.fabric.topology.build`."""
    net = Network(seed=seed, qos=qos, log=log, ecmp_seed=ecmp_seed, loop_per_node=True)
    net.loop = ControlLoop()  # type: ignore[assignment]
    return net


class WireEnd:
    """What a live channel delivers to: the wire towards its far end (``far``, the port
    there, is what routing sees). Each frame sent is stamped with its emulated arrival
    time (``wire.stamps``: the sending core's time of the event that puts it on the
    socket), which the receiving node reads back, so frames are delivered at the time
    the model says they arrive even when a node is scheduled late; the stamp is the
    emulator's metadata about the frame, as a NIC's receive timestamp is, and travels in
    the process, not in the frame."""

    __slots__ = ("wire", "far", "loop")

    def __init__(self, wire: Any, far: Port, loop: Any) -> None:
        self.wire = wire
        self.far = far
        self.loop = loop

    def _send(self, data: bytes) -> None:
        if self.wire.send(data):
            self.wire.stamps.append((self.loop.now, len(data)))

    def on_frame(self, data: bytes) -> None:
        self._send(with_fcs(data))

    def fcs_sink(self, data: bytes, fcs: int) -> None:
        """A corrupted frame: it leaves with the good frame's FCS."""
        self._send(with_fcs(data, fcs))

    def rx_drop(self, reason: str, data: bytes) -> None:
        self._send(with_fcs(data, zlib.crc32(data) ^ 0xFFFFFFFF))


class LiveNode:
    """One NIC or switch of the live fabric: its core, its ports and their wires.

    :meth:`sync` brings the node to ``now``: the frames waiting in its sockets and the
    events of its core run merged in emulated time order (a frame at the time its sender
    stamped, or at the node's current time if the node is already past it), then the core
    runs what is left due. Both the driver task (at the core's next deadline) and the
    readers (a socket became readable) call it.
    """

    def __init__(self, name: str, loop: EventLoop) -> None:
        self.name = name
        self.loop = loop
        self.wires: list[tuple[Port, Any]] = []
        self.wake = trio.Event()
        self.runs = 0
        self.late_runs = 0
        self.max_lag_ps = 0
        self.lag_sum_ps = 0
        self.rx_frames = 0
        #: frames that reached the node after its time had passed their stamp
        self.rx_late = 0
        #: a run whose first event is this late counts as late (set by the fabric)
        self.late_ps = 0

    def _run_to(self, t: int) -> None:
        loop = self.loop
        nt = loop.next_time()
        if nt is not None and nt <= t:
            loop.run(until=t)
        if loop.now < t:
            nt = loop.next_time()
            if nt is None or nt > t:
                loop.now = t

    def sync(self, now: int) -> None:
        """Deliver waiting frames and run every event due at ``now``, then stand at it."""
        loop = self.loop
        arrivals: list[tuple[int, int, Port, bytes]] = []
        for port, wire in self.wires:
            stamps = wire.peer.stamps
            for data in wire.recv_ready():
                t = -1
                n = len(data)
                while stamps:  # a stamp whose frame the kernel dropped is skipped
                    ts, ln = stamps.popleft()
                    if ln == n:
                        t = ts
                        break
                arrivals.append((t, len(arrivals), port, data))
        nt = loop.next_time()
        first = min(nt if nt is not None else now, *(a[0] for a in arrivals)) \
            if arrivals else nt
        if first is not None and 0 <= first <= now:
            lag = now - first
            self.runs += 1
            self.lag_sum_ps += lag
            if lag > self.max_lag_ps:
                self.max_lag_ps = lag
            if lag > self.late_ps:
                self.late_runs += 1
        if arrivals:
            arrivals.sort()
            for t, _, port, data in arrivals:
                if t < loop.now:
                    self.rx_late += t >= 0
                else:
                    self._run_to(t)
                frame, ok = check_fcs(data)
                self.rx_frames += 1
                if ok:
                    port.on_frame(frame)
                else:
                    port.rx_drop("fcs", frame)
        self._run_to(now)

    async def run(self, clock: LiveClock) -> None:
        async with trio.open_nursery() as nursery:
            for _port, wire in self.wires:
                nursery.start_soon(self._reader, wire, clock)
            loop = self.loop
            while True:
                self.sync(clock.now())
                self.wake = trio.Event()
                with trio.move_on_at(clock.real_at(loop.next_time())):
                    await self.wake.wait()

    async def _reader(self, wire: Any, clock: LiveClock) -> None:
        sock = wire.sock
        while True:
            await trio.lowlevel.wait_readable(sock)
            self.sync(clock.now())
            self.wake.set()

    def counters(self) -> dict[str, Any]:
        return {"runs": self.runs, "late_runs": self.late_runs,
                "max_lag_ps": self.max_lag_ps,
                "mean_lag_ps": self.lag_sum_ps // self.runs if self.runs else 0,
                "rx_frames": self.rx_frames, "rx_late": self.rx_late}


class _Edge:
    """The sockets of the external hosts: one listening pool per fabric host address and
    external port, so the external process reaches every fabric host at its own IP."""

    def __init__(self, fab: LiveFabric) -> None:
        from uet.runtime.sockets import EvSocketPool

        self.fab = fab
        self.exts: dict[str, tuple[int, ExternalEndpoint]] = {}
        for i, nic in enumerate(fab.net.nics):
            if isinstance(nic.ep, ExternalEndpoint):
                self.exts[nic.ep.address[0]] = (i, nic.ep)
        ports = sorted({ep.address[1] for _, ep in self.exts.values()})
        self.pools: dict[tuple[str, int], Any] = {}
        for ctx in fab.net.hosts:
            if ctx.ip in self.exts:
                continue
            for port in ports:
                self.pools[ctx.ip, port] = EvSocketPool(ctx.ip, port, max_ev_sockets=64,
                                                        counters=Counter())
        self.tx_wanted = trio.Event()
        for _, ep in self.exts.values():
            ep.on_outbox = self.tx_wanted.set

    def open(self) -> None:
        for (ip, port), pool in self.pools.items():
            try:
                pool.open()
            except OSError as e:
                raise LiveError(f"external hosts: cannot listen on {ip}:{port} for them "
                                f"({e.strerror})") from None

    def close(self) -> None:
        for pool in self.pools.values():
            pool.close()

    async def run(self) -> None:
        async with trio.open_nursery() as nursery:
            for (ip, _port), pool in self.pools.items():
                nursery.start_soon(self._rx, ip, pool)
            nursery.start_soon(self._tx)

    async def _rx(self, dst_ip: str, pool: Any) -> None:
        fab = self.fab
        while True:
            payload, src_ip, sport, tos = await pool.receive()
            hit = self.exts.get(src_ip)
            if hit is None:
                pool.counters["rx_not_external"] += 1
                continue
            index, ep = hit
            node = fab.node_of_host(index)
            node.sync(fab.clock.now())
            ep.inject(payload, dst_ip, sport, tos, src_ip)
            fab.net.nics[index].poke()
            node.wake.set()

    async def _tx(self) -> None:
        while True:
            await self.tx_wanted.wait()
            self.tx_wanted = trio.Event()
            for _, ep in self.exts.values():
                ep.on_outbox = self.tx_wanted.set
            for ext_ip, (_, ep) in self.exts.items():
                port = ep.address[1]
                while ep.outbox:
                    payload, src_ip, sport, tos = ep.outbox.popleft()
                    pool = self.pools.get((src_ip, port))
                    if pool is None:
                        ep.stats["drop.no_source_socket"] += 1
                        continue
                    if await pool.send(payload, ext_ip, sport, tos):
                        ep.stats["sent"] += 1

    def counters(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for ext_ip, (i, ep) in self.exts.items():
            out[f"h{i}"] = {"address": f"udp:{ext_ip}:{ep.address[1]}", **dict(ep.stats)}
        for (ip, port), pool in self.pools.items():
            c = {k: v for k, v in pool.counters.items() if v}
            if c:
                out[f"{ip}:{port}"] = c
        return out


def _block_base(block: str | None) -> tuple[int, int]:
    """The first two octets of the /16 on 127/8 the fabric's addresses come from."""
    if block is None:
        return 127, 128 + os.getpid() % 96
    net = ipaddress.ip_network(block, strict=False)
    if net.version != 4 or not net.subnet_of(ipaddress.ip_network("127.0.0.0/8")) or \
            net.prefixlen > 16:
        raise ValueError(f"live.address_block={block!r}: must be a /16 (or larger) inside "
                         "127.0.0.0/8, e.g. \"127.42.0.0/16\"")
    a = net.network_address.packed
    return a[0], a[1]


def _addr(base: tuple[int, int], hi: int, j: int) -> str:
    return f"{base[0]}.{base[1]}.{hi + j // 250}.{j % 250 + 2}"


class LiveFabric(Fabric):
    """A fabric whose NICs and switches are Trio tasks exchanging real frames.

    Same constructor and API as :class:`~uet.runtime.fabric.Fabric` (``topology``,
    ``profile``, ``endpoint_factory`` ...; ``fab.ep(i)`` operations, ``fab.send``,
    ``fab.sleep``, ``fab.capture``, ``fab.counters()``), plus:

    * ``dilation``: emulated time runs this many times slower than real time (None: from
      :func:`calibrate`); ``backend``: ``"udp"`` (VXLAN on loopback) or ``"veth"`` (root);
    * ``externals``: ``{host index: "udp:IP:PORT"}``, hosts played by another process
      (default: the topology's ``external`` table);
    * ``address_block``: the /16 of 127/8 for host and wire addresses (default from the
      pid). Hosts get addresses ``127.B.0.2 ...`` (externals keep theirs), the wires
      ``127.B.128.2 ...``.
    """

    def __init__(self, topology: dict[str, Any] | Network, *, dilation: float | None = None,
                 backend: str = "udp", externals: Mapping[int, str] | None = None,
                 address_block: str | None = None, seed: int = 0,
                 qos: QosConfig | dict | None = None,
                 eventlog: EventLog | str | Path | None = None, ecmp_seed: int | None = None,
                 **kw: Any) -> None:
        if backend not in BACKENDS:
            raise ValueError(f"live backend={backend!r}: allowed {list(BACKENDS)}")
        if backend == "veth":
            why = Netns.available()
            if why is not None:
                raise LiveError(f"live backend 'veth': {why}; use backend 'udp' (VXLAN on "
                                "loopback, no privilege)")
        self.backend = backend
        self.base = _block_base(address_block)
        log = eventlog if isinstance(eventlog, EventLog) else EventLog(eventlog)
        if isinstance(topology, Network):
            net = topology
            if not net.loop_per_node or not isinstance(net.loop, ControlLoop):
                raise ValueError("LiveFabric: build the network with "
                                 "uet.runtime.live.live_network() (one core per node)")
        else:
            if isinstance(qos, dict):
                qos = QosConfig.from_dict(qos)
            params = dict(topology)
            externals = externals if externals is not None else params.pop("external", None)
            net = build(live_network(seed=seed, qos=qos, log=log, ecmp_seed=ecmp_seed),
                        params)
        if externals is None:
            externals = net.meta.get("topology", {}).get("external") or {}
        self.externals = self._externals(net, externals)
        self._renumber(net)
        super().__init__(net, eventlog=log, **kw)
        self.loop: ControlLoop  # type: ignore[assignment]
        self.loop.on_push = self._notify
        self.nodes: dict[str, LiveNode] = {name: LiveNode(name, loop)
                                           for name, loop in net.node_loops.items()}
        self._node_by_port = {}
        for nic in net.nics:
            self._node_by_port[nic.name] = self.nodes[nic.name]
        for sw in net.switches.values():
            for p in sw.ports:
                self._node_by_port[p.name] = self.nodes[sw.name]
        self.calibration: dict[str, Any] | None = None
        #: set at start when ``dilation`` is None (from :func:`calibrate`)
        self.clock = LiveClock(dilation if dilation is not None else 1.0)
        self._calibrate = dilation is None
        self.wires: list[tuple[str, Any, Any]] = []
        self.netns: Netns | None = None
        self.edge: _Edge | None = None
        self.real_s = 0.0
        fastest = max((ch.rate_bps for lk in net.links for ch in (lk.ab, lk.ba)),
                      default=100_000_000_000)
        late = FRAME_BYTES * 8 * S // fastest  # one full frame at the fastest link
        for node in self.nodes.values():
            node.late_ps = late

    # ---------------------------------------------------------------- building

    def _wrap_factory(self, factory: EndpointFactory) -> EndpointFactory:
        return external_factory(factory, self.externals) if self.externals else factory

    def _externals(self, net: Network, spec: Mapping[Any, str]) -> dict[int, tuple[str, int]]:
        out: dict[int, tuple[str, int]] = {}
        for key, text in dict(spec).items():
            try:
                i = int(key)
            except (TypeError, ValueError):
                raise ValueError(f"topology.external: key {key!r} must be a host index "
                                 f"0..{len(net.hosts) - 1}") from None
            if not 0 <= i < len(net.hosts):
                raise ValueError(f"topology.external.{key}: no host {i}; the topology has "
                                 f"hosts 0..{len(net.hosts) - 1}")
            ip, port = parse_external(text)
            if not ipaddress.ip_address(ip).is_loopback:
                raise ValueError(f"topology.external.{key} = {text!r}: the live fabric "
                                 "reaches external hosts on loopback only (127.0.0.0/8)")
            if ipaddress.ip_address(net.hosts[i].ip).version != 4:
                raise ValueError("topology.external: external hosts need IPv4 "
                                 "(topology.ipv6 = false)")
            out[i] = (ip, port)
        ips = [a[0] for a in out.values()]
        if len(set(ips)) != len(ips):
            raise ValueError("topology.external: two external hosts share an IP address")
        return out

    def _renumber(self, net: Network) -> None:
        """Hosts on loopback (IPv4 topologies), so external processes can reach them."""
        if not net.hosts or ipaddress.ip_address(net.hosts[0].ip).version != 4:
            return
        ips = [self.externals[i][0] if i in self.externals else _addr(self.base, 0, i)
               for i in range(len(net.hosts))]
        net.renumber_hosts(ips)

    def node_of_host(self, index: int) -> LiveNode:
        return self.nodes[self.net.nics[index].name]

    def _open_wires(self) -> None:
        net = self.net
        if self.backend == "veth":
            self.netns = Netns(f"uet-live-{os.getpid()}-{next(_ns_counter)}")
            pairs = [(f"u{j}a", f"u{j}b") for j in range(len(net.links))]
            self.netns.open(pairs)
        j = 0
        try:
            for j, link in enumerate(net.links):
                a, b = net.ifaces[link.a], net.ifaces[link.b]
                if self.backend == "veth":
                    assert self.netns is not None
                    wa = PacketWire(f"u{j}a", self.netns)
                    wb = PacketWire(f"u{j}b", self.netns)
                else:
                    ia, ib = _addr(self.base, 128, 2 * j), _addr(self.base, 128, 2 * j + 1)
                    wa = UdpWire(ia, ib, j + 1)
                    wb = UdpWire(ib, ia, j + 1)
                wa.peer, wb.peer = wb, wa
                self.wires.append((link.name, wa, wb))
                link.ab.rx = WireEnd(wa, b, link.ab.loop)
                link.ab.fcs_sink = link.ab.rx.fcs_sink
                link.ba.rx = WireEnd(wb, a, link.ba.loop)
                link.ba.fcs_sink = link.ba.rx.fcs_sink
                self._node_by_port[a.name].wires.append((a, wa))
                self._node_by_port[b.name].wires.append((b, wb))
        except OSError as e:
            self._close_wires()
            if e.errno == errno.EADDRINUSE:
                raise LiveError(f"live fabric: address {_addr(self.base, 128, 2 * j)}:4789 "
                                "is taken (another live fabric?): pick another "
                                "address_block") from None
            raise LiveError(f"live fabric: cannot open link {j}'s sockets: {e}") from None

    def _close_wires(self) -> None:
        for _name, wa, wb in self.wires:
            wa.close()
            wb.close()
        if self.netns is not None:
            self.netns.close()

    # ---------------------------------------------------------------- lifecycle

    async def __aenter__(self) -> LiveFabric:
        if self._calibrate:
            self.calibration = await calibrate(self.net)
            self.clock = LiveClock(self.calibration["dilation"])
        self._open_wires()
        if self.externals:
            self.edge = _Edge(self)
            try:
                self.edge.open()
            except BaseException:
                self._close_wires()
                raise
        self._nursery_cm = trio.open_nursery()
        self._nursery = await self._nursery_cm.__aenter__()
        self._real0 = time.perf_counter()
        self.clock.start()
        self._t0 = self.clock.t0 or 0.0
        for node in self.nodes.values():
            self._nursery.start_soon(node.run, self.clock)
        if self.edge is not None:
            self._nursery.start_soon(self.edge.run)
        self._nursery.start_soon(self._drive_control)
        return self

    def advance_to(self, t_ps: int) -> None:
        """Not for a live fabric: its nodes are Trio tasks on the real clock."""
        raise LocalError("LiveFabric.advance_to: a live fabric runs in real time under "
                         "Trio; use await fab.sleep_until() inside `async with`")

    async def __aexit__(self, *exc: Any) -> bool | None:
        try:
            return await super().__aexit__(*exc)
        finally:
            self.real_s = time.perf_counter() - self._real0
            self._close_wires()
            if self.edge is not None:
                self.edge.close()

    # ---------------------------------------------------------------- time

    @property
    def now(self) -> int:
        """Emulated time in ps (real time since start / dilation)."""
        return self.clock.now()

    async def _drive_control(self) -> None:
        loop, clock = self.loop, self.clock
        while True:
            nt = loop.next_time()
            now = clock.now()
            if nt is not None and nt <= now:
                for node in self.nodes.values():
                    node.sync(now)
                loop.run(until=now)
                for node in self.nodes.values():
                    node.wake.set()
                continue
            self._work = trio.Event()
            with trio.move_on_at(clock.real_at(nt)):
                await self._work.wait()

    # ---------------------------------------------------------------- acting

    def submit(self, host: int, fn: Callable[[Any, int], Any]) -> Any:
        """Call ``fn(endpoint, now)`` on host ``host`` at the current live time."""
        nic = self.net.nics[host]
        node = self.nodes[nic.name]
        node.sync(self.clock.now())
        out = fn(nic.ep, nic.loop.now)
        nic.poke()
        node.wake.set()
        self._notify()
        return out

    def pending(self) -> int:
        return len(self.loop) + sum(len(n.loop) for n in self.nodes.values())

    def counters(self) -> dict[str, Any]:
        out = super().counters()
        out["core"]["events"] = self.events_run()
        wires: dict[str, Any] = {}
        for name, wa, wb in self.wires:
            wires[name] = {"a": wa.counters(), "b": wb.counters()}
        out["live"] = {
            "backend": self.backend, "dilation": self.clock.dilation,
            "calibration": self.calibration, "real_s": self.real_s,
            "nodes": {name: n.counters() for name, n in self.nodes.items()},
            "wires": wires,
            "behind": self.behind(),
        }
        if self.edge is not None:
            out["live"]["external"] = self.edge.counters()
        return out

    def events_run(self) -> int:
        return self.loop.events + sum(n.loop.events for n in self.nodes.values())

    def behind(self) -> dict[str, Any]:
        """How far the nodes fell behind real time: the worst and the mean lag of a node
        run (emulated ps: how late its first event or frame ran), the share of node runs
        that started more than a full frame's time late, frames lost in the kernel, and
        frames that reached a node already past their stamp (``rx_late``: the upstream
        node ran late, so they were delivered late)."""
        runs = sum(n.runs for n in self.nodes.values())
        late = sum(n.late_runs for n in self.nodes.values())
        worst = max((n.max_lag_ps for n in self.nodes.values()), default=0)
        total = sum(n.lag_sum_ps for n in self.nodes.values())
        lost = sum(w.kernel_drops + w.tx_error for _, wa, wb in self.wires for w in (wa, wb))
        return {"max_lag_ps": worst, "mean_lag_ps": total // runs if runs else 0,
                "late_share": late / runs if runs else 0.0, "wire_losses": lost,
                "rx_late": sum(n.rx_late for n in self.nodes.values())}


# -------------------------------------------------------------------- calibration


async def calibrate(net: Network, *, frames: int = 200) -> dict[str, Any]:
    """Pick a dilation for ``net`` on this machine, now (about 0.1 s).

    Measures what one frame-hop costs here, in wall time (so a loaded machine gets a
    slower clock): a real VXLAN send and receive on loopback through Trio (the wait for
    the socket and one more scheduling round, as a node's reader and driver do), plus the
    fabric and end point work of one packet-hop, from a short virtual-time run of the
    real end point. The load it plans for: every host sending at its link rate, each
    data frame crossing the longest host-to-host path and its ACK coming back the same
    way; time is slowed until that load needs ``TARGET_LOAD`` of one CPU. (Measured with
    ``benchmarks/live_fabric.py``: what one process sustains is about the same aggregate
    rate of real bytes whatever the host count, so the dilation grows with the hosts.)
    Returns the figures and ``dilation``.
    """
    wire_s = await _wire_cost(frames)
    hop_s = _hop_cost()
    per_hop = wire_s + hop_s
    frames_per_s = sum(ctx.rate_bps for ctx in net.hosts) / (8 * FRAME_BYTES)
    hops = 2 * _longest_path(net)
    dilation = max(1.0, frames_per_s * hops * per_hop / TARGET_LOAD)
    # round up to 2 significant digits, so reports read well
    mag = 10 ** max(0, int(math.log10(dilation)) - 1)
    dilation = math.ceil(dilation / mag) * mag
    return {"dilation": float(dilation), "wire_us": round(wire_s * 1e6, 2),
            "hop_us": round(hop_s * 1e6, 2), "frames_per_emulated_s": round(frames_per_s),
            "hops_per_frame": hops, "target_load": TARGET_LOAD}


def _longest_path(net: Network) -> int:
    """Cables between host 0 and the host farthest from it (hosts do not forward)."""
    if not net.nics:
        return 1
    nodes: dict[int, list[Any]] = {}
    for port in net.ifaces.values():
        ch = port.channel
        if ch is None:
            continue
        src = getattr(port, "switch", port)
        dst = getattr(ch.rx, "far", ch.rx)
        nodes.setdefault(id(src), []).append(getattr(dst, "switch", dst))
    hosts = {id(n) for n in net.nics}
    start = net.nics[0]
    dist = {id(start): 0}
    todo = [start]
    far = 1
    while todo:
        v = todo.pop(0)
        for w in nodes.get(id(v), ()):
            if id(w) not in dist:
                dist[id(w)] = dist[id(v)] + 1
                if id(w) in hosts:
                    far = max(far, dist[id(w)])
                else:
                    todo.append(w)
    return far


async def _wire_cost(frames: int) -> float:
    """Wall seconds per frame: VXLAN send + Trio wait + receive + FCS on loopback."""
    base = _block_base(None)
    ia, ib = _addr(base, 250, 0), _addr(base, 250, 1)
    try:
        a = UdpWire(ia, ib, 1)
    except OSError:
        return 60e-6  # addresses taken: a typical figure for this path
    try:
        b = UdpWire(ib, ia, 1)
    except OSError:
        a.close()
        return 60e-6
    frame = bytes(FRAME_BYTES)
    try:
        t0 = time.perf_counter()
        got = 0
        with trio.move_on_after(2.0):
            for _ in range(frames):
                a.send(with_fcs(frame))
                await trio.lowlevel.wait_readable(b.sock)
                for data in b.recv_ready():
                    check_fcs(data)
                    got += 1
                await trio.lowlevel.checkpoint()
        return (time.perf_counter() - t0) / max(got, 1)
    finally:
        a.close()
        b.close()


def _hop_cost() -> float:
    """Wall seconds per packet-hop of the real end point in virtual time (2 hosts on a
    switch, 256 KiB)."""
    from uet.endpoint.fep import FabricEndpoint

    net = build(Network(seed=1), {"kind": "star", "hosts": 2})
    net.attach(FabricEndpoint.factory(profile="ai-base"))
    ep = net.nics[0].ep
    t0 = time.perf_counter()
    net.nics[1].ep.ensure_sink(256 * 1024)
    msg = ep.send_message(0, 1, 256 * 1024)
    net.nics[0].poke()
    while not msg.done and len(net.loop):
        net.loop.run(until=net.loop.now + 10_000_000)
    hops = max(net.packet_hops(), 1)
    return (time.perf_counter() - t0) / hops
