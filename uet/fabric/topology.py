"""Topologies from parameters (a dict, e.g. loaded from TOML).

Kinds: ``back_to_back`` (two hosts, one cable), ``star`` (one switch), ``leaf_spine`` (two
tiers, optional oversubscription) and ``fat_tree`` (three-tier k-ary; k=4: 16 hosts,
k=8: 128). Hosts are numbered as htsim does: hosts 0,1 under the first ToR, 2,3 under the
second, ... (k/2 per ToR, (k/2)^2 per pod). Addresses: IPv4 ``10.<pod>.<tor>.<host+2>``
(``ipv6 = true``: ``fd00::<pod>:<tor>:<host+2>``), MAC ``02:00:0a:<pod>:<tor>:<host+2>``.
Interfaces: ``h<i>`` for hosts, ``<switch>.p<j>`` for switch ports (``tor0.p2``);
switches ``tor<n>``, ``agg<n>``, ``core<n>`` / ``leaf<n>``, ``spine<n>`` / ``sw0``.
Routing: up/down with ECMP over the up links, deterministic down.

Common keys (defaults are the htsim anchors): ``rate_gbps`` 100, ``delay_ns`` 1000,
``queue_bytes`` 178450 (1 BDP; data class), ``control_queue_bytes`` (= queue_bytes),
``ecn`` true, ``ecn_kmin`` 37350, ``ecn_kmax`` 145250, ``trimming`` true, ``pfc`` (false or
a table for :class:`~uet.fabric.pfc.PfcConfig`), ``ipv6`` false, ``reroute_us`` (None:
fixed routes; a delay: routes recomputed that long after each link state change,
:mod:`uet.fabric.routing`), ``impairments`` (a list of
tables with ``at`` (interface), ``direction`` (tx/rx/both) and
:class:`~uet.fabric.impairments.Impairments` keys).
"""

from __future__ import annotations

import ipaddress
from typing import Any

from uet.fabric.clock import NS, US
from uet.fabric.gcpause import paused_collector
from uet.fabric.network import Network
from uet.fabric.pfc import PfcConfig
from uet.fabric.switch import Switch, SwitchPort

COMMON = {
    "kind": None, "rate_gbps": 100, "delay_ns": 1000, "queue_bytes": 178_450,
    "control_queue_bytes": None, "ecn": True, "ecn_kmin": 37_350, "ecn_kmax": 145_250,
    "trimming": True, "pfc": False, "ipv6": False, "impairments": [], "reroute_us": None,
}
KINDS: dict[str, dict[str, Any]] = {
    "back_to_back": {},
    "star": {"hosts": 4},
    "leaf_spine": {"leaves": 4, "spines": 2, "hosts_per_leaf": 4, "oversubscription": 1.0,
                   "uplink_gbps": None},
    "fat_tree": {"k": 4},
}


def normalise(params: dict[str, Any]) -> dict[str, Any]:
    """Fill defaults and check keys; a bad key or value fails naming it."""
    kind = params.get("kind")
    if kind not in KINDS:
        raise ValueError(f"topology.kind={kind!r}: allowed {sorted(KINDS)}")
    allowed = {**COMMON, **KINDS[kind]}
    if "external" in params:
        raise ValueError("topology.external: hosts played by another process need the live "
                         "fabric (uet.runtime.live.LiveFabric): virtual time cannot wait "
                         "for a process that runs in real time")
    bad = set(params) - set(allowed)
    if bad:
        raise ValueError(f"topology ({kind}): unknown keys {sorted(bad)}; "
                         f"allowed: {sorted(allowed)}")
    out = {**allowed, **params}
    if kind == "fat_tree" and (out["k"] < 2 or out["k"] % 2):
        raise ValueError(f"topology.k={out['k']}: must be an even number >= 2")
    for key in ("rate_gbps", "queue_bytes"):
        if out[key] <= 0:
            raise ValueError(f"topology.{key}={out[key]}: must be > 0")
    if out["reroute_us"] is not None and not out["reroute_us"] >= 0:
        raise ValueError(f"topology.reroute_us={out['reroute_us']}: must be >= 0 (or absent: "
                         "fixed routes)")
    if out["control_queue_bytes"] is None:
        out["control_queue_bytes"] = out["queue_bytes"]
    return out


