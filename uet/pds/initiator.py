"""Initiator side of a RUD/ROD PDC: PSNs, windows, ACK/NACK processing, clear, close.

Ephemeral establishment (ref. 3.2): the PDC starts in SYN with a random Start_PSN and sends at
once with SYN set and ``psn_offset`` = PSN - Start_PSN (at most ``max_syn_packets``, 4096,
outstanding); the first ACK gives the DPDCID and moves it to ESTABLISHED. States change only
through the transition table of :mod:`uet.pds.states`.

A packet is *released* (its message told ``PacketAcked``) when an ACK names it (``ack_psn``,
carrying its SES response if any) or its CACK covers it. A SACK bit only marks it *arrived*:
its data is never sent again, and if its ACK is still missing when its RTO expires an ACK_REQ
control packet asks for it (ref. 3.8). Finding losses, the RTO and the retransmission queue
are the PDC's :class:`~uet.pds.recovery.LossRecovery`; this module decides what goes on the
wire. It reaches the end point only through its :class:`~uet.pds.context.PdcContext`.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from uet.cms.api import AckFeedback, NackFeedback, SenderCongestion
from uet.pds import negotiation
from uet.pds.ack import NEXT_HDR
from uet.pds.context import PdcContext, tss_marker
from uet.pds.events import (
    MessageFailed,
    PacketAcked,
    PeerNegotiated,
    ResponseReceived,
    SendMessage,
    SendRequest,
)
from uet.pds.manager import INITIATOR, PdcBase
from uet.pds.recovery import LossRecovery, SentPacket
from uet.pds.retransmit import RESOURCE_NACKS, nack_name
from uet.pds.states import (
    INITIATOR_TRANSITIONS,
    InitiatorEvent,
    InitiatorState,
)
from uet.wire.constants import (
    AckFlag,
    CpFlag,
    CtlType,
    DeliveryMode,
    NackAction,
    NackCode,
    NextHeader,
    PdsType,
    ReqFlag,
    RspOpcode,
    nack_action,
)
from uet.wire.records import Frame, PdsAckCc, PdsControl, PdsRequest, psn_add, psn_diff

SYN = int(ReqFlag.SYN)
AR = int(ReqFlag.AR)
RETX = int(ReqFlag.RETX)
ACK_P = int(AckFlag.P)
ACK_M = int(AckFlag.M)
ACK_RETX = int(AckFlag.RETX)
ACK_REQ_MASK = int(AckFlag.REQ_MASK)
ACK_EPSN = int(AckFlag.EPSN)
# enum members under module names for the per-packet paths: looking a member up on an Enum
# class costs ~70 ns, an IntFlag "&" ~1 us
ST_SYN = InitiatorState.SYN
ST_ESTABLISHED = InitiatorState.ESTABLISHED
ST_CLOSING = InitiatorState.CLOSING
ST_CLOSED = InitiatorState.CLOSED
ST_ERROR = InitiatorState.ERROR
ST_FREED = InitiatorState.FREED
EV_ESTABLISH = InitiatorEvent.ESTABLISH
RUD_CC_REQ = PdsType.RUD_CC_REQ
NACK_CCX = PdsType.NACK_CCX
TX_OVERHEAD = 64  # bytes charged per retained packet besides its payload
DEFAULT_RESPONSE = int(RspOpcode.DEFAULT_RESPONSE)
NO_RESPONSE = int(RspOpcode.NO_RESPONSE)
_RSP = int(NextHeader.RSP)


def nh_is_rsp(ack: Any) -> bool:
    """The ACK's SES header is the 12-byte RSP (the only one NO_RESPONSE may use)."""
    return ack.next_hdr == _RSP
TRIM_NACKS = frozenset({NackCode.TRIMMED, NackCode.TRIMMED_LASTHOP, NackCode.TRIMMED_ACK})

#: the packet record, under the name it had before loss recovery got its own module
Tx = SentPacket
#: Frame's default MACs (the driver that encodes the frame sets the real ones)
_MAC_SRC: str = Frame.__dataclass_fields__["src_mac"].default  # type: ignore[assignment]
_MAC_DST: str = Frame.__dataclass_fields__["dst_mac"].default  # type: ignore[assignment]


