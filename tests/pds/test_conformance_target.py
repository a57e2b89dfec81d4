"""Conformance of the target side: scripted packets in, exact packets out.

One test per rule; each docstring cites the topic it checks ("ref 3.2" etc.:
docs/references.md, which names the public source).
"""

from __future__ import annotations

import pytest
from pds_harness import A_IP, US
from pds_script import (
    INI_ID,
    S,
    Side,
    acks,
    cp,
    cps,
    established_target,
    nack_codes,
    only,
    req,
)

from uet.pds import PdcState
from uet.wire.constants import (
    AckFlag,
    CtlType,
    DeliveryMode,
    NackCode,
    NackFlag,
    NextHeader,
    PdsType,
    ReturnCode,
    RspOpcode,
)
from uet.wire.records import (
    PdsAck,
    PdsAckCc,
    PdsControl,
    PdsNack,
    SesResponse,
    SesResponseData,
    psn_add,
)

GTD = (SesResponse(opcode=RspOpcode.RESPONSE, return_code=ReturnCode.OK, job_id=7), b"")


def gtd_responder(ev):
    return GTD


# ---------------------------------------------------------------------------- establishment


def test_ref_3_2_first_syn_creates_established_target_pdc():
    """ref 3.2 (3, 4): the first valid SYN creates the target PDC directly in ESTABLISHED,
    DPDCID := the initiator's SPDCID, window based at Start_PSN = PSN - psn_offset; the ACK
    carries SPDCID = the new target PDC ID."""
    t = Side()
    out = t.feed(req(psn_add(S, 2), syn=True, ar=True))
    a = only(acks(out), PdsAckCc).pds
    pdc = t.ep.pdc(a.spdcid)
    assert pdc.state == PdcState.ESTABLISHED and pdc.role == "target"
    assert pdc.start_psn == S and pdc.peer_pdcid == INI_ID
    assert a.dpdcid == INI_ID and a.spdcid != 0
    assert a.cack_psn == psn_add(S, -1)  # S and S+1 not received yet
    assert a.ack_psn == psn_add(S, 2)
    assert [e.psn for e in t.delivered] == [psn_add(S, 2)]
    assert t.opened[0].role == "target" and t.ep.counters["opened.target"] == 1


def test_ref_3_2_syn_offset_beyond_window_is_invalid_syn():
    """ref 3.2 (5) / 3.5: a SYN whose PSN is outside the window it would open (psn_offset >=
    MP_RANGE) is refused with INVALID_SYN and creates no PDC."""
    t = Side()
    out = t.feed(req(psn_add(S, 128), syn=True))
    assert nack_codes(out) == [NackCode.INVALID_SYN]
    assert t.ep.pdcs() == [] and not t.delivered


def test_ref_3_2_syn_with_other_start_psn_on_existing_pdc_is_invalid_syn():
    """ref 3.2 (5): a SYN for a known {sip, dip, spdcid} naming another Start_PSN."""
    t, _ = established_target()
    out = t.feed(req(psn_add(S, 1), syn=True, start=psn_add(S, -7)))
    assert nack_codes(out) == [NackCode.INVALID_SYN]
    assert len(t.delivered) == 1


def test_ref_3_2_syn_psn_beyond_window_on_existing_pdc_is_invalid_syn():
    """ref 3.5: out-of-window PSN with SYN set -> INVALID_SYN (not PSN_OOR_WINDOW)."""
    t, _ = established_target()
    f = req(psn_add(S, 129), syn=True)
    f.pds.psn_offset = 129 & 0xFFF
    out = t.feed(f)
    assert nack_codes(out) == [NackCode.INVALID_SYN]


def test_ref_3_2_unknown_dpdcid_without_syn_is_inv_dpdcid():
    """ref 3.2 (5): non-SYN packet naming a DPDCID the target does not know."""
    t = Side()
    out = t.feed(req(S, dpdcid=0x4321))
    n = only(out, PdsNack).pds
    assert n.nack_code == NackCode.INV_DPDCID
    assert (n.nack_psn, n.spdcid, n.dpdcid) == (S, 0, INI_ID)


