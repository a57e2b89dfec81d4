"""ACK building and coalescing state of a target PDC (ref. 2.3, 2.4, 3.6).

An ACK goes out at once for a packet with AR, SYN, ECN-CE or RETX set, for a packet whose
SES response must be delivered (each such response rides in its own ACK, ``ack_psn`` = that
packet), for duplicates and ACK requests, and when the target needs a clear or a close. Other
packets are coalesced: one ACK per ``ack_every_bytes`` accepted payload bytes, and at the
latest ``ack_timer_ps`` after the first unacknowledged packet arrived (the receiver ACK timer,
so a flow that ends with reordered packets is acknowledged without waiting for an RTO).
"""

from __future__ import annotations

from collections import deque

from uet.wire.constants import AckFlag, NextHeader, PdsType, ReturnCode, RspOpcode
from uet.wire.records import (
    PdsAck,
    PdsAckCc,
    SesMedium,
    SesResponse,
    SesResponseData,
    SesResponseDataSmall,
    SesSmall,
    SesStandard,
    psn_diff,
)

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


def default_response(ses: object | None) -> SesResponse:
    """The DEFAULT_RESPONSE (rc NULL) answering a duplicate shifted out of the window."""
    return SesResponse(opcode=RspOpcode.DEFAULT_RESPONSE, return_code=ReturnCode.NULL,
                       message_id=getattr(ses, "message_id", 0) or 0,
                       job_id=getattr(ses, "job_id", 0) or 0)


def make_ack_header(ack_cc: bool, flags: int, ack_psn_offset: int, cack: int, spdcid: int,
                    dpdcid: int, next_hdr: int) -> PdsAck | PdsAckCc:
    """ACK or ACK_CC header without SACK / CC state (the caller fills those)."""
    if ack_cc:
        return PdsAckCc(PdsType.ACK_CC, next_hdr, flags, ack_psn_offset, cack, spdcid, dpdcid)
    return PdsAck(next_hdr, flags, ack_psn_offset, cack, spdcid, dpdcid)


def clamp_offset(psn: int, base: int) -> int:
    """Signed 16-bit offset of ``psn`` from ``base``; 0 if it does not fit."""
    off = psn_diff(psn, base)
    return off if -32768 <= off <= 32767 else 0


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
