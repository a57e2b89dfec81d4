"""How the PDS drives congestion management (docs/architecture.md "CMS", docs/cms.md), and
trimming (ref 6.3): NACK TRIMMED / TRIMMED_LASTHOP, credit requests, gated retransmissions;
plus closed-loop runs with the real NSCC and RCCC."""

from __future__ import annotations

import random

import pytest
from pds_harness import A_IP, B_IP, US, Host, Net, request
from pds_script import S, Side, cp, established_target, nack_codes, only, req

from uet.cms.api import CmsConfig, NullReceiverCongestion, NullSenderCongestion
from uet.cms.factory import make_credit_scheduler, make_receiver, make_sender
from uet.pds import PdsConfig, PdsEndpoint
from uet.wire.constants import CtlType, DeliveryMode, NackCode, PdsType, ReqFlag
from uet.wire.records import PdsAckCc, psn_add


class RecordingReceiver(NullReceiverCongestion):
    def __init__(self):
        super().__init__()
        self.calls = []
        self.rccc = self  # takes credit requests: the RCCC receiver interface

    def on_data(self, now, *, nbytes, ecn_ce, credit_target, in_order, ooo_count=None):
        self.calls.append(("data", nbytes, credit_target, in_order, ooo_count))
        super().on_data(now, nbytes=nbytes, ecn_ce=ecn_ce, credit_target=credit_target,
                        in_order=in_order, ooo_count=ooo_count)

    def credit_grant(self, now):
        return 0

    def on_credit_request(self, now, *, credit_target):
        self.calls.append(("credit_request", credit_target))

    def close(self):
        self.calls.append(("close",))


def _side_with(receiver, **cfg):
    s = Side(**cfg)
    s.ep._receiver_cc = lambda key: receiver
    return s


@pytest.mark.parametrize("dscp,code", [(12, NackCode.TRIMMED), (14, NackCode.TRIMMED_LASTHOP)])
def test_ref_6_3_trimmed_request_is_nacked(dscp, code):
    """ref 6.3: a request re-marked with a trimmed DSCP is NACKed TRIMMED (TRIMMED_LASTHOP
    for the last-hop code point), not delivered and not marked received; a trimmed CC
    request's credit_target goes to on_credit_request."""
    rx = RecordingReceiver()
    t = _side_with(rx)
    t.feed(req(S, syn=True))
    f = req(psn_add(S, 1), syn=True, ptype=PdsType.RUD_CC_REQ)
    f.pds.credit_target = 777
    f.dscp = dscp
    f.payload = b""
    n = only(t.feed(f)).pds
    assert n.nack_code == code and n.nack_psn == psn_add(S, 1)
    assert len(t.delivered) == 1 and ("credit_request", 777) in rx.calls
    assert t.ep.counters["trimmed_rx"] == 1
    f2 = req(psn_add(S, 1), syn=True, ar=True)  # the retransmission is accepted
    assert only(t.feed(f2)).pds.cack_psn == psn_add(S, 1)


def test_receiver_gets_ooo_count_credit_requests_and_close():
    """docs/cms.md: on_data(..., ooo_count) per new packet, on_credit_request for CREDIT_REQ
    CPs, close() once when the PDC goes away."""
    rx = RecordingReceiver()
    t = _side_with(rx)
    t.feed(req(S, syn=True))
    t.feed(req(psn_add(S, 2), syn=True))
    assert rx.calls[0][-1] == 0 and rx.calls[1][-1] == 1  # tracker ooo_count
    tid = t.ep.pdcs()[0].pdc_id
    t.feed(cp(CtlType.CREDIT_REQ, 0, dpdcid=tid, payload=99))
    assert ("credit_request", 99) in rx.calls
    t.feed(req(psn_add(S, 1), dpdcid=tid))
    t.feed(cp(CtlType.CLOSE, psn_add(S, 3), dpdcid=tid))
    assert rx.calls.count(("close",)) == 1


