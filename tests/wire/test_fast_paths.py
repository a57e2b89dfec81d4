"""The codec's fast paths (a RUD/ROD request with a standard SES header, an ACK_CC with NSCC
or credit state) against the general path and scapy: the same bytes, the same records, and
for any corruption of such a frame the same record or the same error."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from scapy.layers.l2 import Ether
from wire_strategies import IPV4, MAC, u, uet_frame

from uet.wire import codec, layers
from uet.wire.codec import decode_frame, encode_frame
from uet.wire.errors import DecodeError
from uet.wire.records import Frame, PdsAckCc, PdsRequest


@st.composite
def common_frame(draw) -> Frame:
    """A frame of one of the two common shapes, every field varied (IPv4, UDP checksum 0,
    no TSS, no trailer), or a near miss (an ACK_CC with another CC type, a probe form, a
    response, an extension header) that the general path must take."""
    if draw(st.booleans()):
        f = draw(uet_frame([2, 3, 13, 14], [3]))
    else:
        f = draw(uet_frame([8], [0, 4]))
    f.tss = None
    f.trailer = b""
    f.payload = draw(st.one_of(st.binary(max_size=64), st.just(bytes(4096))))
    f.src_ip, f.dst_ip = draw(IPV4), draw(IPV4)
    f.src_mac, f.dst_mac = draw(MAC), draw(MAC)
    f.ev, f.dscp, f.ecn, f.ttl, f.ip_id = (draw(u(16)), draw(u(6)), draw(u(2)), draw(u(8)),
                                           draw(u(16)))
    f.udp_dport = draw(st.sampled_from([4793, 4793, draw(u(16))]))
    return f


def _decode_general(data, udp_port=4793):
    try:
        return codec._decode_general(data, 0, udp_port, 253)
    except DecodeError as exc:
        return type(exc), str(exc)


def _decode(data, udp_port=4793):
    try:
        return decode_frame(data, udp_port=udp_port)
    except DecodeError as exc:
        return type(exc), str(exc)


@settings(max_examples=300)
@given(common_frame())
def test_fast_paths_are_the_general_path_and_scapy(f: Frame) -> None:
    wire = encode_frame(f)
    assert wire == codec._encode_general(f) == bytes(layers.frame_to_scapy(f))
    assert codec._encode_fast(f, f.pds) in (None, wire)  # caches filled: same or declined
    assert decode_frame(wire, udp_port=None) == f == codec._decode_general(wire, 0, None, 253)
    if f.udp_dport == 4793:  # scapy binds its UET layers to the UET port only
        assert layers.scapy_to_frame(Ether(wire), 0) == f


def test_the_fast_paths_take_the_common_frames() -> None:
    """Not a decorative fast path: the data and ACK frames of a run go through it."""
    from uet.wire.records import SesStandard

    data = Frame(PdsRequest(2, 3, 0x01, -1, 1000, 5, 6),
                 SesStandard(1, 0, 0x20, 9, 0, 1, 0, 0x7FF, 0, 12, 0x51, 0, 4096, 8192,
                             100000), payload=bytes(4096), ev=77, dscp=26, ecn=2)
    ack = Frame(PdsAckCc(8, 0, 0, 0, 1000, 6, 5, 0, 0, 4, 1, 3), ev=77, dscp=46)
    credit = Frame(PdsAckCc(8, 0, 0, 0, 1000, 6, 5, 1, 0, 4, 1, 3, credit=99), ev=1)
    for f in (data, ack, credit):
        encode_frame(f)  # fills the address caches
        wire = codec._encode_fast(f, f.pds)
        assert wire == codec._encode_general(f)
        assert codec._decode_fast(wire, 4793) == f


@settings(max_examples=300)
@given(common_frame(), st.lists(st.tuples(st.integers(0, 120), u(8)), min_size=1,
                                max_size=4), st.sampled_from([4793, None, 1234]))
def test_a_corrupted_common_frame_decodes_as_the_general_path_says(f, flips, port) -> None:
    buf = bytearray(encode_frame(f))
    for pos, value in flips:
        if pos < len(buf):
            buf[pos] = value
    data = bytes(buf)
    assert _decode(data, port) == _decode_general(data, port)
    cut = data[:len(data) // 2]
    assert _decode(cut, port) == _decode_general(cut, port)
