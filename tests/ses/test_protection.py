"""Resource protection: every bad request gets its return code and writes nothing."""

from __future__ import annotations

import pytest
from ses_harness import JOB, KEY, PID, RI, addr, pair, payload, region

from uet.ses import OpState
from uet.ses.memory import Perm
from uet.wire.constants import AtomicDatatype as Dt
from uet.wire.constants import AtomicOpcode as Aop
from uet.wire.constants import ReturnCode as Rc
from uet.wire.constants import SesFlag, SesOpcode
from uet.wire.records import SesStandard

SIZE = 4 * 4096


def _setup(seed=1, **kw):
    a, b, loop = pair("hpc", seed=seed, dup=0.2, **kw)
    mem = region(b, SIZE, fill=0x5A, perms=Perm.ALL)
    b.resources.add_region(JOB, PID, RI, KEY + 1, bytearray(SIZE), Perm.READ)
    b.resources.add_region(JOB, PID, RI, KEY + 2, bytearray(SIZE), Perm.WRITE)
    b.resources.register(JOB, PID + 1, RI)  # another process, no regions
    return a, b, loop, mem


CASES = [
    ("bad job", dict(job_id=JOB + 1), KEY, 0, Rc.BAD_JOB_ID),
    ("bad pid", dict(pid_on_fep=PID + 7), KEY, 0, Rc.BAD_PID),
    ("bad index", dict(resource_index=RI + 1), KEY, 0, Rc.BAD_INDEX),
    ("bad generation", dict(ri_generation=3), KEY, 0, Rc.BAD_GENERATION),
    ("bad key", {}, KEY + 99, 0, Rc.BAD_MKEY),
    ("key of another process", dict(pid_on_fep=PID + 1), KEY, 0, Rc.BAD_MKEY),
    ("range past the end", {}, KEY, SIZE - 3 * 4096, Rc.BAD_ADDR),
    ("offset beyond the region", {}, KEY, SIZE + 1, Rc.BAD_ADDR),
    ("write to a read-only region", {}, KEY + 1, 0, Rc.PERM_VIOLATION),
]