def test_retransmissions_are_gated_by_can_send_retx():
    """docs/cms.md: can_send(..., retx=True) before every retransmission."""
    calls = []

    class Gate(NullSenderCongestion):
        allow_retx = False

        def can_send(self, now, *, nbytes, in_flight, retx=False):
            calls.append(retx)
            return not retx or self.allow_retx

    gate = Gate()
    s = Side(ip=A_IP, rto_ps=100 * US)
    s.ep._sender_cc = lambda mode: gate
    s.ep.submit(0, request())
    assert len(s.data()) == 1
    s.advance(100 * US)
    assert s.data() == [] and calls[-1] is True
    gate.allow_retx = True
    s.ep.activate(s.ep.pdcs()[0])
    again = s.data()
    assert len(again) == 1 and again[0].pds.retx


def test_credit_based_sender_backlog_and_credit_request():
    """docs/cms.md: under RCCC the PDS reports its backlog, sends CC requests carrying
    credit_target, and a CREDIT_REQ CP when the CC refuses and asks for credit."""
    backlog = []

    class Credit(NullSenderCongestion):
        credit = 0

        def __init__(self):
            super().__init__()
            self.rccc = self  # the RCCC sender interface

        def can_send(self, now, *, nbytes, in_flight, retx=False):
            return self.credit > 0

        def on_backlog(self, now, *, backlog_bytes):
            backlog.append(backlog_bytes)

        def waiting_for_credit(self):
            return None

        def poll_credit_request(self, now):
            return 4242

        def credit_target(self):
            return 4242

        def on_credit(self, now, *, credit):
            self.credit = credit

    cc = Credit()
    s = Side(ip=A_IP)
    s.ep._sender_cc = lambda mode: cc
    s.ep.submit(0, request(payload=bytes(100)))
    s.ep.submit(0, request(payload=bytes(50)))
    assert backlog == [100, 150]
    assert s.data() == []
    c = only(s.control()).pds
    assert c.ctl_type == CtlType.CREDIT_REQ and c.payload == 4242 and c.syn
    from uet.wire.records import Frame, PdsControl
    pdc = s.ep.pdcs()[0]
    grant = PdsControl(ctl_type=CtlType.CREDIT, psn=0, spdcid=0x55, dpdcid=pdc.pdc_id,
                       payload=10)
    s.feed(Frame(pds=grant, src_ip=B_IP, dst_ip=A_IP))
    frames = s.data()
    assert [f.pds.type for f in frames] == [PdsType.RUD_CC_REQ] * 2
    assert frames[0].pds.credit_target == 4242 and backlog[-2:] == [50, 0]


def test_credit_scheduler_grants_become_credit_cps():
    """docs/cms.md RCCC: poll the end point's scheduler after receiver calls and at its
    deadline; one CREDIT CP (payload = grant) per grant on the PDC its key names."""

    class Sched:
        def __init__(self):
            self.grants = []
            self.deadline = None

        def poll_grants(self, now):
            g, self.grants = self.grants, []
            return g

        def next_deadline(self):
            return self.deadline

    sched = Sched()
    t = Side()
    t.ep.credit_scheduler = sched
    t.ep._receiver_cc = lambda key: RecordingReceiver()  # a credit (rccc) receiver
    t.feed(req(S, syn=True))
    tid = t.ep.pdcs()[0].pdc_id
    sched.grants = [(tid, 64), (0x7777, 1)]
    sched.deadline = 5 * US
    out = t.feed(req(psn_add(S, 1), syn=True))
    credit = [f for f in out if f.pds.type == PdsType.CP]
    assert [c.pds.payload for c in credit] == [64] and credit[0].pds.dpdcid == 0x0111
    assert t.ep.counters["credit_grant_dropped"] == 1
    sched.grants = [(tid, 128)]
    sched.deadline = None
    out = t.advance(5 * US)
    assert [f.pds.payload for f in out if f.pds.type == PdsType.CP] == [128]


