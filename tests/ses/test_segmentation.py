"""Segmentation, reassembly bookkeeping and the choice of request header."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from uet.ses.headers import choose_header, single_header, view
from uet.ses.messages import OutMessage, PacketRef
from uet.ses.reassembly import Intervals, Reassembly
from uet.ses.segmentation import Segmenter, read_slice, segment, segments, zeros
from uet.wire.constants import DeliveryMode, FepCap, NextHeader, SesFlag, SesOpcode
from uet.wire.records import SesMedium, SesSmall, SesStandard

OPT = FepCap.OPT_NON_MATCHING | FepCap.AI_BASE


@pytest.mark.parametrize("n,mtu,want", [
    (0, 4096, [(0, 0)]), (1, 4096, [(0, 1)]), (4096, 4096, [(0, 4096)]),
    (4097, 4096, [(0, 4096), (4096, 1)]), (10, 4, [(0, 4), (4, 4), (8, 2)]),
])
def test_segments(n, mtu, want):
    assert segments(n, mtu) == want


def test_segment_sets_som_eom_offsets_and_header_data():
    base = SesStandard(opcode=SesOpcode.SEND, flags=SesFlag.HD | SesFlag.DC, message_id=9,
                       header_data=0x1122, request_length=10)
    parts = segment(base, b"0123456789", 4)
    assert [p for _, p in parts] == [b"0123", b"4567", b"89"]
    hdrs = [h for h, _ in parts]
    assert [bool(h.flags & SesFlag.SOM) for h in hdrs] == [True, False, False]
    assert [bool(h.flags & SesFlag.EOM) for h in hdrs] == [False, False, True]
    assert [bool(h.flags & SesFlag.HD) for h in hdrs] == [True, False, False]
    assert all(h.flags & SesFlag.DC and h.request_length == 10 for h in hdrs)
    assert hdrs[0].header_data == 0x1122
    assert [(h.message_offset, h.payload_length) for h in hdrs[1:]] == [(4, 4), (8, 2)]
    assert [view(h).message_offset for h in hdrs] == [0, 4, 8]
    assert [view(h).header_data for h in hdrs] == [0x1122, None, None]


def test_read_segmentation_carries_no_payload():
    base = SesStandard(opcode=SesOpcode.READ, request_length=9000)
    parts = segment(base, b"", 4096, length=9000)
    assert [p for _, p in parts] == [b""] * 3
    offs = [view(h).message_offset for h, _ in parts]
    assert [read_slice(o, 9000, 4096) for o in offs] == [4096, 4096, 808]


@given(st.lists(st.tuples(st.integers(0, 200), st.integers(0, 40)), max_size=40))
def test_intervals_count_each_byte_once(ranges):
    iv, seen = Intervals(), set()
    for start, length in ranges:
        new = iv.add(start, start + length)
        fresh = set(range(start, start + length)) - seen
        assert new == len(fresh)
        seen |= fresh
        assert iv.covered == len(seen)
        if length:
            assert iv.contains(start, start + length)


def test_reassembly_history_is_bounded():
    r = Reassembly(max_messages=2, history=3)
    for mid in range(5):
        r.start(("s", 1, 1, mid), 10)
        r.finish(("s", 1, 1, mid))
    assert [r.finished(("s", 1, 1, m)) for m in range(5)] == [False, False, True, True, True]
    r.start(("s", 1, 1, 10), 1)
    r.start(("s", 1, 1, 11), 1)
    assert r.full()


def test_choose_header():
    kw = dict(single_packet=True, request_length=100, buffer_offset=0, optimized=True,
              own_cap=OPT)
    W, S, RD = SesOpcode.WRITE, SesOpcode.SEND, SesOpcode.READ
    assert choose_header(W, memory_key=0, header_data=None, peer_cap=OPT, **kw) == \
        NextHeader.REQ_SMALL
    assert choose_header(W, memory_key=0, header_data=None, peer_cap=FepCap.AI_BASE, **kw) \
        == NextHeader.REQ_MEDIUM
    assert choose_header(W, memory_key=0, header_data=None, peer_cap=None, **kw) == \
        NextHeader.REQ_MEDIUM
    assert choose_header(RD, memory_key=5, header_data=None, peer_cap=OPT, **kw) == \
        NextHeader.REQ_MEDIUM
    assert choose_header(S, memory_key=0, header_data=7, peer_cap=OPT, **kw) == \
        NextHeader.REQ_MEDIUM
    assert choose_header(SesOpcode.DEFERRABLE_SEND, memory_key=0, header_data=None,
                         peer_cap=OPT, **kw) == NextHeader.REQ_STD
    kw2 = dict(kw, single_packet=False)
    assert choose_header(W, memory_key=0, header_data=None, peer_cap=OPT, **kw2) == \
        NextHeader.REQ_STD
    kw3 = dict(kw, optimized=False)
    assert choose_header(W, memory_key=0, header_data=None, peer_cap=OPT, **kw3) == \
        NextHeader.REQ_STD
    kw4 = dict(kw, buffer_offset=8)
    assert choose_header(W, memory_key=1, header_data=3, peer_cap=OPT, **kw4) == \
        NextHeader.REQ_STD


def test_single_headers_view_like_the_standard_one():
    rng = random.Random(3)
    for _ in range(50):
        hd = rng.random() < 0.5
        base = SesStandard(opcode=SesOpcode.SEND, flags=SesFlag.REL | SesFlag.SOM | SesFlag.EOM
                           | (SesFlag.HD if hd else 0),
                           ri_generation=rng.randrange(256), job_id=rng.randrange(1 << 24),
                           pid_on_fep=rng.randrange(4096), resource_index=rng.randrange(4096),
                           buffer_offset=0 if hd else rng.randrange(1 << 64),
                           initiator=rng.randrange(1 << 32), memory_key=rng.randrange(1 << 64),
                           header_data=rng.randrange(1 << 64) if hd else 0,
                           request_length=rng.randrange(1 << 14))
        med = single_header(NextHeader.REQ_MEDIUM, base)
        assert isinstance(med, SesMedium)
        v, w = view(base), view(med)
        for f in ("opcode", "ri_generation", "job_id", "pid_on_fep", "resource_index",
                  "buffer_offset", "initiator", "memory_key", "request_length", "header_data"):
            assert getattr(v, f) == getattr(w, f), f
        assert v.message_id is not None and w.message_id is None
        small = single_header(NextHeader.REQ_SMALL, base)
        assert isinstance(small, SesSmall) and not small.flags & SesFlag.HD


def _independent_parts(base, data, mtu, length=None):
    """The segmentation rule written out on its own (ref. 4.2, 4.7): what each packet of a
    message must carry."""
    total = len(data) if length is None else length
    n = max(1, -(-total // mtu))
    out = []
    for i in range(n):
        off = i * mtu
        size = min(mtu, total - off) if total else 0
        flags = int(base.flags) & ~int(SesFlag.SOM | SesFlag.EOM | SesFlag.HD)
        if i == 0:
            flags |= int(SesFlag.SOM) | (int(base.flags) & int(SesFlag.HD))
        if i == n - 1:
            flags |= int(SesFlag.EOM)
        chunk = bytes(data[off:off + size]) if length is None else b""
        out.append((flags, 0 if i == 0 else off, 0 if i == 0 else len(chunk),
                    base.header_data if i == 0 else 0, chunk))
    return out


@given(st.integers(0, 20_000), st.sampled_from([1, 7, 64, 4096]), st.booleans(),
       st.booleans(), st.booleans())
def test_lazy_packets_are_the_segmentation_rule(size, mtu, hd, read, mutable):
    """Segmenter.part(i), segment() and the SES's OutMessage all give the rule's packets."""
    if size // mtu > 400:
        size = 400 * mtu
    base = SesStandard(opcode=SesOpcode.READ if read else SesOpcode.WRITE,
                       flags=int(SesFlag.REL | (SesFlag.HD if hd else 0)), message_id=77,
                       header_data=0xAB if hd else 0, request_length=size, job_id=5)
    data = bytes((i * 7) % 256 for i in range(0 if read else size))
    payload = bytearray(data) if mutable else data
    length = size if read else None
    want = _independent_parts(base, data, mtu, length)
    seg = Segmenter(base, payload, mtu, length=length)
    if mutable:
        payload[:] = bytes(len(payload))  # changed after posting: must not leak in
    got = [seg.part(i) for i in range(seg.count)]
    assert seg.count == len(want) == len(segment(base, data, mtu, length=length))
    for (hdr, chunk), (flags, moff, plen, hdata, wchunk) in zip(got, want, strict=True):
        assert (int(hdr.flags), hdr.message_offset, hdr.payload_length, hdr.header_data,
                bytes(chunk)) == (flags, moff, plen, hdata, wchunk)
        assert (hdr.message_id, hdr.job_id, hdr.request_length) == (77, 5, size)
    assert [seg.payload_bytes(i) for i in range(seg.count)] == [
        sum(len(w[4]) for w in want[i:]) for i in range(len(want))]
    msg = OutMessage("10.0.0.2", DeliveryMode.RUD, 5, 0, None, 3, 0, seg)
    assert msg.nbytes == (0 if read else size) and msg.count == len(want)
    pkts = [msg.next_packet() for _ in range(len(want))]
    assert msg.count == 0 and msg.nbytes == 0
    assert [(p.ses, bytes(p.payload)) for p in pkts] == [(h, bytes(c)) for h, c in got]
    assert [p.msg_ref for p in pkts] == [PacketRef(3, 0, i) for i in range(len(want))]
    assert [p.eom for p in pkts] == [i == len(want) - 1 for i in range(len(want))]
    with pytest.raises(IndexError):
        msg.next_part()


def test_ses_queues_a_multi_packet_message_as_one_item():
    """poll_message gives a 2 MB WRITE as one OutMessage; poll_transmit the same packets
    one at a time."""
    from uet.ses import SesEndpoint
    from uet.ses.messages import TargetAddr

    eps = []
    for _ in range(2):
        ep = SesEndpoint("ai-base", address="10.0.0.1", initiator_id=9)
        ep.initiator.write(TargetAddr("10.0.0.2", 1, 0, 3), 0x51, 0, bytes(range(256)) * 7813)
        eps.append(ep)
    whole = eps[0].poll_message()
    assert type(whole) is OutMessage and whole.count == 489 and eps[0].poll_message() is None
    one_by_one = []
    while (p := eps[1].poll_transmit()) is not None:
        one_by_one.append(p)
    assert len(one_by_one) == 489 and not eps[1].outq
    assert [whole.next_packet() for _ in range(489)] == one_by_one


@pytest.mark.parametrize("size", [10 * 4096 + 100, 10 * 4096, 4096 + 1])
def test_a_zero_payload_shares_one_chunk_per_full_packet(size):
    """A payload from ``zeros()`` (bulk transfers without data of their own): every full
    packet carries the one shared ``zeros(mtu)``, not a slice of its own, and the packets
    are the ones an equal payload of other bytes objects gives."""
    mtu = 4096
    z = zeros(size)
    assert zeros(size) is z and z == bytes(size)
    base = SesStandard(opcode=SesOpcode.WRITE, flags=int(SesFlag.REL), message_id=1,
                       request_length=size, job_id=5)
    seg = Segmenter(base, z, mtu)
    other = Segmenter(base, bytes(size), mtu)  # the same bytes, not the shared object
    got = [seg.part(i) for i in range(seg.count)]
    ref = [other.part(i) for i in range(other.count)]
    assert [(h, bytes(c)) for h, c in got] == [(h, bytes(c)) for h, c in ref]
    full = [c for _, c in got if len(c) == mtu]
    assert len(full) == size // mtu
    assert all(c is zeros(mtu) for c in full)
    assert all(type(c) is memoryview for _, c in ref)  # slices of the caller's bytes
    if size % mtu:
        assert bytes(got[-1][1]) == bytes(size % mtu)


def test_the_shared_zero_payloads_are_bounded():
    """Eight sizes are kept (the oldest goes first); payloads above 64 MiB are never kept."""
    from uet.ses import segmentation

    sizes = [1000 + i for i in range(12)]
    made = [zeros(n) for n in sizes]
    assert len(segmentation._ZEROS) <= 8
    assert zeros(sizes[-1]) is made[-1]
    assert zeros(sizes[0]) is not made[0] and zeros(sizes[0]) == made[0]
    big = (64 << 20) + 1
    assert zeros(big) is not zeros(big)
    assert big not in segmentation._ZEROS
