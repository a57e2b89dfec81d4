"""The scripted peer's semantics: claiming, virtual time, explanations."""

from __future__ import annotations

import pytest

from uet.conformance import ANY_ACK, ConformanceFailure, PdsNack, has_flags
from uet.conformance.registry import Case
from uet.conformance.targets import InProcessTarget
from uet.wire.constants import NackCode, ReturnCode
from uet.wire.records import Frame, PdsRequest, SesStandard

CASE = Case("T-001", "3.2", "peer mechanics", lambda peer: None)


@pytest.fixture
def peer():
    with InProcessTarget().peer(CASE) as p:
        yield p


def test_expect_claims_the_first_match_and_keeps_the_rest(peer):
    pdc = peer.pdc()
    a = pdc.send(peer.ses.no_op()[0])
    b = pdc.send(peer.ses.no_op()[0])
    rb = peer.expect(ANY_ACK, timeout_us=10, fields={"ack_psn": b})
    assert rb.pds.ack_psn == b and rb.ses.return_code == ReturnCode.OK
    assert [r.pds.ack_psn for r in peer.unclaimed] == [a]
    with pytest.raises(ConformanceFailure, match=f"expected no ACK or ACK_CC.*ack_psn={a}"):
        peer.expect_nothing(ANY_ACK, within_us=10)
    ra = peer.expect(ANY_ACK, timeout_us=10)
    assert ra.pds.ack_psn == a and not peer.unclaimed
    peer.expect_nothing(ANY_ACK, within_us=10)


def test_virtual_time_advances_only_by_waiting(peer):
    pdc = peer.pdc()
    msg = peer.ses.write("rma", 0, bytes(3 * 4096))
    pdc.ack_of(pdc.send(msg[0], ar=False))  # the SYN: acknowledged at once
    assert peer.now_us == 0
    t = peer.now_ps
    psn = pdc.send(msg[1], ar=False)
    with pytest.raises(ConformanceFailure):
        peer.expect(ANY_ACK, timeout_us=300, fields={"ack_psn": psn})
    assert peer.now_us == 300  # exactly the bound, no more
    rx = pdc.ack_of(psn, timeout_us=10**6)
    assert peer.elapsed_us(rx, t) == peer.setup.ack_timer_us  # the ACK timer, to the ps


def test_explanation_names_fields_and_values(peer):
    pdc = peer.pdc()
    psn = pdc.send(peer.ses.no_op()[0])
    with pytest.raises(ConformanceFailure) as info:
        pdc.ack_of(psn, fields={"ses.return_code": ReturnCode.BAD_INDEX,
                                "flags": has_flags(0x20)})
    text = str(info.value)
    assert "expected the ACK of PSN" in text and "nothing matching arrived" in text
    assert "ses.return_code=OK (expected BAD_INDEX)" in text
    assert "flags=2 (expected flags with 0x20 set)" in text
    with pytest.raises(ConformanceFailure, match="the device sent nothing at all"):
        peer.expect(PdsNack, timeout_us=5, what="a NACK")


def test_send_accepts_records_and_raw_bytes(peer):
    pdc = peer.pdc()
    frame = Frame(pds=PdsRequest(flags=0x0C, psn=pdc.start_psn, spdcid=pdc.spdcid),
                  ses=SesStandard(opcode=0, flags=0x0B, job_id=peer.setup.job_id,
                                  resource_index=1))
    peer.send(frame)
    pdc.ack_of(pdc.start_psn)
    peer.send(b"\x01")
    peer.expect_nothing(within_us=100)
    stray = peer.pdc()
    stray.dpdcid = 12345
    psn = stray.send(peer.ses.no_op()[0], syn=False)
    got = peer.collect(PdsNack, within_us=100)
    assert [(r.pds.nack_code, r.pds.nack_psn) for r in got] == [(NackCode.INV_DPDCID, psn)]
    assert [r.sent for r in peer.capture.records] == [True, False, True, True, False]
