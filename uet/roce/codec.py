"""Fast RoCEv2 codec: :class:`~uet.roce.records.RoceFrame` <-> bytes, byte-exact with the
scapy layers of :mod:`uet.roce.layers` (``scapy.contrib.roce`` plus RETH and ImmDt).

Frame layout: Ethernet / IPv4 (IHL 5, DF) or IPv6 / UDP (destination 4791) / BTH /
[RETH] / [ImmDt] / [AETH] / payload / pad / ICRC. Which extension headers follow the BTH
is fixed by its opcode (IBTA vol. 1 ch. 9). The payload is padded to a multiple of 4
bytes and the BTH pad count says by how much; the encoder sets both. A CNP (opcode 0x81)
carries 16 reserved bytes.

The ICRC (IBTA annex A17.4.1) is the CRC-32 of Ethernet (zlib's) over an 8-byte pseudo
LRH of ones, then the IP header, UDP header, BTH and everything up to the ICRC, with the
fields routers may change masked to ones: IPv4 TOS, TTL and header checksum (IPv6 traffic
class, flow label and hop limit), the UDP checksum, and the BTH byte holding FECN, BECN
and the 6 reserved bits. It is stored least significant byte first (as scapy does), so a
switch rewriting ECN, the TTL or the IP checksum leaves it valid.

Errors are :class:`uet.wire.errors.DecodeError` subclasses naming the header (``ethernet``,
``ipv4``, ``ipv6``, ``udp``, ``bth``, ``reth``, ``aeth``, ``imm``, ``cnp``, ``icrc``), the
byte offset and the reason; nothing else escapes :func:`decode_frame`.
"""

from __future__ import annotations

import struct
import zlib
from typing import Any

from uet.roce.constants import (
    AETH_OPCODES,
    BTH_LEN,
    CNP_PAD_LEN,
    ICRC_LEN,
    IMM_OPCODES,
    KNOWN_OPCODES,
    PAYLOAD_OPCODES,
    RETH_OPCODES,
    ROCE_UDP_PORT,
    Opcode,
)
from uet.roce.records import Aeth, Bth, Reth, RoceFrame
from uet.wire.codec import (
    _ip_pack,
    _ip_text,
    _ip_to_bytes,
    _ip_to_text,
    _ipv4_header_checksum,
    _mac_pack,
    _mac_text,
    _mac_to_bytes,
    _mac_to_text,
    _sum16,
    _udp_pseudo_sum,
)
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

__all__ = ["encode_frame", "decode_frame", "icrc", "icrc_valid", "is_roce", "peek_bth"]

_S = struct.Struct
_ETH_IP4_UDP = _S("!6s6s2sBBHHHBBH4s4sHHHH")  # 42 bytes: Ethernet + IPv4 + UDP
_ETH_IP6_UDP = _S("!6s6s2sIHBB16s16sHHHH")  # 62 bytes: Ethernet + IPv6 + UDP
_BTH = _S("!BBHII")
_RETH = _S("!QII")
_I = _S("!I")
_ICRC = _S("<I")
_H = _S("!H")
_IPV4_DF = 0x4000
_ETHERTYPE_IPV4 = b"\x08\x00"
_ETHERTYPE_IPV6 = b"\x86\xdd"
_UDP = 17
_LRH_CRC = zlib.crc32(b"\xff" * 8)
_FF2 = b"\xff\xff"
_KNOWN = KNOWN_OPCODES
_RETH_OPS = frozenset(int(o) for o in RETH_OPCODES)
_IMM_OPS = frozenset(int(o) for o in IMM_OPCODES)
_AETH_OPS = frozenset(int(o) for o in AETH_OPCODES)
_PAYLOAD_OPS = frozenset(int(o) for o in PAYLOAD_OPCODES)
_CNP = int(Opcode.CNP)
_MAX_EXT = 16 + 4 + 4 + CNP_PAD_LEN


# --------------------------------------------------------------------------- ICRC

