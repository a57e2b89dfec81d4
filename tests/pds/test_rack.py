"""Loss detection from SACK gaps (RACK, docs/pds.md "Retransmission"), retransmission order,
RTO expiries that say nothing about the network, and the close-request interplay.

Scripted initiator: ACKs in at chosen times, exactly which packets come out. The scripted
target acknowledges ``P0`` (the establishing packet) at 10 us, so the PDC's first RTT
sample is 10 us and its reordering window starts at min_rtt / 4 = 2.5 us (one EV: the Null
CC sends every packet on the same path).
"""

from __future__ import annotations

from pds_harness import A_IP, US, request
from pds_script import Side, ack, cp, cps, nack, only

from uet.pds.retransmit import Rack
from uet.wire.constants import AckFlag, CtlType, NackCode, NackFlag, ReqFlag
from uet.wire.records import psn_add

TID = 0x0999
P0 = 70_000


def initiator(**cfg) -> Side:
    cfg.setdefault("fixed_start_psn", P0)
    s = Side(ip=A_IP, **cfg)
    s.ep.submit(0, request(msg_ref="first"))
    assert [f.pds.psn for f in s.data()] == [P0]
    s.feed(ack(P0, P0, spdcid=TID, dpdcid=sid(s)), now=10 * US)
    return s


def sid(s: Side) -> int:
    return s.ep.pdcs()[0].pdc_id


def send(s: Side, n: int, now: int, eom: bool = True) -> list[int]:
    s.now = now
    for i in range(n):
        s.ep.submit(now, request(msg_ref=(now, i), eom=eom))
    return [f.pds.psn for f in s.data()]


def sack(s: Side, now: int, named: int, *psns: int, cack: int = P0, **kw):
    """An ACK_CC at ``now`` naming ``named`` and SACKing ``psns`` (base CACK + 1)."""
    bm = 0
    for p in psns:
        bm |= 1 << (p - cack - 1)
    return s.feed(ack(cack, named, spdcid=TID, dpdcid=sid(s), bitmap=bm, **kw), now=now)


def resent(s: Side) -> list[int]:
    out = s.data()
    assert all(f.pds.flags & (ReqFlag.RETX | ReqFlag.AR) == ReqFlag.RETX | ReqFlag.AR
               for f in out)
    return [f.pds.psn for f in out]


def test_a_gap_is_resent_once_rtt_plus_reordering_window_after_its_send():
    """ref 3.8 "from SACK gaps": P1 not SACKed while P2, P3 (sent after it) arrived; RACK
    waits for P1 until its send time + P3's RTT (10 us) + the window (2.5 us), then resends
    it alone, from its timer (no further ACK needed). P4, sent after P3, is not judged."""
    s = initiator()
    p1, p2, p3, p4 = send(s, 4, now=20 * US)
    sack(s, 30 * US, p3, p2, p3)
    assert s.data() == []
    s.advance(32 * US)
    assert s.data() == []
    s.advance(32 * US + 500_000)
    assert resent(s) == [p1]
    assert s.ep.counters["retx.rack"] == 1
    s.advance(60 * US)
    assert s.data() == [] and s.ep.counters["retx.rack"] == 1  # once per detection


def test_a_lost_retransmission_is_found_again_by_a_later_packet():
    """RACK judges by transmission order, so a retransmission is judged against packets
    sent after it: one retransmission per detected loss, never more."""
    s = initiator()
    p1, p2 = send(s, 2, now=20 * US)
    sack(s, 30 * US, p2, p2)
    s.advance(33 * US)
    assert resent(s) == [p1]  # found at 32.5 us, sent at 33 us
    (p3,) = send(s, 1, now=41 * US)
    # P3 (sent after the retransmission) arrived, P1 not: the retransmission (33 us) was
    # due at 33 + 10 + 2.5 = 45.5 us, so it is resent at once
    sack(s, 51 * US, p3, p2, p3)
    assert resent(s) == [p1]
    assert s.ep.counters["retx.rack"] == 2


