"""Every UET 1.0 code point the project knows, as ``IntEnum`` / ``IntFlag``.

Values come from the public sources of ``docs/references.md`` (topics 1, 2, 4, 7: the UEC
reference provider's ``uet_pkt_hdr.h``, Wireshark's ``packet-uet.c``, xdp2); where they
disagree, the choice is recorded in ``docs/wire-format.md`` (ref 9.1).
"""

from __future__ import annotations

from enum import IntEnum, IntFlag
from typing import Any, TypeVar

_E = TypeVar("_E", bound=IntEnum)


def enum_member(enum: type[_E], value: Any, what: str) -> _E:
    """``enum``'s member for a member, a number or a name (any case: ``"ROD"``, ``"rod"``);
    ValueError naming ``what`` and the allowed names otherwise (API keywords such as
    ``mode=``)."""
    if isinstance(value, str):
        try:
            return enum[value.strip().upper()]
        except KeyError:
            pass
    elif not isinstance(value, bool):
        try:
            return enum(value)
        except (ValueError, TypeError):
            pass
    names = ", ".join(m.name for m in enum)
    raise ValueError(f"{what}={value!r}: allowed {names}")

#: UDP destination port of UET over UDP (the entropy value rides in the UDP source port).
UET_UDP_PORT = 4793
#: Default IP protocol number for native-IP mode (RFC 3692 experimental; configurable).
UET_DEFAULT_IP_PROTO = 253
#: Default EV of control packets (reference provider ``UET_DEFAULT_ENTROPY``).
UET_DEFAULT_CONTROL_EV = 0x4242
#: Default DSCP of requests / of ACK, NACK and control packets (reference provider).
DSCP_DEFAULT_DATA = 0
DSCP_DEFAULT_CONTROL = 46

#: Sizes in bytes of every fixed header.
ENTROPY_HDR_LEN = 4
TSS_HDR_LEN = 12
TSS_HDR_SSI_LEN = 16


class PdsType(IntEnum):
    """PDS header type: the top 5 bits of the first 16-bit word (ref. 2.1)."""

    RESERVED = 0
    TSS = 1
    RUD_REQ = 2
    ROD_REQ = 3
    RUDI_REQ = 4
    RUDI_RESP = 5
    UUD_REQ = 6
    ACK = 7
    ACK_CC = 8
    ACK_CCX = 9
    NACK = 10
    CP = 11
    NACK_CCX = 12
    RUD_CC_REQ = 13
    ROD_CC_REQ = 14


class NextHeader(IntEnum):
    """What follows the PDS header (ref. 2.1)."""

    NONE = 0
    REQ_SMALL = 1
    REQ_MEDIUM = 2
    REQ_STD = 3
    RSP = 4
    RSP_DATA = 5
    RSP_DATA_SMALL = 6


#: SES header length for each next-header value.
SES_HDR_LEN = {
    NextHeader.REQ_SMALL: 20,
    NextHeader.REQ_MEDIUM: 32,
    NextHeader.REQ_STD: 44,
    NextHeader.RSP: 12,
    NextHeader.RSP_DATA: 20,
    NextHeader.RSP_DATA_SMALL: 12,
}

#: PDS header length for each type (ACK with the RP-only EPSN flag is 16).
PDS_HDR_LEN = {
    PdsType.RUD_REQ: 12,
    PdsType.ROD_REQ: 12,
    PdsType.RUD_CC_REQ: 16,
    PdsType.ROD_CC_REQ: 16,
    PdsType.RUDI_REQ: 8,
    PdsType.RUDI_RESP: 8,
    PdsType.UUD_REQ: 4,
    PdsType.ACK: 12,
    PdsType.ACK_CC: 32,
    PdsType.ACK_CCX: 40,
    PdsType.NACK: 16,
    PdsType.NACK_CCX: 32,
    PdsType.CP: 16,
}


class ReqFlag(IntFlag):
    """Flags of RUD/ROD (and CC) requests (7-bit field)."""

    RETX = 0x10
    AR = 0x08
    SYN = 0x04


class AckFlag(IntFlag):
    """Flags of ACK / ACK_CC / ACK_CCX. ``REQ_*`` is a 2-bit field (mask 0x06)."""

    EPSN = 0x40  # reference-provider-only closing ACK with expected PSN (optional)
    M = 0x20
    RETX = 0x10
    P = 0x08
    REQ_MASK = 0x06


class AckReq(IntEnum):
    """Value of the 2-bit REQ field of ACK flags (bits 0x06)."""

    NONE = 0
    CLEAR = 1
    CLOSE = 2
    RESERVED = 3


class NackFlag(IntFlag):
    M = 0x20
    RETX = 0x10
    NT = 0x08  # 1 = RUDI NACK (nack_psn holds a pkt_id)


class CpFlag(IntFlag):
    ISROD = 0x20
    RETX = 0x10
    AR = 0x08
    SYN = 0x04


