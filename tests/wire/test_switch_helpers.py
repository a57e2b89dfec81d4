"""Raw-frame helpers for the fabric switch: 5-tuple, header length, DSCP/ECN, trimming."""

from __future__ import annotations

import dataclasses
import socket

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from wire_strategies import full_frame

from uet.wire.codec import (
    decode_frame,
    encode_frame,
    encode_uet,
    get_dscp_ecn,
    mark_ce,
    peek_flow,
    set_dscp_ecn,
    trim_frame,
    uet_header_length,
)
from uet.wire.errors import Unsupported
from uet.wire.records import Frame, PdsControl


def _headers_len(f: Frame) -> int:
    l3 = 40 if f.ipv6 else 20
    l4 = 8 if f.encap == "udp" else 4
    uet = len(encode_uet(dataclasses.replace(f, payload=b"", trailer=b"")))
    return 14 + l3 + l4 + uet


@settings(max_examples=150)
@given(full_frame())
def test_peek_flow_and_header_length(f: Frame) -> None:
    wire = encode_frame(f)
    src, dst, proto, sport, dport = peek_flow(wire)
    assert len(src) == (16 if f.ipv6 else 4)
    fam = socket.AF_INET6 if f.ipv6 else socket.AF_INET
    assert (socket.inet_ntop(fam, src), socket.inet_ntop(fam, dst)) == (f.src_ip, f.dst_ip)
    if f.encap == "udp":
        assert (proto, sport, dport) == (17, f.ev, f.udp_dport)
    else:
        assert (proto, sport, dport) == (f.ip_proto, f.ev, 0)
    if f.tss is not None:  # what follows a TSS header is encrypted: no boundary to find
        with pytest.raises(Unsupported, match="TSS header"):
            uet_header_length(wire)
        return
    assert uet_header_length(wire) == _headers_len(f)


@settings(max_examples=150)
@given(full_frame(), st.integers(0, 63), st.integers(0, 3))
def test_set_dscp_ecn_keeps_checksums_valid(f: Frame, dscp: int, ecn: int) -> None:
    buf = bytearray(encode_frame(f))
    assert get_dscp_ecn(buf) == (f.dscp, f.ecn)
    set_dscp_ecn(buf, dscp=dscp)
    assert get_dscp_ecn(buf) == (dscp, f.ecn)
    set_dscp_ecn(buf, ecn=ecn)
    # incremental update gives exactly the bytes of a fresh encode
    assert bytes(buf) == encode_frame(dataclasses.replace(f, dscp=dscp, ecn=ecn))
    got = decode_frame(buf, len(f.trailer))  # verifies the IPv4 and UDP checksums
    assert (got.dscp, got.ecn) == (dscp, ecn)


def test_mark_ce() -> None:
    f = Frame(pds=PdsControl(ctl_type=6, probe_opaque=9, psn=3), ecn=2, dscp=10)
    buf = bytearray(encode_frame(f))
    assert mark_ce(buf) is True
    assert get_dscp_ecn(buf) == (10, 3)
    assert decode_frame(buf).ecn == 3
    assert mark_ce(buf) is True  # already CE
    not_ect = bytearray(encode_frame(dataclasses.replace(f, ecn=0)))
    assert mark_ce(not_ect) is False
    assert get_dscp_ecn(not_ect) == (10, 0)


@settings(max_examples=150)
@given(full_frame(), st.one_of(st.none(), st.integers(0, 63)))
def test_trim_frame(f: Frame, dscp: int | None) -> None:
    wire = encode_frame(f)
    if f.tss is not None:  # a secured frame cannot be trimmed (a switch drops it instead)
        with pytest.raises(Unsupported):
            trim_frame(wire, dscp=dscp)
        return
    trimmed = trim_frame(wire, dscp=dscp)
    assert len(trimmed) == _headers_len(f)
    got = decode_frame(trimmed)  # lengths and checksums were fixed
    want = dataclasses.replace(f, payload=b"", trailer=b"",
                               dscp=f.dscp if dscp is None else dscp)
    assert got == want
    # an explicit length keeps part of the payload
    keep = _headers_len(f) + len(f.payload) // 2
    got2 = decode_frame(trim_frame(wire, keep))
    assert got2.payload == (f.payload + f.trailer)[:len(f.payload) // 2]