def _addr(p: dict[str, Any], a: int, b: int, c: int) -> tuple[str, str]:
    mac = f"02:00:0a:{a:02x}:{b:02x}:{c:02x}"
    if p["ipv6"]:
        return str(ipaddress.IPv6Address(f"fd00::{a:x}:{b:x}:{c:x}")), mac
    return f"10.{a}.{b}.{c}", mac


def _packed(ip: str) -> bytes:
    return ipaddress.ip_address(ip).packed


class _Builder:
    def __init__(self, net: Network, p: dict[str, Any]) -> None:
        self.net = net
        self.p = p
        self.rate = int(p["rate_gbps"] * 1e9)
        self.delay = int(p["delay_ns"] * NS)
        pfc = p["pfc"]
        self.pfc = None
        if pfc:
            self.pfc = PfcConfig.from_dict(pfc if isinstance(pfc, dict) else {})
        self.host_ports: dict[int, SwitchPort] = {}

    def host(self, a: int, b: int, c: int) -> int:
        ip, mac = _addr(self.p, a, b, c)
        nic = self.net.add_host(ip, mac, self.rate)
        return nic.index

    def switch(self, name: str) -> Switch:
        return self.net.add_switch(name, trimming=self.p["trimming"], pfc=self.pfc)

    def cable(self, a: Any, b: Any, rate: int | None = None) -> None:
        self.net.connect(a, b, rate or self.rate, self.delay)

    def host_link(self, sw: Switch, h: int) -> SwitchPort:
        port = self.net.add_switch_port(sw)
        self.cable(self.net.nics[h], port)
        self.host_ports[h] = port
        return port

    def finish(self) -> None:
        p, qos = self.p, self.net.qos
        qb = {qos.data_tc: p["queue_bytes"], qos.control_tc: p["control_queue_bytes"]}
        for tc in qos.priority:
            qb.setdefault(tc, p["queue_bytes"])
        ecn = {qos.data_tc: (p["ecn_kmin"], p["ecn_kmax"])} if p["ecn"] else {}
        for sw in self.net.switches.values():
            for port in sw.ports:
                sw.configure_port(port, queue_bytes=qb, ecn=ecn)
        self.net.finish_hosts()
        for imp in p["impairments"]:
            imp = dict(imp)
            at = imp.pop("at")
            direction = imp.pop("direction", "both")
            self.net.impair(at, imp, direction)
        if p["reroute_us"] is not None:
            self.net.enable_rerouting(int(p["reroute_us"] * US))
        self.net.meta["topology"] = p

    def ip(self, h: int) -> bytes:
        return _packed(self.net.hosts[h].ip)


def build(net: Network, params: dict[str, Any]) -> Network:
    """Fill ``net`` with the topology described by ``params``."""
    p = normalise(params)
    b = _Builder(net, p)
    with paused_collector():  # nothing built is garbage: no collection traversing it
        globals()["_build_" + p["kind"]](b)
        b.finish()
    return net


def _build_back_to_back(b: _Builder) -> None:
    h0, h1 = b.host(0, 0, 2), b.host(0, 0, 3)
    b.cable(b.net.nics[h0], b.net.nics[h1])


