"""Fast codec: :class:`~uet.wire.records.Frame` <-> bytes, byte-exact with the scapy layers.

This is the hot path of the emulator (every emulated packet is encoded once and decoded at
least once), so it is written for speed: precompiled :class:`struct.Struct` objects,
``pack_into`` a preallocated ``bytearray``, dispatch dictionaries instead of ``if`` chains,
cached text <-> packed address conversions, and plain ``int`` values (not enum members) in
decoded records (``IntEnum`` compares equal to ``int``, so records still compare equal).

Public API:

* :func:`encode_frame` / :func:`decode_frame`: Ethernet / IPv4|IPv6 / UDP|entropy header /
  [TSS] / PDS / [SES [ext]] / payload / [trailer].
* :func:`encode_uet` / :func:`decode_uet`: the UDP payload only (what a UDP socket carries).
* :func:`decode_headers`: a frame a capture cut short (snap length): headers decoded,
  lengths checked against the length on the wire, the payload as far as captured.
* Switch helpers working on raw frames without a full decode: :func:`peek_flow`,
  :func:`uet_header_length`, :func:`get_dscp_ecn`, :func:`set_dscp_ecn`, :func:`mark_ce`,
  :func:`trim_frame`.

Trailer: the decoder cannot tell a trailer from payload, so the caller says how long it is
(``trailer_len``, default 0: e.g. 4 for the reference provider's CRC-32C, 16 for the GCM tag
of TSS). The trailer sits inside the UDP payload / IP payload and is counted by their length
fields (ref. 8).

Decoding errors raise :class:`~uet.wire.errors.DecodeError` subclasses only.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Callable
from typing import Any, NamedTuple

import uet.native as _native
from uet.wire import rules
from uet.wire.constants import UET_DEFAULT_IP_PROTO, UET_UDP_PORT
from uet.wire.errors import (
    BadChecksum,
    BadLength,
    DecodeError,
    EncodeError,
    InconsistentHeader,
    TruncatedHeader,
    UnknownType,
    Unsupported,
)
from uet.wire.records import (
    AtomicExt,
    CasExt,
    Frame,
    PdsAck,
    PdsAckCc,
    PdsControl,
    PdsNack,
    PdsRequest,
    PdsRudi,
    PdsUud,
    RendezvousExt,
    SesMedium,
    SesResponse,
    SesResponseData,
    SesResponseDataSmall,
    SesSmall,
    SesStandard,
    TssHeader,
)

__all__ = [
    "encode_frame", "decode_frame", "decode_headers", "FrameHeaders", "encode_uet",
    "decode_uet", "peek_flow", "opens_state", "Envelope", "split_frame", "decode_enveloped",
    "uet_header_length", "get_dscp_ecn", "set_dscp_ecn", "mark_ce", "trim_frame",
    "ETH_HLEN", "ETHERTYPE_IPV4", "ETHERTYPE_IPV6",
]

ETH_HLEN = 14
ETHERTYPE_IPV4 = 0x0800
ETHERTYPE_IPV6 = 0x86DD
IPPROTO_UDP = 17
_IPV4_DF = 0x4000
_MAX_UET_HDR = 16 + 40 + 44 + 36  # TSS + largest PDS + standard SES + CAS ext

# --------------------------------------------------------------------------- structs

_S = struct.Struct
_ETH = _S("!6s6sH")
_ETH_IP4_UDP = _S("!6s6s2sBBHHHBBH4s4sHHHH")  # 42: the common frame's L2-L4 in one call
_IP4 = _S("!BBHHHBBH4s4s")
_IP6 = _S("!IHBB16s16s")
_UDP = _S("!HHHH")
_H = _S("!H")
_HH = _S("!HH")
_I = _S("!I")
_B = _S("!B")

_ENTROPY = _S("!HH")
_TSS = _S("!IHHI")
_TSS_SSI = _S("!IIHHI")

_PDS_REQ = _S("!HhIHH")  # 12
_PDS_REQ_CC = _S("!HhIHHI")  # 16
_PDS_RUDI = _S("!HHI")  # 8
_PDS_UUD = _S("!HH")  # 4
_PDS_ACK = _S("!HhIHH")  # 12
_PDS_ACK_EPSN = _S("!HhIHHI")  # 16
_PDS_ACK_P = _S("!HHIHH")  # 12, probe form: bytes 2-3 unsigned probe_opaque
_PDS_ACK_P_EPSN = _S("!HHIHHI")
_ACKCC_HEAD = _S("!HhIHHBBhQ")  # 24
_ACKCC_HEAD_P = _S("!HHIHHBBhQ")
_CC_NSCC = _S("!HIH")  # service_time, rc|pend|rcvd_bytes, ooo
_CC_CREDIT = _S("!IHH")  # credit<<8, reserved, ooo
_PDS_NACK = _S("!HBBIHHI")  # 16
_PDS_NACK_CCX = _S("!HBBIHHIQQ")  # 32
_PDS_CP = _S("!HHIHHI")  # 16

_SES_STD = _S("!BBHIHHQIQQI")  # 44
_SES_MED = _S("!BBHIHHQIQ")  # 32
_SES_SMALL = _S("!BBHIHHQ")  # 20
_EXT_ATOMIC = _S("!BBBx")  # 4
_EXT_CAS = _S("!BBBxQQQQ")  # 36
_EXT_RNDV = _S("!IIQQ")  # 24
_RSP = _S("!BBHII")  # 12
_RSP_DATA = _S("!BBHIHHII")  # 20
_RSP_DATA_SMALL = _S("!BBHII")  # 12

_M64 = 0xFFFFFFFFFFFFFFFF

# --------------------------------------------------------------------------- address caches

_CACHE_MAX = 65536
_mac_pack: dict[str, bytes] = {}
_mac_text: dict[bytes, str] = {}
_ip_pack: dict[str, bytes] = {}
_ip_text: dict[bytes, str] = {}
_ip4_wsum: dict[bytes, int] = {}  # packed IPv4 address -> its word sum mod 0xFFFF


def _mac_to_bytes(mac: str) -> bytes:
    b = _mac_pack.get(mac)
    if b is None:
        try:
            b = bytes.fromhex(mac.replace(":", "").replace("-", ""))
        except (ValueError, AttributeError) as exc:
            raise EncodeError(f"bad MAC address {mac!r}") from exc
        if len(b) != 6:
            raise EncodeError(f"bad MAC address {mac!r}")
        if len(_mac_pack) >= _CACHE_MAX:
            _mac_pack.clear()
        _mac_pack[mac] = b
    return b


def _mac_to_text(b: bytes) -> str:
    t = _mac_text.get(b)
    if t is None:
        t = b.hex(":")
        if len(_mac_text) >= _CACHE_MAX:
            _mac_text.clear()
        _mac_text[b] = t
    return t


def _ip_to_bytes(ip: str) -> bytes:
    b = _ip_pack.get(ip)
    if b is None:
        try:
            b = socket.inet_pton(socket.AF_INET6 if ":" in ip else socket.AF_INET, ip)
        except (OSError, TypeError) as exc:
            raise EncodeError(f"bad IP address {ip!r}") from exc
        if len(_ip_pack) >= _CACHE_MAX:
            _ip_pack.clear()
        _ip_pack[ip] = b
    return b


def _ip_to_text(b: bytes) -> str:
    t = _ip_text.get(b)
    if t is None:
        t = socket.inet_ntop(socket.AF_INET6 if len(b) == 16 else socket.AF_INET, b)
        if len(_ip_text) >= _CACHE_MAX:
            _ip_text.clear()
        _ip_text[b] = t
    return t


# --------------------------------------------------------------------------- checksums
# One's-complement sums via big integers: 2**16 == 1 (mod 0xFFFF), so the value of a
# big-endian byte string modulo 0xFFFF equals the sum of its 16-bit words modulo 0xFFFF.
# With the uet.native C extension (not under UET_PURE_PYTHON=1), sums over 128 bytes or more
# (UDP checksums over a payload) use its ones_sum: ~0.5 us instead of ~7 us for 4 KiB. Short
# ones (the 20-byte IPv4 header) stay here: a cffi call costs more than int.from_bytes.
_ONES_SUM = _native.ones_sum if _native.IMPLEMENTATION == "native" else None
_NATIVE_MIN = 128


def _sum16(data: Any) -> int:
    """Sum of the 16-bit big-endian words of ``data`` modulo 0xFFFF (odd length padded)."""
    if _ONES_SUM is not None and len(data) >= _NATIVE_MIN:
        return _ONES_SUM(data) % 0xFFFF  # the folded sum has the same residue
    v = int.from_bytes(data, "big")
    if len(data) & 1:
        v <<= 8
    return v % 0xFFFF


def _finish(m: int) -> int:
    """Checksum field value from a word sum modulo 0xFFFF (0 mapped to 0xFFFF, as UDP)."""
    return 0xFFFF - m if m else 0xFFFF


def _ipv4_header_checksum(hdr: Any) -> int:
    m = int.from_bytes(hdr, "big") % 0xFFFF
    return 0xFFFF - m if m else 0


def _udp_pseudo_sum(src: bytes, dst: bytes, udp_len: int) -> int:
    """Word sum (mod 0xFFFF) of the IPv4 or IPv6 pseudo-header of a UDP datagram."""
    return (int.from_bytes(src + dst, "big") + IPPROTO_UDP + udp_len) % 0xFFFF


# --------------------------------------------------------------------------- encoders
# Each encoder packs one header into ``buf`` at ``off`` and returns the offset after it.


def _enc_tss(buf: bytearray, off: int, h: TssHeader) -> int:
    tsc = h.tsc
    if h.sp:
        word = 0x0C000000 | (h.an & 1) << 24 | (h.sdi & 0xFFFFFF)
        _TSS_SSI.pack_into(buf, off, word, h.ssi, h.epoch, tsc >> 32 & 0xFFFF,
                           tsc & 0xFFFFFFFF)
        return off + 16
    word = 0x08000000 | (h.an & 1) << 24 | (h.sdi & 0xFFFFFF)
    _TSS.pack_into(buf, off, word, h.epoch, tsc >> 32 & 0xFFFF, tsc & 0xFFFFFFFF)
    return off + 12


def _enc_req(buf: bytearray, off: int, h: PdsRequest) -> int:
    t = h.type
    flags = h.flags & 0x7F
    word = (t & 0x1F) << 11 | (h.next_hdr & 0xF) << 7 | flags
    last = (((0x8000 if h.use_rsv_pdc else 0) | (h.psn_offset & 0xFFF)) if flags & 0x04
            else h.dpdcid)
    if t == 13 or t == 14:
        _PDS_REQ_CC.pack_into(buf, off, word, h.clear_psn_offset, h.psn, h.spdcid, last,
                              (h.ccc_id & 0xFF) << 24 | (h.credit_target & 0xFFFFFF))
        return off + 16
    _PDS_REQ.pack_into(buf, off, word, h.clear_psn_offset, h.psn, h.spdcid, last)
    return off + 12


def _enc_ack(buf: bytearray, off: int, h: PdsAck) -> int:
    flags = h.flags & 0x7F
    word = 0x3800 | (h.next_hdr & 0xF) << 7 | flags
    if flags & 0x08:  # probe: bytes 2-3 hold the unsigned probe_opaque
        if flags & 0x40:
            _PDS_ACK_P_EPSN.pack_into(buf, off, word, h.ack_psn_offset & 0xFFFF, h.cack_psn,
                                      h.spdcid, h.dpdcid, h.epsn)
            return off + 16
        _PDS_ACK_P.pack_into(buf, off, word, h.ack_psn_offset & 0xFFFF, h.cack_psn,
                             h.spdcid, h.dpdcid)
        return off + 12
    if flags & 0x40:
        _PDS_ACK_EPSN.pack_into(buf, off, word, h.ack_psn_offset, h.cack_psn, h.spdcid,
                                h.dpdcid, h.epsn)
        return off + 16
    _PDS_ACK.pack_into(buf, off, word, h.ack_psn_offset, h.cack_psn, h.spdcid, h.dpdcid)
    return off + 12


def _enc_ack_cc(buf: bytearray, off: int, h: PdsAckCc) -> int:
    t = h.type
    flags = h.flags & 0x7F
    word = (t & 0x1F) << 11 | (h.next_hdr & 0xF) << 7 | flags
    head = _ACKCC_HEAD_P if flags & 0x08 else _ACKCC_HEAD
    aoff = h.ack_psn_offset & 0xFFFF if flags & 0x08 else h.ack_psn_offset
    head.pack_into(buf, off, word, aoff, h.cack_psn, h.spdcid, h.dpdcid,
                   (h.cc_type & 0xF) << 4 | (h.cc_flags & 0xF), h.mpr, h.sack_psn_offset,
                   h.sack_bitmap)
    cc = h.cc_type
    if cc == 0:
        _CC_NSCC.pack_into(buf, off + 24, h.service_time,
                           (0x80000000 if h.restore_cwnd else 0)
                           | (h.rcv_cwnd_pend & 0x7F) << 24 | (h.rcvd_bytes & 0xFFFFFF),
                           h.ooo_count)
    elif cc == 1:
        _CC_CREDIT.pack_into(buf, off + 24, (h.credit & 0xFFFFFF) << 8, 0, h.ooo_count)
    else:
        raw = h.cc_state_raw
        if raw:
            if len(raw) != 8:
                raise EncodeError("cc_state_raw must be 8 bytes")
            buf[off + 24:off + 32] = raw
        else:
            buf[off + 24:off + 32] = bytes(8)
    if t == 9:
        x = h.ccx_state
        if x:
            if len(x) != 8:
                raise EncodeError("ccx_state must be 8 bytes")
            buf[off + 32:off + 40] = x
        else:
            buf[off + 32:off + 40] = bytes(8)
        return off + 40
    return off + 32


def _enc_nack(buf: bytearray, off: int, h: PdsNack) -> int:
    t = h.type
    word = (t & 0x1F) << 11 | (h.next_hdr & 0xF) << 7 | (h.flags & 0x7F)
    if t == 12:
        _PDS_NACK_CCX.pack_into(buf, off, word, h.nack_code, h.vendor_code, h.nack_psn,
                                h.spdcid, h.dpdcid, h.payload,
                                (h.nccx_type & 0xF) << 60 | (h.nccx_state1 & 0xFFFFFFFFFFFFFFF),
                                h.nccx_state2)
        return off + 32
    _PDS_NACK.pack_into(buf, off, word, h.nack_code, h.vendor_code, h.nack_psn, h.spdcid,
                        h.dpdcid, h.payload)
    return off + 16


def _enc_cp(buf: bytearray, off: int, h: PdsControl) -> int:
    flags = h.flags & 0x7F
    word = 0x5800 | (h.ctl_type & 0xF) << 7 | flags
    last = (((0x8000 if h.use_rsv_pdc else 0) | (h.psn_offset & 0xFFF)) if flags & 0x04
            else h.dpdcid)
    _PDS_CP.pack_into(buf, off, word, h.probe_opaque, h.psn, h.spdcid, last, h.payload)
    return off + 16


def _enc_rudi(buf: bytearray, off: int, h: PdsRudi) -> int:
    word = (h.type & 0x1F) << 11 | (h.next_hdr & 0xF) << 7 | (h.flags & 0x7F)
    _PDS_RUDI.pack_into(buf, off, word, 0, h.pkt_id)
    return off + 8


def _enc_uud(buf: bytearray, off: int, h: PdsUud) -> int:
    _PDS_UUD.pack_into(buf, off, 0x3000 | (h.next_hdr & 0xF) << 7 | (h.flags & 0x7F), 0)
    return off + 4


def _enc_std(buf: bytearray, off: int, h: SesStandard) -> int:
    flags = h.flags & 0x3F
    if flags & 0x01:
        tail = h.header_data
    else:
        tail = (h.payload_length & 0x3FFF) << 32 | (h.message_offset & 0xFFFFFFFF)
    _SES_STD.pack_into(buf, off, h.opcode & 0x3F, (h.version & 3) << 6 | flags, h.message_id,
                       (h.ri_generation & 0xFF) << 24 | (h.job_id & 0xFFFFFF),
                       h.pid_on_fep & 0xFFF, h.resource_index & 0xFFF, h.buffer_offset,
                       h.initiator, h.memory_key, tail, h.request_length)
    return off + 44


def _enc_medium(buf: bytearray, off: int, h: SesMedium) -> int:
    _SES_MED.pack_into(buf, off, h.opcode & 0x3F, (h.version & 3) << 6 | (h.flags & 0x3F),
                       h.request_length & 0x3FFF,
                       (h.ri_generation & 0xFF) << 24 | (h.job_id & 0xFFFFFF),
                       h.pid_on_fep & 0xFFF, h.resource_index & 0xFFF, h.buffer_offset,
                       h.initiator, h.memory_key)
    return off + 32


def _enc_small(buf: bytearray, off: int, h: SesSmall) -> int:
    _SES_SMALL.pack_into(buf, off, h.opcode & 0x3F, (h.version & 3) << 6 | (h.flags & 0x3F),
                         h.request_length & 0x3FFF,
                         (h.ri_generation & 0xFF) << 24 | (h.job_id & 0xFFFFFF),
                         h.pid_on_fep & 0xFFF, h.resource_index & 0xFFF, h.buffer_offset)
    return off + 20


def _enc_rsp(buf: bytearray, off: int, h: SesResponse) -> int:
    _RSP.pack_into(buf, off, (h.list & 3) << 6 | (h.opcode & 0x3F),
                   (h.version & 3) << 6 | (h.return_code & 0x3F), h.message_id,
                   (h.ri_generation & 0xFF) << 24 | (h.job_id & 0xFFFFFF), h.modified_length)
    return off + 12


def _enc_rsp_data(buf: bytearray, off: int, h: SesResponseData) -> int:
    _RSP_DATA.pack_into(buf, off, (h.list & 3) << 6 | (h.opcode & 0x3F),
                        (h.version & 3) << 6 | (h.return_code & 0x3F), h.message_id,
                        h.job_id & 0xFFFFFF, h.read_request_message_id,
                        h.payload_length & 0x3FFF, h.modified_length, h.message_offset)
    return off + 20


def _enc_rsp_data_small(buf: bytearray, off: int, h: SesResponseDataSmall) -> int:
    _RSP_DATA_SMALL.pack_into(buf, off, (h.list & 3) << 6 | (h.opcode & 0x3F),
                              (h.version & 3) << 6 | (h.return_code & 0x3F),
                              h.payload_length & 0x3FFF, h.job_id & 0xFFFFFF,
                              h.original_request_psn)
    return off + 12


def _enc_atomic(buf: bytearray, off: int, h: AtomicExt) -> int:
    _EXT_ATOMIC.pack_into(buf, off, h.atomic_opcode, h.atomic_datatype, h.semantic_control)
    return off + 4


def _enc_cas(buf: bytearray, off: int, h: CasExt) -> int:
    c, s = h.compare_value, h.swap_value
    if c >> 128 or s >> 128 or c < 0 or s < 0:
        raise EncodeError("compare/swap values are 128-bit unsigned")
    _EXT_CAS.pack_into(buf, off, h.atomic_opcode, h.atomic_datatype, h.semantic_control,
                       c >> 64, c & _M64, s >> 64, s & _M64)
    return off + 36


def _enc_rndv(buf: bytearray, off: int, h: RendezvousExt) -> int:
    _EXT_RNDV.pack_into(buf, off, h.eager_length,
                        (h.ri_generation & 0xFF) << 24 | (h.pid_on_fep & 0xFFF) << 12
                        | (h.resource_index & 0xFFF), h.read_offset, h.read_memory_key)
    return off + 24


_Enc = Callable[[bytearray, int, Any], int]
_PDS_ENC: dict[type, _Enc] = {
    PdsRequest: _enc_req, PdsAck: _enc_ack, PdsAckCc: _enc_ack_cc, PdsNack: _enc_nack,
    PdsControl: _enc_cp, PdsRudi: _enc_rudi, PdsUud: _enc_uud}
_SES_ENC: dict[type, _Enc] = {
    SesStandard: _enc_std, SesMedium: _enc_medium, SesSmall: _enc_small,
    SesResponse: _enc_rsp, SesResponseData: _enc_rsp_data,
    SesResponseDataSmall: _enc_rsp_data_small}
_EXT_ENC: dict[type, _Enc] = {AtomicExt: _enc_atomic, CasExt: _enc_cas, RendezvousExt: _enc_rndv}


def _pack_uet(buf: bytearray, off: int, frame: Frame) -> int:
    """Pack TSS/PDS/SES/ext headers of ``frame`` at ``off``; return the end offset."""
    tss = frame.tss
    if tss is not None:
        off = _enc_tss(buf, off, tss)
    pds = frame.pds
    try:
        off = _PDS_ENC[pds.__class__](buf, off, pds)
        ses = frame.ses
        if ses is not None:
            off = _SES_ENC[ses.__class__](buf, off, ses)
            ext = frame.ext
            if ext is not None:
                off = _EXT_ENC[ext.__class__](buf, off, ext)
        elif frame.ext is not None:
            raise EncodeError("an extension header needs an SES request header")
    except KeyError as exc:
        raise EncodeError(f"not a UET header record: {exc.args[0]!r}") from None
    except struct.error as exc:
        raise EncodeError(f"field value out of range: {exc}") from None
    return off


def encode_uet(frame: Frame) -> bytes:
    """Bytes after the UDP header: [TSS] / PDS / [SES [ext]] / payload / trailer.

    This is what a UDP socket sends in live mode (the EV travels as the socket's source
    port). In native-IP mode the 4-byte entropy header is not included.
    """
    buf = bytearray(_MAX_UET_HDR)
    end = _pack_uet(buf, 0, frame)
    return b"".join((memoryview(buf)[:end], frame.payload, frame.trailer))


def _encode_ipv4_udp(frame: Frame, src_ip: str) -> bytes:
    """:func:`encode_frame` for the common frame (IPv4, UDP checksum 0): Ethernet, IPv4
    and UDP packed in one call; same checks, same errors, same bytes."""
    buf = bytearray(42 + _MAX_UET_HDR)
    end = _pack_uet(buf, 42, frame)
    payload = frame.payload
    trailer = frame.trailer
    l4_len = end - 34 + len(payload) + len(trailer)
    dst_ip = frame.dst_ip
    src = _ip_pack.get(src_ip) or _ip_to_bytes(src_ip)
    dst = _ip_pack.get(dst_ip) or _ip_to_bytes(dst_ip)
    dmac = _mac_pack.get(frame.dst_mac) or _mac_to_bytes(frame.dst_mac)
    smac = _mac_pack.get(frame.src_mac) or _mac_to_bytes(frame.src_mac)
    if len(src) != 4 or len(dst) != 4:
        raise EncodeError("src_ip and dst_ip must be the same IP version")
    if l4_len + 20 > 0xFFFF:
        raise EncodeError("frame too long for IPv4")
    try:
        _ETH_IP4_UDP.pack_into(buf, 0, dmac, smac, b"\x08\x00", 0x45,
                               (frame.dscp & 0x3F) << 2 | (frame.ecn & 3), 20 + l4_len,
                               frame.ip_id, _IPV4_DF, frame.ttl, IPPROTO_UDP, 0, src, dst,
                               frame.ev, frame.udp_dport, l4_len, 0)
    except struct.error as exc:
        raise EncodeError(f"field value out of range: {exc}") from None
    _H.pack_into(buf, 24, _ipv4_header_checksum(buf[14:34]))
    return b"".join((memoryview(buf)[:end], payload, trailer))


# The two frames almost every packet of an experiment is: a RUD/ROD request carrying a
# standard SES header (data) and an ACK_CC with NSCC or credit state and no SES header.
# Each has one Struct from the Ethernet header to the end of its UET headers, so a frame is
# packed (and unpacked) in one call instead of one per header; the bytes, the records and
# the checks are those of the general path, which handles everything else (and every
# error: a frame the fast path does not take, or any value out of range, goes there).
_L24 = "!6s6s2sBBHHHBBH4s4sHHHH"  # Ethernet, IPv4 without options, UDP: 42 bytes
_FAST_REQ = _S(_L24 + "HhIHH" + "BBHIHHQIQQI")  # + RUD/ROD request + standard SES: 98
_FAST_REQ_CC = _S(_L24 + "HhIHHI" + "BBHIHHQIQQI")  # + RUD_CC/ROD_CC request: 102
_FAST_ACK_CC = _S(_L24 + "HhIHHBBhQ" + "HIH")  # + ACK_CC, cc_type 0 (NSCC): 74
_FAST_ACK_CREDIT = _S(_L24 + "HhIHHBBhQ" + "IHH")  # + ACK_CC, cc_type 1 (credit): 74


def _wsum4(b: bytes) -> int:
    """Sum of the two 16-bit words of a packed IPv4 address modulo 0xFFFF (cached)."""
    s = _ip4_wsum.get(b)
    if s is None:
        s = int.from_bytes(b, "big") % 0xFFFF
        if len(_ip4_wsum) >= _CACHE_MAX:
            _ip4_wsum.clear()
        _ip4_wsum[b] = s
    return s


def _encode_fast(frame: Frame, pds: Any) -> bytes | None:
    """:func:`encode_frame` of the two common frames, or None (the general path).

    The IPv4 header checksum is computed from the field values (the word sums of the two
    addresses are cached) and packed with the rest in the one ``pack_into`` call: the same
    value :func:`_ipv4_header_checksum` gives over the packed header."""
    try:
        src = _ip_pack.get(frame.src_ip)
        dst = _ip_pack.get(frame.dst_ip)
        dmac = _mac_pack.get(frame.dst_mac)
        smac = _mac_pack.get(frame.src_mac)
        if (src is None or dst is None or dmac is None or smac is None or len(src) != 4
                or len(dst) != 4 or frame.tss is not None or frame.trailer
                or frame.encap != "udp" or frame.udp_checksum):
            return None
        payload = frame.payload
        tos = (frame.dscp & 0x3F) << 2 | (frame.ecn & 3)
        ipid = frame.ip_id
        ttl = frame.ttl
        # word sum of the IPv4 header without its checksum: 0x4500 (version, IHL) + 0x4000
        # (DF) + protocol 17, the variable fields, the two addresses
        m = 0x8511 + tos + ipid + (ttl << 8) + (_ip4_wsum.get(src) or _wsum4(src)) \
            + (_ip4_wsum.get(dst) or _wsum4(dst))
        if type(pds) is PdsRequest:
            h = frame.ses
            if type(h) is not SesStandard or frame.ext is not None:
                return None
            t = pds.type
            flags = pds.flags & 0x7F
            word = (t & 0x1F) << 11 | (pds.next_hdr & 0xF) << 7 | flags
            last = (((0x8000 if pds.use_rsv_pdc else 0) | (pds.psn_offset & 0xFFF))
                    if flags & 0x04 else pds.dpdcid)
            sflags = h.flags & 0x3F
            tail = (h.header_data if sflags & 0x01 else
                    (h.payload_length & 0x3FFF) << 32 | (h.message_offset & 0xFFFFFFFF))
            if t == 13 or t == 14:
                l4_len = 68 + len(payload)
                if l4_len > 0xFFEB:
                    return None
                m = (m + l4_len + 20) % 0xFFFF
                buf = bytearray(102)
                _FAST_REQ_CC.pack_into(
                    buf, 0, dmac, smac, b"\x08\x00", 0x45, tos, 20 + l4_len, ipid,
                    _IPV4_DF, ttl, IPPROTO_UDP, 0xFFFF - m if m else 0, src, dst, frame.ev,
                    frame.udp_dport, l4_len, 0, word, pds.clear_psn_offset, pds.psn,
                    pds.spdcid, last, (pds.ccc_id & 0xFF) << 24 | (pds.credit_target & 0xFFFFFF),
                    h.opcode & 0x3F, (h.version & 3) << 6 | sflags, h.message_id,
                    (h.ri_generation & 0xFF) << 24 | (h.job_id & 0xFFFFFF),
                    h.pid_on_fep & 0xFFF, h.resource_index & 0xFFF, h.buffer_offset,
                    h.initiator, h.memory_key, tail, h.request_length)
            else:
                l4_len = 64 + len(payload)
                if l4_len > 0xFFEB:
                    return None
                m = (m + l4_len + 20) % 0xFFFF
                buf = bytearray(98)
                _FAST_REQ.pack_into(
                    buf, 0, dmac, smac, b"\x08\x00", 0x45, tos, 20 + l4_len, ipid,
                    _IPV4_DF, ttl, IPPROTO_UDP, 0xFFFF - m if m else 0, src, dst, frame.ev,
                    frame.udp_dport, l4_len, 0, word, pds.clear_psn_offset, pds.psn,
                    pds.spdcid, last,
                    h.opcode & 0x3F, (h.version & 3) << 6 | sflags, h.message_id,
                    (h.ri_generation & 0xFF) << 24 | (h.job_id & 0xFFFFFF),
                    h.pid_on_fep & 0xFFF, h.resource_index & 0xFFF, h.buffer_offset,
                    h.initiator, h.memory_key, tail, h.request_length)
        else:  # PdsAckCc
            if frame.ses is not None or frame.ext is not None or pds.type != 8:
                return None
            flags = pds.flags & 0x7F
            cc = pds.cc_type
            if flags & 0x08 or (cc != 0 and cc != 1):
                return None  # probe form (unsigned offset), other CC state: general path
            l4_len = 40 + len(payload)
            if l4_len > 0xFFEB:
                return None
            m = (m + l4_len + 20) % 0xFFFF
            buf = bytearray(74)
            if cc == 0:
                _FAST_ACK_CC.pack_into(
                    buf, 0, dmac, smac, b"\x08\x00", 0x45, tos, 20 + l4_len, ipid, _IPV4_DF,
                    ttl, IPPROTO_UDP, 0xFFFF - m if m else 0, src, dst, frame.ev,
                    frame.udp_dport, l4_len, 0, 0x4000 | (pds.next_hdr & 0xF) << 7 | flags,
                    pds.ack_psn_offset, pds.cack_psn, pds.spdcid, pds.dpdcid,
                    (pds.cc_flags & 0xF), pds.mpr, pds.sack_psn_offset, pds.sack_bitmap,
                    pds.service_time,
                    (0x80000000 if pds.restore_cwnd else 0) | (pds.rcv_cwnd_pend & 0x7F) << 24
                    | (pds.rcvd_bytes & 0xFFFFFF), pds.ooo_count)
            else:
                _FAST_ACK_CREDIT.pack_into(
                    buf, 0, dmac, smac, b"\x08\x00", 0x45, tos, 20 + l4_len, ipid, _IPV4_DF,
                    ttl, IPPROTO_UDP, 0xFFFF - m if m else 0, src, dst, frame.ev,
                    frame.udp_dport, l4_len, 0, 0x4000 | (pds.next_hdr & 0xF) << 7 | flags,
                    pds.ack_psn_offset, pds.cack_psn, pds.spdcid, pds.dpdcid,
                    0x10 | (pds.cc_flags & 0xF), pds.mpr, pds.sack_psn_offset,
                    pds.sack_bitmap, (pds.credit & 0xFFFFFF) << 8, 0, pds.ooo_count)
    except (struct.error, TypeError):
        return None  # the general path raises the error it always raised
    if payload:
        return b"".join((buf, payload))
    return bytes(buf)


def encode_frame(frame: Frame) -> bytes:
    """Whole Ethernet frame for ``frame`` (no Ethernet padding, no FCS).

    IPv4: IHL 5, DF set, ID ``frame.ip_id``, header checksum computed; UDP checksum 0
    unless ``frame.udp_checksum``. IPv6: flow label 0, UDP checksum always computed.
    """
    pds = frame.pds
    if type(pds) is PdsRequest or type(pds) is PdsAckCc:
        out = (_c_encode(frame) if _c_encode is not None else None) or _encode_fast(frame, pds)
        if out is not None:
            return out
    return _encode_general(frame)


def _encode_general(frame: Frame) -> bytes:
    """:func:`encode_frame` of any frame (the fast path's reference in the tests)."""
    src_ip = frame.src_ip
    if ":" not in src_ip and frame.encap == "udp" and not frame.udp_checksum:
        return _encode_ipv4_udp(frame, src_ip)
    v6 = ":" in src_ip
    udp = frame.encap == "udp"
    l3 = 40 if v6 else 20
    uet_off = ETH_HLEN + l3 + (8 if udp else 4)
    buf = bytearray(uet_off + _MAX_UET_HDR)
    end = _pack_uet(buf, uet_off, frame)
    payload = frame.payload
    trailer = frame.trailer
    l4_len = end - ETH_HLEN - l3 + len(payload) + len(trailer)
    src = _ip_to_bytes(frame.src_ip)
    dst = _ip_to_bytes(frame.dst_ip)
    try:
        _ETH.pack_into(buf, 0, _mac_to_bytes(frame.dst_mac), _mac_to_bytes(frame.src_mac),
                       ETHERTYPE_IPV6 if v6 else ETHERTYPE_IPV4)
        tos = (frame.dscp & 0x3F) << 2 | (frame.ecn & 3)
        proto = IPPROTO_UDP if udp else frame.ip_proto
        if v6:
            if len(src) != 16 or len(dst) != 16:
                raise EncodeError("src_ip and dst_ip must be the same IP version")
            _IP6.pack_into(buf, ETH_HLEN, 0x60000000 | tos << 20, l4_len, proto, frame.ttl,
                           src, dst)
        else:
            if len(src) != 4 or len(dst) != 4:
                raise EncodeError("src_ip and dst_ip must be the same IP version")
            if l4_len + 20 > 0xFFFF:
                raise EncodeError("frame too long for IPv4")
            _IP4.pack_into(buf, ETH_HLEN, 0x45, tos, 20 + l4_len, frame.ip_id, _IPV4_DF,
                           frame.ttl, proto, 0, src, dst)
            _H.pack_into(buf, ETH_HLEN + 10, _ipv4_header_checksum(buf[ETH_HLEN:ETH_HLEN + 20]))
        l4 = ETH_HLEN + l3
        if not udp:
            _ENTROPY.pack_into(buf, l4, frame.ev, 0)
            return b"".join((memoryview(buf)[:end], payload, trailer))
        _UDP.pack_into(buf, l4, frame.ev, frame.udp_dport, l4_len, 0)
    except struct.error as exc:
        raise EncodeError(f"field value out of range: {exc}") from None
    if not (v6 or frame.udp_checksum):
        return b"".join((memoryview(buf)[:end], payload, trailer))
    m = _udp_pseudo_sum(src, dst, l4_len)
    seg = memoryview(buf)[l4:end]
    if len(seg) & 1:  # odd header length: checksum over the joined segment
        out = bytearray(b"".join((memoryview(buf)[:end], payload, trailer)))
        m = (m + _sum16(memoryview(out)[l4:])) % 0xFFFF
        _H.pack_into(out, l4 + 6, _finish(m))
        return bytes(out)
    m = (m + _sum16(seg)) % 0xFFFF
    rest = payload + trailer if trailer else payload
    if rest:
        m = (m + _sum16(rest)) % 0xFFFF
    _H.pack_into(buf, l4 + 6, _finish(m))
    return b"".join((memoryview(buf)[:end], payload, trailer))


# --------------------------------------------------------------------------- decoders
# Each PDS decoder takes (data, off, end, word) and returns (record, offset after header).


def _need(data: Any, off: int, n: int, end: int, header: str, what: str) -> None:
    if off + n > end:
        raise TruncatedHeader(header, off, f"{what} needs {n} bytes, {max(end - off, 0)} left")


def _dec_req(data: Any, off: int, end: int, word: int) -> tuple[PdsRequest, int]:
    t = word >> 11
    flags = word & 0x7F
    if t >= 13:
        if off + 16 > end:
            _need(data, off, 16, end, "pds", "RUD_CC/ROD_CC request")
        _w, cpo, psn, spdcid, last, cc = _PDS_REQ_CC.unpack_from(data, off)
        ccc, credit, n = cc >> 24, cc & 0xFFFFFF, 16
    else:
        if off + 12 > end:
            _need(data, off, 12, end, "pds", "RUD/ROD request")
        _w, cpo, psn, spdcid, last = _PDS_REQ.unpack_from(data, off)
        ccc = credit = 0
        n = 12
    if flags & 0x04:
        return PdsRequest(t, word >> 7 & 0xF, flags, cpo, psn, spdcid, 0, last >= 0x8000,
                          last & 0xFFF, ccc, credit), off + n
    return PdsRequest(t, word >> 7 & 0xF, flags, cpo, psn, spdcid, last, False, 0, ccc,
                      credit), off + n


def _dec_ack(data: Any, off: int, end: int, word: int) -> tuple[PdsAck, int]:
    flags = word & 0x7F
    if flags & 0x40:
        if off + 16 > end:
            _need(data, off, 16, end, "pds", "ACK with EPSN")
        st = _PDS_ACK_P_EPSN if flags & 0x08 else _PDS_ACK_EPSN
        _w, aoff, cack, spdcid, dpdcid, epsn = st.unpack_from(data, off)
        return PdsAck(word >> 7 & 0xF, flags, aoff, cack, spdcid, dpdcid, epsn), off + 16
    if off + 12 > end:
        _need(data, off, 12, end, "pds", "ACK")
    st = _PDS_ACK_P if flags & 0x08 else _PDS_ACK
    _w, aoff, cack, spdcid, dpdcid = st.unpack_from(data, off)
    return PdsAck(word >> 7 & 0xF, flags, aoff, cack, spdcid, dpdcid, 0), off + 12


def _dec_ack_cc(data: Any, off: int, end: int, word: int) -> tuple[PdsAckCc, int]:
    t = word >> 11
    flags = word & 0x7F
    n = 40 if t == 9 else 32
    if off + n > end:
        _need(data, off, n, end, "pds", "ACK_CCX" if t == 9 else "ACK_CC")
    head = _ACKCC_HEAD_P if flags & 0x08 else _ACKCC_HEAD
    _w, aoff, cack, spdcid, dpdcid, ccb, mpr, soff, bitmap = head.unpack_from(data, off)
    cc_type = ccb >> 4
    ccx = bytes(data[off + 32:off + 40]) if t == 9 else b""
    if cc_type == 0:
        st, mid, ooo = _CC_NSCC.unpack_from(data, off + 24)
        rec = PdsAckCc(t, word >> 7 & 0xF, flags, aoff, cack, spdcid, dpdcid, 0, ccb & 0xF,
                       mpr, soff, bitmap, st, mid >= 0x80000000, mid >> 24 & 0x7F,
                       mid & 0xFFFFFF, 0, ooo, b"", ccx)
    elif cc_type == 1:
        credit, _r, ooo = _CC_CREDIT.unpack_from(data, off + 24)
        rec = PdsAckCc(t, word >> 7 & 0xF, flags, aoff, cack, spdcid, dpdcid, 1, ccb & 0xF,
                       mpr, soff, bitmap, 0, False, 0, 0, credit >> 8, ooo, b"", ccx)
    else:
        rec = PdsAckCc(t, word >> 7 & 0xF, flags, aoff, cack, spdcid, dpdcid, cc_type,
                       ccb & 0xF, mpr, soff, bitmap, 0, False, 0, 0, 0, 0,
                       bytes(data[off + 24:off + 32]), ccx)
    return rec, off + n


def _dec_nack(data: Any, off: int, end: int, word: int) -> tuple[PdsNack, int]:
    t = word >> 11
    if t == 12:
        if off + 32 > end:
            _need(data, off, 32, end, "pds", "NACK_CCX")
        _w, code, vendor, psn, spdcid, dpdcid, pay, s1, s2 = _PDS_NACK_CCX.unpack_from(data, off)
        return PdsNack(12, word >> 7 & 0xF, word & 0x7F, code, vendor, psn, spdcid, dpdcid,
                       pay, s1 >> 60, s1 & 0xFFFFFFFFFFFFFFF, s2), off + 32
    if off + 16 > end:
        _need(data, off, 16, end, "pds", "NACK")
    _w, code, vendor, psn, spdcid, dpdcid, pay = _PDS_NACK.unpack_from(data, off)
    return PdsNack(10, word >> 7 & 0xF, word & 0x7F, code, vendor, psn, spdcid, dpdcid,
                   pay), off + 16


def _dec_cp(data: Any, off: int, end: int, word: int) -> tuple[PdsControl, int]:
    if off + 16 > end:
        _need(data, off, 16, end, "pds", "control packet")
    _w, opaque, psn, spdcid, last, pay = _PDS_CP.unpack_from(data, off)
    flags = word & 0x7F
    if flags & 0x04:
        return PdsControl(word >> 7 & 0xF, flags, opaque, psn, spdcid, 0, last >= 0x8000,
                          last & 0xFFF, pay), off + 16
    return PdsControl(word >> 7 & 0xF, flags, opaque, psn, spdcid, last, False, 0,
                      pay), off + 16


def _dec_rudi(data: Any, off: int, end: int, word: int) -> tuple[PdsRudi, int]:
    if off + 8 > end:
        _need(data, off, 8, end, "pds", "RUDI header")
    _w, _r, pkt_id = _PDS_RUDI.unpack_from(data, off)
    return PdsRudi(word >> 11, word >> 7 & 0xF, word & 0x7F, pkt_id), off + 8


def _dec_uud(data: Any, off: int, end: int, word: int) -> tuple[PdsUud, int]:
    if off + 4 > end:
        _need(data, off, 4, end, "pds", "UUD header")
    return PdsUud(word >> 7 & 0xF, word & 0x7F), off + 4


_PDS_DEC = {2: _dec_req, 3: _dec_req, 13: _dec_req, 14: _dec_req, 7: _dec_ack,
            8: _dec_ack_cc, 9: _dec_ack_cc, 10: _dec_nack, 12: _dec_nack, 11: _dec_cp,
            4: _dec_rudi, 5: _dec_rudi, 6: _dec_uud}
_PDS_NAMES = {2: "RUD_REQ", 3: "ROD_REQ", 4: "RUDI_REQ", 5: "RUDI_RESP", 6: "UUD_REQ",
              7: "ACK", 8: "ACK_CC", 9: "ACK_CCX", 10: "NACK", 11: "CP", 12: "NACK_CCX",
              13: "RUD_CC_REQ", 14: "ROD_CC_REQ"}
_SES_NAMES = {1: "REQ_SMALL", 2: "REQ_MEDIUM", 3: "REQ_STD", 4: "RSP", 5: "RSP_DATA",
              6: "RSP_DATA_SMALL"}


def _dec_std(data: Any, off: int) -> SesStandard:
    (b0, b1, msg_id, gj, pid, ri, boff, init, mkey, tail,
     rlen) = _SES_STD.unpack_from(data, off)
    if b1 & 0x01:
        return SesStandard(b0 & 0x3F, b1 >> 6, b1 & 0x3F, msg_id, gj >> 24, gj & 0xFFFFFF,
                           pid & 0xFFF, ri & 0xFFF, boff, init, mkey, tail, 0, 0, rlen)
    return SesStandard(b0 & 0x3F, b1 >> 6, b1 & 0x3F, msg_id, gj >> 24, gj & 0xFFFFFF,
                       pid & 0xFFF, ri & 0xFFF, boff, init, mkey, 0, tail >> 32 & 0x3FFF,
                       tail & 0xFFFFFFFF, rlen)


def _dec_medium(data: Any, off: int) -> SesMedium:
    b0, b1, rlen, gj, pid, ri, boff, init, mkey = _SES_MED.unpack_from(data, off)
    return SesMedium(b0 & 0x3F, b1 >> 6, b1 & 0x3F, rlen & 0x3FFF, gj >> 24, gj & 0xFFFFFF,
                     pid & 0xFFF, ri & 0xFFF, boff, init, mkey)


def _dec_small(data: Any, off: int) -> SesSmall:
    b0, b1, rlen, gj, pid, ri, boff = _SES_SMALL.unpack_from(data, off)
    return SesSmall(b0 & 0x3F, b1 >> 6, b1 & 0x3F, rlen & 0x3FFF, gj >> 24, gj & 0xFFFFFF,
                    pid & 0xFFF, ri & 0xFFF, boff)


def _dec_rsp(data: Any, off: int) -> SesResponse:
    b0, b1, msg_id, gj, mlen = _RSP.unpack_from(data, off)
    return SesResponse(b0 >> 6, b0 & 0x3F, b1 >> 6, b1 & 0x3F, msg_id, gj >> 24,
                       gj & 0xFFFFFF, mlen)


def _dec_rsp_data(data: Any, off: int) -> SesResponseData:
    b0, b1, msg_id, job, rr_id, plen, mlen, moff = _RSP_DATA.unpack_from(data, off)
    return SesResponseData(b0 >> 6, b0 & 0x3F, b1 >> 6, b1 & 0x3F, msg_id, job & 0xFFFFFF,
                           rr_id, plen & 0x3FFF, mlen, moff)


def _dec_rsp_data_small(data: Any, off: int) -> SesResponseDataSmall:
    b0, b1, plen, job, psn = _RSP_DATA_SMALL.unpack_from(data, off)
    return SesResponseDataSmall(b0 >> 6, b0 & 0x3F, b1 >> 6, b1 & 0x3F, plen & 0x3FFF,
                                job & 0xFFFFFF, psn)


_SES_DEC: dict[int, Callable[[Any, int], Any]] = {
    1: _dec_small, 2: _dec_medium, 3: _dec_std, 4: _dec_rsp, 5: _dec_rsp_data,
    6: _dec_rsp_data_small}
_SES_LEN = rules.SES_LEN
_ALLOWED_PAIRS = rules.ALLOWED_PAIRS
_KNOWN_CTL = rules.KNOWN_CTL_TYPES
_RSP_OPCODES = rules.RSP_OPCODES
_ATOMIC_OPS = rules.ATOMIC_OPCODES_INT
_RNDV_OPS = rules.RENDEZVOUS_OPCODES_INT

# The two common frames (see ``_FAST_REQ``) in C: ``uet/native/codec_core.c`` packs and
# unpacks exactly what ``_encode_fast`` / ``_decode_fast`` do, or answers None (anything
# else, or an address the caches below have not seen yet) and the Python paths go on.
# Not with UET_PURE_PYTHON=1, nor when the extension was not built.
_c_encode: Any = None
_c_decode: Any = None
if not _native.FORCED_PURE:
    try:
        from uet.native import _codec_core  # type: ignore[attr-defined]
    except ImportError:  # pragma: no cover - the extension is optional
        pass
    else:
        _codec_core.configure(Frame, PdsRequest, SesStandard, PdsAckCc, _ip_pack, _mac_pack,
                              _ip_text, _mac_text, UET_DEFAULT_IP_PROTO,
                              _ATOMIC_OPS | _RNDV_OPS)
        _c_encode, _c_decode = _codec_core.encode, _codec_core.decode
_CAS_OPS = rules.CAS_OPCODES_INT


def _check_pds_word(word: int, off: int, after_tss: bool) -> int:
    """Validate the PDS prologue at ``off``; return the type."""
    t = word >> 11
    if t not in _PDS_DEC:
        if t == 1:
            raise InconsistentHeader("pds", off, "TSS header after a TSS header"
                                     if after_tss else "TSS type where a PDS header must be")
        raise UnknownType("pds", off, f"unknown PDS type {t}")
    nh = word >> 7 & 0xF
    if t == 11:
        if nh not in _KNOWN_CTL:
            raise UnknownType("pds", off, f"unknown control packet type {nh}")
    elif (t, nh) not in _ALLOWED_PAIRS:
        if nh > 6:
            raise UnknownType("pds", off, f"unknown next header {nh}")
        raise InconsistentHeader("pds", off,
                                 f"next header {_SES_NAMES.get(nh, 'NONE')} not allowed "
                                 f"after {_PDS_NAMES[t]}")
    return t


def _decode_uet(data: Any, off: int, end: int) -> tuple:
    """Decode [TSS] PDS [SES [ext]] in ``data[off:end]``.

    Returns ``(tss, pds, ses, ext, payload_offset)``.
    """
    if off + 2 > end:
        raise TruncatedHeader("pds", off, f"PDS header needs at least 2 bytes, "
                              f"{max(end - off, 0)} left")
    word = _H.unpack_from(data, off)[0]
    tss = None
    if word >> 11 == 1:
        if off + 4 > end:
            raise TruncatedHeader("tss", off, f"TSS header needs 12 bytes, {end - off} left")
        w0 = _I.unpack_from(data, off)[0]
        if w0 & 0x04000000:
            if off + 16 > end:
                raise TruncatedHeader("tss", off, f"TSS header with SSI needs 16 bytes, "
                                      f"{end - off} left")
            _w, ssi, epoch, hi, lo = _TSS_SSI.unpack_from(data, off)
            tss = TssHeader(True, w0 >> 24 & 1, w0 & 0xFFFFFF, ssi, epoch, hi << 32 | lo)
            off += 16
        else:
            if off + 12 > end:
                raise TruncatedHeader("tss", off, f"TSS header needs 12 bytes, {end - off} left")
            _w, epoch, hi, lo = _TSS.unpack_from(data, off)
            tss = TssHeader(False, w0 >> 24 & 1, w0 & 0xFFFFFF, 0, epoch, hi << 32 | lo)
            off += 12
        if off + 2 > end:
            raise TruncatedHeader("pds", off, f"PDS header needs at least 2 bytes, "
                                  f"{max(end - off, 0)} left")
        word = _H.unpack_from(data, off)[0]
        t = _check_pds_word(word, off, True)
    else:
        t = _check_pds_word(word, off, False)
    pds, off = _PDS_DEC[t](data, off, end, word)
    if t == 11:
        return tss, pds, None, None, off
    nh = word >> 7 & 0xF
    if not nh:
        return tss, pds, None, None, off
    n = _SES_LEN[nh]
    if off + n > end:
        raise TruncatedHeader("ses", off, f"SES {_SES_NAMES[nh]} header needs {n} bytes, "
                              f"{max(end - off, 0)} left")
    ses = _SES_DEC[nh](data, off)
    if nh >= 4:
        if ses.opcode not in _RSP_OPCODES[nh]:
            raise InconsistentHeader("ses", off, f"response opcode {ses.opcode} not allowed "
                                     f"in {_SES_NAMES[nh]}")
        return tss, pds, ses, None, off + n
    off += n
    op = ses.opcode
    if op in _ATOMIC_OPS:
        if off + 1 > end:
            raise TruncatedHeader("ext", off, "atomic extension header needs 4 bytes, 0 left")
        aop = data[off]
        if aop in _CAS_OPS:
            if off + 36 > end:
                raise TruncatedHeader("ext", off, f"compare-and-swap extension header needs "
                                      f"36 bytes, {end - off} left")
            a, dt, sc, ch, cl, sh, sl = _EXT_CAS.unpack_from(data, off)
            return tss, pds, ses, CasExt(a, dt, sc, ch << 64 | cl, sh << 64 | sl), off + 36
        if off + 4 > end:
            raise TruncatedHeader("ext", off, f"atomic extension header needs 4 bytes, "
                                  f"{end - off} left")
        a, dt, sc = _EXT_ATOMIC.unpack_from(data, off)
        return tss, pds, ses, AtomicExt(a, dt, sc), off + 4
    if op in _RNDV_OPS and nh == 3:
        if off + 24 > end:
            raise TruncatedHeader("ext", off, f"rendezvous extension header needs 24 bytes, "
                                  f"{end - off} left")
        el, w, ro, rk = _EXT_RNDV.unpack_from(data, off)
        return tss, pds, ses, RendezvousExt(el, w >> 24, w >> 12 & 0xFFF, w & 0xFFF, ro,
                                            rk), off + 24
    return tss, pds, ses, None, off


def decode_uet(data: bytes | bytearray | memoryview, trailer_len: int = 0,
               **frame_fields: Any) -> Frame:
    """Decode the bytes after the UDP header ([TSS] / PDS / [SES [ext]] / payload /
    trailer) into a :class:`Frame`.

    ``frame_fields`` fill in what the bytes do not carry (``src_ip``, ``dst_ip``, ``ev``
    from the UDP source port, ...). Offsets in errors count from the start of ``data``.
    """
    try:
        end = len(data) - trailer_len
        if end < 0 or trailer_len < 0:
            raise BadLength("trailer", 0, f"trailer of {trailer_len} bytes does not fit in "
                            f"{len(data)} bytes")
        tss, pds, ses, ext, poff = _decode_uet(data, 0, end)
        return Frame(pds, ses, ext, bytes(data[poff:end]), tss=tss,
                     trailer=bytes(data[end:]), **frame_fields)
    except DecodeError:
        raise
    except Exception as exc:  # the decoder must never leak anything else
        raise DecodeError("frame", 0, f"undecodable input ({type(exc).__name__}: {exc})") \
            from exc


def _decode_l3(data: Any, udp_port: int | None, ip_proto: int,
               wire_len: int | None = None) -> tuple[int, int, bool, tuple]:
    """Decode Ethernet/IP/UDP-or-entropy. Returns (uet_offset, l3_end, is_udp, info).

    ``wire_len`` (a capture's original length, more than ``len(data)``): lengths are
    checked against it, headers must still lie in ``data``, the UDP checksum (over bytes
    not captured) is not verified; ``l3_end`` may then exceed ``len(data)``."""
    n = len(data)
    nw = n if wire_len is None or wire_len < n else wire_len
    if n < ETH_HLEN:
        raise TruncatedHeader("ethernet", 0, f"Ethernet header needs 14 bytes, {n} given")
    dmac, smac, etype = _ETH.unpack_from(data, 0)
    if etype == ETHERTYPE_IPV4:
        if n < 34:
            raise TruncatedHeader("ipv4", 14, f"IPv4 header needs 20 bytes, {n - 14} left")
        vihl, tos, tot, ipid, frag, ttl, proto, _c, src, dst = _IP4.unpack_from(data, 14)
        if vihl != 0x45:
            if vihl >> 4 != 4:
                raise InconsistentHeader("ipv4", 14, f"IP version {vihl >> 4} under "
                                         "ethertype 0x0800")
            if vihl & 0xF < 5:
                raise BadLength("ipv4", 14, f"IHL {vihl & 0xF} is below 5")
            raise Unsupported("ipv4", 14, "IPv4 options are not supported")
        if tot < 20 or 14 + tot > nw:
            raise BadLength("ipv4", 16, f"IPv4 total length {tot} does not fit the "
                            f"{nw - 14} bytes after the Ethernet header")
        if frag & 0x3FFF:
            raise Unsupported("ipv4", 20, "IPv4 fragments are not supported")
        if int.from_bytes(data[14:34], "big") % 0xFFFF:
            raise BadChecksum("ipv4", 24, "IPv4 header checksum mismatch")
        end = 14 + tot
        l4 = 34
        dscp, ecn, hop = tos >> 2, tos & 3, ttl
    elif etype == ETHERTYPE_IPV6:
        if n < 54:
            raise TruncatedHeader("ipv6", 14, f"IPv6 header needs 40 bytes, {n - 14} left")
        vtf, plen, proto, hop, src, dst = _IP6.unpack_from(data, 14)
        if vtf >> 28 != 6:
            raise InconsistentHeader("ipv6", 14, f"IP version {vtf >> 28} under "
                                     "ethertype 0x86dd")
        if 54 + plen > nw:
            raise BadLength("ipv6", 18, f"IPv6 payload length {plen} does not fit the "
                            f"{nw - 54} bytes after the IPv6 header")
        end = 54 + plen
        l4 = 54
        tc = vtf >> 20 & 0xFF
        dscp, ecn, ipid = tc >> 2, tc & 3, 0
    else:
        raise UnknownType("ethernet", 12, f"ethertype 0x{etype:04x} is not IPv4 or IPv6")
    v6 = etype == ETHERTYPE_IPV6
    if proto == IPPROTO_UDP:
        if l4 + 8 > end:
            raise TruncatedHeader("udp", l4, f"UDP header needs 8 bytes, {end - l4} left")
        if l4 + 8 > n:
            raise TruncatedHeader("udp", l4, f"UDP header needs 8 bytes, {n - l4} captured")
        sport, dport, ulen, ucsum = _UDP.unpack_from(data, l4)
        if ulen != end - l4:
            raise BadLength("udp", l4 + 4, f"UDP length {ulen} but the IP payload is "
                            f"{end - l4} bytes")
        if udp_port is not None and dport != udp_port:
            raise UnknownType("udp", l4 + 2, f"UDP destination port {dport} is not UET "
                              f"({udp_port})")
        if ucsum:
            # not checked when a capture cut the frame: it covers bytes we do not have
            m = (_udp_pseudo_sum(src, dst, ulen) + _sum16(data[l4:end])) % 0xFFFF \
                if end <= n else 0
            if m:
                raise BadChecksum("udp", l4 + 6, "UDP checksum mismatch")
        elif v6:
            raise BadChecksum("udp", l4 + 6, "zero UDP checksum over IPv6")
        info = (dmac, smac, src, dst, sport, dscp, ecn, hop, ipid, dport, bool(ucsum or v6),
                "udp", UET_DEFAULT_IP_PROTO)
        return l4 + 8, end, True, info
    if proto == ip_proto:
        if l4 + 4 > end:
            raise TruncatedHeader("entropy", l4, f"entropy header needs 4 bytes, "
                                  f"{end - l4} left")
        if l4 + 4 > n:
            raise TruncatedHeader("entropy", l4, f"entropy header needs 4 bytes, "
                                  f"{n - l4} captured")
        ev = _H.unpack_from(data, l4)[0]
        info = (dmac, smac, src, dst, ev, dscp, ecn, hop, ipid, UET_UDP_PORT, False, "ip",
                proto)
        return l4 + 4, end, False, info
    raise UnknownType("ipv6" if v6 else "ipv4", 20 if v6 else 23,
                      f"IP protocol {proto} is neither UDP nor the UET protocol {ip_proto}")


def _decode_l3_fast(data: Any, udp_port: int | None) -> tuple | None:
    """:func:`_decode_l3` for the common frame (IPv4 without options, UDP with checksum 0)
    in one ``unpack_from``; None for anything else or anything wrong, which the full
    decoder then handles (and reports) exactly as before."""
    if len(data) < 42:
        return None
    (dmac, smac, et, vihl, tos, tot, ipid, frag, ttl, proto, _c, src, dst, sport, dport,
     ulen, ucsum) = _ETH_IP4_UDP.unpack_from(data, 0)
    if (et != b"\x08\x00" or vihl != 0x45 or proto != IPPROTO_UDP or ucsum
            or ulen != tot - 20 or tot < 28 or 14 + tot > len(data) or frag & 0x3FFF
            or (udp_port is not None and dport != udp_port)
            or int.from_bytes(data[14:34], "big") % 0xFFFF):
        return None
    return 42, 14 + tot, True, (dmac, smac, src, dst, sport, tos >> 2, tos & 3, ttl, ipid,
                                dport, False, "udp", UET_DEFAULT_IP_PROTO)


def _decode_fast(data: Any, udp_port: int | None) -> Frame | None:
    """:func:`decode_frame` of the two common frames (see ``_FAST_REQ``) without a
    trailer, or None: anything else, or anything the general path would refuse, goes there
    (and is decoded, or reported, exactly as before). Each form is unpacked in one call
    straight into its fields; the IPv4 header checksum is verified from them (the word
    sum of the header modulo 0xFFFF, as :func:`_decode_l3` computes it over the bytes)."""
    n = len(data)
    if n < 74:
        return None
    word = data[42] << 8 | data[43]
    t = word >> 11
    nh = word >> 7 & 0xF
    flags = word & 0x7F
    if nh == 3 and t in _REQ_TYPES:
        if t <= 3:
            if n < 98:
                return None
            hl = 98
            (dmac, smac, et, vihl, tos, tot, ipid, frag, ttl, proto, ck, src, dst, sport,
             dport, ulen, ucsum, _w, cpo, psn, spdcid, last, b0, b1, msg_id, gj, pid, ri,
             boff, init, mkey, tail, rlen) = _FAST_REQ.unpack_from(data, 0)
            ccc = credit = 0
        else:
            if n < 102:
                return None
            hl = 102
            (dmac, smac, et, vihl, tos, tot, ipid, frag, ttl, proto, ck, src, dst, sport,
             dport, ulen, ucsum, _w, cpo, psn, spdcid, last, ccw, b0, b1, msg_id, gj, pid,
             ri, boff, init, mkey, tail, rlen) = _FAST_REQ_CC.unpack_from(data, 0)
            ccc, credit = ccw >> 24, ccw & 0xFFFFFF
        end = 14 + tot
        if (et != b"\x08\x00" or vihl != 0x45 or proto != IPPROTO_UDP or ucsum
                or ulen != tot - 20 or end < hl or end > n or frag & 0x3FFF
                or (udp_port is not None and dport != udp_port)
                or (0x4511 + tos + tot + ipid + frag + (ttl << 8) + ck
                    + (_ip4_wsum.get(src) or _wsum4(src))
                    + (_ip4_wsum.get(dst) or _wsum4(dst))) % 0xFFFF):
            return None
        op = b0 & 0x3F
        if op in _ATOMIC_OPS or op in _RNDV_OPS:
            return None  # an extension header follows: the general path
        if flags & 0x04:
            pds: Any = PdsRequest(t, 3, flags, cpo, psn, spdcid, 0, last >= 0x8000,
                                  last & 0xFFF, ccc, credit)
        else:
            pds = PdsRequest(t, 3, flags, cpo, psn, spdcid, last, False, 0, ccc, credit)
        if b1 & 0x01:
            ses: Any = SesStandard(op, b1 >> 6, b1 & 0x3F, msg_id, gj >> 24, gj & 0xFFFFFF,
                                   pid & 0xFFF, ri & 0xFFF, boff, init, mkey, tail, 0, 0, rlen)
        else:
            ses = SesStandard(op, b1 >> 6, b1 & 0x3F, msg_id, gj >> 24, gj & 0xFFFFFF,
                              pid & 0xFFF, ri & 0xFFF, boff, init, mkey, 0,
                              tail >> 32 & 0x3FFF, tail & 0xFFFFFFFF, rlen)
        payload = bytes(data[hl:end])
    elif t == 8 and not nh and not word & 0x08:
        cc = data[54] >> 4
        if cc == 0:
            (dmac, smac, et, vihl, tos, tot, ipid, frag, ttl, proto, ck, src, dst, sport,
             dport, ulen, ucsum, _w, aoff, cack, spdcid, dpdcid, ccb, mpr, soff, bitmap, a,
             b, ooo) = _FAST_ACK_CC.unpack_from(data, 0)
        elif cc == 1:
            (dmac, smac, et, vihl, tos, tot, ipid, frag, ttl, proto, ck, src, dst, sport,
             dport, ulen, ucsum, _w, aoff, cack, spdcid, dpdcid, ccb, mpr, soff, bitmap, a,
             b, ooo) = _FAST_ACK_CREDIT.unpack_from(data, 0)
        else:
            return None
        end = 14 + tot
        if (et != b"\x08\x00" or vihl != 0x45 or proto != IPPROTO_UDP or ucsum
                or ulen != tot - 20 or end < 74 or end > n or frag & 0x3FFF
                or (udp_port is not None and dport != udp_port)
                or (0x4511 + tos + tot + ipid + frag + (ttl << 8) + ck
                    + (_ip4_wsum.get(src) or _wsum4(src))
                    + (_ip4_wsum.get(dst) or _wsum4(dst))) % 0xFFFF):
            return None
        if cc == 0:
            pds = PdsAckCc(8, 0, flags, aoff, cack, spdcid, dpdcid, 0, ccb & 0xF, mpr,
                           soff, bitmap, a, b >= 0x80000000, b >> 24 & 0x7F,
                           b & 0xFFFFFF, 0, ooo, b"", b"")
        else:
            pds = PdsAckCc(8, 0, flags, aoff, cack, spdcid, dpdcid, 1, ccb & 0xF, mpr, soff,
                           bitmap, 0, False, 0, 0, a >> 8, ooo, b"", b"")
        ses = None
        payload = bytes(data[74:end])
    else:
        return None
    return Frame(pds, ses, None, payload, _mac_text.get(smac) or _mac_to_text(smac),
                 _mac_text.get(dmac) or _mac_to_text(dmac),
                 _ip_text.get(src) or _ip_to_text(src), _ip_text.get(dst) or _ip_to_text(dst),
                 sport, tos >> 2, tos & 3, ttl, ipid, dport, False, "udp",
                 UET_DEFAULT_IP_PROTO, None, b"")


_REQ_TYPES = frozenset({2, 3, 13, 14})


def decode_frame(data: bytes | bytearray | memoryview, trailer_len: int = 0, *,
                 udp_port: int | None = UET_UDP_PORT,
                 ip_proto: int = UET_DEFAULT_IP_PROTO) -> Frame:
    """Decode a whole Ethernet frame into a :class:`Frame`.

    ``trailer_len`` bytes at the end of the IP payload are returned as ``Frame.trailer``.
    ``udp_port`` is the UET destination port (``None``: any UDP port is UET);
    ``ip_proto`` the IP protocol of native-IP mode (entropy header). Bytes after the IP
    datagram (Ethernet padding) are ignored. A trimmed frame (SES payload shorter than an
    SES length field says) is not an error: that is for the PDS/SES to judge.

    For IPv6 the decoded ``udp_checksum`` is ``True`` (the checksum is mandatory); in
    native-IP mode it is ``False``.
    """
    try:
        if not trailer_len:
            frame = ((_c_decode(data, udp_port) if _c_decode is not None else None)
                     or _decode_fast(data, udp_port))
            if frame is not None:
                return frame
        return _decode_general(data, trailer_len, udp_port, ip_proto)
    except DecodeError:
        raise
    except Exception as exc:  # the decoder must never leak anything else
        raise DecodeError("frame", 0, f"undecodable input ({type(exc).__name__}: {exc})") \
            from exc


class Envelope(NamedTuple):
    """What carries the UET bytes of a frame: Ethernet, IP and UDP or the entropy header
    (the :class:`Frame` fields of the same names; ``decode_uet(uet, **env._asdict())``
    rebuilds the frame)."""

    src_mac: str
    dst_mac: str
    src_ip: str
    dst_ip: str
    ev: int
    dscp: int
    ecn: int
    ttl: int
    ip_id: int
    udp_dport: int
    udp_checksum: bool
    encap: str
    ip_proto: int


def split_frame(data: bytes | bytearray | memoryview, *, udp_port: int | None = UET_UDP_PORT,
                ip_proto: int = UET_DEFAULT_IP_PROTO) -> tuple[Envelope, int, int]:
    """The envelope of a whole frame, checked as :func:`decode_frame` checks it, without
    decoding what follows it: ``(envelope, offset of the UET bytes, end of the IP
    datagram)``. For frames whose UET bytes must be processed before they can be decoded
    (a TSS-encrypted PDS header)."""
    try:
        fast = _decode_l3_fast(data, udp_port)
        uoff, end, _udp, info = fast if fast is not None else _decode_l3(data, udp_port,
                                                                          ip_proto)
        (dmac, smac, src, dst, ev, dscp, ecn, hop, ipid, dport, ucs, encap, proto) = info
        env = Envelope(_mac_text.get(smac) or _mac_to_text(smac),
                       _mac_text.get(dmac) or _mac_to_text(dmac),
                       _ip_text.get(src) or _ip_to_text(src),
                       _ip_text.get(dst) or _ip_to_text(dst), ev, dscp, ecn, hop, ipid,
                       dport, ucs, encap, proto)
        return env, uoff, end
    except DecodeError:
        raise
    except Exception as exc:  # the decoder must never leak anything else
        raise DecodeError("frame", 0, f"undecodable input ({type(exc).__name__}: {exc})") \
            from exc


def decode_enveloped(data: bytes | bytearray | memoryview, env: Envelope) -> Frame:
    """:func:`decode_uet` of UET bytes whose envelope :func:`split_frame` gave (no
    trailer): the frame with the envelope's fields, without keyword arguments (the TSS
    receive path decodes every decrypted frame this way)."""
    try:
        tss, pds, ses, ext, poff = _decode_uet(data, 0, len(data))
        return Frame(pds, ses, ext, bytes(data[poff:]), *env, tss, b"")
    except DecodeError:
        raise
    except Exception as exc:  # the decoder must never leak anything else
        raise DecodeError("frame", 0, f"undecodable input ({type(exc).__name__}: {exc})") \
            from exc


def _decode_general(data: Any, trailer_len: int, udp_port: int | None,
                    ip_proto: int) -> Frame:
    """:func:`decode_frame` of any frame, without its catch-all (the fast path's
    reference in the tests)."""
    fast = _decode_l3_fast(data, udp_port)
    uoff, end, _udp, info = fast if fast is not None else _decode_l3(data, udp_port, ip_proto)
    pend = end - trailer_len
    if pend < uoff or trailer_len < 0:
        raise BadLength("trailer", uoff, f"trailer of {trailer_len} bytes does not fit "
                        f"in the {end - uoff} bytes of UET data")
    tss, pds, ses, ext, poff = _decode_uet(data, uoff, pend)
    (dmac, smac, src, dst, ev, dscp, ecn, hop, ipid, dport, ucs, encap, proto) = info
    return Frame(pds, ses, ext, bytes(data[poff:pend]), _mac_text.get(smac)
                 or _mac_to_text(smac), _mac_text.get(dmac) or _mac_to_text(dmac),
                 _ip_text.get(src) or _ip_to_text(src), _ip_text.get(dst)
                 or _ip_to_text(dst), ev, dscp, ecn, hop, ipid, dport, ucs, encap, proto,
                 tss, bytes(data[pend:end]))


class FrameHeaders(NamedTuple):
    """What :func:`decode_headers` found: the decoded ``frame`` (its ``payload`` and
    ``trailer`` hold what was captured of them), the frame's length on the wire and in the
    capture, and the payload length on the wire."""

    frame: Frame
    wire_len: int
    cap_len: int
    payload_len: int

    @property
    def truncated(self) -> bool:
        """The capture holds less than the wire carried (a snap length cut it)."""
        return self.cap_len < self.wire_len


def decode_headers(data: bytes | bytearray | memoryview, orig_len: int | None = None,
                   trailer_len: int = 0, *, udp_port: int | None = UET_UDP_PORT,
                   ip_proto: int = UET_DEFAULT_IP_PROTO) -> FrameHeaders:
    """Decode a captured frame that a snap length may have cut: ``orig_len`` is its length
    on the wire (the pcap/pcapng original length; None or ``len(data)``: not cut, exactly
    :func:`decode_frame`).

    IP and UDP lengths are checked against the wire length; every header (Ethernet to the
    SES extension) must lie in the captured bytes, else :class:`TruncatedHeader` names
    the one that is cut; the UDP checksum, which covers bytes not captured, is not checked.
    """
    n = len(data)
    if orig_len is None or orig_len <= n:
        frame = decode_frame(data, trailer_len, udp_port=udp_port, ip_proto=ip_proto)
        return FrameHeaders(frame, n, n, len(frame.payload))
    try:
        uoff, end, _udp, info = _decode_l3(data, udp_port, ip_proto, orig_len)
        pend = end - trailer_len
        if pend < uoff or trailer_len < 0:
            raise BadLength("trailer", uoff, f"trailer of {trailer_len} bytes does not fit "
                            f"in the {end - uoff} bytes of UET data")
        cap_end = min(pend, n)
        try:
            tss, pds, ses, ext, poff = _decode_uet(data, uoff, cap_end)
        except TruncatedHeader as exc:
            if cap_end == pend:
                raise
            raise TruncatedHeader(exc.header, exc.offset, f"{exc.reason} (the capture "
                                  f"kept {n} of {orig_len} bytes)") from None
        (dmac, smac, src, dst, ev, dscp, ecn, hop, ipid, dport, ucs, encap, proto) = info
        frame = Frame(pds, ses, ext, bytes(data[poff:cap_end]), _mac_to_text(smac),
                      _mac_to_text(dmac), _ip_to_text(src), _ip_to_text(dst), ev, dscp, ecn,
                      hop, ipid, dport, ucs, encap, proto, tss, bytes(data[pend:min(end, n)]))
        return FrameHeaders(frame, orig_len, n, pend - poff)
    except DecodeError:
        raise
    except Exception as exc:  # the decoder must never leak anything else
        raise DecodeError("frame", 0, f"undecodable input ({type(exc).__name__}: {exc})") \
            from exc


#: PDS types that answer the receiver's own traffic (ACKs, NACKs, RUDI responses)
_ANSWERS = frozenset({5, 7, 8, 9, 10, 12})
#: PDS types whose requests may carry SYN (RUD/ROD requests, CC requests, CPs)
_SYN_CAPABLE = frozenset({2, 3, 11, 13, 14})


def opens_state(data: bytes | bytearray | memoryview) -> bool:
    """Would the UET bytes after the UDP header (``data``) make the receiver create state,
    or can they not be read at once? True for a SYN request or control packet, a RUDI or
    UUD request, a TSS-protected packet and anything shorter than a PDS prologue; False
    for ACKs, NACKs, RUDI responses and requests / CPs of an established PDC (no SYN).

    One look at the first 16 bits, nothing decoded: what a receive loop needs to serve the
    PDCs it already has before the packets that would open new ones (a SYN flood must not
    starve an established peer)."""
    if len(data) < 2:
        return True
    word = data[0] << 8 | data[1]
    t = word >> 11
    if t in _ANSWERS:
        return False
    if t in _SYN_CAPABLE:
        return bool(word & 0x04)
    return True


# --------------------------------------------------------------------------- switch helpers


def peek_flow(data: bytes | bytearray | memoryview, *,
              ip_proto: int = UET_DEFAULT_IP_PROTO) -> tuple[bytes, bytes, int, int, int]:
    """5-tuple of a raw frame for ECMP hashing, without a full decode.

    Returns ``(src_ip, dst_ip, proto, sport, dport)`` with packed addresses (4 or 16 bytes).
    For UDP ``sport`` is the EV; in native-IP mode (protocol ``ip_proto``) ``sport`` is the
    EV of the entropy header and ``dport`` is 0. Other protocols give ports 0.
    """
    try:
        etype = _H.unpack_from(data, 12)[0]
        if etype == ETHERTYPE_IPV4:
            vihl = data[14]
            proto = data[23]
            src = bytes(data[26:30])
            dst = bytes(data[30:34])
            l4 = 14 + (vihl & 0xF) * 4
            if len(dst) != 4:
                raise TruncatedHeader("ipv4", 14, "IPv4 header is truncated")
        elif etype == ETHERTYPE_IPV6:
            proto = data[20]
            src = bytes(data[22:38])
            dst = bytes(data[38:54])
            l4 = 54
            if len(dst) != 16:
                raise TruncatedHeader("ipv6", 14, "IPv6 header is truncated")
        else:
            raise UnknownType("ethernet", 12, f"ethertype 0x{etype:04x} is not IPv4 or IPv6")
        if proto == IPPROTO_UDP:
            sport, dport = _HH.unpack_from(data, l4)
            return src, dst, proto, sport, dport
        if proto == ip_proto:
            return src, dst, proto, _H.unpack_from(data, l4)[0], 0
        return src, dst, proto, 0, 0
    except DecodeError:
        raise
    except (struct.error, IndexError) as exc:
        raise TruncatedHeader("frame", 0, f"frame too short for a 5-tuple ({exc})") from None


def uet_header_length(data: bytes | bytearray | memoryview, *,
                      ip_proto: int = UET_DEFAULT_IP_PROTO) -> int:
    """Bytes from the start of the frame to the end of the PDS + SES + extension headers.

    This is the part a trimming switch must keep. Raises :class:`DecodeError` when the
    frame is not a decodable UET frame (checksums are not verified here), and
    :class:`Unsupported` for a TSS frame: what follows its TSS header is encrypted, so no
    header boundary can be found (and a cut frame could not authenticate anyway).
    """
    try:
        etype = _H.unpack_from(data, 12)[0]
        if etype == ETHERTYPE_IPV4:
            l4 = 14 + (data[14] & 0xF) * 4
            proto = data[23]
            end = 14 + _H.unpack_from(data, 16)[0]
        elif etype == ETHERTYPE_IPV6:
            l4 = 54
            proto = data[20]
            end = 54 + _H.unpack_from(data, 18)[0]
        else:
            raise UnknownType("ethernet", 12, f"ethertype 0x{etype:04x} is not IPv4 or IPv6")
        if proto == IPPROTO_UDP:
            off = l4 + 8
        elif proto == ip_proto:
            off = l4 + 4
        else:
            raise UnknownType("ip", l4, f"IP protocol {proto} is not UET")
        end = min(end, len(data))
        if off < end and data[off] >> 3 == 1:
            raise Unsupported("tss", off, "the headers after a TSS header are encrypted: "
                              "the frame cannot be trimmed")
        _tss, _pds, _ses, _ext, hend = _decode_uet(data, off, end)
        return hend
    except DecodeError:
        raise
    except Exception as exc:
        raise TruncatedHeader("frame", 0, f"frame too short ({type(exc).__name__}: {exc})") \
            from None


def get_dscp_ecn(data: bytes | bytearray | memoryview) -> tuple[int, int]:
    """``(dscp, ecn)`` of a raw IPv4 or IPv6 frame."""
    try:
        etype = _H.unpack_from(data, 12)[0]
        if etype == ETHERTYPE_IPV4:
            tos = data[15]
        elif etype == ETHERTYPE_IPV6:
            tos = (_H.unpack_from(data, 14)[0] >> 4) & 0xFF
        else:
            raise UnknownType("ethernet", 12, f"ethertype 0x{etype:04x} is not IPv4 or IPv6")
    except (struct.error, IndexError):
        raise TruncatedHeader("frame", 0, "frame too short for an IP header") from None
    return tos >> 2, tos & 3


def _adjust_py(csum: int, old16: int, new16: int) -> int:
    """RFC 1624 incremental update: HC' = ~(~HC + ~m + m')."""
    s = (~csum & 0xFFFF) + (~old16 & 0xFFFF) + new16
    s = (s & 0xFFFF) + (s >> 16)
    s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


# uet.native.checksum_adjust: same contract and results; a few percent off set_dscp_ecn
_adjust = _native.checksum_adjust if _native.IMPLEMENTATION == "native" else _adjust_py


def set_dscp_ecn(buf: bytearray, dscp: int | None = None, ecn: int | None = None) -> None:
    """Rewrite DSCP and/or ECN of a raw frame in place (IPv4 checksum updated per RFC 1624).

    The UDP checksum does not cover the IP TOS / traffic class, so it stays valid.
    """
    try:
        etype = _H.unpack_from(buf, 12)[0]
        if etype == ETHERTYPE_IPV4:
            tos = buf[15]
            new = ((tos >> 2 if dscp is None else dscp & 0x3F) << 2
                   | (tos & 3 if ecn is None else ecn & 3))
            if new != tos:
                old16 = _H.unpack_from(buf, 14)[0]
                new16 = (old16 & 0xFF00) | new
                buf[15] = new
                _H.pack_into(buf, 24, _adjust(_H.unpack_from(buf, 24)[0], old16, new16))
        elif etype == ETHERTYPE_IPV6:
            w = _I.unpack_from(buf, 14)[0]
            tc = w >> 20 & 0xFF
            new = ((tc >> 2 if dscp is None else dscp & 0x3F) << 2
                   | (tc & 3 if ecn is None else ecn & 3))
            _I.pack_into(buf, 14, (w & 0xF00FFFFF) | new << 20)
        else:
            raise UnknownType("ethernet", 12, f"ethertype 0x{etype:04x} is not IPv4 or IPv6")
    except (struct.error, IndexError):
        raise TruncatedHeader("frame", 0, "frame too short for an IP header") from None


def mark_ce(buf: bytearray) -> bool:
    """Set ECN to CE (3) if the frame is ECN-capable (ECT(0)/ECT(1)); return whether the
    frame now carries CE. A Not-ECT frame is left alone (a switch would drop it instead)."""
    ecn = get_dscp_ecn(buf)[1]
    if ecn == 0:
        return False
    if ecn != 3:
        set_dscp_ecn(buf, ecn=3)
    return True


def trim_frame(data: bytes | bytearray | memoryview, keep: int | None = None, *,
               dscp: int | None = None, ip_proto: int = UET_DEFAULT_IP_PROTO) -> bytes:
    """Cut a frame to its first ``keep`` bytes (default: :func:`uet_header_length`), fixing
    the IP and UDP lengths and checksums, optionally re-marking DSCP (the trimmed class).

    The result decodes as a consistent frame whose payload is shorter than its SES header
    says (ref. 6.3). A trailer, if any, is cut together with the payload.
    """
    if keep is None:
        keep = uet_header_length(data, ip_proto=ip_proto)
    out = bytearray(data[:keep])
    try:
        etype = _H.unpack_from(out, 12)[0]
        if etype == ETHERTYPE_IPV4:
            l4 = 14 + (out[14] & 0xF) * 4
            _H.pack_into(out, 16, keep - 14)
            _H.pack_into(out, 24, 0)
            if dscp is not None:
                out[15] = (dscp & 0x3F) << 2 | (out[15] & 3)
            _H.pack_into(out, 24, _ipv4_header_checksum(out[14:l4]))
            proto, src, dst = out[23], bytes(out[26:30]), bytes(out[30:34])
        elif etype == ETHERTYPE_IPV6:
            l4 = 54
            _H.pack_into(out, 18, keep - 54)
            if dscp is not None:
                w = _I.unpack_from(out, 14)[0]
                _I.pack_into(out, 14, (w & 0xF03FFFFF) | (dscp & 0x3F) << 22)
            proto, src, dst = out[20], bytes(out[22:38]), bytes(out[38:54])
        else:
            raise UnknownType("ethernet", 12, f"ethertype 0x{etype:04x} is not IPv4 or IPv6")
        if proto == IPPROTO_UDP:
            ulen = keep - l4
            _H.pack_into(out, l4 + 4, ulen)
            if _H.unpack_from(out, l4 + 6)[0] or etype == ETHERTYPE_IPV6:
                _H.pack_into(out, l4 + 6, 0)
                m = (_udp_pseudo_sum(src, dst, ulen) + _sum16(out[l4:])) % 0xFFFF
                _H.pack_into(out, l4 + 6, _finish(m))
    except (struct.error, IndexError):
        raise TruncatedHeader("frame", 0, "frame too short to trim") from None
    return bytes(out)