@pytest.mark.parametrize("what", ["spdcid", "source_ip"])
def test_ref_3_2_header_mismatch_is_pdc_hdr_mismatch(what):
    """ref 3.2 (5): a non-SYN packet whose SPDCID or source address differs from the PDC's."""
    t, tid = established_target()
    f = req(psn_add(S, 1), dpdcid=tid)
    if what == "spdcid":
        f.pds.spdcid = INI_ID + 1
    else:
        f.src_ip = "10.0.0.9"
    out = t.feed(f)
    n = only(out, PdsNack)
    assert n.pds.nack_code == NackCode.PDC_HDR_MISMATCH
    assert n.dst_ip == f.src_ip and n.pds.spdcid == tid
    assert len(t.delivered) == 1


@pytest.mark.parametrize("syn", [True, False], ids=["by_key", "by_dpdcid"])
def test_ref_3_2_mode_mismatch_is_pdc_mode_mismatch(syn):
    """ref 3.2 (5): a ROD request on a RUD PDC."""
    t, tid = established_target()
    out = t.feed(req(psn_add(S, 1), syn=syn, dpdcid=tid, ptype=PdsType.ROD_REQ))
    assert nack_codes(out) == [NackCode.PDC_MODE_MISMATCH]


def test_ref_3_2_request_without_ses_request_header_is_pdc_hdr_mismatch():
    """ref 3.2 (5) / 4.7: a request must carry an SES request (or read-data) header."""
    t = Side()
    out = t.feed(req(S, syn=True, next_hdr=NextHeader.RSP))
    assert nack_codes(out) == [NackCode.PDC_HDR_MISMATCH]
    assert t.ep.pdcs() == []


def test_ref_3_2_no_pdc_avail_when_target_table_full():
    """ref 3.2 (3) / 3.1 / 3.9: no PDC free -> NO_PDC_AVAIL; the existing PDC is unharmed,
    and being idle it is asked to close (CLOSE_REQ) so that the next SYN finds room, once
    (a reclaim at a time)."""
    t, tid = established_target(max_target_pdcs=1)
    out = t.feed(req(S, syn=True, spdcid=0x0222))
    n = only([f for f in out if isinstance(f.pds, PdsNack)]).pds
    assert (n.nack_code, n.spdcid, n.dpdcid) == (NackCode.NO_PDC_AVAIL, 0, 0x0222)
    cr = only([f for f in out if isinstance(f.pds, PdsControl)]).pds
    assert cr.ctl_type == CtlType.CLOSE_REQ and cr.spdcid == tid
    assert t.ep.counters["close_req.reclaim"] == 1
    out = t.feed(req(S, syn=True, spdcid=0x0333))
    assert nack_codes(out) == [NackCode.NO_PDC_AVAIL]  # no second CLOSE_REQ
    out = t.feed(req(psn_add(S, 1), dpdcid=tid, ar=True))
    assert only(acks(out)).pds.cack_psn == psn_add(S, 1)


def test_ref_3_2_target_start_psn_mode_answers_new_start_psn():
    """ref 3.2 (secured/1-RTT start): the target mints its Start_PSN, NACKs NEW_START_PSN
    with it as payload, keeps the PDC PENDING, and accepts SYNs based on it."""
    t = Side(start_psn_mode="target", fixed_start_psn=5_000_000)
    out = t.feed(req(S, syn=True))
    n = only(out, PdsNack).pds
    assert n.nack_code == NackCode.NEW_START_PSN and n.payload == 5_000_000
    pdc = t.ep.pdc(n.spdcid)
    assert pdc.state == PdcState.PENDING and not t.delivered and not t.opened
    out = t.feed(req(5_000_000, syn=True, start=5_000_000, ar=True))
    assert only(acks(out)).pds.cack_psn == 5_000_000
    assert pdc.state == PdcState.ESTABLISHED and len(t.delivered) == 1


def test_ref_3_2_pending_pdc_reaped_after_new_pdc_time():
    """ref 3.2: PENDING target PDCs are reaped after New_PDC_Time."""
    t = Side(start_psn_mode="target", fixed_start_psn=5_000_000, new_pdc_time_ps=10 * US)
    t.feed(req(S, syn=True))
    assert len(t.ep.pdcs("target")) == 1
    t.advance(11 * US)
    assert t.ep.pdcs("target") == [] and t.ep.counters["pending_reaped"] == 1


# ---------------------------------------------------------------------------- window (3.5)


