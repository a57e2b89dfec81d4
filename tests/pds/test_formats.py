"""Every packet format and NACK code the PDS sends, each in the situation that calls for it
(issue 20): TRIMMED_ACK, NO_RESPONSE early ACKs, ACK_WITH_DATA, NO_GTD_DEL_AVAIL,
NO_CCC_AVAIL, NO_BITMAP, UNEXP_EVENT, RCVR_INFER_LOSS, NEW_START_PSN for a reused PDC key,
plain ACKs of closed PDCs, PROBE, NOOP keepalives, NEGOTIATION, ACK_CCX / NACK_CCX, and the
RUDI NACK with NT for a trimmed response."""

from __future__ import annotations

import random

from pds_harness import A_IP, B_IP, MS, US, Net, pair, request
from pds_script import S, Side, ack, acks, cp, established_target, nack, nack_codes, only, req

from uet.cms.api import CmsConfig
from uet.cms.ccx import TELEMETRY_V1, TelemetrySender, parse_ack_state
from uet.cms.factory import make_receiver, make_sender
from uet.pds import PdsConfig, PdsEndpoint
from uet.pds import negotiation as neg
from uet.pds.events import PeerNegotiated
from uet.wire.constants import (
    AckFlag,
    CtlType,
    DeliveryMode,
    NackCode,
    NackFlag,
    PdsType,
    ReturnCode,
    RspOpcode,
)
from uet.wire.records import (
    PdsAck,
    PdsAckCc,
    PdsControl,
    PdsNack,
    PdsRudi,
    SesResponse,
    SesResponseData,
    psn_add,
)

TRIMMED = 12


def _rsp(ev, opcode=RspOpcode.RESPONSE, rc=ReturnCode.OK):
    return SesResponse(opcode=opcode, return_code=rc, message_id=1, job_id=7)


def _read_responder(ev):
    """Answers every request as a 256-byte READ: RESPONSE_W_DATA in the ACK."""
    data = bytes(range(256))
    return (SesResponseData(opcode=RspOpcode.RESPONSE_W_DATA, return_code=ReturnCode.OK,
                            message_id=1, job_id=7, payload_length=256,
                            modified_length=256), data)


class TrimNet(Net):
    """A channel whose switch trims the first ``n`` ACKs carrying data (payload cut, DSCP
    rewritten to the trimmed code point), as a congested fabric does to data-class
    frames."""

    def __init__(self, hosts, n: int = 1, **kw) -> None:
        super().__init__(hosts, **kw)
        self.to_trim = n
        self.trimmed = 0

    def _put(self, frame) -> None:
        if self.to_trim and frame.payload and (
                isinstance(frame.pds, (PdsAck, PdsAckCc))
                or frame.pds.type == PdsType.RUDI_RESP):
            assert frame.dscp == 0  # read data travels in the data class (dscp_data)
            self.to_trim -= 1
            self.trimmed += 1
            frame.payload = b""
            frame.dscp = TRIMMED
        super()._put(frame)


# ---------------------------------------------------------------------------- TRIMMED_ACK

def test_trimmed_ack_is_nacked_and_the_ack_resent_with_its_data():
    a, b = pair(responder=_read_responder)
    net = TrimNet([a, b], n=1)
    a.ep.submit(0, request(msg_ref="read", eom=True))
    net.run(until=200 * US)
    assert net.trimmed == 1
    nacks = net.frames(PdsNack, src=A_IP)
    assert [n.pds.nack_code for n in nacks] == [NackCode.TRIMMED_ACK]
    n = nacks[0].pds
    assert n.spdcid != 0 and n.dpdcid != 0 and not n.flags & NackFlag.NT
    assert a.ep.counters["trimmed_ack_rx"] == 1 and a.ep.counters["nack_tx.TRIMMED_ACK"] == 1
    assert b.ep.counters["retx.trimmed_ack"] == 1
    # the response reached the SES exactly once, with the data, and only then the packet
    assert [r.payload for r in a.responses] == [bytes(range(256))]
    assert [e.msg_ref for e in a.acked] == ["read"]
    data_acks = [f for f in net.frames(PdsAckCc, src=B_IP) if f.ses is not None
                 and f.ses.opcode == RspOpcode.RESPONSE_W_DATA]
    assert len(data_acks) == 2 and data_acks[1].pds.flags & AckFlag.RETX
    assert not net.frames(kind=None, src=A_IP, pds_type=PdsType.RUD_REQ)[1:]  # no resend


