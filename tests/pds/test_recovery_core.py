"""The C form of the loss recovery's per-ACK and per-send work (``uet.native._recovery_core``:
``on_ack``, ``on_sent``, RACK's scan) against its Python reference (``recovery.REFERENCE``).

Two twin ``LossRecovery`` objects take the same seeded random stream of operations: new
packets and retransmissions sent on a few EVs, ACKs and ACK_CCs that move the CACK (or not),
name packets early or finally, SACK arbitrary bits (stale, beyond the window, already
arrived), carry NSCC byte counts that wrap, timers (RACK deadline, RTO with backoff and the
retry limit), NACK-driven retransmissions, PSNs across the 2^32 wrap, RACK on and off, a
fixed or adaptive window, the SACK-count detector on and off. After every operation the two
must hold the same state: every slot of the recovery, of each packet (outstanding, in the
retransmit queue and in ``sent_order``), of the RACK and RTO state and the detector, the
counters, the callbacks made (with their arguments, in order) and the values returned.
"""

from __future__ import annotations

import dataclasses
import random
from collections import Counter
from typing import Any

import pytest

from uet.cms.api import NackFeedback
from uet.native import _recovery_core as core
from uet.pds import recovery
from uet.pds.config import PdsConfig
from uet.pds.recovery import REFERENCE, LossRecovery, SentPacket
from uet.pds.retransmit import LossDetector, Rack, RtoEstimator
from uet.wire.constants import NackCode
from uet.wire.records import PdsAck, PdsAckCc

US = 1_000_000


class PyRecovery(LossRecovery):
    """The Python reference (a subclass: the C core leaves other types to the reference)."""

    __slots__ = ()
    on_ack = REFERENCE["on_ack"]
    on_sent = REFERENCE["on_sent"]
    _rack_scan = REFERENCE["_rack_scan"]
    rtt_sample = REFERENCE["rtt_sample"]
    detect_after_ack = REFERENCE["detect_after_ack"]


@pytest.fixture(autouse=True, scope="module")
def _configured():
    # configure() is what the module does at import unless UET_PURE_PYTHON=1: doing it
    # again is harmless and lets the pure-mode run test the C functions too
    core.configure(SentPacket, LossRecovery, Rack, RtoEstimator, LossDetector, PdsAck,
                   PdsAckCc, REFERENCE["on_ack"], REFERENCE["on_sent"],
                   REFERENCE["_rack_scan"])
    core.configure_ack(REFERENCE["rtt_sample"], REFERENCE["detect_after_ack"])


class FakeCc:
    """The congestion control LossRecovery talks to: records what it is told."""

    rccc = None
    cwnd = 64 * 4096
    max_window = 128 * 4096

    def __init__(self, log: list) -> None:
        self.log = log

    def on_nack(self, now: int, *, fb: Any) -> None:
        self.log.append(("cc.on_nack", now, fb.ev, fb.code, fb.nbytes, fb.in_flight_bytes))

    def on_timeout(self, now: int, *, ev: int, nbytes: int) -> None:
        self.log.append(("cc.on_timeout", now, ev, nbytes))


class Twin:
    """One side: a recovery, the callbacks it makes, what its driver keeps."""

    def __init__(self, cls: type, cfg: PdsConfig, start: int, c_form: bool) -> None:
        self.log: list = []
        self.counters: Counter[str] = Counter()
        self.c_form = c_form
        log = self.log

        def cb(name: str):
            def f(*a: Any) -> None:
                log.append((name,) + tuple(x.psn if isinstance(x, SentPacket) else x
                                           for x in a))
            return f

        self.rec = cls(cfg, FakeCc(log), start_psn=start, now=0, pdc_id=7,
                       counters=self.counters, log=lambda *a, **k: log.append(("log", a, k)),
                       released=cb("released"), resend_control=cb("resend_control"),
                       queued=cb("queued"), unqueued=cb("unqueued"),
                       retry_limit=cb("retry_limit"), arm=cb("arm"))
        self.next_psn = start
        self.sticky = False  # some PSNs never arrive (see hole())

    # the operations the C core does, in the form under test: the C functions called on a
    # plain LossRecovery (also when UET_PURE_PYTHON=1 keeps them out of the class), or the
    # reference's methods (PyRecovery)
    def _call(self, c_name: str, method: str, *args: Any) -> Any:
        if self.c_form:
            return getattr(core, c_name)(self.rec, *args)
        return getattr(self.rec, method)(*args)

    def on_ack(self, *args: Any) -> Any:
        return self._call("on_ack", "on_ack", *args)

    def on_sent(self, *args: Any) -> Any:
        return self._call("on_sent", "on_sent", *args)

    def rack_scan(self, now: int) -> list:
        return self._call("rack_scan", "_rack_scan", now)

    def rtt_sample(self, *args: Any) -> Any:
        return self._call("rtt_sample", "rtt_sample", *args)

    def detect_after_ack(self, *args: Any) -> Any:
        return self._call("detect_after_ack", "detect_after_ack", *args)

    def rack_detect(self, now: int) -> list[int]:
        """LossRecovery.rack_detect with the scan in the form under test."""
        rec = self.rec
        lost = self.rack_scan(now) if rec.rack is not None and rec.rack.seq else []
        for pkt in lost:
            rec.cc.on_nack(now, fb=NackFeedback(pkt.ev, NackCode.RCVR_INFER_LOSS, pkt.nbytes,
                                                in_flight_bytes=rec.cc_inflight(),
                                                own_ev=True))
            rec.retransmit(now, pkt, "rack")
        return [p.psn for p in lost]