def test_ref_3_5_psn_beyond_window_is_psn_oor_window():
    """ref 3.5: PSN >= base + MP_RANGE -> NACK PSN_OOR_WINDOW, not delivered."""
    t, tid = established_target()
    out = t.feed(req(psn_add(S, 129), dpdcid=tid))
    n = only(out, PdsNack).pds
    assert (n.nack_code, n.nack_psn) == (NackCode.PSN_OOR_WINDOW, psn_add(S, 129))
    assert t.ep.counters["out_of_window"] == 1 and len(t.delivered) == 1


def test_ref_3_5_psn_below_previous_range_is_psn_oor_window():
    """ref 3.5: a PSN older than the previous MP_RANGE is not answered with an ACK."""
    t, tid = established_target()
    out = t.feed(req(psn_add(S, -200), dpdcid=tid))
    assert nack_codes(out) == [NackCode.PSN_OOR_WINDOW]


def test_ref_3_5_duplicate_in_window_gets_plain_ack_for_its_psn():
    """ref 3.5: an already received PSN is acknowledged again (ack_psn = it, RETX echoed),
    not delivered twice."""
    t, tid = established_target()
    t.feed(req(psn_add(S, 2), dpdcid=tid))  # hole at S+1 keeps S+2 in the window
    t.advance(10 * US)
    out = t.feed(req(psn_add(S, 2), dpdcid=tid, retx=True, ar=True))
    a = only(acks(out)).pds
    assert a.ack_psn == psn_add(S, 2) and a.flags & AckFlag.RETX
    assert out[0].ses is None
    assert len(t.delivered) == 2 and t.ep.counters["duplicates"] == 1


def test_ref_3_5_duplicate_shifted_out_gets_default_response():
    """ref 3.5 / 4.5: a duplicate below the window (within the previous MP_RANGE) gets an ACK
    carrying DEFAULT_RESPONSE with return code NULL."""
    t, tid = established_target()
    out = t.feed(req(S, dpdcid=tid, retx=True))
    a = only(acks(out))
    assert a.pds.ack_psn == S and a.pds.next_hdr == NextHeader.RSP
    assert a.ses.opcode == RspOpcode.DEFAULT_RESPONSE and a.ses.return_code == ReturnCode.NULL
    assert len(t.delivered) == 1


def test_ref_3_5_duplicate_with_stored_response_gets_stored_ack():
    """ref 3.5 / 3.7: a duplicate of a packet with a stored (uncleared) response is answered
    with that response again."""
    t = Side(responder=gtd_responder)
    first = only(acks(t.feed(req(S, syn=True, ar=True))))
    assert first.ses.opcode == RspOpcode.RESPONSE
    out = t.feed(req(S, syn=True, retx=True))
    again = only(acks(out))
    assert again.ses == first.ses and again.pds.ack_psn == S and again.pds.flags & AckFlag.RETX
    assert len(t.delivered) == 1


def test_ref_3_7_duplicate_of_unstored_guaranteed_response_is_gtd_resp_unavail():
    """ref 2.6 / 3.7: the response could not be stored (receive memory full) and the PSN is
    not cleared: a duplicate gets GTD_RESP_UNAVAIL."""
    t = Side(responder=gtd_responder, max_rx_memory_bytes=1)
    t.feed(req(S, syn=True, ar=True))
    assert t.ep.counters["gtd_unstored"] == 1
    out = t.feed(req(S, syn=True, retx=True))
    assert nack_codes(out) == [NackCode.GTD_RESP_UNAVAIL]


def test_ref_3_8_duplicate_while_ses_processing_is_rcvd_ses_procg():
    """ref 2.6: a duplicate of a packet the SES has not answered yet -> RCVD_SES_PROCG."""
    t = Side()
    t.ep.receive(0, req(S, syn=True))  # event not taken yet: still with the SES
    t.ep.receive(0, req(S, syn=True, retx=True))
    out = t.control()
    assert NackCode.RCVD_SES_PROCG in nack_codes(out)


def test_ref_3_6_unanswered_request_holds_cack():
    """ref 3.6: a packet whose RequestDelivered event was not taken yet is not covered by
    the CACK (its response may still come)."""
    t = Side()
    t.ep.receive(0, req(S, syn=True, ar=True))
    a = only(acks(t.control())).pds
    assert a.cack_psn == psn_add(S, -1)
    t.drain()
    out = t.control()  # finalised with no response: CACK released, ACK again
    assert only(acks(out)).pds.cack_psn == S


