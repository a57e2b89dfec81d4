"""Initiator side of a RUD/ROD PDC: PSNs, window, ACK processing, selective retransmission.

Ephemeral establishment (ref. 3.2): the PDC starts in SYN with a random Start_PSN and sends at
once with SYN set and ``psn_offset`` = PSN - Start_PSN (at most ``max_syn_packets``, 4096,
outstanding); the first ACK gives the DPDCID and moves it to ESTABLISHED.

A packet is *released* (its message told ``PacketAcked``) when an ACK names it (``ack_psn``,
carrying its SES response if any) or its CACK covers it. A SACK bit only marks it *arrived*:
its data is never sent again, and if its ACK is still missing when its RTO expires an ACK_REQ
control packet asks for it (ref. 3.8). Lost packets are found from SACK gaps (``Rack``,
time-based and reorder tolerant; optionally ``LossDetector``, a packet count), NACKs, the
optional ooo_count inference and the RTO; each is retransmitted alone, same PSN, RETX|AR
set, lowest PSN first. Never go-back-N.
"""

from __future__ import annotations

import heapq
from collections import deque

from uet.cms.api import AckFeedback, NackFeedback
from uet.pds.ack import NEXT_HDR
from uet.pds.events import (
    MessageFailed,
    PacketAcked,
    PdcState,
    ResponseReceived,
    SendRequest,
)
from uet.pds.manager import INITIATOR, PdcBase
from uet.pds.retransmit import RESOURCE_NACKS, LossDetector, Rack, RtoEstimator, nack_name
from uet.wire.constants import (
    AckFlag,
    CcType,
    CpFlag,
    CtlType,
    DeliveryMode,
    NackAction,
    NackCode,
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
# enum members under module names for the per-packet paths: looking a member up on an Enum
# class costs ~70 ns, an IntFlag "&" ~1 us
ST_SYN = PdcState.SYN
ST_ESTABLISHED = PdcState.ESTABLISHED
ST_CLOSED = PdcState.CLOSED
RUD_CC_REQ = PdsType.RUD_CC_REQ
CC_NSCC = CcType.NSCC
TX_OVERHEAD = 64  # bytes charged per retained packet besides its payload
SACK_BITS = 64  # PSNs an ACK_CC's SACK bitmap names above its base (CACK + 1)
DEFAULT_RESPONSE = int(RspOpcode.DEFAULT_RESPONSE)
TRIM_NACKS = frozenset({NackCode.TRIMMED, NackCode.TRIMMED_LASTHOP, NackCode.TRIMMED_ACK})


class Tx:
    """One request packet (or the CLOSE) that holds a PSN and waits for its ACK."""

    __slots__ = ("psn", "req", "nbytes", "cost", "send_time", "prev_send", "retries",
                 "arrived", "seq", "ev", "retx_queued", "released", "ever_retx", "suspect",
                 "is_close", "inflight")

    def __init__(self, psn: int, req: SendRequest | None, nbytes: int, cost: int) -> None:
        self.psn = psn
        self.req = req
        self.nbytes = nbytes
        self.cost = cost
        self.send_time = 0
        self.prev_send = 0  # send time of the transmission before the latest one
        self.retries = 0
        self.arrived = False  # SACKed: data reached the target, ACK still missing
        self.seq = 0  # transmission sequence number of the latest transmission
        self.ev = 0
        self.retx_queued = False
        self.released = False
        self.ever_retx = False
        self.suspect = False  # resent on a guess (RACK, RTO): the earlier copy may arrive
        self.is_close = req is None
        self.inflight = False  # counted in the PDC's in-flight bytes


class InitiatorPdc(PdcBase):
    """One initiator PDC (RUD or ROD)."""

    __slots__ = ("cfg", "job_id", "tc", "dpdcid", "start_psn", "next_psn", "max_cack",
                 "peer_range", "queue", "outstanding", "inflight_bytes", "retx", "sent_order",
                 "seq", "detector", "rto", "rto_at", "cc", "fixed_ev", "ptype", "in_ring",
                 "last_progress", "next_probe", "probe_opaque", "idle_since",
                 "close_requested", "recovery_until", "last_clear_sent", "clear_kick_at", "backlog",
                 "credit", "known_arrived", "peer_rcvd", "peer_rcvd_raw", "rack",
                 "rack_at", "last_tx", "last_ev", "retx_tie", "sack_reach")

    def __init__(self, ep, pdc_id: int, peer_ip: str, mode: DeliveryMode, key: tuple,
                 job_id: int, tc: int, start_psn: int, cc, now: int) -> None:
        super().__init__(ep, pdc_id, INITIATOR, peer_ip, mode, key)
        cfg = self.cfg = ep.cfg
        self.state = PdcState.SYN
        self.job_id = job_id
        self.tc = tc
        self.dpdcid = 0
        self.start_psn = start_psn
        self.next_psn = start_psn
        self.max_cack = psn_add(start_psn, -1)
        self.peer_range = cfg.mp_range  # until an ACK_CC advertises the peer's MPR
        self.queue: deque[SendRequest] = deque()
        self.outstanding: dict[int, Tx] = {}  # PSN order
        self.inflight_bytes = 0  # payload bytes sent, neither released nor SACKed
        # rcvd_bytes accounting (NSCC ACK_CC): payload bytes of distinct packets an ACK
        # named as arrived, and the target's running count of received bytes (unwrapped)
        self.known_arrived = 0
        self.peer_rcvd = 0
        self.peer_rcvd_raw: int | None = None
        # retransmissions to send, lowest PSN first: (PSN - Start_PSN, tie, Tx); the key
        # survives a NEW_START_PSN re-base (every PSN moves by the same delta)
        self.retx: list[tuple[int, int, Tx]] = []
        self.retx_tie = 0
        # (transmission number, Tx) in transmission order, for the SACK loss detectors
        self.sent_order: deque[tuple[int, Tx]] = deque()
        self.seq = 0
        self.detector = LossDetector(cfg.sack_dupthresh)
        self.rack = Rack(cfg.rack_reo_wnd_ps) if cfg.rack else None
        self.rack_at: int | None = None
        self.last_tx = now  # time of the latest data transmission
        self.last_ev: int | None = None
        # highest PSN whose arrival an ACK could have named (SACK bitmap reach): above
        # it "not SACKed" says nothing, so RACK leaves those packets alone
        self.sack_reach = start_psn
        self.rto = RtoEstimator(cfg)
        self.rto_at: int | None = None
        self.cc = cc
        rod = mode == DeliveryMode.ROD
        self.fixed_ev = cc.choose_ev(now) if rod and not cfg.rod_multi_ev else None
        self.credit = cc.rccc  # the RCCC side of the CC, or None
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
        self.recovery_until: int | None = None
        self.last_clear_sent: int | None = None
        self.clear_kick_at: int | None = None

    # ================================================================== sending
    def submit(self, now: int, req: SendRequest) -> None:
        self.queue.append(req)
        self.idle_since = None
        if self.credit is not None:
            self.backlog += len(req.payload)
            self.credit.on_backlog(now, backlog_bytes=self.backlog)
        self.ep.activate(self)

    def _blocked_by_cc(self, now: int) -> None:
        """The CC refused a packet: ask for credit (RCCC) and wake up at its deadline."""
        self.ep.counters["blocked.cc"] += 1
        cc = self.cc
        if self.credit is not None:
            payload = self.credit.poll_credit_request(now)
            if payload is not None:
                self.send_cp(now, CtlType.CREDIT_REQ, self.una(), 0, payload & 0xFFFFFFFF)
        d = cc.next_deadline()
        if d is not None:
            self.ep.arm(self, max(d, now + 1))

    def has_data_work(self) -> bool:
        return bool(self.retx) or (bool(self.queue) and self.state <= ST_ESTABLISHED)

    def una(self) -> int:
        """Lowest PSN not yet released (next_psn when nothing is outstanding)."""
        for psn in self.outstanding:
            return psn
        return self.next_psn

    def poll_data(self, now: int) -> Frame | None:
        """Next request of this PDC: a retransmission first, else a new packet if allowed."""
        retx = self.retx
        while retx:
            tx = retx[0][2]
            if not tx.retx_queued or tx.released or tx.arrived:
                heapq.heappop(retx)
                if tx.retx_queued and self.credit is not None and not tx.released:
                    self.backlog -= tx.nbytes
                    self.credit.on_backlog(now, backlog_bytes=self.backlog)
                tx.retx_queued = False
                continue
            if not self.cc.can_send(now, nbytes=tx.nbytes, in_flight=self.cc_inflight(),
                                    retx=True):
                self._blocked_by_cc(now)
                return None
            heapq.heappop(retx)
            tx.retx_queued = False
            return self._send(now, tx, True)
        queue = self.queue
        if not queue or self.state > ST_ESTABLISHED:
            return None
        cfg = self.cfg
        psn = self.next_psn
        counters = self.ep.counters
        una = self.una()
        if psn_diff(psn, una) >= cfg.max_inflight_packets:
            counters["blocked.window"] += 1
            return None
        if psn_diff(psn, self.max_cack) > self.peer_range:
            # The peer's CACK is held by responses we already hold: tell it (CLEAR).
            counters["blocked.peer_window"] += 1
            clear = psn_add(una, -1)
            if self.state == PdcState.ESTABLISHED and clear != self.last_clear_sent \
                    and psn_diff(clear, self.max_cack) > 0:
                self.last_clear_sent = clear
                self.send_cp(now, CtlType.CLEAR, 0, 0, clear)
            return None
        if self.state == ST_SYN and psn_diff(psn, self.start_psn) >= cfg.max_syn_packets:
            counters["blocked.syn"] += 1
            return None
        req = queue[0]
        nbytes = len(req.payload)
        if not self.cc.can_send(now, nbytes=nbytes, in_flight=self.cc_inflight()):
            self._blocked_by_cc(now)
            return None
        mgr = self.ep.mgr
        cost = nbytes + TX_OVERHEAD
        if mgr.tx_mem + cost > cfg.max_tx_memory_bytes and mgr.tx_mem:
            counters["blocked.memory"] += 1
            self.ep.mem_blocked.add(self)
            return None
        queue.popleft()
        self.next_psn = psn_add(psn, 1)
        tx = Tx(psn, req, nbytes, cost)
        self.outstanding[psn] = tx
        mgr.tx_mem += cost
        if len(self.outstanding) == 1:
            self.last_progress = now
            if cfg.probe_after_ps:
                self.ep.arm(self, now + cfg.probe_after_ps)
        return self._send(now, tx, False)

    def _send(self, now: int, tx: Tx, retx: bool) -> Frame:
        cfg = self.cfg
        req = tx.req
        ev = self.fixed_ev
        if ev is None:
            ev = self.cc.choose_ev(now)
        psn = tx.psn
        flags = AR if (retx or req.eom or cfg.ar_every_packet) else 0
        if not flags and cfg.ar_when_blocked and not tx.is_close:
            after = self.cc_inflight() + (0 if tx.inflight else tx.nbytes)
            if not self.queue or self.cc.window_full(nbytes=tx.nbytes, in_flight=after):
                flags = AR
        if retx:
            flags |= RETX
            tx.ever_retx = True
        clear = psn_add(self.una(), -1)
        if self.state == ST_SYN:
            pds = PdsRequest(self.ptype, NEXT_HDR[type(req.ses)], flags | SYN,
                             psn_diff(clear, psn), psn, self.pdc_id, 0, False,
                             psn_diff(psn, self.start_psn))
        else:
            pds = PdsRequest(self.ptype, NEXT_HDR[type(req.ses)], flags, psn_diff(clear, psn),
                             psn, self.pdc_id, self.dpdcid)
        if self.ptype >= RUD_CC_REQ:
            pds.credit_target = self.credit.credit_target() & 0xFFFFFF if self.credit \
                else 0
        tx.send_time = now
        nbytes = tx.nbytes
        if not tx.inflight:
            tx.inflight = True
            self.inflight_bytes += nbytes
        if self.credit is not None:
            self.backlog -= nbytes
            self.credit.on_backlog(now, backlog_bytes=self.backlog)
        tx.ev = ev
        if ev != self.last_ev:
            if self.last_ev is not None and self.rack is not None:
                self.rack.multipath = True
            self.last_ev = ev
        seq = self.seq = self.seq + 1
        tx.seq = seq
        self.last_tx = now
        if self.rack is not None or self.detector.n:
            self.sent_order.append((seq, tx))
        self.cc.on_send(now, nbytes=nbytes, ev=ev, retx=retx)
        d = now + self.rto.rto_for(tx.retries)
        if self.rto_at is None or d < self.rto_at:
            self.rto_at = d
            self.ep.arm(self, d)
        counters = self.ep.counters
        counters["tx_packets"] += 1
        counters["tx_bytes"] += nbytes
        return Frame(pds=pds, ses=req.ses, ext=req.ext, payload=req.payload,
                     src_ip=self.ep.local_ip, dst_ip=self.peer_ip, ev=ev, dscp=cfg.dscp_data,
                     ecn=2 if cfg.ecn_capable else 0)

    def send_cp(self, now: int, ctl: int, psn: int, flags: int = 0, payload: int = 0,
                probe_opaque: int = 0) -> None:
        """A control packet of this PDC (ACK_REQ, CLEAR, CLOSE, PROBE)."""
        if self.mode == DeliveryMode.ROD:
            flags |= CpFlag.ISROD
        if self.state == PdcState.SYN:
            off = psn_diff(psn, self.start_psn)
            cp = PdsControl(ctl_type=ctl, flags=flags | CpFlag.SYN, probe_opaque=probe_opaque,
                            psn=psn, spdcid=self.pdc_id, psn_offset=off & 0xFFF,
                            payload=payload)
        else:
            cp = PdsControl(ctl_type=ctl, flags=flags, probe_opaque=probe_opaque, psn=psn,
                            spdcid=self.pdc_id, dpdcid=self.dpdcid, payload=payload)
        self.ep.send_control(now, cp, self.peer_ip)

    def _queue_retx(self, now: int, tx: Tx, cause: str) -> None:
        """Retransmit ``tx`` (data at the next poll, or the CLOSE / an ACK_REQ at once)."""
        ep = self.ep
        if tx.is_close:
            tx.send_time = now
            self.send_cp(now, CtlType.CLOSE, tx.psn, CpFlag.AR | CpFlag.RETX)
            self._arm_rto(now, tx)
        elif tx.arrived:
            tx.send_time = now
            self.send_cp(now, CtlType.ACK_REQ, tx.psn)
            self._arm_rto(now, tx)
            cause = "ack_req"
        else:
            if tx.retx_queued:
                return
            tx.retx_queued = True
            tx.prev_send = tx.send_time  # the transmission this one repeats
            # a NACK says that copy is gone; a guess (RACK, RTO, SACK count) may be wrong
            tx.suspect = not cause.startswith("nack.")
            self._leave_flight(tx)
            self.retx_tie += 1
            heapq.heappush(self.retx, (psn_diff(tx.psn, self.start_psn), self.retx_tie, tx))
            if self.credit is not None:
                self.backlog += tx.nbytes
                self.credit.on_backlog(now, backlog_bytes=self.backlog)
            ep.activate(self)
        ep.counters["retx." + cause] += 1
        ep.log(now, "retransmit", pdc_id=self.pdc_id, psn=tx.psn, cause=cause)

    def cc_inflight(self) -> int:
        """In-flight bytes as the CC sees them: sent, not known to have arrived, and not
        received by the target according to its ``rcvd_bytes`` count (NSCC ACK_CC).

        The 64-bit SACK bitmap cannot name packets more than 64 PSNs above the CACK, so
        behind a long-delayed packet (a slow path) arrivals would stay "in flight" and
        block the window; the target's running byte count (htsim's ``recvd_bytes``, which
        htsim's window uses) says how many of them arrived. The difference is clamped
        to the bytes in flight, and re-based whenever an ACK_CC leaves nothing outstanding,
        so a count that runs ahead (a packet the SES refused is counted by the target yet
        resent) cannot drift."""
        unseen = self.peer_rcvd - self.known_arrived
        if unseen <= 0:
            return self.inflight_bytes
        return max(self.inflight_bytes - unseen, 0)

    def _peer_rcvd(self, raw: int) -> None:
        """Fold an ACK_CC's 24-bit ``rcvd_bytes`` into the unwrapped count (stale ones,
        from ACKs overtaken by newer ones, are ignored)."""
        last = self.peer_rcvd_raw
        if last is None:
            self.peer_rcvd_raw = raw
            self.peer_rcvd = raw
            return
        delta = (raw - last) & 0xFFFFFF
        if 0 < delta < 0x800000:
            self.peer_rcvd_raw = raw
            self.peer_rcvd += delta

    def _leave_flight(self, tx: Tx) -> None:
        if tx.inflight:
            tx.inflight = False
            self.inflight_bytes -= tx.nbytes

    def _arm_rto(self, now: int, tx: Tx) -> None:
        d = now + self.rto.rto_for(tx.retries)
        if self.rto_at is None or d < self.rto_at:
            self.rto_at = d
            self.ep.arm(self, d)

    def _rtt_sample(self, now: int, rtt: int) -> None:
        """Feed the RTO estimator; when the RTO shrinks (the first samples replace the
        initial 5 ms), packets sent under the old one expire sooner: move the timer."""
        rto = self.rto
        before = rto.base
        rto.sample(rtt)
        if rto.base < before and self.outstanding:
            oldest = next(iter(self.outstanding.values()))
            d = max(now, oldest.send_time + rto.rto_for(oldest.retries))
            if self.rto_at is None or d < self.rto_at:
                self.rto_at = d
                self.ep.arm(self, d)

    # ================================================================== ACKs
    def rx_ack(self, now: int, frame: Frame, ack) -> None:
        """ACK / ACK_CC for this PDC."""
        ep = self.ep
        counters = ep.counters
        counters["ack_rx"] += 1
        st = self.state
        if st >= ST_CLOSED:
            counters["dropped.ack_closed_pdc"] += 1
            return
        if frame.src_ip != self.peer_ip:
            counters["dropped.ack_wrong_peer"] += 1
            return
        if st == ST_SYN:
            self.dpdcid = ack.spdcid
            self.state = PdcState.ESTABLISHED
            ep.log(now, "pdc_established", pdc_id=self.pdc_id, dpdcid=ack.spdcid)
        elif ack.spdcid != self.dpdcid:
            counters["dropped.ack_spdcid_mismatch"] += 1
            return
        cack = ack.cack_psn
        if psn_diff(cack, psn_add(self.next_psn, -1)) > 0:
            counters["dropped.ack_beyond_next_psn"] += 1
            return
        flags = ack.flags
        outstanding = self.outstanding
        events = ep.events
        newly = [0, 0]  # bytes, packets
        rtt = None
        if not flags & ACK_P:
            ap = psn_add(cack, ack.ack_psn_offset)
            tx = outstanding.get(ap)
            if tx is not None:
                if not tx.ever_retx:
                    rtt = now - tx.send_time
                ses = frame.ses
                if ses is not None and tx.req is not None and ses.opcode != DEFAULT_RESPONSE:
                    events.append(ResponseReceived(tx.req.msg_ref, ses, frame.payload, ap))
                # named without RETX: the copy that arrived is not a retransmission
                self._release(now, tx, newly, original=not flags & ACK_RETX)
        if psn_diff(cack, self.max_cack) >= 0:
            if cack != self.max_cack:
                # beyond this PSN the previous ACK's SACK bitmap could not name arrivals:
                # their news comes late, with the CACK
                named = psn_add(self.max_cack, SACK_BITS) if type(ack) is PdsAckCc else cack
                self.max_cack = cack
                while outstanding:
                    psn = next(iter(outstanding))
                    if psn_diff(psn, cack) > 0:
                        break
                    # serial "psn <= named" without a call: this loop runs per packet
                    self._release(now, outstanding[psn], newly,
                                  (named - psn) & 0xFFFFFFFF < 0x80000000)
            if type(ack) is PdsAckCc and ack.mpr:
                self.peer_range = ack.mpr * 128
        is_cc = type(ack) is PdsAckCc
        if is_cc:
            base = ack.sack_base
            bm = ack.sack_bitmap
            if bm and outstanding:
                sacked_rtt = self._apply_sack(now, base, bm, cack, newly)
                if rtt is None and sacked_rtt is not None:
                    # the RTO estimator only: a PDC whose named packets were all resent
                    # (ROD holds the rest, SACKed) got no sample and kept the 5 ms initial RTO
                    self._rtt_sample(now, sacked_rtt)
            reach = (base + SACK_BITS - 1) & 0xFFFFFFFF
            if (self.max_cack - reach) & 0xFFFFFFFF < 0x80000000:
                reach = (self.max_cack + 1) & 0xFFFFFFFF
        else:
            reach = (self.max_cack + 1) & 0xFFFFFFFF
        if 0 < (reach - self.sack_reach) & 0xFFFFFFFF < 0x80000000:
            self.sack_reach = reach
        self.known_arrived += newly[0]
        if is_cc and ack.cc_type == CC_NSCC:
            self._peer_rcvd(ack.rcvd_bytes)
            if not outstanding:  # every byte the target counted is named: re-base
                self.known_arrived = self.peer_rcvd
        if self.state == ST_CLOSED:  # the CLOSE was acknowledged
            return
        if newly[1]:
            self.last_progress = now
        if rtt is not None:
            self._rtt_sample(now, rtt)
        self.cc.on_ack(now, fb=AckFeedback(frame.ev, bool(flags & ACK_M), newly[0], newly[1], rtt,
                                        self.cc_inflight(), ack if is_cc else None,
                                        bool(flags & ACK_RETX)))
        if self.rack is not None and newly[1]:
            self._rack_detect(now)
        if self.detector.n and newly[1]:
            self._detect_losses(now)
            held = outstanding.get(psn_add(self.max_cack, 1))
            if held is not None and held.arrived and held.seq < self.detector.threshold:
                # arrived, yet the CACK stays below it: its ACK (and response) was lost
                self._queue_retx(now, held, "ack_req")
                seq = self.seq = self.seq + 1
                held.seq = seq
        if is_cc and self.cfg.ooo_loss_threshold:
            self._ooo_inference(now, ack)
        req = (flags & ACK_REQ_MASK) >> 1
        if req == 1:
            self.clear_requested(now, from_cp=False)
        elif req == 2:
            self.close_request(now)
        self._after_progress(now)

    def _apply_sack(self, now: int, base: int, bm: int, cack: int, newly: list
                    ) -> int | None:
        """Mark the SACKed packets arrived; the shortest round trip among those sent once
        (an RTT sample), or None."""
        outstanding = self.outstanding
        rack = self.rack
        sample = None
        while bm:
            low = bm & -bm
            bm ^= low
            psn = (base + low.bit_length() - 1) & 0xFFFFFFFF
            d = (psn - cack) & 0xFFFFFFFF
            if not d or d & 0x80000000:  # psn_diff(psn, cack) <= 0, without calls: per bit
                continue
            tx = outstanding.get(psn)
            if tx is not None and not tx.arrived:
                tx.arrived = True
                self._leave_flight(tx)
                newly[0] += tx.nbytes
                newly[1] += 1
                self.detector.delivered(tx.seq)
                if not tx.ever_retx:
                    rtt = now - tx.send_time
                    if sample is None or rtt < sample:
                        sample = rtt
                if rack is not None and not rack.delivered(
                        now, tx.seq, tx.send_time, tx.prev_send,
                        tx.suspect and not tx.retx_queued):
                    self.ep.counters["retx_spurious"] += 1
        return sample

    def _rack_delivered(self, now: int, tx: Tx, timely: bool = True,
                        original: bool = False) -> None:
        # a packet still waiting for its retransmission was not resent: this is the original
        resent = tx.suspect and not tx.retx_queued
        if not self.rack.delivered(now, tx.seq, tx.send_time, tx.prev_send, resent, timely,
                                   original):
            self.ep.counters["retx_spurious"] += 1

    def _release(self, now: int, tx: Tx, newly: list, timely: bool = True,
                 original: bool = False) -> None:
        del self.outstanding[tx.psn]
        tx.released = True
        self._leave_flight(tx)
        if tx.retx_queued and self.credit is not None:
            self.backlog -= tx.nbytes
        if not tx.arrived:
            newly[0] += tx.nbytes
            newly[1] += 1
            self.detector.delivered(tx.seq)
            if self.rack is not None and not tx.is_close:
                self._rack_delivered(now, tx, timely, original)
        ep = self.ep
        ep.mgr.tx_mem -= tx.cost
        if tx.is_close:
            self.state = PdcState.CLOSED
            ep.pdc_closed(now, self, error=False, reason="closed")
        else:
            ep.events.append(PacketAcked(tx.req.msg_ref, tx.psn))

    def _detect_losses(self, now: int) -> None:
        thr = self.detector.threshold
        so = self.sent_order
        while so:
            seq, tx = so[0]
            if tx.seq != seq or tx.arrived or tx.released:
                so.popleft()
                continue
            if seq >= thr:
                break
            so.popleft()
            self._queue_retx(now, tx, "sack")

    def _rack_detect(self, now: int) -> None:
        """RACK: resend every packet sent before the latest-sent arrived one whose time is
        up (its send time + that packet's RTT + the reordering window); arm the PDC's
        timer for the first one whose time is not up yet. Packets are judged in
        transmission order, which is also send-time order, so the scan stops there."""
        rack = self.rack
        if not rack.seq:
            return
        so = self.sent_order
        wnd = rack.rtt + rack.reo_wnd
        reach = self.sack_reach
        lost = []
        while so:  # drop the stale head entries (arrived, released, resent or queued)
            seq, tx = so[0]
            if tx.seq != seq or tx.arrived or tx.released or tx.retx_queued:
                so.popleft()
                continue
            break
        for seq, tx in so:
            if seq >= rack.seq:
                break
            if tx.seq != seq or tx.arrived or tx.released or tx.retx_queued:
                continue
            if psn_diff(tx.psn, reach) > 0:
                continue  # beyond what the SACK bitmap could name: no news either way
            due = tx.send_time + wnd
            if due > now:
                if self.rack_at is None or due < self.rack_at:
                    self.rack_at = due
                    self.ep.arm(self, due)
                break
            lost.append(tx)
        for tx in lost:
            self.cc.on_nack(now, fb=NackFeedback(tx.ev, NackCode.RCVR_INFER_LOSS, tx.nbytes,
                                              in_flight_bytes=self.cc_inflight(),
                                              own_ev=True))
            self._queue_retx(now, tx, "rack")

    def _ooo_inference(self, now: int, ack: PdsAckCc) -> None:
        """htsim-style loss recovery: retransmit un-SACKed PSNs below the highest SACKed."""
        if self.recovery_until is not None:
            if psn_diff(self.max_cack, self.recovery_until) >= 0:
                self.recovery_until = None
            return
        threshold = self.cfg.ooo_loss_threshold
        if threshold < 0:  # htsim SLEEK: max(min(1.5 cwnd, maxwnd), 5 MTU) in packets
            cc, mtu = self.cc, self.cfg.mtu_payload
            cwnd = cc.cwnd
            maxw = cc.max_window
            threshold = max(min(int(1.5 * cwnd), maxw), 5 * mtu) // mtu
        if ack.ooo_count < threshold or not ack.sack_bitmap:
            return
        top = psn_add(ack.sack_base, ack.sack_bitmap.bit_length() - 1)
        self.recovery_until = psn_add(self.next_psn, -1)
        for tx in list(self.outstanding.values()):
            if psn_diff(tx.psn, top) >= 0:
                break
            if not tx.arrived and not tx.retx_queued and not tx.is_close:
                self._queue_retx(now, tx, "ooo")

    def _after_progress(self, now: int) -> None:
        ep = self.ep
        if ep.mem_blocked:
            ep.unblock_memory()
        if self.outstanding or self.queue:
            if self.has_data_work():
                ep.activate(self)
            return
        self.sent_order.clear()
        self.rack_at = None
        if self.state != PdcState.ESTABLISHED:
            return
        if self.close_requested:
            self.start_close(now)
        elif self.cfg.close_idle_ps and self.idle_since is None:
            self.idle_since = now
            ep.arm(self, now + self.cfg.close_idle_ps)

    # ================================================================== NACKs and CPs
    def rx_nack(self, now: int, frame: Frame, nack) -> None:
        ep = self.ep
        code = nack.nack_code
        if self.state >= PdcState.CLOSED:
            return
        if self.dpdcid and nack.spdcid and nack.spdcid != self.dpdcid:
            ep.counters["dropped.nack_spdcid_mismatch"] += 1
            return
        tx = self.outstanding.get(nack.nack_psn)
        if tx is None:
            ep.counters["nack_rx_stale"] += 1
            return
        action = nack_action(code)
        name = nack_name(code)
        if code in TRIM_NACKS and tx.ever_retx and not nack.flags & ACK_RETX:
            # the trimmed copy was the original, and it was resent since (RACK, RTO):
            # resending again would only duplicate the retransmission in flight
            ep.counters["nack_rx_stale_copy"] += 1
            return
        if not tx.ever_retx and not nack.flags & ACK_RETX:
            # a NACK of a packet sent once is a round trip too (Karn): without it a PDC
            # whose first packets were all trimmed (incast) kept the 5 ms initial RTO
            self._rtt_sample(now, now - tx.send_time)
        if action == NackAction.RETRANSMIT:
            self.cc.on_nack(now, fb=NackFeedback(frame.ev, code, tx.nbytes,
                                              bool(nack.flags & ACK_M), now - tx.send_time,
                                              self.cc_inflight(),
                                              bool(nack.flags & ACK_RETX)))
            if code in RESOURCE_NACKS:
                ep.counters["nack_rx_deferred"] += 1  # resent when its RTO expires
                return
            if code == NackCode.PKT_NOT_RCVD and tx.arrived:
                tx.arrived = False  # the target says the data never arrived after all
            if tx.is_close or not tx.arrived:
                self._queue_retx(now, tx, "nack." + name)
        elif action == NackAction.CLOSE_PDC:
            if tx.is_close and code != NackCode.CLOSING_IN_ERR:
                # Everything was acknowledged before the CLOSE; the target no longer knows
                # the PDC (its linger ended after it took our CLOSE): closed.
                ep.counters["close_nacked"] += 1
                self._release(now, tx, [0, 0])
                return
            self.close_in_error(now, f"NACK {name} for PSN {nack.nack_psn}")
        elif action == NackAction.NEW_START_PSN:
            self._new_start_psn(now, nack.payload)
        # IGNORE (RCVD_SES_PROCG, unknown codes): rely on the RTO

    def _new_start_psn(self, now: int, new_start: int) -> None:
        """Re-base every PSN on the target's Start_PSN and resend (ref. 3.2)."""
        if self.state != PdcState.SYN or new_start == self.start_psn:
            return
        delta = psn_diff(new_start, self.start_psn)
        moved = {}
        for tx in self.outstanding.values():
            tx.psn = psn_add(tx.psn, delta)
            moved[tx.psn] = tx
        self.outstanding = moved
        self.start_psn = new_start
        self.next_psn = psn_add(self.next_psn, delta)
        self.max_cack = psn_add(new_start, -1)
        self.ep.log(now, "new_start_psn", pdc_id=self.pdc_id, start_psn=new_start)
        for tx in moved.values():
            self._queue_retx(now, tx, "nack.NEW_START_PSN")

    def rx_cp(self, now: int, frame: Frame, cp: PdsControl) -> None:
        """CLEAR_REQ, CLOSE_REQ or CREDIT from the target."""
        if self.state >= PdcState.CLOSED or frame.src_ip != self.peer_ip:
            return
        if self.dpdcid and cp.spdcid != self.dpdcid:
            self.ep.counters["dropped.cp_spdcid_mismatch"] += 1
            return
        ctl = cp.ctl_type
        if ctl == CtlType.CLEAR_REQ:
            self._clear_req_kick(now, cp.payload)
            self.clear_requested(now, from_cp=True)
        elif ctl == CtlType.CLOSE_REQ:
            self.close_request(now)
            if self.state == PdcState.ESTABLISHED and self.outstanding:
                self._close_req_kick(now)
        elif ctl == CtlType.CREDIT:
            if self.credit is not None:
                self.credit.on_credit(now, credit=cp.payload)
            if self.has_data_work():
                self.ep.activate(self)

    def clear_requested(self, now: int, from_cp: bool) -> None:
        """The target holds stored responses: tell it how far we hold the ACKs (CLEAR)."""
        if self.state != PdcState.ESTABLISHED:
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
        tx = self.outstanding.get(psn)
        if tx is None or tx.is_close or tx.retx_queued:
            return
        base = self.rto.base
        if now - tx.send_time <= base:
            return
        if self.clear_kick_at is not None and now - self.clear_kick_at <= base:
            return
        self.clear_kick_at = now
        self.send_cp(now, CtlType.ACK_REQ, psn)
        self.ep.counters["retx.clear_req"] += 1
        self.ep.log(now, "retransmit", pdc_id=self.pdc_id, psn=psn, cause="clear_req")

    def close_request(self, now: int) -> None:
        """The target asked for a close (CLOSE_REQ or ACK REQ=2)."""
        if self.state > PdcState.ESTABLISHED or self.close_requested:
            return
        self.close_requested = True
        self.ep.mgr.unmap_initiator(self)
        if not self.outstanding and not self.queue and self.state == PdcState.ESTABLISHED:
            self.start_close(now)

    def _close_req_kick(self, now: int) -> None:
        """A CLOSE_REQ while packets are outstanding: the target thinks we are idle, so
        what it misses is sitting in a backed-off RTO. Resend (or ACK_REQ) now every
        packet last sent more than a base RTO ago, so the PDC finishes and closes within
        the target's Close_REQ_Time (ref. 3.9: the initiator closes once all is ACKed)."""
        base = self.rto.base
        gap = False
        for tx in list(self.outstanding.values()):
            if tx.is_close:
                continue
            if not tx.retx_queued and now - tx.send_time > base \
                    and not (tx.arrived and gap):
                self._queue_retx(now, tx, "close_req")
            if not tx.arrived:
                gap = True

    # ================================================================== close
    def start_close(self, now: int) -> None:
        """Send CLOSE (a new PSN, AR set) once idle with everything acknowledged."""
        ep = self.ep
        ep.mgr.unmap_initiator(self)
        self.state = PdcState.CLOSING
        psn = self.next_psn
        self.next_psn = psn_add(psn, 1)
        tx = Tx(psn, None, 0, 0)
        self.outstanding[psn] = tx
        tx.send_time = now
        self.send_cp(now, CtlType.CLOSE, psn, CpFlag.AR)
        self._arm_rto(now, tx)
        ep.log(now, "pdc_closing", pdc_id=self.pdc_id, psn=psn)

    def close_in_error(self, now: int, reason: str) -> None:
        """Fail every queued and outstanding message, then close (ref. 3.9)."""
        ep = self.ep
        was_established = self.state in (PdcState.ESTABLISHED, PdcState.CLOSING)
        failed = []
        seen = set()
        for tx in self.outstanding.values():
            ref = tx.req.msg_ref if tx.req is not None else None
            if tx.req is not None and id(ref) not in seen:
                seen.add(id(ref))
                failed.append(ref)
            ep.mgr.tx_mem -= tx.cost
            tx.released = True
        for req in self.queue:
            if id(req.msg_ref) not in seen:
                seen.add(id(req.msg_ref))
                failed.append(req.msg_ref)
        for ref in failed:
            ep.events.append(MessageFailed(ref, reason))
        self.outstanding.clear()
        self.queue.clear()
        self.retx.clear()
        self.sent_order.clear()
        self.inflight_bytes = 0
        if self.credit is not None and self.backlog:
            self.backlog = 0
            self.credit.on_backlog(now, backlog_bytes=0)
        if was_established:  # best-effort CLOSE so the target can free its PDC
            self.send_cp(now, CtlType.CLOSE, self.next_psn, CpFlag.AR)
        self.state = PdcState.ERROR
        ep.pdc_closed(now, self, error=True, reason=reason)

    # ================================================================== timers
    def on_timer(self, now: int) -> int | None:
        ep = self.ep
        cfg = self.cfg
        st = self.state
        if st >= PdcState.CLOSED:
            if now >= self.linger_until:
                ep.free_lingering(self)
                return None
            return self.linger_until
        nxt = None
        if self.rack_at is not None and now >= self.rack_at:
            self.rack_at = None
            self._rack_detect(now)
        if self.rto_at is not None and now >= self.rto_at:
            self._check_rto(now)
            if self.state >= PdcState.CLOSED:
                return self.linger_until
        if self.rto_at is not None:
            nxt = self.rto_at
        if self.rack_at is not None:
            nxt = self.rack_at if nxt is None else min(nxt, self.rack_at)
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
                    ep.activate(self)
                d = cc.next_deadline()
            if d is not None and d > now:
                nxt = d if nxt is None else min(nxt, d)
        if cfg.probe_after_ps and self.outstanding and self.state <= PdcState.ESTABLISHED:
            t = max(self.last_progress + cfg.probe_after_ps, self.next_probe)
            if now >= t:
                self.probe_opaque = (self.probe_opaque + 1) & 0xFFFF
                una = self.una()
                self.send_cp(now, CtlType.PROBE, una, 0, una, self.probe_opaque)
                ep.counters["probe_tx"] += 1
                self.next_probe = t = now + cfg.probe_after_ps
            nxt = t if nxt is None else min(nxt, t)
        if self.idle_since is not None and st == PdcState.ESTABLISHED:
            if self.outstanding or self.queue:
                self.idle_since = None
            else:
                t = self.idle_since + cfg.close_idle_ps
                if now >= t:
                    self.idle_since = None
                    self.start_close(now)
                    if self.rto_at is not None:
                        nxt = self.rto_at if nxt is None else min(nxt, self.rto_at)
                else:
                    nxt = t if nxt is None else min(nxt, t)
        return nxt

    def _check_rto(self, now: int) -> None:
        """Handle every packet whose RTO expired; recompute the earliest RTO deadline.

        Expiries that say nothing about the network neither resend nor count a retry: a
        packet still waiting in the retransmit queue while the PDC keeps sending (its turn
        comes; only a PDC that sent nothing for a whole RTO ages it), and a packet that
        arrived while a packet below it has not (its ACK waits for that one: ROD holds it,
        the CACK stops below the gap), which would otherwise get an ACK_REQ per RTO."""
        cfg = self.cfg
        rto = self.rto
        nxt = None
        gap = False  # an outstanding packet below this one has not arrived
        credit_wait = self.credit.waiting_for_credit() if self.credit is not None else None
        had_flight = self.inflight_bytes > 0
        for tx in list(self.outstanding.values()):
            period = rto.rto_for(tx.retries)
            d = tx.send_time + period
            if d <= now:
                waiting = tx.retx_queued and (
                    now - self.last_tx < period
                    # the window is held by packets in flight: their RTOs keep the PDC
                    # live and count the retries, a queued packet is only waiting its turn
                    or had_flight
                    # refused for lack of credit: the target's scheduler decides when, and
                    # only a scheduler silent for max_rto counts against the retry limit
                    or (credit_wait is not None and now - credit_wait < cfg.max_rto_ps))
                if waiting or (tx.arrived and gap and not tx.is_close):
                    tx.send_time = now  # its turn comes / its ACK waits for the gap
                else:
                    tx.retries += 1
                    if tx.retries > cfg.max_retries:
                        self.close_in_error(
                            now, f"retry limit ({cfg.max_retries}) reached for PSN {tx.psn}")
                        return
                    if tx.retx_queued:  # the PDC sent nothing for an RTO: keep aging
                        tx.send_time = now
                    else:
                        if not tx.arrived:
                            self.cc.on_timeout(now, ev=tx.ev, nbytes=tx.nbytes)
                        self._queue_retx(now, tx, "rto")
                d = now + rto.rto_for(tx.retries)
            if not tx.arrived:
                gap = True
            if nxt is None or d < nxt:
                nxt = d
        self.rto_at = nxt