class RudiFlag(IntFlag):
    M = 0x20
    RETX = 0x10


class CtlType(IntEnum):
    """Control packet types (carried in the next-header position of a CP)."""

    NOOP = 0
    ACK_REQ = 1
    CLEAR = 2
    CLEAR_REQ = 3
    CLOSE = 4
    CLOSE_REQ = 5
    PROBE = 6
    CREDIT = 7
    CREDIT_REQ = 8
    NEGOTIATION = 9


class NackCode(IntEnum):
    """NACK codes (ref. 2.6)."""

    NONE = 0x00
    TRIMMED = 0x01
    TRIMMED_LASTHOP = 0x02
    TRIMMED_ACK = 0x03
    NO_PDC_AVAIL = 0x04
    NO_CCC_AVAIL = 0x05
    NO_BITMAP = 0x06
    NO_PKT_BUFFER = 0x07
    NO_GTD_DEL_AVAIL = 0x08
    NO_SES_MSG_AVAIL = 0x09
    NO_RESOURCE = 0x0A
    PSN_OOR_WINDOW = 0x0B
    RESERVED_0C = 0x0C
    ROD_OOO = 0x0D
    INV_DPDCID = 0x0E
    PDC_HDR_MISMATCH = 0x0F
    CLOSING = 0x10
    CLOSING_IN_ERR = 0x11
    PKT_NOT_RCVD = 0x12
    GTD_RESP_UNAVAIL = 0x13
    ACK_WITH_DATA = 0x14
    INVALID_SYN = 0x15
    PDC_MODE_MISMATCH = 0x16
    NEW_START_PSN = 0x17
    RCVD_SES_PROCG = 0x18
    UNEXP_EVENT = 0x19
    RCVR_INFER_LOSS = 0x1A
    EXP_NACK_NORMAL = 0xFD
    EXP_NACK_ERR = 0xFE
    EXP_NACK_FATAL = 0xFF


class NackAction(IntEnum):
    """What an initiator does on receiving a NACK code (ref. 2.6, "RP action")."""

    RETRANSMIT = 0
    CLOSE_PDC = 1
    NEW_START_PSN = 2
    IGNORE = 3


_RETRANSMIT_CODES = {
    NackCode.TRIMMED, NackCode.TRIMMED_LASTHOP, NackCode.TRIMMED_ACK, NackCode.NO_PDC_AVAIL,
    NackCode.NO_CCC_AVAIL, NackCode.NO_BITMAP, NackCode.NO_PKT_BUFFER,
    NackCode.NO_GTD_DEL_AVAIL, NackCode.NO_SES_MSG_AVAIL, NackCode.NO_RESOURCE,
    NackCode.PSN_OOR_WINDOW, NackCode.ROD_OOO, NackCode.PKT_NOT_RCVD, NackCode.ACK_WITH_DATA,
    NackCode.RCVR_INFER_LOSS, NackCode.EXP_NACK_NORMAL, NackCode.EXP_NACK_ERR,
}
_CLOSE_CODES = {
    NackCode.INV_DPDCID, NackCode.PDC_HDR_MISMATCH, NackCode.CLOSING, NackCode.CLOSING_IN_ERR,
    NackCode.GTD_RESP_UNAVAIL, NackCode.INVALID_SYN, NackCode.PDC_MODE_MISMATCH,
    NackCode.UNEXP_EVENT, NackCode.EXP_NACK_FATAL,
}


def nack_action(code: int) -> NackAction:
    """The initiator's reaction to a NACK code; unknown or reserved codes are ignored."""
    if code in _RETRANSMIT_CODES:
        return NackAction.RETRANSMIT
    if code in _CLOSE_CODES:
        return NackAction.CLOSE_PDC
    if code == NackCode.NEW_START_PSN:
        return NackAction.NEW_START_PSN
    return NackAction.IGNORE


class CcType(IntEnum):
    """``cc_type`` nibble of ACK_CC: which congestion state the ACK carries."""

    NSCC = 0
    CREDIT = 1


class SesOpcode(IntEnum):
    """SES request opcodes (6 bits, ref. 4.6)."""

    NO_OP = 0x00
    WRITE = 0x01
    READ = 0x02
    ATOMIC = 0x03
    FETCHING_ATOMIC = 0x04
    SEND = 0x05
    RENDEZVOUS_SEND = 0x06
    DATAGRAM_SEND = 0x07
    DEFERRABLE_SEND = 0x08
    TAGGED_SEND = 0x09
    RENDEZVOUS_TSEND = 0x0A
    DEFERRABLE_TSEND = 0x0B
    DEFERRABLE_RTR = 0x0C
    TSEND_ATOMIC = 0x0D
    TSEND_FETCH_ATOMIC = 0x0E
    MSG_ERROR = 0x0F