def test_ack_data_class_control_keeps_data_acks_in_the_control_class():
    cfg = PdsConfig(ack_data_class="control")
    a, b = pair(cfg, cfg, responder=_read_responder)
    net = Net([a, b])
    a.ep.submit(0, request())
    net.run(until=100 * US)
    data_acks = [f for f in net.frames(PdsAckCc, src=B_IP) if f.payload]
    assert data_acks and all(f.dscp == cfg.dscp_control for f in data_acks)


def test_trimmed_rudi_response_gets_an_nt_nack_and_is_resent_from_the_cache():
    a, b = pair(responder=_read_responder)
    net = TrimNet([a, b], n=1)
    a.ep.submit(0, request(mode=DeliveryMode.RUDI, msg_ref="r"))
    net.run(until=100 * US)
    nack_frames = net.frames(PdsNack, src=A_IP)
    assert len(nack_frames) == 1
    nk = nack_frames[0].pds
    assert nk.nack_code == NackCode.TRIMMED_ACK and nk.flags & NackFlag.NT
    assert (nk.spdcid, nk.dpdcid) == (0, 0)
    resp = net.frames(PdsRudi, src=B_IP)
    assert len(resp) == 2 and resp[1].pds.flags & 0x10 and resp[1].payload
    assert [r.payload for r in a.responses] == [bytes(range(256))]
    assert len(b.delivered) == 1  # answered from the cache, not executed again


# ---------------------------------------------------------------------------- NO_RESPONSE

def test_no_response_early_ack_then_the_guaranteed_response():
    held = []

    def responder(ev):
        held.append(ev.token)
        return (_rsp(ev, RspOpcode.NO_RESPONSE, ReturnCode.NULL),)

    a, b = pair(responder=responder)
    net = Net([a, b])
    a.ep.submit(0, request(msg_ref="m"))
    net.run(until=50 * US)
    early = [f for f in net.frames(PdsAckCc, src=B_IP) if f.ses is not None]
    assert [f.ses.opcode for f in early] == [RspOpcode.NO_RESPONSE]
    assert early[0].pds.ack_psn == psn_add(early[0].pds.cack_psn, 1)  # the CACK is held
    assert not a.acked and not a.responses  # the packet waits for the real response
    pdc = a.ep.pdcs("initiator")[0]
    assert all(p.arrived for p in pdc.outstanding.values())  # and is never resent as data
    assert a.ep.counters["no_response_rx"] == 1 and b.ep.counters["no_response_tx"] == 1
    net.run(until=7 * MS)  # past the 5 ms RTO: an ACK_REQ, answered RCVD_SES_PROCG
    assert [f.pds.ctl_type for f in net.frames(PdsControl, src=A_IP)] == [CtlType.ACK_REQ]
    assert b.ep.counters["nack_tx.RCVD_SES_PROCG"] == 1
    assert len(net.frames(pds_type=PdsType.RUD_REQ, src=A_IP)) == 1  # data never resent
    assert not a.acked and not a.failed
    assert b.ep.respond(net.now, held[0], _rsp(None), b"")
    net.run(until=net.now + 50 * US)
    assert [r.ses.opcode for r in a.responses] == [RspOpcode.RESPONSE]
    assert [e.msg_ref for e in a.acked] == ["m"]
    assert len(b.delivered) == 1


# ---------------------------------------------------------------------------- resource NACKs

def _gtd(ev):
    return (_rsp(ev),)


def test_no_gtd_del_avail_when_no_room_for_the_guaranteed_response():
    t = Side(responder=_gtd, max_rx_memory_bytes=48)
    out = t.feed(req(S, syn=True, ar=True))
    assert acks(out) and t.ep.rx_memory == 32  # one stored response
    tid = acks(out)[0].pds.spdcid
    out = t.feed(req(psn_add(S, 1), dpdcid=tid, ar=True))
    assert nack_codes(out) == [NackCode.NO_GTD_DEL_AVAIL]
    assert len(t.delivered) == 1  # not executed
    # a packet that needs no stored response (not a message's last) is still taken
    out = t.feed(req(psn_add(S, 1), dpdcid=tid, eom=False))
    assert len(t.delivered) == 2 and not nack_codes(out)


