"""One RC queue pair: its numbers and addresses, the requester and responder halves, the
DCQCN reaction and notification points, the NIC's pacing state for it, and the frames it
sends.

Connections are set up out of band, as RDMA applications do (the CM or a TCP side
channel exchanges QP numbers and start PSNs); here both ends derive them from the host
indices, so no setup traffic is emulated: the QP to peer ``p`` with index ``k`` is QPN
``0x100 + 64 p + k`` on every host, and a host's peer learns its ``dqpn`` the same way. Each
direction's start PSN comes from a hash of the two addresses and ``k`` (or
``RoceConfig.start_psn``). The UDP source port, the flow's ECMP entropy, is fixed per QP
(a hash of the QPNs, the addresses and a seed, in 0xC000..0xFFFF as the RoCEv2 annex
suggests), so every packet of a QP takes one path.
"""

from __future__ import annotations

import zlib
from collections import Counter, deque
from typing import Any

from uet.roce.config import RoceConfig
from uet.roce.constants import CREDIT_INVALID, ROCE_UDP_PORT, AethType, Opcode, syndrome
from uet.roce.dcqcn import NotificationPoint, ReactionPoint
from uet.roce.records import Aeth, Bth, Reth, RoceFrame
from uet.roce.requester import Requester, SendWqe, WrKind
from uet.roce.responder import Responder, ResponderContext

#: QPs per peer host a QPN can name (k in 0..63)
QPS_PER_PEER = 64
#: QPNs 0 and 1 are the subnet and general service interfaces (management datagrams, which
#: Wireshark decodes as MADs); data QPs start above them, as a NIC's do
QPN_BASE = 0x100


def qpn_for(peer_index: int, k: int) -> int:
    """The QPN a host uses for its ``k``-th QP to host ``peer_index``."""
    return QPN_BASE + peer_index * QPS_PER_PEER + k


def peer_of_qpn(qpn: int) -> tuple[int, int]:
    """``(peer_index, k)`` of a QPN made by :func:`qpn_for`."""
    return (qpn - QPN_BASE) // QPS_PER_PEER, (qpn - QPN_BASE) % QPS_PER_PEER


def start_psn(src_ip: str, dst_ip: str, k: int, cfg: RoceConfig) -> int:
    """The first PSN of the direction ``src_ip`` -> ``dst_ip`` of QP ``k``."""
    if cfg.start_psn >= 0:
        return cfg.start_psn
    return zlib.crc32(f"psn|{src_ip}|{dst_ip}|{k}".encode()) & 0xFFFFFF


def udp_source_port(qpn: int, dqpn: int, src_ip: str, dst_ip: str, seed: int) -> int:
    """The fixed UDP source port (ECMP entropy) of a QP."""
    h = zlib.crc32(f"sport|{seed}|{src_ip}|{dst_ip}|{qpn}|{dqpn}".encode())
    return 0xC000 | (h & 0x3FFF)


_OPS = {  # (kind, first, last) -> opcode
    (WrKind.WRITE, True, True): Opcode.WRITE_ONLY,
    (WrKind.WRITE, True, False): Opcode.WRITE_FIRST,
    (WrKind.WRITE, False, False): Opcode.WRITE_MIDDLE,
    (WrKind.WRITE, False, True): Opcode.WRITE_LAST,
    (WrKind.SEND, True, True): Opcode.SEND_ONLY,
    (WrKind.SEND, True, False): Opcode.SEND_FIRST,
    (WrKind.SEND, False, False): Opcode.SEND_MIDDLE,
    (WrKind.SEND, False, True): Opcode.SEND_LAST,
}
_IMM = {Opcode.WRITE_ONLY: Opcode.WRITE_ONLY_IMM, Opcode.WRITE_LAST: Opcode.WRITE_LAST_IMM,
        Opcode.SEND_ONLY: Opcode.SEND_ONLY_IMM, Opcode.SEND_LAST: Opcode.SEND_LAST_IMM}
_ZEROS = bytes(4096)