@pytest.mark.parametrize("name,where,key,offset,rc", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("seed", [1, 2])
def test_bad_multi_packet_write_writes_nothing(name, where, key, offset, rc, seed):
    a, b, loop, mem = _setup(seed)
    before = bytes(mem)
    others = [bytes(r.buffer) for r in b.resources.get(JOB, PID, RI).regions.values()]
    op = a.initiator.write(addr(b, **where), key, offset, payload(3 * 4096 + 5))
    loop.run()
    assert op.state == OpState.FAILED and op.return_code == rc, name
    assert bytes(mem) == before
    assert [bytes(r.buffer) for r in b.resources.get(JOB, PID, RI).regions.values()] == others
    assert b.target.reassembly.active == {}


@pytest.mark.parametrize("name,where,key,offset,rc", CASES[:-1], ids=[c[0] for c in CASES[:-1]])
def test_bad_read_gets_code_and_no_data(name, where, key, offset, rc):
    a, b, loop, mem = _setup()
    op = a.initiator.read(addr(b, **where), key, offset, 3 * 4096 + 5)
    loop.run()
    assert op.state == OpState.FAILED and op.return_code == rc
    assert not any(op.data)


def test_read_from_write_only_region_and_atomic_permissions():
    a, b, loop, mem = _setup()
    rd = a.initiator.read(addr(b), KEY + 2, 0, 8)
    am = a.initiator.atomic(addr(b), KEY + 1, 0, Aop.SUM, Dt.UINT64, 1)
    loop.run()
    assert rd.return_code == Rc.PERM_VIOLATION
    assert am.return_code == Rc.PERM_VIOLATION


@pytest.mark.parametrize("name,where,key,offset,rc", CASES[:6], ids=[c[0] for c in CASES[:6]])
def test_bad_atomic_changes_nothing(name, where, key, offset, rc):
    a, b, loop, mem = _setup()
    before = bytes(mem)
    op = a.initiator.atomic(addr(b, **where), key, offset, Aop.SUM, Dt.UINT64, 5, fetch=True)
    loop.run()
    assert op.return_code == rc and bytes(mem) == before


def test_generation_bump_invalidates_old_generation():
    a, b, loop, mem = _setup()
    gen = b.resources.bump_generation(JOB, PID, RI)
    old = a.initiator.write(addr(b), KEY, 0, b"old")
    new = a.initiator.write(addr(b, ri_generation=gen), KEY, 0, b"new")
    loop.run()
    assert old.return_code == Rc.BAD_GENERATION
    assert new.state == OpState.DONE and mem[:3] == b"new"


def test_disabled_resource():
    a, b, loop, mem = _setup()
    b.resources.get(JOB, PID, RI).enabled = False
    op = a.initiator.write(addr(b), KEY, 0, b"zzz")
    loop.run()
    assert op.return_code == Rc.DISABLED and mem[:3] == b"\x5a" * 3


def test_too_long_message_is_refused_at_both_ends():
    a, b, loop, mem = _setup()
    hdr = SesStandard(opcode=SesOpcode.WRITE, flags=SesFlag.SOM | SesFlag.REL, job_id=JOB,
                      pid_on_fep=PID, resource_index=RI, memory_key=KEY,
                      request_length=b.profile.ses.max_message_size + 1)
    reply = b.target.handle(a.address, hdr, None, b"abcd")
    assert reply.response.return_code == Rc.TOO_LONG
    from uet.ses import SesError

    with pytest.raises(SesError) as exc:
        a.initiator.read(addr(b), KEY, 0, a.profile.ses.max_message_size + 1)
    assert exc.value.return_code == Rc.TOO_LONG
    assert bytes(mem) == b"\x5a" * SIZE


def test_payload_past_request_length_is_refused():
    a, b, loop, mem = _setup()
    hdr = SesStandard(opcode=SesOpcode.WRITE, flags=SesFlag.REL, message_id=9, job_id=JOB,
                      pid_on_fep=PID, resource_index=RI, memory_key=KEY, request_length=10,
                      message_offset=8, payload_length=4)
    reply = b.target.handle(a.address, hdr, None, b"abcd")
    assert reply.response.return_code == Rc.TOO_LONG
    assert bytes(mem) == b"\x5a" * SIZE


def test_initiator_error_flag_writes_nothing():
    a, b, loop, mem = _setup()
    hdr = SesStandard(opcode=SesOpcode.WRITE, flags=SesFlag.SOM | SesFlag.EOM | SesFlag.REL
                      | SesFlag.IE, message_id=3, job_id=JOB, pid_on_fep=PID,
                      resource_index=RI, memory_key=KEY, request_length=4)
    reply = b.target.handle(a.address, hdr, None, b"abcd")
    assert reply.response.return_code == Rc.INITIATOR_ERR
    assert bytes(mem) == b"\x5a" * SIZE


def test_only_first_failing_packet_answers():
    a, b, loop, mem = _setup()
    replies = []
    for i in range(3):
        flags = SesFlag.REL | (SesFlag.SOM if i == 0 else 0) | (SesFlag.EOM if i == 2 else 0)
        hdr = SesStandard(opcode=SesOpcode.WRITE, flags=flags, message_id=77, job_id=JOB,
                          pid_on_fep=PID, resource_index=RI, memory_key=KEY + 99,
                          request_length=12, message_offset=4 * i, payload_length=4)
        replies.append(b.target.handle(a.address, hdr, None, b"wxyz").response)
    assert replies[0].return_code == Rc.BAD_MKEY
    assert replies[1:] == [None, None]


def test_garbage_never_raises():
    a, b, loop, mem = _setup()
    assert b.target.handle(a.address, object(), None, b"").response is None
    hdr = SesStandard(opcode=0x3E, flags=SesFlag.SOM | SesFlag.EOM, job_id=JOB)
    assert b.target.handle(a.address, hdr, None, b"").response.return_code == \
        Rc.UNSUPPORTED_OP
    assert b.counters["malformed"] == 1
