"""Random and mutated bytes: the codec raises only DecodeError, scapy never crashes, and
both decoders agree on every input (same record, or the same error kind/header/offset)."""

from __future__ import annotations

import contextlib

from hypothesis import given, settings
from hypothesis import strategies as st
from wire_strategies import full_frame, uet_frame

from uet.wire import layers
from uet.wire.codec import decode_frame, decode_uet, encode_frame, encode_uet, uet_header_length
from uet.wire.errors import DecodeError


def _scapy_error(pkt) -> layers.UETDecodeError | None:
    layer = pkt
    while layer:
        if isinstance(layer, layers.UETDecodeError):
            return layer
        layer = layer.payload
    return None


def _scapy_frame(raw: bytes) -> None:
    """Scapy dissects the frame, or (frames shorter than scapy's own Ethernet/IP layers
    need) ``dissect_frame`` raises DecodeError; UET errors appear as an error layer."""
    try:
        pkt = layers.dissect_frame(raw)
    except DecodeError:
        return
    with contextlib.suppress(DecodeError):
        layers.scapy_to_frame(pkt)


def _agree_uet(data: bytes) -> None:
    """Codec and scapy agree on the UET part ``data``."""
    try:
        rec = decode_uet(data)
        codec_err = None
    except DecodeError as exc:
        rec, codec_err = None, exc
    pkt = layers.UET(data)  # must not raise
    err = _scapy_error(pkt)
    if codec_err is None:
        assert err is None, (err.header, err.offset, err.reason)
        assert layers.scapy_to_uet(pkt) == rec
    else:
        assert err is not None, f"scapy decoded what the codec rejects: {codec_err}"
        assert (err.kind, err.header, err.offset) == (
            type(codec_err).__name__, codec_err.header, codec_err.offset), (err.reason,
                                                                             str(codec_err))
        assert bytes(err.load) == data[err.offset:]
        try:
            layers.scapy_to_uet(pkt)
        except DecodeError as exc:
            assert type(exc) is type(codec_err) and exc.offset == codec_err.offset
        else:
            raise AssertionError("scapy_to_uet accepted an error layer")


@settings(max_examples=300)
@given(st.binary(max_size=120))
def test_random_uet_bytes(data: bytes) -> None:
    _agree_uet(data)


@st.composite
def mutated_uet(draw) -> bytes:
    wire = bytearray(encode_uet(draw(uet_frame())))
    for _ in range(draw(st.integers(1, 4))):
        if not wire:
            break
        op = draw(st.sampled_from(["flip", "set", "cut"]))
        i = draw(st.integers(0, len(wire) - 1))
        if op == "flip":
            wire[i] ^= 1 << draw(st.integers(0, 7))
        elif op == "set":
            wire[i] = draw(st.integers(0, 255))
        else:
            del wire[i:]
    return bytes(wire)


@settings(max_examples=400)
@given(mutated_uet())
def test_mutated_uet_bytes(data: bytes) -> None:
    _agree_uet(data)


@settings(max_examples=300)
@given(st.data())
def test_mutated_frames_only_raise_decode_error(data) -> None:
    f = data.draw(full_frame())
    wire = bytearray(encode_frame(f))
    for _ in range(data.draw(st.integers(1, 3))):
        i = data.draw(st.integers(0, len(wire) - 1))
        if data.draw(st.booleans()):
            wire[i] = data.draw(st.integers(0, 255))
        else:
            del wire[i:]
            if not wire:
                break
    raw = bytes(wire)
    for call in (lambda: decode_frame(raw), lambda: decode_frame(raw, 3),
                 lambda: decode_frame(raw, udp_port=None), lambda: uet_header_length(raw)):
        with contextlib.suppress(DecodeError):
            call()
    _scapy_frame(raw)  # scapy must not crash either


@settings(max_examples=200)
@given(st.binary(max_size=200))
def test_random_frames_only_raise_decode_error(data: bytes) -> None:
    for call in (lambda: decode_frame(data), lambda: decode_frame(data, 5),
                 lambda: decode_uet(data, 7)):
        with contextlib.suppress(DecodeError):
            call()
    _scapy_frame(data)
    layers.UET(data)


def test_non_bytes_input_is_a_decode_error() -> None:
    for bad in (None, 12, "text"):
        try:
            decode_frame(bad)  # type: ignore[arg-type]
        except DecodeError:
            pass
        else:
            raise AssertionError(bad)