#: Request opcodes followed by an atomic (or compare-and-swap) extension header.
ATOMIC_EXT_OPCODES = frozenset({
    SesOpcode.ATOMIC, SesOpcode.FETCHING_ATOMIC, SesOpcode.TSEND_ATOMIC,
    SesOpcode.TSEND_FETCH_ATOMIC,
})
#: Request opcodes followed by the 24-byte rendezvous extension (standard header only).
RENDEZVOUS_OPCODES = frozenset({SesOpcode.RENDEZVOUS_SEND, SesOpcode.RENDEZVOUS_TSEND})


class SesFlag(IntFlag):
    """Byte 1 flags of SES request headers."""

    DC = 0x20
    IE = 0x10
    REL = 0x08
    HD = 0x04
    EOM = 0x02
    SOM = 0x01


class RspOpcode(IntEnum):
    DEFAULT_RESPONSE = 0
    RESPONSE = 1
    RESPONSE_W_DATA = 2
    NO_RESPONSE = 3


class RspList(IntEnum):
    EXPECTED = 0
    OVERFLOW = 1
    VENDOR_2 = 2
    VENDOR_3 = 3


class ReturnCode(IntEnum):
    """SES return codes (6 bits, ref. 4.6)."""

    NULL = 0x00
    OK = 0x01
    BAD_GENERATION = 0x02
    DISABLED = 0x03
    DISABLED_GEN = 0x04
    NO_MATCH = 0x05
    UNSUPPORTED_OP = 0x06
    UNSUPPORTED_SIZE = 0x07
    AT_INVALID = 0x08
    AT_PERM = 0x09
    AT_ATS_ERROR = 0x0A
    AT_NO_TRANS = 0x0B
    AT_OUT_OF_RANGE = 0x0C
    HOST_POISONED = 0x0D
    HOST_UNSUCCESS_CMPL = 0x0E
    AMO_UNSUPPORTED_OP = 0x0F
    AMO_UNSUPPORTED_DT = 0x10
    AMO_UNSUPPORTED_SIZE = 0x11
    AMO_UNALIGNED = 0x12
    AMO_FP_NAN = 0x13
    AMO_FP_UNDERFLOW = 0x14
    AMO_FP_OVERFLOW = 0x15
    AMO_FP_INEXACT = 0x16
    PERM_VIOLATION = 0x17
    OP_VIOLATION = 0x18
    BAD_INDEX = 0x19
    BAD_PID = 0x1A
    BAD_JOB_ID = 0x1B
    BAD_MKEY = 0x1C
    BAD_ADDR = 0x1D
    CANCELLED = 0x1E
    UNDELIVERABLE = 0x1F
    UNCOR = 0x20
    UNCOR_TRNSNT = 0x21
    TOO_LONG = 0x22
    INITIATOR_ERR = 0x23
    DROPPED = 0x24


class AtomicOpcode(IntEnum):
    MIN = 0x00
    MAX = 0x01
    SUM = 0x02
    DIFF = 0x03
    PROD = 0x04
    LOR = 0x05
    LAND = 0x06
    BOR = 0x07
    BAND = 0x08
    LXOR = 0x09
    BXOR = 0x0A
    READ = 0x0B
    WRITE = 0x0C
    CSWAP = 0x0D
    CSWAP_NE = 0x0E
    CSWAP_LE = 0x0F
    CSWAP_LT = 0x10
    CSWAP_GE = 0x11
    CSWAP_GT = 0x12
    MSWAP = 0x13
    INVAL = 0x14


#: Atomic opcodes whose extension is the 36-byte compare-and-swap form.
CAS_ATOMIC_OPCODES = frozenset(range(AtomicOpcode.CSWAP, AtomicOpcode.CSWAP_GT + 1))


class AtomicDatatype(IntEnum):
    INT8 = 0x00
    UINT8 = 0x01
    INT16 = 0x02
    UINT16 = 0x03
    INT32 = 0x04
    UINT32 = 0x05
    INT64 = 0x06
    UINT64 = 0x07
    INT128 = 0x08
    UINT128 = 0x09
    FLOAT = 0x0A
    DOUBLE = 0x0B
    FLOAT_COMPLEX = 0x0C
    DOUBLE_COMPLEX = 0x0D
    LONG_DOUBLE = 0x0E
    LONG_DOUBLE_COMPLEX = 0x0F
    BF16 = 0x10
    FP16 = 0x11


class AtomicSemCtl(IntFlag):
    CACHEABLE = 0x01
    CPU_COHERENT = 0x02


class DeliveryMode(IntEnum):
    """PDS delivery modes; the value is the request's PDS type."""

    RUD = PdsType.RUD_REQ
    ROD = PdsType.ROD_REQ
    RUDI = PdsType.RUDI_REQ
    UUD = PdsType.UUD_REQ


class FepCap(IntFlag):
    """``fep_cap`` bits of a UET address (ref. 4.8): the profiles an end point supports."""

    AI_BASE = 0x01
    AI_FULL = 0x02
    HPC = 0x04
    REORDER = 0x40
    OPT_NON_MATCHING = 0x80
