"""Rendezvous sends (eager part + target-driven READ) and deferrable sends (RTR/restart)."""

from __future__ import annotations

import pytest
from ses_harness import JOB, PID, RI, addr, pair, payload

from uet.ses import OpState, PacketRef, ProfileError
from uet.ses.deferrable import join_token
from uet.wire.constants import ReturnCode as Rc
from uet.wire.constants import SesFlag, SesOpcode
from uet.wire.records import SesMedium, SesSmall, SesStandard


def _pair(profile="hpc", seed=1, **kw):
    a, b, loop = pair(profile, seed=seed, dup=kw.pop("dup", 0.2), **kw)
    b.resources.register(JOB, PID, RI)
    return a, b, loop


def _opcodes(loop, dst):
    reqs = (SesStandard, SesMedium, SesSmall)
    return [s.opcode for d, s in loop.delivered if d == dst and isinstance(s, reqs)]


# ---------------------------------------------------------------- rendezvous


@pytest.mark.parametrize("order", ["posted-first", "unexpected-first"])
@pytest.mark.parametrize("seed,pds_dedup", [(1, True), (2, False), (3, True)])
@pytest.mark.parametrize("size", [100, 4096, 4097, 50000])
def test_rendezvous_send_moves_all_bytes(order, seed, pds_dedup, size):
    a, b, loop = _pair(seed=seed, pds_dedup=pds_dedup)
    data = payload(size, seed)
    r = b.target.post_recv(JOB, PID, RI, 65536) if order == "posted-first" else None
    op = a.initiator.rendezvous_send(addr(b), data, header_data=0x77)
    loop.run()
    if r is None:
        assert op.state == OpState.PENDING or size <= 4096
        r = b.target.post_recv(JOB, PID, RI, 65536)
        loop.run()
    assert op.state == OpState.DONE, (op.return_code, op.reason)
    assert r.done and r.return_code == Rc.OK
    assert bytes(r.buffer[:r.length]) == data and r.header_data == 0x77
    pulls = _opcodes(loop, a.address).count(SesOpcode.READ)
    assert (pulls > 0) == (size > 4096)  # the target READs what the eager part lacked
    assert a.resources.get(JOB, a.pid_on_fep, a.rendezvous_index).regions == {}


def test_rendezvous_truncated_receive_and_tagged_wildcard():
    a, b, loop = _pair(seed=4)
    r = b.target.post_recv(JOB, PID, RI, 6000, tag=0x100, ignore=0xF)
    data = payload(20000)
    op = a.initiator.rendezvous_send(addr(b), data, match_bits=0x10A)
    loop.run()
    assert op.state == OpState.DONE
    assert r.truncated and r.length == 6000 and bytes(r.buffer) == data[:6000]
    assert r.match_bits == 0x10A and r.opcode == SesOpcode.RENDEZVOUS_TSEND


def test_rendezvous_to_bad_job_fails_and_unexposes():
    a, b, loop = _pair(seed=1)
    op = a.initiator.rendezvous_send(addr(b, job_id=JOB + 5), payload(10000))
    loop.run()
    assert op.return_code == Rc.BAD_JOB_ID
    assert a.resources.get(JOB + 5, a.pid_on_fep, a.rendezvous_index).regions == {}


def test_rendezvous_not_in_ai_base():
    a, b, loop = _pair("ai-base")
    with pytest.raises(ProfileError, match="RENDEZVOUS_SEND.*ai-base"):
        a.initiator.rendezvous_send(addr(b), b"x" * 10000)


def test_rendezvous_refused_by_peer_profile():
    a, b, loop = pair("hpc", "ai-base")
    with pytest.raises(ProfileError, match="peer"):
        a.initiator.rendezvous_send(addr(b), b"x" * 10000)


# ---------------------------------------------------------------- deferrable


def test_deferrable_with_receive_posted_is_a_plain_send():
    a, b, loop = _pair("ai-full", seed=1)
    r = b.target.post_recv(JOB, PID, RI, 100)
    op = a.initiator.deferrable_send(addr(b), b"hello")
    loop.run()
    assert op.state == OpState.DONE and bytes(r.buffer[:5]) == b"hello"
    assert b.counters["rtr_sent"] == 0


