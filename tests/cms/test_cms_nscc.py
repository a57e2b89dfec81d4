"""NSCC reactions packet by packet, against hand-computed windows.

Reference setting: 100 Gb/s, base RTT 12 us (htsim's reference network, so a = 1),
no per-packet overhead (BDP = 150,000 B), trimming on: target delay 9 us, b = 0.75,
alpha = 4 * 4096 * 0.75 / 9e6 B/ps, fi = 5 * 4096, eta = 0.15 * 4096 = 614.4,
fast-increase scale 0.25, max window 225,000 B.
"""

import random

import pytest

from uet.cms import AckFeedback, CmsConfig, NackFeedback, make_sender
from uet.cms.nscc import Nscc, NsccParams, bdp_bytes
from uet.wire.constants import CcType, NackCode
from uet.wire.records import PdsAckCc

US = 1_000_000
MSS = 4096
BASE = 12 * US


def config(**kw):
    base = dict(
        algorithm="nscc",
        base_rtt_ps=BASE,
        pkt_overhead_bytes=0,
        initial_window_bytes=100_000,
        adapt_base_rtt=False,
    )
    base.update(kw)
    return CmsConfig(**base)


def nscc(**kw):
    return Nscc(NsccParams.from_config(config(**kw)))


def test_parameters_scale_like_htsim():
    p = NsccParams.from_config(config())
    assert p.target_qdelay == 9 * US
    assert p.bdp == 150_000 and p.max_wnd == 225_000
    assert p.alpha == pytest.approx(4 * MSS * 0.75 / (9 * US))
    assert p.fi == pytest.approx(5 * MSS) and p.eta == pytest.approx(614.4)
    assert p.fi_scale == pytest.approx(0.25)
    assert p.qa_threshold == 36 * US and p.adjust_bytes == 8 * MSS
    assert p.adjust_period == BASE and p.mtu == MSS
    # without trimming the target is one RTT; defaults at 100G / 14.02 us
    assert NsccParams.from_config(config(trimming=False)).target_qdelay == BASE
    d = NsccParams.from_config(CmsConfig(algorithm="nscc"))
    assert d.target_qdelay == 10_515_000
    assert d.bdp == bdp_bytes(CmsConfig()) == 175_250 * 4096 // 4160
    assert d.max_wnd == int(1.5 * d.bdp) and d.initial_wnd == d.max_wnd
    assert d.fi == pytest.approx(5 * MSS * 14.02 / 12)


def acks(cc, times, rtt, ecn=False, nbytes=MSS, in_flight=50_000):
    for t in times:
        cc.on_ack(t, nbytes, ecn, rtt, in_flight)


def test_fair_increase_applied_at_fulfill():
    cc = nscc()
    acks(cc, [1 * US + i for i in range(8)], rtt=BASE + 9 * US)  # delay == target
    assert cc.cwnd == 100_000  # accumulated, not applied yet (32,768 B acked)
    assert cc.inc_bytes == pytest.approx(8 * 5 * MSS * MSS)
    acks(cc, [1 * US + 8], rtt=BASE + 9 * US)  # 36,864 B > 8 MTU: fulfill
    assert cc.cwnd == int(100_000 + 9 * 5 * MSS * MSS / 100_000)  # 107,549
    assert cc.inc_bytes == 0


def test_proportional_increase():
    cc = nscc()
    acks(cc, [1 * US + i for i in range(9)], rtt=BASE + 3 * US)
    per_ack = 4 * MSS * 0.75 / (9 * US) * MSS * (6 * US)  # alpha * bytes * (target - delay)
    assert per_ack == pytest.approx(33_554_432)
    assert cc.cwnd == int(100_000 + 9 * per_ack / 100_000)  # 103,019
    assert cc.stats["proportional_increase"] == 9


