"""The experiment runner for ``transport.stack = "roce"``: the same fabric, impairments,
workload, sampling and results as a UET run, with a :class:`uet.roce.endpoint.RoceEndpoint`
on every host (RC QPs, go-back-N or IRN, DCQCN, per-QP ECMP; ``docs/roce.md``).

Every flow is one RDMA WRITE of ``size`` bytes into the destination's sink region (the
R_Key every host knows out of band), split over ``transport.roce.qps_per_flow`` QPs; it
completes when the last part's ACK reaches the sender, i.e. when all its data is placed.
Collectives carry real bytes and are checked byte for byte, as with UET. An independent
audit at each receiver counts, per flow, the payload bytes placed and any packet placed
twice (which the RC responder must never do).
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from uet.experiments.config import roce_config
from uet.experiments.ideal import TopologyModel, WireFormat
from uet.experiments.uet_stack import Runner, SinkSpace
from uet.experiments.workload import Flow
from uet.roce.config import RoceConfig
from uet.roce.constants import PSN_MASK
from uet.roce.endpoint import RoceEndpoint, RoceMessage, factory
from uet.roce.qp import qpn_for

#: Ethernet 14 + IPv4 20 + UDP 8 + BTH 12 + ICRC 4 (a WRITE's first packet adds a 16 B RETH)
ROCE_HEADER = 58
#: the same with IPv6 (40 B header)
ROCE_HEADER_V6 = 78
#: an ACK: headers + AETH 4
ROCE_ACK = 62


class RoceAudit:
    """Receive-side audit of one host: which flow each placed packet belongs to (by the
    sender's address, the receiving QP and the PSN, registered when the sender posts),
    first-copy bytes per flow, and packets placed twice."""

    def __init__(self) -> None:
        self.owner: dict[tuple[str, int, int], int] = {}  # (src ip, qpn, psn) -> flow id
        self.keys: dict[int, list[tuple[str, int, int]]] = {}
        self.placed_keys: set[tuple[str, int, int]] = set()
        self.flow_bytes: Counter[int] = Counter()
        self.flow_dups: Counter[int] = Counter()
        self.duplicates = 0

    def expect(self, src_ip: str, qpn: int, first_psn: int, npkts: int, flow_id: int) -> None:
        keys = [(src_ip, qpn, (first_psn + i) & PSN_MASK) for i in range(npkts)]
        self.keys.setdefault(flow_id, []).extend(keys)
        for k in keys:
            self.owner[k] = flow_id

    def done(self, flow_id: int) -> None:
        for k in self.keys.pop(flow_id, ()):
            self.owner.pop(k, None)
            self.placed_keys.discard(k)

    def placed(self, peer_ip: str, qpn: int, kind: str, psn: int, offset: int, nbytes: int,
               last: bool) -> None:
        k = (peer_ip, qpn, psn)
        fid = self.owner.get(k)
        if fid is None:
            return
        if k in self.placed_keys:
            self.flow_dups[fid] += 1
            self.duplicates += 1
        else:
            self.placed_keys.add(k)
            self.flow_bytes[fid] += nbytes


class RoceRunner(Runner):
    """:class:`~uet.experiments.uet_stack.Runner` with RoCEv2 end points."""

    def roce(self) -> RoceConfig:
        """The stack's settings; with IRN and no explicit cap, BDP-FC caps the packets in
        flight at one bandwidth-delay product of the longest path."""
        cfg = roce_config(self.cfg)
        if cfg.irn and cfg.max_inflight_packets == 0:
            model = TopologyModel.from_config(self.cfg["topology"])
            bdp = model.host_rate_bps * model.base_rtt_ps() / 8e12
            cfg.max_inflight_packets = max(1, math.ceil(bdp / cfg.mtu))
        return cfg

    def endpoint_factory(self) -> Any:
        self.roce_cfg = self.roce()
        sink = max((f.size for f in self.wl.flows), default=0)
        # as the UET runner: one scratch sink for bulk flows, a sink per host only for
        # collectives, whose bytes are read back and checked
        return factory(self.roce_cfg, sink_bytes=sink, shared_sink=self.bytes_state is None)

    def attach(self, fab: Any) -> None:
        self.eps: list[Any] = [fab.endpoint(i) for i in range(len(fab.net.nics))]
        self.audits: list[Any] = []
        for ep in self.eps:
            audit = RoceAudit()
            ep.on_deliver = audit.placed
            self.audits.append(audit)
        self.sinks = [SinkSpace(ep) for ep in self.eps]

    def _submit(self, flow: Flow, ep: RoceEndpoint, payload: Any, offset: int,
                now: int) -> None:
        msg = ep.send_message(now, flow.dst, flow.size, payload, offset=offset)
        audit = self.audits[flow.dst]
        for k, w in enumerate(msg.parts):
            audit.expect(ep.ip, ep.qp(flow.dst, k).dqpn, w.first_psn, w.npkts, flow.id)
        if msg.done:
            self._roce_done(flow, msg)
            return
        self.pending[flow.src, msg.id] = flow.id
        msg.callbacks.append(lambda m, f=flow: self._roce_done(f, m))

    def _roce_done(self, flow: Flow, msg: RoceMessage) -> None:
        self.pending.pop((flow.src, msg.id), None)
        self.audits[flow.dst].done(flow.id)
        self._finished(flow, msg, self.loop.now)

    def window(self, src: int, dst: int) -> int | None:
        """What the congestion-window plot shows for a RoCE flow: the DCQCN rate of its
        QPs (summed) times the base RTT, in bytes (the data that rate keeps in flight)."""
        ep = self.eps[src]
        qps = [ep.qps.get(qpn_for(dst, k)) for k in range(self.roce_cfg.qps_per_flow)]
        rtt = getattr(self, "_rtt_ps", None)
        if rtt is None:
            rtt = self._rtt_ps = TopologyModel.from_config(self.cfg["topology"]).base_rtt_ps()
        rate = sum(qp.rp.rc if qp.rp is not None else ep.line for qp in qps if qp is not None)
        return round(rate * rtt / 8e12) if rate else None

    def _error(self, op: Any) -> str | None:
        if op is None or op.ok:
            return None
        return f"RDMA WRITE failed: {op.status.name}"

    def _pdcs_closed(self) -> bool:
        return all(ep.idle() for ep in self.eps)

    def counters(self) -> dict[str, Any]:
        c = self.fab.counters()
        c["roce"] = {nic.name: dict(ep.stats) for nic, ep in zip(self.fab.net.nics, self.eps,
                                                                 strict=True)}
        return c

    def wire_format(self) -> WireFormat:
        header = ROCE_HEADER_V6 if self.cfg["topology"]["ipv6"] else ROCE_HEADER
        return WireFormat(payload=self.roce_cfg.mtu, header=header, ack=ROCE_ACK,
                          pad_last=False)
