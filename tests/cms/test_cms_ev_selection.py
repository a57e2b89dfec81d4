"""EV selectors: fixed, oblivious, bitmap, REPS, mixed (htsim uec_mp.cpp semantics)."""

import random
from collections import Counter

import pytest

from uet.cms import AckFeedback, CmsConfig, NackFeedback, make_sender
from uet.cms.ev_selection import (
    BitmapEv,
    FixedEv,
    MixedEv,
    ObliviousEv,
    PathFeedback,
    RepsBuffer,
    RepsEv,
    make_ev_selector,
)
from uet.wire.constants import NackCode


def picks(sel, k, now=0):
    return [sel.next_ev(now) for _ in range(k)]


def test_fixed_stays_fixed_and_differs_per_pdc():
    rng = random.Random(7)
    a, b = FixedEv(rng), FixedEv(rng)
    assert len(set(picks(a, 500))) == 1
    assert a.ev != b.ev
    a.feedback(0, a.ev, PathFeedback.TIMEOUT)  # feedback never moves it
    assert set(picks(a, 10)) == {a.ev}
    assert 0 <= a.ev <= 0xFFFF


def test_fixed_is_seed_deterministic():
    assert FixedEv(random.Random(3)).ev == FixedEv(random.Random(3)).ev


def test_oblivious_even_spread_over_n():
    sel = ObliviousEv(random.Random(1), 8)
    evs = picks(sel, 8 * 100)
    upper = {e & ~7 for e in evs}
    assert len(upper) == 1  # upper bits fixed per PDC
    # every round of 8 is a permutation of the 8 low indices
    for r in range(100):
        assert sorted(e & 7 for e in evs[8 * r : 8 * r + 8]) == list(range(8))
    assert Counter(e & 7 for e in evs) == {i: 100 for i in range(8)}
    # the XOR mask is re-drawn: rounds are not all in the same order
    orders = {tuple(e & 7 for e in evs[8 * r : 8 * r + 8]) for r in range(100)}
    assert len(orders) == 8  # one order per mask value


def test_oblivious_128_and_pdcs_differ():
    rng = random.Random(5)
    a, b = ObliviousEv(rng, 128), ObliviousEv(rng, 128)
    assert len(set(picks(a, 128))) == 128
    assert picks(a, 1)[0] & ~127 != picks(b, 1)[0] & ~127


@pytest.mark.parametrize("n", [0, 3, 100, 1 << 17])
def test_ev_count_must_be_power_of_two(n):
    with pytest.raises(ValueError, match="ev_count"):
        ObliviousEv(random.Random(1), n)


def test_bitmap_penalties_skip_and_decay():
    n = 8
    sel = BitmapEv(random.Random(2), n)
    first = picks(sel, n)  # one full round
    victim = first[3]
    sel.feedback(0, victim, PathFeedback.NACK)  # +4
    assert sel.penalty[victim & 7] == 4
    seen = []
    for _ in range(6):
        rnd = picks(sel, n - 1)  # 7 picks: the skipped EV costs a slot each round
        seen.append(victim in rnd)
    # skipped (and decremented) in 4 rounds, then back
    assert sel.penalty[victim & 7] == 0
    assert seen[:4] == [False] * 4
    assert any(seen[4:])


def test_bitmap_penalty_values_and_cap():
    sel = BitmapEv(random.Random(2), 16)
    sel.feedback(0, 5, PathFeedback.ECN)
    assert sel.penalty[5] == 1
    sel.feedback(0, 5, PathFeedback.NACK)
    assert sel.penalty[5] == 5
    sel.feedback(0, 5, PathFeedback.TIMEOUT)
    assert sel.penalty[5] == 15  # capped
    sel.feedback(0, 6, PathFeedback.GOOD)
    assert sel.penalty[6] == 0
    sel.feedback(0, 0x1234 | 7, PathFeedback.ECN)  # only the index bits count
    assert sel.penalty[7] == 1


def test_bitmap_all_penalised_still_returns():
    sel = BitmapEv(random.Random(2), 4)
    for i in range(4):
        sel.feedback(0, i, PathFeedback.TIMEOUT)
    ev = sel.next_ev(0)
    assert 0 <= ev <= 0xFFFF