def test_ref_3_6_receive_memory_full_is_no_resource():
    """ref 3.1 limits: a new RUD packet when stored responses fill the receive memory."""
    t = Side(responder=gtd_responder, max_rx_memory_bytes=32)  # one stored response
    t.feed(req(S, syn=True, ar=True))
    assert t.ep.rx_memory == 32
    out = t.feed(req(psn_add(S, 1), syn=True))
    assert nack_codes(out) == [NackCode.NO_RESOURCE]


# ---------------------------------------------------------------------------- ACKs (3.6, 2.4)


def test_ref_3_6_coalescing_every_16_kib():
    """ref 3.6 / htsim anchors: without AR, one ACK per 16 KiB of accepted payload."""
    t, tid = established_target()
    outs = [t.feed(req(psn_add(S, i), dpdcid=tid, payload=bytes(4096))) for i in range(1, 9)]
    assert [len(acks(o)) for o in outs] == [0, 0, 0, 1, 0, 0, 0, 1]
    assert acks(outs[3])[0].pds.ack_psn == psn_add(S, 4)


@pytest.mark.parametrize("trigger", ["ar", "syn", "ecn_ce", "retx"])
def test_ref_3_6_immediate_ack_triggers(trigger):
    """ref 3.6: AR, SYN, ECN-CE and a retransmission are acknowledged at once; ECN-CE is
    echoed in the M flag, RETX in the RETX flag."""
    t, tid = established_target()
    f = req(psn_add(S, 1), syn=trigger == "syn", dpdcid=tid, ar=trigger == "ar",
            retx=trigger == "retx", ecn=3 if trigger == "ecn_ce" else 2)
    a = only(acks(t.feed(f))).pds
    assert a.ack_psn == psn_add(S, 1)
    assert bool(a.flags & AckFlag.M) == (trigger == "ecn_ce")
    assert bool(a.flags & AckFlag.RETX) == (trigger == "retx")


def test_ref_3_6_receiver_ack_timer():
    """htsim anchors ("receiver ACK timer"): a packet that triggers nothing is acknowledged
    ack_timer_ps after it arrived, not later."""
    t, tid = established_target(ack_timer_ps=2 * US)
    t.now = 10 * US
    assert acks(t.feed(req(psn_add(S, 1), dpdcid=tid))) == []
    assert t.ep.next_deadline() == 12 * US
    out = t.advance(12 * US)
    a = only(acks(out))
    assert a.pds.ack_psn == psn_add(S, 1) and t.now == 12 * US
    assert t.ep.counters["ack_timer"] == 1


def test_ref_1_4_ack_echoes_ev_and_uses_control_dscp():
    """ref 1.4 / 6.4: ACKs copy the EV of the packet that triggered them; DSCP 46."""
    t = Side()
    a = only(acks(t.feed(req(S, syn=True, ev=0xBEEF))))
    assert a.ev == 0xBEEF and a.dscp == 46 and a.src_ip == t.ep.local_ip and a.dst_ip == A_IP


def test_ref_2_4_sack_bitmap_contents_and_mpr():
    """ref 2.4: base = CACK + 1, bit i = PSN base + i (bit 0 = LSB), mpr = MP_RANGE / 128;
    PSNs below the window read as received."""
    t = Side(mp_range=256)
    for k in (0, 2, 3, 5, 70):
        t.feed(req(psn_add(S, k), syn=True))
    a = only(acks(t.feed(req(psn_add(S, 6), syn=True, ar=True)))).pds
    assert isinstance(a, PdsAckCc) and a.type == PdsType.ACK_CC
    assert a.cack_psn == S and a.sack_base == psn_add(S, 1)
    assert a.sack_bitmap == 0b110110  # S+2, S+3, S+5, S+6 (S+70 is beyond 64 bits)
    assert a.mpr == 2 and a.rcvd_bytes == 6 * 64  # NullReceiverCongestion fills the state
    assert a.ooo_count == 5


