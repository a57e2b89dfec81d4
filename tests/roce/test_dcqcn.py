"""DCQCN: the reaction point follows the algorithm's equations step by step (scripted, and
for a single congested flow on a real fabric, replayed from its trace), the NIC paces each
QP at its rate, and the notification point sends at most one CNP per interval per QP."""

from __future__ import annotations

import pytest
from harness import rig

from uet.fabric.clock import ser_ps
from uet.roce.config import DcqcnConfig, RoceConfig
from uet.roce.constants import Opcode
from uet.roce.dcqcn import NotificationPoint, ReactionPoint, RpPhase

US = 1_000_000
LINE = 100e9


class Reference:
    """The DCQCN equations, written out plainly (independently of uet.roce.dcqcn)."""

    def __init__(self, cfg: DcqcnConfig, line: float) -> None:
        self.c = cfg
        self.line = line
        self.rc = self.rt = line
        self.alpha = cfg.alpha_init
        self.last_cnp = None
        self.t = self.bc = 0
        self.rai = line / 20 if cfg.rai_mbps is None else cfg.rai_mbps * 1e6
        self.rhai = line / 10 if cfg.rhai_mbps is None else cfg.rhai_mbps * 1e6

    def cnp(self, now: int) -> None:
        g, k = self.c.g, round(self.c.alpha_timer_us * US)
        if self.last_cnp is not None:
            for _ in range((now - self.last_cnp) // k):  # alpha timer: alpha *= (1 - g)
                self.alpha *= 1 - g
        self.rt = self.rc
        self.rc = max(self.rc * (1 - self.alpha / 2), self.c.min_rate_mbps * 1e6)
        self.alpha = (1 - g) * self.alpha + g
        self.last_cnp = now
        self.t = self.bc = 0

    def increase(self, timer: bool) -> None:
        if timer:
            self.t += 1
        else:
            self.bc += 1
        f = self.c.threshold_f
        if max(self.t, self.bc) <= f:
            pass  # fast recovery
        elif min(self.t, self.bc) > f:
            self.rt += (min(self.t, self.bc) - f) * self.rhai
        else:
            self.rt += self.rai
        self.rc = min((self.rt + self.rc) / 2, self.line)


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-9 * max(abs(a), abs(b), 1.0)


def test_reaction_point_matches_the_equations_step_by_step():
    cfg = DcqcnConfig(byte_counter=1_000_000, rai_mbps=400, rhai_mbps=4000)
    rp = ReactionPoint(cfg, LINE, trace=True)
    ref = Reference(cfg, LINE)
    period = round(cfg.rate_timer_us * US)
    now = 0
    # a burst of CNPs, a quiet stretch of timer and byte events, CNPs again, then recovery
    script = [("cnp", 10 * US), ("cnp", 40 * US), ("cnp", 41 * US)]
    script += [("bytes", 41 * US + i * 7 * US) for i in range(1, 40)]
    script += [("cnp", 400 * US), ("cnp", 700 * US)]
    script += [("bytes", 700 * US + i * 3 * US) for i in range(1, 400)]
    for kind, at in sorted(script, key=lambda x: x[1]):
        # timer events due before ``at`` first, in both models
        while rp.next_deadline() is not None and rp.next_deadline() <= at:
            t = rp.next_deadline()
            rp.handle_timer(t)
            ref.increase(timer=True)
            assert _close(rp.rc, ref.rc) and _close(rp.rt, ref.rt), t
            assert t == ref.last_cnp + rp.t * period
        now = at
        if kind == "cnp":
            rp.on_cnp(now)
            ref.cnp(now)
        else:
            before = rp.bc
            rp.on_sent(now, 1_000_000)
            if rp.bc != before:
                ref.increase(timer=False)
        assert _close(rp.rc, ref.rc) and _close(rp.rt, ref.rt), (kind, now)
        assert _close(rp.alpha, ref.alpha) or kind != "cnp"
    assert {e[1] for e in rp.trace} == {"cnp", "timer", "bytes"}
    # every phase was visited, and the rate came back to the line rate
    assert {e[7] for e in rp.trace} == {p.value for p in RpPhase}
    assert rp.rc == LINE and rp.next_deadline() is None


def test_min_decrease_interval_ignores_close_cnps():
    rp = ReactionPoint(DcqcnConfig(min_decrease_interval_us=4.0), LINE)
    rp.on_cnp(0)
    r1 = rp.rc
    rp.on_cnp(3 * US)
    assert rp.rc == r1 and rp.cnps == 2
    rp.on_cnp(4 * US)
    assert rp.rc < r1


def test_notification_point_paces_cnps():
    np_ = NotificationPoint(DcqcnConfig(cnp_interval_us=50.0))
    sent = []
    for i in range(0, 300):  # a CE-marked packet every microsecond for 300 us
        now = i * US
        d = np_.next_deadline()
        if d is not None and d <= now and np_.handle_timer(d):
            sent.append(d)
        if np_.on_ce(now):
            sent.append(now)
    assert sent == [0, 50 * US, 100 * US, 150 * US, 200 * US, 250 * US]
    # the marks after 250 us get their CNP when the interval ends, not before
    assert np_.next_deadline() == 300 * US
    assert not np_.handle_timer(300 * US - 1) and np_.handle_timer(300 * US)
    assert not np_.on_ce(320 * US) and np_.next_deadline() == 350 * US
    assert np_.handle_timer(350 * US) and np_.next_deadline() is None
    # a lone mark after a quiet interval is answered at once
    assert np_.on_ce(500 * US)


@pytest.fixture(scope="module")
def congested():
    """One flow from h0 through a switch whose port to h1 runs at 40 Gb/s: the queue
    builds, the switch marks CE, h1 sends CNPs, h0's QP slows down."""
    topo = {"kind": "star", "hosts": 2, "ecn_kmin": 20_000, "ecn_kmax": 100_000,
            "impairments": [{"at": "sw0.p1", "direction": "tx", "rate_bps": 40 * 10**9}]}
    r = rig(RoceConfig(), topology=topo, trace_rates=True, sink_bytes=16_000_000)
    sent = []
    r.net.nics[0].taps.append(lambda now, data, d: sent.append((now, len(data), data))
                              if d == "tx" else None)
    msg = r.eps[0].send_message(0, 1, 16_000_000)
    r.poke(0)
    r.run()
    assert msg.ok
    return r, sent


def test_single_congested_flow_follows_the_equations(congested):
    r, _sent = congested
    qp = r.eps[0].qp(1)
    rp = qp.rp
    trace = rp.trace
    assert len([e for e in trace if e[1] == "cnp"]) == r.eps[1].stats["tx_cnp"] > 3
    cfg = rp.cfg
    ref = Reference(cfg, LINE)
    period = round(cfg.rate_timer_us * US)
    for now, event, rc, rt, alpha, t, bc, _phase in trace:
        if event == "cnp":
            ref.cnp(now)
            assert _close(alpha, ref.alpha)
        elif event == "timer":
            assert now == ref.last_cnp + t * period  # the timer runs from the last CNP
            ref.increase(timer=True)
        else:
            ref.increase(timer=False)
        assert _close(rc, ref.rc) and _close(rt, ref.rt), (now, event)
        assert (t, bc) == (ref.t, ref.bc)
    assert min(e[2] for e in trace) < 40e9  # it was cut below the bottleneck


def test_nic_paces_each_qp_at_its_rate(congested):
    """While the QP's rate is below the line rate, consecutive data packets leave no
    sooner than their size at that rate apart."""
    r, sent = congested
    trace = r.eps[0].qp(1).rp.trace
    data = [(t, n) for t, n, raw in sent if n > 1000]

    def rate_at(t):
        rc = LINE
        for e in trace:
            if e[0] > t:
                break
            rc = e[2]
        return rc

    checked = 0
    for (t0, n0), (t1, _n1) in zip(data, data[1:], strict=False):
        rc = rate_at(t0)
        if rc < LINE and rate_at(t1) == rc:
            assert t1 - t0 >= ser_ps(n0, round(rc)) - 1
            checked += 1
    assert checked > 100


def test_at_most_one_cnp_per_interval_per_qp(congested):
    r, _sent = congested
    cnps = [t for t, h, f, _v in r.log if h == 0 and f.bth.opcode == Opcode.CNP]
    assert len(cnps) > 3
    gaps = [b - a for a, b in zip(cnps, cnps[1:], strict=False)]
    assert min(gaps) >= 50 * US - 1  # sent >= 50 us apart, same path back: arrive so too