def test_bitmap_avoids_a_bad_path():
    """A path that NACKs every packet is used far less than its 1/n share."""
    n = 8
    sel = BitmapEv(random.Random(4), n)
    bad = sel.next_ev(0) & 7
    used = Counter()
    for _ in range(8000):
        ev = sel.next_ev(0)
        used[ev & 7] += 1
        if ev & 7 == bad:
            sel.feedback(0, ev, PathFeedback.NACK)
    assert used[bad] < 8000 / n / 3


def test_reps_recycles_good_evs_fifo():
    sel = RepsEv(random.Random(9), 128)
    for ev in (11, 22, 33):
        sel.feedback(0, ev, PathFeedback.GOOD)
    sel.feedback(0, 44, PathFeedback.ECN)  # marked: not recycled
    sel.feedback(0, 55, PathFeedback.NACK)
    assert picks(sel, 3) == [11, 22, 33]
    rest = picks(sel, 50)  # buffer drained: random EVs (with this PDC's upper bits)
    assert len(set(rest)) > 30
    assert {e & ~127 for e in rest} == {sel.upper}


def test_reps_buffer_overwrites_oldest():
    buf = RepsBuffer(4)
    for ev in range(1, 7):
        buf.add(ev)
    assert buf.count == 4 and buf.fresh == 4
    assert [buf.pop_fresh() for _ in range(4)] == [3, 4, 5, 6]
    assert buf.fresh == 0


def test_reps_frozen_mode_reuses_known_good_then_explores():
    ms = 1_000_000_000
    sel = RepsEv(random.Random(9), 128, freeze_ps=10 * ms)
    for ev in (1, 2, 3):
        sel.feedback(0, ev, PathFeedback.GOOD)
    assert sel.next_ev(0) == 1  # normal mode consumes one
    sel.feedback(ms, 0, PathFeedback.TIMEOUT)
    assert sel.frozen
    # frozen: keep cycling through the stored EVs even without new good ACKs
    assert picks(sel, 6, now=2 * ms) == [1, 2, 3, 1, 2, 3]
    sel.feedback(5 * ms, 7, PathFeedback.GOOD)  # still frozen, good EVs are stored
    assert sel.frozen and 7 in picks(sel, 4, now=5 * ms)
    # a later timeout while frozen does not extend it; the next feedback after 11 ms
    # leaves frozen mode, resets the buffer and explores 16 random EVs
    sel.feedback(12 * ms, 99, PathFeedback.ECN)
    assert not sel.frozen and sel.buffer.count == 0 and sel.explore_left == 16
    sel.feedback(12 * ms, 5, PathFeedback.GOOD)
    explore = picks(sel, 16, now=12 * ms)
    assert sel.explore_left == 0
    assert sel.next_ev(12 * ms) == 5  # then recycling resumes
    assert len(set(explore)) > 8
    # no freeze while exploring after the reset
    sel2 = RepsEv(random.Random(1), 128)
    sel2.explore_left = 3
    sel2.feedback(0, 0, PathFeedback.TIMEOUT)
    assert not sel2.frozen


def test_reps_without_trimming_never_freezes():
    sel = RepsEv(random.Random(9), 128, trimming=False)
    sel.feedback(0, 1, PathFeedback.GOOD)
    sel.feedback(0, 1, PathFeedback.TIMEOUT)
    assert not sel.frozen


def test_mixed_recycles_good_evs_first_then_bitmap():
    """htsim UecMpMixed: un-marked ACKs' EVs come back first (FIFO, full 16-bit EV);
    with the FIFO empty the bitmap chooses, and the bitmap sees every penalty."""
    n = 8
    sel = MixedEv(random.Random(5), n)
    ref = BitmapEv(random.Random(5), n)  # same rng draws: the bitmap part alone
    assert picks(sel, n) == picks(ref, n)
    sel.feedback(0, 0x1234, PathFeedback.GOOD)
    sel.feedback(0, 0x5678, PathFeedback.GOOD)
    sel.feedback(0, 0x0003, PathFeedback.ECN)  # marked: penalised, not recycled
    ref.feedback(0, 0x0003, PathFeedback.ECN)
    sel.feedback(0, 0x0004, PathFeedback.NACK)  # trimmed: penalised, not recycled
    ref.feedback(0, 0x0004, PathFeedback.NACK)
    assert sel.penalty == ref.penalty and sel.penalty[3] == 1 and sel.penalty[4] == 4
    assert picks(sel, 2) == [0x1234, 0x5678]
    # recycling did not move the bitmap's cycle: it resumes where it was
    assert picks(sel, 3 * n) == picks(ref, 3 * n)


