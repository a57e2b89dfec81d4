"""Every table a peer can grow in the SES has a limit, a timeout and a counter, and every
operation ends (docs/ses.md, "Limits and timeouts"): messages whose packets stop arriving
(``ses.reassembly_timeout_ms``), messages of a PDC that closed, unexpected messages and
receives reserved for restarts (``ses.unexpected_timeout_ms``), and on the initiator read
data, rendezvous pulls and restarts the peer never sends."""

from __future__ import annotations

from ses_harness import JOB, PID, RI, addr, pair, payload

from uet.ses import OpState, PacketRef
from uet.ses.memory import Perm
from uet.wire.constants import ReturnCode as Rc
from uet.wire.constants import RspOpcode, SesFlag, SesOpcode
from uet.wire.records import SesResponse, SesStandard

MS = 10**9


def _first_half(msg_id: int, key: int = 0x51, opcode: int = SesOpcode.WRITE,
                initiator: int = 9) -> SesStandard:
    return SesStandard(opcode=opcode, flags=int(SesFlag.SOM | SesFlag.REL), job_id=JOB,
                       pid_on_fep=PID, resource_index=RI, memory_key=key, initiator=initiator,
                       message_id=msg_id, request_length=8192)


def _second_half(msg_id: int, key: int = 0x51, opcode: int = SesOpcode.WRITE,
                 initiator: int = 9) -> SesStandard:
    return SesStandard(opcode=opcode, flags=int(SesFlag.EOM | SesFlag.REL), job_id=JOB,
                       pid_on_fep=PID, resource_index=RI, memory_key=key, initiator=initiator,
                       message_id=msg_id, request_length=8192, message_offset=4096,
                       payload_length=4096)


def _target(profile: str = "hpc"):
    a, b, _ = pair(profile, seed=1, dup=0.0)
    b.resources.register(JOB, PID, RI)
    b.resources.add_region(JOB, PID, RI, 0x51, bytearray(1 << 16), Perm.ALL,
                           idempotent_safe=True)
    return b


def test_a_message_silent_for_the_reassembly_timeout_is_abandoned():
    b = _target()
    limit = b.timeouts.reassembly_ps
    assert limit == b.profile.ses.reassembly_timeout_ms * MS == 10_000 * MS
    for mid in range(3):
        assert b.target.handle("10.0.0.9", _first_half(mid), None, bytes(4096), conn=5,
                               now=mid).response is None
    assert len(b.target.reassembly.active) == 3 and b.next_deadline() == limit
    b.handle_timer(limit - 1)  # not yet due: nothing changes
    assert len(b.target.reassembly.active) == 3
    b.handle_timer(limit + 2)
    assert not b.target.reassembly.active and b.counters["reassembly_expired"] == 3
    assert b.next_deadline() is None  # nothing left to time
    # the first late packet of an abandoned message ends the initiator's op with a code;
    # later ones are duplicates
    late = b.target.handle("10.0.0.9", _second_half(0), None, bytes(4096), conn=5,
                           now=limit + 3)
    assert late.response.return_code == Rc.CANCELLED
    again = b.target.handle("10.0.0.9", _second_half(0), None, bytes(4096), conn=5,
                            now=limit + 4)
    assert again.response is None
    # the slots are free: a new message starts and completes
    b.target.handle("10.0.0.9", _first_half(7), None, bytes(4096), conn=5, now=limit + 5)
    done = b.target.handle("10.0.0.9", _second_half(7), None, bytes(4096), conn=5,
                           now=limit + 6)
    assert done.response.return_code == Rc.OK


def test_a_closed_connection_abandons_its_messages_and_their_receive():
    b = _target()
    r = b.target.post_recv(JOB, PID, RI, 8192)
    b.target.handle("10.0.0.9", _first_half(1, opcode=SesOpcode.SEND), None, bytes(4096),
                    conn=5, now=0)
    b.target.handle("10.0.0.9", _first_half(2), None, bytes(4096), conn=6, now=0)
    assert len(b.target.reassembly.active) == 2 and not r.done
    b.target.connection_closed(1, 5)
    assert list(b.target.reassembly.active) == [("10.0.0.9", 6, 9, JOB, 2)]
    assert r.done and r.return_code == Rc.CANCELLED
    assert b.counters["reassembly_dropped_on_close"] == 1