class InitiatorPdc(PdcBase):
    """One initiator PDC (RUD or ROD)."""

    TRANSITIONS = INITIATOR_TRANSITIONS
    FREED = ST_FREED

    __slots__ = ("cfg", "job_id", "tc", "dpdcid", "start_psn", "next_psn", "peer_range",
                 "queue", "rec", "cc", "credit", "fixed_ev", "ptype", "in_ring",
                 "last_progress", "next_probe", "probe_opaque", "idle_since",
                 "close_requested", "last_clear_sent", "clear_kick_at", "backlog",
                 "blocked_kind", "blocked_tries", "blocked_at", "keepalive_at")

    def __init__(self, ctx: PdcContext, pdc_id: int, peer_ip: str, mode: DeliveryMode,
                 key: tuple, job_id: int, tc: int, start_psn: int, cc: SenderCongestion,
                 now: int) -> None:
        super().__init__(ctx, pdc_id, INITIATOR, peer_ip, mode, key, ST_SYN)
        cfg = self.cfg = ctx.cfg
        self.job_id = job_id
        self.tc = tc
        self.dpdcid = 0
        self.start_psn = start_psn
        self.next_psn = start_psn
        self.peer_range = cfg.mp_range  # until an ACK_CC advertises the peer's MPR
        #: request packets and messages (SendMessage) waiting for a PSN, in order
        self.queue: deque[SendRequest | SendMessage] = deque()
        self.cc = cc
        self.credit = cc.rccc  # the RCCC side of the CC, or None
        self.rec = LossRecovery(cfg, cc, start_psn=start_psn, now=now, pdc_id=pdc_id,
                                counters=ctx.counters, log=ctx.log, released=self._released,
                                resend_control=self._resend_control, queued=self._queued,
                                unqueued=self._unqueued, retry_limit=self._retry_limit,
                                arm=self._arm)
        rod = mode == DeliveryMode.ROD
        self.fixed_ev = cc.choose_ev(now) if rod and not cfg.rod_multi_ev else None
        self.backlog = 0  # payload bytes queued: new + to retransmit (CMS on_backlog)
        if cfg.cc_requests or self.credit is not None:
            self.ptype = PdsType.ROD_CC_REQ if rod else PdsType.RUD_CC_REQ
        else:
            self.ptype = PdsType.ROD_REQ if rod else PdsType.RUD_REQ
        self.in_ring = False
        self.last_progress = now
        self.next_probe = 0
        self.probe_opaque = 0
        self.idle_since: int | None = None
        self.close_requested = False
        self.last_clear_sent: int | None = None
        self.clear_kick_at: int | None = None
        # blocked with work queued and nothing outstanding (no RTO runs): the peer window
        # (CACK held by responses the target stores) or the CC / credit refuses; a timer
        # with the RTO's backoff probes and finally fails the queue (see _blocked_timer)
        self.blocked_kind = ""
        self.blocked_tries = 0
        self.blocked_at: int | None = None
        self.keepalive_at: int | None = None  # next NOOP of an idle PDC (keepalive_ps)

    def free_event(self) -> InitiatorEvent:
        return InitiatorEvent.FREE

    # ------------------------------------------------------------------ views
    @property
    def outstanding(self) -> dict[int, SentPacket]:
        """Packets holding a PSN and waiting for their ACK, in PSN order."""
        return self.rec.outstanding

    @property
    def max_cack(self) -> int:
        return self.rec.max_cack

    @property
    def rto(self) -> Any:
        return self.rec.rto

    @property
    def rack(self) -> Any:
        return self.rec.rack

    @property
    def inflight_bytes(self) -> int:
        return self.rec.inflight_bytes

    def una(self) -> int:
        """Lowest PSN not yet released (next_psn when nothing is outstanding)."""
        for psn in self.rec.outstanding:
            return psn
        return self.next_psn

    def cc_inflight(self) -> int:
        return self.rec.cc_inflight()

    def has_data_work(self) -> bool:
        st = self.state
        return bool(self.rec.retx) or (
            bool(self.queue) and (st is ST_ESTABLISHED or st is ST_SYN))

    # ------------------------------------------------------------------ recovery callbacks
    def _arm(self, t: int) -> None:
        self.ctx.arm(self, t)

    def _released(self, now: int, pkt: SentPacket, original: bool) -> None:
        mem = self.ctx.tx_memory
        mem.used -= pkt.cost
        if mem.waiters:
            mem.wake_waiters()
        req = pkt.req
        if req is None:  # the CLOSE
            self.transition(InitiatorEvent.CLOSE_ACKED)
            self.ctx.closed(now, self, error=False, reason="closed")
        elif self.ctx.report_acked:
            self.ctx.emit(PacketAcked(req.msg_ref, pkt.psn))

    def _resend_control(self, now: int, pkt: SentPacket) -> None:
        if pkt.is_close:
            self.send_cp(now, CtlType.CLOSE, pkt.psn, CpFlag.AR | CpFlag.RETX)
        else:  # arrived, its ACK is missing: ask for it
            self.send_cp(now, CtlType.ACK_REQ, pkt.psn)

    def _queued(self, now: int, pkt: SentPacket) -> None:
        if self.credit is not None:
            self.backlog += pkt.nbytes
            self.credit.on_backlog(now, backlog_bytes=self.backlog)
        self.ctx.wake(self)

    def _unqueued(self, now: int, pkt: SentPacket, notify: bool) -> None:
        if self.credit is not None:
            self.backlog -= pkt.nbytes
            if notify:
                self.credit.on_backlog(now, backlog_bytes=self.backlog)

    def _retry_limit(self, now: int, pkt: SentPacket) -> None:
        self.close_in_error(now, f"retry limit ({self.cfg.max_retries}) reached for PSN "
                                 f"{pkt.psn}")

    # ================================================================== sending
    def submit(self, now: int, req: SendRequest | SendMessage) -> None:
        """Queue a request packet, or a message whose packets are made as they are sent."""
        if not self.queue and not self.rec.outstanding:
            self.last_progress = now  # work starts: the progress clock starts with it
        self.queue.append(req)
        self.idle_since = None
        if self.credit is not None:
            self.backlog += req.nbytes if type(req) is SendMessage else len(req.payload)
            self.credit.on_backlog(now, backlog_bytes=self.backlog)
        self.ctx.wake(self)

    def _blocked_by_cc(self, now: int) -> None:
        """The CC refused a packet: ask for credit (RCCC) and wake up at its deadline."""
        self.ctx.counters["blocked.cc"] += 1
        if self.credit is not None:
            payload = self.credit.poll_credit_request(now)
            if payload is not None:
                self.send_cp(now, CtlType.CREDIT_REQ, self.una(), 0, payload & 0xFFFFFFFF)
        d = self.cc.next_deadline()
        if d is not None:
            self.ctx.arm(self, max(d, now + 1))
        if not self.rec.outstanding:
            self._blocked(now, "cc")

    def _blocked(self, now: int, kind: str) -> None:
        """Blocked with work queued and nothing outstanding: start the blocked probe."""
        if self.blocked_at is None:
            self.blocked_kind = kind
            self.blocked_tries = 0
            self.blocked_at = now + self.rec.rto.rto_for(0)
            self.ctx.arm(self, self.blocked_at)

    def _blocked_timer(self, now: int) -> None:
        """The blocked probe expired. Still blocked on the peer window: send CLEAR (so
        the target can release the responses that hold its CACK) and a PROBE from the PSN
        above our CACK (so it tells us the new CACK: the ACK answering an earlier CLEAR may
        have been lost), and poll again. Still refused by the CC: count it, unless the
        credit scheduler was heard within ``max_rto_ps`` (it decides when we send). After
        ``max_retries`` unanswered probes the PDC closes in error: every queued message
        fails (UNDELIVERABLE at the SES) instead of waiting forever."""
        self.blocked_at = None
        st = self.state
        if self.rec.outstanding or not self.queue or not (st is ST_ESTABLISHED or st is ST_SYN):
            return  # not blocked any more: the RTO or the idle close takes over
        cfg = self.cfg
        kind = self.blocked_kind
        count = True
        if kind == "cc" and self.credit is not None:
            since = self.credit.waiting_for_credit()
            count = since is None or now - since >= cfg.max_rto_ps
        if count:
            self.blocked_tries += 1
        if self.blocked_tries > cfg.max_retries:
            if kind == "peer_window":
                why = (f"peer window closed at CACK {self.rec.max_cack}: CLEAR / ACK_REQ "
                       f"unanswered after {cfg.max_retries} retries")
            else:
                why = (f"congestion control refused every packet for {cfg.max_retries} "
                       "retries with nothing in flight")
            self.close_in_error(now, why)
            return
        if kind == "peer_window" and st is ST_ESTABLISHED:
            clear = psn_add(self.una(), -1)
            self.last_clear_sent = clear
            self.send_cp(now, CtlType.CLEAR, 0, 0, clear)
            # a PROBE (ref 2.7) asks for the target's state: its answer, an ACK with P=1,
            # carries the CACK and SACK from the PSN above ours
            above = psn_add(self.rec.max_cack, 1)
            self.probe_opaque = (self.probe_opaque + 1) & 0xFFFF
            self.send_cp(now, CtlType.PROBE, above, 0, above, self.probe_opaque)
            self.ctx.counters["probe_tx"] += 1
            self.ctx.counters["retx.peer_window"] += 1
            self.ctx.log(now, "retransmit", pdc_id=self.pdc_id, psn=clear, cause="peer_window")
            self.ctx.wake(self)
        self.blocked_at = now + self.rec.rto.rto_for(self.blocked_tries)
        self.ctx.arm(self, self.blocked_at)

    def poll_data(self, now: int) -> Frame | None:
        """Next request of this PDC: a retransmission first, else a new packet if allowed."""
        rec = self.rec
        if rec.retx:
            pkt = rec.next_retransmission(now)
            if pkt is not None:
                if not self.cc.can_send(now, nbytes=pkt.nbytes, in_flight=rec.cc_inflight(),
                                        retx=True):
                    self._blocked_by_cc(now)
                    return None
                rec.take_retransmission(now, pkt)
                return self._send(now, pkt, True)
        queue = self.queue
        st = self.state
        if not queue or not (st is ST_ESTABLISHED or st is ST_SYN):
            return None
        cfg = self.cfg
        psn = self.next_psn
        counters = self.ctx.counters
        outstanding = rec.outstanding
        una = next(iter(outstanding), psn)  # self.una(), inline: per packet
        # psn_diff(psn, una) >= max_inflight_packets (in [1, 32767]) and
        # psn_diff(psn, max_cack) > peer_range (>= 128), without calls: per packet
        d = (psn - una) & 0xFFFFFFFF
        if 0x80000000 > d >= cfg.max_inflight_packets:
            counters["blocked.window"] += 1
            return None
        d = (psn - rec.max_cack) & 0xFFFFFFFF
        if 0x80000000 > d > self.peer_range:
            # The peer's CACK is held by responses we already hold: tell it (CLEAR).
            counters["blocked.peer_window"] += 1
            clear = psn_add(una, -1)
            if st is ST_ESTABLISHED and clear != self.last_clear_sent \
                    and psn_diff(clear, rec.max_cack) > 0:
                self.last_clear_sent = clear
                self.send_cp(now, CtlType.CLEAR, 0, 0, clear)
            if not rec.outstanding:
                self._blocked(now, "peer_window")
            return None
        if st is ST_SYN and psn_diff(psn, self.start_psn) >= cfg.max_syn_packets:
            counters["blocked.syn"] += 1
            return None
        head = queue[0]
        req = head.head() if type(head) is SendMessage else head
        nbytes = len(req.payload)
        if not self.cc.can_send(now, nbytes=nbytes, in_flight=rec.cc_inflight()):
            self._blocked_by_cc(now)
            return None
        mem = self.ctx.tx_memory
        cost = nbytes + TX_OVERHEAD
        used = mem.used
        if used + cost > mem.limit and used:  # MemoryAccount.fits, inline: per packet
            counters["blocked.memory"] += 1
            mem.wait(self)
            return None
        if type(head) is not SendMessage:
            queue.popleft()
        else:  # the next packet of a message: the message leaves with its last
            head.pop()
            if not head.count:
                queue.popleft()
        self.next_psn = (psn + 1) & 0xFFFFFFFF
        pkt = SentPacket(psn, req, nbytes, cost)
        outstanding[psn] = pkt  # LossRecovery.track, inline
        mem.used = used + cost
        if len(outstanding) == 1:
            self.last_progress = now
            if cfg.probe_after_ps:
                self.ctx.arm(self, now + cfg.probe_after_ps)
        return self._send(now, pkt, False)

    def _send(self, now: int, pkt: SentPacket, retx: bool) -> Frame:
        cfg = self.cfg
        rec = self.rec
        req = pkt.req
        assert req is not None  # data packets only: the CLOSE travels as a CP
        ev = self.fixed_ev
        if ev is None:
            ev = self.cc.choose_ev(now)
        psn = pkt.psn
        flags = AR if (retx or req.eom or cfg.ar_every_packet) else 0
        if not flags and cfg.ar_when_blocked:
            after = rec.cc_inflight() + (0 if pkt.inflight else pkt.nbytes)
            if not self.queue or self.cc.window_full(nbytes=pkt.nbytes, in_flight=after):
                flags = AR
        if retx:
            flags |= RETX
        # clear_psn_offset = psn_diff(una - 1, psn), without calls: per packet
        cpo = (next(iter(rec.outstanding), self.next_psn) - 1 - psn) & 0xFFFFFFFF
        if cpo & 0x80000000:
            cpo -= 0x100000000
        if self.state is ST_SYN:
            pds = PdsRequest(self.ptype, NEXT_HDR[type(req.ses)], flags | SYN, cpo, psn,
                             self.pdc_id, 0, False, psn_diff(psn, self.start_psn))
        else:
            pds = PdsRequest(self.ptype, NEXT_HDR[type(req.ses)], flags, cpo, psn,
                             self.pdc_id, self.dpdcid)
        if self.ptype >= RUD_CC_REQ:
            credit = self.credit
            pds.credit_target = credit.credit_target() & 0xFFFFFF if credit is not None else 0
        nbytes = pkt.nbytes
        rec.on_sent(now, pkt, retx, ev)
        self.blocked_at = None
        if self.credit is not None:
            self.backlog -= nbytes
            self.credit.on_backlog(now, backlog_bytes=self.backlog)
        self.cc.on_send(now, nbytes=nbytes, ev=ev, retx=retx)
        counters = self.ctx.counters
        counters["tx_packets"] += 1
        counters["tx_bytes"] += nbytes
        # positional (a keyword call costs more, per packet); the driver sets the MACs
        if self.sdi is None:
            return Frame(pds, req.ses, req.ext, req.payload, _MAC_SRC, _MAC_DST,
                         self.ctx.local_ip, self.peer_ip, ev, cfg.dscp_data,
                         2 if cfg.ecn_capable else 0)
        return Frame(pds=pds, ses=req.ses, ext=req.ext, payload=req.payload,
                     src_ip=self.ctx.local_ip, dst_ip=self.peer_ip, ev=ev, dscp=cfg.dscp_data,
                     ecn=2 if cfg.ecn_capable else 0, tss=tss_marker(self.sdi))

    def send_negotiation(self, now: int) -> None:
        """The NEGOTIATION control packet of a new PDC (SYN form, before its first
        request; :mod:`uet.pds.negotiation`)."""
        self.send_cp(now, CtlType.NEGOTIATION, self.next_psn, 0,
                     self.ctx.negotiation_payload(reply=False, ccx=False))

    def _rx_negotiation(self, now: int, frame: Frame, cp: PdsControl) -> None:
        """The target's answer: its MP_RANGE is our peer window until an ACK_CC says
        otherwise; its fep_cap goes to the SES."""
        caps = negotiation.decode(cp.payload)
        ctx = self.ctx
        if caps.version != negotiation.VERSION or not caps.reply:
            ctx.counters["dropped.negotiation"] += 1
            return
        if caps.mpr:
            self.peer_range = caps.mp_range
        ctx.emit(PeerNegotiated(self.peer_ip, INITIATOR, caps.fep_cap, caps.mp_range,
                                caps.max_payload, caps.ccx))
        ctx.log(now, "negotiated", pdc_id=self.pdc_id, role=INITIATOR, peer=self.peer_ip,
                fep_cap=caps.fep_cap, mp_range=caps.mp_range, max_payload=caps.max_payload)
        if caps.max_payload < self.cfg.mtu_payload:
            ctx.counters["negotiation.payload_mismatch"] += 1
            ctx.log(now, "negotiation_mismatch", pdc_id=self.pdc_id, peer=self.peer_ip,
                    peer_max_payload=caps.max_payload, mtu_payload=self.cfg.mtu_payload)

    def send_cp(self, now: int, ctl: int, psn: int, flags: int = 0, payload: int = 0,
                probe_opaque: int = 0) -> None:
        """A control packet of this PDC (ACK_REQ, CLEAR, CLOSE, PROBE, CREDIT_REQ)."""
        if self.mode == DeliveryMode.ROD:
            flags |= CpFlag.ISROD
        if self.state is ST_SYN:
            off = psn_diff(psn, self.start_psn)
            cp = PdsControl(ctl_type=ctl, flags=flags | CpFlag.SYN, probe_opaque=probe_opaque,
                            psn=psn, spdcid=self.pdc_id, psn_offset=off & 0xFFF,
                            payload=payload)
        else:
            cp = PdsControl(ctl_type=ctl, flags=flags, probe_opaque=probe_opaque, psn=psn,
                            spdcid=self.pdc_id, dpdcid=self.dpdcid, payload=payload)
        self.ctx.send_cp(now, cp, self.peer_ip, self.sdi)

    # ================================================================== ACKs
    def rx_ack(self, now: int, frame: Frame, ack: Any) -> None:
        """ACK / ACK_CC for this PDC."""
        ctx = self.ctx
        counters = ctx.counters
        counters["ack_rx"] += 1
        st = self.state
        if not (st is ST_ESTABLISHED or st is ST_SYN or st is ST_CLOSING):
            counters["dropped.ack_closed_pdc"] += 1
            return
        if frame.src_ip != self.peer_ip:
            counters["dropped.ack_wrong_peer"] += 1
            return
        if st is ST_SYN:
            self.dpdcid = ack.spdcid
            self.transition(EV_ESTABLISH)
            ctx.log(now, "pdc_established", pdc_id=self.pdc_id, dpdcid=ack.spdcid)
        elif ack.spdcid != self.dpdcid:
            counters["dropped.ack_spdcid_mismatch"] += 1
            return
        cack = ack.cack_psn
        d = (cack - self.next_psn + 1) & 0xFFFFFFFF
        if d and d < 0x80000000:  # psn_diff(cack, next_psn - 1) > 0, without calls
            counters["dropped.ack_beyond_next_psn"] += 1
            return
        rec = self.rec
        flags = ack.flags
        ap = None
        early = False  # the ACK names its packet but holds no final response for it
        if not flags & ACK_P:
            ap = (cack + ack.ack_psn_offset) & 0xFFFFFFFF
            pkt = rec.outstanding.get(ap)
            ses = frame.ses
            dscp = frame.dscp
            cfg = self.cfg
            if dscp == cfg.dscp_trimmed or dscp == cfg.dscp_trimmed_lasthop:
                # a switch trimmed this ACK: its read data is gone (ref 2.6, 6.3)
                early = True
                if pkt is not None and pkt.req is not None:
                    self._trimmed_ack(now, frame, ack, ap)
                else:
                    counters["trimmed_ack_rx_stale"] += 1
            elif ses is not None and pkt is not None and pkt.req is not None:
                op = ses.opcode
                if op == NO_RESPONSE and nh_is_rsp(ack):
                    early = True  # the early ACK: the guaranteed response follows
                    counters["no_response_rx"] += 1
                elif op != DEFAULT_RESPONSE:
                    ctx.emit(ResponseReceived(pkt.req.msg_ref, ses, frame.payload, ap))
        if flags & ACK_EPSN and self.sdi is not None:
            # the target's closing ACK of a secured PDC: its Expected PSN for this SDI is
            # where our next secured PDC to it starts (EXPECTED_0RTT_START, ref. 3.2)
            ctx.learn_start(self.sdi, self.peer_ip, ack.epsn)
            counters["epsn_rx"] += 1
        fresh = (cack - rec.max_cack) & 0xFFFFFFFF < 0x80000000  # psn_diff(...) >= 0
        newly = [0, 0]  # bytes, packets
        rtt = rec.on_ack(now, ack, ap, bool(flags & ACK_RETX), newly, early)
        is_cc = type(ack) is PdsAckCc
        if fresh and is_cc and ack.mpr:
            self.peer_range = ack.mpr * 128
        if self.state is ST_CLOSED:  # the CLOSE was acknowledged
            return
        if newly[1]:
            self.last_progress = now
        if rtt is not None:
            rec.rtt_sample(now, rtt)
        self.cc.on_ack(now, fb=AckFeedback(frame.ev, bool(flags & ACK_M), newly[0], newly[1],
                                           rtt, rec.cc_inflight(), ack if is_cc else None,
                                           bool(flags & ACK_RETX)))
        rec.detect_after_ack(now, ack, newly[1], self.next_psn)
        req = (flags & ACK_REQ_MASK) >> 1
        if req == 1:
            self.clear_requested(now, from_cp=False)
        elif req == 2:
            self.close_request(now)
        self._after_progress(now)

    def _trimmed_ack(self, now: int, frame: Frame, ack: Any, ap: int) -> None:
        """An ACK of ours arrived trimmed (its DSCP is a trimmed code point): the read data
        it carried is lost, the packet it names arrived. NACK TRIMMED_ACK so the target
        sends that ACK again (its response is stored until we clear it)."""
        ctx = self.ctx
        ctx.counters["trimmed_ack_rx"] += 1
        flags = (0x20 if frame.ecn == 3 else 0) | (ack.flags & ACK_RETX)
        ctx.nack_to(now, frame.src_ip, frame.ev, flags, NackCode.TRIMMED_ACK, ap,
                    self.pdc_id, ack.spdcid, why="an ACK carrying read data was trimmed",
                    sdi=self.sdi)

    def _after_progress(self, now: int) -> None:
        rec = self.rec
        if rec.outstanding or self.queue:
            if self.has_data_work():
                self.ctx.wake(self)
            return
        rec.idle()
        if self.state is not ST_ESTABLISHED:
            return
        if self.close_requested:
            self.start_close(now)
            return
        if self.cfg.keepalive_ps and self.keepalive_at is None:
            self.keepalive_at = now + self.cfg.keepalive_ps
            self.ctx.arm(self, self.keepalive_at)
        if self.cfg.close_idle_ps and self.idle_since is None:
            self.idle_since = now
            self.ctx.arm(self, now + self.cfg.close_idle_ps)

    # ================================================================== NACKs and CPs
    def rx_nack(self, now: int, frame: Frame, nack: Any) -> None:
        ctx = self.ctx
        code = nack.nack_code
        st = self.state
        if not (st is ST_ESTABLISHED or st is ST_SYN or st is ST_CLOSING):
            return
        if self.dpdcid and nack.spdcid and nack.spdcid != self.dpdcid:
            ctx.counters["dropped.nack_spdcid_mismatch"] += 1
            return
        rec = self.rec
        pkt = rec.outstanding.get(nack.nack_psn)
        action = nack_action(code)
        if pkt is None:
            if action == NackAction.CLOSE_PDC and self.blocked_at is not None \
                    and nack.nack_psn == psn_add(rec.max_cack, 1):
                # the answer to the blocked probe's ACK_REQ: the target closed the PDC
                self.close_in_error(now, f"NACK {nack_name(code)} for PSN {nack.nack_psn} "
                                         "(peer window probe)")
                return
            ctx.counters["nack_rx_stale"] += 1
            return
        name = nack_name(code)
        if code in TRIM_NACKS and pkt.ever_retx and not nack.flags & ACK_RETX:
            # the trimmed copy was the original, and it was resent since (RACK, RTO):
            # resending again would only duplicate the retransmission in flight
            ctx.counters["nack_rx_stale_copy"] += 1
            return
        if not pkt.ever_retx and not nack.flags & ACK_RETX:
            # a NACK of a packet sent once is a round trip too (Karn): without it a PDC
            # whose first packets were all trimmed (incast) kept the 5 ms initial RTO
            rec.rtt_sample(now, now - pkt.send_time)
        if action == NackAction.RETRANSMIT:
            self.cc.on_nack(now, fb=NackFeedback(frame.ev, code, pkt.nbytes,
                                                 bool(nack.flags & ACK_M), now - pkt.send_time,
                                                 rec.cc_inflight(),
                                                 bool(nack.flags & ACK_RETX),
                                                 nack=nack if nack.type == NACK_CCX else None))
            if code in RESOURCE_NACKS:
                ctx.counters["nack_rx_deferred"] += 1  # resent when its RTO expires
                return
            if (code == NackCode.PKT_NOT_RCVD or code == NackCode.ACK_WITH_DATA) \
                    and pkt.arrived:
                # PKT_NOT_RCVD: the data never arrived after all; ACK_WITH_DATA: its ACK
                # carries read data and comes as the answer to the request itself
                pkt.arrived = False
            if pkt.is_close or not pkt.arrived:
                rec.retransmit(now, pkt, "nack." + name)
        elif action == NackAction.CLOSE_PDC:
            if pkt.is_close and code != NackCode.CLOSING_IN_ERR:
                # Everything was acknowledged before the CLOSE; the target no longer knows
                # the PDC (its linger ended after it took our CLOSE): closed.
                ctx.counters["close_nacked"] += 1
                rec.release(now, pkt)
                return
            self.close_in_error(now, f"NACK {name} for PSN {nack.nack_psn}")
        elif action == NackAction.NEW_START_PSN:
            self._new_start_psn(now, nack.payload)
        # IGNORE (RCVD_SES_PROCG, unknown codes): rely on the RTO

    def _new_start_psn(self, now: int, new_start: int) -> None:
        """Re-base every PSN on the target's Start_PSN and resend (ref. 3.2)."""
        if self.state is not ST_SYN or new_start == self.start_psn:
            return
        delta = psn_diff(new_start, self.start_psn)
        moved = self.rec.rebase(delta, new_start)
        self.start_psn = new_start
        self.next_psn = psn_add(self.next_psn, delta)
        self.ctx.log(now, "new_start_psn", pdc_id=self.pdc_id, start_psn=new_start)
        for pkt in moved:
            self.rec.retransmit(now, pkt, "nack.NEW_START_PSN")

    def rx_cp(self, now: int, frame: Frame, cp: PdsControl) -> None:
        """CLEAR_REQ, CLOSE_REQ, CREDIT or NEGOTIATION from the target."""
        st = self.state
        if not (st is ST_ESTABLISHED or st is ST_SYN or st is ST_CLOSING) \
                or frame.src_ip != self.peer_ip:
            return
        if self.dpdcid and cp.spdcid != self.dpdcid:
            self.ctx.counters["dropped.cp_spdcid_mismatch"] += 1
            return
        ctl = cp.ctl_type
        if ctl == CtlType.CLEAR_REQ:
            self._clear_req_kick(now, cp.payload)
            self.clear_requested(now, from_cp=True)
        elif ctl == CtlType.CLOSE_REQ:
            self.close_request(now)
            if self.state is ST_ESTABLISHED and self.rec.outstanding:
                self._close_req_kick(now)
        elif ctl == CtlType.CREDIT:
            if self.credit is not None:
                self.credit.on_credit(now, credit=cp.payload)
            if self.has_data_work():
                self.ctx.wake(self)
        elif ctl == CtlType.NEGOTIATION:
            self._rx_negotiation(now, frame, cp)

    def clear_requested(self, now: int, from_cp: bool) -> None:
        """The target holds stored responses: tell it how far we hold the ACKs (CLEAR)."""
        if self.state is not ST_ESTABLISHED:
            return
        clear = psn_add(self.una(), -1)
        if not from_cp and (self.queue or clear == self.last_clear_sent):
            return  # the next request carries the clear PSN, or it was just sent
        self.last_clear_sent = clear
        self.send_cp(now, CtlType.CLEAR, 0, 0, clear)

    def _clear_req_kick(self, now: int, psn: int) -> None:
        """A CLEAR_REQ naming a PSN we still wait on: the target holds that packet and its
        response, so its ACK was lost. Ask for it (ACK_REQ) now rather than after a
        backed-off RTO; at most once per base RTO, since CLEAR_REQs repeat."""
        pkt = self.rec.outstanding.get(psn)
        if pkt is None or pkt.is_close or pkt.retx_queued:
            return
        base = self.rec.rto.base
        if now - pkt.send_time <= base:
            return
        if self.clear_kick_at is not None and now - self.clear_kick_at <= base:
            return
        self.clear_kick_at = now
        self.send_cp(now, CtlType.ACK_REQ, psn)
        self.ctx.counters["retx.clear_req"] += 1
        self.ctx.log(now, "retransmit", pdc_id=self.pdc_id, psn=psn, cause="clear_req")

    def close_request(self, now: int) -> None:
        """The target asked for a close (CLOSE_REQ or ACK REQ=2)."""
        st = self.state
        if not (st is ST_ESTABLISHED or st is ST_SYN) or self.close_requested:
            return
        self.close_requested = True
        self.ctx.unmap(self)
        if not self.rec.outstanding and not self.queue and st is ST_ESTABLISHED:
            self.start_close(now)

    def _close_req_kick(self, now: int) -> None:
        """A CLOSE_REQ while packets are outstanding: the target thinks we are idle, so
        what it misses is sitting in a backed-off RTO. Resend (or ACK_REQ) now every
        packet last sent more than a base RTO ago, so the PDC finishes and closes within
        the target's Close_REQ_Time (ref. 3.9: the initiator closes once all is ACKed)."""
        rec = self.rec
        base = rec.rto.base
        gap = False
        for pkt in list(rec.outstanding.values()):
            if pkt.is_close:
                continue
            if not pkt.retx_queued and now - pkt.send_time > base \
                    and not (pkt.arrived and gap):
                rec.retransmit(now, pkt, "close_req")
            if not pkt.arrived:
                gap = True

    # ================================================================== close
    def start_close(self, now: int) -> None:
        """Send CLOSE (a new PSN, AR set) once idle with everything acknowledged."""
        ctx = self.ctx
        ctx.unmap(self)
        self.transition(InitiatorEvent.START_CLOSE)
        psn = self.next_psn
        self.next_psn = psn_add(psn, 1)
        pkt = SentPacket(psn, None, 0, 0)
        self.rec.track(pkt)
        pkt.send_time = now
        self.send_cp(now, CtlType.CLOSE, psn, CpFlag.AR)
        self.rec.arm_rto(now, pkt)
        ctx.log(now, "pdc_closing", pdc_id=self.pdc_id, psn=psn)

    def close_in_error(self, now: int, reason: str) -> None:
        """Fail every queued and outstanding message, then close (ref. 3.9)."""
        ctx = self.ctx
        was_established = self.state is ST_ESTABLISHED or self.state is ST_CLOSING
        failed = []
        seen = set()
        mem = 0
        for pkt in self.rec.fail_all():
            ref = pkt.req.msg_ref if pkt.req is not None else None
            if pkt.req is not None and id(ref) not in seen:
                seen.add(id(ref))
                failed.append(ref)
            mem += pkt.cost
        for item in self.queue:
            reqs = [item.pop() for _ in range(item.count)] if type(item) is SendMessage \
                else [item]
            for req in reqs:
                if id(req.msg_ref) not in seen:
                    seen.add(id(req.msg_ref))
                    failed.append(req.msg_ref)
        for ref in failed:
            ctx.emit(MessageFailed(ref, reason))
        self.queue.clear()
        if self.credit is not None and self.backlog:
            self.backlog = 0
            self.credit.on_backlog(now, backlog_bytes=0)
        if was_established:  # best-effort CLOSE so the target can free its PDC
            self.send_cp(now, CtlType.CLOSE, self.next_psn, CpFlag.AR)
        self.transition(InitiatorEvent.FAIL)
        ctx.closed(now, self, error=True, reason=reason)
        ctx.tx_memory.release(mem)

    # ================================================================== timers
    def on_timer(self, now: int) -> int | None:
        ctx = self.ctx
        cfg = self.cfg
        st = self.state
        if st is ST_CLOSED or st is ST_ERROR:
            if now >= self.linger_until:
                ctx.linger_over(self)
                return None
            return self.linger_until
        if st is ST_FREED:
            return None
        rec = self.rec
        rec.on_timer(now)
        st = self.state
        if st is ST_CLOSED or st is ST_ERROR:
            return self.linger_until
        if self.blocked_at is not None and now >= self.blocked_at:
            self._blocked_timer(now)
            st = self.state
            if st is ST_ERROR:
                return self.linger_until
        nxt = rec.deadline()
        if self.blocked_at is not None:
            nxt = self.blocked_at if nxt is None else min(nxt, self.blocked_at)
        cc = self.cc
        d = cc.next_deadline()
        if d is not None:
            if d <= now:
                cc.handle_timer(now)
                if self.credit is not None:
                    payload = self.credit.poll_credit_request(now)
                    if payload is not None:
                        self.send_cp(now, CtlType.CREDIT_REQ, self.una(), 0,
                                     payload & 0xFFFFFFFF)
                if self.has_data_work():
                    ctx.wake(self)
                d = cc.next_deadline()
            if d is not None and d > now:
                nxt = d if nxt is None else min(nxt, d)
        if cfg.probe_after_ps and rec.outstanding and (st is ST_ESTABLISHED or st is ST_SYN):
            t = max(self.last_progress + cfg.probe_after_ps, self.next_probe)
            if now >= t:
                self.probe_opaque = (self.probe_opaque + 1) & 0xFFFF
                una = self.una()
                self.send_cp(now, CtlType.PROBE, una, 0, una, self.probe_opaque)
                ctx.counters["probe_tx"] += 1
                self.next_probe = t = now + cfg.probe_after_ps
            nxt = t if nxt is None else min(nxt, t)
        ka = self.keepalive_at
        if ka is not None and st is ST_ESTABLISHED:
            if rec.outstanding or self.queue:
                self.keepalive_at = None  # traffic again: re-armed when idle
            else:
                if now >= ka:
                    # keepalive (ref 2.7 NOOP): the target's idle timer restarts
                    self.send_cp(now, CtlType.NOOP, self.next_psn)
                    ctx.counters["keepalive_tx"] += 1
                    self.keepalive_at = ka = now + cfg.keepalive_ps
                nxt = ka if nxt is None else min(nxt, ka)
        if self.idle_since is not None and st is ST_ESTABLISHED:
            if rec.outstanding or self.queue:
                self.idle_since = None
            else:
                t = self.idle_since + cfg.close_idle_ps
                if now >= t:
                    self.idle_since = None
                    self.start_close(now)
                    if rec.rto_at is not None:
                        nxt = rec.rto_at if nxt is None else min(nxt, rec.rto_at)
                else:
                    nxt = t if nxt is None else min(nxt, t)
        return nxt