def test_mixed_fifo_is_bounded():
    sel = MixedEv(random.Random(5), 8)
    for ev in range(1000):
        sel.feedback(0, ev, PathFeedback.GOOD)
    assert len(sel.recycled) == 64  # max(n, 64): the oldest are dropped
    assert sel.next_ev(0) == 1000 - 64


def test_mixed_avoids_a_marked_path_faster_than_bitmap():
    """Feedback loop: one path of eight always marks, the others never; an ACK comes back
    for every fourth good packet (coalesced) and for every marked one. Recycling good EVs
    keeps the marked path's share below the bitmap's."""
    def share(sel):
        used, bad, pending = Counter(), None, 0
        for _ in range(4000):
            ev = sel.next_ev(0)
            bad = ev & 7 if bad is None else bad
            used[ev & 7 == bad] += 1
            if ev & 7 == bad:
                sel.feedback(0, ev, PathFeedback.ECN)
            else:
                pending += 1
                if pending == 4:
                    pending = 0
                    sel.feedback(0, ev, PathFeedback.GOOD)
        return used[True] / 4000
    mixed, bitmap = share(MixedEv(random.Random(6), 8)), share(BitmapEv(random.Random(6), 8))
    assert mixed < bitmap < 1 / 8


def test_make_ev_selector_rejects_unknown():
    with pytest.raises(ValueError, match="ev_selector"):
        make_ev_selector("ecmp", random.Random(1))


def ack(ev, ecn=False):
    return AckFeedback(
        ev=ev,
        ecn_echo=ecn,
        newly_acked_bytes=4096,
        newly_acked_packets=1,
        rtt_sample=None,
        in_flight_bytes=0,
    )


def test_rod_pdcs_get_a_fixed_ev_whatever_the_selector():
    for name in ("oblivious", "bitmap", "reps", "mixed"):
        cc = make_sender(CmsConfig(ev_selector=name), random.Random(1), ordered=True)
        evs = {cc.choose_ev(t) for t in range(300)}
        assert len(evs) == 1
        cc.on_timeout(0, ev=evs.pop(), nbytes=4096)
        assert len({cc.choose_ev(t) for t in range(50)}) == 1


def test_sender_attributes_feedback_by_echoed_ev():
    cc = make_sender(CmsConfig(ev_selector="bitmap", ev_count=8), random.Random(3))
    sel = cc.selector
    cc.on_ack(0, fb=ack(0x40 | 2, ecn=True))
    assert sel.penalty[2] == 1
    cc.on_nack(0, fb=NackFeedback(ev=3, code=NackCode.TRIMMED, nbytes=4096))
    assert sel.penalty[3] == 4
    # last-hop trims do not penalise the EV; a non-congestion NACK is ignored
    cc.on_nack(0, fb=NackFeedback(ev=4, code=NackCode.TRIMMED_LASTHOP, nbytes=4096))
    cc.on_nack(0, fb=NackFeedback(ev=5, code=NackCode.NO_PKT_BUFFER, nbytes=4096))
    cc.on_nack(0, fb=NackFeedback(ev=6, code=NackCode.RCVR_INFER_LOSS, nbytes=4096))
    assert sel.penalty[4] == sel.penalty[5] == sel.penalty[6] == 0
    cc.on_timeout(0, ev=7, nbytes=4096)
    assert sel.penalty[7] == 15
    # a loss the sender inferred itself (RACK) names the lost packet's own EV: penalised
    cc.on_nack(0, fb=NackFeedback(ev=1, code=NackCode.RCVR_INFER_LOSS, nbytes=4096, own_ev=True))
    assert sel.penalty[1] == 4


def test_reps_sender_recycles_acked_evs_not_last_hop_penalised():
    cc = make_sender(CmsConfig(ev_selector="reps"), random.Random(3))
    cc.on_ack(0, fb=ack(1000))
    cc.on_nack(0, fb=NackFeedback(ev=2000, code=NackCode.TRIMMED_LASTHOP, nbytes=4096))
    cc.on_nack(0, fb=NackFeedback(ev=3000, code=NackCode.TRIMMED, nbytes=4096))
    assert [cc.choose_ev(0), cc.choose_ev(0)] == [1000, 2000]