def test_unexpected_messages_and_reserved_receives_expire():
    a, b, loop = pair("hpc", seed=1, dup=0.0)
    b.resources.register(JOB, PID, RI)
    limit = b.timeouts.unexpected_ps
    op = a.initiator.send(addr(b), payload(100))
    loop.run()  # no receive posted: it waits in the unexpected list
    assert op.state == OpState.DONE and b.target.unexpected_messages == 1
    b.handle_timer(limit + 1)
    assert b.target.unexpected_messages == 0 and b.counters["unexpected_expired"] == 1
    r = b.target.post_recv(JOB, PID, RI, 100)
    assert not r.done  # it did not get the dropped message


def test_read_data_that_never_arrives_fails_the_read():
    """The target answered a large READ OK, but its return-direction data never comes
    (its PDC failed): the initiator's READ fails UNDELIVERABLE after the reassembly
    timeout instead of waiting for ever."""
    a, b, loop = pair("hpc", seed=1, dup=0.0)
    op = a.initiator.read(addr(b), 0x51, 0, 64 << 10)
    # the requests' PDS ACKs bring the target's RESPONSE, no data
    while (pkt := a.poll_transmit()) is not None:
        if pkt.eom:
            rsp = SesResponse(opcode=RspOpcode.RESPONSE, return_code=Rc.OK,
                              message_id=pkt.ses.message_id, job_id=JOB,
                              modified_length=64 << 10)
            a.initiator.on_response(pkt.msg_ref, rsp, b"", now=0)
    assert op.state == OpState.PENDING and a.next_deadline() == a.timeouts.reassembly_ps
    a.handle_timer(a.timeouts.reassembly_ps)
    assert op.return_code == Rc.UNDELIVERABLE and "read data stopped arriving" in op.reason
    assert a.counters["op_timeout.data"] == 1


def test_a_deferred_send_never_restarted_fails():
    a, b, loop = pair("hpc", seed=1, dup=0.0)
    b.resources.register(JOB, PID, RI)
    op = a.initiator.deferrable_send(addr(b), payload(10_000))
    loop.run()  # no receive: the target parks it and answers NO_MATCH
    assert op.state == OpState.DEFERRED
    a.handle_timer(a.timeouts.unexpected_ps + 1)
    assert op.return_code == Rc.UNDELIVERABLE and "deferred" in op.reason


def test_a_rendezvous_the_target_never_reads_fails_and_unexposes():
    a, b, loop = pair("hpc", seed=1, dup=0.0)
    b.resources.register(JOB, PID, RI)
    op = a.initiator.rendezvous_send(addr(b), payload(20_000))
    loop.run()  # eager part delivered into the unexpected list, nobody posts a receive
    assert op.state == OpState.PENDING and a.next_deadline() is not None
    a.handle_timer(a.timeouts.unexpected_ps + 1)
    assert op.return_code == Rc.UNDELIVERABLE and "rendezvous" in op.reason
    res = a.resources.get(JOB, a.pid_on_fep, a.rendezvous_index)
    assert res is None or not res.regions


def test_failed_reference_is_ignored_after_a_timeout():
    a, b, loop = pair("hpc", seed=1, dup=0.0)
    op = a.initiator.read(addr(b), 0x51, 0, 64 << 10)
    a.outq.clear()
    a.initiator.on_failed(PacketRef(op.op_id, 0, 0), "gone", now=5)
    assert op.return_code == Rc.UNDELIVERABLE and a.next_deadline() is None


def test_rudi_late_packet_of_a_finished_write_gets_the_answer_again():
    """Found by the long soak (benchmarks/soak.py, rudi-*): RUDI's response cache may drop
    the answer to the packet that completed a WRITE; its retransmission then reaches the
    SES again, which must answer OK again, or the initiator's WRITE never ends. Over RUD the
    PDS keeps responses until cleared, and a late packet stays a silent duplicate."""
    from uet.wire.constants import DeliveryMode

    b = _target()
    rudi = DeliveryMode.RUDI
    assert b.target.handle("10.0.0.9", _first_half(3), None, bytes(4096), mode=rudi,
                           now=1).response is None
    done = b.target.handle("10.0.0.9", _second_half(3), None, bytes(4096), mode=rudi, now=2)
    again = b.target.handle("10.0.0.9", _second_half(3), None, bytes(4096), mode=rudi, now=3)
    assert done.response.return_code == Rc.OK and again is done
    assert b.counters["final_replayed"] == 1
    b.target.handle("10.0.0.9", _first_half(4), None, bytes(4096), conn=7, now=4)
    b.target.handle("10.0.0.9", _second_half(4), None, bytes(4096), conn=7, now=5)
    late = b.target.handle("10.0.0.9", _second_half(4), None, bytes(4096), conn=7, now=6)
    assert late.response is None  # RUD: a duplicate
