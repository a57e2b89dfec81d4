"""ACKs of a target PDC: when to send one, which one is next, and how it is built
(ref. 2.3, 2.4, 3.6).

An ACK goes out at once for a packet with AR, SYN, ECN-CE or RETX set, for a packet whose
SES response must be delivered (each such response rides in its own ACK, ``ack_psn`` = that
packet), for duplicates and ACK requests, and when the target needs a clear or a close. Other
packets are coalesced: one ACK per ``ack_every_bytes`` accepted payload bytes, and at the
latest ``ack_timer_ps`` after the first unacknowledged packet arrived (the receiver ACK timer,
so a flow that ends with reordered packets is acknowledged without waiting for an RTO).

:class:`AckScheduler` keeps that state for one target PDC (the coalesced ACK's trigger, the
explicit per-packet ACKs, the AR packets still owed their own ACK) and picks the next ACK at
each control poll; :func:`build_ack` builds the header from what the PDC's receive state
says (:class:`AckSource`: CACK held below unanswered or stored packets, SACK bitmap with
refused packets masked out, REQ, MPR, the receiver CC's ACK_CC fields). The target PDC only
feeds it arrivals and answers.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Protocol

from uet.pds.context import PdcContext, tss_marker
from uet.wire.constants import AckFlag, NextHeader, PdsType, ReturnCode, RspOpcode
from uet.wire.records import (
    Frame,
    PdsAck,
    PdsAckCc,
    SesMedium,
    SesResponse,
    SesResponseData,
    SesResponseDataSmall,
    SesSmall,
    SesStandard,
    psn_add,
    psn_diff,
)

_EPSN = int(AckFlag.EPSN)

#: next_hdr for each SES header class.
NEXT_HDR = {
    SesSmall: NextHeader.REQ_SMALL,
    SesMedium: NextHeader.REQ_MEDIUM,
    SesStandard: NextHeader.REQ_STD,
    SesResponse: NextHeader.RSP,
    SesResponseData: NextHeader.RSP_DATA,
    SesResponseDataSmall: NextHeader.RSP_DATA_SMALL,
}
REQUEST_NEXT_HDRS = frozenset({NextHeader.REQ_SMALL, NextHeader.REQ_MEDIUM,
                               NextHeader.REQ_STD, NextHeader.RSP_DATA,
                               NextHeader.RSP_DATA_SMALL})
#: response opcodes that must be delivered (stored until cleared, ref. 3.7)
GUARANTEED_OPCODES = frozenset({RspOpcode.RESPONSE, RspOpcode.RESPONSE_W_DATA})

REQ_CLEAR = 0x02  # AckFlag REQ field = 1
REQ_CLOSE = 0x04  # AckFlag REQ field = 2
ACK_M = int(AckFlag.M)
ACK_RETX = int(AckFlag.RETX)
ACK_P = int(AckFlag.P)
_ALL_SACKED = 0xFFFFFFFFFFFFFFFF


def default_response(ses: object | None) -> SesResponse:
    """The DEFAULT_RESPONSE (rc NULL) answering a duplicate shifted out of the window."""
    return SesResponse(opcode=RspOpcode.DEFAULT_RESPONSE, return_code=ReturnCode.NULL,
                       message_id=getattr(ses, "message_id", 0) or 0,
                       job_id=getattr(ses, "job_id", 0) or 0)


def clamp_offset(psn: int, base: int) -> int:
    """Signed 16-bit offset of ``psn`` from ``base``; 0 if it does not fit."""
    off = psn_diff(psn, base)
    return off if -32768 <= off <= 32767 else 0


class AckSource(Protocol):
    """What an ACK reports, as the target PDC knows it."""

    pdc_id: int
    peer_pdcid: int
    peer_ip: str
    mpr: int
    tracker: Any  # uet.native.PsnTracker
    rejected: set[int]
    receiver: Any  # uet.cms.api.ReceiverCongestion
    ccx: Any  # the receiver's CCX state source (ack_state / nack_state), or None
    cack_held: bool
    sdi: int | None  # secure domain of a secured PDC (its ACKs are sealed in it)
    close_psn: int
    close_epsn: int | None  # the Expected PSN its closing ACK carries (secured PDCs)

    def held_cack(self, tracker_cack: int | None = None) -> int: ...

    def not_done(self, psn: int) -> bool: ...

    def ack_state(self) -> tuple[int, bool, bool]:
        """(REQ bits, closed: every PSN up to the close PSN counts, open: established)."""
        ...


class AckCoalescer:
    """Pending-ACK state of one target PDC (the "triggering" packet and the counters)."""

    __slots__ = ("psn", "ev", "flags", "ar", "nbytes", "now", "due", "owed")

    #: AR packets whose own ACK can wait for the next poll; beyond this they are coalesced
    MAX_OWED = 16

    def __init__(self) -> None:
        self.psn: int | None = None  # PSN that triggers the pending coalesced ACK
        self.ev = 0
        self.flags = 0  # ACK flags (M, RETX) of the triggering packet
        self.ar = False  # the triggering packet asked for its ACK (AR)
        self.nbytes = 0  # payload bytes accepted since the last ACK
        self.now = False  # an ACK must go at the next poll
        self.due: int | None = None  # receiver ACK timer deadline
        # (psn, ev, flags) of earlier AR packets that arrived before the poll that would
        # have sent their ACK: each still gets an ACK naming it (ref 3.6), oldest first
        self.owed: deque[tuple[int, int, int]] = deque()

    def owe(self, psn: int, ev: int, flags: int) -> bool:
        """Remember that ``psn`` (an AR packet) is owed its own ACK; False when full."""
        if len(self.owed) >= self.MAX_OWED:
            return False
        self.owed.append((psn, ev, flags))
        return True

    def clear(self) -> None:
        """The pending coalesced ACK went out (owed per-packet ACKs stay)."""
        self.psn = None
        self.flags = 0
        self.ar = False
        self.nbytes = 0
        self.now = False
        self.due = None


class AckScheduler:
    """Which ACKs one target PDC owes and in what order they leave.

    ``explicit``: ACKs for one packet each (its SES response, a duplicate, an ACK request,
    a probe answer), sent first, oldest first; then the ACKs owed to AR packets; then the
    coalesced ACK. ``on_accepted`` is the coalescing decision for one accepted packet."""

    __slots__ = ("ctx", "owner", "co", "explicit", "every_bytes", "timer_ps")

    def __init__(self, ctx: PdcContext, owner: Any) -> None:
        self.ctx = ctx
        self.owner = owner  # the target PDC: what want_ack / arm name
        self.co = AckCoalescer()
        self.explicit: deque[tuple[Any, ...]] = deque()
        self.every_bytes = ctx.cfg.ack_every_bytes
        self.timer_ps = ctx.cfg.ack_timer_ps

    @property
    def pending(self) -> bool:
        """An ACK is ready for the next control poll."""
        co = self.co
        return bool(self.explicit) or co.now or bool(co.owed)

    def on_accepted(self, now: int, psn: int, ev: int, aflags: int, ar: bool,
                    nbytes: int, immediate: bool) -> None:
        """Coalescing decision for one accepted packet (``aflags``: its ACK flags M/RETX;
        ``immediate``: SYN, AR, RETX or ECN-CE asks for an ACK now)."""
        co = self.co
        if not co.flags & ACK_M:  # keep a CE trigger's PSN/EV for path attribution
            if ar and co.ar and co.psn != psn:
                # two AR packets before one poll: the first still gets an ACK naming it
                self.owe(co.psn, co.ev, co.flags)
            co.psn = psn
            co.ev = ev
            co.flags = aflags
            co.ar = ar
        elif ar and co.psn != psn:
            self.owe(psn, ev, aflags)
        co.nbytes += nbytes
        if immediate or co.nbytes >= self.every_bytes:
            if not co.now:
                co.now = True
                self.ctx.want_ack(self.owner)
        elif co.due is None:
            co.due = now + self.timer_ps
            self.ctx.arm(self.owner, co.due)

    def owe(self, psn: int | None, ev: int, flags: int) -> None:
        if psn is None or not self.co.owe(psn, ev, flags):
            self.ctx.counters["ack_ar_coalesced"] += 1

    def report(self, psn: int, ev: int, aflags: int) -> None:
        """A SACK-only ACK now (a duplicate of a buffered ROD packet): report it without
        acknowledging it explicitly."""
        co = self.co
        if co.ar and co.psn != psn:
            self.owe(co.psn, co.ev, co.flags)
        co.psn, co.ev, co.flags, co.ar = psn, ev, aflags, False
        self.now()

    def now(self) -> None:
        """The coalesced ACK must go at the next poll (a released hold, a timer)."""
        co = self.co
        if not co.now:
            co.now = True
            self.ctx.want_ack(self.owner)

    def explicit_ack(self, psn: int, ses: Any, data: bytes, ev: int, flags: int,
                     probe: int | None = None, sack_base: int | None = None) -> None:
        """An ACK naming ``psn`` (with ``ses`` / ``data`` when it carries a response)."""
        self.explicit.append((psn, ses, data, ev, flags, probe, sack_base))
        self.ctx.want_ack(self.owner)

    def on_timer(self, now: int) -> int | None:
        """The receiver ACK timer; returns its deadline if not due yet."""
        co = self.co
        if co.due is None:
            return None
        if now >= co.due:
            co.due = None
            if co.psn is not None and not co.now:
                co.now = True
                self.ctx.counters["ack_timer"] += 1
                self.ctx.want_ack(self.owner)
            return None
        return co.due

    def discard(self) -> None:
        """The PDC closed: the coalesced and owed ACKs are moot (explicit ones, e.g. the
        close ACK, still go)."""
        self.co.clear()
        self.co.owed.clear()

    def next_ack(self, now: int, src: AckSource) -> Frame | None:
        """The next ACK this PDC wants to send (explicit ones first)."""
        co = self.co
        if self.explicit:
            psn, ses, data, ev, flags, probe, sack_base = self.explicit.popleft()
            frame = build_ack(self.ctx, src, now, psn, flags, ev, ses, data, probe, sack_base)
            if probe is None:
                if co.psn == psn or not co.now:
                    co.clear()  # this ACK reported everything the coalesced one would have
                if co.owed:
                    self._named(psn)
            return frame
        while co.owed:
            psn, ev, flags = co.owed.popleft()
            if not src.not_done(psn):
                return build_ack(self.ctx, src, now, psn, flags, ev, None, b"")
            # not done yet or answered with its response: that ACK names it
        if co.now and co.psn is not None:
            psn = co.psn
            frame = build_ack(self.ctx, src, now, None if src.not_done(psn) else psn,
                              co.flags, co.ev, None, b"")
            co.clear()
            return frame
        co.now = False
        return None

    def _named(self, psn: int) -> None:
        """An explicit ACK named ``psn``: it is no longer owed one."""
        owed = self.co.owed
        for i, item in enumerate(owed):
            if item[0] == psn:
                del owed[i]
                return


def build_ack(ctx: PdcContext, src: AckSource, now: int, ack_psn: int | None, flags: int,
              ev: int, ses: Any, data: bytes, probe: int | None = None,
              sack_base: int | None = None) -> Frame:
    """ACK / ACK_CC / ACK_CCX naming ``ack_psn`` (None: the CACK itself); a probe answer
    when ``probe`` (the PROBE's opaque) is given, its SACK from ``sack_base``. A closed
    PDC answers with plain ACKs; an ACK carrying read data goes in the data class unless
    ``ack_data_class`` is 'control'."""
    cfg = ctx.cfg
    tracker = src.tracker
    # one tracker call per ACK: its CACK and the SACK bitmap from sack_base (default
    # CACK + 1); a second one only when the reported CACK is held below the tracker's
    tcack, bm = tracker.ack_state(sack_base)
    cack = src.held_cack(tcack)
    if ack_psn is None:
        ack_psn = cack
    if probe is None:
        off = clamp_offset(ack_psn, cack)
    else:
        off = probe
        flags |= ACK_P
    req, closed, established = src.ack_state()
    flags |= req
    nh = NEXT_HDR[type(ses)] if ses is not None else 0
    hdr: PdsAck | PdsAckCc
    if cfg.ack_type == "ack_cc" and established:
        ccx = src.ccx
        hdr = cc = PdsAckCc(PdsType.ACK_CC if ccx is None else PdsType.ACK_CCX, nh, flags,
                            off, cack, src.pdc_id, src.peer_pdcid)
        base = psn_add(cack, 1) if sack_base is None else sack_base
        soff = psn_diff(base, cack)
        if not -32768 <= soff <= 32767:
            base, soff = psn_add(cack, 1), 1
        cc.mpr = src.mpr
        cc.sack_psn_offset = soff
        if closed:
            bm = _ALL_SACKED
        elif (cack != tcack) if sack_base is None else (base != sack_base):
            bm = tracker.sack_bitmap(base)
        for p in src.rejected:
            d = psn_diff(p, base)
            if 0 <= d < 64:
                bm &= ~(1 << d)
        cc.sack_bitmap = bm
        src.receiver.fill_ack_cc(now, ack=cc)
        if ccx is not None:
            cc.ccx_state = ccx.ack_state(now)
            ctx.counters["ack_ccx_tx"] += 1
    else:
        # plain 12-byte ACK: configured, or the PDC is closed (its receiver CC is released:
        # no congestion state to report, and every PSN up to the close is acknowledged)
        hdr = PdsAck(nh, flags, off, cack, src.pdc_id, src.peer_pdcid)
    epsn = src.close_epsn
    if epsn is not None and closed and probe is None and ack_psn == src.close_psn:
        # the closing ACK of a secured PDC: the 16-byte ACK with the EPSN flag and the
        # target's Expected PSN (the reference provider's extension, ref. 2.3 / 3.2)
        hdr = PdsAck(nh, flags | _EPSN, off, cack, src.pdc_id, src.peer_pdcid, epsn)
    src.cack_held = cack != tcack and established
    ctx.counters["ack_tx"] += 1
    if data and cfg.ack_data_class == "data":
        # read data is bulk payload: it travels (and may be trimmed) in the data class
        ctx.counters["ack_data_tx"] += 1
        return Frame(pds=hdr, ses=ses, payload=data, src_ip=ctx.local_ip,
                     dst_ip=src.peer_ip, ev=ev, dscp=cfg.dscp_data, tss=tss_marker(src.sdi))
    return Frame(pds=hdr, ses=ses, payload=data, src_ip=ctx.local_ip, dst_ip=src.peer_ip,
                 ev=ev, dscp=cfg.dscp_control, tss=tss_marker(src.sdi))


#: the Python form of what the target core (``uet.native._target_core``) replaces here:
#: the reference its tests hold it to, and what it calls for every ACK it does not build
REFERENCE = {"build_ack": build_ack}
#: the same for AckScheduler (its ``next_ack`` without explicit ACKs queued)
SCHEDULER_REFERENCE = {"next_ack": AckScheduler.next_ack}

__all__ = [
    "ACK_M",
    "ACK_P",
    "ACK_RETX",
    "GUARANTEED_OPCODES",
    "NEXT_HDR",
    "REQUEST_NEXT_HDRS",
    "REQ_CLEAR",
    "REQ_CLOSE",
    "REFERENCE",
    "SCHEDULER_REFERENCE",
    "AckCoalescer",
    "AckScheduler",
    "AckSource",
    "build_ack",
    "clamp_offset",
    "default_response",
]