@pytest.mark.parametrize("algorithm", ["nscc", "rccc", "nscc+rccc"])
@pytest.mark.parametrize("loss", [0.0, 0.05])
def test_closed_loop_with_real_cms(algorithm, loss):
    """PDS + the real CMS (NSCC / RCCC): every packet delivered once under loss, ACK_CC
    carries the algorithm's state, RCCC credit flows as CREDIT CPs."""
    cms = CmsConfig(ev_selector="oblivious", algorithm=algorithm, base_rtt_ps=10 * US,
                    mtu_payload=4096)
    hosts = []
    for i, ip in enumerate((A_IP, B_IP)):
        rng = random.Random(10 + i)
        sched = make_credit_scheduler(cms) if "rccc" in algorithm else None
        ep = PdsEndpoint(
            PdsConfig(rto_ps=200 * US, max_retries=10), ip, rng,
            sender_cc=lambda mode, rng=rng: make_sender(cms, rng,
                                                        ordered=mode == DeliveryMode.ROD),
            receiver_cc=lambda key, sched=sched: make_receiver(cms, sched, key=key),
            credit_scheduler=sched)
        hosts.append(Host(ep))
    a, b = hosts
    net = Net(hosts, seed=7, loss=loss, delay=2 * US, jitter=1 * US, ps_per_byte=80)
    n = 120
    for i in range(n):
        a.ep.submit(0, request(msg_ref=i, payload=bytes(4096), eom=i % 16 == 15,
                               mode=DeliveryMode.ROD if i % 2 else DeliveryMode.RUD))
    net.run(until=50_000 * US)
    assert sorted(e.msg_ref for e in a.acked) == list(range(n)) and not a.failed
    assert len(b.delivered) == n
    acks = net.frames(PdsAckCc, src=B_IP)
    assert acks and all(f.pds.cc_type == (1 if "rccc" in algorithm else 0) for f in acks)
    if "rccc" in algorithm:
        assert b.ep.counters["cp_tx.CREDIT"] > 0
        assert all(f.pds.type in (PdsType.RUD_CC_REQ, PdsType.ROD_CC_REQ)
                   for f in net.frames(src=A_IP) if f.pds.type in (2, 3, 13, 14))
    evs = {f.ev for f in net.frames(src=A_IP) if f.pds.type in (PdsType.RUD_REQ,
                                                                PdsType.RUD_CC_REQ)}
    assert len(evs) > 1  # RUD sprays (oblivious), ROD keeps one EV
    assert len({f.ev for f in net.frames(src=A_IP)
                if f.pds.type in (PdsType.ROD_REQ, PdsType.ROD_CC_REQ)}) == 1
    assert nack_codes(net.frames(src=B_IP)) == [] or loss


def test_established_target_helper_unchanged():
    t, tid = established_target()
    assert tid and isinstance(t.ep.pdcs()[0].receiver, NullReceiverCongestion)


def test_syn_credit_request_opens_the_target_pdc():
    """RCCC (docs/pds.md): a sender whose first packets were lost may only be able to ask
    for credit; a CREDIT_REQ with SYN opens the target PDC like a SYN request would."""
    rx = RecordingReceiver()
    t = _side_with(rx)
    t.feed(cp(CtlType.CREDIT_REQ, S, syn=True, payload=321))
    pdc = only(t.ep.pdcs("target"))
    assert pdc.start_psn == S and pdc.peer_pdcid == 0x0111
    assert ("credit_request", 321) in rx.calls and not t.delivered


def test_blocked_retransmission_still_ages_to_the_retry_limit():
    """ref 3.8: a packet waiting for the CC (no credit) still counts RTO expiries, so a
    peer that never grants credit ends in MessageFailed instead of waiting forever."""

    class Never(NullSenderCongestion):
        sent = False

        def can_send(self, now, *, nbytes, in_flight, retx=False):
            first, self.sent = not self.sent, True
            return first

    s = Side(ip=A_IP, rto_ps=100 * US, max_retries=3)
    s.ep._sender_cc = lambda mode: Never()
    s.ep.submit(0, request(msg_ref="stuck"))
    assert len(s.data()) == 1
    s.advance(100_000 * US)
    assert [m.msg_ref for m in s.failed] == ["stuck"] and s.data() == []


class RecordingCC(NullSenderCongestion):
    """Null CC with a settable window that records the in-flight bytes it is shown."""

    def __init__(self, window_bytes=1 << 30):
        super().__init__(window_bytes=window_bytes)
        self.acks = []

    def on_ack(self, now, fb):
        self.acks.append(fb)


