"""Target side of a RUD/ROD PDC: receive window, delivery to the SES, clear, close.

A target PDC is created directly in ESTABLISHED by the first valid SYN (ref. 3.2), or in
PENDING when the end point picks Start_PSNs itself (``start_psn_mode='target'``): then it
answers NACK NEW_START_PSN until a SYN with its Start_PSN arrives. States change only
through the transition table of :mod:`uet.pds.states`.

Receive rule (ref. 3.5): a PSN in [base, base + MP_RANGE) that is new is accepted; one already
received is answered with its stored ACK/response (or a plain ACK); one shifted out of the
window, but within the previous MP_RANGE, with an ACK carrying a DEFAULT_RESPONSE; anything
else with NACK PSN_OOR_WINDOW (INVALID_SYN when SYN is set).

The CACK reported is held below any packet whose guaranteed SES response is not yet cleared
and below any packet the SES has not answered yet (ref. 3.6), so the initiator only releases a
packet when it holds its response. When and how ACKs leave is the PDC's
:class:`~uet.pds.ack.AckScheduler`; the end point is reached only through the
:class:`~uet.pds.context.PdcContext`.
"""

from __future__ import annotations

from typing import Any

from uet.cms.api import ReceiverCongestion
from uet.native import InsertResult, MarkResult, PsnTracker, ReorderBuffer
from uet.pds import ack, negotiation
from uet.pds.ack import (
    ACK_M,
    ACK_RETX,
    GUARANTEED_OPCODES,
    REQ_CLEAR,
    REQ_CLOSE,
    AckScheduler,
    default_response,
)
from uet.pds.context import PdcContext
from uet.pds.events import PeerNegotiated, RequestDelivered
from uet.pds.manager import TARGET, PdcBase
from uet.pds.states import TARGET_TRANSITIONS, TargetEvent, TargetState
from uet.wire.constants import (
    CpFlag,
    CtlType,
    DeliveryMode,
    NackCode,
    PdsType,
    ReqFlag,
    SesFlag,
    SesOpcode,
)
from uet.wire.records import (
    Frame,
    PdsAckCc,
    PdsControl,
    PdsNack,
    PdsRequest,
    SesMedium,
    SesSmall,
    SesStandard,
    psn_add,
    psn_diff,
)

NEW = MarkResult.NEW
DUPLICATE = MarkResult.DUPLICATE
STALE = MarkResult.STALE
SYN = int(ReqFlag.SYN)
AR = int(ReqFlag.AR)
RETX = int(ReqFlag.RETX)
IMMEDIATE = SYN | AR | RETX
EOM = int(SesFlag.EOM)  # a plain int: testing an IntFlag costs ~1 us per packet
SOM = int(SesFlag.SOM)
READ_OP = int(SesOpcode.READ)
#: a gap NACKed RCVR_INFER_LOSS is NACKed again after this many gap delays if still missing
GAP_RENACK = 8
GAP_NACK_MAX = 16  # missing PSNs NACKed per gap check
_MISSING = object()
# per-packet names for enum members (an Enum class attribute lookup costs ~70 ns)
ST_PENDING = TargetState.PENDING
ST_ESTABLISHED = TargetState.ESTABLISHED
ST_CLOSED = TargetState.CLOSED
ST_ERROR = TargetState.ERROR
ST_FREED = TargetState.FREED
STORED_OVERHEAD = 32  # bytes charged per stored response besides its data
BUFFER_OVERHEAD = 64  # bytes charged per buffered ROD packet besides its payload


class Pending:
    """A packet handed to the SES whose response is not final yet (``respond`` token)."""

    __slots__ = ("pdc", "psn", "ev", "flags", "ses", "src_ip", "seen", "deferred", "sdi")

    def __init__(self, pdc: Any, psn: int, ev: int, flags: int, ses: Any, src_ip: str,
                 sdi: int | None = None) -> None:
        self.pdc = pdc
        self.sdi = sdi  # the secure domain the request came in (RUDI answers in it)
        self.psn = psn
        self.ev = ev
        self.flags = flags  # ACK flags (M, RETX) for an ACK answering this packet
        self.ses = ses
        self.src_ip = src_ip
        self.seen = False  # the RequestDelivered event was taken by next_event
        self.deferred = False  # answered NO_RESPONSE: the real response follows later


