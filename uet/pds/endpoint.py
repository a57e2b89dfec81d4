"""``PdsEndpoint``: one end point's Packet Delivery Sublayer, sans-IO.

Feed it SES requests (``submit``) and arriving frames (``receive``); take frames to send
(``poll_transmit``), events for the SES (``next_event``) and timers (``next_deadline`` /
``handle_timer``). Nothing here reads a clock or does I/O: every call that can arm a timer
takes ``now`` in integer picoseconds, and randomness (Start_PSNs, PDC IDs, RUDI pkt_ids)
comes from the seeded rng.

Drive order expected from the caller (the FEP): after ``receive``, drain ``next_event`` and
answer each ``RequestDelivered`` with ``respond`` before the next ``poll_transmit``; a request
whose event was taken but not answered by then gets no response. A request whose event was
not yet taken holds the CACK (the initiator will not consider it acknowledged) until it is.

The end point dispatches and schedules; the PDCs (:mod:`uet.pds.initiator`,
:mod:`uet.pds.target`) and the RUDI / UUD senders hold the protocol, and reach the end point
only through the :class:`~uet.pds.context.PdcContext` it hands them. With
``UET_CHECK_INVARIANTS=1`` in the environment every public call is followed by the liveness
check of :mod:`uet.pds.invariants`.
"""

from __future__ import annotations

import heapq
import random
from collections import Counter, deque
from collections.abc import Callable
from typing import Any

from uet.cms.api import (
    NullReceiverCongestion,
    NullSenderCongestion,
    ReceiverCongestion,
    SenderCongestion,
)
from uet.errors import LocalError
from uet.pds import invariants
from uet.pds.ack import REQUEST_NEXT_HDRS
from uet.pds.config import PdsConfig
from uet.pds.context import PdcContext, frame_sdi
from uet.pds.events import PdsEvent, RequestDelivered, SendMessage, SendRequest
from uet.pds.initiator import InitiatorPdc
from uet.pds.manager import INITIATOR, TARGET, PdcBase, PdcManager
from uet.pds.retransmit import nack_name
from uet.pds.rudi import RudiInitiator, RudiTarget
from uet.pds.states import TargetState
from uet.pds.target import TargetPdc
from uet.pds.uud import UudSender, rx_uud
from uet.wire.constants import (
    CpFlag,
    CtlType,
    DeliveryMode,
    NackCode,
    NackFlag,
    PdsType,
    RspOpcode,
    SesFlag,
)
from uet.wire.records import Frame, PdsControl, PdsNack, PdsRequest, SesStandard, psn_add, psn_diff

_SYN = 0x04
_SOM = int(SesFlag.SOM)  # a plain int for the per-packet test
# per-packet names for enum members (an Enum class attribute lookup costs ~70 ns)
_ROD_TYPES = (PdsType.ROD_REQ, PdsType.ROD_CC_REQ)
_ROD = DeliveryMode.ROD
_RUD = DeliveryMode.RUD
_INITIATOR_CTL = frozenset({CtlType.CLEAR_REQ, CtlType.CLOSE_REQ, CtlType.CREDIT})
_NEGOTIATION = int(CtlType.NEGOTIATION)
_CTL_NAMES = {int(c): c.name for c in CtlType}
_T_ESTABLISHED = TargetState.ESTABLISHED
_NO_RESPONSE = int(RspOpcode.NO_RESPONSE)
_TRIMMED_ACK = int(NackCode.TRIMMED_ACK)


def _null_sender(mode: DeliveryMode) -> SenderCongestion:
    return NullSenderCongestion()


def _null_receiver(key: int) -> ReceiverCongestion:
    return NullReceiverCongestion()


class _CreditPacer:
    """Timer entry for the end point's RCCC credit scheduler."""

    __slots__ = ("poll", "_armed", "freed")

    def __init__(self, poll: Callable[[int], None]) -> None:
        self.poll = poll
        self._armed: int | None = None
        self.freed = False

    def on_timer(self, now: int) -> int | None:
        self.poll(now)
        return None  # poll re-arms at the scheduler's next deadline


class PdcLimitError(LocalError, RuntimeError):
    """No initiator PDC can be opened (``max_initiator_pdcs`` or the ID space is exhausted)."""


#: a new incarnation of a PDC starts at least this far from the old one's last PSN (ref 3.2)
START_PSN_DISTANCE = 1 << 16


