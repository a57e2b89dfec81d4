"""Header-chaining rules shared by the fast codec and the scapy layers.

One table says which SES header may follow which PDS type, which request opcodes carry an
extension header, and which response opcodes fit which next-header value, so that both
decoders accept and reject exactly the same frames (see ``docs/wire-format.md``).
"""

from __future__ import annotations

from uet.wire.constants import (
    ATOMIC_EXT_OPCODES,
    CAS_ATOMIC_OPCODES,
    RENDEZVOUS_OPCODES,
    AckFlag,
    CtlType,
    NextHeader,
    PdsType,
    RspOpcode,
)

NH_NONE = int(NextHeader.NONE)
NH_SMALL = int(NextHeader.REQ_SMALL)
NH_MEDIUM = int(NextHeader.REQ_MEDIUM)
NH_STD = int(NextHeader.REQ_STD)
NH_RSP = int(NextHeader.RSP)
NH_RSP_DATA = int(NextHeader.RSP_DATA)
NH_RSP_DATA_SMALL = int(NextHeader.RSP_DATA_SMALL)

_REQ_NH = frozenset({NH_SMALL, NH_MEDIUM, NH_STD})
_RSP_NH = frozenset({NH_RSP, NH_RSP_DATA, NH_RSP_DATA_SMALL})

#: Next-header values accepted after each PDS type (CP has ``ctl_type`` there instead).
#: Requests may carry read-response data (ref. 4.7); ACKs carry responses or nothing;
#: NACKs may carry any SES header (ref. 2.6, decoders honour next_hdr).
ALLOWED_NEXT_HDR: dict[int, frozenset[int]] = {
    int(PdsType.RUD_REQ): _REQ_NH | {NH_RSP_DATA, NH_RSP_DATA_SMALL},
    int(PdsType.ROD_REQ): _REQ_NH | {NH_RSP_DATA, NH_RSP_DATA_SMALL},
    int(PdsType.RUD_CC_REQ): _REQ_NH | {NH_RSP_DATA, NH_RSP_DATA_SMALL},
    int(PdsType.ROD_CC_REQ): _REQ_NH | {NH_RSP_DATA, NH_RSP_DATA_SMALL},
    int(PdsType.RUDI_REQ): _REQ_NH,
    int(PdsType.RUDI_RESP): _RSP_NH | {NH_NONE},
    int(PdsType.UUD_REQ): _REQ_NH,
    int(PdsType.ACK): _RSP_NH | {NH_NONE},
    int(PdsType.ACK_CC): _RSP_NH | {NH_NONE},
    int(PdsType.ACK_CCX): _RSP_NH | {NH_NONE},
    int(PdsType.NACK): _REQ_NH | _RSP_NH | {NH_NONE},
    int(PdsType.NACK_CCX): _REQ_NH | _RSP_NH | {NH_NONE},
}

#: Every (type, next_hdr) pair a decoder accepts, for one set lookup on the hot path.
ALLOWED_PAIRS: frozenset[tuple[int, int]] = frozenset(
    (t, nh) for t, nhs in ALLOWED_NEXT_HDR.items() for nh in nhs
)

#: Control packet types this implementation knows (ref. 2.7, NEGOTIATION included).
KNOWN_CTL_TYPES = frozenset(int(c) for c in CtlType)

#: Response opcodes allowed for each response next-header value (ref. 4.5 / 9.1).
RSP_OPCODES: dict[int, frozenset[int]] = {
    NH_RSP: frozenset({int(RspOpcode.DEFAULT_RESPONSE), int(RspOpcode.RESPONSE),
                       int(RspOpcode.NO_RESPONSE)}),
    NH_RSP_DATA: frozenset({int(RspOpcode.RESPONSE_W_DATA)}),
    NH_RSP_DATA_SMALL: frozenset({int(RspOpcode.RESPONSE_W_DATA)}),
}

ATOMIC_OPCODES_INT = frozenset(int(o) for o in ATOMIC_EXT_OPCODES)
CAS_OPCODES_INT = frozenset(int(o) for o in CAS_ATOMIC_OPCODES)
RENDEZVOUS_OPCODES_INT = frozenset(int(o) for o in RENDEZVOUS_OPCODES)

#: Extension kinds.
EXT_NONE, EXT_ATOMIC, EXT_CAS, EXT_RENDEZVOUS = 0, 1, 2, 3
EXT_LEN = {EXT_ATOMIC: 4, EXT_CAS: 36, EXT_RENDEZVOUS: 24}

ACK_EPSN = int(AckFlag.EPSN)
ACK_P = int(AckFlag.P)


def ext_kind(next_hdr: int, opcode: int) -> int:
    """Which extension (``EXT_*``) follows a request header with this opcode.

    Atomic opcodes take the atomic extension (its 36-byte compare-and-swap form is chosen
    by the atomic opcode, see :func:`atomic_ext_kind`) after any request header; rendezvous
    opcodes take the rendezvous extension after the standard header only (ref. 4.4).
    """
    if opcode in ATOMIC_OPCODES_INT:
        return EXT_ATOMIC
    if opcode in RENDEZVOUS_OPCODES_INT and next_hdr == NH_STD:
        return EXT_RENDEZVOUS
    return EXT_NONE


def atomic_ext_kind(atomic_opcode: int) -> int:
    """``EXT_CAS`` for the compare-and-swap atomic opcodes, else ``EXT_ATOMIC``."""
    return EXT_CAS if atomic_opcode in CAS_OPCODES_INT else EXT_ATOMIC


def pds_header_len(pds_type: int, flags: int) -> int | None:
    """Length of a PDS header of this type (``None`` for unknown types)."""
    if pds_type == 7:
        return 16 if flags & ACK_EPSN else 12
    return _PDS_LEN.get(pds_type)


_PDS_LEN = {2: 12, 3: 12, 13: 16, 14: 16, 4: 8, 5: 8, 6: 4, 8: 32, 9: 40, 10: 16,
            11: 16, 12: 32}

SES_LEN = {NH_SMALL: 20, NH_MEDIUM: 32, NH_STD: 44, NH_RSP: 12, NH_RSP_DATA: 20,
           NH_RSP_DATA_SMALL: 12}