def test_ack_req_for_a_stored_response_with_data_is_nacked_ack_with_data():
    t = Side(responder=_read_responder)
    out = t.feed(req(S, syn=True, ar=True))
    tid = only(acks(out)).pds.spdcid
    assert only(acks(out)).payload  # the data rode in the ACK
    out = t.feed(cp(CtlType.ACK_REQ, S, dpdcid=tid))
    assert nack_codes(out) == [NackCode.ACK_WITH_DATA]
    out = t.feed(req(S, dpdcid=tid, retx=True, ar=True))  # the request again: its ACK
    assert only(acks(out)).payload == bytes(range(256))


def test_initiator_resends_the_request_on_ack_with_data():
    """A SACKed packet whose ACK_REQ is answered ACK_WITH_DATA is sent again (its ACK
    then comes with the data, as the answer to the request itself)."""
    s = PdsEndpoint(PdsConfig(fixed_start_psn=S), A_IP, random.Random(3))
    s.submit(0, request())
    first = s.poll_transmit(0, False)
    psn, mine, tid = first.pds.psn, first.pds.spdcid, 0x0900
    # an ACK that only SACKs it: arrived, its ACK (with the data) is still owed
    s.receive(10, ack(psn_add(psn, -1), psn_add(psn, -1), spdcid=tid, dpdcid=mine,
                      sack_base=psn, bitmap=1))
    assert s.pdc(mine).outstanding[psn].arrived and s.poll_transmit(10, False) is None
    s.receive(20, nack(NackCode.ACK_WITH_DATA, psn, spdcid=tid, dpdcid=mine))
    again = s.poll_transmit(20, False)
    assert again is not None and again.pds.psn == psn and again.pds.retx
    assert s.counters["retx.nack.ACK_WITH_DATA"] == 1


def test_no_ccc_avail_when_every_cc_context_is_taken():
    t = Side(max_cc_contexts=1)
    out = t.feed(req(S, syn=True, ar=True, ptype=PdsType.RUD_CC_REQ))
    assert acks(out)
    out = t.feed(req(S, syn=True, ar=True, spdcid=0x0222, ptype=PdsType.RUD_CC_REQ))
    assert nack_codes(out) == [NackCode.NO_CCC_AVAIL]
    out = t.feed(req(S, syn=True, ar=True, spdcid=0x0333))  # plain requests need none
    assert acks(out) and not nack_codes(out)


def test_no_bitmap_when_every_tracking_bitmap_is_taken_and_freed_on_close():
    t, tid = established_target(max_rx_bitmaps=1)
    out = t.feed(req(S, syn=True, ar=True, spdcid=0x0222))
    assert NackCode.NO_BITMAP in nack_codes(out)
    assert t.ep.counters["refused.rx_bitmaps"] == 1
    # the first PDC closes: its bitmap is free again (it lingers without one)
    out = t.feed(cp(CtlType.CLOSE, psn_add(S, 1), dpdcid=tid, flags=0x08))
    assert acks(out)
    out = t.feed(req(S, syn=True, ar=True, spdcid=0x0222))
    assert acks(out) and not nack_codes(out)


# ---------------------------------------------------------------------------- UNEXP_EVENT

def test_credit_req_without_credit_based_cc_is_unexp_event():
    t, tid = established_target()
    out = t.feed(cp(CtlType.CREDIT_REQ, psn_add(S, 1), dpdcid=tid, payload=100))
    assert nack_codes(out) == [NackCode.UNEXP_EVENT]
    out = t.feed(cp(CtlType.CREDIT_REQ, S, syn=True, spdcid=0x0444, payload=100))
    assert nack_codes(out) == [NackCode.UNEXP_EVENT] and len(t.ep.pdcs("target")) == 1


def test_negotiation_of_an_unknown_version_is_unexp_event_version_0_ignored():
    t, tid = established_target()
    bad = neg.encode(neg.Capabilities(1, 1, 4096, version=2))
    assert nack_codes(t.feed(cp(CtlType.NEGOTIATION, S, dpdcid=tid, payload=bad))) == [
        NackCode.UNEXP_EVENT]
    assert t.feed(cp(CtlType.NEGOTIATION, S, dpdcid=tid, payload=0)) == []