def test_reordering_within_the_window_resends_nothing_and_widens_it():
    """A packet that merely arrives after a later-sent one (another path, jitter) is not
    resent when it arrives within the window; how late it was widens the window."""
    s = initiator()
    p1, p2, p3 = send(s, 3, now=20 * US)
    sack(s, 30 * US, p3, p2, p3)
    sack(s, 31 * US, p1, p1, p2, p3)  # P1: RTT 11 us, 1 us behind P3
    s.advance(100 * US)
    assert s.data() == [] and s.ep.counters["retx.rack"] == 0
    rack = s.ep.pdcs()[0].rack
    assert rack.reo_wnd == 1 * US + 500_000 + 2_500_000  # skew + skew/2 + min_rtt/4


def test_a_spurious_retransmission_is_counted_and_widens_the_window():
    """The original of a resent packet arrives right after the resend (the ACK comes far
    sooner than an RTT after the retransmission): spurious, counted as retx_spurious; the
    window grows to what would have waited for the original (3 us late)."""
    s = initiator()
    p1, p2 = send(s, 2, now=20 * US)
    sack(s, 30 * US, p2, p2)
    s.advance(33 * US)
    assert resent(s) == [p1]
    sack(s, 33 * US + 500_000, p1, p1, p2)
    assert s.ep.counters["retx_spurious"] == 1
    rack = s.ep.pdcs()[0].rack
    late = 33 * US + 500_000 - 20 * US - 10 * US
    assert rack.reo_wnd == late + late // 2 + 2_500_000


def test_an_ack_naming_the_resent_packet_without_retx_shows_the_original_arrived():
    """The ACK that names a packet carries RETX when a retransmission triggered it: an ACK
    naming a packet RACK resent, RETX clear, says its original arrived (late, not lost):
    spurious, and the window widens to what would have waited for it. With RETX set it is
    the retransmission that arrived: nothing to learn."""
    s = initiator()
    p1, p2 = send(s, 2, now=20 * US)
    sack(s, 30 * US, p2, p2)
    s.advance(33 * US)
    assert resent(s) == [p1]
    sack(s, 44 * US, p1, p1, p2)  # 11 us after the resend: timing alone says nothing
    assert s.ep.counters["retx_spurious"] == 1
    late = 44 * US - 20 * US - 10 * US
    assert s.ep.pdcs()[0].rack.reo_wnd == late + late // 2 + 2_500_000
    # a retransmission that is the copy that arrived (RETX set) teaches nothing
    t = initiator()
    q1, q2 = send(t, 2, now=20 * US)
    sack(t, 30 * US, q2, q2)
    t.advance(33 * US)
    assert resent(t) == [q1]
    sack(t, 44 * US, q1, q1, q2, flags=AckFlag.RETX)
    assert t.ep.counters["retx_spurious"] == 0


def test_packets_beyond_the_sack_bitmap_reach_are_left_alone():
    """The ACK_CC bitmap names 64 PSNs above the CACK: a packet beyond that may have arrived
    unseen, so RACK does not judge it (the RTO remains), while a gap within reach is resent."""
    s = initiator()
    psns = send(s, 66, now=20 * US)
    # P1 lost; P2..P64 SACKed; P66 named by the ACK (sent after P65, which is beyond reach)
    sack(s, 30 * US, psns[65], *psns[1:64])
    s.advance(40 * US)
    assert resent(s) == [psns[0]]
    assert s.ep.counters["retx.rack"] == 1


def test_retransmissions_go_lowest_psn_first():
    """Several packets waiting for retransmission are resent lowest PSN first (the CACK
    advances soonest; ROD delivers the head of the gap first), whatever order found them."""
    s = initiator(rack=False)
    psns = send(s, 5, now=20 * US)
    for p in (psns[4], psns[1], psns[3]):
        s.feed(nack(NackCode.TRIMMED, p, spdcid=TID, dpdcid=sid(s)), now=25 * US)
    assert resent(s) == [psns[1], psns[3], psns[4]]