def _safe_start(old: Any, start: int) -> int | None:
    """The Start_PSN a new incarnation of the lingering target PDC ``old`` must use instead
    of ``start``, or None when ``start`` is safe: one within [old Start_PSN - 2^16, last
    PSN + 2^16) could meet late packets of the old incarnation."""
    last = old.last_psn()
    if psn_diff(start, psn_add(old.start_psn, -START_PSN_DISTANCE)) >= 0 \
            and psn_diff(start, psn_add(last, START_PSN_DISTANCE)) < 0:
        return psn_add(last, START_PSN_DISTANCE)
    return None


def _start_psn(cfg: PdsConfig, rng: random.Random) -> int:
    """A random Start_PSN in [2**16, 2**31) (reference provider), unless fixed by config."""
    if cfg.fixed_start_psn is not None:
        return cfg.fixed_start_psn
    return rng.randrange(1 << 16, 1 << 31)


class PdsEndpoint:
    """The PDS of one end point: PDC manager, initiator and target PDCs, RUDI and UUD."""

    # what the C cores (fep_core.c, target_core.c) read per frame, at fixed offsets; every
    # other attribute (and the invariant checks' wrappers) lives in the instance dict
    __slots__ = ("local_ip", "_rx", "ctx", "mgr", "events", "ctrl", "ack_ring", "ring",
                 "_seen", "_tokens", "__dict__", "__weakref__")

    def __init__(self, config: PdsConfig, local_ip: str, rng: random.Random, *,
                 sender_cc: Callable[[DeliveryMode], SenderCongestion] | None = None,
                 receiver_cc: Callable[[int], ReceiverCongestion] | None = None,
                 credit_scheduler: Any = None,
                 log: Callable[..., None] | None = None,
                 acked_events: bool = True) -> None:
        """``sender_cc(mode)`` builds the SenderCongestion of each initiator PDC (and of the
        RUDI and UUD senders); ``receiver_cc(pdc_id)`` the ReceiverCongestion of each target
        PDC, ``pdc_id`` being the key its credit grants name; ``credit_scheduler`` (RCCC:
        ``poll_grants(now)``, ``next_deadline()``) is polled after receiver calls and at
        its deadline, one CREDIT CP per grant; ``log(now, kind, **fields)`` gets events;
        ``acked_events=False``: no :class:`~uet.pds.events.PacketAcked` events (for a
        driver that has no use for them)."""
        self.cfg = config
        self.local_ip = local_ip
        self.rng = rng
        self._sender_cc = sender_cc or _null_sender
        self._receiver_cc = receiver_cc or _null_receiver
        self.credit_scheduler = credit_scheduler
        self._credit_pacer = _CreditPacer(self._poll_credit)
        self.mgr: PdcManager[InitiatorPdc, TargetPdc] = PdcManager(config, rng)
        ctx = self.ctx = PdcContext(config, local_ip, self.mgr, rng, log)
        ctx.credit_changed = self._credit_changed
        ctx.report_acked = acked_events
        self.log_hook = log
        # the context's queues, under the names callers and tests have used
        self.counters: Counter[str] = ctx.counters
        self.events: deque[PdsEvent] = ctx.events
        self.ctrl: deque[Frame] = ctx.ctrl
        self.ack_ring: deque[Any] = ctx.ack_ring
        self.ring: deque[Any] = ctx.ring
        self._tokens = ctx._tokens
        self._seen: list[int] = []
        self._rudi_ini: RudiInitiator | None = None
        self.rudi_target = RudiTarget(ctx)
        self._uud: UudSender | None = None
        self._rx: dict[int, Callable[[int, Frame, Any], None]] = {
            PdsType.RUD_REQ: self._rx_request, PdsType.ROD_REQ: self._rx_request,
            PdsType.RUD_CC_REQ: self._rx_request, PdsType.ROD_CC_REQ: self._rx_request,
            PdsType.ACK: self._rx_ack, PdsType.ACK_CC: self._rx_ack,
            PdsType.ACK_CCX: self._rx_ack, PdsType.NACK: self._rx_nack,
            PdsType.NACK_CCX: self._rx_nack, PdsType.CP: self._rx_cp,
            PdsType.RUDI_REQ: self._rx_rudi, PdsType.RUDI_RESP: self._rx_rudi,
            PdsType.UUD_REQ: self._rx_uud,
        }
        if invariants.enabled():
            invariants.install(self)

    # ================================================================== public API
    def submit(self, now: int, request: SendRequest | SendMessage) -> None:
        """Queue one SES request packet, or the packets of a :class:`SendMessage` (made as
        they are sent); the PDS picks or opens the PDC and assigns the PSNs."""
        size = request.max_payload if type(request) is SendMessage else len(request.payload)
        if size > self.cfg.mtu_payload:
            raise ValueError(f"payload of {size} bytes exceeds mtu_payload "
                             f"({self.cfg.mtu_payload})")
        mode = request.mode
        if type(request) is SendMessage and mode != DeliveryMode.RUD \
                and mode != DeliveryMode.ROD:
            # RUDI and UUD send each packet on its own: they take the message packet by packet
            while request.count:
                self.submit(now, request.pop())
            return
        if mode == DeliveryMode.RUD or mode == DeliveryMode.ROD:
            key = (mode, request.job_id, self.local_ip, request.dst_ip, request.tc)
            pdc = self.mgr.ini_by_key.get(key)
            if pdc is not None and pdc.sdi is not None and self._range_used(pdc, request):
                # a secured PDC closes before its PSN reaches Start_PSN + 2^31 (ref. 3.2):
                # at the first message that would cross it, it takes no more requests,
                # closes once idle, and a new PDC (a new Start_PSN) carries the rest; a
                # message never spans two PDCs
                self.counters["psn_range_close"] += 1
                self.ctx.log(now, "psn_range_close", pdc_id=pdc.pdc_id, peer=pdc.peer_ip,
                             start_psn=pdc.start_psn, next_psn=pdc.next_psn)
                pdc.close_request(now)
                self.mgr.unmap_initiator(pdc)
                pdc = None
            if pdc is None:
                pdc = self._open_initiator(now, key, request)
            pdc.submit(now, request)
        elif mode == DeliveryMode.RUDI:
            if self._rudi_ini is None:
                self._rudi_ini = RudiInitiator(self.ctx, self._sender_cc(mode))
            self._rudi_ini.submit(now, request)
        elif mode == DeliveryMode.UUD:
            if self._uud is None:
                self._uud = UudSender(self.ctx, self._sender_cc(mode))
            self._uud.submit(now, request)
        else:
            raise ValueError(f"unknown delivery mode {mode!r}")

    def _range_used(self, pdc: InitiatorPdc, req: SendRequest | SendMessage) -> bool:
        """Would the message ``req`` starts (and the CLOSE after it) reach Start_PSN + the
        secure PSN range? Continuation packets stay on their message's PDC."""
        if type(req) is SendMessage:
            n = req.count
        else:
            ses = req.ses
            if type(ses) is SesStandard:
                if not ses.flags & _SOM:
                    return False
                n = max(1, -(-ses.request_length // self.cfg.mtu_payload))
            else:
                n = 1
        queued = sum(q.count if type(q) is SendMessage else 1 for q in pdc.queue)
        used = ((pdc.next_psn - pdc.start_psn) & 0xFFFFFFFF) + queued + n + 1
        return used > self.cfg.secure_psn_range

    def receive(self, now: int, frame: Frame) -> None:
        """A decoded frame addressed to this end point."""
        if frame.dst_ip != self.local_ip:
            self.counters["dropped.not_for_us"] += 1
            return
        pds = frame.pds
        handler = self._rx.get(pds.type)
        if handler is None:
            self.counters["dropped.unknown_type"] += 1
            return
        handler(now, frame, pds)

    def respond(self, now: int, token: int, response: Any, data: bytes = b"") -> bool:
        """The SES answer to a ``RequestDelivered``; None means "no response".

        Guaranteed responses (RESPONSE, RESPONSE_W_DATA) ride in their own ACK (RUDI: in the
        RUDI_RESP) and are stored until cleared. Returns False if the token is unknown or its
        response was already final (counted as ``late_response``).
        """
        ctx = self.ctx
        entry = ctx.take_token(token)
        if entry is None:
            self.counters["late_response"] += 1
            return False
        if response is not None and response.opcode == _NO_RESPONSE:
            # the early ACK placeholder: the token stays valid for the real response
            ctx._tokens[token] = entry
            return entry.pdc.on_early(now, entry, response)
        return entry.pdc.on_respond(now, entry, response, data)

    def reject(self, now: int, token: int, code: int = NackCode.NO_SES_MSG_AVAIL) -> bool:
        """The SES refuses a delivered request (``TargetReply.nack``): NACK it with ``code``
        and treat it as never received, so the initiator's retransmission is delivered
        again. Returns False if the token is unknown or already final."""
        entry = self.ctx.take_token(token)
        if entry is None:
            self.counters["late_response"] += 1
            return False
        self.counters["ses_rejected"] += 1
        return entry.pdc.on_reject(now, entry, code)

    def control_pending(self) -> bool:
        """Whether ``poll_transmit(now, True)`` may have a frame: a control frame queued, a
        PDC owing an ACK, or a delivery whose answer is not settled yet."""
        return bool(self.ctrl or self.ack_ring or self._seen)

    def poll_transmit(self, now: int, control: bool) -> Frame | None:
        """Next frame of the control class (ACK, NACK, CP, RUDI_RESP) or of the data class."""
        if self._seen:
            self._finalize_seen(now)
        if control:
            if self.ctrl:
                return self.ctrl.popleft()
            ring = self.ack_ring
            while ring:
                pdc = ring.popleft()
                frame = None if pdc.freed else pdc.next_ack(now)
                if frame is None:
                    pdc.in_ack_ring = False
                    continue
                acks = pdc.acks  # AckScheduler.pending, inline: once per ACK
                if acks.explicit or acks.co.now or acks.co.owed:
                    ring.append(pdc)
                else:
                    pdc.in_ack_ring = False
                return frame
            return None
        ring = self.ring
        for _ in range(len(ring)):
            sender = ring.popleft()
            frame = sender.poll_data(now)
            if frame is not None:
                if sender.has_data_work():
                    ring.append(sender)
                else:
                    sender.in_ring = False
                return frame
            sender.in_ring = False
        return None

    def next_deadline(self) -> int | None:
        """Earliest timer (RTO, ACK timer, close, linger, ...), or None."""
        heap = self.ctx.heap
        while heap:
            t, _, obj = heap[0]
            if obj._armed == t:
                return t
            heapq.heappop(heap)
        return None

    def handle_timer(self, now: int) -> None:
        """Run every timer due at ``now``."""
        heap = self.ctx.heap
        arm = self.ctx.arm
        while heap and heap[0][0] <= now:
            t, _, obj = heapq.heappop(heap)
            if obj._armed != t:
                continue
            obj._armed = None
            nxt = obj.on_timer(now)
            if nxt is not None:
                arm(obj, nxt if nxt > now else now + 1)

    def next_event(self) -> PdsEvent | None:
        """Next event for the SES / reports, or None."""
        events = self.events
        if not events:
            return None
        ev = events.popleft()
        if type(ev) is RequestDelivered and ev.token:
            self._seen.append(ev.token)
        return ev

    @property
    def capabilities(self) -> int:
        """The ``fep_cap`` bits this end point advertises in NEGOTIATION packets."""
        return self.ctx.fep_cap

    @capabilities.setter
    def capabilities(self, fep_cap: int) -> None:
        self.ctx.fep_cap = int(fep_cap) & 0xFF

    # ------------------------------------------------------------------ introspection
    def pdcs(self, role: str | None = None) -> list[PdcBase]:
        """Open (not lingering) PDCs, optionally of one role ('initiator' / 'target')."""
        return self.mgr.open_pdcs(role)

    def pdc(self, pdc_id: int) -> PdcBase | None:
        """The PDC with this local ID (open or lingering), or None."""
        return self.mgr.by_id.get(pdc_id)

    @property
    def tx_memory(self) -> int:
        """Bytes of request packets held for retransmission."""
        return self.ctx.tx_memory.used

    @property
    def rx_memory(self) -> int:
        """Bytes of stored responses, ROD buffers and the RUDI response cache."""
        return self.ctx.rx_memory.used

    def idle(self) -> bool:
        """Nothing queued, outstanding or waiting to be sent."""
        if self.ctrl or self.ack_ring or self.ring or self.events:
            return False
        for p in self.mgr.by_id.values():
            if type(p) is InitiatorPdc and not p.lingering and (p.outstanding or p.queue):
                return False
        return not (self._rudi_ini and (self._rudi_ini.outstanding or self._rudi_ini.queue))

    def activate(self, sender: Any) -> None:
        """Put a sender (back) on the data ring (tests, drivers that unblocked it)."""
        self.ctx.wake(sender)

    # ================================================================== receive paths
    def _rx_request(self, now: int, frame: Frame, pds: PdsRequest) -> None:
        mgr = self.mgr
        ctx = self.ctx
        mode = _ROD if pds.type in _ROD_TYPES else _RUD
        if pds.next_hdr not in REQUEST_NEXT_HDRS:
            ctx.nack(now, frame, NackCode.PDC_HDR_MISMATCH, pds.psn, 0, pds.spdcid,
                     why=f"request with next_hdr {int(pds.next_hdr)}")
            return
        pdc: Any
        if pds.flags & _SYN:
            key = (frame.src_ip, frame.dst_ip, pds.spdcid)
            pdc = mgr.tgt_by_key.get(key)
            start = None
            if pdc is not None and pdc.lingering and pdc.start_psn != pds.start_psn:
                # a new incarnation of the initiator's PDC; its Start_PSN must lie at
                # least 2^16 from the last PSN the old one used (ref 3.2), so that late
                # packets of the old incarnation cannot pass for new ones: if it does not,
                # this end point picks one that does (NACK NEW_START_PSN)
                start = _safe_start(pdc, pds.start_psn)
                ctx.free(pdc)
                pdc = None
            if pdc is None:
                pdc = self._open_target(now, frame, pds, mode, key, start=start,
                                        cc=pds.type >= PdsType.RUD_CC_REQ)
                if pdc is None:
                    return
            elif pdc.sdi != frame_sdi(frame):
                ctx.nack(now, frame, NackCode.PDC_HDR_MISMATCH, pds.psn, pdc.pdc_id,
                         pds.spdcid, why="secure domain differs from the PDC's")
                return
        else:
            pdc = self._named_target(now, frame, pds)
            if pdc is None:
                return
        if pdc.mode != mode:  # (a PDC just opened has the request's mode)
            ctx.nack(now, frame, NackCode.PDC_MODE_MISMATCH, pds.psn, pdc.pdc_id,
                     pds.spdcid, why=f"{mode.name} request on a {pdc.mode.name} PDC")
            return
        pdc.rx_request(now, frame, pds)

    def _named_target(self, now: int, frame: Frame, hdr: Any) -> TargetPdc | None:
        """The target PDC a non-SYN request or control packet names by its DPDCID, if it
        is one and its source address, SPDCID and secure domain match; otherwise the
        packet is NACKed (INV_DPDCID / PDC_HDR_MISMATCH) and None returned."""
        ctx = self.ctx
        pdc: Any = self.mgr.by_id.get(hdr.dpdcid)
        if pdc is None or pdc.role != TARGET:
            ctx.nack(now, frame, NackCode.INV_DPDCID, hdr.psn, 0, hdr.spdcid,
                     why=f"unknown DPDCID {hdr.dpdcid}")
            return None
        if pdc.peer_ip != frame.src_ip or pdc.peer_pdcid != hdr.spdcid:
            ctx.nack(now, frame, NackCode.PDC_HDR_MISMATCH, hdr.psn, pdc.pdc_id,
                     hdr.spdcid, why="source address or SPDCID differs from the PDC's")
            return None
        if pdc.sdi != frame_sdi(frame):
            ctx.nack(now, frame, NackCode.PDC_HDR_MISMATCH, hdr.psn, pdc.pdc_id,
                     hdr.spdcid, why="secure domain differs from the PDC's")
            return None
        return pdc

    def _open_target(self, now: int, frame: Frame, pds: Any, mode: DeliveryMode,
                     key: tuple, *, start: int | None = None, cc: bool = False,
                     credit: bool = False) -> TargetPdc | None:
        """First SYN of an unknown {sip, dip, spdcid}: a target PDC, or a NACK.
        ``start``: the Start_PSN this end point requires (NEW_START_PSN unless the SYN has
        it); ``cc``: opened by a congestion-controlled packet (it takes a CC context);
        ``credit``: by a CREDIT_REQ (the receiver must speak credit)."""
        cfg = self.cfg
        mgr = self.mgr
        ctx = self.ctx
        if pds.psn_offset >= cfg.mp_range:
            ctx.nack(now, frame, NackCode.INVALID_SYN, pds.psn, 0, pds.spdcid,
                     why="SYN psn_offset beyond the receive window")
            return None
        if mgr.source_full(frame.src_ip):
            self.counters["refused.pdcs_per_source"] += 1
            self._reclaim(now, frame.src_ip)
            ctx.nack(now, frame, NackCode.NO_PDC_AVAIL, pds.psn, 0, pds.spdcid,
                     why="target PDC limit per source reached")
            return None
        pid = mgr.alloc_id() if mgr.can_open(TARGET) else None
        if pid is None:
            self.counters["refused.target_pdcs"] += 1
            self._reclaim(now, None)
            ctx.nack(now, frame, NackCode.NO_PDC_AVAIL, pds.psn, 0, pds.spdcid,
                     why="target PDC limit reached")
            return None
        if cc and not mgr.ccc_free():
            self.counters["refused.cc_contexts"] += 1
            ctx.nack(now, frame, NackCode.NO_CCC_AVAIL, pds.psn, 0, pds.spdcid,
                     why="every congestion-control context is taken")
            return None
        syn_start = pds.start_psn
        pending = False
        sdi = frame_sdi(frame)
        why = ("Start_PSN within 2^16 of the last PSN of the PDC's previous incarnation"
               if start is not None else "target picks the Start_PSN")
        if sdi is not None:
            # secured PDC (ref. 3.2): RANDOM_1RTT_START always picks its own Start_PSN;
            # EXPECTED_0RTT_START takes the initiator's (or the safe one above) unless it
            # is below this SDI's Expected-PSN floor (a replayed or stale SYN), and then
            # asks for the floor
            if cfg.secure_start_psn == "random_1rtt":
                start = _start_psn(cfg, self.rng) if cfg.fixed_start_psn is None \
                    else self.rng.randrange(1 << 16, 1 << 31)
                pending = True
                why = "RANDOM_1RTT_START: target picks the Start_PSN"
            else:
                floor = ctx.secure_floor.get(sdi, 0)
                start = syn_start if start is None else start
                if psn_diff(start, floor) < 0:
                    start = floor
                    why = f"Start_PSN {pds.start_psn} below SDI {sdi}'s Expected PSN {floor}"
                    self.counters["secure_start_below_floor"] += 1
                pending = start != syn_start
        elif start is not None:
            pending = start != syn_start
        elif cfg.start_psn_mode == "target":
            start = _start_psn(cfg, self.rng)
            pending = start != syn_start
        else:
            start = syn_start
        if not pending and not mgr.bitmap_free():
            self.counters["refused.rx_bitmaps"] += 1
            ctx.nack(now, frame, NackCode.NO_BITMAP, pds.psn, 0, pds.spdcid,
                     why="every PSN-tracking bitmap is taken")
            return None
        receiver = self._receiver_cc(pid)
        if credit and receiver.rccc is None:
            receiver.close()
            ctx.nack(now, frame, NackCode.UNEXP_EVENT, pds.psn, 0, pds.spdcid,
                     why="CREDIT_REQ to an end point without credit-based congestion control")
            return None
        pdc = TargetPdc(ctx, pid, frame.src_ip, mode, key, pds.spdcid, start, receiver, now,
                        TargetState.PENDING if pending else _T_ESTABLISHED)
        pdc.sdi = sdi
        mgr.register_target(pdc)
        if cc:
            mgr.take_ccc(pdc)
        if pending:
            pdc.pending_until = now + cfg.new_pdc_time_ps
            ctx.arm(pdc, pdc.pending_until)
            ctx.nack(now, frame, NackCode.NEW_START_PSN, pds.psn, pid, pds.spdcid,
                     payload=start, why=why)
            return None
        mgr.take_bitmap(pdc)
        ctx.opened(now, pdc)
        if cfg.target_idle_ps:
            ctx.arm(pdc, now + cfg.target_idle_ps)
        return pdc

    def _reclaim(self, now: int, src: str | None) -> None:
        """A new PDC found the table (or its source's share) full: ask the idle target PDC
        heard from least recently to close (CLOSE_REQ, ref 3.9), so the next attempt
        finds room. One reclaim at a time."""
        victim = self.mgr.reclaim_candidate(src)
        if victim is not None:
            victim.request_close(now, "reclaim: the PDC table is full", reclaim=True)

    def _open_initiator(self, now: int, key: tuple,
                        req: SendRequest | SendMessage) -> InitiatorPdc:
        mgr = self.mgr
        pid = mgr.alloc_id() if mgr.can_open(INITIATOR) else None
        if pid is None:
            self.counters["initiator_pdc_limit"] += 1
            raise PdcLimitError(
                f"cannot open an initiator PDC to {req.dst_ip}: limit "
                f"max_initiator_pdcs={self.cfg.max_initiator_pdcs} reached")
        start = _start_psn(self.cfg, self.rng)
        if req.sdi is not None and self.cfg.secure_start_psn == "expected_0rtt":
            # EXPECTED_0RTT_START: start at what the target's last closing ACK said
            learned = self.ctx.secure_learned.get((req.sdi, req.dst_ip))
            if learned is not None:
                start = learned
        pdc = InitiatorPdc(self.ctx, pid, req.dst_ip, req.mode, key, req.job_id, req.tc,
                           start, self._sender_cc(req.mode), now)
        pdc.sdi = req.sdi
        pdc.job = req.job_id
        mgr.register_initiator(pdc)
        self.ctx.opened(now, pdc)
        if self.cfg.negotiation:
            pdc.send_negotiation(now)
        return pdc

    def _rx_ack(self, now: int, frame: Frame, ack: Any) -> None:
        pdc = self.mgr.by_id.get(ack.dpdcid)
        if type(pdc) is not InitiatorPdc:
            self.counters["ack_rx"] += 1
            self.counters["dropped.ack_unknown_pdc"] += 1
            return
        if pdc.sdi != frame_sdi(frame):
            self.counters["ack_rx"] += 1
            self.counters["dropped.domain_mismatch"] += 1
            return
        pdc.rx_ack(now, frame, ack)

    def _rx_nack(self, now: int, frame: Frame, nack: PdsNack) -> None:
        name = nack_name(nack.nack_code)
        self.counters["nack_rx." + name] += 1
        self.ctx.log(now, "nack_rx", code=name, psn=nack.nack_psn, pdc_id=nack.dpdcid,
                     peer=frame.src_ip)
        if nack.nack_code == _TRIMMED_ACK:  # from an initiator, about our ACK: a target's
            if nack.flags & NackFlag.NT:
                self.rudi_target.rx_trimmed_ack(now, frame, nack)
                return
            tpdc = self.mgr.by_id.get(nack.dpdcid)
            if type(tpdc) is TargetPdc:
                tpdc.rx_nack(now, frame, nack)
            else:
                self.counters["dropped.nack_unknown_pdc"] += 1
            return
        if nack.flags & NackFlag.NT:
            if self._rudi_ini is not None:
                self._rudi_ini.rx_nack(now, frame, nack)
            return
        pdc = self.mgr.by_id.get(nack.dpdcid)
        if type(pdc) is not InitiatorPdc:
            self.counters["dropped.nack_unknown_pdc"] += 1
            return
        if pdc.sdi != frame_sdi(frame):
            self.counters["dropped.domain_mismatch"] += 1
            return
        pdc.rx_nack(now, frame, nack)

    def _rx_cp(self, now: int, frame: Frame, cp: PdsControl) -> None:
        ctl = cp.ctl_type
        self.counters["cp_rx." + _CTL_NAMES.get(ctl, str(ctl))] += 1
        mgr = self.mgr
        ctx = self.ctx
        pdc: Any
        if ctl in _INITIATOR_CTL or (ctl == _NEGOTIATION and not cp.flags & CpFlag.SYN
                                     and type(mgr.by_id.get(cp.dpdcid)) is InitiatorPdc):
            pdc = mgr.by_id.get(cp.dpdcid)
            if pdc is None or pdc.role != INITIATOR:
                self.counters["dropped.cp_unknown_pdc"] += 1
                return
            if pdc.sdi != frame_sdi(frame):
                self.counters["dropped.domain_mismatch"] += 1
                return
            pdc.rx_cp(now, frame, cp)
            return
        if cp.flags & CpFlag.SYN:
            key = (frame.src_ip, frame.dst_ip, cp.spdcid)
            pdc = mgr.tgt_by_key.get(key)
            if pdc is None and (ctl == CtlType.CREDIT_REQ or ctl == _NEGOTIATION):
                # RCCC: a sender whose first packets were lost may only be able to ask for
                # credit; NEGOTIATION may arrive before the first request. The SYN CP
                # carries what opening the PDC needs.
                mode = DeliveryMode.ROD if cp.flags & CpFlag.ISROD else DeliveryMode.RUD
                credit = ctl == CtlType.CREDIT_REQ
                pdc = self._open_target(now, frame, cp, mode, key, cc=credit, credit=credit)
                if pdc is None:
                    return
            elif pdc is None:
                if ctl == CtlType.ACK_REQ:
                    ctx.nack(now, frame, NackCode.PKT_NOT_RCVD, cp.psn, 0, cp.spdcid,
                             why="ACK request on a PDC never established")
                else:
                    self.counters["dropped.cp_unknown_pdc"] += 1
                return
            elif pdc.sdi != frame_sdi(frame):
                ctx.nack(now, frame, NackCode.PDC_HDR_MISMATCH, cp.psn, pdc.pdc_id,
                         cp.spdcid, why="secure domain differs from the PDC's")
                return
        else:
            pdc = self._named_target(now, frame, cp)
            if pdc is None:
                return
        pdc.rx_cp(now, frame, cp)

    def _rx_rudi(self, now: int, frame: Frame, pds: Any) -> None:
        if pds.type == PdsType.RUDI_REQ:
            self.rudi_target.rx_req(now, frame, pds)
        elif self._rudi_ini is not None:
            self._rudi_ini.rx_resp(now, frame, pds)
        else:
            self.counters["rudi_resp_duplicate"] += 1

    def _rx_uud(self, now: int, frame: Frame, pds: Any) -> None:
        rx_uud(self.ctx, now, frame)

    # ================================================================== end point services
    def _finalize_seen(self, now: int) -> None:
        tokens = self._tokens
        for token in self._seen:
            entry = tokens.get(token)
            if entry is not None and not entry.deferred:  # NO_RESPONSE: answered later
                del tokens[token]
                entry.pdc.finalize(now, entry)
        self._seen.clear()

    def _credit_changed(self, now: int, pdc: Any) -> None:
        """A receiver CC call may have produced credit: send the CREDIT CPs due."""
        if self.credit_scheduler is not None:
            self._poll_credit(now)
        else:
            rccc = pdc.receiver.rccc
            grant = rccc.credit_grant(now) if rccc is not None else 0
            if grant:
                pdc.send_cp(now, CtlType.CREDIT, 0, 0, grant & 0xFFFFFFFF)

    def _poll_credit(self, now: int) -> None:
        """Run the RCCC credit scheduler: one CREDIT CP per grant; re-arm its timer."""
        sched = self.credit_scheduler
        for key, payload in sched.poll_grants(now):
            pdc = self.mgr.by_id.get(key)
            if pdc is not None and pdc.role == TARGET and pdc.state is _T_ESTABLISHED:
                pdc.send_cp(now, CtlType.CREDIT, 0, 0, payload & 0xFFFFFFFF)
            else:
                self.counters["credit_grant_dropped"] += 1
        d = sched.next_deadline()
        if d is not None:
            self.ctx.arm(self._credit_pacer, d if d > now else now + 1)


#: the Python form of what the C core replaces (``uet.native._target_core``'s
#: ``rx_dispatch``): the reference its tests hold it to, and what it calls for SYN, every
#: mismatch (NACKed here) and a secured frame
REFERENCE = {"_rx_request": PdsEndpoint._rx_request, "poll_transmit": PdsEndpoint.poll_transmit,
             "respond": PdsEndpoint.respond, "_rx_ack": PdsEndpoint._rx_ack}


def _use_c_core() -> str:
    """Put the C form of ``_rx_request`` in PdsEndpoint's class (with the target core's
    ``rx_request``; not under ``UET_PURE_PYTHON=1``, nor when the extension was not built);
    returns ``"native"`` or ``"python"``."""
    from uet.native._common import load_core
    from uet.pds import ack, initiator, target

    core = load_core("_target_core")
    if core is None or target.IMPLEMENTATION != "native":
        return "python"
    core.configure_dispatch(REFERENCE["_rx_request"], {
        "request_next_hdrs": REQUEST_NEXT_HDRS, "target": TARGET, "rud": _RUD, "rod": _ROD,
        "rod_req": int(PdsType.ROD_REQ), "rod_cc_req": int(PdsType.ROD_CC_REQ),
        "endpoint_class": PdsEndpoint})
    PdsEndpoint._rx_request = core.rx_dispatch_method  # type: ignore[method-assign]
    # the control poll: the end point's rings and a target PDC's coalesced and owed ACKs
    core.configure_transmit((ack.SCHEDULER_REFERENCE["next_ack"], REFERENCE["poll_transmit"],
                             REFERENCE["respond"]),
                            ack.AckScheduler, PdsEndpoint, target.TargetPdc.FREED)
    ack.AckScheduler.next_ack = core.next_ack_method  # type: ignore[method-assign]
    PdsEndpoint.poll_transmit = core.poll_transmit_method  # type: ignore[method-assign]
    PdsEndpoint.respond = core.respond_method  # type: ignore[method-assign]
    sender = load_core("_sender_core")
    if sender is not None and initiator.IMPLEMENTATION == "native":  # an ACK to its PDC
        sender.configure_ack_dispatch(REFERENCE["_rx_ack"], PdsEndpoint)
        PdsEndpoint._rx_ack = sender.rx_ack_dispatch_method  # type: ignore[method-assign]
    return "native"


#: which form a request finds its target PDC in: "native" (C) or "python"
IMPLEMENTATION = _use_c_core()