def test_ref_2_3_plain_ack_when_configured():
    """ref 2.3: ack_type 'ack' sends the 12-byte ACK (no SACK / CC state)."""
    t = Side(ack_type="ack")
    a = only(acks(t.feed(req(S, syn=True))))
    assert type(a.pds) is PdsAck and a.pds.cack_psn == S


def test_ref_4_7_response_with_data_rides_in_its_ack():
    """ref 4.7: an SES response with data goes in the ACK of its packet (next_hdr 5)."""
    rsp = SesResponseData(return_code=ReturnCode.OK, job_id=7, payload_length=100)
    t = Side(responder=lambda ev: (rsp, b"D" * 100))
    a = only(acks(t.feed(req(S, syn=True))))
    assert a.pds.next_hdr == NextHeader.RSP_DATA and a.ses is rsp and a.payload == b"D" * 100
    assert a.pds.ack_psn == S


# ---------------------------------------------------------------------------- ACK_REQ (3.8)


def test_ref_3_8_ack_req_answers():
    """ref 3.8 / 2.7: ACK_REQ for a received PSN -> its (stored) ACK; never received ->
    PKT_NOT_RCVD; SES still processing -> RCVD_SES_PROCG."""
    t = Side(responder=gtd_responder)
    first = only(acks(t.feed(req(S, syn=True))))
    out = t.feed(cp(CtlType.ACK_REQ, S, syn=True))
    again = only(acks(out))
    assert again.pds.ack_psn == S and again.ses == first.ses
    assert again.pds.flags & AckFlag.RETX
    tid = first.pds.spdcid
    assert nack_codes(t.feed(cp(CtlType.ACK_REQ, psn_add(S, 5), dpdcid=tid))) == [
        NackCode.PKT_NOT_RCVD]
    t.ep.receive(t.now, req(psn_add(S, 1), dpdcid=tid))  # not taken by the SES yet
    t.ep.receive(t.now, cp(CtlType.ACK_REQ, psn_add(S, 1), dpdcid=tid))
    assert NackCode.RCVD_SES_PROCG in nack_codes(t.control())


def test_ref_2_7_probe_answered_with_p_flag_and_opaque():
    """ref 2.7 / 2.3: PROBE -> ACK with P=1 echoing probe_opaque, SACK from the payload."""
    t, tid = established_target()
    t.feed(req(psn_add(S, 2), dpdcid=tid))
    t.advance(5 * US)
    out = t.feed(cp(CtlType.PROBE, psn_add(S, 1), dpdcid=tid, probe_opaque=0xABCD,
                    payload=psn_add(S, 1)))
    a = only(acks(out)).pds
    assert a.flags & AckFlag.P and (a.ack_psn_offset & 0xFFFF) == 0xABCD
    assert a.cack_psn == S and a.sack_base == psn_add(S, 1) and a.sack_bitmap & 0b10


# ---------------------------------------------------------------------------- clear (3.7)


def test_ref_3_7_stored_response_holds_cack_until_cleared():
    """ref 3.6 / 3.7: CACK stays below a packet with an uncleared guaranteed response; the
    ACK asks for a clear (REQ=1); a request with a higher clear PSN releases it."""
    t = Side(responder=lambda ev: GTD if ev.psn == S else None)
    a0 = only(acks(t.feed(req(S, syn=True)))).pds
    assert a0.cack_psn == psn_add(S, -1) and a0.req == 1  # REQ = clear
    a1 = only(acks(t.feed(req(psn_add(S, 1), syn=True, ar=True)))).pds
    assert a1.cack_psn == psn_add(S, -1) and a1.sack_bitmap & 0b11 == 0b11
    a2 = only(acks(t.feed(req(psn_add(S, 2), syn=True, ar=True, clear=S)))).pds
    assert a2.cack_psn == psn_add(S, 2) and a2.req == 0
    assert t.ep.rx_memory == 0


def test_ref_3_7_clear_cp_releases_stored_responses():
    """ref 3.7 / 2.7: a CLEAR control packet (payload = clear PSN) discards stored responses
    and the target re-acknowledges with the released CACK."""
    t = Side(responder=gtd_responder)
    tid = only(acks(t.feed(req(S, syn=True)))).pds.spdcid
    out = t.feed(cp(CtlType.CLEAR, 0, dpdcid=tid, payload=S))
    assert only(acks(out)).pds.cack_psn == S and t.ep.rx_memory == 0


