"""Output-queued switch: host routes with ECMP, per-class queues, ECN, trimming, PFC.

Forwarding: the destination IP selects a set of equal-cost egress ports; with more than
one, a seeded hash of the IP/UDP 5-tuple (:mod:`uet.fabric.ecmp`) picks one, so the EV in
the UDP source port picks the path and one EV always takes one path. Per-flow decisions are
cached by the raw address/port bytes (bounded). Switches do not rewrite MACs or the TTL.

Each egress port has one FIFO per traffic class with a byte limit, served by strict
priority (``QosConfig.priority``), skipping classes paused by the peer's PFC frames.

* ECN: RED-style marking at dequeue on ECN-capable frames of classes with ECN on: never
  below ``kmin`` bytes queued in the class (counting the leaving frame), always from
  ``kmax``, with probability ``(q - kmin) / (kmax - kmin)`` between. CE is written with the
  incremental IPv4 checksum update (``uet.wire.codec.mark_ce``).
* Trimming: a frame that does not fit its queue and carries the trimmable DSCP is cut to its
  UET headers (``uet.wire.codec.trim_frame``: lengths and checksums fixed), re-marked with
  the trimmed DSCP (the last-hop DSCP when the egress port faces a host) and queued in the
  trimmed class (high priority); any other frame that does not fit is dropped
  (``drop.queue_full``).
* PFC: in lossless classes queues have no byte limit; bytes are accounted per ingress port
  and class, and the ingress port sends XOFF upstream above ``xoff`` (refreshed at half the
  pause time) and XON at ``xon``. Nothing is dropped unless ``xoff + headroom`` overflows.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from uet.fabric.ecmp import hash_tuple, pick
from uet.fabric.pfc import PfcConfig, quanta_ps
from uet.fabric.port import ET_IPV4, ET_IPV6, ET_MAC_CONTROL, Port, PyPortCore
from uet.fabric.qos import QosConfig
from uet.fabric.scheduler import FABRIC_CORE
from uet.wire.codec import mark_ce, peek_flow, trim_frame
from uet.wire.constants import UET_DEFAULT_IP_PROTO
from uet.wire.errors import DecodeError

if TYPE_CHECKING:
    from uet.fabric.eventlog import EventLog
    from uet.fabric.scheduler import EventLoop

UNLIMITED = 1 << 62
#: the queue of a class no DSCP maps to (empty, shared; a deque is ~600 bytes)
_NO_QUEUE: Any = ()
_CACHE_MAX = 1 << 16


def _forward(self: Any, data: bytes) -> None:
    """A whole frame arrived on this switch port (store and forward): route it, queue it.

    ``SwitchPort.on_frame`` of the Python core, and the C core's fallback for frames it
    leaves to Python (``SwitchPort._on_frame_py``: too short for their IP header).
    """
    self.rx_frames += 1
    self.rx_bytes += len(data)
    if self.taps:
        for tap in self.taps:
            tap(self.loop.now, data, "rx")
    sw = self.switch
    et = data[12:14]
    if et == ET_IPV4:
        if len(data) < 34:  # cut inside its IP header: no address to route by
            self._drop("malformed", data)
            return
        tos = data[15]
        out = sw.direct.get(data[30:34])
        if out is None:
            # the ECMP cache holds UDP frames without IP options only: for them the key
            # (addresses and ports) is the whole 5-tuple; others are hashed every time
            key = data[26:38] if data[23] == 17 and data[14] == 0x45 else None
            out = sw.cache.get(key) if key is not None else None
            if out is None:
                out = sw.route(data, key)
    elif et == ET_IPV6:
        if len(data) < 54:
            self._drop("malformed", data)
            return
        tos = (data[14] & 0x0F) << 4 | data[15] >> 4
        out = sw.direct.get(data[38:54])
        if out is None:
            key = data[22:58] if data[20] == 17 else None
            out = sw.cache.get(key) if key is not None else None
            if out is None:
                out = sw.route(data, key)
    elif et == ET_MAC_CONTROL:
        self._on_pause(data)
        return
    else:
        self._drop("ethertype", data)
        return
    if out is None:
        self._drop("no_route", data)
        return
    tc = sw.tos_tc[tos]
    pfc_in = self.pfc_in
    out.enqueue(data, tc, tos, None if pfc_in is None else pfc_in[tc])


class PySwitchPortCore(PyPortCore):
    """A switch port's forwarding, queues and ECN in Python: the reference of the C
    ``SwitchPortCore`` (one FIFO of ``(frame, ingress)`` per class, byte counts, limits,
    high-water marks and ECN thresholds per class)."""

    __slots__ = ("switch", "queues", "qbytes", "limit", "hwm", "kmin", "kmax", "pfc_in",
                 "ecn_marked", "prio")

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        self = super().__new__(cls)
        # a FIFO is made for a class when it is first used (a deque is ~600 bytes)
        self.queues = [_NO_QUEUE] * 8
        self.qbytes = [0] * 8
        self.limit = [UNLIMITED] * 8
        self.hwm = [0] * 8
        self.kmin = [UNLIMITED] * 8
        self.kmax = [UNLIMITED] * 8
        self.ecn_marked = 0
        self.prio = ()
        return self

    on_frame = _forward

    @property
    def qtotal(self) -> int:
        """Bytes queued in every class together."""
        return sum(self.qbytes)

    def set_limit(self, tc: int, nbytes: int) -> None:
        """Byte limit of class ``tc``."""
        self.limit[tc] = nbytes

    def set_ecn(self, tc: int, kmin: int, kmax: int) -> None:
        """ECN marking thresholds of class ``tc``."""
        self.kmin[tc], self.kmax[tc] = kmin, kmax

    def queue_len(self, tc: int) -> int:
        """Frames queued in class ``tc``."""
        return len(self.queues[tc])

    def enqueue(self, data: bytes, tc: int, tos: int, ingress: SwitchPort | None) -> None:
        """Queue ``data`` in class ``tc`` (trim or drop if it does not fit)."""
        n = len(data)
        qb = self.qbytes[tc] + n
        if ingress is not None:
            if not ingress._account(tc, n):
                self._drop("pfc_headroom", data)
                return
        elif qb > self.limit[tc]:
            self._overflow(data, tc, tos)
            return
        self._admit(tc, data, ingress)

    def _admit(self, tc: int, data: bytes, ingress: SwitchPort | None) -> None:
        """Queue a frame that fits in class ``tc``, then kick the transmitter."""
        qb = self.qbytes[tc] + len(data)
        self.qbytes[tc] = qb
        if qb > self.hwm[tc]:
            self.hwm[tc] = qb
        q = self.queues[tc]
        if q is _NO_QUEUE:
            q = self.queues[tc] = deque()
        q.append((data, ingress))
        self.queued += 1
        self.kick()

    def _dequeue(self, now: int) -> bytes | None:
        pu = self.paused_until
        queues = self.queues
        for tc in self.prio:
            q = queues[tc]
            if q and pu[tc] <= now:
                break
        else:
            return None
        data, ingress = q.popleft()
        self.queued -= 1
        n = len(data)
        qb = self.qbytes[tc]
        self.qbytes[tc] = qb - n
        if ingress is not None:
            ingress._release(tc, n)
        if qb > self.kmin[tc]:
            kmax = self.kmax[tc]
            if qb >= kmax or self.switch.rng.random() * (kmax - self.kmin[tc]) < qb - self.kmin[tc]:
                buf = bytearray(data)
                if mark_ce(buf):
                    if buf[15] != data[15] or buf[14] != data[14]:
                        self.ecn_marked += 1
                    data = bytes(buf)
        return data


#: the switch port's core in use: C unless the extension is missing or UET_PURE_PYTHON=1
SwitchPortCore: Any = PySwitchPortCore if FABRIC_CORE is None else FABRIC_CORE.SwitchPortCore


class SwitchPort(Port, SwitchPortCore):
    """One switch port: ingress forwarding + PFC accounting, egress queues."""

    __slots__ = ("index", "lasthop", "faces", "in_bytes", "in_limit", "in_hwm", "xoff_sent",
                 "xoff_gen", "trimmed")

    if TYPE_CHECKING:  # the core's (PySwitchPortCore or C)
        switch: Switch
        qbytes: list[int]
        qtotal: int
        limit: list[int]
        hwm: list[int]
        kmin: list[int]
        kmax: list[int]
        pfc_in: list[SwitchPort | None] | None
        ecn_marked: int
        prio: tuple[int, ...]

        def on_frame(self, data: bytes) -> None: ...
        def enqueue(self, data: bytes, tc: int, tos: int,
                    ingress: SwitchPort | None) -> None: ...
        def _admit(self, tc: int, data: bytes, ingress: SwitchPort | None) -> None: ...
        def set_limit(self, tc: int, nbytes: int) -> None: ...
        def set_ecn(self, tc: int, kmin: int, kmax: int) -> None: ...
        def queue_len(self, tc: int) -> int: ...

    #: the Python forwarding the C core falls back on
    _on_frame_py = _forward

    def __init__(self, switch: Switch, index: int, mac: str) -> None:
        super().__init__(f"{switch.name}.p{index}", switch.loop, switch.log, mac)
        self.switch = switch
        self.index = index
        self.prio = switch.qos.priority
        self.queued = 0
        self.lasthop = False
        self.faces = ""  # name of the peer interface
        self.in_bytes = [0] * 8
        self.in_limit = [UNLIMITED] * 8
        self.in_hwm = [0] * 8
        self.xoff_sent = [False] * 8
        self.xoff_gen = [0] * 8
        #: per class, the port accounting ingress bytes for PFC; None while no class of
        #: this port is lossless (forwarding then reads nothing per frame for PFC)
        self.pfc_in: list[SwitchPort | None] | None = None
        self.trimmed = 0

    # ---------------------------------------------------------------- PFC (ingress side)

    def _account(self, tc: int, n: int) -> bool:
        ib = self.in_bytes[tc] + n
        if ib > self.in_limit[tc]:
            return False
        self.in_bytes[tc] = ib
        if ib > self.in_hwm[tc]:
            self.in_hwm[tc] = ib
        if ib > self.switch.pfc.xoff and not self.xoff_sent[tc]:
            self._xoff(tc)
        return True

    def _xoff(self, tc: int) -> None:
        pfc = self.switch.pfc
        self.xoff_sent[tc] = True
        self.xoff_gen[tc] += 1
        self.send_pause({tc: pfc.quanta})
        if self.log.enabled:
            self.log.emit(self.loop.now, "pfc_xoff", port=self.name, prio=tc,
                          bytes=self.in_bytes[tc])
        half = quanta_ps(pfc.quanta, self.channel.rate_bps) // 2
        self.push(self.loop.now + max(half, 1), self._refresh, (tc, self.xoff_gen[tc]))

    def _refresh(self, arg: tuple[int, int]) -> None:
        tc, gen = arg
        if self.xoff_sent[tc] and self.xoff_gen[tc] == gen:
            pfc = self.switch.pfc
            self.send_pause({tc: pfc.quanta})
            half = quanta_ps(pfc.quanta, self.channel.rate_bps) // 2
            self.push(self.loop.now + max(half, 1), self._refresh, arg)

    def _release(self, tc: int, n: int) -> None:
        ib = self.in_bytes[tc] - n
        self.in_bytes[tc] = ib
        if self.xoff_sent[tc] and ib <= self.switch.pfc.xon:
            self.xoff_sent[tc] = False
            self.send_pause({tc: 0})
            if self.log.enabled:
                self.log.emit(self.loop.now, "pfc_xon", port=self.name, prio=tc, bytes=ib)

    # ---------------------------------------------------------------- egress

    def _overflow(self, data: bytes, tc: int, tos: int) -> None:
        """``data`` does not fit class ``tc``: trim it into the trimmed class, or drop it."""
        sw = self.switch
        if not sw.trimming or tos >> 2 != sw.qos.dscp_trimmable:
            self._drop("queue_full", data)
            return
        dscp = sw.qos.dscp_trimmed_lasthop if self.lasthop else sw.qos.dscp_trimmed
        try:
            cut = trim_frame(data, dscp=dscp, ip_proto=sw.ip_proto)
        except DecodeError:
            self._drop("untrimmable", data)
            return
        ttc = sw.trim_tc
        n = len(cut)
        if self.qbytes[ttc] + n > self.limit[ttc]:
            self._drop("queue_full", data)
            return
        self.trimmed += 1
        if self.log.enabled:
            self.log.emit(self.loop.now, "trim", port=self.name, bytes=len(data), kept=n,
                          lasthop=self.lasthop)
        self._admit(ttc, cut, None)

    def counters(self) -> dict[str, Any]:
        out = super().counters()
        out["trimmed"] = self.trimmed
        out["ecn_marked"] = self.ecn_marked
        hwm, in_hwm = self.hwm, self.in_hwm
        for tc in range(8):
            if hwm[tc]:
                out[f"queue_hwm.{tc}"] = hwm[tc]
            if in_hwm[tc]:
                out[f"ingress_hwm.{tc}"] = in_hwm[tc]
        return out


class PySwitchCore:
    """The switch's forwarding tables as plain attributes (``direct``, ``cache``, ``rng``,
    ``ip_proto``, ``tos_tc``): the Python reference of the C ``SwitchCore``."""


#: the switch's core in use: C unless the extension is missing or UET_PURE_PYTHON=1
SwitchCore: Any = PySwitchCore if FABRIC_CORE is None else FABRIC_CORE.SwitchCore


class Switch(SwitchCore):
    """A switch: ports, host routes, ECMP, QoS, trimming and PFC settings."""

    def __init__(self, name: str, loop: EventLoop, log: EventLog, *, qos: QosConfig,
                 seed: int, ecmp_seed: int, trimming: bool = True,
                 pfc: PfcConfig | None = None) -> None:
        self.name = name
        self.loop = loop
        self.log = log
        self.qos = qos
        self.tos_tc = qos.tos_table()
        self.trim_tc = qos.tc_of_dscp.get(qos.dscp_trimmed, qos.control_tc)
        self.trimming = trimming
        self.pfc = pfc if pfc is not None else PfcConfig(classes=frozenset())
        self.rng = random.Random(seed)
        self.ecmp_seed = ecmp_seed
        #: IP protocol of native-IP UET (ref 1.3): hashed on its entropy header like UDP's
        #: source port, and trimmable
        self.ip_proto = UET_DEFAULT_IP_PROTO
        self.ports: list[SwitchPort] = []
        self.routes: dict[bytes, list[SwitchPort]] = {}
        #: destinations with a single next hop (no hashing)
        self.direct: dict[bytes, SwitchPort] = {}
        #: ECMP decisions by raw address + port bytes (bounded)
        self.cache: dict[bytes, SwitchPort] = {}
        self._port_sets: dict[tuple[int, ...], list[SwitchPort]] = {}

    def add_port(self, mac: str) -> SwitchPort:
        p = SwitchPort(self, len(self.ports), mac)
        self.ports.append(p)
        return p

    def configure_port(self, p: SwitchPort, *, queue_bytes: dict[int, int],
                       ecn: dict[int, tuple[int, int]]) -> None:
        """Byte limits and ECN thresholds per class; PFC per the switch's ``pfc``."""
        for tc, lim in queue_bytes.items():
            p.set_limit(tc, lim)
        for tc, (kmin, kmax) in ecn.items():
            if not 0 <= kmin <= kmax:
                raise ValueError(f"{p.name}: ECN thresholds need 0 <= kmin <= kmax")
            p.set_ecn(tc, kmin, max(kmax, kmin + 1))
        for tc in self.pfc.classes:
            p.set_limit(tc, UNLIMITED)
            if p.pfc_in is None:
                p.pfc_in = [None] * 8
            p.pfc_in[tc] = p
            if p.channel is not None:
                p.in_limit[tc] = self.pfc.xoff + self.pfc.headroom_for(
                    p.channel.rate_bps, p.channel.delay_ps)

    def _shared(self, ports: list[SwitchPort]) -> list[SwitchPort]:
        """The one list of this switch's routes holding ``ports`` (by port index)."""
        if not ports:
            raise ValueError(f"{self.name}: a route needs at least one port")
        key = tuple(p.index for p in ports)
        shared = self._port_sets.get(key)
        if shared is None:  # one list per distinct port set (a fat tree has a handful)
            shared = self._port_sets[key] = list(ports)
        return shared

    def add_route(self, dst_ip: bytes, ports: list[SwitchPort]) -> None:
        """Host route: ``dst_ip`` (packed) leaves by one of ``ports`` (ECMP if several)."""
        shared = self._shared(ports)
        self.routes[dst_ip] = shared
        if len(ports) == 1:
            self.direct[dst_ip] = ports[0]
        else:
            self.direct.pop(dst_ip, None)
        if self.cache:
            self.cache.clear()

    def add_routes(self, dst_ips: Collection[bytes], ports: list[SwitchPort]) -> None:
        """``add_route(ip, ports)`` for every ``ip`` of ``dst_ips``, in their order, in bulk
        (a topology installs hosts x switches routes: one call per destination set)."""
        shared = self._shared(ports)
        self.routes.update(dict.fromkeys(dst_ips, shared))
        direct = self.direct
        if len(shared) == 1:
            direct.update(dict.fromkeys(dst_ips, shared[0]))
        elif direct:
            for ip in dst_ips:
                direct.pop(ip, None)
        if self.cache:
            self.cache.clear()

    def route(self, data: bytes, key: bytes | None) -> SwitchPort | None:
        """Egress port for ``data`` (ECMP by 5-tuple hash); caches by ``key`` (given only
        for UDP frames without IP options, whose key bytes are their whole 5-tuple)."""
        if key is not None and len(key) == 12 and data[14] == 0x45:
            # IPv4 without options, UDP: on_frame's key holds the 5-tuple and this runs
            # once per flow, EV and switch
            src, dst, proto = key[:4], key[4:8], data[23]
            sport, dport = key[8] << 8 | key[9], key[10] << 8 | key[11]
        else:
            try:
                src, dst, proto, sport, dport = peek_flow(data, ip_proto=self.ip_proto)
            except DecodeError:
                return None
        cands = self.routes.get(dst)
        if not cands:
            return None
        if len(cands) == 1:
            out = cands[0]
        else:
            out = cands[pick(hash_tuple(self.ecmp_seed, src, dst, proto, sport, dport),
                             len(cands))]
        if key is not None:
            if len(self.cache) >= _CACHE_MAX:
                self.cache.clear()
            self.cache[key] = out
        return out

    def ecmp_port(self, src: bytes, dst: bytes, proto: int, sport: int, dport: int) -> int:
        """Index of the port a flow with this 5-tuple leaves by (for tests, reports)."""
        cands = self.routes[dst]
        if len(cands) == 1:
            return cands[0].index
        return cands[pick(hash_tuple(self.ecmp_seed, src, dst, proto, sport, dport),
                          len(cands))].index

    def counters(self) -> dict[str, dict[str, Any]]:
        return {p.name: p.counters() for p in self.ports}
