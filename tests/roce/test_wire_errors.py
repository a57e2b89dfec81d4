"""Bad RoCEv2 input: every defect gives a DecodeError naming the header, never anything
else, and a frame the encoder cannot express gives an EncodeError."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from roce_strategies import roce_frame

from uet.roce import codec
from uet.roce.constants import Opcode
from uet.roce.records import Aeth, Bth, Reth, RoceFrame
from uet.wire.errors import BadChecksum, BadLength, DecodeError, EncodeError, UnknownType


def _write(payload: bytes = b"abcdefgh") -> RoceFrame:
    return RoceFrame(Bth(Opcode.WRITE_ONLY, dqpn=5, psn=9), reth=Reth(0, 1, len(payload)),
                     payload=payload)


def test_wrong_icrc_is_refused_or_flagged():
    wire = bytearray(codec.encode_frame(_write()))
    wire[-1] ^= 0xFF
    with pytest.raises(BadChecksum) as exc:
        codec.decode_frame(bytes(wire))
    assert exc.value.header == "icrc"
    f = codec.decode_frame(bytes(wire), check_icrc=False)
    assert not f.icrc_ok and f == _write()


def test_forced_icrc_is_written():
    wire = codec.encode_frame_with_icrc(_write(), 0x01020304)
    assert wire[-4:] == bytes([1, 2, 3, 4])
    assert not codec.icrc_valid(wire)


def test_not_roce_port():
    f = _write()
    f.dport = 4793
    with pytest.raises(UnknownType) as exc:
        codec.decode_frame(codec.encode_frame(f))
    assert exc.value.header == "udp"
    assert codec.decode_frame(codec.encode_frame(f), udp_port=None).dport == 4793


def test_unknown_opcode_and_trailing_bytes():
    wire = bytearray(codec.encode_frame(RoceFrame(Bth(Opcode.ACKNOWLEDGE), aeth=Aeth())))
    wire[42] = 0x13  # COMPARE_SWAP: atomics are not supported
    with pytest.raises(UnknownType):
        codec.decode_frame(bytes(wire), check_icrc=False)
    with pytest.raises(EncodeError):
        codec.encode_frame(RoceFrame(Bth(Opcode.ACKNOWLEDGE), aeth=Aeth(), payload=b"x"))
    with pytest.raises(EncodeError):
        codec.encode_frame(RoceFrame(Bth(Opcode.WRITE_FIRST), payload=b"x"))  # no RETH
    with pytest.raises(EncodeError):
        codec.encode_frame(RoceFrame(Bth(Opcode.SEND_ONLY), reth=Reth()))
    with pytest.raises(EncodeError):
        codec.encode_frame(RoceFrame(Bth(Opcode.SEND_ONLY, psn=1 << 24)))


def test_pad_count_larger_than_payload():
    wire = bytearray(codec.encode_frame(RoceFrame(Bth(Opcode.SEND_ONLY), payload=b"ab")))
    assert wire[43] >> 4 & 3 == 2  # two pad bytes
    short = bytearray(codec.encode_frame(RoceFrame(Bth(Opcode.SEND_MIDDLE))))
    short[43] |= 0x30
    with pytest.raises(BadLength):
        codec.decode_frame(bytes(short), check_icrc=False)


@settings(max_examples=300, deadline=None)
@given(roce_frame(), st.data())
def test_cut_or_mutated_frames_raise_only_decode_errors(f: RoceFrame, data) -> None:
    wire = bytearray(codec.encode_frame(f))
    if data.draw(st.booleans()):
        wire = wire[:data.draw(st.integers(0, len(wire) - 1))]
    else:
        for _ in range(data.draw(st.integers(1, 4))):
            pos = data.draw(st.integers(0, len(wire) - 1))
            wire[pos] = data.draw(st.integers(0, 255))
    try:
        out = codec.decode_frame(bytes(wire))
    except DecodeError as exc:
        assert exc.header in {"ethernet", "ipv4", "ipv6", "udp", "bth", "reth", "aeth",
                              "imm", "cnp", "icrc", "frame"}
    else:  # a mutation the checks cannot see (e.g. an equal byte): decodes consistently
        assert codec.encode_frame(out) == bytes(wire[:len(codec.encode_frame(out))])
