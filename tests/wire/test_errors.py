"""Each decode error names the header, the byte offset and the reason; scapy agrees."""

from __future__ import annotations

import struct

import pytest

from uet.wire import layers
from uet.wire.codec import decode_frame, decode_uet, encode_frame, encode_uet
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
    PdsControl,
    PdsRequest,
    SesResponse,
    SesSmall,
    SesStandard,
    TssHeader,
)

REQ = Frame(pds=PdsRequest(flags=0x08, psn=7, spdcid=1, dpdcid=2),
            ses=SesStandard(opcode=5, flags=3, request_length=100), payload=b"x" * 100,
            ev=999)
WIRE = encode_frame(REQ)  # 14 + 20 + 8 + 12 + 44 + 100
UET_OFF = 42


def _raises(exc_type, header: str, offset: int, data: bytes, **kw) -> DecodeError:
    with pytest.raises(exc_type) as info:
        decode_frame(data, **kw)
    err = info.value
    assert (err.header, err.offset) == (header, offset), str(err)
    assert err.reason and str(offset) in str(err)
    return err


def _patch(data: bytes, off: int, fmt: str, value: int, fix_ip: bool = True) -> bytes:
    b = bytearray(data)
    struct.pack_into(fmt, b, off, value)
    if fix_ip:
        struct.pack_into("!H", b, 24, 0)
        s = sum(struct.unpack("!10H", bytes(b[14:34])))
        while s >> 16:
            s = (s & 0xFFFF) + (s >> 16)
        struct.pack_into("!H", b, 24, ~s & 0xFFFF)
    return bytes(b)


def test_truncated_ethernet_and_ip() -> None:
    _raises(TruncatedHeader, "ethernet", 0, WIRE[:13])
    _raises(TruncatedHeader, "ipv4", 14, WIRE[:30])
    v6 = encode_frame(Frame(pds=REQ.pds, ses=REQ.ses, src_ip="fd00::1", dst_ip="fd00::2",
                            udp_checksum=True))
    _raises(TruncatedHeader, "ipv6", 14, v6[:50])


def test_unknown_ethertype_protocol_and_port() -> None:
    _raises(UnknownType, "ethernet", 12, _patch(WIRE, 12, "!H", 0x0806, fix_ip=False))
    _raises(UnknownType, "ipv4", 23, _patch(WIRE, 23, "!B", 6))
    _raises(UnknownType, "udp", 36, _patch(WIRE, 36, "!H", 53, fix_ip=False))
    # any UDP port is accepted when asked to
    assert decode_frame(_patch(WIRE, 36, "!H", 53, fix_ip=False), udp_port=None).udp_dport == 53


def test_ip_length_and_checksum_errors() -> None:
    _raises(BadLength, "ipv4", 16, _patch(WIRE, 16, "!H", len(WIRE)))  # longer than buffer
    _raises(BadChecksum, "ipv4", 24, _patch(WIRE, 24, "!H", 0x1234, fix_ip=False))
    _raises(BadLength, "udp", 38, _patch(WIRE, 38, "!H", 20, fix_ip=False))
    # a wrong non-zero UDP checksum is an error; zero means "none" over IPv4
    _raises(BadChecksum, "udp", 40, _patch(WIRE, 40, "!H", 0xBEEF, fix_ip=False))
    assert decode_frame(WIRE) == REQ


def test_udp_checksum_rules() -> None:
    good = encode_frame(Frame(pds=REQ.pds, ses=REQ.ses, udp_checksum=True, payload=b"abc"))
    assert struct.unpack_from("!H", good, 40)[0] != 0
    assert decode_frame(good).udp_checksum is True
    _raises(BadChecksum, "udp", 40, _patch(good, 40, "!H", 1 ^ good[41], fix_ip=False))
    v6 = encode_frame(Frame(pds=REQ.pds, ses=REQ.ses, src_ip="fd00::1", dst_ip="fd00::2"))
    assert struct.unpack_from("!H", v6, 60)[0] != 0  # always computed over IPv6
    zero = bytearray(v6)
    zero[60:62] = b"\0\0"
    _raises(BadChecksum, "udp", 60, bytes(zero))


def test_ipv4_options_and_fragments_unsupported() -> None:
    _raises(Unsupported, "ipv4", 14, _patch(WIRE, 14, "!B", 0x46))
    _raises(Unsupported, "ipv4", 20, _patch(WIRE, 20, "!H", 0x2000))  # MF
    _raises(InconsistentHeader, "ipv4", 14, _patch(WIRE, 14, "!B", 0x65))


def test_ethernet_padding_is_ignored() -> None:
    small = encode_frame(Frame(pds=PdsControl(ctl_type=4, flags=0x08, psn=5)))
    padded = small + bytes(60 - len(small)) if len(small) < 60 else small + b"\0\0"
    assert decode_frame(padded) == decode_frame(small)


