"""Conformance of the initiator side: scripted ACKs/NACKs/CPs in, exact packets out.

One test per rule; each docstring cites the topic it checks ("ref 3.2": docs/references.md,
which names the public source).
"""

from __future__ import annotations

import random

import pytest
from pds_harness import A_IP, B_IP, MS, US, request
from pds_script import Side, ack, cps, nack, only

from uet.pds import PdcState, PdsConfig, PdsEndpoint
from uet.wire.constants import (
    AckFlag,
    CpFlag,
    CtlType,
    DeliveryMode,
    NackAction,
    NackCode,
    PdsType,
    ReqFlag,
    ReturnCode,
    RspOpcode,
    nack_action,
)
from uet.wire.records import PdsControl, PdsRequest, SesResponse, psn_add, psn_diff

TID = 0x0999  # the scripted target's PDC ID


def initiator(**cfg) -> Side:
    cfg.setdefault("fixed_start_psn", 70_000)
    return Side(ip=A_IP, **cfg)


def send(side: Side, n: int, payload: bytes = b"d" * 100, eom_every: int = 1, **kw):
    for i in range(n):
        side.ep.submit(side.now, request(msg_ref=i, payload=payload,
                                         eom=(i + 1) % eom_every == 0, **kw))
    return side.data()


def establish(side: Side, n: int = 1, **kw):
    """Send n packets and ACK them all: the PDC is ESTABLISHED with DPDCID = TID."""
    frames = send(side, n, **kw)
    last = frames[-1].pds.psn
    side.feed(ack(last, last, spdcid=TID, dpdcid=frames[0].pds.spdcid))
    return frames


# ---------------------------------------------------------------------------- establishment


def test_ref_3_2_initiator_sends_syn_with_psn_offset_and_random_start():
    """ref 3.2 (1, 2): random Start_PSN in [2^16, 2^31) from the seeded rng, data at once
    with SYN, SPDCID = own nonzero 16-bit ID, psn_offset = PSN - Start_PSN."""
    ep = PdsEndpoint(PdsConfig(), A_IP, random.Random(42))
    for i in range(3):
        ep.submit(0, request(msg_ref=i))
    frames = [ep.poll_transmit(0, False) for _ in range(3)]
    start = frames[0].pds.psn
    assert (1 << 16) <= start < (1 << 31)
    for i, f in enumerate(frames):
        p = f.pds
        assert isinstance(p, PdsRequest) and p.type == PdsType.RUD_REQ and p.syn
        assert p.psn == start + i and p.psn_offset == i and p.start_psn == start
        assert 0 < p.spdcid <= 0xFFFF and p.spdcid == frames[0].pds.spdcid
        assert f.dscp == 0 and f.src_ip == A_IP and f.dst_ip == B_IP
    # same seed, same choices
    ep2 = PdsEndpoint(PdsConfig(), A_IP, random.Random(42))
    ep2.submit(0, request())
    f2 = ep2.poll_transmit(0, False)
    assert (f2.pds.psn, f2.pds.spdcid) == (start, frames[0].pds.spdcid)


def test_ref_3_2_first_ack_establishes_and_stops_syn():
    """ref 3.2 (4): the first ACK gives the DPDCID; later packets carry it, SYN clear."""
    s = initiator()
    f0 = send(s, 1)[0]
    pdc = s.ep.pdc(f0.pds.spdcid)
    assert pdc.state == PdcState.SYN
    s.feed(ack(f0.pds.psn, f0.pds.psn, spdcid=TID, dpdcid=f0.pds.spdcid))
    assert pdc.state == PdcState.ESTABLISHED and pdc.dpdcid == TID
    f1 = send(s, 1)[0]
    assert not f1.pds.syn and f1.pds.dpdcid == TID and f1.pds.psn == psn_add(f0.pds.psn, 1)
    assert s.acked[0].msg_ref == 0