#: the Python form of what the C core replaces (``uet.native._sender_core``): the reference
#: its tests hold it to, and what it calls for every case but a new packet of an
#: established cleartext PDC without credit
REFERENCE = {"poll_data": InitiatorPdc.poll_data, "rx_ack": InitiatorPdc.rx_ack,
             "_released": InitiatorPdc._released,
             "has_data_work": InitiatorPdc.has_data_work}


def _use_c_core() -> str:
    """Put the C forms of ``poll_data``, ``rx_ack``, ``_released`` and ``has_data_work`` in
    InitiatorPdc's class (not under ``UET_PURE_PYTHON=1``, nor when the extension was not
    built); returns ``"native"`` or ``"python"``."""
    from uet.native._common import load_core

    core = load_core("_sender_core")
    if core is None:
        return "python"
    configure(core)
    core.configure_ack(REFERENCE["rx_ack"], PdsAckCc, AckFeedback,
                       {"closed": ST_CLOSED, "ack_p": ACK_P, "ack_retx": ACK_RETX,
                        "ack_m": ACK_M, "ack_req_mask": ACK_REQ_MASK})
    core.configure_released(REFERENCE["_released"])
    core.configure_work(REFERENCE["has_data_work"])
    InitiatorPdc.poll_data = core.poll_data_method  # type: ignore[method-assign]
    InitiatorPdc.rx_ack = core.rx_ack_method  # type: ignore[method-assign]
    InitiatorPdc._released = core.released_method  # type: ignore[method-assign]
    InitiatorPdc.has_data_work = core.has_data_work_method  # type: ignore[method-assign]
    return "native"


