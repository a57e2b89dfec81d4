"""A hostile peer: thousands of mutated, replayed and misaddressed frames into one end point.

Frames of a real exchange (WRITE, READ with return data, tagged SEND, fetching atomic) are
recorded, then fed to a fresh target with random changes: fields of the decoded PDS / SES
headers set to random or boundary values (re-encoded, so they pass the checksums and reach
the protocol logic), bytes flipped or cut (the decoder's path), frames replayed out of order
and at other times. Whatever comes in, the end point must not raise, must keep its state
within its configured limits, and must still serve a legitimate peer correctly afterwards
(ref. design principle "bad input gets a clear error and loses nothing").
"""

from __future__ import annotations

import dataclasses
import random

import pytest
from fep_wire import A_IP, A_MAC, B_IP, B_MAC, Wire, pair

from uet.endpoint.config import pds_config_from_profile
from uet.endpoint.fep import FabricEndpoint
from uet.ses import TargetAddr
from uet.ses.memory import Perm
from uet.wire.codec import decode_frame, encode_frame
from uet.wire.constants import AtomicDatatype, AtomicOpcode
from uet.wire.constants import ReturnCode as Rc
from uet.wire.errors import DecodeError, EncodeError

KEY = 0x4B
REGION = 64 * 1024

#: values a mutated integer field takes: boundaries, small, random
_SPECIAL = (0, 1, 2, 3, 0x7F, 0x80, 0xFF, 0x100, 0xFFFF, 0x10000, 0x7FFFFFFF, 0x80000000,
            0xFFFFFFFF)


def _region(ep: FabricEndpoint, fill: int = 0) -> bytearray:
    mem = bytearray([fill]) * REGION
    ep.ses.resources.add_region(ep.job_id, 0, 1, KEY, mem, Perm.ALL)
    return mem


def _record_exchange() -> list[bytes]:
    """Every frame of a legitimate HPC exchange, both directions."""
    a, b = pair("hpc")
    wire = Wire(a, b)
    _region(b)
    tgt = TargetAddr(B_IP, b.job_id, 0, 1)
    data = random.Random(1).randbytes(20_000)
    ops = [a.call(0, "write", tgt, KEY, 0, data)]
    assert wire.run_until(lambda: ops[-1].done)
    ops.append(a.call(wire.now, "read", tgt, KEY, 0, 12_000))
    assert wire.run_until(lambda: ops[-1].done)
    b.post_recv(wire.now, bytearray(64), tag=9)
    ops.append(a.call(wire.now, "tagged_send", TargetAddr(B_IP, b.job_id, 0, 0), b"hi", 9))
    assert wire.run_until(lambda: ops[-1].done)
    ops.append(a.call(wire.now, "atomic", tgt, KEY, 64, AtomicOpcode.SUM,
                      AtomicDatatype.UINT64, 5, fetch=True))
    assert wire.run_until(lambda: ops[-1].done)
    assert all(op.return_code == Rc.OK for op in ops)
    return [frame for _, _, frame in wire.tap]


def _mutate_fields(rng: random.Random, frame) -> None:
    """Set one to three integer fields of the PDS / SES records to other values."""
    parts = [p for p in (frame.pds, frame.ses, frame.ext) if dataclasses.is_dataclass(p)]
    for _ in range(rng.randint(1, 3)):
        rec = rng.choice(parts)
        names = [f.name for f in dataclasses.fields(rec)
                 if isinstance(getattr(rec, f.name), int)]
        if not names:
            continue
        name = rng.choice(names)
        old = getattr(rec, name)
        new = rng.choice((*_SPECIAL, old + 1, old - 1, rng.getrandbits(32)))
        setattr(rec, name, max(new, 0))