def test_ref_3_2_syn_state_window_is_4096_packets():
    """ref 3.2 (2): psn_offset is 12 bits, so at most 4096 packets leave in SYN state."""
    s = initiator(mp_range=4224, max_inflight_packets=8000)
    frames = send(s, 4100, payload=b"")
    assert len(frames) == 4096 and frames[-1].pds.psn_offset == 4095
    assert s.ep.counters["blocked.syn"] >= 1
    s.feed(ack(frames[0].pds.psn, frames[0].pds.psn, spdcid=TID, dpdcid=frames[0].pds.spdcid,
               mpr=4224 // 128))
    more = s.data()
    assert len(more) == 4 and not more[0].pds.syn


def test_ref_3_2_new_start_psn_rebases_and_resends():
    """ref 3.2: NEW_START_PSN in SYN state shifts every PSN to the new Start_PSN and resends
    the outstanding packets."""
    s = initiator()
    frames = send(s, 3)
    sp = frames[0].pds.spdcid
    s.feed(nack(NackCode.NEW_START_PSN, frames[0].pds.psn, spdcid=0, dpdcid=sp,
                payload=9_000_000))
    again = s.data()
    assert [f.pds.psn for f in again] == [9_000_000, 9_000_001, 9_000_002]
    assert all(f.pds.syn and f.pds.start_psn == 9_000_000 for f in again)
    assert s.ep.counters["retx.nack.NEW_START_PSN"] == 3


def test_ref_3_1_pdc_ids_skip_lingering_ids():
    """ref 3.1 / 3.5.8.2: IDs are 16-bit, 0 reserved; an ID still lingering is not reused."""

    class Rigged(random.Random):
        def __init__(self):
            super().__init__(1)
            self.forced = []

        def randrange(self, a, b=None, step=1):
            if self.forced:
                return self.forced.pop(0)
            return super().randrange(a, b, step)

    rng = Rigged()
    ep = PdsEndpoint(PdsConfig(fixed_start_psn=5000, close_idle_ps=10 * US), A_IP, rng)
    rng.forced = [777]
    ep.submit(0, request())
    f = ep.poll_transmit(0, False)
    assert f.pds.spdcid == 777
    ep.receive(0, ack(5000, 5000, spdcid=TID, dpdcid=777))
    ep.handle_timer(10 * US)  # idle: CLOSE
    close = ep.poll_transmit(10 * US, True)
    assert close.pds.ctl_type == CtlType.CLOSE
    ep.receive(11 * US, ack(5001, 5001, spdcid=TID, dpdcid=777))
    assert ep.pdc(777).state == PdcState.CLOSED  # lingering
    rng.forced = [777, 778]
    ep.submit(12 * US, request())
    assert ep.poll_transmit(12 * US, False).pds.spdcid == 778


# ---------------------------------------------------------------------------- window (3.5)


def test_ref_3_5_initiator_window_bounded_by_own_bitmap_and_peer_mpr():
    """ref 3.5: never more than max_inflight_packets outstanding, never a PSN beyond
    max CACK + the peer's MP_RANGE (mpr x 128)."""
    s = initiator(max_inflight_packets=1000, mp_range=128)
    frames = establish(s, 1)
    sp = frames[0].pds.spdcid
    first = send(s, 400)
    assert len(first) == 128  # peer MPR assumed = own MP_RANGE (128) before learning
    cack = frames[0].pds.psn
    s.feed(ack(cack, cack, spdcid=TID, dpdcid=sp, mpr=2))  # advertises 256
    assert len(s.data()) == 128
    s2 = initiator(max_inflight_packets=10)
    establish(s2, 1)
    assert len(send(s2, 50)) == 10


def test_ref_3_4_psn_wraparound():
    """ref 3.4: PSNs are 32-bit serial numbers; a PDC starting just below 2^32 wraps and
    everything (SYN offsets, CACK, SACK, clear offsets) keeps working."""
    from pds_harness import Net, pair

    cfg = PdsConfig(fixed_start_psn=0xFFFFFFF0)
    a, b = pair(cfg, PdsConfig())
    net = Net([a, b], seed=9, jitter=2 * US)
    for i in range(40):
        a.ep.submit(0, request(msg_ref=i, eom=i % 8 == 7))
    net.run()
    psns = sorted((e.psn for e in b.delivered), key=lambda p: psn_diff(p, 0xFFFFFFF0))
    assert psns == [(0xFFFFFFF0 + i) & 0xFFFFFFFF for i in range(40)]
    assert sorted(e.msg_ref for e in a.acked) == list(range(40))
    assert a.closed and not a.closed[0].error


# ---------------------------------------------------------------------------- clear (3.7)


def test_ref_3_7_clear_psn_is_lowest_unacked_minus_one():
    """ref 3.7: every request carries Clear_PSN = lowest un-ACKed PSN - 1."""
    s = initiator()
    frames = send(s, 4)
    base = frames[0].pds.psn
    assert [f.pds.clear_psn for f in frames] == [psn_add(base, -1)] * 4
    sp = frames[0].pds.spdcid
    s.feed(ack(psn_add(base, 1), psn_add(base, 1), spdcid=TID, dpdcid=sp))
    f = send(s, 1)[0]
    assert f.pds.clear_psn == psn_add(base, 1)


def test_ref_3_7_clear_request_answered_with_clear_cp():
    """ref 3.7 / 2.3: ACK with REQ=1 while idle -> CLEAR CP, payload = clear PSN; a
    CLEAR_REQ CP is answered the same way."""
    s = initiator(close_idle_ps=0)
    frames = send(s, 1)
    p0 = frames[0].pds.psn
    out = s.feed(ack(p0, p0, spdcid=TID, dpdcid=frames[0].pds.spdcid, flags=0x02))
    c = only(cps(out)).pds
    assert c.ctl_type == CtlType.CLEAR and c.payload == p0 and c.dpdcid == TID
    req_cp = PdsControl(ctl_type=CtlType.CLEAR_REQ, psn=p0, spdcid=TID,
                        dpdcid=frames[0].pds.spdcid, payload=p0)
    from uet.wire.records import Frame
    out = s.feed(Frame(pds=req_cp, src_ip=B_IP, dst_ip=A_IP))
    assert only(cps(out)).pds.ctl_type == CtlType.CLEAR


def test_ref_3_7_response_in_ack_reaches_ses_once():
    """ref 3.6 / 4.7: the SES response in an ACK belongs to ack_psn; a repeated ACK with the
    same response does not produce a second ResponseReceived."""
    s = initiator()
    frames = send(s, 2)
    p0, sp = frames[0].pds.psn, frames[0].pds.spdcid
    rsp = SesResponse(opcode=RspOpcode.RESPONSE, return_code=ReturnCode.OK, job_id=7)
    a = ack(psn_add(p0, -1), p0, spdcid=TID, dpdcid=sp, ses=rsp)
    s.feed(a)
    s.feed(ack(psn_add(p0, -1), p0, spdcid=TID, dpdcid=sp, ses=rsp))
    assert [(r.msg_ref, r.psn) for r in s.responses] == [(0, p0)]
    assert [x.msg_ref for x in s.acked] == [0]


# ---------------------------------------------------------------------------- retransmission


def test_ref_3_8_sack_gap_retransmits_only_the_gap_after_three():
    """ref 3.8: with sack_dupthresh = 3 (the count rule, RACK off), a PSN not SACKed while
    3 later PSNs were is retransmitted alone, same PSN, RETX|AR set; never go-back-N."""
    s = initiator(sack_dupthresh=3, rack=False)
    frames = send(s, 8)
    p0, sp = frames[0].pds.psn, frames[0].pds.spdcid
    # p0+1 lost; p0+2, p0+3 SACKed: only two later -> nothing yet
    s.feed(ack(p0, psn_add(p0, 3), spdcid=TID, dpdcid=sp, bitmap=0b110))
    assert s.data() == []
    s.feed(ack(p0, psn_add(p0, 4), spdcid=TID, dpdcid=sp, bitmap=0b1110))
    again = s.data()
    assert [f.pds.psn for f in again] == [psn_add(p0, 1)]
    assert again[0].pds.flags & (ReqFlag.RETX | ReqFlag.AR) == ReqFlag.RETX | ReqFlag.AR
    assert s.ep.counters["retx.sack"] == 1


def test_ref_3_8_sack_threshold_is_configurable():
    """ref 3.8: sack_dupthresh = N (here 1)."""
    s = initiator(sack_dupthresh=1, rack=False)
    frames = send(s, 3)
    p0, sp = frames[0].pds.psn, frames[0].pds.spdcid
    s.feed(ack(p0, psn_add(p0, 2), spdcid=TID, dpdcid=sp, bitmap=0b10))
    assert [f.pds.psn for f in s.data()] == [psn_add(p0, 1)]


# TRIMMED_ACK travels the other way: the initiator sends it about a trimmed ACK, and the
# target resends that ACK (tests/pds/test_formats.py)
RETRANSMIT_NOW = sorted(c for c in NackCode if nack_action(c) == NackAction.RETRANSMIT
                        and c not in (NackCode.NO_PDC_AVAIL, NackCode.NO_CCC_AVAIL,
                                      NackCode.NO_BITMAP, NackCode.NO_PKT_BUFFER,
                                      NackCode.NO_GTD_DEL_AVAIL, NackCode.NO_SES_MSG_AVAIL,
                                      NackCode.NO_RESOURCE, NackCode.TRIMMED_ACK))
RESOURCE = [NackCode.NO_PDC_AVAIL, NackCode.NO_CCC_AVAIL, NackCode.NO_BITMAP,
            NackCode.NO_PKT_BUFFER, NackCode.NO_GTD_DEL_AVAIL, NackCode.NO_SES_MSG_AVAIL,
            NackCode.NO_RESOURCE]
CLOSE_CODES = sorted(c for c in NackCode if nack_action(c) == NackAction.CLOSE_PDC)


@pytest.mark.parametrize("code", RETRANSMIT_NOW, ids=lambda c: NackCode(c).name)
def test_ref_2_6_retransmit_nack_resends_that_psn(code):
    """ref 2.6 / 3.8: "retransmit" NACK codes resend the NACKed PSN at once (RETX|AR)."""
    s = initiator()
    frames = establish(s, 1) + send(s, 3)
    p = frames[2].pds.psn
    s.feed(nack(code, p, spdcid=TID, dpdcid=frames[0].pds.spdcid))
    again = s.data()
    assert [f.pds.psn for f in again] == [p] and again[0].pds.retx
    assert s.ep.counters[f"retx.nack.{NackCode(code).name}"] == 1
    assert s.ep.counters[f"nack_rx.{NackCode(code).name}"] == 1


@pytest.mark.parametrize("code", RESOURCE, ids=lambda c: NackCode(c).name)
def test_ref_2_6_resource_nack_retransmits_at_rto(code):
    """ref 2.6 (choice, docs/pds.md): resource-shortage NACKs are retransmitted when the
    packet's RTO expires (counted against the retry limit), not at once."""
    s = initiator(rto_ps=100 * US)
    frames = send(s, 1)
    s.feed(nack(code, frames[0].pds.psn, spdcid=0, dpdcid=frames[0].pds.spdcid))
    assert s.data() == []
    s.advance(100 * US)
    again = s.data()
    assert [f.pds.psn for f in again] == [frames[0].pds.psn] and again[0].pds.retx


@pytest.mark.parametrize("code", CLOSE_CODES, ids=lambda c: NackCode(c).name)
def test_ref_2_6_close_nack_closes_pdc_in_error(code):
    """ref 2.6 / 3.9: "close PDC" codes close the PDC in error; MessageFailed names every
    message with packets outstanding or queued."""
    s = initiator(max_inflight_packets=2)
    frames = send(s, 4)
    assert len(frames) == 2
    s.feed(nack(code, frames[1].pds.psn, spdcid=0, dpdcid=frames[0].pds.spdcid))
    assert sorted(f.msg_ref for f in s.failed) == [0, 1, 2, 3]
    assert s.closed[0].error and s.ep.counters["closed_in_error"] == 1
    assert s.ep.pdc(frames[0].pds.spdcid).state == PdcState.ERROR


def test_ref_2_6_rcvd_ses_procg_is_ignored():
    """ref 2.6: RCVD_SES_PROCG is dropped (the RTO retries later)."""
    s = initiator()
    frames = send(s, 1)
    s.feed(nack(NackCode.RCVD_SES_PROCG, frames[0].pds.psn, spdcid=0,
                dpdcid=frames[0].pds.spdcid))
    assert s.data() == [] and not s.failed


def test_ref_2_6_nack_outside_window_is_ignored():
    """ref 2.6: NACKs for PSNs not outstanding are ignored."""
    s = initiator()
    frames = send(s, 1)
    s.feed(nack(NackCode.INV_DPDCID, psn_add(frames[0].pds.psn, 50), spdcid=0,
                dpdcid=frames[0].pds.spdcid))
    assert not s.failed and s.ep.counters["nack_rx_stale"] == 1


def test_ref_3_8_rto_backoff_and_retry_limit():
    """ref 3.8: RTO per packet (default 5 ms), exponential backoff, RETX|AR; after
    max_retries the PDC closes in error and MessageFailed names the message."""
    s = initiator(max_retries=3)
    f0 = send(s, 1)[0]
    times = []
    for _ in range(3):
        s.advance(s.ep.next_deadline())
        again = s.data()
        assert [f.pds.psn for f in again] == [f0.pds.psn] and again[0].pds.retx
        times.append(s.now)
    assert times == [5 * MS, 15 * MS, 35 * MS]
    s.advance(s.ep.next_deadline())
    assert [m.msg_ref for m in s.failed] == [0]
    assert "retry limit" in s.failed[0].reason and s.closed[0].error
    assert s.ep.counters["retx.rto"] == 3


def test_ref_3_8_ack_req_when_sacked_but_ack_missing():
    """ref 3.8: a packet the SACK showed arrived is never sent again; when its RTO expires
    an ACK_REQ CP for its PSN goes instead."""
    s = initiator(rto_ps=100 * US)
    frames = send(s, 3)
    p0, sp = frames[0].pds.psn, frames[0].pds.spdcid
    # CACK held below p0 (e.g. a lost response ACK) but p0..p0+2 reported received
    s.feed(ack(psn_add(p0, -1), psn_add(p0, 2), spdcid=TID, dpdcid=sp, bitmap=0b11,
               sack_base=p0))
    out = s.advance(100 * US)
    reqs = [f.pds for f in cps(out, CtlType.ACK_REQ)]
    assert [c.psn for c in reqs] == [p0, psn_add(p0, 1)]  # p0+2 was ack_psn: released
    assert all(c.dpdcid == TID and not c.syn for c in reqs)
    assert s.data() == []
    assert s.ep.counters["retx.ack_req"] >= 1


def test_ref_3_8_ooo_count_loss_inference():
    """ref 3.8 (htsim): with ooo_loss_threshold set, an ACK_CC whose ooo_count reaches it
    retransmits the un-SACKed PSNs below the highest SACKed one, once per recovery."""
    s = initiator(ooo_loss_threshold=2, rack=False)
    frames = send(s, 6)
    p0, sp = frames[0].pds.psn, frames[0].pds.spdcid
    a = ack(p0, psn_add(p0, 4), spdcid=TID, dpdcid=sp, bitmap=0b1010)  # p0+2, p0+4
    a.pds.ooo_count = 2
    s.feed(a)
    assert sorted(f.pds.psn for f in s.data()) == [psn_add(p0, 1), psn_add(p0, 3)]
    assert s.ep.counters["retx.ooo"] == 2


def test_ref_2_7_probe_after_silence():
    """ref 2.7 / 3.8: with probe_after_ps set, a PDC with packets outstanding and no ACK for
    that long sends a PROBE CP (payload = SACK base wanted, opaque counter)."""
    s = initiator(probe_after_ps=50 * US)
    frames = send(s, 2)
    out = s.advance(50 * US)
    c = only(cps(out, CtlType.PROBE)).pds
    assert c.payload == frames[0].pds.psn and c.probe_opaque == 1 and c.syn
    # a probe ACK (P=1) reporting both received releases them
    p1 = frames[1].pds.psn
    pa = ack(p1, p1, spdcid=TID, dpdcid=frames[0].pds.spdcid, flags=AckFlag.P)
    pa.pds.ack_psn_offset = 1
    s.feed(pa)
    assert len(s.acked) == 2


# ---------------------------------------------------------------------------- close (3.9)


def test_ref_3_9_initiator_closes_when_idle():
    """ref 3.9: idle and all ACKed for close_idle_ps -> CLOSE CP with AR on a new PSN; the
    ACK of that PSN closes the PDC (PdcClosed, error False), which then lingers."""
    s = initiator(close_idle_ps=20 * US)
    frames = establish(s, 2)
    out = s.advance(20 * US)
    c = only(cps(out, CtlType.CLOSE)).pds
    assert c.flags & CpFlag.AR and c.psn == psn_add(frames[1].pds.psn, 1)
    assert c.dpdcid == TID and not c.flags & CpFlag.ISROD
    sp = frames[0].pds.spdcid
    assert s.ep.pdc(sp).state == PdcState.CLOSING
    s.feed(ack(c.psn, c.psn, spdcid=TID, dpdcid=sp))
    assert s.closed and not s.closed[0].error and s.ep.pdc(sp).state == PdcState.CLOSED
    # a new request opens a new PDC
    f = send(s, 1)[0]
    assert f.pds.syn and f.pds.spdcid != sp


@pytest.mark.parametrize("how", ["ack_req_bit", "close_req_cp"])
def test_ref_3_9_target_requested_close(how):
    """ref 3.9: ACK REQ=2 or a CLOSE_REQ CP makes the initiator close once idle."""
    s = initiator(close_idle_ps=0)
    frames = send(s, 1)
    p0, sp = frames[0].pds.psn, frames[0].pds.spdcid
    if how == "ack_req_bit":
        out = s.feed(ack(p0, p0, spdcid=TID, dpdcid=sp, flags=0x04))
    else:
        s.feed(ack(p0, p0, spdcid=TID, dpdcid=sp))
        from uet.wire.records import Frame
        out = s.feed(Frame(pds=PdsControl(ctl_type=CtlType.CLOSE_REQ, psn=0, spdcid=TID,
                                          dpdcid=sp), src_ip=B_IP, dst_ip=A_IP))
    c = only(cps(out, CtlType.CLOSE)).pds
    assert c.psn == psn_add(p0, 1)


def test_ref_3_9_close_retransmitted_then_fails():
    """ref 3.9: the CLOSE is tracked like data (RTO, retries); without its ACK the PDC
    closes in error."""
    s = initiator(close_idle_ps=10 * US, rto_ps=100 * US, max_retries=1)
    establish(s, 1)
    first = cps(s.advance(10 * US), CtlType.CLOSE)
    assert len(first) == 1
    again = cps(s.advance(10 * US + 100 * US), CtlType.CLOSE)
    assert len(again) == 1 and again[0].pds.flags & CpFlag.RETX
    s.advance(10 * MS)
    assert s.closed and s.closed[0].error


def test_ref_3_10_rod_uses_one_ev_and_isrod_flag():
    """ref 3.10 / 6.4 / 2.7: ROD PDCs keep one EV; their CPs set isROD."""
    evs = iter(range(100, 200))

    from uet.cms.api import NullSenderCongestion

    def factory(mode):
        assert mode == DeliveryMode.ROD
        c = NullSenderCongestion()
        c.choose_ev = lambda now: next(evs)
        return c

    ep = PdsEndpoint(PdsConfig(probe_after_ps=10 * US), A_IP, random.Random(3),
                     sender_cc=factory)
    for i in range(5):
        ep.submit(0, request(msg_ref=i, mode=DeliveryMode.ROD))
    frames = [ep.poll_transmit(0, False) for _ in range(5)]
    assert {f.ev for f in frames} == {frames[0].ev}
    assert all(f.pds.type == PdsType.ROD_REQ for f in frames)
    ep.handle_timer(10 * US)
    probe = ep.poll_transmit(10 * US, True)
    assert probe.pds.flags & CpFlag.ISROD


def test_ref_2_2_cc_request_types_carry_credit_target():
    """ref 2.2: cc_requests sends RUD_CC_REQ; credit_target comes from the CC's credit
    interface (``rccc``, uet.cms.api.CreditSender), 0 for a CC without credit."""
    from uet.cms.api import NullSenderCongestion

    class Credit(NullSenderCongestion):
        def __init__(self):
            super().__init__()
            self.rccc = self

        def credit_target(self):
            return 12345

        def on_backlog(self, now, *, backlog_bytes):
            pass

        def poll_credit_request(self, now):
            return None

        def waiting_for_credit(self):
            return None

    for cc, target in ((NullSenderCongestion(), 0), (Credit(), 12345)):
        ep = PdsEndpoint(PdsConfig(cc_requests=True), A_IP, random.Random(3),
                         sender_cc=lambda mode, cc=cc: cc)
        ep.submit(0, request())
        f = ep.poll_transmit(0, False)
        assert f.pds.type == PdsType.RUD_CC_REQ and f.pds.credit_target == target


def test_ref_4_7_read_data_as_requests_in_the_return_direction():
    """ref 4.7 / docs/ses.md: read data that does not fit an ACK travels as RUD requests
    whose SES header is RSP_DATA (next_hdr 5); the peer delivers them as RequestDelivered."""
    from uet.pds import SendRequest
    from uet.wire.constants import NextHeader
    from uet.wire.records import SesResponseData

    s = initiator()
    rsp = SesResponseData(return_code=ReturnCode.OK, job_id=7, read_request_message_id=3,
                          payload_length=2000, message_offset=4096)
    s.ep.submit(0, SendRequest(B_IP, DeliveryMode.RUD, 7, 0, rsp, None, bytes(2000), None,
                               True))
    f = only(s.data())
    assert f.pds.type == PdsType.RUD_REQ and f.pds.next_hdr == NextHeader.RSP_DATA
    t = Side()
    t.feed(f)
    ev = only(t.delivered)
    assert ev.ses is rsp and len(ev.payload) == 2000


def test_ref_3_7_clear_req_for_an_unacked_psn_asks_for_its_ack():
    """ref 3.7 / 3.8: a CLEAR_REQ naming a PSN whose ACK never came says the target holds
    that packet and its response (the ACK was lost). The initiator asks for the ACK at once
    (ACK_REQ, in the SYN form while the DPDCID is unknown) instead of waiting for its
    backed-off RTO; the data is not resent, and CLEAR_REQs repeated within a base RTO do
    not multiply the ACK_REQs."""
    s = initiator(rto_ps=1 * MS, close_idle_ps=0)
    first = send(s, 1)[0].pds
    p0, sp = first.psn, first.spdcid
    from uet.wire.records import Frame

    def clear_req() -> list:
        cp = PdsControl(ctl_type=CtlType.CLEAR_REQ, psn=p0, spdcid=TID, dpdcid=sp, payload=p0)
        return s.feed(Frame(pds=cp, src_ip=B_IP, dst_ip=A_IP))

    s.now = 500 * US  # within the first RTO: the ACK may still be on its way
    assert cps(clear_req(), CtlType.ACK_REQ) == []
    s.now = 1500 * US  # after the RTO fired
    s.advance(1500 * US)
    assert [f.pds.psn for f in s.data()] == [p0]  # the RTO resent it (nothing SACKed it)
    s.now = 4 * MS
    reqs = [f.pds for f in cps(clear_req(), CtlType.ACK_REQ)]
    assert [c.psn for c in reqs] == [p0] and all(c.syn for c in reqs)
    assert s.ep.counters["retx.clear_req"] == 1
    s.now = 4 * MS + 500 * US
    assert cps(clear_req(), CtlType.ACK_REQ) == []
    assert s.data() == []
    # the stored ACK with the response comes back: the PDC is established, p0 released
    s.feed(ack(p0, p0, spdcid=TID, dpdcid=sp))
    assert s.ep.pdc(sp).state == PdcState.ESTABLISHED and [x.msg_ref for x in s.acked] == [0]


def test_ref_3_8_nack_is_an_rtt_sample_and_a_shrunk_rto_moves_the_timer():
    """ref 3.8 (adaptive RTO): a NACK of a packet sent once is a round-trip sample (Karn),
    so a PDC whose first packets were all trimmed learns its RTT; and when the first sample
    shrinks the RTO from the initial 5 ms, packets sent under the old RTO expire by the new
    one (the timer moves) rather than 5 ms after they left."""
    s = initiator(rto_adaptive=True, rto_ps=5 * MS, min_rto_ps=100 * US)
    frames = send(s, 3)
    p0, sp = frames[0].pds.psn, frames[0].pds.spdcid
    assert s.ep.next_deadline() == 5 * MS
    s.now = 12 * US
    out = s.feed(nack(NackCode.TRIMMED, p0, spdcid=TID, dpdcid=sp))
    assert out == [] and [f.pds.psn for f in s.data()] == [p0]  # trim: resent at once
    assert s.ep.next_deadline() == 100 * US  # srtt 12 us + 4 x 6 us, floored at min_rto
    s.advance(100 * US)
    assert [f.pds.psn for f in s.data()] == [psn_add(p0, 1), psn_add(p0, 2)]
    assert s.ep.counters["retx.rto"] == 2
    # a NACK of a retransmitted copy is not a sample (Karn): the RTO stays
    base = s.ep.pdc(sp).rto.base
    s.now = 150 * US
    s.feed(nack(NackCode.TRIMMED, psn_add(p0, 1), spdcid=TID, dpdcid=sp, flags=AckFlag.RETX))
    assert s.ep.pdc(sp).rto.base == base


def test_ref_3_8_sacked_packets_sent_once_feed_the_rto_estimator():
    """ref 3.8 (adaptive RTO): an ACK that names nothing new (ROD: the target holds the
    packets above a gap and SACKs them; the ACK names the CACK) still gives the RTO
    estimator a round trip from a SACKed packet sent once, so the PDC leaves the 5 ms
    initial RTO and the missing packet is resent after ~100 us, not 5 ms."""
    # RACK off: it would find p0 lost 3 us later; the RTO is what is checked here
    s = initiator(rto_adaptive=True, rto_ps=5 * MS, min_rto_ps=100 * US, rack=False)
    frames = send(s, 2)
    p0, sp = frames[0].pds.psn, frames[0].pds.spdcid
    s.now = 12 * US
    below = psn_add(p0, -1)
    s.feed(ack(below, below, spdcid=TID, dpdcid=sp, sack_base=p0, bitmap=0b10))
    assert s.ep.pdc(sp).rto.base == 100 * US
    assert s.ep.next_deadline() == 100 * US
    s.advance(100 * US)
    assert [f.pds.psn for f in s.data()] == [p0]