# ---------------------------------------------------------------------------- RCVR_INFER_LOSS

def test_gap_nack_with_plain_acks_and_none_with_ack_cc():
    for ack_type, want in (("ack", True), ("ack_cc", False)):
        t = Side(ack_type=ack_type, responder=lambda ev: None)
        t.feed(req(S, syn=True, ar=True))
        tid = t.ep.pdcs("target")[0].pdc_id
        t.feed(req(psn_add(S, 2), dpdcid=tid), req(psn_add(S, 3), dpdcid=tid))
        out = t.advance(t.now + 50 * US)  # 4 ACK timers, then a check every 8 us
        codes = nack_codes(out)
        if want:
            n = [f.pds for f in out if isinstance(f.pds, PdsNack)]
            assert codes and set(codes) == {NackCode.RCVR_INFER_LOSS}
            assert n[0].nack_psn == psn_add(S, 1) and len(n) == 1  # once, not every check
            # still missing 8 checks later: asked again
            assert nack_codes(t.advance(t.now + 40 * US)) == [NackCode.RCVR_INFER_LOSS]
        else:
            assert not codes
        # the gap fills: no more NACKs
        t.feed(req(psn_add(S, 1), dpdcid=tid))
        assert not nack_codes(t.advance(t.now + 200 * US))


def test_gap_nack_makes_the_initiator_resend_with_plain_acks():
    cfg = PdsConfig(ack_type="ack", rack=False)
    lost = []

    def drop(f):
        if f.pds.type == PdsType.RUD_REQ and not f.pds.retx and f.pds.psn % 7 == 3 \
                and not lost:
            lost.append(f.pds.psn)
            return True
        return False

    a, b = pair(cfg, cfg, responder=lambda ev: None)
    net = Net([a, b], drop=drop)
    for i in range(12):
        a.ep.submit(0, request(msg_ref=i, eom=i == 11))
    net.run(until=2 * MS)
    assert lost and b.ep.counters["nack_tx.RCVR_INFER_LOSS"] >= 1
    assert a.ep.counters["retx.nack.RCVR_INFER_LOSS"] == 1
    assert sorted(e.msg_ref for e in a.acked) == list(range(12))
    assert net.now < 5 * MS  # recovered by the NACK, not the 5 ms RTO


# ---------------------------------------------------------------------------- NEW_START_PSN

def test_reused_pdc_key_too_close_to_the_old_psns_gets_new_start_psn():
    t, tid = established_target()
    t.feed(req(psn_add(S, 1), dpdcid=tid, ar=True))
    close = psn_add(S, 2)
    assert acks(t.feed(cp(CtlType.CLOSE, close, dpdcid=tid, flags=0x08)))
    new_start = psn_add(S, 500)  # a new incarnation, same SPDCID, PSNs overlapping
    out = t.feed(req(new_start, syn=True, start=new_start, ar=True))
    n = only(out, PdsNack).pds
    assert n.nack_code == NackCode.NEW_START_PSN
    assert n.payload == psn_add(close, 1 << 16)
    out = t.feed(req(n.payload, syn=True, start=n.payload, ar=True))
    assert acks(out) and len(t.delivered) == 3
    # far enough: accepted at once
    t2, tid2 = established_target()
    t2.feed(cp(CtlType.CLOSE, psn_add(S, 1), dpdcid=tid2, flags=0x08))
    far = psn_add(S, 1 << 20)
    assert acks(t2.feed(req(far, syn=True, start=far, ar=True)))


# ---------------------------------------------------------------------------- plain ACK, PROBE

def test_closed_pdc_answers_with_plain_acks():
    t, tid = established_target()
    out = t.feed(cp(CtlType.CLOSE, psn_add(S, 1), dpdcid=tid, flags=0x08))
    a = only(acks(out))
    assert type(a.pds) is PdsAck and a.pds.ack_psn == psn_add(S, 1)
    out = t.feed(req(S, dpdcid=tid, retx=True))  # a late duplicate
    assert type(only(acks(out)).pds) is PdsAck


