"""Scapy layer conveniences: bindings when building, helper methods, summaries."""

from __future__ import annotations

from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether

from uet.wire import layers as L
from uet.wire.codec import decode_frame

ETH = dict(dst="02:00:00:00:00:02", src="02:00:00:00:00:01")


def test_building_fills_port_protocol_and_next_header() -> None:
    pkt = (Ether(**ETH) / IP(src="10.0.0.1", dst="10.0.0.2", flags="DF") / UDP(sport=53, chksum=0)
           / L.UETPdsReq(psn=5, spdcid=1, dpdcid=2) / L.UETSesStd(opcode=5, flags=3))
    wire = bytes(pkt)
    again = Ether(wire)
    # dport 4793 wins over the DNS binding of sport 53
    assert again[UDP].dport == 4793 and again.haslayer(L.UETSesStd)
    assert again[L.UETPdsReq].next_hdr == 3
    frame = decode_frame(wire)
    assert (frame.ev, frame.pds.psn, frame.ses.opcode) == (53, 5, 5)
    assert again[L.UETPdsReq].mysummary() == "UET RUD_REQ"
    assert again.summary().endswith("SES SEND")


def test_native_ip_binding_ipv6() -> None:
    pkt = (Ether(**ETH) / IPv6(src="fd00::1", dst="fd00::2") / L.UETEntropy(entropy=7)
           / L.UETPdsUud() / L.UETSesSmall(opcode=7, flags=3))
    wire = bytes(pkt)
    assert Ether(wire)[IPv6].nh == 253
    frame = decode_frame(wire)
    assert (frame.encap, frame.ev, frame.ses.opcode) == ("ip", 7, 7)


def test_helper_methods_use_serial_arithmetic() -> None:
    assert L.UETPdsReq(psn=5, clear_psn_offset=-6).clear_psn() == 2**32 - 1
    assert L.UETPdsCcReq(flags=4, psn=1, psn_offset=3).start_psn() == 2**32 - 2
    assert L.UETPdsCp(flags=4, psn=10, psn_offset=3).start_psn() == 7
    assert L.UETPdsAck(cack_psn=2**32 - 1, ack_psn_offset=2).ack_psn() == 1
    assert L.UETPdsAck(flags=0x08, probe_opaque=0xFFFF, cack_psn=10).ack_psn() == 9
    ack = L.UETPdsAckCc(cack_psn=100, sack_psn_offset=-2, sack_bitmap=0b101)
    assert ack.sack_base() == 98 and ack.sacked_psns() == [98, 100]
    assert L.UETSesStd(opcode=8, buffer_offset=77).restart_token() == 77
    assert L.UETSesStd(opcode=12, memory_key=88).restart_token() == 88
    assert L.UETSesStd(opcode=5).restart_token() is None


def test_reserved_bits_are_visible_in_scapy() -> None:
    """The codec ignores reserved bits; scapy shows them (pdc_info bits 14-12 here)."""
    raw = bytes.fromhex("118c0000000000100001f003") + bytes(44)
    pkt = L.UET(raw)
    assert isinstance(pkt, L.UETPdsReq)
    assert (pkt.use_rsv_pdc, pkt.pdc_info_rsvd, pkt.psn_offset) == (1, 7, 3)


def test_error_layer_exception() -> None:
    err = L.UET(bytes.fromhex("f800"))
    assert isinstance(err, L.UETDecodeError)
    exc = err.as_exception()
    assert type(exc).__name__ == "UnknownType" and exc.offset == 0
    assert "unknown PDS type 31" in err.summary()
    empty = L.UET(b"")
    assert isinstance(empty, L.UETDecodeError) and empty.kind == "TruncatedHeader"