def _build_star(b: _Builder) -> None:
    n = b.p["hosts"]
    if not 1 <= n <= 250 * 256:
        raise ValueError(f"topology.hosts={n}: allowed 1..64000")
    sw = b.switch("sw0")
    hosts = [b.host(0, i // 250, i % 250 + 2) for i in range(n)]
    for h in hosts:
        port = b.host_link(sw, h)
        sw.add_route(b.ip(h), [port])


def _build_leaf_spine(b: _Builder) -> None:
    p = b.p
    nl, ns, hpl = p["leaves"], p["spines"], p["hosts_per_leaf"]
    up_rate = int(p["uplink_gbps"] * 1e9) if p["uplink_gbps"] else \
        int(b.rate * hpl / (ns * p["oversubscription"]))
    leaves = [b.switch(f"leaf{i}") for i in range(nl)]
    spines = [b.switch(f"spine{i}") for i in range(ns)]
    hosts_of: list[list[int]] = []
    for li, leaf in enumerate(leaves):
        hs = [b.host(0, li, i + 2) for i in range(hpl)]
        hosts_of.append(hs)
        for h in hs:
            b.host_link(leaf, h)
    up: list[list[SwitchPort]] = [[] for _ in leaves]
    down: list[list[SwitchPort]] = [[] for _ in spines]
    for li, leaf in enumerate(leaves):
        for si, spine in enumerate(spines):
            lp, sp = b.net.add_switch_port(leaf), b.net.add_switch_port(spine)
            b.cable(lp, sp, up_rate)
            up[li].append(lp)
            down[si].append(sp)
    # routes in bulk, one call per destination set (the same routes, in host order, as one
    # add_route per host and switch)
    ips_of = [[b.ip(h) for h in hs] for hs in hosts_of]
    every = dict.fromkeys(ip for ips in ips_of for ip in ips)
    for li, leaf in enumerate(leaves):
        leaf.add_routes(every, up[li])
        for h, ip in zip(hosts_of[li], ips_of[li], strict=True):
            leaf.add_route(ip, [b.host_ports[h]])
    for si, spine in enumerate(spines):
        for lj, ips in enumerate(ips_of):
            spine.add_routes(ips, [down[si][lj]])


def _build_fat_tree(b: _Builder) -> None:
    k = b.p["k"]
    half = k // 2
    tors = [b.switch(f"tor{i}") for i in range(k * half)]
    aggs = [b.switch(f"agg{i}") for i in range(k * half)]
    cores = [b.switch(f"core{i}") for i in range(half * half)]
    hosts: list[int] = []
    for pod in range(k):
        for t in range(half):
            for i in range(half):
                h = b.host(pod, t, i + 2)
                hosts.append(h)
                b.host_link(tors[pod * half + t], h)
    tor_up: list[list[SwitchPort]] = [[] for _ in tors]
    agg_down: list[dict[int, SwitchPort]] = [{} for _ in aggs]
    for pod in range(k):
        for t in range(half):
            ti = pod * half + t
            for a in range(half):
                ai = pod * half + a
                tp = b.net.add_switch_port(tors[ti])
                ap = b.net.add_switch_port(aggs[ai])
                b.cable(tp, ap)
                tor_up[ti].append(tp)
                agg_down[ai][ti] = ap
    agg_up: list[list[SwitchPort]] = [[] for _ in aggs]
    core_down: list[dict[int, SwitchPort]] = [{} for _ in cores]
    for pod in range(k):
        for a in range(half):
            ai = pod * half + a
            for j in range(half):
                ci = a * half + j
                ap = b.net.add_switch_port(aggs[ai])
                cp = b.net.add_switch_port(cores[ci])
                b.cable(ap, cp)
                agg_up[ai].append(ap)
                core_down[ci][pod] = cp
    # up/down routes in bulk, one call per destination set: the same routes, in host
    # order, as one add_route per host and switch (hosts are numbered ToR by ToR and pod
    # by pod, so a ToR's and a pod's hosts are consecutive)
    ips = [b.ip(h) for h in hosts]
    every = dict.fromkeys(ips)
    ips_of_tor = [ips[ti * half:(ti + 1) * half] for ti in range(len(tors))]
    ips_of_pod = [ips[pod * half * half:(pod + 1) * half * half] for pod in range(k)]
    for ti, tor in enumerate(tors):
        tor.add_routes(every, tor_up[ti])
        for j in range(ti * half, (ti + 1) * half):
            tor.add_route(ips[j], [b.host_ports[hosts[j]]])
    for ai, agg in enumerate(aggs):
        agg.add_routes(every, agg_up[ai])
        for ti in range((ai // half) * half, (ai // half + 1) * half):
            agg.add_routes(ips_of_tor[ti], [agg_down[ai][ti]])
    for ci, core in enumerate(cores):
        for pod in range(k):
            core.add_routes(ips_of_pod[pod], [core_down[ci][pod]])