def test_ref_3_7_clear_req_sent_when_stored_responses_wait():
    """ref 3.7 / 2.7: responses waiting clear_req_ps without a clear -> CLEAR_REQ CP."""
    t = Side(responder=gtd_responder, clear_req_ps=50 * US)
    t.feed(req(S, syn=True))
    out = t.advance(50 * US)
    c = only(out).pds
    assert c.ctl_type == CtlType.CLEAR_REQ and c.payload == S and c.dpdcid == INI_ID


def test_ref_3_7_clear_req_repeats_with_a_doubling_interval_until_cleared():
    """ref 3.7: while nothing is cleared the CLEAR_REQ repeats at 1, 2, 4, ... 64 periods
    (a lost CLEAR cannot stall the PDC, and an initiator that cannot clear yet is not
    flooded); a CLEAR releases the stored response and the CLEAR_REQs stop."""
    t = Side(responder=gtd_responder, clear_req_ps=50 * US, close_idle_ps=0,
             target_idle_ps=0)
    t.feed(req(S, syn=True))
    sent = []
    while t.now < 20_000 * US:
        nxt = t.ep.next_deadline()
        out = t.advance(nxt)
        sent += [t.now for f in out if f.pds.ctl_type == CtlType.CLEAR_REQ]
    gaps = [b - a for a, b in zip(sent, sent[1:], strict=False)]
    assert sent[0] == 50 * US
    assert gaps[:7] == [100 * US, 200 * US, 400 * US, 800 * US, 1600 * US, 3200 * US, 3200 * US]
    t.feed(cp(CtlType.CLEAR, 0, dpdcid=t.ep.pdcs()[0].pdc_id, payload=S))
    assert t.ep.rx_memory == 0
    out = t.advance(t.now + 10_000 * US)
    assert [f for f in out if f.pds.ctl_type == CtlType.CLEAR_REQ] == []


# ---------------------------------------------------------------------------- close (3.9)


def test_ref_3_9_close_acked_then_linger_then_freed():
    """ref 3.9: CLOSE (new PSN) is ACKed and closes the PDC; during MSL a repeated CLOSE
    gets the ACK again and later requests get CLOSING; after MSL the ID is free
    (INV_DPDCID)."""
    t, tid = established_target(msl_ps=100 * US)
    out = t.feed(cp(CtlType.CLOSE, psn_add(S, 1), dpdcid=tid, flags=0x08))
    a = only(acks(out)).pds
    assert a.ack_psn == psn_add(S, 1) and a.cack_psn == psn_add(S, 1)
    assert t.closed[0].error is False and t.ep.counters["closed"] == 1
    assert t.ep.pdc(tid).state == PdcState.CLOSED
    again = only(acks(t.feed(cp(CtlType.CLOSE, psn_add(S, 1), dpdcid=tid, flags=0x18))))
    assert again.pds.ack_psn == psn_add(S, 1)
    assert nack_codes(t.feed(req(psn_add(S, 2), dpdcid=tid))) == [NackCode.CLOSING]
    dup = only(acks(t.feed(req(S, dpdcid=tid, retx=True))))
    assert dup.ses.opcode == RspOpcode.DEFAULT_RESPONSE
    t.advance(t.now + 101 * US)
    assert t.ep.pdc(tid) is None
    assert nack_codes(t.feed(req(psn_add(S, 2), dpdcid=tid))) == [NackCode.INV_DPDCID]


def test_ref_3_9_idle_target_requests_close_then_closes_in_error():
    """ref 3.9: the target asks for a close (CLOSE_REQ CP, and REQ=2 in ACKs); without a
    CLOSE within Close_REQ_Time it closes in error, answering CLOSING_IN_ERR afterwards."""
    t, tid = established_target(target_idle_ps=100 * US, close_req_time_ps=300 * US,
                                rto_ps=1000 * US)
    out = t.advance(100 * US)
    c = only(out).pds
    assert c.ctl_type == CtlType.CLOSE_REQ and c.flags & 0x08
    a = only(acks(t.feed(req(S, dpdcid=tid, retx=True)))).pds
    assert a.req == 2  # REQ = close
    t.advance(100 * US + 300 * US)
    assert t.closed and t.closed[0].error and t.ep.counters["closed_in_error"] == 1
    assert nack_codes(t.feed(req(psn_add(S, 1), dpdcid=tid))) == [NackCode.CLOSING_IN_ERR]