def _masked_crc(data: Any, l3: int, end: int, v6: bool) -> int:
    """CRC-32 of the pseudo LRH and ``data[l3:end]`` (IP header up to the ICRC) with the
    variant fields masked (see the module docstring)."""
    if v6:
        hdr = bytearray(data[l3:l3 + 60])  # IPv6 40 + UDP 8 + BTH 12
        hdr[0] |= 0x0F  # traffic class (high nibble) ...
        hdr[1:4] = b"\xff\xff\xff"  # ... its low nibble and the flow label
        hdr[7] = 0xFF  # hop limit
        hdr[46:48] = _FF2  # UDP checksum
        hdr[52] = 0xFF  # BTH FECN, BECN, reserved 6
    else:
        hdr = bytearray(data[l3:l3 + 40])  # IPv4 20 + UDP 8 + BTH 12
        hdr[1] = 0xFF  # TOS
        hdr[8] = 0xFF  # TTL
        hdr[10:12] = _FF2  # header checksum
        hdr[26:28] = _FF2  # UDP checksum
        hdr[32] = 0xFF  # BTH FECN, BECN, reserved 6
    crc = zlib.crc32(hdr, _LRH_CRC)
    return zlib.crc32(memoryview(data)[l3 + len(hdr):end], crc)


def _wire(crc: int) -> int:
    """The ICRC field as a number read in network order (how scapy's ``BTH.icrc`` and
    tshark's ``infiniband.invariant.crc`` show it): the CRC's bytes reversed."""
    return int.from_bytes((crc & 0xFFFFFFFF).to_bytes(4, "little"), "big")


def icrc(frame_bytes: bytes | bytearray | memoryview) -> int:
    """The ICRC field a whole RoCEv2 frame should carry (computed over everything before
    its last 4 bytes), as :func:`decode_frame` reports it in ``RoceFrame.icrc``."""
    v6 = frame_bytes[12:14] == _ETHERTYPE_IPV6
    return _wire(_masked_crc(frame_bytes, 14, len(frame_bytes) - ICRC_LEN, v6))


def icrc_valid(frame_bytes: bytes | bytearray | memoryview) -> bool:
    """Whether the last 4 bytes of a RoCEv2 frame are its correct ICRC."""
    if len(frame_bytes) < 14 + 20 + 8 + BTH_LEN + ICRC_LEN:
        return False
    return _I.unpack_from(frame_bytes, len(frame_bytes) - 4)[0] == icrc(frame_bytes)


# --------------------------------------------------------------------------- encoding

def _pack_transport(buf: bytearray, off: int, f: RoceFrame, pad: int) -> int:
    """Pack BTH and the extension headers at ``off``; return the offset after them."""
    b = f.bth
    op = b.opcode
    try:
        _BTH.pack_into(buf, off, op,
                       (b.se << 7) | (b.migreq << 6) | (pad << 4) | (b.tver & 0xF), b.pkey,
                       ((b.fecn << 7 | b.becn << 6 | (b.resv6 & 0x3F)) << 24) | b.dqpn,
                       ((b.ackreq << 7 | (b.resv7 & 0x7F)) << 24) | b.psn)
        if not 0 <= b.dqpn <= 0xFFFFFF or not 0 <= b.psn <= 0xFFFFFF or not 0 <= b.tver < 16:
            raise EncodeError(f"BTH field out of range (dqpn {b.dqpn}, psn {b.psn}, "
                              f"tver {b.tver})")
        off += BTH_LEN
        if op == _CNP:
            pad_bytes = f.cnp_pad
            if len(pad_bytes) != CNP_PAD_LEN:
                raise EncodeError(f"a CNP carries {CNP_PAD_LEN} reserved bytes, "
                                  f"not {len(pad_bytes)}")
            buf[off:off + CNP_PAD_LEN] = pad_bytes
            return off + CNP_PAD_LEN
        if op not in _KNOWN:
            raise EncodeError(f"BTH opcode 0x{op:02x} is not one the codec knows")
        if op in _RETH_OPS:
            r = f.reth
            if r is None:
                raise EncodeError(f"opcode {Opcode(op).name} needs a RETH")
            _RETH.pack_into(buf, off, r.va, r.rkey, r.dma_len)
            off += 16
        elif f.reth is not None:
            raise EncodeError(f"opcode {Opcode(op).name} carries no RETH")
        if op in _IMM_OPS:
            if f.imm is None:
                raise EncodeError(f"opcode {Opcode(op).name} needs immediate data")
            _I.pack_into(buf, off, f.imm)
            off += 4
        elif f.imm is not None:
            raise EncodeError(f"opcode {Opcode(op).name} carries no immediate data")
        if op in _AETH_OPS:
            a = f.aeth
            if a is None:
                raise EncodeError(f"opcode {Opcode(op).name} needs an AETH")
            if not 0 <= a.msn <= 0xFFFFFF:
                raise EncodeError(f"AETH msn {a.msn} out of range")
            _I.pack_into(buf, off, (a.syndrome << 24) | a.msn)
            off += 4
        elif f.aeth is not None:
            raise EncodeError(f"opcode {Opcode(op).name} carries no AETH")
        if f.payload and op not in _PAYLOAD_OPS:
            raise EncodeError(f"opcode {Opcode(op).name} carries no payload")
    except struct.error as exc:
        raise EncodeError(f"field value out of range: {exc}") from None
    return off