class QueuePair:
    """One end of an RC connection (see the module docstring)."""

    __slots__ = ("qpn", "dqpn", "peer", "k", "peer_ip", "peer_mac", "sport", "req", "resp",
                 "rp", "np", "next_tx", "rq", "cfg", "registered", "src_ip", "src_mac",
                 "dscp_data", "ecn", "dscp_ack", "dscp_cnp", "stats", "sent_since_req",
                 "error_counted")

    def __init__(self, *, cfg: RoceConfig, qpn: int, dqpn: int, peer: int, k: int,
                 src_ip: str, src_mac: str, peer_ip: str, peer_mac: str, sport: int,
                 line_rate_bps: float, ctx: ResponderContext, stats: Counter[str],
                 dscp_ack: int, dscp_cnp: int, trace: bool = False) -> None:
        self.cfg = cfg
        self.qpn = qpn
        self.dqpn = dqpn
        self.peer = peer
        self.k = k
        self.src_ip, self.src_mac = src_ip, src_mac
        self.peer_ip, self.peer_mac = peer_ip, peer_mac
        self.sport = sport
        self.stats = stats
        self.req = Requester(cfg, start_psn(src_ip, peer_ip, k, cfg), stats)
        self.resp = Responder(cfg, start_psn(peer_ip, src_ip, k, cfg), ctx, stats)
        dc = cfg.dcqcn
        self.rp = ReactionPoint(dc, line_rate_bps, trace=trace) if dc.enabled else None
        self.np = NotificationPoint(dc) if dc.enabled else None
        self.next_tx = 0
        self.rq: deque[bytearray] = deque()
        self.registered: int | None = None  # the deadline the end point's heap holds
        self.dscp_data = cfg.dscp_data
        self.ecn = 2 if cfg.ecn_capable else 0
        self.dscp_ack = dscp_ack
        self.dscp_cnp = dscp_cnp
        self.sent_since_req = 0
        self.error_counted = False

    # ------------------------------------------------------------------ timers

    def next_deadline(self) -> int | None:
        best = self.req.next_deadline()
        for t in (self.rp.next_deadline() if self.rp is not None else None,
                  self.np.next_deadline() if self.np is not None else None):
            if t is not None and (best is None or t < best):
                best = t
        return best

    # ------------------------------------------------------------------ frames

    def _frame(self, bth: Bth, dscp: int, ecn: int) -> RoceFrame:
        return RoceFrame(bth, src_mac=self.src_mac, dst_mac=self.peer_mac, src_ip=self.src_ip,
                         dst_ip=self.peer_ip, sport=self.sport, dport=ROCE_UDP_PORT,
                         dscp=dscp, ecn=ecn)

    def data_frame(self, w: SendWqe, seg: int, psn: int) -> RoceFrame:
        """The request packet ``seg`` of ``w`` (PSN ``psn``)."""
        mtu = self.cfg.mtu
        first = seg == 0
        last = seg == w.npkts - 1
        op = _OPS[w.kind, first, last]
        if last and w.imm is not None:
            op = _IMM[op]
        off = seg * mtu
        n = min(mtu, w.length - off)
        every = self.cfg.ackreq_every
        self.sent_since_req += 1
        ackreq = last or (every > 0 and self.sent_since_req >= every)
        if ackreq:
            self.sent_since_req = 0
        f = self._frame(Bth(int(op), dqpn=self.dqpn, psn=psn, ackreq=ackreq,
                            padcount=-n & 3), self.dscp_data, self.ecn)
        if first and w.kind is WrKind.WRITE:
            f.reth = Reth(w.remote_va, w.rkey, w.length)
        if last and w.imm is not None:
            f.imm = w.imm
        if w.data is None:
            f.payload = _ZEROS[:n] if n <= len(_ZEROS) else bytes(n)
        else:
            f.payload = bytes(w.data[off:off + n])
        return f

    def ack_frame(self, kind: str, psn: int, value: int, msn: int) -> RoceFrame:
        """An ACK (``value`` unused: the credit field says "invalid"), a NAK (``value``:
        its code) or an RNR NAK (``value``: the RNR timer code) for PSN ``psn``."""
        if kind == "ack":
            syn = syndrome(AethType.ACK, CREDIT_INVALID)
        elif kind == "rnr":
            syn = syndrome(AethType.RNR_NAK, value)
        else:
            syn = syndrome(AethType.NAK, value)
        f = self._frame(Bth(int(Opcode.ACKNOWLEDGE), dqpn=self.dqpn, psn=psn),
                        self.dscp_ack, 0)
        f.aeth = Aeth(syn, msn)
        return f

    def cnp_frame(self) -> RoceFrame:
        """A congestion notification packet to the peer QP (BECN set, as RoCEv2 CNPs are)."""
        return self._frame(Bth(int(Opcode.CNP), dqpn=self.dqpn, becn=True), self.dscp_cnp, 0)

    def describe(self) -> dict[str, Any]:
        """State for reports and tests."""
        r = self.req
        return {"qpn": self.qpn, "dqpn": self.dqpn, "peer": self.peer, "k": self.k,
                "sport": self.sport, "requester": r.state.value, "una": r.una, "nxt": r.nxt,
                "responder": self.resp.state.value, "epsn": self.resp.epsn,
                "rate_bps": self.rp.rc if self.rp is not None else None}