@pytest.mark.parametrize("missing", ["gap", "partial message", "rod buffer"])
def test_ref_3_9_target_waits_longer_before_asking_to_close_while_packets_are_missing(missing):
    """ref 3.9 (docs/pds.md "Close"): while the initiator evidently owes packets (a gap
    below the highest PSN received, a message without its EOM packet, ROD packets waiting
    for the gap) its RTO may be backed off beyond target_idle_ps: the target gives it a
    Close_REQ_Time more before the CLOSE_REQ, so a live initiator is not closed in error,
    and a vanished one still is, later. Nothing missing: CLOSE_REQ at target_idle_ps."""
    cfg = dict(target_idle_ps=100 * US, close_req_time_ps=300 * US, rto_ps=1000 * US)
    ptype = PdsType.ROD_REQ if missing == "rod buffer" else PdsType.RUD_REQ
    t = Side(**cfg)
    if missing == "partial message":
        t.feed(req(S, syn=True, ar=True, eom=False))
    else:
        t.feed(req(S, syn=True, ar=True, ptype=ptype),
               req(psn_add(S, 2), syn=True, ptype=ptype))
    assert t.ep.pdcs()[0].awaiting_initiator()
    assert cps(t.advance(399 * US), CtlType.CLOSE_REQ) == []
    assert only(cps(t.advance(400 * US), CtlType.CLOSE_REQ))
    assert not t.closed
    # nothing missing: asked at the idle time
    u = Side(**cfg)
    u.feed(req(S, syn=True, ar=True, ptype=ptype))
    assert not u.ep.pdcs()[0].awaiting_initiator()
    assert only(cps(u.advance(100 * US), CtlType.CLOSE_REQ))


# ---------------------------------------------------------------------------- ROD (3.10)


def test_ref_3_10_rod_delivers_in_psn_order():
    """ref 3.10: ROD hands packets to the SES in strict PSN order (reorder buffer), while
    SACKing buffered ones."""
    t = Side()
    order = [0, 3, 2, 1, 4]
    for k in order:
        t.feed(req(psn_add(S, k), syn=True, ptype=PdsType.ROD_REQ))
    assert [e.psn for e in t.delivered] == [psn_add(S, k) for k in range(5)]
    assert all(e.mode == DeliveryMode.ROD for e in t.delivered)


def test_ref_3_10_rod_buffer_full_nacks_rod_ooo():
    """ref 3.10 (choice, docs/pds.md): when the per-PDC reorder buffer is full an
    out-of-order ROD packet is NACKed ROD_OOO (retransmitted later), not marked received."""
    t = Side(rod_buffer_packets=2)
    t.feed(req(S, syn=True, ptype=PdsType.ROD_REQ))
    for k in (2, 3):
        assert nack_codes(t.feed(req(psn_add(S, k), syn=True, ptype=PdsType.ROD_REQ))) == []
    out = t.feed(req(psn_add(S, 4), syn=True, ptype=PdsType.ROD_REQ))
    assert nack_codes(out) == [NackCode.ROD_OOO]
    t.feed(req(psn_add(S, 1), syn=True, ptype=PdsType.ROD_REQ))
    assert [e.psn for e in t.delivered] == [psn_add(S, k) for k in range(4)]
    out = t.feed(req(psn_add(S, 4), syn=True, ptype=PdsType.ROD_REQ, retx=True))
    assert nack_codes(out) == [] and len(t.delivered) == 5


def test_ref_3_10_rod_receive_memory_full_is_no_pkt_buffer():
    """ref 3.1 limits: ROD packet that cannot be buffered for lack of memory."""
    t = Side(responder=gtd_responder, max_rx_memory_bytes=32)
    t.feed(req(S, syn=True, ptype=PdsType.ROD_REQ))
    out = t.feed(req(psn_add(S, 2), syn=True, ptype=PdsType.ROD_REQ))
    assert nack_codes(out) == [NackCode.NO_PKT_BUFFER]


# ---------------------------------------------------------------------------- NACK fields


