"""Loss recovery of one initiator PDC: sent packets, SACK / RACK / dup-threshold / ooo
inference, RTO and retry counting, the retransmission queue (ref. 3.8).

:class:`LossRecovery` owns every packet that holds a PSN and waits for its ACK
(:class:`SentPacket`), in PSN order, and everything known about them: when each was sent,
whether a SACK said it arrived, how often it was resent. It decides *that* a packet is
lost or needs an ACK request; what to do about it comes back through callbacks the PDC
injects at construction (aioquic's ``QuicPacketRecovery`` is built the same way):

* ``released(now, pkt, original)``: an ACK named the packet or its CACK covered it
  (``original``: the ACK says the copy that arrived was not a retransmission);
* ``resend_control(now, pkt)``: resend the CLOSE, or send an ACK_REQ for a packet that
  arrived but whose ACK is missing;
* ``queued(now, pkt)``: data to resend entered the retransmission queue (backlog
  bookkeeping; wake the sender), and ``unqueued(now, pkt, notify)``: it left the queue
  without being resent (arrived or released meanwhile; ``notify``: tell the CC now);
* ``retry_limit(now, pkt)``: a packet ran out of retries: the PDC closes in error;
* ``arm(t)``: the PDC's timer must run at ``t`` (RTO, RACK deadline).

The PDC keeps what is not recovery: PSN assignment, the windows, SYN / ESTABLISHED /
CLOSING, clear and close. Losses are found by

* RACK (time-based, reorder tolerant; :class:`~uet.pds.retransmit.Rack`), from every ACK
  that reports an arrival and from the timer;
* the SACK count (:class:`~uet.pds.retransmit.LossDetector`, ``sack_dupthresh``);
* the ACK_CC ``ooo_count`` (htsim's SLEEK, ``ooo_loss_threshold``);
* NACKs (the PDC asks :meth:`LossRecovery.retransmit`);
* the RTO, with backoff and a retry limit, which also ages queued retransmissions of a
  PDC that sends nothing.

Every retransmission keeps its PSN and is resent alone, lowest PSN first. Never go-back-N.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable
from typing import Any

from uet.cms.api import CreditSender, NackFeedback, SenderCongestion
from uet.pds.config import PdsConfig
from uet.pds.events import SendRequest
from uet.pds.retransmit import LossDetector, Rack, RtoEstimator
from uet.wire.constants import NackCode
from uet.wire.records import PdsAckCc, psn_add, psn_diff

SACK_BITS = 64  # PSNs an ACK_CC's SACK bitmap names above its base (CACK + 1)
_RCVR_INFER_LOSS = NackCode.RCVR_INFER_LOSS


class SentPacket:
    """One request packet (or the CLOSE) that holds a PSN and waits for its ACK."""

    __slots__ = ("psn", "req", "nbytes", "cost", "send_time", "prev_send", "retries",
                 "arrived", "seq", "ev", "retx_queued", "released", "ever_retx", "suspect",
                 "is_close", "inflight")

    def __init__(self, psn: int, req: SendRequest | None, nbytes: int, cost: int) -> None:
        self.psn = psn
        self.req = req
        self.nbytes = nbytes
        self.cost = cost  # bytes charged to the end point's transmit memory
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
        self.inflight = False  # counted in the in-flight bytes

    def __repr__(self) -> str:
        what = "CLOSE" if self.is_close else f"{self.nbytes} B"
        flags = "".join(c for c, on in (("a", self.arrived), ("q", self.retx_queued),
                                        ("r", self.ever_retx)) if on)
        return f"<SentPacket psn={self.psn} {what} retries={self.retries} {flags}>"


#: the name this class had before loss recovery moved out of the initiator
Tx = SentPacket


class LossRecovery:
    """Sent packets, loss detection, RTO and the retransmission queue of one PDC."""

    __slots__ = ("cfg", "cc", "credit", "counters", "log", "pdc_id", "outstanding",
                 "inflight_bytes", "known_arrived", "peer_rcvd", "peer_rcvd_raw", "retx",
                 "retx_tie", "sent_order", "seq", "detector", "rack", "rack_at", "last_tx",
                 "last_ev", "sack_reach", "rto", "rto_at", "recovery_until", "max_cack",
                 "base_psn", "released", "resend_control", "queued", "unqueued",
                 "retry_limit", "arm")

    def __init__(self, cfg: PdsConfig, cc: SenderCongestion, *, start_psn: int, now: int,
                 pdc_id: int, counters: Any, log: Callable[..., None],
                 released: Callable[[int, SentPacket, bool], None],
                 resend_control: Callable[[int, SentPacket], None],
                 queued: Callable[[int, SentPacket], None],
                 unqueued: Callable[[int, SentPacket, bool], None],
                 retry_limit: Callable[[int, SentPacket], None],
                 arm: Callable[[int], None]) -> None:
        self.cfg = cfg
        self.cc = cc
        self.credit: CreditSender | None = cc.rccc
        self.counters = counters
        self.log = log
        self.pdc_id = pdc_id
        self.outstanding: dict[int, SentPacket] = {}  # PSN order
        self.inflight_bytes = 0  # payload bytes sent, neither released nor SACKed
        # rcvd_bytes accounting (NSCC ACK_CC): payload bytes of distinct packets an ACK
        # named as arrived, and the target's running count of received bytes (unwrapped)
        self.known_arrived = 0
        self.peer_rcvd = 0
        self.peer_rcvd_raw: int | None = None
        # retransmissions to send, lowest PSN first: (PSN - base_psn, tie, packet); the
        # key survives a NEW_START_PSN re-base (every PSN moves by the same delta)
        self.retx: list[tuple[int, int, SentPacket]] = []
        self.retx_tie = 0
        # (transmission number, packet) in transmission order, for the SACK loss detectors
        self.sent_order: deque[tuple[int, SentPacket]] = deque()
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
        self.recovery_until: int | None = None  # ooo inference: one episode at a time
        self.max_cack = psn_add(start_psn, -1)  # highest CACK heard
        self.base_psn = start_psn
        self.released = released
        self.resend_control = resend_control
        self.queued = queued
        self.unqueued = unqueued
        self.retry_limit = retry_limit
        self.arm = arm

    # ================================================================== bookkeeping
    def first_psn(self) -> int | None:
        """Lowest PSN not yet released, or None."""
        for psn in self.outstanding:
            return psn
        return None

    def track(self, pkt: SentPacket) -> None:
        """A packet just took a PSN (sent for the first time next)."""
        self.outstanding[pkt.psn] = pkt

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

    def _leave_flight(self, pkt: SentPacket) -> None:
        if pkt.inflight:
            pkt.inflight = False
            self.inflight_bytes -= pkt.nbytes

    # ================================================================== sending
    def on_sent(self, now: int, pkt: SentPacket, retx: bool, ev: int) -> None:
        """Bookkeeping of one data transmission (first or repeated) of ``pkt`` on ``ev``,
        and its RTO."""
        if retx:
            pkt.ever_retx = True
        pkt.send_time = now
        if not pkt.inflight:
            pkt.inflight = True
            self.inflight_bytes += pkt.nbytes
        pkt.ev = ev
        if ev != self.last_ev:
            if self.last_ev is not None and self.rack is not None:
                self.rack.multipath = True
            self.last_ev = ev
        seq = self.seq = self.seq + 1
        pkt.seq = seq
        self.last_tx = now
        if self.rack is not None or self.detector.n:
            self.sent_order.append((seq, pkt))
        d = now + self.rto.rto_for(pkt.retries)  # its RTO may be the earliest
        if self.rto_at is None or d < self.rto_at:
            self.rto_at = d
            self.arm(d)

    def arm_rto(self, now: int, pkt: SentPacket) -> None:
        """``pkt`` was (re)sent at ``now``: its RTO may be the earliest."""
        d = now + self.rto.rto_for(pkt.retries)
        if self.rto_at is None or d < self.rto_at:
            self.rto_at = d
            self.arm(d)

    def next_retransmission(self, now: int) -> SentPacket | None:
        """The lowest-PSN packet waiting to be resent (stale entries are dropped)."""
        retx = self.retx
        while retx:
            pkt = retx[0][2]
            if not pkt.retx_queued or pkt.released or pkt.arrived:
                heapq.heappop(retx)
                if pkt.retx_queued and not pkt.released:
                    self.unqueued(now, pkt, True)
                pkt.retx_queued = False
                continue
            return pkt
        return None

    def take_retransmission(self, now: int, pkt: SentPacket) -> None:
        """``pkt`` (the head of the queue) is being resent now."""
        heapq.heappop(self.retx)
        pkt.retx_queued = False

    def has_retransmission(self) -> bool:
        """Entries wait in the retransmission queue (stale ones are dropped at the next
        poll)."""
        return bool(self.retx)

    def retransmit(self, now: int, pkt: SentPacket, cause: str) -> None:
        """Resend ``pkt``: the CLOSE or an ACK_REQ at once, data through the queue."""
        if pkt.is_close:
            pkt.send_time = now
            self.resend_control(now, pkt)
            self.arm_rto(now, pkt)
        elif pkt.arrived:
            pkt.send_time = now
            self.resend_control(now, pkt)
            self.arm_rto(now, pkt)
            cause = "ack_req"
        else:
            if pkt.retx_queued:
                return
            pkt.retx_queued = True
            pkt.prev_send = pkt.send_time  # the transmission this one repeats
            # a NACK says that copy is gone; a guess (RACK, RTO, SACK count) may be wrong
            pkt.suspect = not cause.startswith("nack.")
            self._leave_flight(pkt)
            self.retx_tie += 1
            heapq.heappush(self.retx, (psn_diff(pkt.psn, self.base_psn), self.retx_tie, pkt))
            self.queued(now, pkt)
        self.counters["retx." + cause] += 1
        self.log(now, "retransmit", pdc_id=self.pdc_id, psn=pkt.psn, cause=cause)

    # ================================================================== ACKs
    def rtt_sample(self, now: int, rtt: int) -> None:
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
                self.arm(d)

    def on_ack(self, now: int, ack: Any, ack_psn: int | None, retx_flag: bool,
               newly: list[int], early: bool = False) -> int | None:
        """Apply one ACK / ACK_CC (``ack_psn``: the packet it names, None for a probe
        answer): release what it names and covers, mark what it SACKs. ``newly`` gets
        [bytes, packets] newly acknowledged or known arrived. ``early``: the ACK names
        its packet without its final response (NO_RESPONSE, or the ACK was trimmed): the
        packet has arrived but stays outstanding for the ACK that completes it. Returns
        the RTT sample of the named packet if it was sent once, else None (SACKed ones
        feed only the RTO estimator)."""
        outstanding = self.outstanding
        cack = ack.cack_psn
        rtt = None
        if ack_psn is not None:
            pkt = outstanding.get(ack_psn)
            if pkt is not None:
                if not pkt.ever_retx:
                    rtt = now - pkt.send_time
                if early:
                    if not pkt.arrived and psn_diff(ack_psn, cack) > 0:
                        self._arrived(now, pkt, newly)
                else:
                    # named without RETX: the copy that arrived is not a retransmission
                    self._release(now, pkt, newly, original=not retx_flag)
        is_cc = type(ack) is PdsAckCc
        d = (cack - self.max_cack) & 0xFFFFFFFF
        if d and d < 0x80000000:  # psn_diff(cack, max_cack) > 0, without a call
            # beyond this PSN the previous ACK's SACK bitmap could not name arrivals:
            # their news comes late, with the CACK
            named = psn_add(self.max_cack, SACK_BITS) if is_cc else cack
            self.max_cack = cack
            while outstanding:
                psn = next(iter(outstanding))
                d = (psn - cack) & 0xFFFFFFFF
                if d and d < 0x80000000:  # psn_diff(psn, cack) > 0, without a call
                    break
                # serial "psn <= named" without a call: this loop runs per packet
                self._release(now, outstanding[psn], newly,
                              (named - psn) & 0xFFFFFFFF < 0x80000000)
        if is_cc:
            base = ack.sack_base
            bm = ack.sack_bitmap
            if bm and outstanding:
                sacked_rtt = self._apply_sack(now, base, bm, cack, newly)
                if rtt is None and sacked_rtt is not None:
                    # the RTO estimator only: a PDC whose named packets were all resent
                    # (ROD holds the rest, SACKed) got no sample and kept the 5 ms initial RTO
                    self.rtt_sample(now, sacked_rtt)
            reach = (base + SACK_BITS - 1) & 0xFFFFFFFF
            if (self.max_cack - reach) & 0xFFFFFFFF < 0x80000000:
                reach = (self.max_cack + 1) & 0xFFFFFFFF
        else:
            reach = (self.max_cack + 1) & 0xFFFFFFFF
        if 0 < (reach - self.sack_reach) & 0xFFFFFFFF < 0x80000000:
            self.sack_reach = reach
        self.known_arrived += newly[0]
        if is_cc and ack.cc_type == 0:  # NSCC state: the target's received byte count
            self._peer_rcvd(ack.rcvd_bytes)
            if not outstanding:  # every byte the target counted is named: re-base
                self.known_arrived = self.peer_rcvd
        return rtt

    def _apply_sack(self, now: int, base: int, bm: int, cack: int, newly: list[int]
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
            pkt = outstanding.get(psn)
            if pkt is not None and not pkt.arrived:
                pkt.arrived = True
                if pkt.inflight:  # _leave_flight, inline: per bit
                    pkt.inflight = False
                    self.inflight_bytes -= pkt.nbytes
                newly[0] += pkt.nbytes
                newly[1] += 1
                if self.detector.n:
                    self.detector.delivered(pkt.seq)
                if not pkt.ever_retx:
                    rtt = now - pkt.send_time
                    if sample is None or rtt < sample:
                        sample = rtt
                if rack is not None and not rack.delivered(
                        now, pkt.seq, pkt.send_time, pkt.prev_send,
                        pkt.suspect and not pkt.retx_queued):
                    self.counters["retx_spurious"] += 1
        return sample

    def _arrived(self, now: int, pkt: SentPacket, newly: list[int]) -> None:
        """``pkt`` reached the target (an ACK named it early): it leaves the flight and is
        never resent as data; its RTO asks for its ACK instead (ACK_REQ)."""
        pkt.arrived = True
        self._leave_flight(pkt)
        newly[0] += pkt.nbytes
        newly[1] += 1
        self.detector.delivered(pkt.seq)
        if self.rack is not None:
            self.rack.delivered(now, pkt.seq, pkt.send_time, pkt.prev_send,
                                pkt.suspect and not pkt.retx_queued)

    def release(self, now: int, pkt: SentPacket) -> None:
        """Release ``pkt`` outside an ACK (a close-class NACK answering the CLOSE)."""
        self._release(now, pkt, [0, 0])

    def _release(self, now: int, pkt: SentPacket, newly: list[int], timely: bool = True,
                 original: bool = False) -> None:
        del self.outstanding[pkt.psn]
        pkt.released = True
        if pkt.inflight:  # _leave_flight, inline: per packet
            pkt.inflight = False
            self.inflight_bytes -= pkt.nbytes
        if pkt.retx_queued:  # its queue entry is dropped at the next poll
            self.unqueued(now, pkt, False)
        if not pkt.arrived:
            newly[0] += pkt.nbytes
            newly[1] += 1
            if self.detector.n:
                self.detector.delivered(pkt.seq)
            rack = self.rack
            if rack is not None and not pkt.is_close:
                # a packet still waiting for its retransmission was not resent: the original
                resent = pkt.suspect and not pkt.retx_queued
                if not rack.delivered(now, pkt.seq, pkt.send_time, pkt.prev_send, resent,
                                      timely, original):
                    self.counters["retx_spurious"] += 1
        self.released(now, pkt, original)

    def idle(self) -> None:
        """Nothing outstanding any more: the detectors forget old transmissions."""
        self.sent_order.clear()
        self.rack_at = None

    # ================================================================== loss detection
    def detect_after_ack(self, now: int, ack: Any, newly_packets: int, next_psn: int) -> None:
        """The detectors that an ACK feeds (after the CC heard of it); ``next_psn``: the
        PDC's next PSN (the ooo inference's episode ends when the CACK passes it)."""
        if self.rack is not None and newly_packets:
            self.rack_detect(now)
        if self.detector.n and newly_packets:
            self._detect_sack(now)
        if self.cfg.ooo_loss_threshold and type(ack) is PdsAckCc:
            self._ooo_inference(now, ack, next_psn)

    def _detect_sack(self, now: int) -> None:
        """The SACK-count detector after an ACK that named new packets."""
        det = self.detector
        self._detect_count(now)
        held = self.outstanding.get(psn_add(self.max_cack, 1))
        if held is not None and held.arrived and held.seq < det.threshold:
            # arrived, yet the CACK stays below it: its ACK (and response) was lost
            self.retransmit(now, held, "ack_req")
            seq = self.seq = self.seq + 1
            held.seq = seq

    def _detect_count(self, now: int) -> None:
        thr = self.detector.threshold
        so = self.sent_order
        while so:
            seq, pkt = so[0]
            if pkt.seq != seq or pkt.arrived or pkt.released:
                so.popleft()
                continue
            if seq >= thr:
                break
            so.popleft()
            self.retransmit(now, pkt, "sack")

    def rack_detect(self, now: int) -> None:
        """RACK: resend every packet sent before the latest-sent arrived one whose time is
        up (its send time + that packet's RTT + the reordering window); arm the PDC's
        timer for the first one whose time is not up yet."""
        self._rack_lost(now, self._rack_scan(now))

    def _rack_lost(self, now: int, lost: list[SentPacket]) -> None:
        """Tell the CC of each packet RACK deemed lost, and resend it."""
        for pkt in lost:
            self.cc.on_nack(now, fb=NackFeedback(pkt.ev, _RCVR_INFER_LOSS, pkt.nbytes,
                                                 in_flight_bytes=self.cc_inflight(),
                                                 own_ev=True))
            self.retransmit(now, pkt, "rack")

    def _rack_scan(self, now: int) -> list[SentPacket]:
        """RACK's scan: the packets whose time is up, in transmission order (also send-time
        order, so the scan stops at the first one not due, for which the timer is armed);
        the stale head of ``sent_order`` is dropped on the way."""
        rack = self.rack
        if rack is None or not rack.seq:
            return []
        so = self.sent_order
        wnd = rack.rtt + rack.reo_wnd
        reach = self.sack_reach
        lost: list[SentPacket] = []
        while so:  # drop the stale head entries (arrived, released, resent or queued)
            seq, pkt = so[0]
            if pkt.seq != seq or pkt.arrived or pkt.released or pkt.retx_queued:
                so.popleft()
                continue
            break
        for seq, pkt in so:
            if seq >= rack.seq:
                break
            if pkt.seq != seq or pkt.arrived or pkt.released or pkt.retx_queued:
                continue
            d = (pkt.psn - reach) & 0xFFFFFFFF
            if d and d < 0x80000000:  # psn_diff(pkt.psn, reach) > 0, without a call
                continue  # beyond what the SACK bitmap could name: no news either way
            due = pkt.send_time + wnd
            if due > now:
                if self.rack_at is None or due < self.rack_at:
                    self.rack_at = due
                    self.arm(due)
                break
            lost.append(pkt)
        return lost

    def _ooo_inference(self, now: int, ack: PdsAckCc, next_psn: int) -> None:
        """htsim-style loss recovery: retransmit un-SACKed PSNs below the highest SACKed."""
        if self.recovery_until is not None:
            if psn_diff(self.max_cack, self.recovery_until) >= 0:
                self.recovery_until = None
            return
        threshold = self.cfg.ooo_loss_threshold
        if threshold < 0:  # htsim SLEEK: max(min(1.5 cwnd, maxwnd), 5 MTU) in packets
            cc, mtu = self.cc, self.cfg.mtu_payload
            cwnd = cc.cwnd
            threshold = max(min(int(1.5 * cwnd), cc.max_window), 5 * mtu) // mtu
        if ack.ooo_count < threshold or not ack.sack_bitmap:
            return
        top = psn_add(ack.sack_base, ack.sack_bitmap.bit_length() - 1)
        self.recovery_until = psn_add(next_psn, -1)
        for pkt in list(self.outstanding.values()):
            if psn_diff(pkt.psn, top) >= 0:
                break
            if not pkt.arrived and not pkt.retx_queued and not pkt.is_close:
                self.retransmit(now, pkt, "ooo")

    # ================================================================== timers
    def on_timer(self, now: int) -> None:
        """Run the RACK deadline and the RTO if due (the PDC calls it from its timer)."""
        if self.rack_at is not None and now >= self.rack_at:
            self.rack_at = None
            self.rack_detect(now)
        if self.rto_at is not None and now >= self.rto_at:
            self.check_rto(now)

    def deadline(self) -> int | None:
        """The earliest of the RTO and RACK deadlines, or None."""
        a, b = self.rto_at, self.rack_at
        if a is None:
            return b
        if b is None or a <= b:
            return a
        return b

    def check_rto(self, now: int) -> None:
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
        for pkt in list(self.outstanding.values()):
            if pkt.released:  # released by a callback of this loop (close in error)
                continue
            period = rto.rto_for(pkt.retries)
            d = pkt.send_time + period
            if d <= now:
                waiting = pkt.retx_queued and (
                    now - self.last_tx < period
                    # the window is held by packets in flight: their RTOs keep the PDC
                    # live and count the retries, a queued packet is only waiting its turn
                    or had_flight
                    # refused for lack of credit: the target's scheduler decides when, and
                    # only a scheduler silent for max_rto counts against the retry limit
                    or (credit_wait is not None and now - credit_wait < cfg.max_rto_ps))
                if waiting or (pkt.arrived and gap and not pkt.is_close):
                    pkt.send_time = now  # its turn comes / its ACK waits for the gap
                else:
                    pkt.retries += 1
                    if pkt.retries > cfg.max_retries:
                        self.rto_at = None
                        self.retry_limit(now, pkt)
                        return
                    if pkt.retx_queued:  # the PDC sent nothing for an RTO: keep aging
                        pkt.send_time = now
                    else:
                        if not pkt.arrived:
                            self.cc.on_timeout(now, ev=pkt.ev, nbytes=pkt.nbytes)
                        self.retransmit(now, pkt, "rto")
                d = now + rto.rto_for(pkt.retries)
            if not pkt.arrived:
                gap = True
            if nxt is None or d < nxt:
                nxt = d
        self.rto_at = nxt

    # ================================================================== re-base, failure
    def rebase(self, delta: int, new_start: int) -> list[SentPacket]:
        """NEW_START_PSN: every PSN moves by ``delta``; returns the packets, re-keyed."""
        moved: dict[int, SentPacket] = {}
        for pkt in self.outstanding.values():
            pkt.psn = psn_add(pkt.psn, delta)
            moved[pkt.psn] = pkt
        self.outstanding = moved
        self.max_cack = psn_add(new_start, -1)
        self.base_psn = new_start
        return list(moved.values())

    def fail_all(self) -> list[SentPacket]:
        """The PDC closes in error: forget every packet (returned, in PSN order)."""
        pkts = list(self.outstanding.values())
        for pkt in pkts:
            pkt.released = True
            pkt.retx_queued = False
        self.outstanding.clear()
        self.retx.clear()
        self.sent_order.clear()
        self.inflight_bytes = 0
        self.rto_at = None
        self.rack_at = None
        return pkts


#: the Python forms of the methods the C core replaces (``uet.native._recovery_core``):
#: the reference its tests hold it to, and what it calls for arguments of other types
REFERENCE = {"on_ack": LossRecovery.on_ack, "on_sent": LossRecovery.on_sent,
             "_rack_scan": LossRecovery._rack_scan, "rtt_sample": LossRecovery.rtt_sample,
             "detect_after_ack": LossRecovery.detect_after_ack}


def _use_c_core() -> str:
    """Put the C forms of ``on_ack``, ``on_sent``, ``_rack_scan``, ``rtt_sample`` and
    ``detect_after_ack`` in LossRecovery's class (not under ``UET_PURE_PYTHON=1``, nor
    when the extension was not built); returns ``"native"`` or ``"python"``."""
    from uet.native._common import load_core

    core = load_core("_recovery_core")
    if core is None:
        return "python"
    from uet.pds.retransmit import LossDetector, RtoEstimator
    from uet.wire.records import PdsAck

    core.configure(SentPacket, LossRecovery, Rack, RtoEstimator, LossDetector, PdsAck,
                   PdsAckCc, REFERENCE["on_ack"], REFERENCE["on_sent"],
                   REFERENCE["_rack_scan"])
    core.configure_ack(REFERENCE["rtt_sample"], REFERENCE["detect_after_ack"])
    LossRecovery.on_ack = core.on_ack_method  # type: ignore[method-assign]
    LossRecovery.on_sent = core.on_sent_method  # type: ignore[method-assign]
    LossRecovery._rack_scan = core.rack_scan_method  # type: ignore[method-assign]
    LossRecovery.rtt_sample = core.rtt_sample_method  # type: ignore[method-assign]
    LossRecovery.detect_after_ack = core.detect_after_ack_method  # type: ignore[method-assign]
    return "native"


#: which form LossRecovery's per-ACK work runs in: "native" (C) or "python"
IMPLEMENTATION = _use_c_core()

__all__ = ["IMPLEMENTATION", "REFERENCE", "LossRecovery", "SACK_BITS", "SentPacket", "Tx"]
