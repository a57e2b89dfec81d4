"""Frames for the Wireshark dissector tests: every header kind, valid and broken.

Valid frames are built from ``uet.wire.records`` and encoded with ``uet.wire.codec``.
Broken frames start from encoded valid UET bytes, are cut or patched, and are wrapped in
Ethernet / IP / UDP (or the entropy header) here, so their IP and UDP lengths stay right.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass, field, replace

from uet.capture.pcapng import PcapngWriter
from uet.native import crc32c, ipv4_header_checksum, udp_checksum_ipv4, udp_checksum_ipv6
from uet.wire.codec import encode_frame, encode_uet
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

INI, TGT = "10.0.0.1", "10.0.0.2"
INI6, TGT6 = "fd00::1", "fd00::2"

#: Expert severities as tshark prints them (``_ws.expert.severity``).
SEVERITY = {"chat": 0x00200000, "note": 0x00400000, "warn": 0x00600000, "error": 0x00800000}


@dataclass
class Case:
    """One valid frame. ``trailer_len`` bytes at the end are a trailer (TSS ICV)."""

    name: str
    frame: Frame
    trailer_len: int = 0

    def data(self) -> bytes:
        return encode_frame(self.frame)


@dataclass
class Broken:
    """One malformed frame and the expert infos (abbrev, severity, message regex) it must
    raise, at warning level or above exactly these."""

    name: str
    data: bytes
    expect: list[tuple[str, str, str]] = field(default_factory=list)


# --------------------------------------------------------------------------- builders


def _std(opcode=5, flags=0x03, **kw) -> SesStandard:
    base = dict(opcode=opcode, flags=flags, message_id=9, ri_generation=3, job_id=0x123456,
                pid_on_fep=0x12, resource_index=0x34, buffer_offset=0x1122334455667788,
                initiator=0xAABBCCDD, memory_key=0xDEADBEEFCAFEF00D, request_length=4096)
    if flags & 0x01:
        base["header_data"] = 0x55 if flags & 0x04 else 0
    base.update(kw)
    return SesStandard(**base)


def _req(**kw) -> PdsRequest:
    base = dict(flags=0x08, clear_psn_offset=-3, psn=1000, spdcid=5, dpdcid=7)
    base.update(kw)
    return PdsRequest(**base)


def _ack(**kw) -> PdsAck:
    base = dict(flags=0, ack_psn_offset=2, cack_psn=999, spdcid=7, dpdcid=5)
    base.update(kw)
    return PdsAck(**base)


def _rev(f: Frame) -> Frame:
    """The same frame sent from the target back to the initiator."""
    return replace(f, src_ip=f.dst_ip, dst_ip=f.src_ip, src_mac=f.dst_mac, dst_mac=f.src_mac)


def _f(pds, ses=None, ext=None, payload=b"", **kw) -> Frame:
    return Frame(pds=pds, ses=ses, ext=ext, payload=payload, ev=0x1234, **kw)


PAYLOAD = bytes(range(32))


def valid_cases() -> list[Case]:
    """Every header kind, IPv4 and IPv6, UDP and native IP (protocol 253)."""
    c: list[Case] = []
    add = c.append
    rsp_small = SesResponseDataSmall(return_code=1, payload_length=32, job_id=0x123456,
                                     original_request_psn=4242)
    rsp_data = SesResponseData(return_code=1, message_id=9, job_id=0x123456,
                               read_request_message_id=4, payload_length=32,
                               modified_length=100, message_offset=64)
    rsp = SesResponse(opcode=1, return_code=1, message_id=9, ri_generation=2,
                      job_id=0x123456, modified_length=100)
    # requests, standard header
    add(Case("rud_syn_std_som_hd", _f(_req(flags=0x0C, psn_offset=3, use_rsv_pdc=False),
                                      _std(flags=0x07), payload=PAYLOAD)))
    add(Case("rod_std_nonsom", _f(_req(type=3, flags=0x10 | 0x08),
                                  _std(flags=0x02, payload_length=32, message_offset=4096),
                                  payload=PAYLOAD)))
    add(Case("rud_cc_atomic", _f(_req(type=13, ccc_id=3, credit_target=0x10000),
                                 _std(opcode=3), AtomicExt(2, 7, 1), payload=bytes(8))))
    add(Case("rod_cc_tsend_atomic_cas", _f(_req(type=14, ccc_id=9, credit_target=0x10),
                                           _std(opcode=0x0D),
                                           CasExt(0x0D, 7, 3, 5, 0x1234567890ABCDEF1122))))
    add(Case("rud_rendezvous", _f(_req(), _std(opcode=6),
                                  RendezvousExt(1000, 5, 0x123, 0x456, 0x1000, 0x2222))))
    add(Case("rud_rendezvous_tsend", _f(_req(), _std(opcode=0x0A, flags=0x01),
                                        RendezvousExt(8, 255, 0xFFF, 0x001, 1, 2))))
    add(Case("rud_deferrable_send", _f(_req(), _std(opcode=8), payload=PAYLOAD)))
    add(Case("rud_deferrable_rtr", _f(_req(), _std(opcode=0x0C))))
    add(Case("rud_tsend_fetch_atomic", _f(_req(), _std(opcode=0x0E), AtomicExt(0x13, 3, 0))))
    add(Case("rud_mswap", _f(_req(), _std(opcode=3), AtomicExt(0x13, 5, 2), payload=bytes(8))))
    # optimized headers
    add(Case("rud_small_fetch_atomic", _f(_req(next_hdr=1),
                                          SesSmall(opcode=4, flags=0x23, request_length=8,
                                                   ri_generation=1, job_id=77, pid_on_fep=3,
                                                   resource_index=4, buffer_offset=0x99),
                                          AtomicExt(2, 7, 0), payload=bytes(8))))
    add(Case("rud_small_write", _f(_req(next_hdr=1),
                                   SesSmall(opcode=1, flags=0x0B, request_length=32,
                                            job_id=77, buffer_offset=0x98),
                                   payload=PAYLOAD)))
    add(Case("rud_medium_hd", _f(_req(next_hdr=2),
                                 SesMedium(opcode=5, flags=0x07, request_length=32,
                                           ri_generation=1, job_id=77, pid_on_fep=3,
                                           resource_index=4, buffer_offset=0x98,
                                           initiator=0x1234, memory_key=0xABCDEF),
                                 payload=PAYLOAD)))
    add(Case("rud_medium_cas", _f(_req(next_hdr=2),
                                  SesMedium(opcode=0x0E, flags=0x03, request_length=32,
                                            job_id=78, buffer_offset=0x10, initiator=1,
                                            memory_key=2),
                                  CasExt(0x12, 9, 1, 1 << 127, 7))))
    # read responses in requests (target -> initiator)
    add(Case("rud_req_rsp_data", _rev(_f(_req(next_hdr=5, spdcid=7, dpdcid=5, psn=50),
                                         rsp_data, payload=PAYLOAD))))
    add(Case("rod_req_rsp_data_small", _rev(_f(_req(type=3, next_hdr=6, spdcid=7, dpdcid=5,
                                                    psn=51), rsp_small, payload=PAYLOAD))))
    # ACK family
    add(Case("ack_rsp", _rev(_f(_ack(next_hdr=4), rsp))))
    add(Case("ack_default_rsp_ecn_retx", _rev(_f(_ack(next_hdr=4, flags=0x30),
                                                 SesResponse(opcode=0, job_id=1)))))
    add(Case("ack_no_response_req_clear", _rev(_f(_ack(next_hdr=4, flags=0x02),
                                                  SesResponse(opcode=3, return_code=1)))))
    add(Case("ack_probe", _rev(_f(_ack(flags=0x08, ack_psn_offset=0xBEEF)))))
    add(Case("ack_epsn", _rev(_f(_ack(flags=0x40 | 0x04, epsn=0x10000)))))
    add(Case("ack_cc_nscc", _rev(_f(PdsAckCc(flags=0x20, ack_psn_offset=2, cack_psn=999,
                                             spdcid=7, dpdcid=5, cc_type=0, mpr=3,
                                             sack_psn_offset=-4,
                                             sack_bitmap=0x123456789ABCDEF0,
                                             service_time=500, restore_cwnd=True,
                                             rcv_cwnd_pend=5, rcvd_bytes=1234,
                                             ooo_count=7)))))
    add(Case("ack_cc_credit_rsp_small", _rev(_f(
        PdsAckCc(next_hdr=6, ack_psn_offset=-1, cack_psn=0xFFFFFFFF, spdcid=7, dpdcid=5,
                 cc_type=1, cc_flags=0, mpr=1, sack_psn_offset=1, sack_bitmap=1 << 63 | 1,
                 credit=0xABCDEF, ooo_count=3),
        rsp_small, payload=PAYLOAD))))
    add(Case("ack_cc_raw_state", _rev(_f(PdsAckCc(cack_psn=10, spdcid=7, dpdcid=5, cc_type=5,
                                                  cc_flags=2, cc_state_raw=bytes(range(8)))))))
    add(Case("ack_ccx_rsp_data", _rev(_f(PdsAckCc(type=9, next_hdr=5, ack_psn_offset=0,
                                                  cack_psn=2000, spdcid=7, dpdcid=5,
                                                  sack_bitmap=0xFF, ooo_count=1,
                                                  ccx_state=bytes(range(1, 9))),
                                         rsp_data, payload=PAYLOAD))))
    # NACK family
    add(Case("nack_trimmed", _rev(_f(PdsNack(nack_code=1, nack_psn=1000, spdcid=7, dpdcid=5,
                                             payload=1001), dscp=46))))
    add(Case("nack_rudi", _rev(_f(PdsNack(flags=0x08, nack_code=0x0B, nack_psn=77)))))
    add(Case("nack_ccx_rsp", _rev(_f(PdsNack(type=12, next_hdr=4, flags=0x30,
                                             nack_code=0x17, nack_psn=1000, spdcid=7,
                                             dpdcid=5, payload=123456, nccx_type=3,
                                             nccx_state1=0xF01010101010101,
                                             nccx_state2=0x8000000000000001),
                                     SesResponse(opcode=0, job_id=5)))))
    # control packets: every ctl type, SYN form, isROD
    for ctl, flags in ((0, 0x04), (1, 0x00), (2, 0x00), (3, 0x00), (4, 0x08), (5, 0x08),
                       (6, 0x20), (7, 0x00), (8, 0x00), (9, 0x20)):
        cp = PdsControl(ctl_type=ctl, flags=flags, psn=1000 + ctl, spdcid=5, dpdcid=7,
                        payload=0x100 + ctl, probe_opaque=0xBEEF if ctl == 6 else 0,
                        psn_offset=ctl + 1 if flags & 0x04 else 0)
        if ctl in (3, 5, 7):  # sent by the target
            cp.spdcid, cp.dpdcid = 7, 5
            add(Case(f"cp_{ctl}", _rev(_f(cp))))
        else:
            add(Case(f"cp_{ctl}", _f(cp)))
    # RUDI and UUD
    add(Case("rudi_req", _f(PdsRudi(flags=0x10, pkt_id=77), _std(), payload=PAYLOAD)))
    add(Case("rudi_resp_rsp", _rev(_f(PdsRudi(type=5, next_hdr=4, flags=0x20, pkt_id=77),
                                      rsp))))
    add(Case("rudi_resp_none", _rev(_f(PdsRudi(type=5, next_hdr=0, pkt_id=78)))))
    add(Case("uud_datagram", _f(PdsUud(), _std(opcode=7), payload=PAYLOAD)))
    add(Case("uud_small", _f(PdsUud(next_hdr=1), SesSmall(opcode=7, flags=0x03,
                                                          request_length=32),
                             payload=PAYLOAD)))
    # a trimmed request (switch DSCP 12: uet.fabric.qos.DSCP_TRIMMED), payload cut
    add(Case("rud_trimmed", _f(_req(psn=1001), _std(flags=0x01), dscp=12)))
    # IPv4 with a UDP checksum
    add(Case("udp4_checksum", _f(_req(spdcid=6), _std(), payload=PAYLOAD, udp_checksum=True)))
    # IPv6 over UDP (checksum always computed)
    six = dict(src_ip=INI6, dst_ip=TGT6)
    add(Case("udp6_rud", _f(_req(), _std(), payload=PAYLOAD, **six)))
    add(Case("udp6_ack_cc", _rev(_f(PdsAckCc(cack_psn=999, spdcid=7, dpdcid=5,
                                             sack_bitmap=3), **six))))
    add(Case("udp6_nack", _rev(_f(PdsNack(nack_code=2, nack_psn=1000, spdcid=7, dpdcid=5),
                                  **six))))
    # native IP, entropy header (IPv4 and IPv6)
    nat = dict(encap="ip", ip_proto=253)
    add(Case("ip4_rud", _f(_req(spdcid=8), _std(), payload=PAYLOAD, **nat)))
    add(Case("ip4_ack", _rev(_f(_ack(dpdcid=8), **nat))))
    add(Case("ip6_cp", _f(PdsControl(ctl_type=4, flags=0x08, psn=5, spdcid=8, dpdcid=9),
                          **nat, **six)))
    # TSS (native IP), 12 and 16 bytes, with the 16-byte ICV trailer
    icv = bytes(range(0xA0, 0xB0))
    add(Case("ip4_tss", _f(_req(spdcid=8), _std(), payload=PAYLOAD,
                           tss=TssHeader(an=1, sdi=0xABCDE, epoch=7, tsc=123456),
                           trailer=icv, **nat), 16))
    add(Case("ip6_tss_ssi", _rev(_f(_ack(next_hdr=4, dpdcid=8), rsp,
                                    tss=TssHeader(sp=True, sdi=1, ssi=0x11223344, epoch=0xFFFF,
                                                  tsc=(1 << 48) - 1),
                                    trailer=icv, **nat, **six)), 16))
    return c


# --------------------------------------------------------------------------- raw wrapping


def wrap(uet: bytes, *, v6: bool = False, native: bool = False, proto: int = 253,
         ev: int = 0x1234, udp_csum: int | str = 0, src: str | None = None,
         dst: str | None = None, trailer: bytes = b"") -> bytes:
    """Ethernet / IP / UDP (or entropy header) around ``uet`` bytes; ``udp_csum`` is a value
    to store, or ``"auto"`` to compute it."""
    s = socket.inet_pton(socket.AF_INET6 if v6 else socket.AF_INET, src or (INI6 if v6 else INI))
    d = socket.inet_pton(socket.AF_INET6 if v6 else socket.AF_INET, dst or (TGT6 if v6 else TGT))
    body = uet + trailer
    if native:
        l4 = struct.pack("!HH", ev, 0) + body
        nxt = proto
    else:
        l4 = bytearray(struct.pack("!HHHH", ev, 4793, 8 + len(body), 0) + body)
        if udp_csum == "auto":
            fn = udp_checksum_ipv6 if v6 else udp_checksum_ipv4
            udp_csum = fn(s, d, bytes(l4))
        struct.pack_into("!H", l4, 6, udp_csum)
        l4 = bytes(l4)
        nxt = 17
    if v6:
        ip = struct.pack("!IHBB16s16s", 0x60000000, len(l4), nxt, 64, s, d)
        eth_type = b"\x86\xdd"
    else:
        hdr = bytearray(struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(l4), 0, 0x4000, 64,
                                    nxt, 0, s, d))
        struct.pack_into("!H", hdr, 10, ipv4_header_checksum(bytes(hdr)))
        ip = bytes(hdr)
        eth_type = b"\x08\x00"
    return bytes.fromhex("020000000002" "020000000001") + eth_type + ip + l4


def crc_trailer(uet: bytes, *, native: bool, v6: bool = False, ev: int = 0x1234,
                bad: bool = False) -> bytes:
    """The CRC-32C trailer the dissector expects (see docs/wireshark.md): over the IP
    addresses, the UDP header with checksum 0 (or the entropy header) and the UET bytes;
    big-endian on the wire."""
    s = socket.inet_pton(socket.AF_INET6 if v6 else socket.AF_INET, INI6 if v6 else INI)
    d = socket.inet_pton(socket.AF_INET6 if v6 else socket.AF_INET, TGT6 if v6 else TGT)
    if native:
        head = struct.pack("!HH", ev, 0)
    else:
        head = struct.pack("!HHHH", ev, 4793, 8 + len(uet) + 4, 0)
    crc = crc32c(s + d + head + uet)
    return struct.pack("!I", crc ^ (1 if bad else 0))


def _uet(frame: Frame) -> bytes:
    return encode_uet(frame)


def broken_cases() -> list[Broken]:
    """Malformed or inconsistent frames and the expert infos they must raise."""
    E, W, N = "error", "warn", "note"
    req_std = _uet(_f(_req(), _std()))
    b: list[Broken] = []
    add = b.append

    def patch(data: bytes, off: int, value: bytes) -> bytes:
        return data[:off] + value + data[off + len(value):]

    add(Broken("truncated_pds", wrap(req_std[:8]),
               [("uet.pds.rud_rod.invalid_header", E, r"RUD/ROD header must be at least 12")]))
    add(Broken("truncated_cc_req", wrap(_uet(_f(_req(type=13), _std()))[:14]),
               [("uet.pds.rud_rod.invalid_header", E, r"RUD/ROD CC header must be at least 16")]))
    add(Broken("truncated_ack_cc", wrap(_uet(_f(PdsAckCc(cack_psn=1)))[:20]),
               [("uet.pds.ack.invalid_header", E, r"ACK_CC header must be at least 32")]))
    add(Broken("truncated_nack", wrap(_uet(_f(PdsNack(nack_code=1)))[:10]),
               [("uet.pds.invalid_header", E, r"NACK header must be at least 16")]))
    add(Broken("one_byte", wrap(b"\x10"),
               [("uet.pds.invalid_header", E, r"at least 4 bytes")]))
    add(Broken("unknown_type", wrap(struct.pack("!H", 20 << 11) + bytes(14)),
               [("uet.pds.unknown_type", E, r"Unknown PDS type 20")]))
    add(Broken("reserved_type_0", wrap(bytes(16)),
               [("uet.pds.unknown_type", E, r"Unknown PDS type 0")]))
    tss_ack = _uet(_f(_ack(), tss=TssHeader()))
    add(Broken("tss_after_tss", wrap(tss_ack[:12] + tss_ack + bytes(16), native=True),
               [("uet.pds.unknown_type", E, r"Unknown PDS type 1")]))
    add(Broken("truncated_tss", wrap(_uet(_f(_ack(), tss=TssHeader(sp=True)))[:10]
                                     + bytes(16), native=True),
               [("uet.tss.invalid_header", E, r"TSS header must be at least 16 bytes "
                 r"\(10 available\)")]))
    add(Broken("tss_only_no_icv", wrap(tss_ack[:12], native=True),
               [("uet.trailer.missing", E, r"too short for a 16-byte trailer \(12 bytes\)"),
                ("uet.pds.invalid_header", E, r"PDS header must be at least 4 bytes "
                 r"\(0 available\)")]))
    rsp_data_op1 = _uet(_rev(_f(_ack(next_hdr=5), SesResponseData(opcode=1, payload_length=0))))
    add(Broken("rsp_data_opcode_1", wrap(rsp_data_op1),
               [("uet.ses.rsp.invalid_opcode", E, r"Invalid opcode 1 for ses resp data, "
                 r"expected 2")]))
    add(Broken("rsp_opcode_2", wrap(_uet(_f(_ack(next_hdr=4), SesResponse(opcode=2)))),
               [("uet.ses.rsp.invalid_opcode", E, r"Invalid opcode 2 for ses resp, "
                 r"expected 0 or 1 or 3")]))
    add(Broken("rsp_data_small_opcode_0",
               wrap(_uet(_f(_ack(next_hdr=6), SesResponseDataSmall(opcode=0)))),
               [("uet.ses.rsp.invalid_opcode", E, r"for ses resp data small, expected 2")]))
    req_rsp = patch(req_std, 0, struct.pack("!H", 2 << 11 | 4 << 7 | 0x08))[:12] + bytes(12)
    add(Broken("request_with_rsp", wrap(req_rsp),
               [("uet.pds.nh_mismatch", E, r"Next header RSP is not allowed after RUD_REQ")]))
    ack_std = patch(_uet(_f(_ack())), 0, struct.pack("!H", 7 << 11 | 3 << 7)) + _uet(
        _f(_req(), _std()))[12:]
    add(Broken("ack_with_request", wrap(ack_std),
               [("uet.pds.nh_mismatch", E, r"Next header REQ_STD is not allowed after ACK")]))
    add(Broken("unknown_next_header", wrap(patch(req_std, 0, struct.pack("!H", 2 << 11 | 9 << 7))),
               [("uet.pds.unknown_nh", E, r"Unknown next header 9")]))
    add(Broken("truncated_std", wrap(req_std[:12 + 20]),
               [("uet.ses.invalid_header", E, r"SES STD header must be at least 44 bytes "
                 r"\(20 available\)")]))
    add(Broken("truncated_rsp", wrap(_uet(_f(_ack(next_hdr=4), SesResponse(opcode=1)))[:18]),
               [("uet.ses.invalid_header", E, r"SES Response header must be at least 12")]))
    cas = _uet(_f(_req(), _std(opcode=3), CasExt(0x0D, 7, 0, 1, 2)))
    add(Broken("truncated_cas", wrap(cas[:12 + 44 + 20]),
               [("uet.ses.invalid_header", E, r"Compare and Swap Ext hdr must be at least 36")]))
    rndv = _uet(_f(_req(), _std(opcode=6), RendezvousExt()))
    add(Broken("truncated_rendezvous", wrap(rndv[:12 + 44 + 10]),
               [("uet.ses.invalid_header", E, r"Rendezvous Ext hdr must be at least 24")]))
    good = _uet(_f(_req(), _std(), payload=PAYLOAD))
    add(Broken("bad_udp_checksum_ipv4", wrap(good, udp_csum=0x1234),
               [("uet.udp_checksum.bad", E,
                 r"Bad UDP checksum 0x1234 \(should be 0x[0-9a-f]{4}\)")]))
    add(Broken("bad_udp_checksum_ipv6", wrap(good, v6=True, udp_csum=0xFFFF),
               [("uet.udp_checksum.bad", E, r"Bad UDP checksum 0xffff")]))
    add(Broken("zero_udp_checksum_ipv6", wrap(good, v6=True, udp_csum=0),
               [("udp.checksum.zero", E, r"Illegal checksum value \(0\)")]))
    add(Broken("reserved_req_flag", wrap(patch(good, 0, struct.pack("!H", 2 << 11 | 3 << 7
                                                                       | 0x48))),
               [("uet.reserved_set", W, r"Reserved bits set in the PDS flags: 0x40")]))
    syn = _uet(_f(_req(flags=0x0C, psn_offset=2), _std()))
    add(Broken("reserved_pdc_info", wrap(patch(syn, 10, b"\x30\x02")),
               [("uet.reserved_set", W, r"Reserved bits set in the PDC info: 0x30")]))
    add(Broken("reserved_ses_byte0", wrap(patch(good, 12, b"\x85")),
               [("uet.reserved_set", W, r"Reserved bits set in SES byte 0: 0x80")]))
    add(Broken("ses_version_1", wrap(patch(good, 13, b"\x43")),
               [("uet.ses.unsupported_version", W, r"Unsupported SES version 1")]))
    add(Broken("unknown_ses_opcode", wrap(patch(good, 12, b"\x21")),
               [("uet.ses.unknown_opcode", W, r"Unknown SES request opcode 0x21")]))
    small_multi = _uet(_f(_req(next_hdr=1), SesSmall(opcode=1, flags=0x01, request_length=0)))
    add(Broken("small_not_single_packet", wrap(small_multi),
               [("uet.ses.inconsistent", W, r"single-packet: SOM and EOM must both be set")]))
    med_rndv = _uet(_f(_req(next_hdr=2), SesMedium(opcode=6, flags=0x03)))
    add(Broken("medium_rendezvous", wrap(med_rndv),
               [("uet.ses.inconsistent", W, r"RENDEZVOUS_SEND carries no rendezvous extension")]))
    add(Broken("reserved_nack_code", wrap(_uet(_f(PdsNack(nack_code=0x0C, nack_psn=1)))),
               [("uet.pds.nack.unknown_code", W, r"Reserved NACK code 0x0c")]))
    add(Broken("unknown_ctl_type", wrap(patch(_uet(_f(PdsControl())), 0,
                                              struct.pack("!H", 11 << 11 | 12 << 7))),
               [("uet.pds.unknown_ctl_type", W, r"Unknown control packet type 12")]))
    add(Broken("reserved_cp_flag", wrap(_uet(_f(PdsControl(flags=0x41)))),
               [("uet.reserved_set", W, r"Reserved bits set in the PDS flags: 0x41")]))
    add(Broken("reserved_ack_flag_on_ack_cc", wrap(_uet(_f(PdsAckCc(flags=0x40)))),
               [("uet.reserved_set", W, r"Reserved bits set in the PDS flags: 0x40")]))
    nat = wrap(good, native=True)
    add(Broken("reserved_entropy", nat[:36] + b"\x00\x01" + nat[38:],
               [("uet.reserved_set", W, r"Reserved bits set in the entropy header: 0x1")]))
    trimmed = _uet(_f(_req(), _std(flags=0x02, payload_length=4000, message_offset=0),
                      payload=PAYLOAD))
    add(Broken("trimmed_payload", wrap(trimmed),
               [("uet.ses.short_payload", N, r"Payload length 4000 but 32 bytes present")]))
    return b


def crc_cases() -> list[Broken]:
    """Frames for a run with the CRC-32C trailer preference on (and native IP protocol 200):
    good and bad CRCs over UDP and native IP."""
    uet = _uet(_f(_req(), _std(), payload=PAYLOAD))
    out = []
    for native in (False, True):
        for v6 in (False, True):
            for bad in (False, True):
                tr = crc_trailer(uet, native=native, v6=v6, bad=bad)
                data = wrap(uet, native=native, v6=v6, proto=200, trailer=tr,
                            udp_csum="auto" if v6 else 0)
                exp = [("uet.crc32c.bad", "error", r"Bad CRC-32C 0x[0-9a-f]{8} \(should be "
                        r"0x[0-9a-f]{8}\)")] if bad else []
                out.append(Broken(f"crc_{'ip' if native else 'udp'}{6 if v6 else 4}"
                                  f"_{'bad' if bad else 'good'}", data, exp))
    return out


def write_capture(path, frames: list[bytes]) -> None:
    """A pcapng with one Ethernet interface, frames 1 µs apart."""
    with PcapngWriter.open(path) as w:
        if_id = w.add_interface("uet0")
        for i, data in enumerate(frames):
            w.write_packet(if_id, 1_000_000_000 + i * 1000, data)