@pytest.mark.parametrize("word,exc,reason", [
    (0x0000, UnknownType, "unknown PDS type 0"),
    (0x7800, UnknownType, "unknown PDS type 15"),
    (0xF800, UnknownType, "unknown PDS type 31"),
    (0x1380, UnknownType, "unknown next header 7"),  # RUD with next_hdr 7
    (0x1000, InconsistentHeader, "NONE not allowed after RUD_REQ"),
    (0x1200, InconsistentHeader, "RSP not allowed after RUD_REQ"),
    (0x3980, InconsistentHeader, "REQ_STD not allowed after ACK"),
    (0x5D00, UnknownType, "unknown control packet type 10"),
])
def test_pds_prologue_errors(word: int, exc, reason: str) -> None:
    data = struct.pack("!H", word) + bytes(60)
    with pytest.raises(exc, match=reason) as info:
        decode_uet(data)
    assert (info.value.header, info.value.offset) == ("pds", 0)
    err = layers.UET(data)
    assert isinstance(err, layers.UETDecodeError)
    assert (err.kind, err.header, err.offset) == (exc.__name__, "pds", 0)


def test_tss_after_tss_and_truncated_headers() -> None:
    tss = encode_uet(Frame(pds=PdsControl(), tss=TssHeader()))
    with pytest.raises(InconsistentHeader) as info:
        decode_uet(tss[:12] + tss)
    assert (info.value.header, info.value.offset) == ("pds", 12)
    for cut, header, offset in [(1, "pds", 0), (11, "pds", 0)]:
        with pytest.raises(TruncatedHeader) as info:
            decode_uet(encode_uet(REQ)[:cut])
        assert (info.value.header, info.value.offset) == (header, offset)
    with pytest.raises(TruncatedHeader) as info:
        decode_uet(tss[:11])
    assert (info.value.header, info.value.offset) == ("tss", 0)
    with pytest.raises(TruncatedHeader) as info:
        decode_uet(encode_uet(REQ)[:12 + 43])
    assert (info.value.header, info.value.offset) == ("ses", 12)


def test_extension_truncation() -> None:
    atomic = Frame(pds=PdsRequest(next_hdr=1, psn=1), ses=SesSmall(opcode=3, flags=3),
                   ext=AtomicExt(2, 7, 0))
    cas = Frame(pds=PdsRequest(next_hdr=1, psn=1), ses=SesSmall(opcode=3, flags=3),
                ext=CasExt(0x0D, 7, 0, 1, 2))
    for frame, cut in [(atomic, 32), (atomic, 34), (cas, 35), (cas, 67)]:
        wire = encode_uet(frame)[:cut]
        with pytest.raises(TruncatedHeader) as info:
            decode_uet(wire)
        assert (info.value.header, info.value.offset) == ("ext", 32)
        err = layers.UET(wire).getlayer(layers.UETDecodeError)
        assert (err.header, err.offset) == ("ext", 32)


@pytest.mark.parametrize("nh,opcode", [(4, 2), (5, 1), (6, 0), (6, 3)])
def test_response_opcode_must_fit_next_header(nh: int, opcode: int) -> None:
    """Ref. 4.5: RSP carries opcodes 0/1/3, RSP_DATA and RSP_DATA_SMALL only 2."""
    wire = bytearray(encode_uet(Frame(pds=PdsAck(next_hdr=4), ses=SesResponse(opcode=1))))
    wire[0:2] = struct.pack("!H", 0x3800 | nh << 7)
    wire[12] = opcode
    wire += bytes(8)
    with pytest.raises(InconsistentHeader, match=f"response opcode {opcode}") as info:
        decode_uet(bytes(wire))
    assert (info.value.header, info.value.offset) == ("ses", 12)
    err = layers.UET(bytes(wire)).getlayer(layers.UETDecodeError)
    assert (err.kind, err.header, err.offset) == ("InconsistentHeader", "ses", 12)


def test_trimmed_frame_is_not_an_error() -> None:
    """A switch may cut the payload: the SES request length then exceeds the payload."""
    frame = Frame(pds=REQ.pds, ses=REQ.ses, payload=b"")
    assert decode_frame(encode_frame(frame)).ses.request_length == 100


def test_bad_trailer_length() -> None:
    with pytest.raises(BadLength) as info:
        decode_frame(encode_frame(Frame(pds=PdsControl())), trailer_len=17)
    assert info.value.header == "trailer"
    with pytest.raises(BadLength):
        decode_uet(b"\x58\x00", trailer_len=3)


def test_encoder_rejects_out_of_range_values() -> None:
    with pytest.raises(EncodeError):
        encode_frame(Frame(pds=PdsRequest(psn=2**32)))
    with pytest.raises(EncodeError):
        encode_frame(Frame(pds=PdsRequest(clear_psn_offset=40000)))
    with pytest.raises(EncodeError):
        encode_frame(Frame(pds=PdsControl(), src_ip="10.0.0.1", dst_ip="fd00::1"))
    with pytest.raises(EncodeError):
        encode_frame(Frame(pds=PdsControl(), src_mac="nonsense"))
    with pytest.raises(EncodeError):
        encode_uet(Frame(pds=SesSmall()))  # type: ignore[arg-type]


def test_decode_error_pickles() -> None:
    import pickle

    err = pickle.loads(pickle.dumps(BadLength("udp", 38, "x")))
    assert (type(err), err.header, err.offset, err.reason) == (BadLength, "udp", 38, "x")