def configure(core: Any) -> None:
    """Give the C core the classes whose slots it uses, the constants and the reference.

    The layer above hands over its own message classes (``uet.ses.segmentation``:
    ``configure_segments``), so that the core can make an SES message's next packet; the
    PDS names none of them."""
    from uet.native._common import field_defaults as defaults
    from uet.pds.config import PdsConfig
    from uet.pds.context import MemoryAccount
    from uet.pds.events import SendMessage, SendRequest

    defaults(SendRequest)  # no __post_init__: the core fills its slots
    core.configure(InitiatorPdc, LossRecovery, SentPacket, PdcContext, MemoryAccount,
                   PdsConfig, SendMessage, SendRequest, PdsRequest, Frame,
                   {"established": ST_ESTABLISHED, "syn": ST_SYN, "next_hdr": NEXT_HDR,
                    "request_defaults": defaults(PdsRequest),
                    "frame_defaults": defaults(Frame), "mac_src": _MAC_SRC,
                    "mac_dst": _MAC_DST, "tx_overhead": TX_OVERHEAD, "ar": AR,
                    "rud_cc_req": int(RUD_CC_REQ), "syn_flag": int(SYN)},
                   REFERENCE["poll_data"])


#: which form a new data packet is made in: "native" (C) or "python"
IMPLEMENTATION = _use_c_core()

__all__ = ["IMPLEMENTATION", "REFERENCE", "InitiatorPdc", "Tx", "configure"]
