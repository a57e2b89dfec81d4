"""The codec's two common frames in C (``uet.native._codec_core``) against the Python fast
path they replace: whenever C answers, it is with the same bytes and the same records
(values and types); where the Python fast path takes a frame, C takes it too once the
codec's address caches know its addresses; corrupted frames are declined or decoded alike."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_fast_paths import common_frame
from wire_strategies import u

from uet.wire import codec
from uet.wire.records import Frame, PdsAckCc, PdsRequest, SesStandard

pytestmark = pytest.mark.skipif(codec._c_encode is None,
                                reason="the C codec is off (UET_PURE_PYTHON=1)")


def _types(rec) -> list:
    return [type(getattr(rec, k)) for k in rec.__slots__]


def _same_record(a: Frame, b: Frame) -> None:
    assert a == b
    assert _types(a) == _types(b) and _types(a.pds) == _types(b.pds)
    assert (a.ses is None) == (b.ses is None)
    if a.ses is not None:
        assert _types(a.ses) == _types(b.ses)


@settings(max_examples=400, deadline=None)
@given(common_frame(), st.lists(st.tuples(st.integers(0, 120), u(8)), max_size=3),
       st.sampled_from([4793, None, 1234]))
def test_c_packs_and_unpacks_as_the_python_fast_path(f: Frame, flips, port) -> None:
    wire = codec.encode_frame(f)  # fills the address caches
    codec.decode_frame(wire, udp_port=None)
    py = codec._encode_fast(f, f.pds)
    c = codec._c_encode(f)
    assert c == py  # the caches know the addresses: C takes what Python takes
    buf = bytearray(wire)
    for pos, value in flips:
        if pos < len(buf):
            buf[pos] = value
    data = bytes(buf)
    pyd = codec._decode_fast(data, port)
    cd = codec._c_decode(data, port)
    if pyd is None:
        assert cd is None
    elif cd is None:  # only for an address or MAC the text caches have not seen
        assert codec._ip_text.get(data[26:30]) is None or codec._mac_text.get(
            data[6:12]) is None or codec._mac_text.get(data[:6]) is None
    else:
        _same_record(cd, pyd)
        # an end point's receive path: the payload as a view of the same bytes, no copy
        view = codec._c_decode(data, port, True)
        assert view == pyd and bytes(view.payload) == pyd.payload
        if pyd.payload:
            assert type(view.payload) is memoryview and view.payload.obj is data
        else:
            assert type(view.payload) is bytes


def test_c_decodes_a_data_payload_as_a_read_only_view_of_the_frame() -> None:
    """``decode(data, port, True)``: a data frame's payload is a read-only memoryview of the
    received bytes (one byte per item, contiguous), the rest as without it; an ACK keeps its
    empty bytes."""
    payload = bytes(range(256)) * 16
    data = Frame(PdsRequest(2, 3, 0x01, -1, 1000, 5, 6),
                 SesStandard(1, 0, 0x20, 9, 0, 1, 0, 0x7FF, 0, 12, 0x51, 0, 4096, 8192,
                             100000), payload=payload, ev=77)
    wire = codec.encode_frame(data)
    codec.decode_frame(wire)  # fills the address caches
    got = codec._c_decode(wire, 4793, True)
    _same_fields = [k for k in Frame.__slots__ if k != "payload"]
    plain = codec._c_decode(wire, 4793)
    assert [getattr(got, k) for k in _same_fields] == [getattr(plain, k) for k in _same_fields]
    v = got.payload
    assert type(v) is memoryview and v.readonly and v.obj is wire
    assert (v.ndim, v.itemsize, v.format, v.nbytes, len(v)) == (1, 1, "B", 4096, 4096)
    assert v.tobytes() == payload == plain.payload and v[:3] == payload[:3]
    assert v[-1] == payload[-1] and bytes(v[100:200]) == payload[100:200]
    assert hash(v) == hash(payload)  # a read-only byte view hashes as its bytes
    with pytest.raises(TypeError):
        v[0] = 1
    del plain, got
    assert v.tobytes() == payload  # the view keeps the frame's bytes alive
    ack = codec.encode_frame(Frame(PdsAckCc(8, 0, 0, 0, 1000, 6, 5, 0, 0, 4, 1, 3), ev=7))
    codec.decode_frame(ack)
    assert codec._c_decode(ack, 4793, True).payload == b""
    assert type(codec._c_decode(ack, 4793, True).payload) is bytes
    with pytest.raises(TypeError):
        codec._c_decode(wire)


def test_c_shares_the_ints_of_fields_that_repeat() -> None:
    """Two packets of one message: the fields that repeat (PDC IDs, message ID, lengths,
    key, job, initiator, the full payload's length) are the same int objects, from the
    decoder's memo; the PSN is the packet's own; a key past 2^63 is made fresh, right."""
    def frame(psn: int, off: int, key: int) -> bytes:
        f = Frame(PdsRequest(2, 3, 0x01, -1, psn, 5000, 6000),
                  SesStandard(1, 0, 0x20, 900, 0, 70000, 0, 0x7FF, 123456, 1 << 20, key, 0,
                              4096, off, 100000), payload=bytes(4096), ev=7)
        wire = codec.encode_frame(f)
        codec.decode_frame(wire)  # the address caches
        return wire

    for key in (0x51, 2**64 - 1):
        a = codec._c_decode(frame(10**6, 8192, key), 4793)
        b = codec._c_decode(frame(10**6 + 1, 12288, key), 4793)
        for name in ("message_id", "job_id", "buffer_offset", "initiator", "payload_length",
                     "request_length"):
            assert getattr(a.ses, name) is getattr(b.ses, name), name
        assert a.pds.spdcid is b.pds.spdcid and a.pds.dpdcid is b.pds.dpdcid
        assert a.pds.psn == 10**6 and b.pds.psn == 10**6 + 1
        assert a.ses.memory_key == b.ses.memory_key == key
        assert (a.ses.memory_key is b.ses.memory_key) == (key < 2**63)


def test_c_reads_int_subclasses_and_wide_ints_like_ints() -> None:
    """Field values that are int subclasses (IntEnum / IntFlag members, bools) are read
    from their digits inline, values of three digits and more through the API: the same
    bytes as plain ints, and what does not fit still goes to the Python path."""
    from enum import IntEnum, IntFlag

    class E(IntEnum):
        A = 0x01
        BIG = 5000

    class F(IntFlag):
        X = 0x20

    def frame(**kw) -> Frame:
        v = {"type": 0x01, "psn": 2**31 + 5, "spdcid": 5000, "mid": 900, "flags": 0x20,
             "key": 2**62 + 3, "ev": 7}
        v.update(kw)
        return Frame(PdsRequest(2, 3, v["type"], -1, v["psn"], v["spdcid"], 6000),
                     SesStandard(1, 0, v["flags"], v["mid"], 0, 70000, 0, 0x7FF, 123456,
                                 1 << 20, v["key"], 0, 4096, 0, 100000),
                     payload=bytes(4096), ev=v["ev"])

    plain = frame()
    codec.decode_frame(codec.encode_frame(plain))  # the address caches
    want = codec._c_encode(plain)
    assert want is not None and want == codec._encode_fast(plain, plain.pds)
    odd = frame(type=E.A, spdcid=E.BIG, flags=F.X)
    assert codec._c_encode(odd) == want
    assert codec._c_encode(frame(ev=True)) == codec._encode_fast(frame(ev=1), frame(ev=1).pds)
    # negative and too wide values are refused by C (None) exactly as by the range check
    assert codec._c_encode(frame(psn=2**32)) is None
    assert codec._c_encode(frame(psn=-1)) is None
    assert codec._c_encode(frame(key=2**64 - 1)) == codec._encode_fast(
        frame(key=2**64 - 1), frame(key=2**64 - 1).pds)


def test_c_takes_the_frames_of_a_run() -> None:
    """Not decorative: the data and ACK frames go through C, and odd values do not."""
    data = Frame(PdsRequest(2, 3, 0x01, -1, 1000, 5, 6),
                 SesStandard(1, 0, 0x20, 9, 0, 1, 0, 0x7FF, 0, 12, 0x51, 0, 4096, 8192,
                             100000), payload=memoryview(bytes(4096)), ev=77, dscp=26, ecn=2)
    ack = Frame(PdsAckCc(8, 0, 0, 0, 1000, 6, 5, 0, 0, 4, 1, 3), ev=77, dscp=46)
    credit = Frame(PdsAckCc(8, 0, 0, 0, 1000, 6, 5, 1, 0, 4, 1, 3, credit=99), ev=1)
    cc = Frame(PdsRequest(13, 3, 0x05, 2, 7, 5, 0, True, 17, 3, 4095),
               SesStandard(1, 0, 0x21, 9, 0, 1, 0, 0x7FF, 0, 12, 0x51, 2**64 - 1, 0, 0, 0),
               payload=b"x" * 10)
    for f in (data, ack, credit, cc):
        wire = codec._encode_general(f)
        assert codec._c_encode(f) == wire
        codec.decode_frame(wire)
        _same_record(codec._c_decode(wire, 4793), codec._decode_fast(wire, 4793))
    odd = Frame(PdsRequest(2, 3, 0x01, -1, 2**32, 5, 6), SesStandard(1), ev=1)  # PSN > 32 bits
    assert codec._c_encode(odd) is None and codec._encode_fast(odd, odd.pds) is None
    assert codec._c_decode(bytearray(codec.encode_frame(ack)), 4793) is None  # bytes only
    # an atomic opcode says an extension header follows: both fast paths leave it
    op = min(codec._ATOMIC_OPS)
    wire = codec.encode_frame(Frame(PdsRequest(2, 3, 0x01, 0, 1, 5, 6), SesStandard(op),
                                    ev=1))
    assert codec._c_decode(wire, 4793) is None and codec._decode_fast(wire, 4793) is None
