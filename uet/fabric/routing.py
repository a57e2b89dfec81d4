"""Routing that reacts to link failures: shortest-path ECMP recomputed after a change.

The topologies install fixed up/down routes (:mod:`uet.fabric.topology`); a link that goes
down keeps attracting the flows ECMP hashes onto it, and only the transport (EV penalties,
retransmission) gets around it. With rerouting on (``topology.reroute_us``), every link
state change schedules, ``delay_ps`` later, what an idealised routing protocol converges
to: for every switch and every host, the ports on a shortest path over the links that are
up then (hosts do not forward), in port order. A switch that has no path left to a host
keeps its old route (the frames die on the dead link, counted there). Routes that do not
change are left alone, so ECMP keeps hashing their flows the same way.
"""

from __future__ import annotations

import ipaddress
from collections import deque
from typing import Any, Protocol

from uet.fabric.switch import Switch, SwitchPort


class RoutedNetwork(Protocol):
    """What the rerouter reads of the network (``uet.fabric.network.Network``, which sits
    above this module): its core and log, links, interfaces, hosts and switches."""

    loop: Any
    log: Any
    links: list[Any]
    ifaces: dict[str, Any]
    hosts: list[Any]
    nics: list[Any]
    switches: dict[str, Switch]


class Rerouter:
    """Recomputes a network's switch routes ``delay_ps`` after each link state change."""

    def __init__(self, net: RoutedNetwork, delay_ps: int) -> None:
        if delay_ps < 0:
            raise ValueError(f"reroute delay must be >= 0 ps, got {delay_ps}")
        self.net = net
        self.delay_ps = delay_ps
        self.recomputations = 0
        self._due: set[int] = set()
        for link in net.links:
            link.ab.on_change = self._changed
            link.ba.on_change = self._changed

    def _changed(self, _channel: Any) -> None:
        t = self.net.loop.now + self.delay_ps
        if t not in self._due:  # several changes at one time converge once
            self._due.add(t)
            self.net.loop.at(t, self._converge, t)

    def _converge(self, t: int) -> None:
        self._due.discard(t)
        changed = self.recompute()
        self.net.log.emit(self.net.loop.now, "reroute", routes_changed=changed)

    def recompute(self) -> int:
        """Install the shortest-path routes over the links up now; returns how many
        (switch, host) routes changed."""
        self.recomputations += 1
        net = self.net
        # for every node, the nodes that reach it in one hop over a channel that is up
        into: dict[int, list[Any]] = {}
        for port in net.ifaces.values():
            ch = port.channel
            if ch is not None and ch.up:
                into.setdefault(id(_node(ch.rx)), []).append(_node(port))
        changed = 0
        for host, nic in zip(net.hosts, net.nics, strict=True):
            dist = {id(nic): 0}
            todo = deque([nic])
            while todo:
                v = todo.popleft()
                for u in into.get(id(v), ()):
                    if id(u) not in dist and isinstance(u, Switch):  # hosts do not forward
                        dist[id(u)] = dist[id(v)] + 1
                        todo.append(u)
            ip = ipaddress.ip_address(host.ip).packed
            for sw in net.switches.values():
                old = sw.routes.get(ip)
                if old is None or id(sw) not in dist:
                    continue  # no route there, or unreachable now: keep the old one
                want = dist[id(sw)] - 1
                new = [p for p in sw.ports if p.channel is not None and p.channel.up
                       and dist.get(id(_node(p.channel.rx))) == want]
                if new and new != old:
                    sw.add_route(ip, new)
                    changed += 1
        return changed


def _node(port: Any) -> Any:
    """The node a port belongs to: its switch, or the host interface itself (a live
    driver's wire end stands for the port at its far end as ``far``)."""
    port = getattr(port, "far", port)
    return port.switch if isinstance(port, SwitchPort) else port
