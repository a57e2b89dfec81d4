"""EvLoad's tap (data bytes per host and EV) in C (``uet.native._codec_core.EvTally``)
against its Python reference (``EvLoad.py_tap``): the same counts for every frame, real or
mutated or cut short, in both directions; and EvLoad uses the C one unless
``UET_PURE_PYTHON=1``."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from uet.native._codec_core import EvTally

from uet import native
from uet.experiments.signals import _REQUEST_TYPES, _UET_PORT_INT, EvLoad
from uet.wire import codec
from uet.wire.records import Frame, PdsAckCc, PdsControl, PdsRequest, SesStandard


def _frames() -> list[tuple[bytes, bool, int]]:
    """(frame, is a request, EV) over IPv4 and IPv6: data, a CC-header request, an ACK_CC
    and a control packet per EV."""
    out = []
    for src, dst in (("10.0.0.1", "10.0.0.2"), ("fd00::1", "fd00::2")):
        for ev in (0, 77, 49152, 65535):
            out.append((codec.encode_frame(Frame(
                PdsRequest(2, 3, 0x01, -1, 1000 + ev, 5, 6),
                SesStandard(1, 0, 0x20, 9, 0, 1, 0, 0x7FF, 0, 12, 0x51, 0, 4096, 8192,
                            100000), payload=bytes(4096), src_ip=src, dst_ip=dst, ev=ev,
                dscp=26, ecn=2)), True, ev))
            out.append((codec.encode_frame(Frame(
                PdsRequest(13, 3, 0x05, 2, 7, 5, 0, True, 17, 3, 4095),
                SesStandard(1, 0, 0x21, 9, 0, 1, 0, 0x7FF, 0, 12, 0x51, 2**64 - 1, 0, 0, 0),
                payload=b"x" * 10, src_ip=src, dst_ip=dst, ev=ev)), True, ev))
            out.append((codec.encode_frame(Frame(
                PdsAckCc(8, 0, 0, 0, 1000, 6, 5, 0, 0, 4, 1, 3), src_ip=src, dst_ip=dst,
                ev=ev, dscp=46)), False, ev))
            out.append((codec.encode_frame(Frame(
                PdsControl(ctl_type=3, psn=9, spdcid=5, dpdcid=6), src_ip=src, dst_ip=dst,
                ev=ev)), False, ev))
    return out


def _tally(counts: Counter[int]) -> EvTally:
    """The C tap as EvLoad makes it (the port and request types from signals)."""
    return EvTally(counts, _UET_PORT_INT, _REQUEST_TYPES)


def _feed(tap, frames, directions) -> None:
    for i, (data, d) in enumerate(zip(frames, directions, strict=True)):
        assert tap(i, data, d) is None


def test_c_counts_as_the_python_reference_on_real_and_mutated_frames() -> None:
    rng = random.Random(4793)
    tagged = _frames()
    base = [f for f, _, _ in tagged]
    frames = list(base)
    for _ in range(4000):
        data = bytearray(rng.choice(base))
        for _ in range(rng.randrange(1, 4)):
            pos = rng.randrange(0, min(64, len(data)))
            data[pos] = rng.choice((0, 8, 17, 0x45, 0x46, 0x86, 0xDD, 0x12, 0xB9, 0x10,
                                    rng.randrange(256)))
        if rng.random() < 0.2:
            del data[rng.randrange(0, len(data)):]
        frames.append(bytes(data))
    directions = [rng.choice(("tx", "tx", "rx", "TX", "")) for _ in frames]
    c_counts: Counter[int] = Counter()
    py_counts: Counter[int] = Counter()
    _feed(_tally(c_counts), frames, directions)
    _feed(EvLoad.py_tap(py_counts), frames, directions)
    assert c_counts == py_counts
    # not decorative: requests of every EV counted (IPv4 and IPv6), ACKs and CPs not
    clean_c: Counter[int] = Counter()
    _feed(_tally(clean_c), base, ["tx"] * len(base))
    want: Counter[int] = Counter()
    for f, request, ev in tagged:
        if request:
            want[ev] += len(f)
    assert clean_c == want and set(want) == {0, 77, 49152, 65535}
    # the port and the request types are the caller's, not built in
    other: Counter[int] = Counter()
    _feed(EvTally(other, _UET_PORT_INT + 1, _REQUEST_TYPES), base, ["tx"] * len(base))
    _feed(EvTally(other, _UET_PORT_INT, {5, 12}), base, ["tx"] * len(base))  # none here
    assert not other
    _feed(EvTally(other, _UET_PORT_INT, {8}), base, ["tx"] * len(base))  # ACK_CC only
    assert set(other) == set(want) and all(other[ev] < want[ev] for ev in want)
    assert min(want.values()) > 2 * 4096


def test_short_frames_and_bad_arguments() -> None:
    counts: Counter[int] = Counter()
    tap, ref = _tally(counts), EvLoad.py_tap(Counter())
    for n in range(0, 50):
        assert tap(0, bytes(n), "tx") is None and ref(0, bytes(n), "tx") is None
    assert not counts
    assert tap.counts is counts
    with pytest.raises(TypeError):
        tap(0, bytearray(100), "tx")
    with pytest.raises(TypeError):
        tap(0, bytes(100))
    with pytest.raises(TypeError):
        EvTally([], 4793, [2])
    with pytest.raises(ValueError):
        EvTally({}, 70000, [2])
    with pytest.raises(ValueError):
        EvTally({}, 4793, [32])


def test_evload_taps_are_c_unless_pure_python() -> None:
    tap = EvLoad._tap(Counter())
    if native.FORCED_PURE:
        assert not isinstance(tap, EvTally)
    else:
        assert isinstance(tap, EvTally)