class TargetPdc(PdcBase):
    """One target PDC (RUD or ROD)."""

    TRANSITIONS = TARGET_TRANSITIONS
    FREED = ST_FREED

    __slots__ = ("cfg", "peer_pdcid", "start_psn", "tracker", "rob", "receiver", "credit_mode",
                 "gtd", "pending", "clear_psn", "acks", "cack_held", "in_ack_ring",
                 "last_rx", "close_requested", "close_req_deadline", "close_req_next",
                 "close_req_count", "clear_req_at", "clear_req_count", "close_psn",
                 "pending_until", "mpr", "rx_closed", "rejected", "max_eom", "ccx",
                 "gtd_room", "gap_after", "gap_since", "gap_nacked", "holds_bitmap",
                 "holds_ccc", "reclaim", "close_epsn")

    def __init__(self, ctx: PdcContext, pdc_id: int, peer_ip: str, mode: DeliveryMode,
                 key: tuple, peer_pdcid: int, start_psn: int, receiver: ReceiverCongestion,
                 now: int, state: TargetState = ST_ESTABLISHED) -> None:
        super().__init__(ctx, pdc_id, TARGET, peer_ip, mode, key, state)
        cfg = self.cfg = ctx.cfg
        self.peer_pdcid = peer_pdcid
        self.start_psn = start_psn
        self.tracker = PsnTracker(start_psn, cfg.mp_range)
        self.rob = None
        if mode == DeliveryMode.ROD:
            self.rob = ReorderBuffer(cfg.rod_buffer_packets or cfg.mp_range,
                                     cfg.rod_buffer_bytes or (1 << 62), start_psn)
        self.receiver = receiver
        self.credit_mode = receiver.rccc is not None
        self.gtd: dict[int, tuple | None] = {}  # psn -> (ses, data, cost), None: not stored
        self.pending: dict[int, int] = {}  # psn -> token
        self.clear_psn = psn_add(start_psn, -1)
        self.acks = AckScheduler(ctx, self)
        self.cack_held = False
        self.in_ack_ring = False
        self.last_rx = now
        self.close_requested = False
        self.close_req_deadline = 0
        self.close_req_next = 0
        self.close_req_count = 0
        self.clear_req_at: int | None = None
        self.clear_req_count = 0
        self.close_psn = 0
        self.pending_until = 0
        self.mpr = cfg.mp_range // 128
        self.rx_closed = False
        self.rejected: set[int] = set()  # PSNs the SES refused: treated as not received
        self.max_eom = True  # the highest PSN received ends a message (EOM)
        #: a secured PDC's closing ACK carries this Expected PSN (EPSN flag); None: plain
        self.close_epsn: int | None = None
        #: the receiver's CCX state source (ACK_CCX / NACK_CCX), or None
        self.ccx = getattr(receiver, "ccx", None)
        #: receive memory below which no packet needs the guaranteed-response check
        self.gtd_room = STORED_OVERHEAD + cfg.mtu_payload
        self.gap_after = cfg.gap_nack_after  # receiver gap NACK delay (0: off)
        self.gap_since: int | None = None  # when the oldest unreported gap appeared
        self.gap_nacked: dict[int, int] = {}  # PSN -> when it was NACKed RCVR_INFER_LOSS
        self.holds_bitmap = False  # holds one of max_rx_bitmaps (established)
        self.holds_ccc = False  # holds one of max_cc_contexts (opened by a CC packet)
        self.reclaim = False  # asked to close to make room for another PDC

    def last_psn(self) -> int:
        """The highest PSN this PDC used: its close PSN once closed, else the highest
        received."""
        if self.state is ST_CLOSED:
            return self.close_psn
        return self.tracker.max_psn

    def free_event(self) -> TargetEvent:
        return TargetEvent.REAP if self.state is ST_PENDING else TargetEvent.FREE

    @property
    def co(self) -> Any:
        """The coalesced-ACK state (:class:`~uet.pds.ack.AckCoalescer`)."""
        return self.acks.co

    # ================================================================== receive: requests
    def rx_request(self, now: int, frame: Frame, pds: PdsRequest) -> None:
        """A request addressed to this PDC (already matched by key or DPDCID)."""
        ctx = self.ctx
        psn = pds.psn
        flags = pds.flags
        if self.state is not ST_ESTABLISHED:
            self._rx_request_other(now, frame, pds)
            return
        self.last_rx = now
        if flags & SYN and psn_add(psn, -pds.psn_offset) != self.start_psn:
            self._nack(now, frame, NackCode.INVALID_SYN, psn,
                       why="SYN start PSN differs from the PDC's")
            return
        cl = (psn + pds.clear_psn_offset) & 0xFFFFFFFF  # psn_add, inline: per packet
        if cl != self.clear_psn:
            self.apply_clear(now, cl)
        dscp = frame.dscp
        cfg = self.cfg
        if dscp == cfg.dscp_trimmed or dscp == cfg.dscp_trimmed_lasthop:
            self._trimmed(now, frame, pds)
            return
        tracker = self.tracker
        mem = ctx.rx_memory
        if mem.used + self.gtd_room > mem.limit and self._is_new(psn):
            # memory nearly full (one comparison per packet otherwise)
            if mem.full():
                code = NackCode.NO_PKT_BUFFER if self.rob is not None else NackCode.NO_RESOURCE
                self._nack(now, frame, code, psn, why="receive memory limit reached")
                return
            need = self._gtd_need(frame)
            if need and not mem.fits(need):
                self._nack(now, frame, NackCode.NO_GTD_DEL_AVAIL, psn,
                           why=f"no room to store its guaranteed response ({need} bytes)")
                return
        if self.rob is None:  # RUD: each packet to the SES on arrival
            r, in_order, ooo = tracker.on_packet(psn)  # one tracker call per packet
            if r is NEW:
                self._arrival(now, frame, in_order, ooo)
                self._deliver(now, frame, psn)
                ce = frame.ecn == 3  # the coalescing decision (AckScheduler)
                self.acks.on_accepted(now, psn, frame.ev,
                                      (ACK_M if ce else 0) | (ACK_RETX if flags & RETX else 0),
                                      flags & AR != 0, len(frame.payload),
                                      bool(flags & IMMEDIATE) or ce)
                return
        else:  # ROD: strict PSN order through the reorder buffer
            r = self._rx_rod(now, frame, pds, psn)
            if r is None:
                return
        self._rx_not_new(now, frame, pds, psn, r)

    def _rx_not_new(self, now: int, frame: Frame, pds: PdsRequest, psn: int,
                    r: MarkResult) -> None:
        """A request whose PSN the tracker did not take as new: a duplicate (answered from
        what the PDC knows) or beyond the receive window (NACKed)."""
        if r is DUPLICATE or r is STALE:
            self._duplicate(now, frame, pds, psn, r)
            return
        self.ctx.counters["out_of_window"] += 1
        if pds.flags & SYN:
            self._nack(now, frame, NackCode.INVALID_SYN, psn,
                       why="SYN PSN beyond the receive window")
        else:
            self._nack(now, frame, NackCode.PSN_OOR_WINDOW, psn,
                       why="PSN beyond the receive window")

    def _nack(self, now: int, frame: Frame, code: int, psn: int, payload: int = 0,
              why: str = "") -> None:
        """NACK a packet of this PDC (a NACK_CCX when the receiver sends CCX state)."""
        pds = frame.pds
        assert type(pds) is PdsRequest or type(pds) is PdsControl  # RUD / ROD only
        self.ctx.nack(now, frame, code, psn, self.pdc_id, pds.spdcid, payload, why,
                      ccx=self.ccx)

    def _gtd_need(self, frame: Frame) -> int:
        """Bytes of receive memory the guaranteed response to this request will take: a
        READ's data (at most a packet), a message's last packet its RESPONSE; 0 for
        packets answered by no stored response (mid-message packets, read data)."""
        ses: Any = frame.ses
        if not isinstance(ses, SesStandard | SesMedium | SesSmall):
            return 0
        if ses.opcode == READ_OP:
            off = ses.message_offset if type(ses) is SesStandard and not ses.flags & SOM \
                else 0
            return STORED_OVERHEAD + max(0, min(self.cfg.mtu_payload, ses.request_length - off))
        return STORED_OVERHEAD if ses.flags & EOM else 0

    def _trimmed(self, now: int, frame: Frame, pds: PdsRequest) -> None:
        """A switch cut the payload: NACK it for a fast retransmission (ref. 6.3)."""
        ctx = self.ctx
        lasthop = frame.dscp == self.cfg.dscp_trimmed_lasthop
        ctx.counters["trimmed_rx"] += 1
        if self.ccx is not None:
            self.ccx.on_trim(now)
        self._nack(now, frame, NackCode.TRIMMED_LASTHOP if lasthop else NackCode.TRIMMED,
                   pds.psn, why="trimmed by a switch")
        rccc = self.receiver.rccc
        if pds.type >= PdsType.RUD_CC_REQ and rccc is not None:
            rccc.on_credit_request(now, credit_target=pds.credit_target)
            ctx.credit_changed(now, self)

    def _is_new(self, psn: int) -> bool:
        return self.tracker.classify(psn) is NEW

    def _rx_rod(self, now: int, frame: Frame, pds: PdsRequest, psn: int) -> MarkResult | None:
        """ROD arrival; returns a MarkResult for the caller, or None when handled here."""
        tracker = self.tracker
        r = tracker.classify(psn)  # STALE, OUT_OF_WINDOW or DUPLICATE go back to the caller
        if r is not NEW:
            return r
        rob = self.rob
        assert rob is not None
        before = rob.bytes
        res = rob.insert(psn, frame, len(frame.payload) + BUFFER_OVERHEAD)
        if res is not InsertResult.OK:
            self._nack(now, frame, NackCode.ROD_OOO, psn,
                       why=f"ROD reorder buffer {res.name.lower()}")
            return None
        _, in_order, ooo = tracker.on_packet(psn)
        self._arrival(now, frame, in_order, ooo)
        ready = rob.pop_ready()
        self.ctx.rx_memory.used += rob.bytes - before
        for f in ready:
            self._deliver(now, f, f.pds.psn)
        self._ack_trigger(now, frame, psn, pds.flags)
        return None

    def _arrival(self, now: int, frame: Frame, in_order: bool, ooo_count: int) -> None:
        """Bookkeeping for one newly accepted packet (before any reordering): whether the
        highest PSN ends a message, the congestion state, counters."""
        pds: Any = frame.pds  # a request (the receive paths only pass requests)
        if pds.psn == self.tracker.max_psn:
            # response data carried as requests (ref 4.7) has no EOM flag: complete
            self.max_eom = bool(getattr(frame.ses, "flags", EOM) & EOM)
        nbytes = len(frame.payload)
        self.receiver.on_data(now, nbytes=nbytes, ecn_ce=frame.ecn == 3,
                              credit_target=pds.credit_target, in_order=in_order,
                              ooo_count=ooo_count)
        if self.ccx is not None:
            self.ccx.on_data(now, nbytes=nbytes, ecn_ce=frame.ecn == 3)
        if not in_order and self.gap_since is None and self.gap_after:
            # a PSN below this one is missing: NACK it if it stays missing (RCVR_INFER_LOSS)
            self.gap_since = now
            self.ctx.arm(self, now + self.gap_after)
        counters = self.ctx.counters
        counters["rx_packets"] += 1
        counters["rx_bytes"] += nbytes
        if self.credit_mode:
            self.ctx.credit_changed(now, self)

    def _deliver(self, now: int, frame: Frame, psn: int) -> None:
        """Hand one accepted request to the SES."""
        ctx = self.ctx
        ce = frame.ecn == 3
        aflags = (ACK_M if ce else 0) | (ACK_RETX if frame.pds.flags & RETX else 0)
        token = ctx.new_token(Pending(self, psn, frame.ev, aflags, frame.ses, frame.src_ip))
        self.pending[psn] = token
        ctx.emit(RequestDelivered(token, frame.src_ip, self.pdc_id, self.mode, psn,
                                  frame.ses, frame.ext, frame.payload, ce, self.sdi))

    def _ack_trigger(self, now: int, frame: Frame, psn: int, flags: int) -> None:
        """Coalescing decision for one accepted packet."""
        ce = frame.ecn == 3
        self.acks.on_accepted(now, psn, frame.ev,
                              (ACK_M if ce else 0) | (ACK_RETX if flags & RETX else 0),
                              flags & AR != 0, len(frame.payload),
                              bool(flags & IMMEDIATE) or ce)

    def _duplicate(self, now: int, frame: Frame, pds: Any, psn: int, r: MarkResult) -> None:
        """A PSN seen before: stored ACK/response, plain ACK, default response or NACK."""
        ctx = self.ctx
        if psn in self.rejected:  # the SES refused it before: this copy is new to it
            self.rejected.discard(psn)
            self._deliver(now, frame, psn)
            self._ack_trigger(now, frame, psn, pds.flags)
            return
        ctx.counters["duplicates"] += 1
        aflags = (ACK_M if frame.ecn == 3 else 0) | (ACK_RETX if pds.flags & RETX else 0)
        stored: Any = self.gtd.get(psn, _MISSING)
        if stored is not _MISSING:
            if stored is None:
                self._nack(now, frame, NackCode.GTD_RESP_UNAVAIL, psn,
                           why="duplicate of a packet whose guaranteed response was not stored")
            else:
                self.acks.explicit_ack(psn, stored[0], stored[1], frame.ev, aflags)
            return
        if psn in self.pending:
            self._nack(now, frame, NackCode.RCVD_SES_PROCG, psn,
                       why="duplicate while the SES is still processing the packet")
            return
        if r is STALE:
            if psn_diff(self.tracker.base, psn) > self.cfg.mp_range:
                ctx.counters["out_of_window"] += 1
                self._nack(now, frame, NackCode.PSN_OOR_WINDOW, psn,
                           why="PSN below the previous MP_RANGE")
                return
            self.acks.explicit_ack(psn, default_response(frame.ses), b"", frame.ev, aflags)
        elif self.rob is not None and psn in self.rob:
            # buffered ROD packet: report it (SACK) without acknowledging it explicitly
            self.acks.report(psn, frame.ev, aflags)
        else:
            self.acks.explicit_ack(psn, None, b"", frame.ev, aflags)

    def _rx_request_other(self, now: int, frame: Frame, pds: PdsRequest) -> None:
        """Requests to a PENDING, closed or closed-in-error PDC."""
        ctx = self.ctx
        psn = pds.psn
        st = self.state
        if st is ST_PENDING:
            if pds.flags & SYN and psn_add(psn, -pds.psn_offset) == self.start_psn:
                if psn_diff(psn, self.start_psn) >= self.cfg.mp_range:
                    self._nack(now, frame, NackCode.INVALID_SYN, psn,
                               why="SYN psn_offset beyond the receive window")
                    return
                if not ctx.mgr.take_bitmap(self):
                    ctx.counters["refused.rx_bitmaps"] += 1
                    self._nack(now, frame, NackCode.NO_BITMAP, psn,
                               why="every PSN-tracking bitmap is taken")
                    return
                self.transition(TargetEvent.START_PSN_MATCHED)
                ctx.opened(now, self)
                self.rx_request(now, frame, pds)
            else:
                self._nack(now, frame, NackCode.NEW_START_PSN, psn,
                           payload=self.start_psn, why="target picks the Start_PSN")
            return
        if st is ST_ERROR:
            self._nack(now, frame, NackCode.CLOSING_IN_ERR, psn,
                       why="PDC closed in error")
            return
        if st is not ST_CLOSED:
            return  # FREED: a stale reference (the end point no longer routes to it)
        # CLOSED (lingering): answer duplicates, refuse anything after the close PSN
        if psn_diff(psn, self.close_psn) > 0:
            self._nack(now, frame, NackCode.CLOSING, psn,
                       why="request after the close PSN")
            return
        ctx.counters["duplicates"] += 1
        aflags = ACK_RETX if pds.flags & RETX else 0
        self.acks.explicit_ack(psn, default_response(frame.ses), b"", frame.ev, aflags)

    # ================================================================== SES responses
    def on_early(self, now: int, entry: Pending, response: Any) -> bool:
        """The SES answered NO_RESPONSE (ref 4.5): its result follows later. ACK the packet
        now with that placeholder (the initiator stops retransmitting it) and keep it
        pending: the CACK stays below it until the guaranteed response comes with
        ``on_respond`` and is stored until cleared."""
        if entry.psn not in self.pending:
            return False
        entry.deferred = True
        self.ctx.counters["no_response_tx"] += 1
        self.acks.explicit_ack(entry.psn, response, b"", entry.ev, entry.flags)
        return True

    def on_respond(self, now: int, entry: Pending, response: Any, data: bytes) -> bool:
        """The SES answered the packet of ``entry``; queue its ACK (and store it if needed)."""
        psn = entry.psn
        if self.pending.pop(psn, None) is None:
            return False
        if response is None:
            self._released_hold()
            return True
        if len(data) > self.cfg.mtu_payload:
            raise ValueError(f"response data of {len(data)} bytes exceeds mtu_payload "
                             f"({self.cfg.mtu_payload}); send read data as requests")
        ctx = self.ctx
        if response.opcode in GUARANTEED_OPCODES:
            cost = len(data) + STORED_OVERHEAD
            mem = ctx.rx_memory
            if mem.used + cost > mem.limit:
                self.gtd[psn] = None
                ctx.counters["gtd_unstored"] += 1
            else:
                self.gtd[psn] = (response, data, cost)
                mem.used += cost
            if self.clear_req_at is None and self.cfg.clear_req_ps:
                self.clear_req_at = now + self.cfg.clear_req_ps
                ctx.arm(self, self.clear_req_at)
        self.acks.explicit_ack(psn, response, data, entry.ev, entry.flags)
        return True

    def on_reject(self, now: int, entry: Pending, code: int) -> bool:
        """The SES refused the packet (e.g. NO_SES_MSG_AVAIL): NACK it and treat it as not
        received, so its retransmission is delivered again."""
        psn = entry.psn
        if self.pending.pop(psn, None) is None:
            return False
        self.rejected.add(psn)
        self.ctx.nack_to(now, entry.src_ip, entry.ev, entry.flags, code, psn,
                         self.pdc_id, self.peer_pdcid, why="refused by the SES", sdi=self.sdi)
        return True

    def finalize(self, now: int, entry: Pending) -> None:
        """No response came for ``entry`` before the next poll: nothing to store."""
        if self.pending.pop(entry.psn, None) is not None:
            self._released_hold()

    def _released_hold(self) -> None:
        if self.cack_held:
            self.cack_held = False
            co = self.acks.co
            if co.psn is None:
                co.psn, co.ev = self.tracker.max_psn, self.cfg.control_ev
            self.acks.now()

    def apply_clear(self, now: int, cl: int) -> None:
        """Initiator says it holds the ACKs (and responses) of every PSN <= ``cl``."""
        if psn_diff(cl, self.clear_psn) <= 0 or psn_diff(cl, self.tracker.max_psn) > 0:
            return
        self.clear_psn = cl
        gtd = self.gtd
        if not gtd:
            return
        cleared = [p for p in gtd if psn_diff(p, cl) <= 0]
        if not cleared:
            return
        mem = self.ctx.rx_memory
        for p in cleared:
            st = gtd.pop(p)
            if st is not None:
                mem.used -= st[2]
        self.clear_req_count = 0
        if gtd and self.cfg.clear_req_ps:
            self.clear_req_at = now + self.cfg.clear_req_ps
            self.ctx.arm(self, self.clear_req_at)
        else:
            self.clear_req_at = None
        self._released_hold()

    # ================================================================== what ACKs report
    def held_cack(self, tracker_cack: int | None = None) -> int:
        """CACK to report: all received, and no un-cleared or unanswered packet at or below
        (``tracker_cack``: the tracker's CACK when the caller already has it)."""
        if self.state is ST_CLOSED:
            return self.close_psn
        cack = self.tracker.cack_psn if tracker_cack is None else tracker_cack
        if self.gtd or self.pending or self.rejected:
            for held in (self.gtd, self.pending, self.rejected):
                for p in held:
                    if psn_diff(p, cack) <= 0:
                        cack = psn_add(p, -1)
        return cack

    def not_done(self, psn: int) -> bool:
        """``psn`` waits for the SES, is buffered by ROD, holds a stored response or was
        refused: an ACK must not name it yet."""
        return (psn in self.pending or psn in self.gtd or psn in self.rejected
                or (self.rob is not None and psn in self.rob))

    def ack_state(self) -> tuple[int, bool, bool]:
        """(REQ bits for the ACK, closed: SACK everything, established)."""
        req = REQ_CLOSE if self.close_requested else (REQ_CLEAR if self.gtd else 0)
        st = self.state
        return req, st is ST_CLOSED, st is ST_ESTABLISHED

    def next_ack(self, now: int) -> Frame | None:
        """The next ACK this PDC wants to send (the end point's control poll)."""
        return self.acks.next_ack(now, self)

    def queue_explicit(self, psn: int, ses: Any, data: bytes, ev: int, flags: int,
                       probe: int | None = None, sack_base: int | None = None) -> None:
        self.acks.explicit_ack(psn, ses, data, ev, flags, probe, sack_base)

    # ================================================================== control packets
    def rx_cp(self, now: int, frame: Frame, cp: PdsControl) -> None:
        """ACK_REQ, CLEAR, CLOSE, PROBE, CREDIT_REQ or NOOP from the initiator."""
        ctx = self.ctx
        ctl = cp.ctl_type
        st = self.state
        self.last_rx = now
        if st is ST_PENDING:
            self._nack(now, frame, NackCode.NEW_START_PSN, cp.psn,
                       payload=self.start_psn, why="target picks the Start_PSN")
            return
        if ctl == CtlType.NEGOTIATION:
            self._rx_negotiation(now, frame, cp)
            return
        if cp.flags & CpFlag.SYN and psn_add(cp.psn, -cp.psn_offset) != self.start_psn \
                and ctl not in (CtlType.CLEAR, CtlType.NOOP):
            self._nack(now, frame, NackCode.INVALID_SYN, cp.psn,
                       why="SYN start PSN differs from the PDC's")
            return
        aflags = (ACK_M if frame.ecn == 3 else 0) | (ACK_RETX if cp.flags & CpFlag.RETX else 0)
        if ctl == CtlType.ACK_REQ:
            self._rx_ack_req(now, frame, cp, aflags)
        elif ctl == CtlType.CLEAR:
            if st is ST_ESTABLISHED:
                self.apply_clear(now, cp.payload)
        elif ctl == CtlType.CLOSE:
            self._rx_close(now, frame, cp, aflags)
        elif ctl == CtlType.PROBE:
            if st is ST_ERROR:
                self._nack(now, frame, NackCode.CLOSING_IN_ERR, cp.psn,
                           why="PDC closed in error")
                return
            self.acks.explicit_ack(self.held_cack(), None, b"", frame.ev, aflags,
                                   probe=cp.probe_opaque, sack_base=cp.payload)
        elif ctl == CtlType.CREDIT_REQ and st is ST_ESTABLISHED:
            rccc = self.receiver.rccc
            if rccc is None:
                self._nack(now, frame, NackCode.UNEXP_EVENT, cp.psn,
                           why="CREDIT_REQ on a PDC without credit-based congestion control")
                return
            rccc.on_credit_request(now, credit_target=cp.payload & 0xFFFFFF)
            ctx.credit_changed(now, self)
        # NOOP (a keepalive: last_rx above restarts the idle timer): nothing else to do

    def _rx_negotiation(self, now: int, frame: Frame, cp: PdsControl) -> None:
        """The initiator's capabilities: record them, answer with ours (reply bit set)."""
        caps = negotiation.decode(cp.payload)
        if caps.version == 0:  # no content (a sender without a format): nothing to do
            self.ctx.counters["negotiation_empty"] += 1
            return
        if caps.version != negotiation.VERSION:
            self._nack(now, frame, NackCode.UNEXP_EVENT, cp.psn,
                       why=f"NEGOTIATION version {caps.version} (this end point speaks "
                       f"{negotiation.VERSION})")
            return
        if caps.reply:  # an answer sent to a target PDC: nothing asked it
            self.ctx.counters["dropped.negotiation_reply"] += 1
            return
        ctx = self.ctx
        ctx.emit(PeerNegotiated(self.peer_ip, TARGET, caps.fep_cap, caps.mp_range,
                                caps.max_payload, caps.ccx))
        ctx.log(now, "negotiated", pdc_id=self.pdc_id, role=TARGET, peer=self.peer_ip,
                fep_cap=caps.fep_cap, mp_range=caps.mp_range, max_payload=caps.max_payload)
        if self.state is ST_ESTABLISHED:
            self.send_cp(now, CtlType.NEGOTIATION, cp.psn, 0,
                         ctx.negotiation_payload(reply=True, ccx=self.ccx is not None))

    def _rx_ack_req(self, now: int, frame: Frame, cp: PdsControl, aflags: int) -> None:
        psn = cp.psn
        st = self.state
        if st is ST_ERROR:
            self._nack(now, frame, NackCode.CLOSING_IN_ERR, psn,
                       why="PDC closed in error")
            return
        if st is ST_CLOSED:
            if psn_diff(psn, self.close_psn) > 0:
                self._nack(now, frame, NackCode.PKT_NOT_RCVD, psn,
                           why="ACK request after the close PSN")
            else:
                self.acks.explicit_ack(psn, None, b"", frame.ev, aflags | ACK_RETX)
            return
        stored: Any = self.gtd.get(psn, _MISSING)
        if stored is not _MISSING:
            if stored is None:
                self._nack(now, frame, NackCode.GTD_RESP_UNAVAIL, psn,
                           why="guaranteed response was not stored")
            elif stored[1] and self.cfg.ack_data_class == "data":
                # the ACK carries read data, which travels in the data class, not as the
                # answer to a control packet: the initiator resends the request instead
                self._nack(now, frame, NackCode.ACK_WITH_DATA, psn,
                           why="its ACK carries read data")
            else:
                self.acks.explicit_ack(psn, stored[0], stored[1], frame.ev, aflags | ACK_RETX)
            return
        tracker = self.tracker
        if psn in self.rejected:
            self._nack(now, frame, NackCode.PKT_NOT_RCVD, psn,
                       why="ACK request for a packet the SES refused")
        elif psn in self.pending or (self.rob is not None and psn in self.rob):
            self._nack(now, frame, NackCode.RCVD_SES_PROCG, psn,
                       why="received, SES processing not done")
        elif psn_diff(psn, tracker.base) < 0:
            ses = None
            if psn_diff(tracker.base, psn) <= self.cfg.mp_range:
                ses = default_response(None)
            self.acks.explicit_ack(psn, ses, b"", frame.ev, aflags | ACK_RETX)
        elif psn_diff(psn, tracker.base) < tracker.window and tracker.is_received(psn):
            self.acks.explicit_ack(psn, None, b"", frame.ev, aflags | ACK_RETX)
        else:
            self._nack(now, frame, NackCode.PKT_NOT_RCVD, psn,
                       why="ACK request for a PSN never received")

    def _rx_close(self, now: int, frame: Frame, cp: PdsControl, aflags: int) -> None:
        ctx = self.ctx
        psn = cp.psn
        st = self.state
        if st is ST_ERROR:
            self._nack(now, frame, NackCode.CLOSING_IN_ERR, psn,
                       why="PDC closed in error")
            return
        if st is ST_CLOSED:
            if psn == self.close_psn:  # the close ACK was lost: send it again
                self.acks.explicit_ack(psn, None, b"", frame.ev, aflags | ACK_RETX)
            return
        if self.pending:
            self._nack(now, frame, NackCode.RCVD_SES_PROCG, psn,
                       why="CLOSE while the SES is still processing packets")
            return
        tracker = self.tracker
        if psn_diff(psn, tracker.base) >= tracker.window:
            self._nack(now, frame, NackCode.PSN_OOR_WINDOW, psn,
                       why="CLOSE PSN beyond the receive window")
            return
        if psn_diff(psn, tracker.base) < 0 or tracker.is_received(psn):
            ctx.counters["duplicates"] += 1
            return
        tracker.mark(psn)
        if tracker.cack_psn != psn:
            ctx.counters["close_with_gap"] += 1
        self.close_psn = psn
        if self.sdi is not None and self.cfg.secure_start_psn == "expected_0rtt":
            # EXPECTED_0RTT_START (ref. 3.2): raise this SDI's floor past every PSN this
            # PDC used (its CLOSE took the last one), so no frame of it can start a new PDC
            # or fall in a new PDC's window; the closing ACK tells the initiator (EPSN)
            floors = ctx.secure_floor
            floor = floors.get(self.sdi, 0)
            nxt = psn_add(psn, 1)
            if psn_diff(nxt, floor) > 0:
                floor = floors[self.sdi] = nxt
            self.close_epsn = floor
            ctx.log(now, "expected_psn", pdc_id=self.pdc_id, sdi=self.sdi, psn=floor)
        self._discard()
        self.transition(TargetEvent.CLOSE_RECEIVED)
        ctx.closed(now, self, error=False, reason="CLOSE received")
        self.acks.explicit_ack(psn, None, b"", frame.ev, aflags)

    def rx_nack(self, now: int, frame: Frame, nack: PdsNack) -> None:
        """A NACK from the initiator: TRIMMED_ACK (a switch trimmed an ACK of ours that
        carried read data, ref 2.6, 6.3): send that ACK again, response and data as
        stored. Anything else an initiator has no reason to send a target is counted."""
        ctx = self.ctx
        if nack.nack_code != NackCode.TRIMMED_ACK or frame.src_ip != self.peer_ip \
                or nack.spdcid != self.peer_pdcid:
            ctx.counters["dropped.nack_to_target"] += 1
            return
        psn = nack.nack_psn
        stored = self.gtd.get(psn)
        if stored is None or self.state is not ST_ESTABLISHED:
            ctx.counters["nack_rx_stale"] += 1  # cleared since, or never stored
            return
        ctx.counters["retx.trimmed_ack"] += 1
        ctx.log(now, "retransmit", pdc_id=self.pdc_id, psn=psn, cause="trimmed_ack")
        aflags = ACK_RETX | (ACK_M if nack.flags & ACK_M else 0)
        self.acks.explicit_ack(psn, stored[0], stored[1], frame.ev, aflags)

    def send_cp(self, now: int, ctl: int, psn: int, flags: int, payload: int) -> None:
        """A control packet from the target (CLOSE_REQ, CLEAR_REQ, CREDIT, NEGOTIATION)."""
        if self.mode == DeliveryMode.ROD:
            flags |= CpFlag.ISROD
        cp = PdsControl(ctl_type=ctl, flags=flags, psn=psn, spdcid=self.pdc_id,
                        dpdcid=self.peer_pdcid, payload=payload)
        self.ctx.send_cp(now, cp, self.peer_ip, self.sdi)

    # ================================================================== timers and close
    def on_timer(self, now: int) -> int | None:
        """Run due timers; return the next deadline."""
        ctx = self.ctx
        cfg = self.cfg
        st = self.state
        if st is ST_CLOSED or st is ST_ERROR:
            if now >= self.linger_until:
                ctx.linger_over(self)
                return None
            return self.linger_until
        if st is ST_PENDING:
            if now >= self.pending_until:
                ctx.counters["pending_reaped"] += 1
                self.release_cc()
                ctx.free(self)
                return None
            return self.pending_until
        if st is ST_FREED:
            return None
        nxt = self.acks.on_timer(now)
        if self.gap_since is not None:
            t = self._gap_timer(now)
            if t is not None:
                nxt = t if nxt is None else min(nxt, t)
        if self.close_requested:
            if now >= self.close_req_deadline:
                self.close_in_error(now, "no CLOSE within Close_REQ_Time")
                return self.linger_until
            if now >= self.close_req_next:
                if self.close_req_count < cfg.max_retries:
                    self.close_req_count += 1
                    self.send_cp(now, CtlType.CLOSE_REQ, self.tracker.cack_psn,
                                 CpFlag.AR | CpFlag.RETX, 0)
                    self.close_req_next = now + cfg.rto_ps
                else:
                    self.close_req_next = self.close_req_deadline
            t = min(self.close_req_deadline, self.close_req_next)
            nxt = t if nxt is None else min(nxt, t)
        elif cfg.target_idle_ps:
            t = self.last_rx + cfg.target_idle_ps
            if self.awaiting_initiator():
                # the initiator still owes packets (a gap, a buffered ROD run, a message
                # without its EOM): its backed-off RTO may exceed our idle time, so give it
                # a Close_REQ_Time more before asking; a vanished initiator still ends
                t += cfg.close_req_time_ps
            if now >= t:
                if not self.pending and not self.acks.explicit:
                    self.request_close(now, "idle")
                    t = self.close_req_next
                else:
                    t = now + cfg.ack_timer_ps
            nxt = t if nxt is None else min(nxt, t)
        if self.clear_req_at is not None:
            if not self.gtd:
                self.clear_req_at = None
            elif now >= self.clear_req_at:
                # repeated while responses wait: a lost CLEAR must not stall the PDC; the
                # interval doubles (up to 64x) while nothing is cleared, so an initiator
                # that cannot clear yet (its ACK was lost) is not sent one every period
                self.clear_req_count += 1
                last = max(self.gtd, key=lambda p: psn_diff(p, self.clear_psn))
                self.send_cp(now, CtlType.CLEAR_REQ, last, 0, last)
                self.clear_req_at = now + (cfg.clear_req_ps << min(self.clear_req_count, 6))
            if self.clear_req_at is not None:
                nxt = self.clear_req_at if nxt is None else min(nxt, self.clear_req_at)
        return nxt

    def _gap_timer(self, now: int) -> int | None:
        """The receiver gap NACK (RCVR_INFER_LOSS, ref 2.6): while PSNs below the highest
        received are missing, NACK them every ``gap_nack_ps`` (each PSN again only after
        GAP_RENACK of those delays, so a slow retransmission is not asked for twice)."""
        tracker = self.tracker
        nacked = self.gap_nacked
        if tracker.max_psn == tracker.cack_psn:  # the gap closed
            self.gap_since = None
            nacked.clear()
            return None
        due = self.gap_since + self.gap_after  # type: ignore[operator]
        if now < due:
            return due
        base = tracker.base
        for p in [p for p in nacked if psn_diff(p, base) < 0]:
            del nacked[p]
        renack = self.gap_after * GAP_RENACK
        ctx = self.ctx
        for psn in tracker.missing(GAP_NACK_MAX):
            if psn in self.rejected:
                continue  # refused by the SES: its retransmission is on its way
            last = nacked.get(psn)
            if last is not None and now - last < renack:
                continue
            nacked[psn] = now
            ctx.counters["gap_nack"] += 1
            ctx.nack_to(now, self.peer_ip, self.cfg.control_ev, 0, NackCode.RCVR_INFER_LOSS,
                        psn, self.pdc_id, self.peer_pdcid,
                        why=f"still missing {self.gap_after} ps after a later PSN arrived",
                        ccx=self.ccx, sdi=self.sdi)
        self.gap_since = now
        return now + self.gap_after

    def awaiting_initiator(self) -> bool:
        """Packets are known to be missing: a gap below the highest PSN received, ROD
        packets waiting for it, or a message whose last packet has not arrived."""
        tracker = self.tracker
        if tracker.max_psn != tracker.cack_psn or not self.max_eom:
            return True
        return self.rob is not None and self.rob.items > 0

    def idle_for_reclaim(self) -> bool:
        """Established with nothing pending at the SES or owed, no close asked yet: what
        the end point may ask to close to make room. (A CLOSE_REQ only asks: an initiator
        with packets still outstanding finishes them first, and its CLOSE clears what
        this PDC stores, ref 3.9.)"""
        return (self.state is ST_ESTABLISHED and not self.close_requested
                and not self.pending and not self.acks.pending)

    def request_close(self, now: int, why: str, reclaim: bool = False) -> None:
        """Ask the initiator to close (CLOSE_REQ CP and REQ=2 in later ACKs); ``reclaim``:
        to make room for another PDC (counted until this one closes)."""
        if self.close_requested or self.state is not ST_ESTABLISHED:
            return
        cfg = self.cfg
        self.close_requested = True
        if reclaim:
            self.reclaim = True
            self.ctx.mgr.reclaiming += 1
            self.ctx.counters["close_req.reclaim"] += 1
        self.close_req_deadline = now + cfg.close_req_time_ps
        self.close_req_count = 0
        self.send_cp(now, CtlType.CLOSE_REQ, self.tracker.cack_psn, CpFlag.AR, 0)
        self.close_req_next = now + cfg.rto_ps
        self.ctx.log(now, "close_req", pdc_id=self.pdc_id, peer=self.peer_ip, why=why)
        self.ctx.arm(self, min(self.close_req_next, self.close_req_deadline))

    def close_in_error(self, now: int, reason: str) -> None:
        self._discard()
        self.transition(TargetEvent.FAIL)
        self.ctx.closed(now, self, error=True, reason=reason)

    def release_cc(self) -> None:
        """Tell the receiver CC the PDC is gone (once); give back its bitmap and CC
        context."""
        if not self.rx_closed:
            self.rx_closed = True
            self.receiver.close()
            self.ctx.mgr.release_resources(self)

    def _discard(self) -> None:
        """Drop stored responses, buffered packets and pending tokens (closing)."""
        self.release_cc()
        mem = self.ctx.rx_memory
        for st in self.gtd.values():
            if st is not None:
                mem.used -= st[2]
        self.gtd.clear()
        if self.rob is not None:
            mem.used -= self.rob.bytes
            self.rob.reset(self.rob.next_psn)
        for token in self.pending.values():
            self.ctx.drop_token(token)
        self.pending.clear()
        self.rejected.clear()
        self.acks.discard()
        self.clear_req_at = None
        self.gap_since = None
        self.gap_nacked.clear()


