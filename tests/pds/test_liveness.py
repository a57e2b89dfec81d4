"""Liveness (design principle 7, docs/pds.md "Liveness"): every PDC with work has a packet to
send or a deadline, every operation ends within a bound the timers imply, and an initiator
whose peer window never reopens retries by timer and finally fails its queue.

The first test is the regression test of issue 13's first failure: an initiator blocked on
the peer window (the target's CACK held by stored responses) sends CLEAR once, the ACK that
answers it is lost, and the PDC used to stay ESTABLISHED with messages queued, nothing in
flight and no timer armed (128 of 300 messages never ended).
"""

from __future__ import annotations

import random

import pytest
from pds_harness import A_IP, B_IP, US, Net, pair, request, ses_std

from uet.errors import LocalProtocolError
from uet.pds import (
    InitiatorEvent,
    InitiatorState,
    LivenessError,
    PdcState,
    PdcStateError,
    PdsConfig,
    PdsEndpoint,
    TargetEvent,
    TargetState,
    invariants,
)
from uet.pds.states import INITIATOR_TRANSITIONS, TARGET_TRANSITIONS
from uet.wire.constants import CtlType, ReturnCode, RspOpcode
from uet.wire.records import PdsAck, PdsAckCc, PdsControl, SesResponse


def _guaranteed(ev):
    """A RESPONSE on every packet: the target stores each until cleared, holding its CACK."""
    return (SesResponse(opcode=RspOpcode.RESPONSE, return_code=ReturnCode.OK,
                        message_id=ev.ses.message_id, job_id=ev.ses.job_id), b"")


def _drop_first_ack_after_clear(state):
    def drop(f):
        if isinstance(f.pds, PdsControl) and f.pds.ctl_type == CtlType.CLEAR:
            state["clear"] += 1
            return False
        if state["clear"] and not state["dropped"] and f.src_ip == B_IP \
                and isinstance(f.pds, (PdsAck, PdsAckCc)):
            state["dropped"] += 1
            return True
        return False
    return drop


def test_lost_ack_of_a_clear_on_a_blocked_peer_window_does_not_stall():
    """Issue 13 (1): 300 single-packet messages with guaranteed responses, MP_RANGE 128;
    the ACK answering the first CLEAR is lost. Every message must end (here: delivered;
    the blocked probe re-sends CLEAR and ACK_REQ by timer)."""
    a, b = pair(PdsConfig(rto_ps=100 * US, close_idle_ps=0), PdsConfig(rto_ps=100 * US),
                responder=_guaranteed)
    state = {"clear": 0, "dropped": 0}
    net = Net([a, b], drop=_drop_first_ack_after_clear(state))
    for i in range(300):
        a.ep.submit(0, request(msg_ref=i, ses=ses_std(msg_id=i)))
    net.run()
    assert state["dropped"] == 1 and state["clear"] >= 2
    assert sorted({e.msg_ref for e in a.acked}) == list(range(300)) and not a.failed
    assert a.ep.counters["retx.peer_window"] >= 1
    assert len(b.delivered) == 300


def test_blocked_peer_window_towards_a_vanished_target_fails_the_queue():
    """The target disappears while the initiator is blocked on its window: the probe
    (CLEAR + ACK_REQ at the RTO's backoff) goes unanswered max_retries times, then every
    queued message fails (MessageFailed -> UNDELIVERABLE at the SES), none hangs."""
    cfg = PdsConfig(rto_ps=100 * US, close_idle_ps=0, max_retries=3)
    a, b = pair(cfg, PdsConfig(rto_ps=100 * US), responder=_guaranteed)
    gone = {"on": False}

    def drop(f):
        if f.src_ip == B_IP and isinstance(f.pds, (PdsAck, PdsAckCc)) and \
                sum(1 for e in a.acked) >= 128:
            gone["on"] = True
        return gone["on"] and f.dst_ip == A_IP

    net = Net([a, b], drop=drop)
    for i in range(200):
        a.ep.submit(0, request(msg_ref=i, ses=ses_std(msg_id=i)))
    net.run()
    done = {e.msg_ref for e in a.acked} | {e.msg_ref for e in a.failed}
    assert done == set(range(200))
    assert a.failed
    assert [c.error for c in a.closed if c.role == "initiator"] == [True]
    assert "peer window closed" in a.failed[0].reason


