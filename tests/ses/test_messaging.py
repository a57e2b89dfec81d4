"""Two-sided operations: SEND, TAGGED_SEND (exact and wildcard), the unexpected list,
DATAGRAM_SEND, NO_OP, MSG_ERROR."""

from __future__ import annotations

import pytest
from ses_harness import JOB, PID, RI, addr, pair, payload

from uet.ses import OpState, ProfileError, RecvCompleted, SesError
from uet.wire.constants import DeliveryMode, NackCode, RspList, SesFlag, SesOpcode
from uet.wire.constants import ReturnCode as Rc
from uet.wire.records import SesStandard

SIZES = [0, 7, 4096, 4097, 20000]


def _pair(profile="hpc", seed=1, **kw):
    a, b, loop = pair(profile, seed=seed, dup=kw.pop("dup", 0.2), **kw)
    b.resources.register(JOB, PID, RI)
    return a, b, loop


@pytest.mark.parametrize("order", ["posted-first", "unexpected-first"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_send_moves_bytes_in_both_orders(order, seed):
    a, b, loop = _pair(seed=seed, pds_dedup=seed != 2)
    datas = [payload(n, seed + n) for n in SIZES]
    recvs = []
    if order == "posted-first":
        recvs = [b.target.post_recv(JOB, PID, RI, 32768) for _ in datas]
    ops = [a.initiator.send(addr(b), d, header_data=i + 1) for i, d in enumerate(datas)]
    if order == "unexpected-first":
        # deliver one message fully before the receives exist, keep others in flight
        for _ in range(5):
            loop.step()
        recvs = [b.target.post_recv(JOB, PID, RI, 32768) for _ in datas]
    loop.run()
    assert all(op.state == OpState.DONE for op in ops)
    assert all(r.done and r.return_code == Rc.OK for r in recvs)
    got = sorted((r.header_data, bytes(r.buffer[:r.length])) for r in recvs)
    assert got == sorted((i + 1, d) for i, d in enumerate(datas))
    assert b.target.unexpected_messages == 0 and b.target.unexpected_bytes == 0


def test_send_reports_overflow_list_and_truncation():
    a, b, loop = _pair(dup=0.0)
    op1 = a.initiator.send(addr(b), b"early bird")
    loop.run()
    assert op1.result().list == RspList.OVERFLOW
    r1 = b.target.post_recv(JOB, PID, RI, 100)
    assert r1.done and bytes(r1.buffer[:r1.length]) == b"early bird"
    assert r1.list == RspList.OVERFLOW
    r2 = b.target.post_recv(JOB, PID, RI, 4)
    op2 = a.initiator.send(addr(b), b"truncated message")
    loop.run()
    assert op2.result().list == RspList.EXPECTED
    assert op2.result().modified_length == 4
    assert r2.truncated and r2.length == 4 and bytes(r2.buffer) == b"trun"
    assert r2.request_length == len(b"truncated message")
    events = []
    while (ev := b.next_event()) is not None:
        events.append(ev)
    assert [e.recv for e in events if isinstance(e, RecvCompleted)] == [r1, r2]


def test_tagged_exact_matching_picks_the_right_receive():
    a, b, loop = _pair("ai-full", seed=4)
    tags = [0x10, 0x20, 0x30, 0x20]
    recvs = {t: b.target.post_recv(JOB, PID, RI, 64, tag=t) for t in (0x30, 0x10, 0x99)}
    untagged = b.target.post_recv(JOB, PID, RI, 64)
    ops = [a.initiator.tagged_send(addr(b), f"msg{t:x}".encode(), t) for t in tags]
    plain = a.initiator.send(addr(b), b"plain")
    loop.run()
    assert all(op.state == OpState.DONE for op in ops + [plain])
    assert bytes(recvs[0x10].buffer[:5]) == b"msg10"
    assert bytes(recvs[0x30].buffer[:5]) == b"msg30"
    assert recvs[0x10].match_bits == 0x10
    assert not recvs[0x99].done
    assert bytes(untagged.buffer[:5]) == b"plain"
    # the two 0x20 messages wait in the unexpected list; a 0x20 receive takes the oldest
    late = [b.target.post_recv(JOB, PID, RI, 64, tag=0x20) for _ in range(2)]
    assert all(r.done and bytes(r.buffer[:5]) == b"msg20" for r in late)
    assert all(r.list == RspList.OVERFLOW for r in late)


@pytest.mark.parametrize("order", ["posted-first", "unexpected-first"])
def test_wildcard_matching(order):
    a, b, loop = _pair("hpc", seed=5)
    # receive for tag 0xAB00_0000_0000_00XX: low byte ignored (MPI_ANY_SOURCE-style field)
    def post():
        return b.target.post_recv(JOB, PID, RI, 64, tag=0xAB00_0000_0000_0000, ignore=0xFF)

    r = post() if order == "posted-first" else None
    a.initiator.tagged_send(addr(b), b"no", 0xAC00_0000_0000_0001)
    a.initiator.tagged_send(addr(b), b"yes", 0xAB00_0000_0000_0042)
    loop.run()
    if r is None:
        r = post()
    assert r.done and bytes(r.buffer[:3]) == b"yes" and r.match_bits == 0xAB00_0000_0000_0042
    exact = b.target.post_recv(JOB, PID, RI, 64, tag=0xAC00_0000_0000_0001)
    assert exact.done and bytes(exact.buffer[:2]) == b"no"


def test_wildcard_needs_wildcard_profile():
    a, b, loop = _pair("ai-full")
    with pytest.raises(ProfileError, match="ai-full"):
        b.target.post_recv(JOB, PID, RI, 8, tag=1, ignore=0xF)
    a2, b2, _ = _pair("ai-base")
    with pytest.raises(ProfileError, match="ai-base"):
        b2.target.post_recv(JOB, PID, RI, 8, tag=1)


def test_unexpected_list_full_gives_no_match():
    a, b, loop = _pair("ai-base", seed=1, dup=0.0)
    limit = b.profile.ses.unexpected_max_messages
    ops = [a.initiator.send(addr(b), b"u%d" % i) for i in range(limit + 3)]
    loop.run()
    codes = [op.return_code for op in ops]
    assert codes.count(Rc.OK) == limit and codes.count(Rc.NO_MATCH) == 3
    with pytest.raises(SesError, match="NO_MATCH"):
        next(op for op in ops if op.return_code == Rc.NO_MATCH).result()


def test_unexpected_bytes_limit():
    a, b, loop = _pair("ai-base", seed=1, dup=0.0)
    big = b.profile.ses.unexpected_max_bytes
    ok = a.initiator.send(addr(b), payload(big - 10))
    refused = a.initiator.send(addr(b), payload(11))
    fits = a.initiator.send(addr(b), payload(10))
    loop.run()
    assert ok.state == OpState.DONE and fits.state == OpState.DONE
    assert refused.return_code == Rc.NO_MATCH


def test_send_to_bad_job_and_unsupported_tagging():
    a, b, loop = _pair("ai-full")
    bad = a.initiator.send(addr(b, job_id=JOB + 1), b"x")
    loop.run()
    assert bad.return_code == Rc.BAD_JOB_ID


def test_datagram_send_over_uud():
    a, b, loop = _pair("hpc", dup=0.0)
    r = b.target.post_recv(JOB, PID, RI, 64)
    op = a.initiator.datagram_send(addr(b), b"dgram", header_data=5)
    assert op.state == OpState.DONE  # no response in UUD: done once queued
    loop.run()
    assert r.done and bytes(r.buffer[:5]) == b"dgram" and r.header_data == 5
    with pytest.raises(ValueError, match="UUD"):
        a.initiator.send(addr(b), b"x", mode=DeliveryMode.UUD)
    with pytest.raises(SesError, match="TOO_LONG"):
        a.initiator.datagram_send(addr(b), payload(5000))
    hdr = SesStandard(opcode=SesOpcode.DATAGRAM_SEND, flags=SesFlag.SOM | SesFlag.EOM,
                      message_id=1, job_id=JOB, pid_on_fep=PID, resource_index=RI)
    reply = b.target.handle(a.address, hdr, None, b"", mode=DeliveryMode.RUD)
    assert reply.response.return_code == Rc.UNSUPPORTED_OP


def test_no_op():
    a, b, loop = _pair("ai-base")
    ok = a.initiator.no_op(addr(b))
    bad = a.initiator.no_op(addr(b, job_id=99))
    loop.run()
    assert ok.state == OpState.DONE and bad.return_code == Rc.BAD_JOB_ID


def test_msg_error_aborts_a_partial_message():
    a, b, loop = _pair("hpc", dup=0.0, reorder=False)
    r = b.target.post_recv(JOB, PID, RI, 3 * 4096)
    op = a.initiator.send(addr(b), payload(3 * 4096))
    loop.pump()
    held, loop.net = loop.net[1:], loop.net[:1]
    loop.step()  # only the first packet reaches the target
    abort = a.initiator.msg_error(op)
    loop.run()
    assert op.return_code == Rc.CANCELLED
    assert abort.state == OpState.DONE
    assert r.done and r.return_code == Rc.CANCELLED
    assert b.target.reassembly.active == {}
    assert b.counters["msg_error_aborted"] == 1
    snapshot = bytes(r.buffer)
    loop.net.extend(held)  # late packets of the abandoned message are dropped
    loop.run()
    assert bytes(r.buffer) == snapshot and b.counters["duplicates"] == 2


def test_pds_failure_fails_the_op_and_cleans_the_target():
    a, b, loop = _pair("hpc", dup=0.0, reorder=False)
    r = b.target.post_recv(JOB, PID, RI, 3 * 4096)
    op = a.initiator.send(addr(b), payload(3 * 4096))
    loop.pump()
    loop.net = loop.net[:1]  # the PDS lost the last two packets for good
    loop.run()
    ref = next(iter(a.outq), None)
    assert ref is None and op.state == OpState.PENDING
    from uet.ses import PacketRef

    a.initiator.on_failed(PacketRef(op.op_id, 0, 2), "max retransmissions")
    loop.run()
    assert op.return_code == Rc.UNDELIVERABLE
    with pytest.raises(SesError, match="max retransmissions"):
        op.result()
    assert r.return_code == Rc.CANCELLED and b.target.reassembly.active == {}


def test_reassembly_table_full_nacks_and_recovers():
    a, b, loop = _pair("hpc", dup=0.0)
    b.target.reassembly.max_messages = 2
    recvs = [b.target.post_recv(JOB, PID, RI, 10000) for _ in range(6)]
    ops = [a.initiator.send(addr(b), payload(9000, i)) for i in range(6)]
    loop.run()
    assert loop.nacks > 0 and b.counters["nack_no_ses_msg_avail"] == loop.nacks
    assert all(op.state == OpState.DONE for op in ops)
    assert sorted(bytes(r.buffer[:9000]) for r in recvs) == sorted(
        payload(9000, i) for i in range(6))
    assert NackCode.NO_SES_MSG_AVAIL == 9


def _one_packet_send() -> SesStandard:
    """A 3-byte single-packet SEND, message ID 4, to the posted receives' resource."""
    return SesStandard(opcode=SesOpcode.SEND, flags=SesFlag.SOM | SesFlag.EOM, message_id=4,
                       initiator=0xA, job_id=JOB, pid_on_fep=PID, resource_index=RI,
                       request_length=3)


def test_duplicates_after_completion_are_dropped():
    a, b, loop = _pair("hpc", dup=0.0)
    hdr = _one_packet_send()
    r1 = b.target.post_recv(JOB, PID, RI, 8)
    r2 = b.target.post_recv(JOB, PID, RI, 8)
    first = b.target.handle(a.address, hdr, None, b"one")
    again = b.target.handle(a.address, hdr, None, b"one")
    assert first.response.return_code == Rc.OK and again.response is None
    assert r1.done and not r2.done and b.counters["duplicates"] == 1


def test_message_ids_are_scoped_to_the_connection():
    """A restarted initiator opens a new PDC and numbers its messages from the start again:
    the same message ID on another connection is a new message, not a late copy (message
    state is per PDC, as the reference provider keeps ``active_msg_id`` per PDC)."""
    a, b, loop = _pair("hpc", dup=0.0)
    hdr = _one_packet_send()
    r1 = b.target.post_recv(JOB, PID, RI, 8)
    r2 = b.target.post_recv(JOB, PID, RI, 8)
    first = b.target.handle(a.address, hdr, None, b"one", conn=11)
    again = b.target.handle(a.address, hdr, None, b"one", conn=11)
    restarted = b.target.handle(a.address, hdr, None, b"two", conn=12)
    assert first.response.return_code == Rc.OK and again.response is None
    assert restarted.response.return_code == Rc.OK
    assert r1.done and r2.done and bytes(r2.buffer[:3]) == b"two"
    assert b.counters["duplicates"] == 1
