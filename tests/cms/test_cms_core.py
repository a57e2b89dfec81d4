"""The CMS core (``uet.native._cms_core``: ``Nscc.on_ack`` and CmsSender's ``on_ack``,
``can_send``, ``window_full``, ``on_send``) against their Python forms.

Two senders built alike take the same seeded stream of calls, one through the classes'
methods (the C forms when the core is built) and one through the Python references
(``uet.cms.sender.REFERENCE``, ``NSCC_REFERENCE``); after every call the answers and every
slot of both senders and of their NSCC windows must be equal, floats to the bit and the
statistics with their order. The streams mix what a PDC's sender sees: plain and marked
ACKs, RTT samples above and below the base RTT (which adapts it) or none, ACK_CCs with
NSCC state (penalties, restores, stale and wrapping receive counts, out-of-order counts)
or other CC types, NACKs and timeouts (Python on both sides), and the per-packet gates,
under configurations that switch quick adapt, base-RTT adaptation and a fixed maximum
window on and off. Odd arguments (ints past the exact range, an int where a float was,
keyword calls, subclasses) must give what the Python gives. The whole-fabric comparison of
both forms is tests/pds/test_c_cores.py.
"""

from __future__ import annotations

import random
import struct

import pytest

from uet.cms import AckFeedback, CmsConfig, NackFeedback, make_sender
from uet.cms import sender as sender_mod
from uet.cms.nscc import Nscc, NsccParams
from uet.cms.sender import NSCC_REFERENCE, REFERENCE, CmsSender
from uet.wire.constants import CcType, NackCode
from uet.wire.records import PdsAckCc

NATIVE = sender_mod.IMPLEMENTATION == "native"
US = 1_000_000
pytestmark = pytest.mark.skipif(not NATIVE, reason="the CMS core is off: nothing to compare")


def _bits(v):
    return ("f", struct.pack("<d", v)) if isinstance(v, float) else (type(v).__name__, v)


def _nscc_state(n: Nscc) -> tuple:
    return tuple(list(v.items()) if name == "stats" else _bits(v)
                 for name, v in ((s, getattr(n, s)) for s in Nscc.__slots__ if s != "p"))


def _state(s: CmsSender) -> tuple:
    own = tuple(_bits(getattr(s, k)) for k in ("now", "refused_for_credit",
                                               "credit_wait_since", "window_bytes"))
    return own + (_nscc_state(s.nscc) if s.nscc is not None else (None,))


def _selector(v):
    """An EV selector's state, as plain data (its feedback is a Python call from both
    forms, so this only shows that the two forms fed it the same)."""
    if isinstance(v, random.Random):
        return v.getstate()
    if isinstance(v, dict):
        return {k: _selector(x) for k, x in v.items()}
    if isinstance(v, (list, tuple, set, frozenset)) or type(v).__name__ == "deque":
        return [type(v).__name__] + [_selector(x) for x in v]
    if type(v).__module__.startswith("uet."):
        names = [n for k in type(v).__mro__ for n in getattr(k, "__slots__", ())]
        state = dict(getattr(v, "__dict__", {}))
        state.update({n: getattr(v, n) for n in names if n != "__dict__" and hasattr(v, n)})
        return (type(v).__name__, _selector(state))
    return v


def _config(rng: random.Random) -> CmsConfig:
    kw = dict(algorithm="nscc", base_rtt_ps=rng.choice([12, 14, 3]) * US,
              link_rate_bps=rng.choice([100, 400, 25]) * 10**9,
              adapt_base_rtt=rng.random() < 0.6, quick_adapt=rng.random() < 0.8,
              trimming=rng.random() < 0.7, ev_count=8,
              ev_selector=rng.choice(["oblivious", "bitmap", "mixed", "reps"]))
    if rng.random() < 0.3:
        kw["max_window_bytes"] = rng.choice([20_000, 300_000])
    if rng.random() < 0.3:
        kw["initial_window_bytes"] = rng.choice([4096, 50_000])
    return CmsConfig(**kw)