def encode_frame(f: RoceFrame) -> bytes:
    """The whole Ethernet frame of ``f`` (no Ethernet padding, no FCS), ICRC computed.

    ``f.bth.padcount`` and ``f.icrc`` are ignored: the pad count follows from the payload
    length, the ICRC from the bytes (set ``f.icrc`` afterwards only to build a bad one
    with :func:`encode_frame_with_icrc`).
    """
    return encode_frame_with_icrc(f, None)


def encode_frame_with_icrc(f: RoceFrame, forced_icrc: int | None) -> bytes:
    """:func:`encode_frame`, with ``forced_icrc`` (if not None; in the form
    ``RoceFrame.icrc`` has) written instead of the computed ICRC (for tests of the
    receive path)."""
    payload = f.payload
    pad = -len(payload) & 3
    v6 = ":" in f.src_ip
    l4 = 54 if v6 else 34
    buf = bytearray(l4 + 8 + BTH_LEN + _MAX_EXT)
    end = _pack_transport(buf, l4 + 8, f, pad)
    udp_len = end - l4 + len(payload) + pad + ICRC_LEN
    src = _ip_pack.get(f.src_ip) or _ip_to_bytes(f.src_ip)
    dst = _ip_pack.get(f.dst_ip) or _ip_to_bytes(f.dst_ip)
    dmac = _mac_pack.get(f.dst_mac) or _mac_to_bytes(f.dst_mac)
    smac = _mac_pack.get(f.src_mac) or _mac_to_bytes(f.src_mac)
    tos = (f.dscp & 0x3F) << 2 | (f.ecn & 3)
    try:
        if v6:
            if len(src) != 16 or len(dst) != 16:
                raise EncodeError("src_ip and dst_ip must be the same IP version")
            _ETH_IP6_UDP.pack_into(buf, 0, dmac, smac, _ETHERTYPE_IPV6,
                                   0x60000000 | tos << 20, udp_len, _UDP, f.ttl, src, dst,
                                   f.sport, f.dport, udp_len, 0)
        else:
            if len(src) != 4 or len(dst) != 4:
                raise EncodeError("src_ip and dst_ip must be the same IP version")
            if udp_len + 20 > 0xFFFF:
                raise EncodeError("frame too long for IPv4")
            _ETH_IP4_UDP.pack_into(buf, 0, dmac, smac, _ETHERTYPE_IPV4, 0x45, tos,
                                   20 + udp_len, f.ip_id, _IPV4_DF, f.ttl, _UDP, 0, src, dst,
                                   f.sport, f.dport, udp_len, 0)
            _H.pack_into(buf, 24, _ipv4_header_checksum(buf[14:34]))
    except struct.error as exc:
        raise EncodeError(f"field value out of range: {exc}") from None
    del buf[end:]
    if payload:
        buf += payload
    if pad:
        buf += bytes(pad)
    if v6 or f.udp_checksum:
        # the checksum covers the ICRC, which does not depend on it: compute the ICRC first
        buf += _icrc_bytes(buf, v6, forced_icrc)
        m = (_udp_pseudo_sum(src, dst, udp_len) + _sum16(memoryview(buf)[l4:])) % 0xFFFF
        _H.pack_into(buf, l4 + 6, 0xFFFF - m if m else 0xFFFF)
        return bytes(buf)
    buf += _icrc_bytes(buf, False, forced_icrc)
    return bytes(buf)


def _icrc_bytes(buf: bytearray, v6: bool, forced: int | None) -> bytes:
    if forced is not None:
        return _I.pack(forced & 0xFFFFFFFF)
    return _ICRC.pack(_masked_crc(buf, 14, len(buf), v6))


# --------------------------------------------------------------------------- decoding

def is_roce(data: bytes | bytearray | memoryview, port: int = ROCE_UDP_PORT) -> bool:
    """Cheap test: an IPv4 or IPv6 UDP frame to ``port`` (no checks beyond that)."""
    et = data[12:14]
    if et == _ETHERTYPE_IPV4:
        l4 = 14 + (data[14] & 0xF) * 4 if len(data) > 14 else 0
        return len(data) >= l4 + 8 and data[23] == _UDP and \
            data[l4 + 2] << 8 | data[l4 + 3] == port
    if et == _ETHERTYPE_IPV6:
        return len(data) >= 62 and data[20] == _UDP and data[56] << 8 | data[57] == port
    return False