@pytest.mark.parametrize("seed,pds_dedup", [(1, True), (2, False), (5, True), (6, False)])
@pytest.mark.parametrize("tagged", [False, True])
def test_deferred_then_restarted(seed, pds_dedup, tagged):
    a, b, loop = _pair("ai-full", seed=seed, pds_dedup=pds_dedup)
    data = payload(3 * 4096 + 99, seed)
    bits = 0x55 if tagged else None
    op = a.initiator.deferrable_send(addr(b), data, match_bits=bits, header_data=0xD)
    loop.run()
    assert op.state == OpState.DEFERRED
    assert b.target.unexpected_bytes == 0  # a deferred send buffers no data
    r = b.target.post_recv(JOB, PID, RI, 20000, tag=bits)
    loop.run()
    assert op.state == OpState.DONE, (op.return_code, op.reason)
    assert r.done and bytes(r.buffer[:r.length]) == data and r.header_data == 0xD
    assert b.counters["rtr_sent"] == 1 and a.counters["deferrable_restarts"] == 1
    assert SesOpcode.DEFERRABLE_RTR in _opcodes(loop, a.address)
    assert b.target._reserved == {} and a.initiator._deferred == {}


def test_receive_posted_while_first_attempt_in_flight():
    a, b, loop = _pair("hpc", seed=3, reorder=False, dup=0.0)
    data = payload(3 * 4096, 3)
    op = a.initiator.deferrable_send(addr(b), data)
    loop.step()  # first packet arrives: no receive, deferred
    r = b.target.post_recv(JOB, PID, RI, 4 * 4096)
    loop.run()
    assert op.state == OpState.DONE and bytes(r.buffer[:len(data)]) == data
    assert b.counters["duplicates"] >= 2  # the rest of attempt 1 was dropped


def test_unknown_restart_tokens():
    a, b, loop = _pair("hpc", seed=1, dup=0.0)
    # an RTR for a send the initiator does not know: NO_MATCH
    rtr = SesStandard(opcode=SesOpcode.DEFERRABLE_RTR, flags=SesFlag.SOM | SesFlag.EOM,
                      message_id=1, job_id=JOB, memory_key=join_token(99, 1))
    assert a.target.handle(b.address, rtr, None, b"").response.return_code == Rc.NO_MATCH
    # a restart naming a target token the target never issued: NO_MATCH
    restart = SesStandard(opcode=SesOpcode.DEFERRABLE_SEND, flags=SesFlag.SOM | SesFlag.EOM,
                          message_id=2, job_id=JOB, pid_on_fep=PID, resource_index=RI,
                          buffer_offset=join_token(1, 12345), request_length=1)
    assert b.target.handle(a.address, restart, None, b"x").response.return_code == Rc.NO_MATCH


def test_msg_error_withdraws_a_deferred_send():
    a, b, loop = _pair("hpc", seed=1, dup=0.0)
    op = a.initiator.deferrable_send(addr(b), b"abc")
    loop.run()
    assert op.state == OpState.DEFERRED and b.target.unexpected_messages == 1
    a.initiator.msg_error(op)
    loop.run()
    assert op.return_code == Rc.CANCELLED and b.target.unexpected_messages == 0
    r = b.target.post_recv(JOB, PID, RI, 16)
    loop.run()
    assert not r.done and b.counters["rtr_sent"] == 0


def test_rtr_refused_reposts_the_receive():
    a, b, loop = _pair("hpc", seed=1, dup=0.0)
    op = a.initiator.deferrable_send(addr(b), b"abc")
    loop.run()
    assert op.state == OpState.DEFERRED
    a.initiator.on_failed(PacketRef(op.op_id, 0, 0), "gave up")  # no MSG_ERROR reaches B
    r = b.target.post_recv(JOB, PID, RI, 16)
    loop.run()  # RTR -> NO_MATCH: the receive goes back to the posted list
    assert b.counters["rtr_sent"] == 1
    assert not r.done and r in b.target.ep.resources.get(JOB, PID, RI).queue.posted
    other = a.initiator.send(addr(b), b"next")
    loop.run()
    assert other.state == OpState.DONE and bytes(r.buffer[:4]) == b"next"