def test_a_trim_nack_for_an_original_already_resent_is_stale():
    """RACK resent P1; then the NACK for its trimmed original (RETX clear) arrives: the copy
    in flight already replaces it, nothing more is sent. A NACK for the retransmission
    (RETX set) is acted on."""
    s = initiator()
    p1, p2 = send(s, 2, now=20 * US)
    sack(s, 30 * US, p2, p2)
    s.advance(33 * US)
    assert resent(s) == [p1]
    s.feed(nack(NackCode.TRIMMED, p1, spdcid=TID, dpdcid=sid(s)), now=34 * US)
    assert s.data() == [] and s.ep.counters["nack_rx_stale_copy"] == 1
    s.feed(nack(NackCode.TRIMMED, p1, spdcid=TID, dpdcid=sid(s), flags=NackFlag.RETX),
           now=40 * US)
    assert resent(s) == [p1]


def test_rto_sends_no_ack_req_for_packets_waiting_behind_a_gap():
    """ref 3.8: at the RTO, the packet at the gap is resent; packets above it that arrived
    wait for it (their ACK needs the gap filled): no ACK_REQ per packet and no retry counted."""
    s = initiator(rack=False, rto_ps=100 * US)
    p1, p2, p3 = send(s, 3, now=20 * US)
    sack(s, 30 * US, P0, p2, p3)
    out = s.advance(121 * US)
    assert cps(out, CtlType.ACK_REQ) == [] and resent(s) == [p1]
    pdc = s.ep.pdcs()[0]
    assert [tx.retries for tx in pdc.outstanding.values()] == [1, 0, 0]
    s.feed(ack(p3, p1, spdcid=TID, dpdcid=sid(s)), now=125 * US)
    assert not pdc.outstanding


def test_close_req_while_busy_resends_what_waits_in_a_backed_off_rto():
    """ref 3.9: a CLOSE_REQ reaching an initiator with packets outstanding (the target
    thinks it idle: what it misses waits in a backed-off RTO) resends them at once; the
    initiator closes only once everything is ACKed."""
    s = initiator(rack=False, rto_ps=100 * US, max_retries=20)
    (p1,) = send(s, 1, now=20 * US)
    s.advance(20 * US + 100 * US)  # first RTO at 120 us; the next one is due at 320 us
    assert resent(s) == [p1]
    s.advance(250 * US)
    assert s.data() == []
    out = s.feed(cp(CtlType.CLOSE_REQ, P0, spdcid=TID, dpdcid=sid(s), src=s.ep.pdcs()[0].peer_ip,
                    dst=A_IP), now=250 * US)
    assert resent(s) == [p1] and s.ep.counters["retx.close_req"] == 1
    assert cps(out, CtlType.CLOSE) == []
    out = s.feed(ack(p1, p1, spdcid=TID, dpdcid=sid(s)), now=260 * US)
    assert only(cps(out, CtlType.CLOSE)).pds.psn == psn_add(p1, 1)


def test_rack_window_floor_follows_min_rtt_and_spraying():
    """The adaptive window: min_rtt / 4 on one path; 1.5 min_rtt once the PDC sprays over
    several EVs (packets on different paths differ by up to the spread of the queues);
    the largest skew seen widens it (x1.5 + min_rtt / 4) and is forgotten after two buckets
    of 32 min RTTs without such samples."""
    r = Rack()
    assert r.reo_wnd == 0 and r.deadline(1, 0) is None
    r.delivered(10 * US, 2, 0, 0, False)  # RTT 10 us
    assert r.reo_wnd == 2_500_000 and r.deadline(1, 0) == 12_500_000
    assert r.deadline(2, 0) is None  # not sent before the latest delivered packet
    r.multipath = True
    assert r.reo_wnd == 15 * US
    r.delivered(40 * US, 1, 26 * US, 0, False)  # arrived after seq 2: 4 us later than it
    assert r.reo_wnd == 15 * US  # 4 * 1.5 + 2.5 < 15
    r.delivered(50 * US, 3, 20 * US, 0, False)  # RTT 30 us: 20 us above min_rtt
    assert r.reo_wnd == 20 * US + 10 * US + 2_500_000
    r.delivered(50 * US + 64 * 10 * US + 1, 4, 50 * US + 630 * US, 0, False)  # later, quiet
    r.delivered(50 * US + 2 * 64 * 10 * US, 5, 50 * US + 1270 * US, 0, False)
    assert r.reo_wnd == 15 * US
    assert Rack(fixed_wnd=7).reo_wnd == 7