def hole(psn: int, pkt: SentPacket | None, sticky: bool = False) -> bool:
    """Every 13th PSN or so is lost until it has been resent once (or a random SACK bit said
    it arrived); with ``sticky``, every 61st or so is never delivered (its RTO runs out of
    retries)."""
    h = psn * 2654435761 >> 7
    if sticky and h % 61 == 0:
        return True
    return h % 13 == 0 and (pkt is None or not (pkt.ever_retx or pkt.arrived))


PKT_SLOTS = SentPacket.__slots__
SKIP = {"cfg", "cc", "credit", "counters", "log", "released", "resend_control", "queued",
        "unqueued", "retry_limit", "arm"}


def pkt_state(p: SentPacket) -> tuple:
    return tuple(getattr(p, s) if s != "req" else (p.req is None) for s in PKT_SLOTS)


def state(t: Twin) -> dict:
    r = t.rec
    out: dict[str, Any] = {}
    for s in LossRecovery.__slots__:
        if s in SKIP:
            continue
        v = getattr(r, s)
        if s == "outstanding":
            v = [(k, pkt_state(p)) for k, p in v.items()]
        elif s == "sent_order":
            v = [(seq, p.psn, pkt_state(p)) for seq, p in v]
        elif s == "retx":
            v = sorted((k, tie, p.psn, pkt_state(p)) for k, tie, p in v)
        elif s == "rack":
            v = None if v is None else tuple(getattr(v, x) for x in Rack.__slots__)
        elif s == "rto":
            v = tuple(getattr(v, x) for x in RtoEstimator.__slots__)
        elif s == "detector":
            v = (v.n, list(v.top))
        out[s] = v
    out["counters"] = dict(t.counters)
    out["log"] = list(t.log)
    out["next_psn"] = t.next_psn
    return out


def make_ack(rng: random.Random, t: Twin, cc_bytes: list[int]) -> tuple[Any, Any, bool, bool]:
    """A random ACK of what ``t`` sent: (header, ack_psn, retx flag, early)."""
    rec = t.rec
    lo = rec.max_cack
    top = (t.next_psn - 1) & 0xFFFFFFFF
    for k, p in rec.outstanding.items():  # the CACK stops below the first hole
        if hole(k, p, t.sticky):
            top = (k - 1) & 0xFFFFFFFF
            break
    span = (top - lo) & 0xFFFFFFFF
    if span >= 0x80000000:
        span = 0
    r = rng.random()
    if r < 0.15:
        cack = (lo - rng.randrange(0, 4)) & 0xFFFFFFFF  # stale or repeated
    else:
        cack = (lo + rng.randrange(0, min(span, 40) + 1)) & 0xFFFFFFFF
    named: int | None
    keys = [k for k, p in rec.outstanding.items() if not hole(k, p, t.sticky)]
    if rng.random() < 0.1:
        named = None  # a probe answer
    elif keys and rng.random() < 0.8:
        named = rng.choice(keys)
    else:
        named = (cack + rng.randrange(-3, 70)) & 0xFFFFFFFF
    off = 0 if named is None else ((named - cack + 0x8000) & 0xFFFF) - 0x8000
    if named is not None and ((cack + off) & 0xFFFFFFFF) != named:
        named = cack
        off = 0
    retx = rng.random() < 0.2
    early = rng.random() < 0.1
    if rng.random() < 0.15:
        return PdsAck(flags=0, ack_psn_offset=off, cack_psn=cack), named, retx, early
    soff = 1 if rng.random() < 0.8 else rng.randrange(-5, 40)
    base = (cack + soff) & 0xFFFFFFFF
    bm = 0
    for k in keys:
        d = (k - base) & 0xFFFFFFFF
        if d < 64 and rng.random() < 0.5:
            bm |= 1 << d
    if rng.random() < 0.2:
        bm |= rng.getrandbits(64)
    if rng.random() < 0.05:
        bm = 1 << 63
    cc_type = 0 if rng.random() < 0.85 else 1
    cc_bytes[0] = (cc_bytes[0] + rng.randrange(0, 3 * 4096)) & 0xFFFFFF
    raw = cc_bytes[0]
    if rng.random() < 0.05:  # an old count (overtaken ACK)
        raw = (raw - rng.randrange(1, 9000)) & 0xFFFFFF
    hdr = PdsAckCc(flags=0, ack_psn_offset=off, cack_psn=cack, cc_type=cc_type,
                   sack_psn_offset=soff, sack_bitmap=bm, rcvd_bytes=raw)
    return hdr, named, retx, early