def test_ref_2_6_nack_echoes_ev_m_and_retx():
    """ref 2.6 / 1.4: a NACK copies the EV, ECN mark (M) and RETX of the packet it answers,
    with DSCP 46 and NT = 0 for RUD/ROD."""
    t = Side()
    f = req(S, dpdcid=0x4321, retx=True, ecn=3, ev=0x5151)
    n = only(t.feed(f))
    assert n.ev == 0x5151 and n.dscp == 46
    assert n.pds.flags & NackFlag.M and n.pds.flags & NackFlag.RETX
    assert not n.pds.flags & NackFlag.NT


def test_ref_3_8_ses_reject_nacks_and_redelivers():
    """ref 2.6 (NO_SES_MSG_AVAIL) / docs/ses.md: PdsEndpoint.reject NACKs the packet and
    treats it as never received: CACK and SACK exclude it, ACK_REQ gets PKT_NOT_RCVD, and
    its retransmission is delivered to the SES again."""
    refuse = {psn_add(S, 1)}

    def responder(ev):
        if ev.psn in refuse:
            refuse.discard(ev.psn)
            return ("reject", NackCode.NO_SES_MSG_AVAIL)
        return None

    t = Side()
    t.responder = lambda ev: (t.ep.reject(t.now, ev.token, responder(ev)[1]) and None) \
        if ev.psn in refuse else None
    t.feed(req(S, syn=True))
    out = t.feed(req(psn_add(S, 1), syn=True, ecn=3))
    n = only([f for f in out if isinstance(f.pds, PdsNack)]).pds
    assert all(f.pds.ack_psn != psn_add(S, 1) for f in acks(out))  # never named by an ACK
    assert n.nack_code == NackCode.NO_SES_MSG_AVAIL and n.nack_psn == psn_add(S, 1)
    assert n.flags & NackFlag.M and t.ep.counters["ses_rejected"] == 1
    a = only(acks(t.feed(req(psn_add(S, 2), syn=True, ar=True)))).pds
    assert a.cack_psn == S and a.sack_bitmap & 0b11 == 0b10  # S+1 not reported
    assert nack_codes(t.feed(cp(CtlType.ACK_REQ, psn_add(S, 1), syn=True))) == [
        NackCode.PKT_NOT_RCVD]
    a = only(acks(t.feed(req(psn_add(S, 1), syn=True, retx=True)))).pds
    assert a.cack_psn == psn_add(S, 2)
    assert [e.psn for e in t.delivered] == [S, psn_add(S, 1), psn_add(S, 2), psn_add(S, 1)]


def test_ref_3_6_each_ar_packet_gets_its_own_ack_when_several_arrive_before_a_poll():
    """ref 3.6: AR asks for the ACK of that packet (ACK_PSN names it). Three AR packets
    received before the end point is polled (a burst read from one socket) still get three
    ACKs, naming each PSN in arrival order; a packet whose response ACK names it is not
    named twice."""
    t, tid = established_target()
    out = t.feed(*(req(psn_add(S, i), dpdcid=tid, ar=True) for i in (1, 2, 3)))
    assert [a.pds.ack_psn for a in acks(out)] == [psn_add(S, i) for i in (1, 2, 3)]
    assert acks(out)[-1].pds.cack_psn == psn_add(S, 3)
    assert t.ep.counters["ack_ar_coalesced"] == 0

    g = Side(responder=gtd_responder)
    out = g.feed(req(S, syn=True, ar=True), req(psn_add(S, 1), syn=True, ar=True))
    named = [a.pds.ack_psn for a in acks(out)]
    assert sorted(named) == [S, psn_add(S, 1)]
    assert all(a.ses is not None and a.ses.opcode == RspOpcode.RESPONSE for a in acks(out))


def test_ref_3_6_owed_ar_acks_are_bounded():
    """More AR packets before one poll than the coalescer keeps (16 owed): the rest are
    covered by the cumulative ACK and counted, the state stays bounded."""
    t, tid = established_target()
    out = t.feed(*(req(psn_add(S, i), dpdcid=tid, ar=True) for i in range(1, 41)))
    named = [a.pds.ack_psn for a in acks(out)]
    assert named == [psn_add(S, i) for i in range(1, 17)] + [psn_add(S, 40)]
    assert t.ep.counters["ack_ar_coalesced"] == 40 - 17
    assert acks(out)[-1].pds.cack_psn == psn_add(S, 40)
