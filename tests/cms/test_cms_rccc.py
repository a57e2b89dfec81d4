"""RCCC: sender credit, the shared per-end-point credit scheduler, CREDIT / CREDIT_REQ.

Reference setting: 100 Gb/s, no per-packet overhead, credit paced at exactly the link rate:
one 256-byte credit unit takes 20,480 ps; a pull (4 MTU = 16 KiB = 64 units) 1,310,720 ps.
"""

import random

from uet.cms import AckFeedback, CmsConfig, NackFeedback, make_credit_scheduler, make_sender
from uet.cms.factory import make_receiver
from uet.cms.nscc import max_window_bytes
from uet.cms.rccc import CreditGrant, serial_diff24
from uet.wire.constants import CcType, NackCode
from uet.wire.records import PdsAckCc

US = 1_000_000
MSS = 4096
PULL_PS = 1_310_720


def config(**kw):
    base = dict(algorithm="rccc", pkt_overhead_bytes=0, credit_rate=1.0, idle_credit=False)
    base.update(kw)
    return CmsConfig(**base)


MAXWND = max_window_bytes(config())


def ack(ack_cc=None, ecn=False):
    return AckFeedback(
        ev=1,
        ecn_echo=ecn,
        newly_acked_bytes=MSS,
        newly_acked_packets=1,
        rtt_sample=14 * US,
        in_flight_bytes=0,
        ack_cc=ack_cc,
    )


