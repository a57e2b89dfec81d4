"""The emulated network without Trio: event core, NICs, switches, links, taps, counters.

:class:`uet.runtime.fabric.Fabric` wraps one of these for Trio users; topologies
(:mod:`uet.fabric.topology`) fill it in. Everything here is deterministic for a given seed.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from uet.fabric.ecmp import switch_seed
from uet.fabric.endpoint import EndpointFactory, HostContext
from uet.fabric.eventlog import EventLog
from uet.fabric.impairments import Impairments
from uet.fabric.link import Channel, Link
from uet.fabric.nic import Nic
from uet.fabric.pfc import PfcConfig
from uet.fabric.port import Port
from uet.fabric.qos import QosConfig
from uet.fabric.routing import Rerouter
from uet.fabric.scheduler import EventLoop
from uet.fabric.switch import UNLIMITED, Switch, SwitchPort


def _seed_for(seed: int, name: str) -> int:
    return switch_seed(seed, name) & 0xFFFFFFFFFFFF


class Network:
    """Hosts (``nics``, ``hosts``), ``switches``, ``links`` and the interface map ``ifaces``."""

    def __init__(self, *, seed: int = 0, qos: QosConfig | None = None,
                 log: EventLog | None = None, ecmp_seed: int | None = None,
                 loop_per_node: bool = False) -> None:
        self.seed = seed
        self.ecmp_seed = seed if ecmp_seed is None else ecmp_seed
        self.qos = qos or QosConfig()
        self.log = log or EventLog()
        #: the fabric's event core; with ``loop_per_node`` (the live driver,
        #: ``uet.runtime.live``) it holds only fabric-wide events (scheduled link changes,
        #: rerouting, users' timers) and each NIC and switch has a core of its own
        self.loop = EventLoop()
        #: node name -> its own core (``loop_per_node``); empty: every node runs on ``loop``
        self.node_loops: dict[str, EventLoop] = {}
        self.loop_per_node = loop_per_node
        self.nics: list[Nic] = []
        self.hosts: list[HostContext] = []
        self.switches: dict[str, Switch] = {}
        self._switch_index: dict[str, int] = {}  # name -> position in switches
        self.links: list[Link] = []
        self.ifaces: dict[str, Port] = {}
        self.link_of: dict[str, Link] = {}
        self.meta: dict[str, Any] = {}
        self.rerouter: Any = None  # a uet.fabric.routing.Rerouter once enable_rerouting ran

    # ---------------------------------------------------------------- building

    def node_loop(self, name: str) -> EventLoop:
        """The core NIC or switch ``name`` runs on: the shared one in virtual time, its
        own when every node is a task of its own in real time (``loop_per_node``)."""
        if not self.loop_per_node:
            return self.loop
        loop = self.node_loops.get(name)
        if loop is None:
            loop = self.node_loops[name] = EventLoop()
        return loop

    def add_host(self, ip: str, mac: str, rate_bps: int) -> Nic:
        i = len(self.nics)
        name = f"h{i}"
        nic = Nic(name, i, self.node_loop(name), self.log, mac, self.qos)
        self.nics.append(nic)
        self.ifaces[name] = nic
        log = self.log

        def host_log(now: int, event: str, **fields: Any) -> None:
            log.emit(now, event, **fields)

        self.hosts.append(HostContext(index=i, name=name, ip=ip, mac=mac, rate_bps=rate_bps,
                                      qos=self.qos, seed=_seed_for(self.seed, name),
                                      log=host_log))
        return nic

    def add_switch(self, name: str, *, trimming: bool = True,
                   pfc: PfcConfig | None = None) -> Switch:
        sw = Switch(name, self.node_loop(name), self.log, qos=self.qos,
                    seed=_seed_for(self.seed, name),
                    ecmp_seed=switch_seed(self.ecmp_seed, name), trimming=trimming, pfc=pfc)
        self.switches[name] = sw
        # its position in ``switches`` (a name added again keeps its place)
        self._switch_index.setdefault(name, len(self._switch_index))
        return sw

    def add_switch_port(self, sw: Switch) -> SwitchPort:
        idx = self._switch_index.get(sw.name)
        if idx is None:  # a switch put into ``switches`` by hand
            idx = list(self.switches).index(sw.name)
        # switch number in bytes 3-4, port number in bytes 5-6 (a star has thousands of
        # ports; below 256 the fifth byte is 00, as it always was)
        n = len(sw.ports)
        p = sw.add_port(f"02:ff:{idx >> 8:02x}:{idx & 255:02x}:{n >> 8:02x}:{n & 255:02x}")
        self.ifaces[p.name] = p
        return p

    def connect(self, a: Port, b: Port, rate_bps: int, delay_ps: int) -> Link:
        """Cable ``a`` to ``b``: ``a`` transmits on ``link.ab``, ``b`` on ``link.ba``."""
        link = Link(a.name, b.name, a.loop, rate_bps, delay_ps, self.log, loop_b=b.loop)
        a.channel, b.channel = link.ab, link.ba
        link.ab.rx, link.ba.rx = b, a
        self.links.append(link)
        self.link_of[a.name] = link
        self.link_of[b.name] = link
        if isinstance(a, SwitchPort):
            a.faces = b.name
            a.lasthop = isinstance(b, Nic)
        if isinstance(b, SwitchPort):
            b.faces = a.name
            b.lasthop = isinstance(a, Nic)
        return link

    def set_ip_proto(self, ip_proto: int) -> None:
        """The IP protocol of native-IP UET on this fabric (ref 1.3; default 253): switches
        hash its entropy header for ECMP and trim it like UET over UDP."""
        for sw in self.switches.values():
            sw.ip_proto = ip_proto
            sw.cache.clear()

    def renumber_hosts(self, ips: list[str]) -> None:
        """Give host ``i`` the address ``ips[i]`` (same family), switch routes included.

        The live driver puts hosts on loopback addresses so that processes outside the
        fabric (external hosts) can reach them; routes keep their ports and hashing seed.
        """
        if len(ips) != len(self.hosts):
            raise ValueError(f"renumber_hosts: {len(ips)} addresses for {len(self.hosts)} "
                             "hosts")
        old = {ipaddress.ip_address(h.ip).packed: ipaddress.ip_address(ip).packed
               for h, ip in zip(self.hosts, ips, strict=True)}
        if len(set(old.values())) != len(old):
            raise ValueError("renumber_hosts: addresses must be distinct")
        for h, ip in zip(self.hosts, ips, strict=True):
            h.ip = str(ipaddress.ip_address(ip))
        for sw in self.switches.values():
            sw.routes = {old.get(k, k): v for k, v in sw.routes.items()}
            sw.direct = {old.get(k, k): v for k, v in sw.direct.items()}
            sw.cache.clear()
        self.finish_hosts()

    def enable_rerouting(self, delay_ps: int) -> None:
        """Recompute switch routes (shortest-path ECMP over the links up) ``delay_ps``
        after every link state change (:mod:`uet.fabric.routing`)."""
        self.rerouter = Rerouter(self, delay_ps)

    def finish_hosts(self) -> None:
        """Give every host context the address book of all hosts (one map, shared: read
        it, do not change it)."""
        peers = {h.index: (h.ip, h.mac) for h in self.hosts}
        for h in self.hosts:
            h.peers = peers

    def attach(self, factory: EndpointFactory) -> None:
        """Create and attach one end point per host."""
        self.finish_hosts()
        for nic, ctx in zip(self.nics, self.hosts, strict=True):
            nic.ep = factory(ctx)

    # ---------------------------------------------------------------- impairments

    def channel(self, iface: str, direction: str = "tx") -> Channel:
        """The channel leaving (``tx``) or entering (``rx``) interface ``iface``."""
        link = self.link_of.get(iface)
        if link is None:
            raise KeyError(f"no interface {iface!r}; known: {sorted(self.ifaces)[:8]}...")
        out = link.channel_from(iface)
        if direction == "tx":
            return out
        if direction == "rx":
            return link.ba if out is link.ab else link.ab
        raise ValueError(f"direction={direction!r}: allowed 'tx', 'rx', 'both'")

    def impair(self, iface: str, cfg: Impairments | dict, direction: str = "both") -> None:
        """Impair the link at ``iface`` in one direction (``tx``/``rx`` of iface) or both."""
        if isinstance(cfg, dict):
            cfg = Impairments.from_dict(cfg)
        dirs = ("tx", "rx") if direction == "both" else (direction,)
        for d in dirs:
            ch = self.channel(iface, d)
            ch.impair(cfg, _seed_for(self.seed, "imp:" + ch.name))
            if cfg.queue_factor is not None:
                link = self.link_of[iface]
                other = link.b if link.a == iface else link.a
                self._scale_queue(iface if d == "tx" else other, cfg.queue_factor)

    def _scale_queue(self, iface: str, factor: float) -> None:
        """Scale the byte limits and ECN thresholds of the switch port ``iface`` (the
        transmitter of an impaired direction); host NICs have no switch queue."""
        port = self.ifaces[iface]
        limits = getattr(port, "limit", None)
        if limits is None:
            raise ValueError(f"impairments.queue_factor: {iface} is a host NIC, which has "
                             "no switch queue; select the switch-to-host direction")
        kmins, kmaxs = port.kmin, port.kmax
        for tc, lim in enumerate(limits):
            if lim < UNLIMITED:
                port.set_limit(tc, max(int(lim * factor), 1))
            if kmins[tc] < UNLIMITED:
                kmin = int(kmins[tc] * factor)
                port.set_ecn(tc, kmin, max(int(kmaxs[tc] * factor), kmin + 1))

    def set_link_up(self, iface: str, up: bool, at_ps: int | None = None) -> None:
        """Bring the link at ``iface`` down/up now or at ``at_ps``."""
        link = self.link_of[iface]
        if at_ps is None:
            link.set_up(up)
        else:
            self.loop.at(at_ps, lambda _: link.set_up(up))

    def set_rate(self, iface: str, rate_bps: int, at_ps: int | None = None,
                 direction: str = "both") -> None:
        """Change (degrade or restore) the rate of the link at ``iface``, now or at ``at_ps``."""
        dirs = ("tx", "rx") if direction == "both" else (direction,)
        for d in dirs:
            ch = self.channel(iface, d)
            if at_ps is None:
                ch.set_rate(rate_bps)
            else:
                self.loop.at(at_ps, lambda _, c=ch: c.set_rate(rate_bps))
            if self.log.enabled:
                self.log.emit(self.loop.now if at_ps is None else at_ps, "link_rate",
                              link=ch.name, rate_bps=rate_bps)

    # ---------------------------------------------------------------- reports

    def counters(self) -> dict[str, dict[str, Any]]:
        """``{"nic": {...}, "port": {...}, "link": {...}}`` keyed by interface/link name."""
        return {
            "nic": {n.name: n.counters() for n in self.nics},
            "port": {p.name: p.counters() for sw in self.switches.values() for p in sw.ports},
            "link": {ch.name: ch.counters() for link in self.links for ch in (link.ab, link.ba)},
            "core": {"events": self.loop.events, "now_ps": self.loop.now},
        }

    def packet_hops(self) -> int:
        """Frames put on any link so far."""
        return sum(link.ab.tx_frames + link.ba.tx_frames for link in self.links)


__all__ = ["Network"]
