"""The ideal flow completion time, the yardstick every FCT is reported against.

Following htsim's validation runs (``docs/validation.md``, "The ideal"): a flow of ``size``
bytes is cut into packets of ``payload`` bytes plus ``header`` bytes of headers. Alone on an
idle path of ``h`` links its ideal FCT is

    serialisation of all its wire bytes at the path's bottleneck rate
    + the propagation latency of the h links
    + (h - 1) store-and-forward times of one full packet (one per switch)

(2 MB between pods of a k=4 fat tree at 100 Gb/s, 1 µs links: 162.7 + 6 + 5 x 0.332 =
170.3 µs). Flows that start together (same start time, no dependencies) and share a host
link cannot beat that link: an N:1 incast's ideal is the serialisation of all N flows at the
receiver's rate plus the path terms (15 x 2 MB: 2448 µs). Flows that wait for other flows
(collectives) are measured from their own start and get the single-flow ideal.

Times are integer picoseconds; the arithmetic is exact (rounded up to the ps).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from uet.experiments.validated import host_count

PS_PER_S = 10**12


def ser_ps(nbytes: int, rate_bps: float) -> int:
    """Serialisation time of ``nbytes`` at ``rate_bps`` in ps (rounded up)."""
    return -int(-(nbytes * 8 * PS_PER_S) // rate_bps)


@dataclass(frozen=True, slots=True)
class WireFormat:
    """How a message becomes frames: payload and header bytes per packet.

    ``pad_last``: count the last packet as a full one, as htsim does (490 x 4150 B for
    2 MB); False counts only the bytes actually sent.
    """

    payload: int = 4086
    header: int = 64
    ack: int = 64
    pad_last: bool = True

    @property
    def packet(self) -> int:
        """Bytes of a full packet on the wire."""
        return self.payload + self.header

    def packets(self, size: int) -> int:
        return max(1, -(-size // self.payload))

    def wire_bytes(self, size: int) -> int:
        """Bytes a message of ``size`` puts on the wire (headers included)."""
        n = self.packets(size)
        if self.pad_last:
            return n * self.packet
        return size + n * self.header

    def first_packet(self, size: int) -> int:
        return min(size, self.payload) + self.header

    @classmethod
    def htsim(cls) -> WireFormat:
        """htsim's UEC packets: 4150 B data (4086 payload), 64 B ACKs and headers."""
        return cls()

    @classmethod
    def emulator(cls, payload: int = 4096, *, ipv6: bool = False,
                 cc_header: bool = False, native_ip: bool = False) -> WireFormat:
        """The emulator's own frames: Ethernet 14 + IPv4 20 (IPv6 40) + UDP 8 (native IP:
        the 4-byte entropy header) + PDS 12 (16 for RUD/ROD_CC_REQ) + SES standard 44 =
        98 B of headers per data packet (a 4096 B payload is a 4194 B frame), 74 B plain
        ACKs; the last packet carries only the bytes left. The fabric's links count no
        preamble, IFG or FCS (docs/fabric.md), so neither does this."""
        ip = 40 if ipv6 else 20
        l4 = 4 if native_ip else 8
        header = 14 + ip + l4 + (16 if cc_header else 12) + 44
        return cls(payload=payload, header=header, ack=14 + ip + l4 + 32, pad_last=False)


@dataclass(frozen=True, slots=True)
class Hop:
    """One link of a path: its rate, latency and how many parallel links share the tier."""

    rate_bps: float
    delay_ps: int
    parallel: int = 1


def ideal_fct_ps(size: int, path: Sequence[Hop], wire: WireFormat = WireFormat(),
                 *, shared_bytes: int = 0, shared_rate_bps: float | None = None) -> int:
    """Ideal completion time of one flow over ``path`` (see the module docstring).

    ``shared_bytes``/``shared_rate_bps``: wire bytes that must cross a shared host link
    together with this flow (an incast's total at the receiver); the serialisation term is
    the larger of the flow's own and the shared link's.
    """
    if not path:
        raise ValueError("a path has at least one link")
    bottleneck = min(h.rate_bps * h.parallel for h in path)
    serial = ser_ps(wire.wire_bytes(size), bottleneck)
    if shared_bytes and shared_rate_bps:
        serial = max(serial, ser_ps(shared_bytes, shared_rate_bps))
    latency = sum(h.delay_ps for h in path)
    pkt = wire.packet if wire.pad_last else wire.first_packet(size)
    # one store-and-forward per switch: every hop's packet time but the bottleneck's
    hops = sorted(path, key=lambda h: h.rate_bps * h.parallel)
    store = sum(ser_ps(pkt, h.rate_bps) for h in hops[1:])
    return serial + latency + store