def test_speculative_credit_then_no_send_without_credit():
    cc = make_sender(config(), random.Random(1))
    assert cc.credit_based and cc.credit.credit == MAXWND == 262_875
    sent = 0
    while cc.can_send(0, nbytes=MSS, in_flight=sent):
        cc.on_send(0, nbytes=MSS, ev=cc.choose_ev(0), retx=False)
        sent += MSS
    assert sent == -(-MAXWND // MSS) * MSS  # may overshoot by less than one packet
    assert cc.credit.credit <= 0
    assert not cc.can_send(0, nbytes=MSS, in_flight=0)
    assert not cc.can_send(0, nbytes=MSS, in_flight=0, retx=True)


def test_waiting_for_credit_says_since_when_and_ends_with_a_grant():
    """docs/pds.md RTO: the PDS asks how long a credit-starved PDC has waited (its queued
    packets do not age while the scheduler is heard from); a grant ends the wait."""
    cc = make_sender(config(), random.Random(1))
    assert cc.waiting_for_credit() is None
    cc.on_send(0, nbytes=MAXWND + 100, ev=1, retx=False)  # speculative credit spent
    assert not cc.can_send(5 * US, nbytes=MSS, in_flight=0) and cc.waiting_for_credit() == 5 * US
    assert not cc.can_send(9 * US, nbytes=MSS, in_flight=0) and cc.waiting_for_credit() == 5 * US
    cc.on_credit(10 * US, credit=64)
    assert cc.waiting_for_credit() is None


def test_first_feedback_drops_unused_speculative_credit():
    cc = make_sender(config(), random.Random(1))
    cc.on_send(0, nbytes=MSS, ev=1, retx=False)
    cc.on_ack(14 * US, fb=ack())
    assert cc.credit.credit == 0 and not cc.credit.speculating
    assert not cc.can_send(14 * US, nbytes=MSS, in_flight=0)
    # an overdraft is kept (credit may be negative by less than a packet)
    cc2 = make_sender(config(), random.Random(1))
    cc2.on_send(0, nbytes=MAXWND + 100, ev=1, retx=False)
    cc2.on_nack(1 * US, fb=NackFeedback(ev=1, code=NackCode.TRIMMED_LASTHOP, nbytes=MSS))
    assert cc2.credit.credit == -100


def test_cumulative_credit_is_idempotent_and_capped():
    cc = make_sender(config(), random.Random(1))
    cc.on_credit(1 * US, credit=64)  # first feedback: speculation ends, then +64 units
    assert cc.credit.credit == 64 * 256
    cc.on_credit(2 * US, credit=64)  # duplicate
    cc.on_credit(2 * US, credit=32)  # stale / reordered
    assert cc.credit.credit == 64 * 256
    cc.on_credit(3 * US, credit=128)
    assert cc.credit.credit == 128 * 256 and cc.can_send(3 * US, nbytes=MSS, in_flight=0)
    cc.on_credit(4 * US, credit=100_000)
    assert cc.credit.credit == MAXWND  # capped at the max window
    cc.on_credit(5 * US, credit=(100_000 + 10) & 0xFFFFFF)
    assert cc.credit.credit == MAXWND
    # ACK_CC with cc_type 1 carries the same cumulative counter
    cc.on_send(6 * US, nbytes=MAXWND, ev=1, retx=False)
    cc.on_ack(7 * US, fb=ack(PdsAckCc(cc_type=CcType.CREDIT, credit=100_020)))
    assert cc.credit.credit == 10 * 256


def test_serial_arithmetic_wraps():
    assert serial_diff24(3, 0xFFFFFE) == 5
    assert serial_diff24(0xFFFFFE, 3) == -5
    cc = make_sender(config(), random.Random(1))
    cc.credit.pull = 0xFFFFF0
    cc.on_credit(0, credit=0x10)
    assert cc.credit.credit == 0x20 * 256 and cc.credit.pull == 0x10


def test_credit_target_from_backlog():
    cc = make_sender(config(), random.Random(1))
    assert cc.credit_target() == 0  # speculative credit covers the max window
    cc.on_backlog(0, backlog_bytes=1_000_000)
    # speculating with credit covering the max window: still ask for one MTU
    assert cc.credit_target() == MSS // 256
    cc.on_ack(1 * US, fb=ack())  # credit 0 now
    assert cc.credit_target() == -(-MAXWND // 256)
    cc.on_backlog(1 * US, backlog_bytes=10_000)
    assert cc.credit_target() == -(-10_000 // 256)  # 40 units
    cc.on_credit(2 * US, credit=30)  # 7,680 B of credit: 2,320 B still wanted
    assert cc.credit_target() == 30 + 10
    cc.on_backlog(3 * US, backlog_bytes=0)
    assert cc.credit_target() == 30  # nothing more wanted: no advance


def test_credit_target_limited_by_nscc_window():
    cc = make_sender(config(algorithm="nscc+rccc", initial_window_bytes=50_000), random.Random(1))
    cc.on_backlog(0, backlog_bytes=1_000_000)
    cc.on_ack(1 * US, fb=ack())
    assert cc.credit_target() == -(-(50_000 + MSS) // 256)


def test_nscc_plus_rccc_needs_window_and_credit():
    cc = make_sender(config(algorithm="nscc+rccc", initial_window_bytes=3 * MSS), random.Random(1))
    assert cc.can_send(0, nbytes=MSS, in_flight=2 * MSS)
    assert not cc.can_send(0, nbytes=MSS, in_flight=2 * MSS + 1)
    cc.on_ack(1 * US, fb=ack())
    assert not cc.can_send(1 * US, nbytes=MSS, in_flight=0)  # window open, no credit
    cc.on_credit(2 * US, credit=16)
    assert cc.can_send(2 * US, nbytes=MSS, in_flight=0)
    # a last-hop trim does not shrink the window under RCCC
    before = cc.cwnd
    cc.on_nack(3 * US, fb=NackFeedback(ev=1, code=NackCode.TRIMMED_LASTHOP, nbytes=MSS))
    assert cc.cwnd == before


def test_scheduler_paces_at_link_rate_and_coalesces():
    sched = make_credit_scheduler(config())
    rx = make_receiver(config(), sched, key="pdc-a")
    assert rx.cc_type == CcType.CREDIT
    assert sched.next_deadline() is None
    # wants 10,000 units
    rx.on_data(0, nbytes=MSS, ecn_ce=False, credit_target=10_000, in_order=True)
    assert sched.next_deadline() == 0
    assert sched.poll_grants(0) == [CreditGrant("pdc-a", 64)]
    assert sched.next_deadline() == PULL_PS
    assert sched.poll_grants(PULL_PS - 1) == []
    # three more pulls by 5 us, coalesced into one cumulative grant
    assert sched.poll_grants(5 * US) == [("pdc-a", 256)]
    assert sched.next_deadline() == 4 * PULL_PS
    # over 100 us the grants match the link rate: one pull per 1.31072 us
    grants = sched.poll_grants(100 * US)
    assert grants == [("pdc-a", 64 * (100 * US // PULL_PS + 1))]
    granted_bytes = grants[0].payload * 256
    assert abs(granted_bytes - 100e-6 * 100e9 / 8) <= 16384
    # stops at the target: the last pull grants the remainder only
    last = sched.poll_grants(1000 * US)
    assert last == [("pdc-a", 10_000)]
    assert sched.poll_grants(2000 * US) == [] and sched.next_deadline() is None


def test_credit_rate_and_overhead_slow_the_pacer():
    cfg = CmsConfig(algorithm="rccc")  # 0.99 of 100G, 64 B overhead per 4096 B
    sched = make_credit_scheduler(cfg)
    rx = make_receiver(cfg, sched)
    rx.on_data(0, nbytes=MSS, ecn_ce=False, credit_target=10_000, in_order=True)
    sched.poll_grants(0)
    assert sched.next_deadline() == -(-64 * 256 * 8 * 10**12 * 4160 // (4096 * 99 * 10**9))


def test_incast_shares_the_receiver_link():
    cfg = config()
    sched = make_credit_scheduler(cfg)
    rxs = [make_receiver(cfg, sched, key=i) for i in range(4)]
    for rx in rxs:
        rx.on_data(0, nbytes=MSS, ecn_ce=False, credit_target=100_000, in_order=True)
    got = dict(sched.poll_grants(40 * PULL_PS - 1))
    assert got == {0: 640, 1: 640, 2: 640, 3: 640}  # 10 pulls each, round robin
    # the four together get exactly one link's worth of credit
    total = sum(got.values()) * 256
    assert total == 40 * 16384
    # separate schedulers (no sharing) would each grant the full rate
    lone = make_credit_scheduler(cfg)
    rx = make_receiver(cfg, lone)
    rx.on_data(0, nbytes=MSS, ecn_ce=False, credit_target=100_000, in_order=True)
    assert lone.poll_grants(40 * PULL_PS - 1)[0].payload == 40 * 64


def test_new_sender_joins_round_robin():
    cfg = config()
    sched = make_credit_scheduler(cfg)
    a, b = make_receiver(cfg, sched, key="a"), make_receiver(cfg, sched, key="b")
    a.on_data(0, nbytes=MSS, ecn_ce=False, credit_target=100_000, in_order=True)
    assert dict(sched.poll_grants(10 * PULL_PS - 1)) == {"a": 640}
    b.on_data(10 * PULL_PS - 1, nbytes=MSS, ecn_ce=False, credit_target=100_000, in_order=True)
    got = dict(sched.poll_grants(20 * PULL_PS - 1))
    assert got["a"] - 640 == 5 * 64 and got["b"] == 5 * 64


def test_ack_cc_piggybacks_credit_and_clears_pending():
    cfg = config()
    sched = make_credit_scheduler(cfg)
    rx = make_receiver(cfg, sched, key=7)
    rx.on_data(0, nbytes=MSS, ecn_ce=False, credit_target=100, in_order=True, ooo_count=2)
    ack_cc = PdsAckCc()
    rx.fill_ack_cc(0, ack=ack_cc)
    assert ack_cc.cc_type == CcType.CREDIT and ack_cc.credit == 64 and ack_cc.ooo_count == 2
    assert sched.poll_grants(0) == []  # the ACK already carried it
    assert rx.credit_grant(PULL_PS) == 100  # the per-PDC way to collect a grant
    assert sched.poll_grants(PULL_PS) == []


def test_idle_credit_up_to_max_window():
    cfg = config(idle_credit=True)
    sched = make_credit_scheduler(cfg)
    rx = make_receiver(cfg, sched, key=1)
    rx.on_data(0, nbytes=MSS, ecn_ce=False, credit_target=64, in_order=True)
    assert sched.poll_grants(0) == [(1, 64)]
    # demand met: idle credit, one pull at a time, up to the max window beyond the target
    total = sched.poll_grants(1000 * US)[0].payload
    assert total - 64 >= MAXWND // 256 and total - 64 < MAXWND // 256 + 64
    assert sched.next_deadline() is None or sched.poll_grants(2000 * US) == []
    assert sched.next_deadline() is None


def test_credit_request_when_blocked():
    base = CmsConfig().base_rtt_ps
    cc = make_sender(config(), random.Random(1))
    cc.on_backlog(0, backlog_bytes=100_000)
    assert cc.poll_credit_request(0) is None  # speculative credit: not blocked
    cc.on_ack(1 * US, fb=ack())
    target = cc.poll_credit_request(1 * US)
    assert target == -(-100_000 // 256)
    assert cc.poll_credit_request(2 * US) is None  # nothing new, rate limited
    cc.on_backlog(3 * US, backlog_bytes=200_000)  # e.g. NACKed packets to retransmit
    assert cc.next_deadline() == 1 * US + base
    assert cc.poll_credit_request(1 * US + base - 1) is None
    assert cc.poll_credit_request(1 * US + base) == -(-200_000 // 256)
    # still no credit long after: ask again (a CREDIT may have been lost)
    t = 1 * US + base
    assert cc.next_deadline() == t + 8 * base
    assert cc.poll_credit_request(t + 8 * base) == -(-200_000 // 256)
    cc.on_credit(t + 9 * base, credit=10)
    assert cc.next_deadline() is None and cc.poll_credit_request(t + 9 * base) is None


def test_receiver_answers_credit_request_and_trims():
    cfg = config()
    sched = make_credit_scheduler(cfg)
    rx = make_receiver(cfg, sched, key=3)
    rx.on_data(0, nbytes=MSS, ecn_ce=False, credit_target=64, in_order=True)
    assert sched.poll_grants(0) == [(3, 64)]
    # CREDIT_REQ with the same target: re-advertise what was granted (lost CREDIT?)
    rx.on_credit_request(10 * US, credit_target=64)
    assert sched.poll_grants(10 * US) == [(3, 64)]
    # a trimmed request carrying a higher target schedules more credit
    rx.on_credit_request(20 * US, credit_target=200)
    assert sched.poll_grants(20 * US) == [(3, 128)]


def test_close_releases_the_scheduler_entry():
    cfg = config()
    sched = make_credit_scheduler(cfg)
    a, b = make_receiver(cfg, sched, key="a"), make_receiver(cfg, sched, key="b")
    a.on_data(0, nbytes=MSS, ecn_ce=False, credit_target=10_000, in_order=True)
    b.on_data(0, nbytes=MSS, ecn_ce=False, credit_target=10_000, in_order=True)
    a.close()
    got = dict(sched.poll_grants(10 * PULL_PS - 1))
    assert "a" not in got and got["b"] == 640


def test_private_scheduler_when_none_given():
    rx = make_receiver(config())
    rx.on_data(0, nbytes=MSS, ecn_ce=False, credit_target=64, in_order=True)
    assert rx.credit_grant(0) == 64