def run_stream(seed: int, ops: int, start: int | None = None, **cfg_over: Any
               ) -> Counter[str]:
    """Run one stream on both twins; returns what happened (callbacks and counters)."""
    rng = random.Random(seed)
    cfg = PdsConfig(
        rack=rng.random() < 0.85,
        rack_reo_wnd_ps=rng.choice([0, 0, 0, 3 * US]),
        sack_dupthresh=rng.choice([0, 0, 3]),
        rto_ps=rng.choice([40 * US, 200 * US]),
        rto_adaptive=rng.random() < 0.5,
        min_rto_ps=10 * US,
        max_retries=rng.choice([2, 5]),
        ooo_loss_threshold=rng.choice([0, 0, 8]),
    )
    cfg = dataclasses.replace(cfg, **cfg_over)
    if start is None:
        start = rng.choice([rng.getrandbits(32), 0xFFFFFFFF - rng.randrange(0, 40)])
    twins = [Twin(PyRecovery, cfg, start, False), Twin(LossRecovery, cfg, start, True)]
    for t in twins:
        t.sticky = seed % 4 == 0
    cc_bytes = [rng.getrandbits(24)]
    now = 0
    for step in range(ops):
        now += rng.choice([0, 1, 50, 700, 3000, 20_000, 60_000, 400_000])
        op = rng.random()
        if step >= ops * 0.85:  # the tail: the PDC stops sending, only its timers run
            now += 1_000 * US
            op = 0.85
        results = []
        sub = random.Random(rng.getrandbits(64))  # the same draws for both twins
        draw = sub.getstate()
        counted = cc_bytes[0]
        for t in twins:
            sub.setstate(draw)
            cc_bytes[0] = counted
            rec = t.rec
            if op < 0.4 and len(rec.outstanding) < 200:
                n = sub.randrange(1, 4)
                out = []
                for _ in range(n):
                    psn = t.next_psn
                    t.next_psn = (psn + 1) & 0xFFFFFFFF
                    pkt = SentPacket(psn, None if sub.random() < 0.02 else object(),
                                     sub.choice([4096, 4096, 1000, 0]), 4200)
                    rec.track(pkt)
                    out.append(t.on_sent(now, pkt, False, sub.choice([11, 11, 12, 13])))
                results.append(out)
            elif op < 0.5:
                pkt = rec.next_retransmission(now)
                if pkt is not None:
                    rec.take_retransmission(now, pkt)
                    results.append(t.on_sent(now, pkt, True, sub.choice([11, 14])))
                else:
                    results.append(None)
            elif op < 0.8:
                hdr, named, retx, early = make_ack(sub, t, cc_bytes)
                newly = [0, 0]
                rtt = t.on_ack(now, hdr, named, retx, newly, early)
                sampled = t.rtt_sample(now, rtt) if rtt is not None else "no sample"
                detected = t.detect_after_ack(now, hdr, newly[1], t.next_psn)
                results.append((rtt, newly, sampled, detected))
            elif op < 0.9:
                # the PDC's timer: RACK deadline then RTO, as on_timer does
                if rec.rack_at is not None and now >= rec.rack_at:
                    rec.rack_at = None
                    t.rack_detect(now)
                if rec.rto_at is not None and now >= rec.rto_at:
                    rec.check_rto(now)
                results.append(rec.deadline())
            else:
                keys = list(rec.outstanding)
                if keys:
                    pkt = rec.outstanding[sub.choice(keys)]
                    rec.retransmit(now, pkt, "nack.TRIMMED")
                results.append(len(keys))
        a, b = twins
        assert results[0] == results[1], (seed, step, results)
        sa, sb = state(a), state(b)
        if sa != sb:
            for k in sa:
                assert sa[k] == sb[k], (seed, step, k)
        assert sa["log"] == sb["log"]
    seen: Counter[str] = Counter(e[0] for e in twins[1].log)
    seen.update(twins[1].counters)
    return seen