def test_cc_in_flight_counts_target_rcvd_bytes_beyond_the_sack_bitmap():
    """docs/pds.md "Congestion management hooks": the 64-bit SACK bitmap names at most 64
    PSNs above the CACK; arrivals beyond it, counted in the ACK_CC's NSCC rcvd_bytes, leave
    the CC's in-flight bytes (htsim's recvd_bytes accounting) though the PDS keeps them
    outstanding until an ACK names them. Stale counts change nothing; an ACK_CC that leaves
    nothing outstanding re-bases the count."""
    from pds_script import ack
    cc = RecordingCC()
    s = Side(ip=A_IP)
    s.ep._sender_cc = lambda mode: cc
    for i in range(80):
        s.ep.submit(0, request(payload=bytes(100), msg_ref=i))
    assert len(s.data()) == 80
    pdc = s.ep.pdcs()[0]
    assert pdc.cc_inflight() == pdc.inflight_bytes == 8000
    # S lost; S+1..S+79 arrived: the bitmap names S+1..S+64, rcvd_bytes says 79 packets
    a = ack(psn_add(S, -1), psn_add(S, -1), spdcid=0x222, dpdcid=pdc.pdc_id,
            bitmap=(1 << 64) - 1)
    a.pds.rcvd_bytes = 7900
    s.feed(a)
    assert pdc.inflight_bytes == 1600 and pdc.cc_inflight() == 100
    assert cc.acks[-1].in_flight_bytes == 100 and cc.acks[-1].newly_acked_bytes == 6400
    stale = ack(psn_add(S, -1), psn_add(S, -1), spdcid=0x222, dpdcid=pdc.pdc_id, bitmap=1)
    stale.pds.rcvd_bytes = 500  # overtaken ACK: ignored
    s.feed(stale)
    assert pdc.cc_inflight() == 100
    # S arrives: the CACK covers everything, nothing outstanding, counts agree again
    done = ack(psn_add(S, 79), S, spdcid=0x222, dpdcid=pdc.pdc_id)
    done.pds.rcvd_bytes = 8000
    s.feed(done)
    assert pdc.inflight_bytes == pdc.cc_inflight() == 0
    assert pdc.rec.known_arrived == pdc.rec.peer_rcvd == 8000


def test_ar_when_the_cc_window_is_full_or_the_queue_empties():
    """docs/pds.md "Acknowledgement": with ar_when_blocked (default) a packet after which
    the CC window has no room for another full packet, or that empties the PDC's queue,
    carries AR (htsim's sender), so a window-limited flow gets its ACK at once."""
    cc = RecordingCC(window_bytes=350)
    s = Side(ip=A_IP)
    s.ep._sender_cc = lambda mode: cc
    for i in range(6):
        s.ep.submit(0, request(payload=bytes(100), msg_ref=i, eom=False))
    sent = s.data()
    # window 350: three packets fit; the third leaves no room for a fourth (300 + 100 >= 350)
    assert [bool(f.pds.flags & ReqFlag.AR) for f in sent] == [False, False, True]
    s2 = Side(ip=A_IP, ar_when_blocked=False)
    s2.ep._sender_cc = lambda mode: RecordingCC(window_bytes=350)
    for i in range(6):
        s2.ep.submit(0, request(payload=bytes(100), msg_ref=i, eom=False))
    assert not any(f.pds.flags & ReqFlag.AR for f in s2.data())
    s3 = Side(ip=A_IP)  # no window limit: AR only when the queue runs empty
    for i in range(3):
        s3.ep.submit(0, request(payload=bytes(100), msg_ref=i, eom=False))
    assert [bool(f.pds.flags & ReqFlag.AR) for f in s3.data()] == [False, False, True]


def test_ooo_loss_threshold_from_the_cc_window():
    """docs/pds.md "Retransmission": ooo_loss_threshold = -1 takes htsim's SLEEK threshold
    from the CC: max(min(1.5 cwnd, max window), 5 MTU) / MTU packets out of order."""
    from pds_script import ack

    class Window(RecordingCC):
        max_window = 8 * 4096

    cc = Window(window_bytes=8 * 4096)  # cwnd 8 MTU: threshold min(12, 8) = 8 packets
    s = Side(ip=A_IP, ooo_loss_threshold=-1, rack=False)
    s.ep._sender_cc = lambda mode: cc
    for i in range(10):
        s.ep.submit(0, request(payload=bytes(100), msg_ref=i))
    assert len(s.data()) == 10
    pdc = s.ep.pdcs()[0]
    a = ack(psn_add(S, -1), psn_add(S, -1), spdcid=0x222, dpdcid=pdc.pdc_id, bitmap=0b1111110)
    a.pds.ooo_count = 7  # below the threshold: nothing
    s.feed(a)
    assert s.ep.counters["retx.ooo"] == 0 and s.data() == []
    a.pds.ooo_count = 8
    s.feed(a)
    assert s.ep.counters["retx.ooo"] == 1  # S, below the highest SACKed (S+6)
    assert [f.pds.psn for f in s.data()] == [S]
    with pytest.raises(ValueError, match="ooo_loss_threshold"):
        PdsConfig(ooo_loss_threshold=-2)