def test_blocked_probe_is_a_probe_answered_with_p():
    """An initiator blocked by the peer window with nothing outstanding asks the target's
    state with a PROBE (not an ACK_REQ for a PSN already acknowledged)."""
    cfg = PdsConfig(fixed_start_psn=S, rto_ps=100 * US)
    s = PdsEndpoint(cfg, A_IP, random.Random(3))
    for i in range(3):
        s.submit(0, request(msg_ref=i, eom=True))
    first = s.poll_transmit(0, False)
    pid = first.pds.spdcid
    s.receive(1, ack(S, S, spdcid=0x0900, dpdcid=pid))
    pdc = s.pdc(pid)
    pdc.peer_range = 0  # the target's CACK is held: the peer window is closed
    assert s.poll_transmit(2, False) is None and pdc.blocked_at is not None
    s.handle_timer(pdc.blocked_at)
    sent = []
    while (f := s.poll_transmit(pdc.blocked_at, True)) is not None:
        sent.append(f)
    probes = [f.pds for f in sent if isinstance(f.pds, PdsControl)
              and f.pds.ctl_type == CtlType.PROBE]
    assert len(probes) == 1 and probes[0].psn == psn_add(S, 1) == probes[0].payload
    assert not [f for f in sent if isinstance(f.pds, PdsControl)
                and f.pds.ctl_type == CtlType.ACK_REQ]


# ---------------------------------------------------------------------------- NOOP keepalive

def test_noop_keepalive_keeps_an_idle_pdc_open():
    ini = PdsConfig(close_idle_ps=0, keepalive_ps=40 * US)
    tgt = PdsConfig(target_idle_ps=100 * US)
    a, b = pair(ini, tgt, responder=lambda ev: None)
    net = Net([a, b])
    a.ep.submit(0, request())
    net.run(until=1 * MS)
    noops = [f for f in net.frames(PdsControl, src=A_IP) if f.pds.ctl_type == CtlType.NOOP]
    assert len(noops) >= 20 and a.ep.counters["keepalive_tx"] == len(noops)
    assert not [f for f in net.frames(PdsControl, src=B_IP)
                if f.pds.ctl_type == CtlType.CLOSE_REQ]
    assert len(b.ep.pdcs("target")) == 1
    # without the keepalive the target asks to close after its idle time
    a2, b2 = pair(PdsConfig(close_idle_ps=0), tgt, responder=lambda ev: None)
    net2 = Net([a2, b2])
    a2.ep.submit(0, request())
    net2.run(until=1 * MS)
    assert [f for f in net2.frames(PdsControl, src=B_IP) if f.pds.ctl_type == CtlType.CLOSE_REQ]


# ---------------------------------------------------------------------------- NEGOTIATION

def test_negotiation_at_pdc_open_teaches_the_peer_window_with_plain_acks():
    ini = PdsConfig(negotiation=True, ack_type="ack")
    tgt = PdsConfig(negotiation=True, mp_range=512, ack_type="ack")
    a, b = pair(ini, tgt, responder=lambda ev: None)
    a.ep.capabilities = 0x03
    b.ep.capabilities = 0x84
    events = {"a": [], "b": []}
    for h, k in ((a, "a"), (b, "b")):
        orig = h.drain

        def drain(now=None, orig=orig, h=h, k=k):
            ev_list = []
            while (ev := h.ep.next_event()) is not None:
                if type(ev) is PeerNegotiated:
                    events[k].append(ev)
                else:
                    ev_list.append(ev)
            h.ep.events.extend(ev_list)
            orig(now)
        h.drain = drain
    net = Net([a, b])
    a.ep.submit(0, request())
    net.run(until=100 * US)
    sent = net.sent
    first_a = [f for _, f in sent if f.src_ip == A_IP][0]
    assert isinstance(first_a.pds, PdsControl) and first_a.pds.ctl_type == CtlType.NEGOTIATION
    assert first_a.pds.syn  # the SYN form: the PDC is not established yet
    mine = neg.decode(first_a.pds.payload)
    assert (mine.fep_cap, mine.mpr, mine.max_payload, mine.reply) == (0x03, 1, 4096, False)
    reply = [f for f in net.frames(PdsControl, src=B_IP) if f.pds.ctl_type == CtlType.NEGOTIATION]
    assert len(reply) == 1 and neg.decode(reply[0].pds.payload).reply
    assert [(e.role, e.fep_cap, e.mp_range) for e in events["a"]] == [("initiator", 0x84, 512)]
    assert [(e.role, e.fep_cap) for e in events["b"]] == [("target", 0x03)]
    assert a.ep.pdcs("initiator")[0].peer_range == 512  # no ACK_CC ever said so