SEEN: Counter[str] = Counter()


@pytest.mark.parametrize("seed", range(24))
def test_c_core_matches_the_python_reference(seed):
    SEEN.update(run_stream(seed, 400))


def test_the_streams_reach_every_path():
    """The random streams above do exercise what the C core does (not only easy ACKs)."""
    seen = SEEN if SEEN else sum((run_stream(s, 400) for s in range(24)), Counter())
    for what in ("released", "unqueued", "arm", "queued", "resend_control", "retry_limit",
                 "cc.on_nack", "cc.on_timeout", "retx.rack", "retx.rto", "retx.sack",
                 "retx.ack_req", "retx_spurious"):
        assert seen[what] > 0, (what, seen)


def test_a_long_stream_across_the_psn_wrap():
    """Thousands of packets through one PDC whose PSNs wrap past 2^32 early on."""
    seen = run_stream(1234, 3000, start=0xFFFFFF00, max_retries=20)
    assert seen["released"] > 1000


def test_the_class_uses_the_c_core_unless_pure_python():
    from uet import native

    expected = "python" if native.FORCED_PURE else "native"
    assert expected == recovery.IMPLEMENTATION
    if recovery.IMPLEMENTATION == "native":
        assert LossRecovery.on_ack is not REFERENCE["on_ack"]
        assert type(LossRecovery.__dict__["on_ack"]).__name__ == "core_method"
    else:
        assert LossRecovery.on_ack is REFERENCE["on_ack"]


def test_other_types_go_to_the_reference():
    """A subclass of LossRecovery, a record of another class or a bitmap wider than 64 bits
    is handled by the Python reference (same result as calling it)."""
    for cls in (PyRecovery, LossRecovery):
        t = Twin(cls, PdsConfig(), 100, True)
        pkt = SentPacket(100, object(), 4096, 4200)
        t.rec.track(pkt)
        core.on_sent(t.rec, 10, pkt, False, 3)
        assert pkt.send_time == 10 and pkt.seq == 1 and t.rec.inflight_bytes == 4096
        hdr = PdsAckCc(cack_psn=99, sack_psn_offset=1, sack_bitmap=1 << 70 | 1)
        newly = [0, 0]
        assert core.on_ack(t.rec, 30, hdr, None, False, newly) is None
        assert pkt.arrived and newly == [4096, 1]


def test_bad_arguments_raise_not_crash():
    t = Twin(LossRecovery, PdsConfig(), 5, True)
    with pytest.raises(TypeError):
        core.on_ack(t.rec)
    with pytest.raises(AttributeError):  # not a SentPacket: the reference says so
        core.on_sent(t.rec, 0, object(), False, 1)
    with pytest.raises(TypeError):
        core.configure(1, 2, 3, 4, 5, 6, 7, 8, 9, 10)
    pkt = SentPacket(5, object(), 4096, 4200)
    t.rec.track(pkt)
    pkt.send_time = "later"  # a slot of the wrong type: a clear error
    with pytest.raises(TypeError, match="send_time"):
        core.on_ack(t.rec, 10, PdsAck(cack_psn=5), 5, False, [0, 0])


def test_keywords_go_to_the_reference():
    """``early=...`` by keyword: the Python form runs it, with the same effect."""
    for early in (False, True):
        a = Twin(LossRecovery, PdsConfig(), 100, True)
        b = Twin(PyRecovery, PdsConfig(), 100, False)
        for t in (a, b):
            pkt = SentPacket(100, object(), 4096, 4200)
            t.rec.track(pkt)
            t.on_sent(10, pkt, False, 3)
        na, nb = [0, 0], [0, 0]
        ra = core.on_ack(a.rec, 30, PdsAckCc(cack_psn=99), 100, False, na, early=early)
        rb = b.rec.on_ack(30, PdsAckCc(cack_psn=99), 100, False, nb, early)
        assert (ra, na) == (rb, nb) and state(a)["outstanding"] == state(b)["outstanding"]


