"""The C form of the SES target's WRITE path (``uet.native._ses_core``: ``Target.handle``)
against its Python form, packet by packet.

Seeded streams of WRITE packets (multi-packet messages from a real initiator, through the
wire codec) reach two fresh target end points in the same order, positionally as the
fabric end point calls ``handle``: one with the C form, one inside ``python_forms()``. The
streams reorder and duplicate packets, mix in late packets of finished messages, unknown
memory keys, wrong generations, a read-only region, writes past a region's end, the IE
flag, RUD / ROD / RUDI, a scratch region and a region with a base address, and lose a few
packets (messages left incomplete). After every
packet both targets must have given the same reply, and at the end hold the same
counters, the same reassembly state and the same bytes in every region.
"""

from __future__ import annotations

import dataclasses
import random

import pytest
from ses_harness import JOB, KEY, PID, RI, addr, wire_request

from uet.endpoint import cores
from uet.native import FORCED_PURE
from uet.ses import SesEndpoint
from uet.ses.memory import Perm
from uet.ses.target import IMPLEMENTATION
from uet.wire.constants import DeliveryMode, SesFlag

SCRATCH, RO, BASED = KEY + 1, KEY + 2, KEY + 3


def _target() -> tuple[SesEndpoint, dict[int, bytearray]]:
    b = SesEndpoint("hpc", address="10.0.0.2", initiator_id=0xB, pid_on_fep=PID)
    mems = {KEY: bytearray(256 * 1024), SCRATCH: bytearray(256 * 1024),
            RO: bytearray(64 * 1024), BASED: bytearray(64 * 1024)}
    b.resources.add_region(JOB, PID, RI, KEY, mems[KEY], Perm.ALL)
    b.resources.add_region(JOB, PID, RI, SCRATCH, mems[SCRATCH], Perm.ALL, store=False)
    b.resources.add_region(JOB, PID, RI, RO, mems[RO], Perm.READ)
    b.resources.add_region(JOB, PID, RI, BASED, mems[BASED], Perm.ALL, base_va=0x1000)
    return b, mems


def _stream(seed: int) -> list[tuple]:
    """(src, ses, ext, payload, mode, psn, conn, now) of every packet, in arrival order."""
    rng = random.Random(seed)
    a = SesEndpoint("hpc", address="10.0.0.1", initiator_id=0xA, pid_on_fep=1)
    b = SesEndpoint("hpc", address="10.0.0.2", initiator_id=0xB, pid_on_fep=PID)
    a.initiator.set_peer_cap(b.address, b.fep_cap)
    tgt = addr(b)
    for _ in range(rng.randint(4, 9)):
        key = rng.choice([KEY, KEY, KEY, SCRATCH, SCRATCH, RO, BASED, 0xBAD])
        size = rng.choice([100, 4096, 9000, 20_000, 40_000])
        off = rng.choice([0, 4096, 60_000, 250_000]) if key in (KEY, SCRATCH) else \
            rng.choice([0, 1000, 0x1000, 0x2000, 0x3000])
        mode = rng.choice([DeliveryMode.RUD, DeliveryMode.RUD, DeliveryMode.ROD,
                           DeliveryMode.RUDI])
        data = rng.randbytes(size)
        if mode == DeliveryMode.RUDI:
            data = data[:4096]
        a.initiator.write(tgt if rng.random() > 0.1 else addr(b, ri_generation=7), key, off,
                          data, mode=mode, absolute=key == BASED)
    packets = []
    while (pkt := a.poll_transmit()) is not None:
        ses, ext, payload = wire_request(pkt)
        if rng.random() < 0.05:
            ses = dataclasses.replace(ses, flags=ses.flags | SesFlag.IE)
        packets.append((pkt.mode, ses, ext, payload))
    order = []
    for p in packets:  # duplicates, some much later (after their message finished)
        order.append(p)
        if rng.random() < 0.15:
            order.append(p)
    rng.shuffle(order)
    order = [p for p in order if rng.random() > 0.06]  # lost: some messages stay incomplete
    order += rng.sample(packets, k=min(5, len(packets)))
    conn = rng.randint(1, 5)
    return [("10.0.0.1", ses, ext, payload, mode, i, conn, i * 1000)
            for i, (mode, ses, ext, payload) in enumerate(order)]


def _run(stream: list[tuple]) -> dict:
    b, mems = _target()
    replies = []
    for src, ses, ext, payload, mode, psn, conn, now in stream:
        # positional, as FabricEndpoint.deliver calls it
        replies.append(repr(b.target.handle(src, ses, ext, payload, mode, psn, conn, now,
                                            None)))
    reas = b.target.reassembly
    return {"replies": replies, "counters": dict(b.counters),
            "active": {k: (s.packets, s.intervals.covered, s.last, s.request_length,
                           list(s.intervals._starts), list(s.intervals._ends))
                       for k, s in reas.active.items()},
            "history": list(reas._history.items()).__repr__(),
            "memory": {k: bytes(m) for k, m in mems.items()}}