def test_negotiation_payload_round_trip():
    for caps in (neg.Capabilities(0x84, 255, 16320, ccx=True, reply=True),
                 neg.Capabilities(0x01, 1, 256)):
        assert neg.decode(neg.encode(caps)) == caps


# ---------------------------------------------------------------------------- ACK_CCX / NACK_CCX

def _ccx_pair():
    cms = CmsConfig(algorithm="nscc", ev_selector="oblivious", ccx="telemetry",
                    base_rtt_ps=14 * US)
    rng = random.Random(5)
    kw = dict(sender_cc=lambda mode: make_sender(cms, rng),
              receiver_cc=lambda key: make_receiver(cms, key=key))
    return pair(responder=lambda ev: None, **kw)


def test_ack_ccx_and_nack_ccx_carry_the_receivers_telemetry():
    a, b = _ccx_pair()

    class CeTrimNet(Net):
        n = 0

        def _put(self, frame):
            if frame.pds.type == PdsType.RUD_REQ and not frame.pds.retx:
                self.n += 1
                if self.n % 2:
                    frame.ecn = 3  # half the data arrives CE-marked
                if self.n == 5:
                    frame.dscp, frame.payload = TRIMMED, b""
            super()._put(frame)

    net = CeTrimNet([a, b], ps_per_byte=80)
    for i in range(20):
        a.ep.submit(0, request(msg_ref=i, eom=i == 19, payload=b"y" * 4096))
    net.run(until=2 * MS)
    assert sorted(e.msg_ref for e in a.acked) == list(range(20))
    ccx_acks = net.frames(PdsAckCc, src=B_IP, pds_type=PdsType.ACK_CCX)
    assert ccx_acks and not net.frames(PdsAckCc, src=B_IP, pds_type=PdsType.ACK_CC)
    states = [parse_ack_state(f.pds.ccx_state) for f in ccx_acks]
    assert all(s is not None for s in states) and ccx_acks[0].pds.ccx_state[0] == TELEMETRY_V1
    assert sum(s[3] for s in states) == 20 * 4096  # every byte once (the trimmed one resent)
    assert sum(s[2] for s in states) == 1  # the trim, reported once
    assert any(s[0] > 0 for s in states)  # a CE share
    nccx = net.frames(PdsNack, src=B_IP, pds_type=PdsType.NACK_CCX)
    assert [f.pds.nack_code for f in nccx] == [NackCode.TRIMMED]
    assert nccx[0].pds.nccx_type == 1 and nccx[0].pds.nccx_state1 >> 20 & 0xFFFF == 1
    ccx = a.ep.pdcs("initiator")[0].cc.ccx if a.ep.pdcs("initiator") else None
    assert ccx is None or isinstance(ccx, TelemetrySender)
    assert b.ep.counters["ack_ccx_tx"] == len(ccx_acks)


def test_telemetry_sender_caps_its_window_at_the_delivery_rate():
    snd = TelemetrySender(mtu=4096, max_window=1 << 20, base_rtt_ps=10 * US,
                          target_qdelay_ps=5 * US)
    # 40 kB in 4 us (10 GB/s = 0.01 B/ps), half of it CE-marked
    state = bytes((1, 128)) + (4000).to_bytes(2, "big") + b"\0" + (40_000).to_bytes(3, "big")
    snd.on_ack_state(0, state)
    rate = 40_000 / 4_000_000
    want = int(rate * 15 * US * (1 - snd.alpha / 2))
    assert snd.cwnd == want and snd.cuts == 1
    clean = bytes((1, 0)) + (4000).to_bytes(2, "big") + b"\0" + (40_000).to_bytes(3, "big")
    snd.on_ack_state(1, clean)
    assert snd.cwnd == want + 4096  # no congestion: one MTU more per report
    snd.on_ack_state(2, b"\x07" + bytes(7))  # not our format: ignored
    assert snd.reports == 2
