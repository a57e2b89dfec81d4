"""RoCEv2 code points: UDP port, BTH opcodes, AETH syndromes, NAK codes, IB timer tables.

Sources: InfiniBand Architecture Specification vol. 1 (IBTA), chapter 9 (transport header
formats: BTH, RETH, AETH, ImmDt; the AETH syndrome and the RNR NAK timer encoding) and its
annex A17 (RoCEv2: the BTH carried in UDP, destination port 4791, the ICRC over masked
headers); the CNP opcode (0x81) is the one RoCEv2 congestion control uses (annex A17.9),
as in ``scapy.contrib.roce``.
"""

from __future__ import annotations

from enum import IntEnum

#: IANA-assigned UDP destination port of RoCEv2
ROCE_UDP_PORT = 4791
#: BTH + ICRC: the smallest RoCEv2 UDP payload
BTH_LEN = 12
RETH_LEN = 16
AETH_LEN = 4
IMM_LEN = 4
ICRC_LEN = 4
#: a CNP carries 16 reserved bytes after its BTH
CNP_PAD_LEN = 16
#: the default partition key (full membership of the default partition)
DEFAULT_PKEY = 0xFFFF
#: 24-bit PSN space
PSN_MASK = 0xFFFFFF
PSN_HALF = 1 << 23
QPN_MASK = 0xFFFFFF
#: the AETH MSN is 24 bits too
MSN_MASK = 0xFFFFFF


class Opcode(IntEnum):
    """BTH opcodes of the reliable connected (RC) transport, and the RoCEv2 CNP."""

    SEND_FIRST = 0x00
    SEND_MIDDLE = 0x01
    SEND_LAST = 0x02
    SEND_LAST_IMM = 0x03
    SEND_ONLY = 0x04
    SEND_ONLY_IMM = 0x05
    WRITE_FIRST = 0x06
    WRITE_MIDDLE = 0x07
    WRITE_LAST = 0x08
    WRITE_LAST_IMM = 0x09
    WRITE_ONLY = 0x0A
    WRITE_ONLY_IMM = 0x0B
    READ_REQUEST = 0x0C
    READ_RESPONSE_FIRST = 0x0D
    READ_RESPONSE_MIDDLE = 0x0E
    READ_RESPONSE_LAST = 0x0F
    READ_RESPONSE_ONLY = 0x10
    ACKNOWLEDGE = 0x11
    CNP = 0x81


#: opcodes followed by a RETH
RETH_OPCODES = frozenset({Opcode.WRITE_FIRST, Opcode.WRITE_ONLY, Opcode.WRITE_ONLY_IMM,
                          Opcode.READ_REQUEST})
#: opcodes followed by an ImmDt (after the RETH if both)
IMM_OPCODES = frozenset({Opcode.SEND_LAST_IMM, Opcode.SEND_ONLY_IMM, Opcode.WRITE_LAST_IMM,
                         Opcode.WRITE_ONLY_IMM})
#: opcodes followed by an AETH
AETH_OPCODES = frozenset({Opcode.ACKNOWLEDGE, Opcode.READ_RESPONSE_FIRST,
                          Opcode.READ_RESPONSE_LAST, Opcode.READ_RESPONSE_ONLY})
#: opcodes that carry a payload (requests with data, read responses)
PAYLOAD_OPCODES = frozenset({
    Opcode.SEND_FIRST, Opcode.SEND_MIDDLE, Opcode.SEND_LAST, Opcode.SEND_LAST_IMM,
    Opcode.SEND_ONLY, Opcode.SEND_ONLY_IMM, Opcode.WRITE_FIRST, Opcode.WRITE_MIDDLE,
    Opcode.WRITE_LAST, Opcode.WRITE_LAST_IMM, Opcode.WRITE_ONLY, Opcode.WRITE_ONLY_IMM,
    Opcode.READ_RESPONSE_FIRST, Opcode.READ_RESPONSE_MIDDLE, Opcode.READ_RESPONSE_LAST,
    Opcode.READ_RESPONSE_ONLY})
#: every opcode the codec knows
KNOWN_OPCODES = frozenset(int(o) for o in Opcode)
#: request opcodes of a message: first / middle / last / only, per kind
SEND_OPCODES = frozenset({Opcode.SEND_FIRST, Opcode.SEND_MIDDLE, Opcode.SEND_LAST,
                          Opcode.SEND_LAST_IMM, Opcode.SEND_ONLY, Opcode.SEND_ONLY_IMM})
WRITE_OPCODES = frozenset({Opcode.WRITE_FIRST, Opcode.WRITE_MIDDLE, Opcode.WRITE_LAST,
                           Opcode.WRITE_LAST_IMM, Opcode.WRITE_ONLY, Opcode.WRITE_ONLY_IMM})
FIRST_OPCODES = frozenset({Opcode.SEND_FIRST, Opcode.WRITE_FIRST})
MIDDLE_OPCODES = frozenset({Opcode.SEND_MIDDLE, Opcode.WRITE_MIDDLE})
LAST_OPCODES = frozenset({Opcode.SEND_LAST, Opcode.SEND_LAST_IMM, Opcode.WRITE_LAST,
                          Opcode.WRITE_LAST_IMM})
ONLY_OPCODES = frozenset({Opcode.SEND_ONLY, Opcode.SEND_ONLY_IMM, Opcode.WRITE_ONLY,
                          Opcode.WRITE_ONLY_IMM})


class AethType(IntEnum):
    """Bits 6..5 of the AETH syndrome."""

    ACK = 0
    RNR_NAK = 1
    NAK = 3


class NakCode(IntEnum):
    """Bits 4..0 of a NAK syndrome (IBTA table 44)."""

    PSN_SEQUENCE_ERROR = 0
    INVALID_REQUEST = 1
    REMOTE_ACCESS_ERROR = 2
    REMOTE_OPERATIONAL_ERROR = 3
    INVALID_RD_REQUEST = 4


#: ACK syndrome credit field 0x1F: "invalid credit count", i.e. no end-to-end credits
#: (what a responder without receive-queue flow control advertises)
CREDIT_INVALID = 0x1F


def syndrome(kind: AethType, value: int) -> int:
    """The AETH syndrome byte for ``kind`` with its 5-bit ``value``."""
    return (int(kind) & 3) << 5 | (value & 0x1F)


def syndrome_kind(syn: int) -> int:
    """``AethType`` value of a syndrome byte (2 is reserved)."""
    return syn >> 5 & 3


#: RNR NAK timer field -> microseconds (IBTA table 45, "RNR NAK timer field encodings"):
#: 0 is the longest (655.36 ms), 1..31 grow from 0.01 ms to 491.52 ms.
RNR_TIMER_US: tuple[float, ...] = (
    655360.0, 10.0, 20.0, 30.0, 40.0, 60.0, 80.0, 120.0, 160.0, 240.0, 320.0, 480.0,
    640.0, 960.0, 1280.0, 1920.0, 2560.0, 3840.0, 5120.0, 7680.0, 10240.0, 15360.0,
    20480.0, 30720.0, 40960.0, 61440.0, 81920.0, 122880.0, 163840.0, 245760.0, 327680.0,
    491520.0)


def local_ack_timeout_ps(exponent: int) -> int | None:
    """The QP attribute "local ACK timeout" 4.096 us x 2**exponent in ps (0: infinite)."""
    if not 0 <= exponent <= 31:
        raise ValueError(f"local ACK timeout exponent {exponent}: allowed 0..31")
    if exponent == 0:
        return None
    return 4_096_000 << exponent