def test_rtt_sample_and_detection_run_in_c_on_the_streams():
    """Counted Python forms: on the seeded streams the C ``rtt_sample`` (the RTO shrinking
    under outstanding packets included) and ``detect_after_ack`` never hand a call to the
    Python, so the twin comparison above compares the C forms."""
    hits: Counter[str] = Counter()

    def counted(name: str, f: Any) -> Any:
        def g(*a: Any, **k: Any) -> Any:
            hits[name] += 1
            return f(*a, **k)
        return g

    core.configure_ack(counted("rtt_sample", REFERENCE["rtt_sample"]),
                       counted("detect_after_ack", REFERENCE["detect_after_ack"]))
    calls: Counter[str] = Counter()
    real = core.rtt_sample

    try:
        for seed in range(6):
            rng = random.Random(seed)
            cfg = PdsConfig(rack=True, rto_adaptive=True, rto_ps=200 * US, min_rto_ps=10 * US,
                            sack_dupthresh=rng.choice([0, 3]))
            t = Twin(LossRecovery, cfg, rng.getrandbits(32), True)
            now = 0
            for _ in range(300):
                now += rng.choice([50, 700, 3000, 20_000])
                pkt = SentPacket(t.next_psn, object(), 4096, 4200)
                t.next_psn = (t.next_psn + 1) & 0xFFFFFFFF
                t.rec.track(pkt)
                t.on_sent(now, pkt, False, 11)
                if rng.random() < 0.7:
                    hdr, named, retx, early = make_ack(rng, t, [0])
                    newly = [0, 0]
                    rtt = t.on_ack(now, hdr, named, retx, newly, early)
                    if rtt is not None:
                        before = t.rec.rto.base
                        real(t.rec, now, rtt)
                        calls["shrank" if t.rec.rto.base < before else "sample"] += 1
                    t.detect_after_ack(now, hdr, newly[1], t.next_psn)
                    calls["detect"] += 1
    finally:
        core.configure_ack(REFERENCE["rtt_sample"], REFERENCE["detect_after_ack"])
    assert calls["shrank"] >= 5 and calls["sample"] > 500 and calls["detect"] > 1000, calls
    assert hits == Counter(), hits


@pytest.mark.parametrize("retries", [0, 2])
def test_a_shrinking_rto_moves_the_timer_as_the_python(retries):
    """The RTO shrinks (its first sample replaces the initial one) while an old packet is
    outstanding: the timer moves to max(now, its send time + the new RTO), whichever form
    runs, a resent packet's RTO with its backoff."""
    cfg = PdsConfig(rto_adaptive=True, rto_ps=5000 * US, min_rto_ps=10 * US)
    out = []
    for c_form in (False, True):
        t = Twin(PyRecovery if not c_form else LossRecovery, cfg, 100, c_form)
        pkt = SentPacket(100, object(), 4096, 4200)
        t.rec.track(pkt)
        t.on_sent(0, pkt, False, 11)
        pkt.retries = retries
        t.rtt_sample(3000 * US, 12 * US)  # now is past send time + the new RTO
        t.rtt_sample(3001 * US, 12 * US)  # no shrink: nothing moves
        out.append((t.rec.rto_at, t.rec.rto.base, t.rec.rto.srtt, t.log))
    assert out[0] == out[1]
    assert out[1][0] == 3000 * US  # max(now, ...) is now


@pytest.mark.parametrize("rtt", [0, 1, 2**30 - 1, 2**30, 2**31 + 5, 2**45, 2**60 - 1, 2**60,
                                 2**62 + 3, 2**63 - 1])
def test_ints_across_digit_boundaries_read_as_the_python(rtt):
    """The cores read ints of one and two 30-bit digits inline and larger ones through the
    API (uet/native/pyint.h): RTT samples across those sizes give the Python's RTO."""
    cfg = PdsConfig(rto_adaptive=True, rto_ps=5000 * US, min_rto_ps=10 * US,
                    max_rto_ps=2**63 - 1)
    out = []
    for c_form in (False, True):
        t = Twin(PyRecovery if not c_form else LossRecovery, cfg, 100, c_form)
        for now, sample in ((10, rtt), (20, rtt // 3), (30, rtt)):
            t.rtt_sample(now, sample)
            out.append((t.rec.rto.base, t.rec.rto.srtt, t.rec.rto.rttvar))
    assert out[:3] == out[3:]  # after every sample