def test_blocked_peer_window_on_a_target_closed_in_error_fails_at_once():
    """The target closed the PDC in error while the initiator was blocked on its window
    (its CLEARs are lost): the probe's ACK_REQ is answered CLOSING_IN_ERR and the queue
    fails without waiting out the retries."""
    a, b = pair(PdsConfig(rto_ps=100 * US, close_idle_ps=0, max_retries=20),
                PdsConfig(rto_ps=100 * US), responder=_guaranteed)

    def drop(f):
        return isinstance(f.pds, PdsControl) and f.pds.ctl_type == CtlType.CLEAR

    net = Net([a, b], drop=drop)
    for i in range(140):
        a.ep.submit(0, request(msg_ref=i, ses=ses_std(msg_id=i)))
    net.run(until=150 * US)
    pdc = a.ep.pdcs("initiator")[0]
    assert len(pdc.queue) == 12 and not pdc.outstanding and pdc.blocked_at is not None
    b.ep.pdcs("target")[0].close_in_error(net.now, "test: closed in error")
    # within the next probe (one RTO), not after 20 backed-off retries
    net.run(until=net.now + 2 * pdc.rto.base)
    assert sorted(e.msg_ref for e in a.failed) == list(range(128, 140))
    assert all("CLOSING_IN_ERR" in e.reason for e in a.failed)


def test_transition_tables_reject_what_they_do_not_list():
    """docs/pds.md "State machines": one enum and one table per role; an event a state
    does not allow raises a LocalProtocolError naming the PDC, the state and the event."""
    ep = PdsEndpoint(PdsConfig(), A_IP, random.Random(1))
    ep.submit(0, request())
    pdc = ep.pdcs()[0]
    assert pdc.state is InitiatorState.SYN and pdc.state == PdcState.SYN
    with pytest.raises(PdcStateError) as err:
        pdc.transition(InitiatorEvent.CLOSE_ACKED)
    assert isinstance(err.value, LocalProtocolError)
    assert f"PDC {pdc.pdc_id}" in str(err.value) and "CLOSE_ACKED" in str(err.value)
    assert "SYN" in str(err.value) and pdc.state is InitiatorState.SYN  # unchanged
    # every row leads from a state of the role to a state of the role
    for (s, e), n in INITIATOR_TRANSITIONS.items():
        assert isinstance(s, InitiatorState) and isinstance(e, InitiatorEvent)
        assert isinstance(n, InitiatorState)
    for (s, e), n in TARGET_TRANSITIONS.items():
        assert isinstance(s, TargetState) and isinstance(e, TargetEvent)
        assert isinstance(n, TargetState)
    # FREED is terminal for both roles
    assert not [k for k in INITIATOR_TRANSITIONS if k[0] is InitiatorState.FREED]
    assert not [k for k in TARGET_TRANSITIONS if k[0] is TargetState.FREED]


def test_the_liveness_check_catches_work_without_a_deadline():
    """A PDC with queued work that is neither on the data ring nor armed is reported with
    its state (the check the test suite runs after every call, here called directly)."""
    ep = PdsEndpoint(PdsConfig(), A_IP, random.Random(1))
    ep.submit(0, request())
    pdc = ep.pdcs()[0]
    invariants.check(ep, 0)  # on the ring: fine
    ep.ring.clear()
    pdc.in_ring = False  # break it: the PDC would never be polled again
    with pytest.raises(LivenessError) as err:
        invariants.check(ep, 0)
    assert "no packet to send and no deadline armed" in str(err.value)
    assert f"id={pdc.pdc_id}" in str(err.value) and "queue=1" in str(err.value)


def test_the_liveness_check_bounds_the_time_without_progress():
    cfg = PdsConfig(rto_ps=100 * US, max_retries=2)
    bound = invariants.progress_bound(cfg)
    # 2 x (100 + 200 + 400) us of retries + max_rto_ps of credit wait
    assert bound == 2 * 700 * US + cfg.max_rto_ps
    ep = PdsEndpoint(cfg, A_IP, random.Random(1))
    ep.submit(0, request())
    assert ep.poll_transmit(0, False) is not None
    pdc = ep.pdcs()[0]
    pdc.last_progress = -bound - 1  # pretend nothing was released for longer than allowed
    with pytest.raises(LivenessError, match="no packet released or failed"):
        invariants.check(ep, 0, timers=True)


def test_checks_are_installed_only_when_asked(monkeypatch):
    """UET_CHECK_INVARIANTS=1 (tests/conftest.py) wraps the instance's public methods;
    without it the class methods run unwrapped (production pays nothing)."""
    ep = PdsEndpoint(PdsConfig(), A_IP, random.Random(1))
    assert invariants.enabled()  # the suite runs with the checks on
    assert "submit" in vars(ep) and "receive" in vars(ep)
    monkeypatch.setenv(invariants.ENV, "0")
    bare = PdsEndpoint(PdsConfig(), A_IP, random.Random(1))
    assert "submit" not in vars(bare) and bare.submit.__func__ is PdsEndpoint.submit