def _pair(cfg: CmsConfig, seed: int) -> tuple[CmsSender, CmsSender]:
    a, b = make_sender(cfg, random.Random(seed)), make_sender(cfg, random.Random(seed))
    assert type(a) is CmsSender and type(a.nscc) is Nscc
    return a, b


def _ack_cc(rng: random.Random, rcvd: int) -> PdsAckCc:
    cc_type = rng.choice([CcType.NSCC] * 5 + [int(CcType.NSCC), CcType.CREDIT])
    return PdsAckCc(cc_type=cc_type, rcvd_bytes=rcvd & 0xFFFFFF,
                    rcv_cwnd_pend=rng.choice([0, 0, 0, 5, 64, 127]),
                    restore_cwnd=rng.random() < 0.1, ooo_count=rng.randrange(0, 60))


def _stream(rng: random.Random, base: int, n: int) -> list[tuple]:
    """Calls in phases: calm (low delay), congested (marked ACKs with high delay, trims)
    and sparse (long gaps, few bytes: what quick adapt looks for)."""
    calls: list[tuple] = []
    now, rcvd, flight, phase = 0, 0, 0, "calm"
    for _ in range(n):
        if rng.random() < 0.03:
            phase = rng.choice(["calm", "congested", "sparse"])
        gap = rng.choice([1, 50, 500, 3000, 20_000, 400_000])
        now += gap * (200 if phase == "sparse" and rng.random() < 0.3 else 1)
        r = rng.random()
        size = rng.choice([4096, 4096, 1000, 1])
        if r < 0.55:
            if rng.random() < 0.9:
                rcvd += rng.choice([0, size, 3 * size])
            else:
                rcvd += rng.choice([-2 * size, 0x800000, 0x7FFFFF, 0xFFFFFF])
            high = base + rng.randrange(20 * US, 200 * US)
            rtt = rng.choice([None, base, base + rng.randrange(0, 40 * US),
                              base - rng.randrange(1, base // 2), base + 20 * US, high]
                             + [high] * (8 if phase == "congested" else 0))
            ack = None if rng.random() < 0.3 else _ack_cc(rng, rcvd)
            flight = max(0, flight - size)
            ecn = rng.random() < (0.9 if phase == "congested" else 0.2)
            newly = 0 if phase == "sparse" and rng.random() < 0.7 else rng.choice([0, size])
            ev = rng.randrange(8) if rng.random() < 0.8 else rng.randrange(1 << 20)  # masked
            calls.append(("ack", now, AckFeedback(ev, ecn, newly, 1, rtt, flight, ack)))
        elif r < 0.75:
            calls.append(("choose_ev", now))
            calls.append(("can_send", now, size, flight, rng.random() < 0.1))
            calls.append(("window_full", size, flight + size))
            flight += size
            calls.append(("on_send", now, size, rng.randrange(8), False))
        elif r < (0.9 if phase != "calm" else 0.8):
            code = rng.choice([NackCode.TRIMMED, NackCode.TRIMMED_LASTHOP, NackCode.PKT_NOT_RCVD])
            calls.append(("nack", now, NackFeedback(rng.randrange(8), code, size,
                                                    rng.random() < 0.2, base, flight)))
        else:
            calls.append(("timeout", now, rng.randrange(8), size))
    return calls


def _kw(fresh: bool, **kw) -> dict:
    """The keyword arguments, under names that are not the interned strings (``fresh``): a
    caller that makes its names at run time (the cores match by identity first, then by
    text)."""
    return {("".join(list(k)) if fresh else k): v for k, v in kw.items()}


def _apply(s: CmsSender, call: tuple, ref: bool, fresh: bool = False):
    kind = call[0]
    if kind == "ack":
        f = REFERENCE["on_ack"] if ref else CmsSender.on_ack
        return f(s, call[1], **_kw(fresh, fb=call[2]))
    if kind == "choose_ev":
        f = REFERENCE["choose_ev"] if ref else CmsSender.choose_ev
        return f(s, call[1])
    if kind == "can_send":
        f = REFERENCE["can_send"] if ref else CmsSender.can_send
        return f(s, call[1], **_kw(fresh, nbytes=call[2], in_flight=call[3], retx=call[4]))
    if kind == "window_full":
        f = REFERENCE["window_full"] if ref else CmsSender.window_full
        return f(s, **_kw(fresh, nbytes=call[1], in_flight=call[2]))
    if kind == "on_send":
        f = REFERENCE["on_send"] if ref else CmsSender.on_send
        return f(s, call[1], **_kw(fresh, nbytes=call[2], ev=call[3], retx=call[4]))
    if kind == "nack":
        return s.on_nack(call[1], fb=call[2])
    return s.on_timeout(call[1], ev=call[2], nbytes=call[3])


@pytest.mark.parametrize("seed", range(16))
def test_sender_core_matches_the_python_call_by_call(seed):
    rng = random.Random(seed)
    cfg = _config(rng)
    c, py = _pair(cfg, seed)
    assert CmsSender.on_ack is not REFERENCE["on_ack"]
    seen = set()
    for i, call in enumerate(_stream(rng, cfg.base_rtt_ps, 1500)):
        got, want = _apply(c, call, False), _apply(py, call, True)
        assert got == want and type(got) is type(want), (i, call)
        assert _state(c) == _state(py), (i, call)
        assert _selector(c.selector) == _selector(py.selector), (i, call)
        seen.update(k for k, v in c.nscc.stats.items() if v)
    # the stream reaches the reactions (quick adapt and restores in most configurations)
    assert {"fair_increase", "proportional_increase", "fulfill"} <= seen, seen


@pytest.mark.parametrize("seed", range(8))
def test_nscc_core_matches_the_python_with_positional_calls(seed):
    """Nscc.on_ack alone (as the NSCC unit tests call it), ack_cc given or left out."""
    rng = random.Random(100 + seed)
    cfg = _config(rng)
    c, py = Nscc(NsccParams.from_config(cfg)), Nscc(NsccParams.from_config(cfg))
    for i, (kind, now, *rest) in enumerate(_stream(rng, cfg.base_rtt_ps, 800)):
        if kind != "ack":
            continue
        fb = rest[0]
        args = (now, fb.newly_acked_bytes, fb.ecn_echo, fb.rtt_sample, fb.in_flight_bytes)
        if fb.ack_cc is not None or rng.random() < 0.5:
            args += (fb.ack_cc,)
        assert c.on_ack(*args) is NSCC_REFERENCE["on_ack"](py, *args) is None
        assert _nscc_state(c) == _nscc_state(py), i


def _odd(s: CmsSender, ref: bool, case: str):
    n = s.nscc
    fb = AckFeedback(1, True, 4096, 1, 13 * US, 8192, None)
    on_ack = REFERENCE["on_ack"] if ref else CmsSender.on_ack
    if case == "huge":  # ints past 2**52: Python's exact big ints
        n.in_flight = n.cwnd = 2**60
        on_ack(s, 5 * US, fb=AckFeedback(1, False, 2**62, 1, 2**55, 2**61, None))
    elif case == "int_delay":  # an int where NSCC keeps a float
        n.avg_delay = 15 * US
        on_ack(s, 5 * US, fb=fb)
    elif case == "positional":  # fb is keyword-only
        with pytest.raises(TypeError):
            on_ack(s, 5 * US, fb)
    elif case == "bool_ecn":
        on_ack(s, 5 * US, fb=AckFeedback(1, 1, 4096, 1, None, 0, None))
    elif case in ("qa_at_the_gate", "qa_below_the_gate"):  # quick adapt's boundary
        n.achieved_bytes = (n.max_wnd >> n.p.qa_gate) - (case == "qa_below_the_gate")
        n.trigger_qa, n.qa_endtime = True, 1
        on_ack(s, 5 * US, fb=AckFeedback(1, False, 0, 0, None, 0, None))
        return n.stats["quick_adapt"]
    elif case == "big_now":
        on_ack(s, 2**70, fb=fb)
    elif case == "gates":
        can = REFERENCE["can_send"] if ref else CmsSender.can_send
        full = REFERENCE["window_full"] if ref else CmsSender.window_full
        send = REFERENCE["on_send"] if ref else CmsSender.on_send
        return (can(s, 1, nbytes=2**60, in_flight=0), can(s, 1, nbytes=10, in_flight=5),
                full(s, in_flight=5, nbytes=10), send(s, 2, retx=True, ev=3, nbytes=7),
                can(s, 3, nbytes=1, in_flight=0, retx=False))
    return None


@pytest.mark.parametrize("case", ["huge", "int_delay", "positional", "bool_ecn", "big_now",
                                  "gates", "qa_at_the_gate", "qa_below_the_gate"])
def test_odd_arguments_give_what_the_python_gives(case):
    cfg = CmsConfig(algorithm="nscc", base_rtt_ps=12 * US, ev_count=4)
    c, py = _pair(cfg, 3)
    got, want = _odd(c, False, case), _odd(py, True, case)
    assert got == want
    assert _state(c) == _state(py)
    if case.startswith("qa_"):
        assert want == (case == "qa_below_the_gate")


def test_errors_are_the_pythons():
    cfg = CmsConfig(algorithm="nscc", base_rtt_ps=12 * US, ev_count=4)
    c, _ = _pair(cfg, 3)
    with pytest.raises(TypeError):
        c.on_ack(1)
    with pytest.raises(TypeError):
        c.can_send(1, nbytes=5)
    with pytest.raises(TypeError):
        c.on_send(1, nbytes=5, ev=1, retx=False, extra=2)
    with pytest.raises(TypeError):
        c.nscc.on_ack(1, 2)


def test_a_subclass_gets_the_python():
    calls = []

    class Watched(Nscc):
        __slots__ = ()

        def _react(self, now, skip, delay, newly):
            calls.append(newly)
            super()._react(now, skip, delay, newly)

    cfg = CmsConfig(algorithm="nscc", base_rtt_ps=12 * US, ev_count=4)
    s, _ = _pair(cfg, 3)
    s.nscc = Watched(s.nscc.p)
    s.on_ack(1 * US, fb=AckFeedback(1, False, 4096, 1, 12 * US, 0, None))
    assert calls == [4096]


def test_the_core_takes_the_common_case_itself():
    """Counted references: no call of the seeded streams reaches the Python (every value
    in them is in the exact range, every object of the exact classes), so the comparisons
    above compare the C form, not the Python with itself."""
    from collections import Counter

    from uet.native._common import load_core

    core = load_core("_cms_core")
    hits: Counter[str] = Counter()

    def counted(name, f):
        def g(*a, **k):
            hits[name] += 1
            return f(*a, **k)
        return g

    refs = (NSCC_REFERENCE["on_ack"], REFERENCE["on_ack"], REFERENCE["can_send"],
            REFERENCE["window_full"], REFERENCE["on_send"])
    names = ("nscc.on_ack", "on_ack", "can_send", "window_full", "on_send")
    from uet.cms.ev_selection import BitmapEv, MixedEv

    choose = REFERENCE["choose_ev"]
    consts = {"nscc": int(CcType.NSCC), "good": sender_mod._GOOD, "ecn": sender_mod._ECN,
              "mixed": MixedEv, "bitmap": BitmapEv, "choose_ev": counted("choose_ev", choose)}
    classes = (Nscc, NsccParams, CmsSender, AckFeedback, PdsAckCc)
    core.configure(*classes, tuple(counted(n, f) for n, f in zip(names, refs, strict=True)),
                   consts)
    reactions: set[str] = set()
    try:
        calls = Counter()
        for seed in (0, 1, 2, 3, 14):  # 0, 2 and 14 spray with MixedEv
            rng = random.Random(seed)
            cfg = _config(rng)
            s, _ = _pair(cfg, seed)
            fresh = seed == 14  # keyword names that are not the interned strings
            for call in _stream(rng, cfg.base_rtt_ps, 1500):
                calls[call[0]] += 1
                if call[0] == "ack":  # the stats the C form counted for this ACK
                    before = Counter(s.nscc.stats)
                    _apply(s, call, False, fresh)
                    reactions.update(k for k, v in s.nscc.stats.items() if v != before[k])
                else:
                    _apply(s, call, False, fresh)
    finally:
        consts["choose_ev"] = choose
        core.configure(*classes, refs, consts)
    assert calls["ack"] > 2000 and calls["can_send"] > 800
    assert hits == Counter(), hits
    # every reaction of the C form ran (counted by the C form alone: no reference ran)
    assert {"fair_increase", "proportional_increase", "fast_increase", "fulfill",
            "quick_adapt", "dec_quick_bytes", "multiplicative_decrease", "dec_multi_bytes",
            "dec_receiver", "restore"} <= reactions, reactions


@pytest.mark.parametrize("kind", ["bitmap", "mixed"])
def test_the_bitmap_selectors_common_case_runs_in_c(kind, monkeypatch):
    """BitmapEv.next_ev's common case (the index reached has no penalty: it moves on, and a
    new XOR mask is drawn at the end of each round) is the core's; a penalised index (the
    skipping loop) is the Python's. Seeded feedback (good, ECN, NACK, timeout) against a
    twin driven through the Python reference: the same EVs, penalties and rng state after
    every call, and the Python's next_ev runs only for the penalised cases."""
    from uet.cms.ev_selection import BitmapEv, PathFeedback

    cfg = CmsConfig(algorithm="nscc", base_rtt_ps=12 * US, ev_count=8, ev_selector=kind)
    c, py = _pair(cfg, 21)
    assert type(c.selector).__name__.lower().startswith(kind)
    python_calls = []
    original = BitmapEv.next_ev

    def counted(self, now):
        if self is c.selector:
            python_calls.append(now)
        return original(self, now)

    monkeypatch.setattr(BitmapEv, "next_ev", counted)
    rng = random.Random(5)
    kinds = [PathFeedback.GOOD] * 60 + [PathFeedback.ECN] * 3 + [PathFeedback.NACK,
                                                                  PathFeedback.TIMEOUT]
    n_calls = 0
    for now in range(1, 4000):
        if rng.random() < 0.4:
            ev, fb = rng.randrange(1 << 16), rng.choice(kinds)
            c.selector.feedback(now, ev, fb)
            py.selector.feedback(now, ev, fb)
        else:
            n_calls += 1
            got, want = CmsSender.choose_ev(c, now), REFERENCE["choose_ev"](py, now)
            assert got == want and type(got) is int, now
        assert _selector(c.selector) == _selector(py.selector), now
    # a few rounds wrapped (new masks drawn by the core), and most calls never left C
    assert c.selector.rng.getstate() == py.selector.rng.getstate()
    assert 0 < len(python_calls) < n_calls // 2, (len(python_calls), n_calls)


@pytest.mark.parametrize("slot", ["index", "xor", "mask", "n", "upper", "penalty"])
def test_a_bitmap_selector_with_an_unset_slot_gets_the_pythons_error(slot):
    """Each of the selector's slots the core reads, unset: the Python runs and raises its
    AttributeError (the core reads them one at a time and stops at the first missing)."""
    cfg = CmsConfig(algorithm="nscc", base_rtt_ps=12 * US, ev_count=8, ev_selector="bitmap")
    c, py = _pair(cfg, 4)
    delattr(c.selector, slot)
    delattr(py.selector, slot)
    with pytest.raises(AttributeError) as got:
        CmsSender.choose_ev(c, 5)
    with pytest.raises(AttributeError) as want:
        REFERENCE["choose_ev"](py, 5)
    assert str(got.value) == str(want.value)