def _nacked_behind_a_held_window(cc, **cfg):
    """Two packets sent; the second NACKed TRIMMED (queued to resend) while the first,
    lost, holds the one-packet window the CC allows; returns the side and both PSNs."""
    s = Side(ip=A_IP, rto_ps=100 * US, **cfg)
    s.ep._sender_cc = lambda mode: cc
    cc.opening = True  # both go out; then the CC's own rule holds
    for _ in range(2):
        s.ep.submit(0, request(payload=bytes(1000)))
    p0, p1 = (f.pds.psn for f in s.data())
    cc.opening = False
    from uet.wire.records import Frame, PdsNack
    pdc = s.ep.pdcs()[0]
    nack = PdsNack(nack_code=NackCode.TRIMMED, nack_psn=p1, spdcid=0x55, dpdcid=pdc.pdc_id)
    s.now = 5 * US
    s.feed(Frame(pds=nack, src_ip=B_IP, dst_ip=A_IP))
    return s, pdc, p0, p1


def test_queued_packet_does_not_age_behind_a_window_held_in_flight():
    """ref 3.8 / docs/pds.md RTO: a packet queued for retransmission while packets in
    flight hold the CC window is only waiting its turn: the in-flight packet's RTO counts
    the retry (and keeps the PDC live); the queued one does not age with it."""

    class OnePacketWindow(NullSenderCongestion):
        def can_send(self, now, *, nbytes, in_flight, retx=False):
            return self.opening or in_flight == 0

    s, pdc, p0, p1 = _nacked_behind_a_held_window(OnePacketWindow())
    assert s.data() == []  # p1 waits: p0 holds the window
    s.advance(100 * US)  # p0's RTO: resent (lowest PSN first), p1 still waits
    assert pdc.outstanding[p0].retries == 1 and pdc.outstanding[p1].retries == 0
    assert [f.pds.psn for f in s.data()] == [p0]


def test_queued_packet_waiting_for_credit_ages_only_when_the_scheduler_is_silent():
    """docs/pds.md RTO: refused for lack of credit, a queued packet does not age while the
    target's credit scheduler has been heard within max_rto; past that it does, so a PDC
    whose target vanished still ends."""

    class NoCredit(NullSenderCongestion):
        since = 0

        def __init__(self):
            super().__init__()
            self.rccc = self  # the RCCC sender interface, refusing for want of credit

        def credit_target(self):
            return 0

        def on_credit(self, now, *, credit):
            pass

        def on_backlog(self, now, *, backlog_bytes):
            pass

        def poll_credit_request(self, now):
            return None

        def can_send(self, now, *, nbytes, in_flight, retx=False):
            return self.opening

        def waiting_for_credit(self):
            return self.since

    cc = NoCredit()
    s, pdc, p0, p1 = _nacked_behind_a_held_window(cc, max_rto_ps=1000 * US)
    # p0 (in flight) is NACKed too, so nothing is in flight: both wait for credit
    from uet.wire.records import Frame, PdsNack
    s.feed(Frame(pds=PdsNack(nack_code=NackCode.TRIMMED, nack_psn=p0, spdcid=0x55,
                             dpdcid=pdc.pdc_id), src_ip=B_IP, dst_ip=A_IP))
    for t in (200, 400, 600, 800):
        s.advance(t * US)
    assert pdc.outstanding[p0].retries == pdc.outstanding[p1].retries == 0
    s.advance(1050 * US)  # no credit heard since t=0 for max_rto: aging counts again
    assert pdc.outstanding[p0].retries == pdc.outstanding[p1].retries == 1
