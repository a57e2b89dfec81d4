"""The codec's checksums through uet.native: byte-identical to its pure-Python path and scapy.

The codec picks the native one's-complement sum (for 128 bytes or more) and RFC 1624 adjust
at import unless UET_PURE_PYTHON=1; here both paths run side by side in one process by
switching the codec's module-level choice with ``monkeypatch``.
"""

from __future__ import annotations

import random
from types import ModuleType

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether

import uet.native as native
from uet.wire import codec
from uet.wire.constants import NextHeader, PdsType, SesOpcode
from uet.wire.errors import BadChecksum
from uet.wire.records import Frame, PdsRequest, SesStandard


def _frame(rng: random.Random, v6: bool) -> Frame:
    n = rng.choice([0, 1, 63, 64, 127, 128, 129, 1499, 4096, 4097, rng.randint(0, 9000)])
    return Frame(
        pds=PdsRequest(PdsType.RUD_REQ, NextHeader.REQ_STD, 0, 0, rng.getrandbits(32), 7, 9),
        ses=SesStandard(SesOpcode.WRITE, 0, 0, message_id=rng.getrandbits(16), job_id=42,
                        request_length=n),
        payload=rng.randbytes(n), trailer=rng.randbytes(rng.choice([0, 0, 1, 4, 16])),
        src_ip="fd00::1" if v6 else "10.0.0.1", dst_ip="fd00::2" if v6 else "10.0.0.2",
        ev=rng.getrandbits(16), dscp=rng.getrandbits(6), ecn=rng.getrandbits(2),
        udp_checksum=True)


def _pure_codec(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(codec, "_ONES_SUM", None)
    monkeypatch.setattr(codec, "_adjust", codec._adjust_py)


def test_codec_uses_the_implementation_in_use() -> None:
    if native.IMPLEMENTATION == "native":
        assert codec._ONES_SUM is native.fast.ones_sum
        assert codec._adjust is native.fast.checksum_adjust
    else:  # UET_PURE_PYTHON=1: the codec's own pure-Python sums
        assert codec._ONES_SUM is None and codec._adjust is codec._adjust_py


@pytest.mark.parametrize("v6", [False, True], ids=["ipv4", "ipv6"])
def test_udp_checksum_native_equals_pure_and_scapy(
    both: tuple[ModuleType, ModuleType], monkeypatch: pytest.MonkeyPatch, v6: bool
) -> None:
    _, fast = both
    rng = random.Random(11 + v6)
    frames = [_frame(rng, v6) for _ in range(60)]
    monkeypatch.setattr(codec, "_ONES_SUM", fast.ones_sum)
    native_wire = [codec.encode_frame(f) for f in frames]
    for f, wire in zip(frames, native_wire, strict=True):
        assert codec.decode_frame(wire, len(f.trailer)) == f
        bad = bytearray(wire)
        bad[-1 - len(f.trailer) // 2] ^= 0x40  # one payload or trailer bit
        with pytest.raises(BadChecksum, match="UDP checksum mismatch"):
            codec.decode_frame(bytes(bad), len(f.trailer))
    _pure_codec(monkeypatch)
    assert [codec.encode_frame(f) for f in frames] == native_wire
    for f, wire in zip(frames, native_wire, strict=True):
        assert codec.decode_frame(wire, len(f.trailer)) == f
        # scapy recomputes the checksum itself when the field is deleted
        pkt = Ether(wire)
        layer = pkt[IPv6] if v6 else pkt[IP]
        want = pkt[UDP].chksum
        del pkt[UDP].chksum
        if not v6:
            del layer.chksum
        assert Ether(bytes(pkt))[UDP].chksum == want


def test_trim_and_dscp_rewrite_native_equals_pure(
    both: tuple[ModuleType, ModuleType], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, fast = both
    rng = random.Random(5)
    frames = [_frame(rng, rng.random() < 0.5) for _ in range(40)]
    wires = [codec.encode_frame(f) for f in frames]

    def rewrite() -> list[bytes]:
        out = []
        for wire in wires:
            keep = rng.randint(codec.uet_header_length(wire), len(wire))
            out.append(codec.trim_frame(wire, keep, dscp=rng.getrandbits(6)))
            buf = bytearray(wire)
            codec.set_dscp_ecn(buf, dscp=rng.getrandbits(6), ecn=rng.getrandbits(2))
            codec.mark_ce(buf)
            out.append(bytes(buf))
        return out

    monkeypatch.setattr(codec, "_ONES_SUM", fast.ones_sum)
    monkeypatch.setattr(codec, "_adjust", fast.checksum_adjust)
    rng.seed(9)
    with_native = rewrite()
    for wire in with_native:
        codec.decode_frame(wire)  # both checksums still valid
    _pure_codec(monkeypatch)
    rng.seed(9)
    assert rewrite() == with_native


def test_adjust_native_equals_pure(both: tuple[ModuleType, ModuleType]) -> None:
    _, fast = both
    rng = random.Random(2)
    for _ in range(20000):
        args = (rng.getrandbits(16), rng.getrandbits(16), rng.getrandbits(16))
        assert fast.checksum_adjust(*args) == codec._adjust_py(*args)
    for args in ((0, 0, 0), (0xFFFF, 0xFFFF, 0xFFFF), (0, 0xFFFF, 0), (0xFFFF, 0, 0xFFFF)):
        assert fast.checksum_adjust(*args) == codec._adjust_py(*args)