def _hostile(rng: random.Random, frames: list[bytes]) -> bytes:
    data = rng.choice(frames)
    r = rng.random()
    if r < 0.55:
        frame = decode_frame(data, udp_port=None)
        _mutate_fields(rng, frame)
        if rng.random() < 0.2:
            frame.payload = rng.randbytes(rng.choice((0, 1, 7, 100, 4096)))
        try:
            return encode_frame(frame)
        except (EncodeError, ValueError, OverflowError, TypeError):
            return data  # a value the header cannot carry: replay the original instead
    if r < 0.75:
        out = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            out[rng.randrange(len(out))] ^= 1 << rng.randrange(8)
        return bytes(out)
    if r < 0.85:
        return data[:rng.randrange(len(data))]
    return data  # a replay, at another time


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_target_survives_hostile_frames_and_still_serves(seed: int) -> None:
    frames = _record_exchange()
    rng = random.Random(seed)
    cfg = pds_config_from_profile("hpc", {"max_target_pdcs": 32})
    a, b = pair("hpc", pds=cfg)
    mem = _region(b)
    now = 0
    raised = []
    for _ in range(5000):
        now += rng.choice((0, 1_000, 50_000, 2_000_000))
        try:
            b.receive(now, _hostile(rng, frames))
            while b.pop_control(now) is not None or b.pop_data(now) is not None:
                pass
            d = b.next_deadline()
            if d is not None and d <= now:
                b.handle_timer(now)
        except DecodeError:  # receive() counts these; escaping would be a bug
            raised.append("DecodeError")
        assert not raised, raised
        # state stays within the configured limits whatever arrives
        assert len(b.pds.pdcs()) <= 32
        assert b.pds.rx_memory <= b.pds.cfg.max_rx_memory_bytes
        tgt = b.ses.target
        assert len(tgt.reassembly.active) <= tgt.reassembly.max_messages
        assert tgt.unexpected_bytes <= b.profile.ses.unexpected_max_bytes
    assert b.counters["rx_decode_error"] > 0 and b.pds.counters["rx_packets"] > 0
    # afterwards a legitimate peer is served correctly: a fresh initiator on the same
    # address (another seed, so another PDC ID and Start_PSN than the replayed frames')
    a = FabricEndpoint(ip=A_IP, mac=A_MAC, profile="hpc", peers={A_IP: A_MAC, B_IP: B_MAC},
                       seed=1000 + seed)
    a.ses.initiator.set_peer_cap(B_IP, b.profile.fep_cap)
    wire = Wire(a, b)
    wire.now = now
    tgt = TargetAddr(B_IP, b.job_id, 0, 1)
    data = random.Random(seed + 100).randbytes(10_000)
    op = a.call(now, "write", tgt, KEY, 30_000, data)
    assert wire.run_until(lambda: op.done, limit_ps=now + 10**11)
    assert op.return_code == Rc.OK and mem[30_000:40_000] == data
    back = a.call(wire.now, "read", tgt, KEY, 30_000, 10_000)
    assert wire.run_until(lambda: back.done, limit_ps=wire.now + 10**11)
    assert back.return_code == Rc.OK and bytes(back.data) == data


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_initiator_survives_hostile_frames_and_its_operations_end(seed: int) -> None:
    """The same storm at an end point with operations in flight (ACKs, NACKs and control
    packets of its own PDCs among the mutations): nothing raises, and every operation
    still ends (completed or failed with a return code) once the storm stops."""
    frames = _record_exchange()
    rng = random.Random(seed)
    a, b = pair("hpc")
    _region(b)
    tgt = TargetAddr(B_IP, b.job_id, 0, 1)
    ops = [a.call(0, "write", tgt, KEY, i * 8192, random.Random(i).randbytes(8000))
           for i in range(4)]
    ops.append(a.call(0, "read", tgt, KEY, 0, 12_000))
    wire = Wire(a, b)
    now = 0
    for _ in range(4000):
        now += rng.choice((0, 1_000, 50_000, 2_000_000))
        a.receive(now, _hostile(rng, frames))
        wire.now = now
        while wire.flight and wire.flight[0][0] <= now:  # the real exchange goes on too
            wire.step()
        assert len(a.pds.pdcs()) <= a.pds.cfg.max_initiator_pdcs + a.pds.cfg.max_target_pdcs
    assert wire.run_until(lambda: all(op.done for op in ops), limit_ps=now + 10**13)
    assert all(op.return_code is not None for op in ops)
