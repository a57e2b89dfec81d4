"""Light typed records for every UET header: what the fast codec encodes and decodes.

These records are the project's in-memory form of a packet. The PDS, SES and CMS state
machines produce and consume them; ``uet.wire.codec`` turns them into bytes and back,
producing exactly the bytes the scapy layers in ``uet.wire.layers`` produce for the same
field values.

Conventions:

* Field names follow the reference provider's ``uet_pkt_hdr.h`` (``docs/references.md``); the
  Wireshark field each maps to is listed in ``docs/wire-format.md``.
* Flags are stored raw (the 7-bit PDS ``flags`` or the 6-bit SES ``flags``) with read-only
  properties for the single bits, so that records round-trip exactly.
* Reserved bits are not stored: encoders write zero, decoders ignore them.
* Every integer field is unsigned of its wire width, except the signed 16-bit PSN offsets
  (``clear_psn_offset``, ``ack_psn_offset``, ``sack_psn_offset``), which hold Python ints in
  [-32768, 32767].
* Derived values (clear PSN, ACK PSN, start PSN, SACK base) are properties computed with
  32-bit serial arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from uet.wire.constants import (
    UET_DEFAULT_IP_PROTO,
    UET_UDP_PORT,
    AckFlag,
    AckReq,
    CpFlag,
    NackFlag,
    NextHeader,
    PdsType,
    ReqFlag,
    RudiFlag,
    SesFlag,
)

PSN_MASK = 0xFFFFFFFF


def psn_add(psn: int, delta: int) -> int:
    """``psn + delta`` modulo 2**32."""
    return (psn + delta) & PSN_MASK


def psn_diff(a: int, b: int) -> int:
    """Signed serial difference ``a - b`` of two 32-bit PSNs, in [-2**31, 2**31)."""
    d = (a - b) & PSN_MASK
    return d - 0x100000000 if d & 0x80000000 else d


# --------------------------------------------------------------------------- TSS


@dataclass(slots=True)
class TssHeader:
    """Transport security header (ref. 7.1): 12 bytes, 16 with SSI (``sp`` set)."""

    sp: bool = False
    an: int = 0  # 1 bit
    sdi: int = 0  # 24 bits
    ssi: int = 0  # 32 bits, present only when sp
    epoch: int = 0  # 16 bits
    tsc: int = 0  # 48 bits


# --------------------------------------------------------------------------- PDS


@dataclass(slots=True)
class PdsRequest:
    """RUD/ROD request (type 2/3, 12 B) and RUD_CC/ROD_CC request (type 13/14, 16 B).

    With SYN set, bytes 10-11 carry ``use_rsv_pdc`` (mask 0x8000) and ``psn_offset``
    (12 bits) instead of ``dpdcid``; the encoder chooses by the SYN flag.
    """

    type: int = PdsType.RUD_REQ
    next_hdr: int = NextHeader.REQ_STD
    flags: int = 0
    clear_psn_offset: int = 0
    psn: int = 0
    spdcid: int = 0
    dpdcid: int = 0  # SYN = 0
    use_rsv_pdc: bool = False  # SYN = 1
    psn_offset: int = 0  # SYN = 1, 12 bits
    ccc_id: int = 0  # CC types only
    credit_target: int = 0  # CC types only, 24 bits

    @property
    def syn(self) -> bool:
        return bool(self.flags & ReqFlag.SYN)

    @property
    def ar(self) -> bool:
        return bool(self.flags & ReqFlag.AR)

    @property
    def retx(self) -> bool:
        return bool(self.flags & ReqFlag.RETX)

    @property
    def clear_psn(self) -> int:
        return psn_add(self.psn, self.clear_psn_offset)

    @property
    def start_psn(self) -> int:
        """Start PSN of the PDC (meaningful only when SYN is set)."""
        return psn_add(self.psn, -self.psn_offset)


@dataclass(slots=True)
class PdsAck:
    """ACK (type 7, 12 B; 16 B with the reference provider's EPSN flag)."""

    next_hdr: int = NextHeader.NONE
    flags: int = 0
    ack_psn_offset: int = 0  # probe_opaque (unsigned) when P is set
    cack_psn: int = 0
    spdcid: int = 0
    dpdcid: int = 0
    epsn: int = 0  # only when flags & EPSN

    type = PdsType.ACK

    @property
    def ack_psn(self) -> int:
        return psn_add(self.cack_psn, self.ack_psn_offset)

    @property
    def ecn_echo(self) -> bool:
        return bool(self.flags & AckFlag.M)

    @property
    def retx(self) -> bool:
        return bool(self.flags & AckFlag.RETX)

    @property
    def probe(self) -> bool:
        return bool(self.flags & AckFlag.P)

    @property
    def req(self) -> AckReq:
        return AckReq((self.flags & AckFlag.REQ_MASK) >> 1)


@dataclass(slots=True)
class PdsAckCc:
    """ACK_CC (type 8, 32 B) and ACK_CCX (type 9, 40 B): ACK + SACK + congestion state.

    ``cc_type`` 0 (NSCC) uses service_time / restore_cwnd / rcv_cwnd_pend / rcvd_bytes /
    ooo_count; ``cc_type`` 1 (credit) uses credit / ooo_count. Other cc_type values keep the
    8 state bytes in ``cc_state_raw``. ACK_CCX adds 8 bytes of ``ccx_state``.
    """

    type: int = PdsType.ACK_CC
    next_hdr: int = NextHeader.NONE
    flags: int = 0
    ack_psn_offset: int = 0
    cack_psn: int = 0
    spdcid: int = 0
    dpdcid: int = 0
    cc_type: int = 0  # 4 bits
    cc_flags: int = 0  # 4 bits
    mpr: int = 0
    sack_psn_offset: int = 0
    sack_bitmap: int = 0  # 64 bits; bit i = PSN sack_base + i received
    service_time: int = 0  # 16 bits (NSCC)
    restore_cwnd: bool = False  # (NSCC)
    rcv_cwnd_pend: int = 0  # 7 bits (NSCC)
    rcvd_bytes: int = 0  # 24 bits (NSCC)
    credit: int = 0  # 24 bits (credit)
    ooo_count: int = 0  # 16 bits (both)
    cc_state_raw: bytes = b""  # 8 bytes, only for cc_type not in (0, 1)
    ccx_state: bytes = b""  # 8 bytes, ACK_CCX only

    @property
    def ack_psn(self) -> int:
        return psn_add(self.cack_psn, self.ack_psn_offset)

    @property
    def sack_base(self) -> int:
        return psn_add(self.cack_psn, self.sack_psn_offset)

    @property
    def ecn_echo(self) -> bool:
        return bool(self.flags & AckFlag.M)

    @property
    def retx(self) -> bool:
        return bool(self.flags & AckFlag.RETX)

    @property
    def probe(self) -> bool:
        return bool(self.flags & AckFlag.P)

    @property
    def req(self) -> AckReq:
        return AckReq((self.flags & AckFlag.REQ_MASK) >> 1)

    def sacked_psns(self) -> list[int]:
        """PSNs the bitmap reports received, in increasing order."""
        base, bm = self.sack_base, self.sack_bitmap
        return [psn_add(base, i) for i in range(64) if bm >> i & 1]


@dataclass(slots=True)
class PdsNack:
    """NACK (type 10, 16 B) and NACK_CCX (type 12, 32 B)."""

    type: int = PdsType.NACK
    next_hdr: int = NextHeader.NONE
    flags: int = 0
    nack_code: int = 0
    vendor_code: int = 0
    nack_psn: int = 0  # the RUDI pkt_id when NT is set
    spdcid: int = 0
    dpdcid: int = 0
    payload: int = 0  # 32 bits, code-specific
    nccx_type: int = 0  # NACK_CCX: 4 bits
    nccx_state1: int = 0  # NACK_CCX: 60 bits
    nccx_state2: int = 0  # NACK_CCX: 64 bits

    @property
    def nt(self) -> bool:
        return bool(self.flags & NackFlag.NT)

    @property
    def ecn_echo(self) -> bool:
        return bool(self.flags & NackFlag.M)

    @property
    def retx(self) -> bool:
        return bool(self.flags & NackFlag.RETX)


@dataclass(slots=True)
class PdsControl:
    """Control packet (type 11, 16 B); ``ctl_type`` sits in the next-header position."""

    ctl_type: int = 0
    flags: int = 0
    probe_opaque: int = 0
    psn: int = 0
    spdcid: int = 0
    dpdcid: int = 0  # SYN = 0
    use_rsv_pdc: bool = False  # SYN = 1
    psn_offset: int = 0  # SYN = 1
    payload: int = 0

    type = PdsType.CP
    next_hdr = NextHeader.NONE  # a CP carries no SES header

    @property
    def syn(self) -> bool:
        return bool(self.flags & CpFlag.SYN)

    @property
    def ar(self) -> bool:
        return bool(self.flags & CpFlag.AR)

    @property
    def retx(self) -> bool:
        return bool(self.flags & CpFlag.RETX)

    @property
    def is_rod(self) -> bool:
        return bool(self.flags & CpFlag.ISROD)

    @property
    def start_psn(self) -> int:
        return psn_add(self.psn, -self.psn_offset)


@dataclass(slots=True)
class PdsRudi:
    """RUDI request (type 4) or response (type 5), 8 B."""

    type: int = PdsType.RUDI_REQ
    next_hdr: int = NextHeader.REQ_STD
    flags: int = 0
    pkt_id: int = 0

    @property
    def retx(self) -> bool:
        return bool(self.flags & RudiFlag.RETX)

    @property
    def ecn_echo(self) -> bool:
        return bool(self.flags & RudiFlag.M)


@dataclass(slots=True)
class PdsUud:
    """UUD request (type 6), 4 B. Flags are reserved; receivers ignore them."""

    next_hdr: int = NextHeader.REQ_STD
    flags: int = 0

    type = PdsType.UUD_REQ


PdsHeader = PdsRequest | PdsAck | PdsAckCc | PdsNack | PdsControl | PdsRudi | PdsUud


# --------------------------------------------------------------------------- SES requests


class _SesReqFlags:
    __slots__ = ()
    flags: int

    @property
    def som(self) -> bool:
        return bool(self.flags & SesFlag.SOM)

    @property
    def eom(self) -> bool:
        return bool(self.flags & SesFlag.EOM)

    @property
    def hd(self) -> bool:
        return bool(self.flags & SesFlag.HD)

    @property
    def rel(self) -> bool:
        return bool(self.flags & SesFlag.REL)

    @property
    def ie(self) -> bool:
        return bool(self.flags & SesFlag.IE)

    @property
    def dc(self) -> bool:
        return bool(self.flags & SesFlag.DC)


@dataclass(slots=True)
class SesStandard(_SesReqFlags):
    """Standard request header (next_hdr 3), 44 B.

    Bytes 32-39 are ``header_data`` when SOM is set, and ``payload_length`` (14 bits) +
    ``message_offset`` (32 bits) when it is not; the encoder chooses by SOM.
    DEFERRABLE_SEND/TSEND keep the restart token in ``buffer_offset``; DEFERRABLE_RTR keeps
    it in ``memory_key`` (see the restart-token properties).
    """

    opcode: int = 0
    version: int = 0
    flags: int = 0  # 6 bits: DC IE REL HD EOM SOM
    message_id: int = 0
    ri_generation: int = 0
    job_id: int = 0  # 24 bits
    pid_on_fep: int = 0  # 12 bits
    resource_index: int = 0  # 12 bits
    buffer_offset: int = 0  # 64 bits
    initiator: int = 0  # 32 bits
    memory_key: int = 0  # 64 bits; the match bits for tagged operations
    header_data: int = 0  # 64 bits, SOM = 1
    payload_length: int = 0  # 14 bits, SOM = 0
    message_offset: int = 0  # 32 bits, SOM = 0
    request_length: int = 0  # 32 bits

    @property
    def match_bits(self) -> int:
        return self.memory_key

    @property
    def restart_token(self) -> int:
        """64-bit restart token of DEFERRABLE_SEND/TSEND (bytes 12-19)."""
        return self.buffer_offset


@dataclass(slots=True)
class SesMedium(_SesReqFlags):
    """Medium (small-message) request header (next_hdr 2), 32 B, single packet.

    Bytes 12-19 hold header data when HD is set, else the buffer offset; both names read
    the same field.
    """

    opcode: int = 0
    version: int = 0
    flags: int = 0
    request_length: int = 0  # 14 bits
    ri_generation: int = 0
    job_id: int = 0
    pid_on_fep: int = 0
    resource_index: int = 0
    buffer_offset: int = 0  # header_data when HD
    initiator: int = 0
    memory_key: int = 0  # match bits for tagged operations

    @property
    def header_data(self) -> int:
        return self.buffer_offset

    @property
    def match_bits(self) -> int:
        return self.memory_key


@dataclass(slots=True)
class SesSmall(_SesReqFlags):
    """Small (optimized non-matching) request header (next_hdr 1), 20 B, single packet."""

    opcode: int = 0
    version: int = 0
    flags: int = 0  # HD is reserved here
    request_length: int = 0  # 14 bits
    ri_generation: int = 0
    job_id: int = 0
    pid_on_fep: int = 0
    resource_index: int = 0
    buffer_offset: int = 0


SesRequestHeader = SesStandard | SesMedium | SesSmall


@dataclass(slots=True)
class AtomicExt:
    """Atomic extension header (4 B) after a request header with an atomic opcode."""

    atomic_opcode: int = 0
    atomic_datatype: int = 0
    semantic_control: int = 0


@dataclass(slots=True)
class CasExt:
    """Compare-and-swap extension header (36 B): atomic ext + compare (16 B) + swap (16 B).

    Values are 128-bit unsigned big-endian; narrower operands are right-aligned.
    """

    atomic_opcode: int = 0
    atomic_datatype: int = 0
    semantic_control: int = 0
    compare_value: int = 0
    swap_value: int = 0


@dataclass(slots=True)
class RendezvousExt:
    """Rendezvous extension header (24 B) after the standard header."""

    eager_length: int = 0  # 32 bits
    ri_generation: int = 0  # 8 bits
    pid_on_fep: int = 0  # 12 bits
    resource_index: int = 0  # 12 bits
    read_offset: int = 0  # 64 bits
    read_memory_key: int = 0  # 64 bits


ExtHeader = AtomicExt | CasExt | RendezvousExt


# --------------------------------------------------------------------------- SES responses


@dataclass(slots=True)
class SesResponse:
    """Response without data (next_hdr 4), 12 B. Opcode DEFAULT_RESPONSE, RESPONSE or
    NO_RESPONSE."""

    list: int = 0
    opcode: int = 0
    version: int = 0
    return_code: int = 0
    message_id: int = 0
    ri_generation: int = 0
    job_id: int = 0
    modified_length: int = 0


@dataclass(slots=True)
class SesResponseData:
    """Response with data (next_hdr 5), 20 B. Opcode RESPONSE_W_DATA."""

    list: int = 0
    opcode: int = 2
    version: int = 0
    return_code: int = 0
    message_id: int = 0
    job_id: int = 0
    read_request_message_id: int = 0
    payload_length: int = 0  # 14 bits
    modified_length: int = 0
    message_offset: int = 0


@dataclass(slots=True)
class SesResponseDataSmall:
    """Small response with data (next_hdr 6), 12 B. Opcode RESPONSE_W_DATA."""

    list: int = 0
    opcode: int = 2
    version: int = 0
    return_code: int = 0
    payload_length: int = 0  # 14 bits
    job_id: int = 0
    original_request_psn: int = 0


SesResponseHeader = SesResponse | SesResponseData | SesResponseDataSmall
SesHeader = SesRequestHeader | SesResponseHeader


# --------------------------------------------------------------------------- frame


@dataclass(slots=True)
class Frame:
    """A whole UET frame: Ethernet / IPv4|IPv6 / UDP or entropy header / [TSS] / PDS /
    [SES [ext]] / payload.

    ``ev`` is the entropy value: the UDP source port (``encap='udp'``) or the entropy
    header (``encap='ip'``, IP protocol ``ip_proto``). Addresses are text (``'10.0.0.1'``,
    ``'fd00::1'``, ``'02:00:00:00:00:01'``); the IP version follows ``src_ip``.
    ``udp_checksum`` selects whether the UDP checksum is computed (always for IPv6) or
    sent as 0 (the default over IPv4, ref. 8). ``trailer`` holds bytes after the UET
    payload that the frame carries as is (e.g. a CRC-32C trailer or a GCM tag).
    ``payload`` is ``bytes`` as decoded by :func:`uet.wire.codec.decode_frame`; a sender may
    give any bytes-like object, and an end point's C receive path hands its PDS and SES a
    read-only ``memoryview`` of the received frame (no copy).
    """

    pds: PdsHeader
    ses: SesHeader | None = None
    ext: ExtHeader | None = None
    payload: bytes = b""
    src_mac: str = "02:00:00:00:00:01"
    dst_mac: str = "02:00:00:00:00:02"
    src_ip: str = "10.0.0.1"
    dst_ip: str = "10.0.0.2"
    ev: int = 0
    dscp: int = 0
    ecn: int = 0
    ttl: int = 64
    ip_id: int = 0
    udp_dport: int = UET_UDP_PORT
    udp_checksum: bool = False
    encap: str = "udp"  # 'udp' or 'ip'
    ip_proto: int = UET_DEFAULT_IP_PROTO
    tss: TssHeader | None = None
    trailer: bytes = field(default=b"")

    @property
    def ipv6(self) -> bool:
        return ":" in self.src_ip