@dataclass(frozen=True, slots=True)
class TopologyModel:
    """Paths of a configured topology, without building it (htsim host numbering)."""

    kind: str
    hosts: int
    host_rate_bps: float
    delay_ps: int
    k: int = 0
    hosts_per_leaf: int = 0
    spines: int = 0
    uplink_rate_bps: float = 0.0

    @classmethod
    def from_config(cls, topo: dict[str, Any]) -> TopologyModel:
        """From a validated ``[topology]`` table."""
        rate = topo["rate_gbps"] * 1e9
        delay = round(topo["delay_ns"] * 1000)
        kw: dict[str, Any] = {}
        if topo["kind"] == "fat_tree":
            kw["k"] = topo["k"]
        elif topo["kind"] == "leaf_spine":
            hpl, ns = topo["hosts_per_leaf"], topo["spines"]
            up = topo.get("uplink_gbps")
            kw.update(hosts_per_leaf=hpl, spines=ns,
                      uplink_rate_bps=up * 1e9 if up else rate * hpl
                      / (ns * topo["oversubscription"]))
        return cls(topo["kind"], host_count(topo), rate, delay, **kw)

    def path(self, src: int, dst: int) -> list[Hop]:
        """The links from host ``src`` to host ``dst`` (tiers of parallel links merged)."""
        if src == dst or not (0 <= src < self.hosts and 0 <= dst < self.hosts):
            raise ValueError(f"no path {src}->{dst} among {self.hosts} hosts")
        host = Hop(self.host_rate_bps, self.delay_ps)
        if self.kind == "back_to_back":
            return [host]
        if self.kind == "star":
            return [host, host]
        if self.kind == "leaf_spine":
            if src // self.hosts_per_leaf == dst // self.hosts_per_leaf:
                return [host, host]
            up = Hop(self.uplink_rate_bps, self.delay_ps, self.spines)
            return [host, up, up, host]
        half = self.k // 2
        if src // half == dst // half:
            return [host, host]
        mid = Hop(self.host_rate_bps, self.delay_ps, half)
        if src // (half * half) == dst // (half * half):
            return [host, mid, mid, host]
        return [host, mid, mid, mid, mid, host]

    def hops(self, src: int, dst: int) -> int:
        return len(self.path(src, dst))

    def diameter(self) -> int:
        """Links on the longest host-to-host path."""
        if self.kind == "back_to_back":
            return 1
        if self.kind == "star":
            return 2
        if self.kind == "leaf_spine":
            return 4 if self.hosts > self.hosts_per_leaf else 2
        return 6

    def base_rtt_ps(self, wire: WireFormat = WireFormat()) -> int:
        """Unloaded RTT over the longest path: a data packet out, an ACK back (14.02 µs)."""
        h = self.diameter()
        return (2 * h * self.delay_ps + h * ser_ps(wire.packet, self.host_rate_bps)
                + h * ser_ps(wire.ack, self.host_rate_bps))

    def bdp_bytes(self, wire: WireFormat = WireFormat()) -> int:
        """Bandwidth-delay product rounded up to whole packets (43 x 4150 B = 178,450 B)."""
        raw = self.host_rate_bps * self.base_rtt_ps(wire) / 8 / PS_PER_S
        return math.ceil(raw / wire.packet) * wire.packet


def ideal_fcts(flows: Iterable[Any], model: TopologyModel,
               wire: WireFormat = WireFormat()) -> dict[int, int]:
    """Ideal FCT (ps) of every flow (objects or dicts with id, src, dst, size, start_ps,
    depends_on), sharing host links among flows that start together without dependencies.
    """
    items = [_as_dict(f) for f in flows]
    groups: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for f in items:
        if not f.get("depends_on"):
            groups[f.get("start_ps") or 0].append(f)
    at_dst: dict[tuple[int, int], int] = defaultdict(int)
    at_src: dict[tuple[int, int], int] = defaultdict(int)
    for t, group in groups.items():
        for f in group:
            at_dst[t, f["dst"]] += wire.wire_bytes(f["size"])
            at_src[t, f["src"]] += wire.wire_bytes(f["size"])
    out: dict[int, int] = {}
    for f in items:
        shared = 0
        if not f.get("depends_on"):
            t = f.get("start_ps") or 0
            shared = max(at_dst[t, f["dst"]], at_src[t, f["src"]])
        out[f["id"]] = ideal_fct_ps(f["size"], model.path(f["src"], f["dst"]), wire,
                                    shared_bytes=shared, shared_rate_bps=model.host_rate_bps)
    return out


def _as_dict(f: Any) -> dict[str, Any]:
    if isinstance(f, dict):
        return f
    return {k: getattr(f, k) for k in ("id", "src", "dst", "size", "start_ps", "depends_on")}