@pytest.mark.skipif(FORCED_PURE or IMPLEMENTATION != "native",
                    reason="the C form is off (UET_PURE_PYTHON=1): nothing to compare")
@pytest.mark.parametrize("seed", range(30))
def test_c_and_python_forms_take_writes_alike(seed):
    stream = _stream(seed)
    c = _run(stream)
    with cores.python_forms():
        py = _run(stream)
    for i, (x, y) in enumerate(zip(c["replies"], py["replies"], strict=True)):
        assert x == y, f"packet {i}: {x} != {y}"
    assert c == py


def test_the_streams_reach_the_cases_that_matter():
    """Mid-message packets (the C path), completions, duplicates and every refusal."""
    seen: dict[str, int] = {}
    packets = completed = 0
    for seed in range(30):
        stream = _stream(seed)
        out = _run(stream)
        packets += len(stream)
        completed += sum("RESPONSE" in r and "OK" in r for r in out["replies"])
        for k, v in out["counters"].items():
            seen[k] = seen.get(k, 0) + v
    assert packets > 600 and completed > 50, (packets, completed)
    for what in ("duplicates", "rc.BAD_MKEY", "rc.BAD_GENERATION", "rc.PERM_VIOLATION",
                 "rc.INITIATOR_ERR", "rc.BAD_ADDR"):
        assert seen.get(what, 0) > 0, (what, seen)


def test_keywords_go_to_the_reference():
    """A call with keywords (the tests' harness) is the Python form's, with its result."""
    stream = _stream(3)
    b1, m1 = _target()
    b2, m2 = _target()
    for src, ses, ext, payload, mode, psn, conn, now in stream:
        r1 = b1.target.handle(src, ses, ext, payload, mode=mode, psn=psn, conn=conn, now=now)
        r2 = b2.target.handle(src, ses, ext, payload, mode, psn, conn, now, None)
        assert repr(r1) == repr(r2)
    assert m1 == m2


def _as_views(stream: list[tuple], cast: bool = False) -> list[tuple]:
    """The stream with each payload a read-only view into a larger frame, as the end
    point's C receive path decodes it (``cast``: a view of 4-byte items, not taken by C)."""
    out = []
    for src, ses, ext, payload, mode, psn, conn, now in stream:
        frame = bytes(98) + bytes(payload) + bytes(4)
        v = memoryview(frame)[98:98 + len(payload)]
        if cast and len(payload) % 4 == 0 and payload:
            v = v.cast("I")
        out.append((src, ses, ext, v, mode, psn, conn, now))
    return out


@pytest.mark.parametrize("cast", [False, True], ids=["bytes-view", "word-view"])
@pytest.mark.parametrize("seed", [0, 1, 3, 5, 8, 13])
def test_payload_views_are_taken_as_their_bytes(seed, cast, monkeypatch):
    """A payload that is a view of the received frame (the C receive path's) writes,
    counts and answers exactly as its bytes do in the Python form, whichever form takes
    it: C takes a one-dimensional byte view as it takes bytes (the same packets reach the
    Python ``_dispatch``); a view of wider items goes to the reference."""
    from uet.ses.target import Target

    stream = _stream(seed)
    views = _as_views(stream, cast)
    calls = [0]
    dispatch = Target._dispatch

    def counted(self, *a):
        calls[0] += 1
        return dispatch(self, *a)

    monkeypatch.setattr(Target, "_dispatch", counted)
    got = _run(views)
    in_python = calls[0]
    calls[0] = 0
    assert _run(stream) == got
    as_bytes = calls[0]
    with cores.python_forms():
        assert _run(stream) == got
    if IMPLEMENTATION == "native" and not FORCED_PURE:
        if cast:  # C takes no packet given as words
            assert in_python == len(stream) >= as_bytes
        else:  # the same ones as views as it took as bytes (some: these seeds have them)
            assert in_python == as_bytes < len(stream)


def test_a_released_view_goes_to_the_reference():
    """A payload view released by its owner is refused as the Python refuses it (bytes() of
    it raises ValueError), not counted from its stale length."""
    stream = _stream(1)
    b, _ = _target()
    src, ses, ext, payload, mode, psn, conn, now = stream[0]
    v = memoryview(bytes(payload))
    v.release()
    with pytest.raises(ValueError):
        b.target.handle(src, ses, ext, v, mode, psn, conn, now, None)