def test_fast_increase_below_one_microsecond():
    cc = nscc(initial_window_bytes=8192)
    acks(cc, [1 * US, 1 * US + 1], rtt=BASE + US // 2)
    assert cc.cwnd == 8192  # fi_count 8192 is not yet above cwnd
    acks(cc, [1 * US + 2], rtt=BASE + US // 2)
    assert cc.cwnd == 8192 + 1024  # +bytes * 0.25
    acks(cc, [1 * US + 3], rtt=BASE + US // 2)
    assert cc.cwnd == 8192 + 2048  # stays in fast increase
    acks(cc, [1 * US + 4], rtt=BASE + 2 * US)  # delay >= 1 us: leaves fast increase
    assert cc.cwnd == 8192 + 2048 and not cc.increasing


def test_multiplicative_decrease_at_most_once_per_base_rtt():
    cc = nscc()
    cc.avg_delay = 15 * US  # as if congestion had lasted
    rtt = BASE + 15 * US  # this sample keeps the average at 15 us
    factor = 1 - 0.8 * (15 - 9) / 15  # 0.68
    acks(cc, [20 * US], rtt, ecn=True)
    # MD, then the first fulfill adds eta (12 us since the last adjustment)
    assert cc.cwnd == int(int(100_000 * factor) + 614.4) == 68_614
    acks(cc, [21 * US, 25 * US], rtt, ecn=True)  # within one base RTT: no further MD
    assert cc.cwnd == 68_614
    acks(cc, [33 * US], rtt, ecn=True)  # 13 us later: MD again (+ eta)
    assert cc.cwnd == int(int(68_614 * factor) + 614.4) == 47_271
    assert cc.stats["multiplicative_decrease"] == 2


def test_md_factor_floor_is_half():
    cc = nscc()
    cc.avg_delay = 200 * US
    acks(cc, [20 * US], BASE + 200 * US, ecn=True)
    assert cc.cwnd == int(50_000 + 614.4)


def test_ecn_with_low_delay_changes_nothing():
    cc = nscc()
    acks(cc, [1 * US + i for i in range(20)], rtt=BASE + 2 * US, ecn=True)
    assert cc.cwnd == 100_000 and cc.inc_bytes == 0


def test_window_bounds():
    cc = nscc(initial_window_bytes=224_000)
    acks(cc, [1 * US + i for i in range(20)], rtt=BASE)
    assert cc.cwnd == 225_000  # max window = 1.5 BDP
    cc = nscc(initial_window_bytes=5000)
    cc.on_nack(1 * US, 4096)
    assert cc.cwnd == MSS  # min window = 1 MTU


def test_nack_decrease_and_quick_adapt():
    cc = nscc()
    acks(cc, [1 * US], rtt=BASE + 3 * US)  # starts the QA period: ends at 1 + 21 us
    cc.on_nack(5 * US, MSS)  # inside the period: cwnd -= NACKed bytes, QA armed
    assert cc.cwnd == 100_000 - MSS and cc.trigger_qa
    acks(cc, [6 * US + i for i in range(5)], rtt=BASE + 3 * US)  # 20,480 B delivered
    assert cc.cwnd == 100_000 - MSS  # increases still accumulating (< 8 MTU acked)
    acks(cc, [23 * US], rtt=BASE + 3 * US, in_flight=40_000)  # period over: quick adapt
    # cwnd := bytes delivered since the period began (5 ACKs + this one)
    assert cc.cwnd == 6 * MSS
    assert cc.stats["quick_adapt"] == 1 and not cc.trigger_qa
    assert cc.bytes_to_ignore == 40_000
    # ECN-marked ACKs of the packets in flight at QA time are ignored
    cc.avg_delay = 30 * US
    acks(cc, [40 * US + i for i in range(9)], rtt=BASE + 30 * US, ecn=True)
    assert cc.cwnd == 6 * MSS
    acks(cc, [41 * US], rtt=BASE + 30 * US, ecn=True)  # 40,960 >= 40,000: reacts again
    assert cc.cwnd < 6 * MSS


def test_quick_adapt_gate_needs_low_throughput():
    cc = nscc()
    acks(cc, [1 * US], rtt=BASE)
    acks(cc, [2 * US + i for i in range(7)], rtt=BASE)  # 28,672 >= 225,000 >> 3
    cc.on_nack(23 * US, MSS)
    assert cc.stats["quick_adapt"] == 0
    cc = nscc(quick_adapt=False)
    acks(cc, [1 * US], rtt=BASE)
    cc.on_nack(23 * US, MSS)
    assert cc.stats["quick_adapt"] == 0 and cc.cwnd == 100_000 - MSS


def test_quick_adapt_on_very_high_delay():
    cc = nscc()
    acks(cc, [1 * US], rtt=BASE)
    acks(cc, [23 * US], rtt=BASE + 40 * US)  # delay > 4 x target
    assert cc.cwnd == MSS  # nothing delivered in the period but this ACK: the minimum
    assert cc.stats["quick_adapt"] == 1


def test_last_hop_trim_under_rccc_keeps_window():
    p = NsccParams.from_config(config())
    plain, with_credit = Nscc(p), Nscc(p, receiver_credit=True)
    for cc in (plain, with_credit):
        acks(cc, [1 * US], rtt=BASE)
        cc.on_nack(2 * US, MSS, last_hop=True)
    assert plain.cwnd == 100_000 - MSS
    assert with_credit.cwnd == 100_000
    assert with_credit.trigger_qa  # quick adapt still armed


def test_nack_feeds_a_delay_sample_of_one_network_rtt():
    cc = nscc()
    cc.on_nack(1 * US, MSS)
    assert cc.avg_delay == pytest.approx(0.0125 * BASE)


def test_timeout_shrinks_by_packet():
    cc = nscc()
    cc.on_timeout(1 * US, MSS)
    assert cc.cwnd == 100_000 - MSS


def ack_cc(pend=0, restore=False, ooo=0, rcvd=0):
    return PdsAckCc(cc_type=CcType.NSCC, rcv_cwnd_pend=pend, restore_cwnd=restore, ooo_count=ooo,
                    rcvd_bytes=rcvd & 0xFFFFFF)


def test_receiver_penalty_and_restore():
    cc = nscc()
    cc.on_ack(1 * US, MSS, True, BASE + 2 * US, 0, ack_cc(pend=127, rcvd=MSS))
    assert cc.cwnd == 100_000 - MSS  # full penalty: every newly received byte
    cc.on_ack(2 * US, MSS, True, BASE + 2 * US, 0, ack_cc(pend=64, rcvd=2 * MSS))
    assert cc.cwnd == 100_000 - MSS - MSS * 64 // 127
    cc.on_ack(3 * US, MSS, True, BASE + 2 * US, 0, ack_cc(pend=0, rcvd=3 * MSS))
    assert cc.cwnd == 100_000 - MSS - 2064
    cc.on_ack(4 * US, MSS, True, BASE + 2 * US, 0, ack_cc(restore=True, rcvd=4 * MSS))
    assert cc.cwnd == 100_000


def test_acked_bytes_come_from_the_receivers_rcvd_bytes():
    """With NSCC state in the ACK_CC the window is fed the receiver's newly received bytes
    (htsim newly_recvd_bytes), not what the PDS could name: arrivals beyond the 64-packet
    SACK bitmap count with the ACK that reported them, and are not counted again when the
    PDS names them later. Stale counts give nothing; the 24-bit counter wraps."""
    fed = []

    class Fed(Nscc):  # a subclass: the Python form of on_ack runs, and shows what it feeds
        __slots__ = ()

        def _react(self, now, skip, delay, newly):
            fed.append(newly)
            super()._react(now, skip, delay, newly)

    cc = Fed(nscc().p)
    cc.on_ack(1 * US, MSS, False, BASE, 0, ack_cc(rcvd=10 * MSS))  # PDS named 1 of 10
    cc.on_ack(2 * US, 9 * MSS, False, BASE, 0, ack_cc(rcvd=10 * MSS))  # the rest named now
    cc.on_ack(3 * US, 0, False, BASE, 0, ack_cc(rcvd=4 * MSS))  # overtaken ACK: stale
    # plain ACK (no rcvd_bytes): the PDS's count, not credited again by the next ACK_CC
    cc.on_ack(4 * US, MSS, False, BASE, 0, None)
    cc.on_ack(5 * US, MSS, False, BASE, 0, ack_cc(rcvd=12 * MSS))
    assert fed == [10 * MSS, 0, 0, MSS, MSS]
    cc.rcvd_raw = cc.rcvd_total = cc.credited = (1 << 24) - MSS  # about to wrap
    cc.on_ack(6 * US, MSS, False, BASE, 0, ack_cc(rcvd=MSS))  # (2^24 - MSS + 2 MSS) mod 2^24
    assert fed[-1] == 2 * MSS and cc.rcvd_total == (1 << 24) + MSS


def test_ooo_count_hint():
    cc = nscc()
    cc.on_ack(1 * US, MSS, False, BASE, 0, ack_cc(ooo=3))
    assert not cc.loss_suspected
    cc.on_ack(2 * US, MSS, False, BASE, 0, ack_cc(ooo=40))  # >= 1.5 cwnd / MTU
    assert cc.loss_suspected


def test_base_rtt_adapts_down_and_delay_ewma():
    cc = nscc(adapt_base_rtt=True)
    acks(cc, [1 * US], rtt=10 * US)
    assert cc.base_rtt == 10 * US and cc.bdp == 125_000 and cc.max_wnd == 187_500
    acks(cc, [2 * US], rtt=14 * US)
    assert cc.avg_delay == pytest.approx(0.0125 * 4 * US)
    acks(cc, [3 * US], rtt=30 * US)  # un-marked sample above target counts as RTT / 4
    assert cc.avg_delay == pytest.approx(0.0125 * 2.5 * US + 0.9875 * 0.0125 * 4 * US)


def test_sender_wiring_through_the_factory():
    cc = make_sender(config(), random.Random(1))
    assert not cc.credit_based and cc.rccc is None
    assert cc.can_send(0, nbytes=MSS, in_flight=100_000 - MSS)
    assert not cc.can_send(0, nbytes=MSS, in_flight=100_000 - MSS + 1)
    fb = AckFeedback(
        ev=1,
        ecn_echo=False,
        newly_acked_bytes=MSS,
        newly_acked_packets=1,
        rtt_sample=BASE + 3 * US,
        in_flight_bytes=0,
    )
    for i in range(9):
        cc.on_ack(1 * US + i, fb=fb)
    assert cc.cwnd == 103_019
    cc.on_nack(2 * US, fb=NackFeedback(ev=1, code=NackCode.TRIMMED, nbytes=MSS))
    assert cc.cwnd == 103_019 - MSS
    cc.on_nack(3 * US, fb=NackFeedback(ev=1, code=NackCode.NO_RESOURCE, nbytes=MSS))
    assert cc.cwnd == 103_019 - MSS  # not a congestion signal
    assert cc.next_deadline() is None