#: the Python form of what the C core replaces (``uet.native._target_core``): the reference
#: its tests hold it to, and what it calls for every case but a new request of an
#: established RUD PDC (no SYN, no clear, not trimmed, receive memory well below its limit)
REFERENCE = {"rx_request": TargetPdc.rx_request}


def _use_c_core() -> str:
    """Put the C form of ``rx_request`` in TargetPdc's class (not under
    ``UET_PURE_PYTHON=1``, nor when the extension was not built); returns ``"native"`` or
    ``"python"``."""
    from uet.native._common import load_core

    core = load_core("_target_core")
    if core is None:
        return "python"
    configure(core)
    TargetPdc.rx_request = core.rx_request_method  # type: ignore[method-assign]
    ack.build_ack = core.build_ack  # AckScheduler.next_ack calls it by its module name
    return "native"


def configure(core: Any) -> None:
    """Give the C core the classes whose slots it uses, the constants and the reference."""
    import heapq

    from uet.pds.ack import AckCoalescer
    from uet.pds.config import PdsConfig
    from uet.pds.context import MemoryAccount

    core.configure(TargetPdc, PdcContext, MemoryAccount, PdsConfig, Frame, PdsRequest,
                   AckScheduler, AckCoalescer, Pending, RequestDelivered,
                   {"established": ST_ESTABLISHED, "new": NEW, "heappush": heapq.heappush,
                    "syn": SYN, "retx": RETX, "ar": AR, "immediate": IMMEDIATE,
                    "eom": int(EOM), "ack_m": ACK_M, "ack_retx": ACK_RETX,
                    "max_owed": AckCoalescer.MAX_OWED},
                   REFERENCE["rx_request"])
    from uet.cms.receiver import NsccReceiver
    from uet.native import fast
    from uet.native._common import MARK_RESULTS, field_defaults

    if fast is not None and PsnTracker is fast.PsnTracker:
        # the tracker's one-argument C entry points, called without its Python wrapper
        ffi, lib = fast.ffi, fast.lib
        core.configure_tracker(
            fast.PsnTracker,
            {name: int(ffi.cast("uintptr_t", ffi.addressof(lib, name)))
             for name in ("uetn_tk_on_packet", "uetn_tk_max_psn", "uetn_tk_cack",
                          "uetn_tk_ack_bitmap", "uetn_tk_sack_bitmap")},
            MARK_RESULTS, int(lib.UETN_OOO_SATURATED))
    core.configure_receiver(NsccReceiver)  # its on_data on its slots
    core.configure_ack(ack.REFERENCE["build_ack"], TargetPdc, PdcContext, PdsConfig, PdsAckCc,
                       Frame, {"ack_cc": PdsType.ACK_CC, "req_close": REQ_CLOSE,
                               "req_clear": REQ_CLEAR,
                               "ack_defaults": field_defaults(PdsAckCc),
                               "frame_defaults": field_defaults(Frame),
                               "nscc_cc_type": NsccReceiver.cc_type})


#: which form a new RUD request is taken in: "native" (C) or "python"
IMPLEMENTATION = _use_c_core()

__all__ = ["IMPLEMENTATION", "REFERENCE", "Pending", "TargetPdc", "configure"]