def peek_bth(data: bytes | bytearray | memoryview) -> tuple[int, int, int] | None:
    """``(opcode, dqpn, psn)`` of an IPv4/IPv6 RoCEv2 frame without a full decode (for
    taps and reports), or None if it is too short or not IP."""
    et = data[12:14]
    off = 42 if et == _ETHERTYPE_IPV4 else 62 if et == _ETHERTYPE_IPV6 else -1
    if off < 0 or len(data) < off + BTH_LEN:
        return None
    op, _b1, _pk, w1, w2 = _BTH.unpack_from(data, off)
    return op, w1 & 0xFFFFFF, w2 & 0xFFFFFF


def _l3(data: Any, udp_port: int | None) -> tuple:
    """Ethernet / IP / UDP checks; returns (l4 offset, end of the IP datagram, v6, info)."""
    n = len(data)
    if n < 14:
        raise TruncatedHeader("ethernet", 0, f"Ethernet header needs 14 bytes, {n} given")
    et = data[12:14]
    if et == _ETHERTYPE_IPV4:
        if n < 42:
            raise TruncatedHeader("ipv4", 14, f"IPv4 + UDP headers need 28 bytes, "
                                  f"{n - 14} left")
        (dmac, smac, _et, vihl, tos, tot, ipid, frag, ttl, proto, _c, src, dst, sport,
         dport, ulen, ucsum) = _ETH_IP4_UDP.unpack_from(data, 0)
        if vihl != 0x45:
            if vihl >> 4 != 4:
                raise InconsistentHeader("ipv4", 14, f"IP version {vihl >> 4} under "
                                         "ethertype 0x0800")
            raise Unsupported("ipv4", 14, "IPv4 options are not supported")
        if tot < 28 or 14 + tot > n:
            raise BadLength("ipv4", 16, f"IPv4 total length {tot} does not fit the "
                            f"{n - 14} bytes after the Ethernet header")
        if frag & 0x3FFF:
            raise Unsupported("ipv4", 20, "IPv4 fragments are not supported")
        if int.from_bytes(data[14:34], "big") % 0xFFFF:
            raise BadChecksum("ipv4", 24, "IPv4 header checksum mismatch")
        end, l4, v6 = 14 + tot, 34, False
        dscp, ecn, hop = tos >> 2, tos & 3, ttl
    elif et == _ETHERTYPE_IPV6:
        if n < 62:
            raise TruncatedHeader("ipv6", 14, f"IPv6 + UDP headers need 48 bytes, "
                                  f"{n - 14} left")
        (dmac, smac, _et, vtf, plen, proto, hop, src, dst, sport, dport, ulen,
         ucsum) = _ETH_IP6_UDP.unpack_from(data, 0)
        if vtf >> 28 != 6:
            raise InconsistentHeader("ipv6", 14, f"IP version {vtf >> 28} under "
                                     "ethertype 0x86dd")
        if 54 + plen > n:
            raise BadLength("ipv6", 18, f"IPv6 payload length {plen} does not fit the "
                            f"{n - 54} bytes after the IPv6 header")
        end, l4, v6 = 54 + plen, 54, True
        tc = vtf >> 20 & 0xFF
        dscp, ecn, ipid = tc >> 2, tc & 3, 0
    else:
        raise UnknownType("ethernet", 12, f"ethertype 0x{bytes(et).hex()} is not IPv4 or "
                          "IPv6")
    if proto != _UDP:
        raise UnknownType("ipv6" if v6 else "ipv4", 20 if v6 else 23,
                          f"IP protocol {proto} is not UDP")
    if ulen != end - l4:
        raise BadLength("udp", l4 + 4, f"UDP length {ulen} but the IP payload is "
                        f"{end - l4} bytes")
    if udp_port is not None and dport != udp_port:
        raise UnknownType("udp", l4 + 2, f"UDP destination port {dport} is not RoCEv2 "
                          f"({udp_port})")
    if ucsum:
        if (_udp_pseudo_sum(src, dst, ulen) + _sum16(data[l4:end])) % 0xFFFF:
            raise BadChecksum("udp", l4 + 6, "UDP checksum mismatch")
    elif v6:
        raise BadChecksum("udp", l4 + 6, "zero UDP checksum over IPv6")
    return l4, end, v6, (dmac, smac, src, dst, sport, dport, dscp, ecn, hop, ipid,
                         bool(ucsum))


