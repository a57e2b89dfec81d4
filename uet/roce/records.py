"""Plain records of a RoCEv2 frame: BTH, RETH, AETH, ImmDt, and the whole frame.

The codec (:mod:`uet.roce.codec`) turns a :class:`RoceFrame` into bytes and back; the scapy
layers (:mod:`uet.roce.layers`) are the reference both are tested against. PSNs are 24-bit
and compared with serial arithmetic (:func:`psn_diff`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from uet.roce.constants import DEFAULT_PKEY, PSN_HALF, PSN_MASK, ROCE_UDP_PORT


def psn_add(psn: int, n: int) -> int:
    """``psn + n`` in the 24-bit PSN space."""
    return (psn + n) & PSN_MASK


def psn_diff(a: int, b: int) -> int:
    """Signed serial distance ``a - b`` in [-2**23, 2**23) (a after b: positive)."""
    return ((a - b + PSN_HALF) & PSN_MASK) - PSN_HALF


@dataclass(slots=True)
class Bth:
    """Base transport header (12 bytes). ``resv8a`` is the 6 reserved bits after FECN and
    BECN; ``padcount`` is set by the encoder from the payload length."""

    opcode: int
    dqpn: int = 0
    psn: int = 0
    ackreq: bool = False
    se: bool = False
    migreq: bool = False
    padcount: int = 0
    tver: int = 0
    pkey: int = DEFAULT_PKEY
    fecn: bool = False
    becn: bool = False
    resv6: int = 0
    resv7: int = 0


@dataclass(slots=True)
class Reth:
    """RDMA extended transport header: where a WRITE (or READ) goes."""

    va: int = 0
    rkey: int = 0
    dma_len: int = 0


@dataclass(slots=True)
class Aeth:
    """ACK extended transport header: syndrome (ACK / RNR NAK / NAK and its 5-bit value)
    and the responder's message sequence number."""

    syndrome: int = 0
    msn: int = 0


@dataclass(slots=True)
class RoceFrame:
    """A whole RoCEv2 frame: Ethernet / IPv4|IPv6 / UDP 4791 / BTH / [RETH] / [ImmDt] /
    [AETH] / payload / pad / ICRC.

    ``sport`` is the UDP source port (fixed per QP: the ECMP entropy). ``udp_checksum``:
    IPv4 frames carry 0 unless it is set; IPv6 frames always carry one (and decode with
    it True). ``icrc``: None on encode
    means "compute it"; a decoded frame holds the ICRC read from the wire and ``icrc_ok``
    whether it matches (neither takes part in ``==``). ``cnp_pad`` holds the 16 reserved
    bytes of a CNP.
    """

    bth: Bth
    reth: Reth | None = None
    aeth: Aeth | None = None
    imm: int | None = None
    payload: bytes = b""
    src_mac: str = "02:00:00:00:00:01"
    dst_mac: str = "02:00:00:00:00:02"
    src_ip: str = "10.0.0.1"
    dst_ip: str = "10.0.0.2"
    sport: int = 0xC000
    dport: int = ROCE_UDP_PORT
    dscp: int = 26
    ecn: int = 2
    ttl: int = 64
    ip_id: int = 0
    udp_checksum: bool = False
    cnp_pad: bytes = field(default=bytes(16))
    icrc: int | None = field(default=None, compare=False)
    icrc_ok: bool = field(default=True, compare=False)
