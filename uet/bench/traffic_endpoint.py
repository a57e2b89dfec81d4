"""A fabric test and benchmark end point: real UET frames, minimal transport logic.

**Not the protocol implementation** (that is ``uet.pds`` / ``uet.ses`` glued by
``uet.endpoint.fep``). It exists so the fabric can be exercised, tested and benchmarked with
realistic traffic before the real end point plugs in through the same
:class:`~uet.fabric.endpoint.FrameEndpoint` shape.

Sender: each message to a destination goes out as RUD requests (``PdsRequest`` with SYN
until the first ACK names the target's PDC, AR on the last packet of a message and on
retransmissions) carrying standard SES headers (SEND, SOM/EOM, message offset), one PSN per
packet, sprayed over ``evs`` entropy values (UDP source ports; 1 = per-flow ECMP), data DSCP
``qos.dscp_data`` (trimmable) with ECT(0). A per-flow byte window bounds what is in flight.
Every frame is encoded with ``uet.wire.codec.encode_frame``.

Receiver: decodes every frame (``decode_frame``), tracks PSNs per PDC, and answers with an
ACK (cumulative PSN + the PSN that triggered it, ECN echo) every ``ack_every`` packets, at
once on AR, ECN-CE or when an arrival fills a gap (so a flow ending with reordered packets
does not wait for the RTO); a trimmed packet (trimmed DSCPs) is NACKed with
``TRIMMED`` or ``TRIMMED_LASTHOP``. The sender retransmits NACKed PSNs, and everything
unacknowledged after ``rto_ps`` without progress (go-back-N). No congestion control.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable
from typing import Any

from uet.fabric.clock import US
from uet.fabric.endpoint import HostContext
from uet.wire.codec import decode_frame, encode_frame
from uet.wire.constants import (
    AckFlag,
    NackCode,
    NextHeader,
    PdsType,
    ReqFlag,
    SesFlag,
    SesOpcode,
)
from uet.wire.errors import DecodeError
from uet.wire.records import Frame, PdsAck, PdsNack, PdsRequest, SesStandard, psn_diff

#: Payload per packet so that a full data frame is 4150 B (Eth 14 + IPv4 20 + UDP 8 +
#: PDS 12 + SES 44 = 98 B of headers), the htsim wire size.
DEFAULT_MSS = 4052
_ZEROS = bytes(65536)
_PSN_MASK = 0xFFFFFFFF


class Message:
    """One message: ``done_at`` (ps) is set when every packet has been acknowledged."""

    __slots__ = ("id", "src", "dst", "size", "npkts", "acked", "started_at", "done_at",
                 "callbacks")

    def __init__(self, mid: int, src: str, dst: str, size: int, npkts: int, now: int) -> None:
        self.id = mid
        self.src = src
        self.dst = dst
        self.size = size
        self.npkts = npkts
        self.acked = 0
        self.started_at = now
        self.done_at: int | None = None
        self.callbacks: list[Callable[[Message], None]] = []

    @property
    def done(self) -> bool:
        return self.done_at is not None

    @property
    def fct_ps(self) -> int | None:
        """Flow completion time (ps), or None while running."""
        return None if self.done_at is None else self.done_at - self.started_at

    def __repr__(self) -> str:
        return (f"Message({self.id}, {self.src}->{self.dst}, {self.size} B, "
                f"{self.acked}/{self.npkts}, done_at={self.done_at})")


class _Flow:
    """Initiator side of one PDC (to one destination)."""

    __slots__ = ("dst_ip", "dst_mac", "spdcid", "dpdcid", "start_psn", "next_psn", "cack",
                 "unacked", "new", "rtx", "rtx_set", "evs", "ev_i", "inflight",
                 "last_progress", "req", "ses", "frame")

    def __init__(self, ep: TrafficEndpoint, dst_ip: str, dst_mac: str, spdcid: int) -> None:
        rng = ep.rng
        self.dst_ip = dst_ip
        self.dst_mac = dst_mac
        self.spdcid = spdcid
        self.dpdcid: int | None = None
        self.start_psn = rng.randrange(1 << 31)
        self.next_psn = self.start_psn
        self.cack = (self.start_psn - 1) & _PSN_MASK
        self.unacked: dict[int, tuple[Message, int]] = {}
        self.new: deque[tuple[Message, int]] = deque()
        self.rtx: deque[int] = deque()
        self.rtx_set: set[int] = set()
        n = ep.evs
        base = rng.randrange(0xC000, 0x10000 - n + 1)
        self.evs = [base + i for i in range(n)]
        rng.shuffle(self.evs)
        self.ev_i = 0
        self.inflight = 0
        self.last_progress = 0
        self.req = PdsRequest(type=PdsType.RUD_REQ, next_hdr=NextHeader.REQ_STD,
                              spdcid=spdcid)
        self.ses = SesStandard(opcode=SesOpcode.SEND, job_id=ep.job_id)
        ctx = ep.ctx
        self.frame = Frame(self.req, self.ses, None, b"", src_mac=ctx.mac, dst_mac=dst_mac,
                           src_ip=ctx.ip, dst_ip=dst_ip, dscp=ep.dscp_data, ecn=2)


class _Target:
    """Target side of one PDC (from one source PDC)."""

    __slots__ = ("pdcid", "peer_pdcid", "src_ip", "src_mac", "expected", "ooo", "since_ack")

    def __init__(self, pdcid: int, peer: int, src_ip: str, src_mac: str, first: int) -> None:
        self.pdcid = pdcid
        self.peer_pdcid = peer
        self.src_ip = src_ip
        self.src_mac = src_mac
        self.expected = first
        self.ooo: set[int] = set()
        self.since_ack = 0


class TrafficEndpoint:
    """Fabric test/bench end point (see the module docstring). Sans-IO."""

    def __init__(self, ctx: HostContext, *, mss: int = DEFAULT_MSS, evs: int = 128,
                 window_bytes: int | None = 2 * 178_450, ack_every: int = 4,
                 rto_ps: int = 100 * US, job_id: int = 1, ecn_capable: bool = True) -> None:
        if not 1 <= evs <= 0x4000:
            raise ValueError(f"evs={evs}: allowed 1..16384")
        self.ctx = ctx
        self.mss = mss
        self.evs = evs
        self.window = window_bytes if window_bytes is not None else 1 << 62
        self.ack_every = ack_every
        self.rto = rto_ps
        self.job_id = job_id
        self.dscp_data = ctx.qos.dscp_data
        self.dscp_control = ctx.qos.dscp_control
        self.trimmed_dscps = {ctx.qos.dscp_trimmed: NackCode.TRIMMED,
                              ctx.qos.dscp_trimmed_lasthop: NackCode.TRIMMED_LASTHOP}
        self.ecn = 2 if ecn_capable else 0
        self.rng = random.Random(ctx.seed)
        self.flows: dict[str, _Flow] = {}
        self.flow_by_pdc: dict[int, _Flow] = {}
        self.active: deque[_Flow] = deque()
        self.targets: dict[tuple[str, int], _Target] = {}
        self.control: deque[bytes] = deque()
        self.messages: list[Message] = []
        self._next_pdc = 1
        self._mac: dict[str, str] = {ip: mac for ip, mac in ctx.peers.values()}
        self._ack_pds = PdsAck()
        self._ack_frame = Frame(self._ack_pds, None, None, b"", src_mac=ctx.mac,
                                src_ip=ctx.ip, dscp=self.dscp_control)
        self.stats: dict[str, int] = dict.fromkeys(
            ("tx_data", "tx_rtx", "tx_ack", "tx_nack", "rx_data", "rx_dup", "rx_trimmed",
             "rx_ack", "rx_nack", "rx_ecn_ce", "decode_errors", "rto"), 0)

    # ---------------------------------------------------------------- application side

    def send_message(self, now: int, dst: int | str, nbytes: int) -> Message:
        """Queue a message of ``nbytes`` to host index or IP ``dst``; returns its handle."""
        if isinstance(dst, int):
            dst_ip, dst_mac = self.ctx.peers[dst]
        else:
            dst_ip, dst_mac = dst, self._mac.get(dst, self.ctx.gateway_mac)
        flow = self.flows.get(dst_ip)
        if flow is None:
            flow = _Flow(self, dst_ip, dst_mac, self._next_pdc)
            flow.last_progress = now
            self._next_pdc += 1
            self.flows[dst_ip] = flow
            self.flow_by_pdc[flow.spdcid] = flow
        npkts = max(1, -(-nbytes // self.mss))
        msg = Message(len(self.messages), self.ctx.ip, dst_ip, nbytes, npkts, now)
        self.messages.append(msg)
        for seg in range(npkts):
            flow.new.append((msg, seg))
        if flow not in self.active:
            self.active.append(flow)
        return msg

    # ---------------------------------------------------------------- FrameEndpoint

    def pop_control(self, now: int) -> bytes | None:
        return self.control.popleft() if self.control else None

    def pop_data(self, now: int) -> bytes | None:
        active = self.active
        for _ in range(len(active)):
            flow = active[0]
            active.rotate(-1)
            if flow.rtx:
                psn = flow.rtx.popleft()
                flow.rtx_set.discard(psn)
                item = flow.unacked.get(psn)
                if item is None:
                    continue
                self.stats["tx_rtx"] += 1
                return self._encode(flow, psn, item[0], item[1], retx=True, now=now)
            if flow.new and flow.inflight < self.window:
                if flow.dpdcid is None and psn_diff(flow.next_psn, flow.start_psn) >= 0xFFF:
                    continue  # SYN psn_offset is 12 bits: wait for the first ACK
                msg, seg = flow.new.popleft()
                psn = flow.next_psn
                flow.next_psn = (psn + 1) & _PSN_MASK
                if not flow.unacked:
                    flow.last_progress = now
                flow.unacked[psn] = (msg, seg)
                flow.inflight += self._seg_len(msg, seg)
                self.stats["tx_data"] += 1
                return self._encode(flow, psn, msg, seg, retx=False, now=now)
        return None

    def next_deadline(self) -> int | None:
        best = None
        for flow in self.active:
            if flow.unacked:
                t = flow.last_progress + self.rto
                if best is None or t < best:
                    best = t
        return best

    def handle_timer(self, now: int) -> None:
        for flow in self.active:
            if flow.unacked and now >= flow.last_progress + self.rto:
                self.stats["rto"] += 1
                self.ctx.log(now, "rto", host=self.ctx.name, dst=flow.dst_ip,
                             unacked=len(flow.unacked))
                for psn in sorted(flow.unacked, key=lambda p: psn_diff(p, flow.cack)):
                    if psn not in flow.rtx_set:
                        flow.rtx.append(psn)
                        flow.rtx_set.add(psn)
                flow.last_progress = now

    def receive(self, now: int, data: bytes) -> None:
        try:
            f = decode_frame(data)
        except DecodeError:
            self.stats["decode_errors"] += 1
            return
        pds = f.pds
        t = pds.type
        if t == PdsType.RUD_REQ:
            self._on_request(now, f, pds)
        elif t == PdsType.ACK:
            self._on_ack(now, pds)
        elif t == PdsType.NACK:
            self._on_nack(now, pds)
        else:
            self.stats["decode_errors"] += 1

    # ---------------------------------------------------------------- sender internals

    def _seg_len(self, msg: Message, seg: int) -> int:
        return min(self.mss, msg.size - seg * self.mss) if msg.size else 0

    def _encode(self, flow: _Flow, psn: int, msg: Message, seg: int, *, retx: bool,
                now: int) -> bytes:
        req, ses, frame = flow.req, flow.ses, flow.frame
        last = seg == msg.npkts - 1
        flags = ReqFlag.AR if (last or retx) else 0
        if retx:
            flags |= ReqFlag.RETX
        if flow.dpdcid is None:
            flags |= ReqFlag.SYN
            req.psn_offset = psn_diff(psn, flow.start_psn) & 0xFFF
            req.dpdcid = 0
        else:
            req.dpdcid = flow.dpdcid
        req.flags = int(flags)
        req.psn = psn
        req.clear_psn_offset = 0
        n = self._seg_len(msg, seg)
        sflags = (SesFlag.SOM if seg == 0 else 0) | (SesFlag.EOM if last else 0)
        ses.flags = int(sflags)
        ses.message_id = msg.id & 0xFFFF
        ses.request_length = msg.size
        ses.payload_length = n
        ses.message_offset = seg * self.mss
        ses.buffer_offset = seg * self.mss
        frame.payload = _ZEROS[:n]
        frame.ev = flow.evs[flow.ev_i]
        flow.ev_i = (flow.ev_i + 1) % len(flow.evs)
        frame.ecn = self.ecn
        return encode_frame(frame)

    def _release(self, flow: _Flow, psn: int, now: int) -> None:
        item = flow.unacked.pop(psn, None)
        if item is None:
            return
        msg, seg = item
        flow.inflight -= self._seg_len(msg, seg)
        flow.last_progress = now
        msg.acked += 1
        if msg.acked == msg.npkts:
            msg.done_at = now
            for cb in msg.callbacks:
                cb(msg)

    def _on_ack(self, now: int, ack: Any) -> None:
        self.stats["rx_ack"] += 1
        flow = self.flow_by_pdc.get(ack.dpdcid)
        if flow is None:
            return
        if flow.dpdcid is None:
            flow.dpdcid = ack.spdcid
        cack = ack.cack_psn
        d = psn_diff(cack, flow.cack)
        if d > 0:
            psn = flow.cack
            for _ in range(d):
                psn = (psn + 1) & _PSN_MASK
                self._release(flow, psn, now)
            flow.cack = cack
        self._release(flow, ack.ack_psn, now)

    def _on_nack(self, now: int, nack: Any) -> None:
        self.stats["rx_nack"] += 1
        flow = self.flow_by_pdc.get(nack.dpdcid)
        if flow is None:
            return
        psn = nack.nack_psn
        if psn in flow.unacked and psn not in flow.rtx_set:
            flow.rtx.append(psn)
            flow.rtx_set.add(psn)

    # ---------------------------------------------------------------- receiver internals

    def _on_request(self, now: int, f: Frame, req: Any) -> None:
        key = (f.src_ip, req.spdcid)
        tgt = self.targets.get(key)
        if tgt is None:
            if not req.syn:
                self.stats["decode_errors"] += 1
                return
            tgt = _Target(self._next_pdc, req.spdcid, f.src_ip, f.src_mac, req.start_psn)
            self._next_pdc += 1
            self.targets[key] = tgt
        psn = req.psn
        code = self.trimmed_dscps.get(f.dscp)
        if code is not None:
            self.stats["rx_trimmed"] += 1
            self._nack(tgt, psn, code, f.ev)
            return
        self.stats["rx_data"] += 1
        ce = f.ecn == 3
        if ce:
            self.stats["rx_ecn_ce"] += 1
        d = psn_diff(psn, tgt.expected)
        in_order = d == 0
        if d < 0 or psn in tgt.ooo:
            self.stats["rx_dup"] += 1
            self._ack(tgt, psn, ce, f.ev, req.retx)
            return
        if in_order:
            e = (psn + 1) & _PSN_MASK
            ooo = tgt.ooo
            while e in ooo:
                ooo.discard(e)
                e = (e + 1) & _PSN_MASK
            filled = e != (psn + 1) & _PSN_MASK
            tgt.expected = e
        else:
            tgt.ooo.add(psn)
            filled = False
        tgt.since_ack += 1
        if req.ar or ce or filled or tgt.since_ack >= self.ack_every:
            self._ack(tgt, psn, ce, f.ev, req.retx)

    def _ack(self, tgt: _Target, psn: int, ce: bool, ev: int, retx: bool) -> None:
        tgt.since_ack = 0
        a = self._ack_pds
        cack = (tgt.expected - 1) & _PSN_MASK
        off = psn_diff(psn, cack)
        if not -32768 <= off <= 32767:
            off = 0
        a.cack_psn = cack
        a.ack_psn_offset = off
        a.flags = int((AckFlag.M if ce else 0) | (AckFlag.RETX if retx else 0))
        a.spdcid = tgt.pdcid
        a.dpdcid = tgt.peer_pdcid
        fr = self._ack_frame
        fr.dst_ip = tgt.src_ip
        fr.dst_mac = tgt.src_mac
        fr.ev = ev
        self.control.append(encode_frame(fr))
        self.stats["tx_ack"] += 1

    def _nack(self, tgt: _Target, psn: int, code: int, ev: int) -> None:
        n = PdsNack(nack_code=int(code), nack_psn=psn, spdcid=tgt.pdcid,
                    dpdcid=tgt.peer_pdcid, payload=tgt.expected)
        fr = Frame(n, None, None, b"", src_mac=self.ctx.mac, dst_mac=tgt.src_mac,
                   src_ip=self.ctx.ip, dst_ip=tgt.src_ip, ev=ev, dscp=self.dscp_control)
        self.control.append(encode_frame(fr))
        self.stats["tx_nack"] += 1

    # ---------------------------------------------------------------- reports

    def idle(self) -> bool:
        """Nothing left to send or acknowledge."""
        return not self.control and all(not f.unacked and not f.new for f in self.flows.values())


def factory(**kwargs: Any) -> Callable[[HostContext], TrafficEndpoint]:
    """An ``endpoint_factory`` building :class:`TrafficEndpoint` s with these options."""
    def make(ctx: HostContext) -> TrafficEndpoint:
        return TrafficEndpoint(ctx, **kwargs)
    return make