def decode_frame(data: bytes | bytearray | memoryview, *, udp_port: int | None = ROCE_UDP_PORT,
                 check_icrc: bool = True) -> RoceFrame:
    """Decode a whole RoCEv2 frame. Bytes after the IP datagram (Ethernet padding) are
    ignored. With ``check_icrc`` a wrong ICRC raises :class:`BadChecksum` (header
    ``icrc``); without, the frame is returned with ``icrc_ok`` False."""
    try:
        return _decode(data, udp_port, check_icrc)
    except DecodeError:
        raise
    except Exception as exc:  # the decoder must never leak anything else
        raise DecodeError("frame", 0, f"undecodable input ({type(exc).__name__}: {exc})") \
            from exc


def _decode(data: Any, udp_port: int | None, check_icrc: bool) -> RoceFrame:
    l4, end, v6, info = _l3(data, udp_port)
    off = l4 + 8
    if off + BTH_LEN + ICRC_LEN > end:
        raise TruncatedHeader("bth", off, f"BTH and ICRC need {BTH_LEN + ICRC_LEN} bytes, "
                              f"{end - off} left")
    op, b1, pkey, w1, w2 = _BTH.unpack_from(data, off)
    bth = Bth(opcode=op, dqpn=w1 & 0xFFFFFF, psn=w2 & 0xFFFFFF, ackreq=bool(w2 >> 31),
              se=bool(b1 >> 7), migreq=bool(b1 >> 6 & 1), padcount=b1 >> 4 & 3,
              tver=b1 & 0xF, pkey=pkey, fecn=bool(w1 >> 31), becn=bool(w1 >> 30 & 1),
              resv6=w1 >> 24 & 0x3F, resv7=w2 >> 24 & 0x7F)
    boff = off
    off += BTH_LEN
    iend = end - ICRC_LEN
    reth = aeth = imm = None
    cnp_pad = bytes(CNP_PAD_LEN)
    if op == _CNP:
        if iend - off != CNP_PAD_LEN:
            raise BadLength("cnp", off, f"a CNP carries {CNP_PAD_LEN} reserved bytes, "
                            f"{iend - off} found")
        cnp_pad = bytes(data[off:iend])
        off = iend
    elif op not in _KNOWN:
        raise UnknownType("bth", boff, f"BTH opcode 0x{op:02x} is not supported")
    else:
        if op in _RETH_OPS:
            if off + 16 > iend:
                raise TruncatedHeader("reth", off, "RETH needs 16 bytes")
            va, rkey, dlen = _RETH.unpack_from(data, off)
            reth = Reth(va, rkey, dlen)
            off += 16
        if op in _IMM_OPS:
            if off + 4 > iend:
                raise TruncatedHeader("imm", off, "ImmDt needs 4 bytes")
            imm = _I.unpack_from(data, off)[0]
            off += 4
        if op in _AETH_OPS:
            if off + 4 > iend:
                raise TruncatedHeader("aeth", off, "AETH needs 4 bytes")
            w = _I.unpack_from(data, off)[0]
            aeth = Aeth(w >> 24, w & 0xFFFFFF)
            off += 4
    pad = bth.padcount
    if op in _PAYLOAD_OPS:
        if iend - off < pad:
            raise BadLength("bth", boff + 1, f"pad count {pad} exceeds the {iend - off} "
                            "bytes of payload")
        payload = bytes(data[off:iend - pad])
    else:
        if iend != off:
            raise BadLength("bth", boff, f"{iend - off} bytes after the headers of "
                            f"{Opcode(op).name}, which carries no payload")
        if pad:
            raise InconsistentHeader("bth", boff + 1, f"pad count {pad} without a payload")
        payload = b""
    got = _I.unpack_from(data, iend)[0]
    want = _wire(_masked_crc(data, 14, iend, v6))
    ok = got == want
    if check_icrc and not ok:
        raise BadChecksum("icrc", iend, f"ICRC 0x{got:08x}, expected 0x{want:08x}")
    (dmac, smac, src, dst, sport, dport, dscp, ecn, hop, ipid, ucs) = info
    return RoceFrame(bth, reth, aeth, imm, payload,
                     _mac_text.get(smac) or _mac_to_text(smac),
                     _mac_text.get(dmac) or _mac_to_text(dmac),
                     _ip_text.get(src) or _ip_to_text(src),
                     _ip_text.get(dst) or _ip_to_text(dst),
                     sport, dport, dscp, ecn, hop, ipid, ucs, cnp_pad, got, ok)
