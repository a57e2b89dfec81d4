"""Golden byte strings written by hand from the header layouts of the public sources.

Each vector is typed field by field from the layouts of the UEC reference provider's
``uet_pkt_hdr.h``, Wireshark's ``packet-uet.c`` and xdp2 (docs/references.md, topics 1, 2,
4, 7, 10), not produced by our encoder, and checked in both directions against the fast
codec and the scapy layers.
"""

from __future__ import annotations

import pytest

from uet.wire import layers
from uet.wire.codec import decode_frame, decode_uet, encode_frame, encode_uet
from uet.wire.constants import (
    AtomicOpcode,
    CtlType,
    NackCode,
    NextHeader,
    PdsType,
    ReturnCode,
    RspOpcode,
    SesOpcode,
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


def h(text: str) -> bytes:
    """Hex with spaces and '|' separators allowed, for readability."""
    return bytes.fromhex(text.replace("|", " "))


# A standard SES header: SEND, SOM|EOM, message 7, ri_gen 1, job 0x000102, pid 0xabc,
# ri 0x123, buffer offset 0x1000, initiator 0xdeadbeef, key 0x1122334455667788,
# header data 0 (HD clear), request length 16.
STD_SEND = SesStandard(opcode=SesOpcode.SEND, flags=0x03, message_id=7, ri_generation=1,
                       job_id=0x102, pid_on_fep=0xABC, resource_index=0x123,
                       buffer_offset=0x1000, initiator=0xDEADBEEF,
                       memory_key=0x1122334455667788, request_length=16)
STD_SEND_HEX = ("05 03 | 0007 | 01 000102 | 0abc | 0123 | 0000000000001000 | deadbeef |"
                "1122334455667788 | 0000000000000000 | 00000010")

VECTORS = [
    # ---- ref 10: RUD request, standard SES, SYN+AR -> prologue 0x118C.
    # clear offset -2, PSN 0x1000, SPDCID 5, use_rsv_pdc (0x8000) + psn_offset 3.
    ("rud_syn_ar_std",
     Frame(pds=PdsRequest(PdsType.RUD_REQ, NextHeader.REQ_STD, 0x0C, -2, 0x1000, 5,
                          use_rsv_pdc=True, psn_offset=3), ses=STD_SEND, payload=b"hi"),
     "118c fffe 00001000 0005 8003 |" + STD_SEND_HEX + "| 6869"),
    # ---- ROD request, no flags -> 0x1980; DPDCID 0x0102.
    ("rod_std",
     Frame(pds=PdsRequest(PdsType.ROD_REQ, NextHeader.REQ_STD, 0, 0, 0xFFFFFFFF, 0x10, 0x0102),
           ses=STD_SEND),
     "1980 0000 ffffffff 0010 0102 |" + STD_SEND_HEX),
    # ---- RUD_CC request, RETX -> 0x6990; ccc_id 0x2a, credit target 0x010203.
    ("rud_cc_retx",
     Frame(pds=PdsRequest(PdsType.RUD_CC_REQ, NextHeader.REQ_STD, 0x10, 1, 2, 3, 4,
                          ccc_id=0x2A, credit_target=0x010203), ses=STD_SEND),
     "6990 0001 00000002 0003 0004 2a 010203 |" + STD_SEND_HEX),
    # ---- ROD_CC with SYN (0x04): type 14 -> 0x7184 with next_hdr 3.
    ("rod_cc_syn",
     Frame(pds=PdsRequest(PdsType.ROD_CC_REQ, NextHeader.REQ_STD, 0x04, 0, 100, 1,
                          psn_offset=0xFFF, ccc_id=1, credit_target=0xFFFFFF), ses=STD_SEND),
     "7184 0000 00000064 0001 0fff 01 ffffff |" + STD_SEND_HEX),
    # ---- ACK with SES response, ECN echo -> 0x3A20; ack offset +5, CACK 0x100.
    # RSP: list 0 / RESPONSE(1), ver 0 / OK(1), msg 9, ri_gen 2 + job 0x0a0b0c, mod len 64.
    ("ack_rsp_ecn",
     Frame(pds=PdsAck(NextHeader.RSP, 0x20, 5, 0x100, 0x22, 0x11),
           ses=SesResponse(0, RspOpcode.RESPONSE, 0, ReturnCode.OK, 9, 2, 0x0A0B0C, 64)),
     "3a20 0005 00000100 0022 0011 | 01 01 0009 02 0a0b0c 00000040"),
    # ---- ACK with the RP EPSN flag (0x40): 16 bytes, expected PSN 0x12345678.
    ("ack_epsn",
     Frame(pds=PdsAck(NextHeader.NONE, 0x40, -1, 0x10, 1, 2, epsn=0x12345678)),
     "3840 ffff 00000010 0001 0002 12345678"),
    # ---- ACK to a probe (P 0x08): bytes 2-3 = probe_opaque 0xBEEF (unsigned).
    ("ack_probe",
     Frame(pds=PdsAck(NextHeader.NONE, 0x08, 0xBEEF, 0x10, 1, 2)),
     "3808 beef 00000010 0001 0002"),
    # ---- ACK_CC, no SES, clear request (REQ=1) -> 0x4002; NSCC state.
    # cc_type 0 / flags 0, mpr 1, SACK offset -3, bitmap, service time 0x0102,
    # RC=1 + penalty 0x05 -> 0x85, rcvd bytes 0x030405, ooo 0x0607.
    ("ack_cc_nscc",
     Frame(pds=PdsAckCc(PdsType.ACK_CC, NextHeader.NONE, 0x02, 0, 1000, 7, 8, 0, 0, 1, -3,
                        0x123456789ABCDEF0, service_time=0x0102, restore_cwnd=True,
                        rcv_cwnd_pend=5, rcvd_bytes=0x030405, ooo_count=0x0607)),
     "4002 0000 000003e8 0007 0008 | 00 01 fffd 123456789abcdef0 | 0102 85 030405 0607"),
    # ---- ACK_CC credit form: cc_type 1 -> 0x10; credit 0xabcdef, reserved 24 bits, ooo 9.
    ("ack_cc_credit",
     Frame(pds=PdsAckCc(PdsType.ACK_CC, NextHeader.NONE, 0, 0, 1, 2, 3, 1, 0, 4, 0, 0,
                        credit=0xABCDEF, ooo_count=9)),
     "4000 0000 00000001 0002 0003 | 10 04 0000 0000000000000000 | abcdef 000000 0009"),
    # ---- ACK_CCX (type 9) -> 0x4800 + 8 bytes CCX state: 40 bytes.
    ("ack_ccx",
     Frame(pds=PdsAckCc(PdsType.ACK_CCX, NextHeader.NONE, 0, 0, 1, 2, 3, 0, 0, 0, 0, 0,
                        ccx_state=bytes(range(1, 9)))),
     "4800 0000 00000001 0002 0003 | 00 00 0000 0000000000000000 | 0000 00 000000 0000 |"
     "0102030405060708"),
    # ---- NACK (RUD/ROD) -> 0x5000; TRIMMED, vendor 0, PSN 0x55, payload 0x56.
    ("nack_trimmed",
     Frame(pds=PdsNack(PdsType.NACK, NextHeader.NONE, 0, NackCode.TRIMMED, 0, 0x55, 3, 4,
                       0x56)),
     "5000 01 00 00000055 0003 0004 00000056"),
    # ---- NACK with an SES response behind it (next_hdr 4): 0x5200.
    ("nack_with_rsp",
     Frame(pds=PdsNack(PdsType.NACK, NextHeader.RSP, 0x08, NackCode.NO_RESOURCE, 0xFF, 1, 0,
                       0, 0), ses=SesResponse(1, RspOpcode.NO_RESPONSE, 0, 0, 1, 0, 1, 0)),
     "5208 0a ff 00000001 0000 0000 00000000 | 43 00 0001 00 000001 00000000"),
    # ---- NACK_CCX (type 12) -> 0x6000; nccx type 0xA + state1, state2: 32 bytes.
    ("nack_ccx",
     Frame(pds=PdsNack(PdsType.NACK_CCX, NextHeader.NONE, 0x20, NackCode.RCVR_INFER_LOSS, 0,
                       9, 1, 2, 3, nccx_type=0xA, nccx_state1=0x123456789ABCDEF,
                       nccx_state2=0xFEDCBA9876543210)),
     "6020 1a 00 00000009 0001 0002 00000003 | a123456789abcdef fedcba9876543210"),
    # ---- CP CLOSE with AR -> 0x5A08; CP ACK_REQ -> 0x5880 (ref 10).
    ("cp_close_ar",
     Frame(pds=PdsControl(CtlType.CLOSE, 0x08, 0, 0x200, 0x0A, 0x0B, payload=0)),
     "5a08 0000 00000200 000a 000b 00000000"),
    ("cp_ack_req",
     Frame(pds=PdsControl(CtlType.ACK_REQ, 0, 0, 0x201, 1, 2, payload=0x00000007)),
     "5880 0000 00000201 0001 0002 00000007"),
    # ---- CP PROBE (6) with probe_opaque and isROD (0x20) + SYN form of bytes 10-11.
    ("cp_probe_syn",
     Frame(pds=PdsControl(CtlType.PROBE, 0x24, 0xCAFE, 50, 1, use_rsv_pdc=False,
                          psn_offset=0x10, payload=40)),
     "5b24 cafe 00000032 0001 0010 00000028"),
    # ---- UUD request, standard SES -> 0x3180 (ref 10); 2 reserved bytes.
    ("uud_std",
     Frame(pds=PdsUud(NextHeader.REQ_STD, 0), ses=STD_SEND),
     "3180 0000 |" + STD_SEND_HEX),
    # ---- RUDI request (type 4) + small SES; RUDI response (type 5) + RSP.
    # Small: WRITE(1), SOM|EOM, request length 0x0123, ri_gen 3, job 4, pid 5, ri 6,
    # buffer offset 0x0a0b.
    ("rudi_req_small",
     Frame(pds=PdsRudi(PdsType.RUDI_REQ, NextHeader.REQ_SMALL, 0x10, 0xA1B2C3D4),
           ses=SesSmall(SesOpcode.WRITE, 0, 0x03, 0x0123, 3, 4, 5, 6, 0x0A0B)),
     "2090 0000 a1b2c3d4 | 01 03 0123 03 000004 0005 0006 0000000000000a0b"),
    ("rudi_resp_rsp",
     Frame(pds=PdsRudi(PdsType.RUDI_RESP, NextHeader.RSP, 0x20, 7),
           ses=SesResponse(0, RspOpcode.DEFAULT_RESPONSE, 0, ReturnCode.NULL, 0, 0, 0, 0)),
     "2a20 0000 00000007 | 00 00 0000 00 000000 00000000"),
    # ---- Medium SES: TAGGED_SEND(9), HD|SOM|EOM (0x07), length 0x3fff, ri_gen 0xff,
    # job 0xffffff, pid 0xfff, ri 0xfff, header data 0x0102030405060708, initiator 1,
    # match bits 2.
    ("rud_medium",
     Frame(pds=PdsRequest(PdsType.RUD_REQ, NextHeader.REQ_MEDIUM, 0, 0, 1, 1, 1),
           ses=SesMedium(SesOpcode.TAGGED_SEND, 0, 0x07, 0x3FFF, 0xFF, 0xFFFFFF, 0xFFF, 0xFFF,
                         0x0102030405060708, 1, 2)),
     "1100 0000 00000001 0001 0001 | 09 07 3fff ff ffffff 0fff 0fff 0102030405060708 "
     "00000001 0000000000000002"),
    # ---- Standard SES, SOM=0: bytes 32..39 = reserved(18)+payload_length(14)+offset(32).
    # WRITE, EOM only (0x02), payload length 0x2000, message offset 0x00010000.
    ("rud_std_non_som",
     Frame(pds=PdsRequest(PdsType.RUD_REQ, NextHeader.REQ_STD, 0x08, 0, 9, 1, 2),
           ses=SesStandard(SesOpcode.WRITE, 0, 0x02, 1, 0, 1, 0, 0, 0x20000, 0, 0,
                           payload_length=0x2000, message_offset=0x10000,
                           request_length=0x12000)),
     "1188 0000 00000009 0001 0002 | 01 02 0001 00 000001 0000 0000 0000000000020000 "
     "00000000 0000000000000000 00002000 00010000 00012000"),
    # ---- Atomic extension after the standard header: FETCHING_ATOMIC(4), SUM(2), UINT64(7),
    # cacheable (1), reserved byte.
    ("std_atomic",
     Frame(pds=PdsRequest(PdsType.RUD_REQ, NextHeader.REQ_STD, 0, 0, 1, 1, 1),
           ses=SesStandard(SesOpcode.FETCHING_ATOMIC, flags=0x03, request_length=8),
           ext=AtomicExt(AtomicOpcode.SUM, 0x07, 0x01), payload=bytes(8)),
     "1180 0000 00000001 0001 0001 | 04 03 0000 00 000000 0000 0000 0000000000000000 "
     "00000000 0000000000000000 0000000000000000 00000008 | 02 07 01 00 |"
     "0000000000000000"),
    # ---- CAS extension (36 B) after a small header: ATOMIC(3), CSWAP(0x0d), UINT64,
    # compare 5 and swap 6, right-aligned in 16-byte fields.
    ("small_cas",
     Frame(pds=PdsRequest(PdsType.ROD_REQ, NextHeader.REQ_SMALL, 0, 0, 1, 1, 1),
           ses=SesSmall(SesOpcode.ATOMIC, 0, 0x03, 32),
           ext=CasExt(AtomicOpcode.CSWAP, 0x07, 0, 5, 6)),
     "1880 0000 00000001 0001 0001 | 03 03 0020 00 000000 0000 0000 0000000000000000 |"
     "0d 07 00 00 | 00000000000000000000000000000005 | 00000000000000000000000000000006"),
    # ---- Rendezvous extension (24 B) after the standard header: RENDEZVOUS_SEND(6),
    # eager length 0x100, ri_gen 0x12 / pid 0x345 / ri 0x678, read offset 1, read key 2.
    ("std_rendezvous",
     Frame(pds=PdsRequest(PdsType.RUD_REQ, NextHeader.REQ_STD, 0, 0, 1, 1, 1),
           ses=SesStandard(SesOpcode.RENDEZVOUS_SEND, flags=0x01, request_length=0x10000),
           ext=RendezvousExt(0x100, 0x12, 0x345, 0x678, 1, 2)),
     "1180 0000 00000001 0001 0001 | 06 01 0000 00 000000 0000 0000 0000000000000000 "
     "00000000 0000000000000000 0000000000000000 00010000 | 00000100 12345678 "
     "0000000000000001 0000000000000002"),
    # ---- RSP_DATA (20 B) in an ACK: list 1 / RESPONSE_W_DATA -> 0x42, ver 0 / OK, msg 3,
    # reserved + job 0x000010, read request message id 4, payload length 0x3fff,
    # modified length 0x10000, message offset 0x20.
    ("ack_rsp_data",
     Frame(pds=PdsAck(NextHeader.RSP_DATA, 0, 0, 5, 6, 7),
           ses=SesResponseData(1, RspOpcode.RESPONSE_W_DATA, 0, ReturnCode.OK, 3, 0x10, 4,
                               0x3FFF, 0x10000, 0x20), payload=b"\xaa"),
     "3a80 0000 00000005 0006 0007 | 42 01 0003 00 000010 0004 3fff 00010000 00000020 | aa"),
    # ---- RSP_DATA_SMALL (12 B): payload length 0x0040, job 0x000001, original PSN 0x99.
    ("ack_rsp_data_small",
     Frame(pds=PdsAck(NextHeader.RSP_DATA_SMALL, 0, 0, 5, 6, 7),
           ses=SesResponseDataSmall(0, RspOpcode.RESPONSE_W_DATA, 0, ReturnCode.OK, 0x40, 1,
                                    0x99)),
     "3b00 0000 00000005 0006 0007 | 02 01 0040 00 000001 00000099"),
    # ---- Read data in a RUD request (ref 4.7): next_hdr 5.
    ("rud_rsp_data",
     Frame(pds=PdsRequest(PdsType.RUD_REQ, NextHeader.RSP_DATA, 0, 0, 1, 1, 1),
           ses=SesResponseData(0, RspOpcode.RESPONSE_W_DATA, 0, 0, 0, 0, 0, 0, 0, 0)),
     "1280 0000 00000001 0001 0001 | 02 00 0000 00 000000 0000 0000 00000000 00000000"),
    # ---- TSS header (12 B): type 1, SP 0, AN 1, SDI 0x123456, epoch 0x0001,
    # TSC 0x000000000002 -> word 0x09123456; then a UUD with no SES.
    ("tss_uud",
     Frame(pds=PdsUud(NextHeader.REQ_SMALL),
           ses=SesSmall(SesOpcode.DATAGRAM_SEND, flags=3, request_length=1),
           tss=TssHeader(False, 1, 0x123456, 0, 1, 2), payload=b"\x01"),
     "09123456 0001 000000000002 | 3080 0000 | 07 03 0001 00 000000 0000 0000 "
     "0000000000000000 | 01"),
    # ---- TSS with SSI (16 B): SP -> 0x0c000001, SSI 0x0a000001, epoch 0xffff,
    # TSC 0xffffffffffff.
    ("tss_ssi",
     Frame(pds=PdsControl(CtlType.NOOP, 0, 0, 0, 1, 2, payload=0),
           tss=TssHeader(True, 0, 1, 0x0A000001, 0xFFFF, 0xFFFFFFFFFFFF)),
     "0c000001 0a000001 ffff ffffffffffff | 5800 0000 00000000 0001 0002 00000000"),
]


@pytest.mark.parametrize("name,frame,hexstr", VECTORS, ids=[v[0] for v in VECTORS])
def test_golden_codec(name: str, frame: Frame, hexstr: str) -> None:
    wire = h(hexstr)
    assert encode_uet(frame) == wire
    assert decode_uet(wire) == frame


@pytest.mark.parametrize("name,frame,hexstr", VECTORS, ids=[v[0] for v in VECTORS])
def test_golden_scapy(name: str, frame: Frame, hexstr: str) -> None:
    wire = h(hexstr)
    assert bytes(layers.uet_to_scapy(frame)) == wire
    pkt = layers.UET(wire)
    assert not pkt.haslayer(layers.UETDecodeError), pkt.summary()
    assert layers.scapy_to_uet(pkt) == frame


def test_prologue_words_of_reference_section_10() -> None:
    """The 16-bit prologues listed in ref. section 10, built through the codec."""
    cases = [
        (PdsRequest(PdsType.RUD_REQ, NextHeader.REQ_STD, 0x0C), 0x118C),
        (PdsRequest(PdsType.ROD_REQ, NextHeader.REQ_STD, 0x00), 0x1980),
        (PdsRequest(PdsType.RUD_CC_REQ, NextHeader.REQ_STD, 0x10), 0x6990),
        (PdsAck(NextHeader.RSP, 0x20), 0x3A20),
        (PdsAckCc(PdsType.ACK_CC, NextHeader.NONE, 0x02), 0x4002),
        (PdsNack(PdsType.NACK, NextHeader.NONE, 0x00), 0x5000),
        (PdsControl(CtlType.CLOSE, 0x08), 0x5A08),
        (PdsControl(CtlType.ACK_REQ, 0x00), 0x5880),
        (PdsUud(NextHeader.REQ_STD, 0), 0x3180),
    ]
    for pds, word in cases:
        ses = None
        if pds.next_hdr == NextHeader.REQ_STD:
            ses = SesStandard()
        elif pds.next_hdr == NextHeader.RSP:
            ses = SesResponse()
        wire = encode_uet(Frame(pds=pds, ses=ses))
        assert int.from_bytes(wire[:2], "big") == word, pds


def test_golden_full_frame_ipv4_udp() -> None:
    """Ethernet / IPv4 (DF, id 0, checksum by hand) / UDP (sport = EV, dport 4793, csum 0)."""
    frame = Frame(pds=PdsNack(PdsType.NACK, NextHeader.NONE, 0, NackCode.TRIMMED, 0, 1, 2, 3,
                              0), ev=0x1234, dscp=46, ttl=64, src_ip="10.0.0.1",
                  dst_ip="10.0.0.2")
    # IPv4 total length 20 + 8 + 16 = 44 (0x2c); TOS 46 << 2 = 0xb8.
    # Header checksum by hand: 4500+b800... sum of words
    words = [0x45B8, 0x002C, 0x0000, 0x4000, 0x4011, 0x0000, 0x0A00, 0x0001, 0x0A00, 0x0002]
    s = sum(words)
    s = (s & 0xFFFF) + (s >> 16)
    csum = ~s & 0xFFFF
    wire = (h("020000000002 020000000001 0800")
            + h("45 b8 002c 0000 4000 40 11") + csum.to_bytes(2, "big")
            + h("0a000001 0a000002")
            + h("1234 12b9 0018 0000")
            + h("5000 01 00 00000001 0002 0003 00000000"))
    assert encode_frame(frame) == wire
    assert decode_frame(wire) == frame


def test_golden_native_ip_entropy_header() -> None:
    """Native IP: protocol 253, 4-byte entropy header (EV 0x4242, reserved 0)."""
    frame = Frame(pds=PdsUud(NextHeader.REQ_SMALL), ses=SesSmall(SesOpcode.SEND, flags=3),
                  encap="ip", ev=0x4242, src_ip="10.0.0.1", dst_ip="10.0.0.2")
    wire = encode_frame(frame)
    assert wire[14 + 9] == 253
    assert wire[34:38] == h("4242 0000")
    assert wire[38:40] == h("3080")
    assert decode_frame(wire) == frame
