"""The C cores of the end point (``uet.endpoint.cores``) against their Python forms, end to end.

The same seeded scenarios run twice in one process, once with the C forms and once inside
``python_forms()``; every frame put on the wire (its bytes, in order, with its time), every
counter of every end point and what the receivers got must be the same. Two levels:

* PDS end points through the lossy in-memory channel of the exactly-once tests (loss,
  duplication, reordering, RUD / ROD / RUDI / UUD, the Null CC, NSCC and RCCC, PDS
  settings that reach the window, memory, probe and SACK-count paths);
* fabric end points (SES + PDS + CMS: what ``uet run`` drives) on an emulated fat tree with
  trimming, ECN and link impairments: the capture of host and switch links, byte for byte
  (with private sinks, seeded data in two rounds, the second on open PDCs, and some WRITEs
  with header data, also what landed in memory).

The unit-level tests of each core are tests/pds/test_recovery_core.py.
"""

from __future__ import annotations

import hashlib
import random
import tempfile
from dataclasses import replace
from pathlib import Path

import pytest
import trio
from pds_harness import A_IP, B_IP, US, Host, Net, pair, request, ses_std
from test_exactly_once import MODES, _endpoint, run_scenario

from uet.cms.api import CmsConfig
from uet.endpoint import cores
from uet.endpoint.fep import SINK_INDEX, SINK_KEY, FabricEndpoint
from uet.pds import PdsConfig, PdsEndpoint
from uet.pds.initiator import SYN
from uet.runtime.fabric import Fabric
from uet.wire.codec import encode_frame
from uet.wire.constants import PdsType

NATIVE = all(v == "native" for v in cores.implementations().values())
pytestmark = pytest.mark.skipif(
    not NATIVE, reason="the C cores are off (UET_PURE_PYTHON=1): nothing to compare "
                       "(tests/pds/test_recovery_core.py still tests the C functions)")


def _pds_trace(seed: int, loss: float, cfg: dict, cms: CmsConfig | None, n: int,
               report_acked: bool = True) -> dict:
    rng = random.Random(seed)
    msgs = [(rng.random() < 0.6, rng.choice(MODES), rng.randint(1, 12), rng.randint(0, 3000),
             rng.randint(0, 1500)) for _ in range(n)]
    net, eps = run_scenario(seed, loss, 0.03, 3, False, cfg, msgs, cms=cms,
                            report_acked=report_acked)
    return {"frames": [(t, encode_frame(f)) for t, f in net.sent],
            "counters": {ip: dict(ep.counters) for ip, ep in eps.items()},
            "now": net.now}


BASE = {"ack_type": "ack_cc", "sack_dupthresh": 0, "rack": True, "ooo_loss_threshold": 0,
        "probe_after_ps": 0, "ar_every_packet": False, "rod_buffer_packets": 0,
        "ack_every_bytes": 16384, "rto_adaptive": True}
VARIANTS = [
    ("nscc", {}),
    ("rccc", {}),
    (None, {"sack_dupthresh": 3, "ooo_loss_threshold": 4, "probe_after_ps": 150 * US}),
    ("nscc", {"max_inflight_packets": 6, "ack_every_bytes": 1000, "ack_type": "ack"}),
    ("nscc", {"max_tx_memory_bytes": 20_000, "rack_reo_wnd_ps": 2 * US}),
    ("nscc", {"ar_every_packet": True, "ar_when_blocked": False}),
    ("nscc", {"max_syn_packets": 3}),  # SYN packets held until the first ACK
]


@pytest.mark.parametrize("variant", range(len(VARIANTS)))
@pytest.mark.parametrize("loss", [0.0, 0.1])
def test_pds_scenarios_send_the_same_frames(variant, loss):
    algorithm, extra = VARIANTS[variant]
    cms = None if algorithm is None else CmsConfig(
        ev_selector="oblivious", algorithm=algorithm, base_rtt_ps=10 * US, mtu_payload=2048)
    cfg = {**BASE, **extra}
    seed = 11 + variant
    c = _pds_trace(seed, loss, cfg, cms, 40)
    with cores.python_forms():
        py = _pds_trace(seed, loss, cfg, cms, 40)
    assert len(c["frames"]) == len(py["frames"]) and len(c["frames"]) > 100
    for i, (a, b) in enumerate(zip(c["frames"], py["frames"], strict=True)):
        assert a == b, f"frame {i} differs"
    assert c["counters"] == py["counters"] and c["now"] == py["now"]


@pytest.mark.parametrize("loss", [0.0, 0.1])
def test_released_packets_return_their_memory_alike(loss):
    """Without PacketAcked reports (as fabric end points run), each released packet's
    transmit memory comes back in C (InitiatorPdc._released): with memory for only a few
    packets, the senders block and are woken as in the Python form, frame for frame."""
    cms = CmsConfig(ev_selector="oblivious", algorithm="nscc", base_rtt_ps=10 * US,
                    mtu_payload=2048)
    cfg = {**BASE, "max_tx_memory_bytes": 12_000}
    c = _pds_trace(31, loss, cfg, cms, 40, report_acked=False)
    with cores.python_forms():
        py = _pds_trace(31, loss, cfg, cms, 40, report_acked=False)
    assert c == py
    blocked = sum(v.get("blocked.memory", 0) for v in c["counters"].values())
    assert blocked >= 5 and len(c["frames"]) > 100


def _target_states(seed: int, loss: float, cfg: dict, cms: CmsConfig | None) -> list:
    """A scenario's target PDC states after every frame an end point receives (in either
    form): what the frames may not show at once (the highest PSN's EOM, the gap clock, the
    receiver's counts)."""
    states = []
    inner = PdsEndpoint.receive

    def watched(ep, now, frame):
        inner(ep, now, frame)
        for pdc in ep.mgr.tgt_by_key.values():
            recv, tk = pdc.receiver, pdc.tracker
            states.append((now, pdc.pdc_id, pdc.max_eom, pdc.gap_since, pdc.last_rx,
                           pdc.clear_psn, tk.max_psn, tk.cack_psn, tk.ooo_count,
                           getattr(recv, "rcvd_bytes", None), getattr(recv, "ooo_count", None),
                           len(pdc.pending), pdc.acks.co.nbytes, pdc.cack_held,
                           getattr(recv, "restore", None)))

    PdsEndpoint.receive = watched
    try:
        _pds_trace(seed, loss, cfg, cms, 30)
    finally:
        PdsEndpoint.receive = inner
    return states


@pytest.mark.parametrize("loss", [0.0, 0.15])
def test_target_pdc_state_after_every_request(loss):
    cms = CmsConfig(ev_selector="oblivious", algorithm="nscc", base_rtt_ps=10 * US,
                    mtu_payload=2048)
    cfg = {**BASE, "ooo_loss_threshold": 4, "gap_nack_ps": 20 * US}
    c = _target_states(5, loss, cfg, cms)
    with cores.python_forms():
        py = _target_states(5, loss, cfg, cms)
    assert len(c) == len(py) > 100
    for i, (a, b) in enumerate(zip(c, py, strict=True)):
        assert a == b, f"request {i}: {a} != {b}"
    # the states vary where a wrong C field would show
    assert {s[2] for s in c} == {True, False} and any(s[3] is not None for s in c)
    assert len({s[10] for s in c}) > 2


def _initiator_states(seed: int) -> list:
    """Initiator PDC states after every frame the initiating end point receives, between
    ends with different receive windows (the ACK_CC's MPR moves the sender's peer range)
    and a target that asks idle PDCs to close (REQ in its ACKs)."""
    states = []
    inner = PdsEndpoint.receive
    eps = []

    def watched(ep, now, frame):
        inner(ep, now, frame)
        if ep is eps[0]:
            for pdc in ep.pdcs("initiator"):
                states.append((now, pdc.pdc_id, pdc.state.name, pdc.peer_range,
                               pdc.last_progress, pdc.next_psn, pdc.rec.max_cack,
                               len(pdc.rec.outstanding), pdc.close_requested,
                               pdc.rec.rto.base, pdc.blocked_at))

    PdsEndpoint.receive = watched  # before the end points (the invariant checks wrap it)
    try:
        cms = CmsConfig(ev_selector="oblivious", algorithm="nscc", base_rtt_ps=10 * US,
                        mtu_payload=2048)
        base = {"rto_ps": 300 * US, "min_rto_ps": 50 * US, "close_idle_ps": 400 * US,
                "msl_ps": 500 * US}
        a = _endpoint(PdsConfig(mp_range=128, **base), A_IP, seed, cms)
        b = _endpoint(PdsConfig(mp_range=1024, target_idle_ps=40 * US,
                                close_req_time_ps=500 * US, **base), B_IP, seed + 1, cms)
        eps.append(a)
        net = Net([Host(a), Host(b)], seed=seed, loss=0.1, jitter=3 * US)
        rng = random.Random(seed)
        for i in range(12):  # bursts with idle gaps longer than the target's idle time
            net.run(until=i * 120 * US)
            for k in range(rng.randint(1, 40)):
                a.submit(net.now, request(payload=bytes(rng.randint(1, 2000)),
                                          msg_ref=(i, k), ses=ses_std(msg_id=i * 64 + k)))
        net.run()
    finally:
        PdsEndpoint.receive = inner
    return states


@pytest.mark.parametrize("seed", [1, 2])
def test_initiator_pdc_state_after_every_ack(seed):
    c = _initiator_states(seed)
    with cores.python_forms():
        py = _initiator_states(seed)
    assert len(c) == len(py) > 100
    for i, (x, y) in enumerate(zip(c, py, strict=True)):
        assert x == y, f"frame {i}: {x} != {y}"
    assert {s[3] for s in c} == {1024}  # the MPR moved the peer range from its own 128
    assert any(s[8] for s in c)  # the target asked to close


def _odd_syns() -> dict:
    """SYN requests the target must not take as the open PDC's: a SYN whose start is not
    the PDC's (INVALID_SYN) and, once the PDC closed and lingers, the SYN of a new
    incarnation with another start (a new PDC, or NEW_START_PSN)."""
    cfg = PdsConfig(close_idle_ps=20 * US, msl_ps=400 * US, target_idle_ps=30 * US)
    a, b = pair(cfg, cfg, seed=3)
    net = Net([a, b], seed=3)
    for i in range(3):
        a.ep.submit(0, request(payload=bytes(64), msg_ref=i, ses=ses_std(msg_id=i)))
    net.run(until=10 * US)
    syn = next(f for _, f in net.sent if f.pds.type == PdsType.RUD_REQ and f.pds.flags & SYN)
    sent_before = len(net.sent)
    steps = []

    def inject(frame):
        b.ep.receive(net.now, frame)
        net.run(until=net.now + 5 * US)
        steps.append((dict(b.ep.counters), len(b.ep.pdcs("target"))))

    # established, a SYN naming another start
    inject(replace(syn, pds=replace(syn.pds, psn_offset=syn.pds.psn_offset + 1)))
    net.run(until=net.now + 200 * US)  # the PDCs close; the target's lingers
    assert any(p.lingering for p in b.ep.mgr.tgt_by_key.values())
    # a new incarnation with the same SPDCID and another start
    inject(replace(syn, pds=replace(syn.pds, psn=(syn.pds.psn + 200_000) & 0xFFFFFFFF)))
    return {"steps": steps, "frames": [(t, encode_frame(f)) for t, f in net.sent[sent_before:]]}


def test_odd_syn_requests_are_answered_alike():
    c = _odd_syns()
    with cores.python_forms():
        py = _odd_syns()
    assert c == py
    (first, _), (second, _) = c["steps"]
    assert first["nack_tx.INVALID_SYN"] == 1  # NACKed, not taken
    assert second["opened.target"] == 2  # the new incarnation got a PDC of its own


async def _fabric(topo: dict, flows: list, seed: int, taps: list[str], shared: bool) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "c.pcapng"
        factory = FabricEndpoint.factory(sink_bytes=max(n for _, _, n in flows),
                                         shared_sink=shared)
        async with Fabric(topo, seed=seed, endpoint_factory=factory) as fab:
            cap = fab.capture(path, links=taps)
            if shared:
                msgs = await fab.run_messages(flows)
            else:  # seeded bytes, so that what lands in memory says something
                rng = random.Random(seed)
                msgs = []
                for k, (src, dst, n) in enumerate(flows + flows):  # twice: the second round
                    if k == len(flows):  # on PDCs opened by the first
                        await fab.wait_until(lambda: all(m.done for m in msgs))
                    data = rng.randbytes(n)
                    fab.endpoint(dst).ensure_sink(n)
                    if k % 3:
                        msgs.append(fab.submit(src, lambda ep, now, d=dst, p=data:
                                               ep.send_message(now, d, len(p), payload=p)))
                    else:  # a WRITE with header data (the first packet carries it)
                        msgs.append(fab.submit(src, lambda ep, now, d=dst, p=data: ep.call(
                            now, "write", ep.target(d, resource_index=SINK_INDEX), SINK_KEY,
                            0, p, header_data=0x5EED, mode=ep.mode)))
                await fab.wait_until(lambda: all(m.done for m in msgs))
            cap.close()
            out = {"fct": [getattr(m, "fct_ps", None) for m in msgs],
                   "counters": fab.counters(),
                   "events": fab.net.loop.events, "now": fab.net.loop.now,
                   # what landed in every host's memory (a private sink keeps the bytes)
                   "sinks": [hashlib.sha256(bytes(fab.endpoint(i).sink or b"")).hexdigest()
                             for i in range(len(fab.hosts))],
                   # every host's delivery audit (packets seen, duplicates, open messages)
                   "audits": [(a.seen, a.duplicates, len(a.messages), list(a.finished))
                              for a in (fab.endpoint(i).audit
                                        for i in range(len(fab.hosts)))]}
        out["capture"] = hashlib.sha256(path.read_bytes()).hexdigest()
        out["frames"] = path.stat().st_size
    return out


FABRICS = {
    "incast": ({"kind": "fat_tree", "k": 4, "queue_bytes": 60_000, "ecn_kmin": 10_000,
                "ecn_kmax": 50_000}, [(s, 0, 200 * 1024) for s in range(1, 16)], 5,
               ["h0", "tor0.p2"]),
    "impaired": ({"kind": "fat_tree", "k": 4, "impairments": [
        {"at": "tor0.p2", "loss": 0.02, "duplicate": 0.02, "corrupt": 0.01},
        {"at": "core1.p1", "jitter_ps": 300_000, "reorder": 0.05, "reorder_delay_ps": 2_000_000},
        {"at": "tor2.p2", "gilbert": {"p_gb": 0.01, "p_bg": 0.3}},
        {"at": "agg1.p2", "loss": 0.1, "duplicate": 0.03},
        {"at": "core0.p2", "loss": 0.1, "reorder": 0.1, "reorder_delay_ps": 1_000_000}]},
        [(s, (s * 5 + 3) % 16, 600 * 1024) for s in range(16)], 9, ["h0", "tor0.p2"]),
    # messages of one packet, of exactly one MTU, one byte more, and a few packets
    "sizes": ({"kind": "fat_tree", "k": 4},
              [(s, (s * 7 + 1) % 16, (100, 4096, 4097, 8192, 30_000, 70_001)[s % 6])
               for s in range(16)], 4, ["h0", "h1", "h3"]),
}


@pytest.mark.parametrize("shared", [True, False], ids=["scratch-sink", "own-sink"])
@pytest.mark.parametrize("name", sorted(FABRICS))
def test_fabric_runs_capture_the_same_bytes(name, shared):
    topo, flows, seed, taps = FABRICS[name]
    c = trio.run(_fabric, topo, flows, seed, taps, shared)
    with cores.python_forms():
        py = trio.run(_fabric, topo, flows, seed, taps, shared)
    assert c == py
    if not shared:  # the bytes were written: every destination's sink holds its own
        assert len(set(c["sinks"])) >= len({d for _, d, _ in flows})
    assert c["frames"] > (10_000 if name == "sizes" else 1_000_000)  # the run, not a few
    assert sum(a[0] for a in c["audits"]) > 50  # the audits saw the deliveries
    # and the runs reach the paths that matter: trimming, loss recovery, CC blocking
    total: dict[str, int] = {}
    for counters in c["counters"]["endpoint"].values():
        for k, v in counters.items():
            if isinstance(v, int):
                total[k] = total.get(k, 0) + v
    for key, least in REACHES[name].items():
        assert total.get(key, 0) >= least, (key, total.get(key, 0))


REACHES = {"sizes": {},
           "incast": {"pds.retx.nack.TRIMMED": 100, "pds.blocked.cc": 100},
           "impaired": {"pds.retx.rack": 10, "pds.retx.rto": 1, "pds.blocked.window": 1}}


def test_a_subclass_that_overrides_a_step_gets_the_python_form():
    """The fabric end point's core runs for FabricEndpoint itself only: a subclass that
    overrides a step of receiving (here ``receive_frame``) sees every frame."""
    from uet.wire.records import Frame, PdsRequest, SesStandard

    seen = []

    class Watching(FabricEndpoint):
        def receive_frame(self, now, frame):
            seen.append(frame.pds.psn)
            super().receive_frame(now, frame)

    frame = Frame(PdsRequest(psn=7, spdcid=3, dpdcid=9), SesStandard(opcode=1, job_id=1),
                  None, bytes(64), src_ip="10.0.0.1", dst_ip="10.0.0.2")
    data = encode_frame(frame)
    plain, watching = FabricEndpoint(ip="10.0.0.2"), Watching(ip="10.0.0.2")
    for ep in (plain, watching):
        ep.receive(5, data)
    assert seen == [7]
    assert plain.stats == watching.stats and plain.stats["fep.rx_frames"] == 1


def test_the_ses_hands_its_message_classes_to_the_sender_core(monkeypatch):
    """The SES (uet.ses.segmentation, at import) gives the PDS's sender core its message
    classes, so the core makes each next segment itself: Segmenter.part is not called in
    the C forms, and is called for every packet of a multi-packet message in the Python
    forms, with the same frames on the wire either way."""
    import uet.ses.segmentation as seg

    calls = []
    part = seg.Segmenter.part

    def counted(self, i):
        calls.append(i)
        return part(self, i)

    monkeypatch.setattr(seg.Segmenter, "part", counted)
    flows = [(0, 5, 64 * 1024), (3, 9, 40_000)]  # 16 and 10 packets
    c = trio.run(_fabric, {"kind": "fat_tree", "k": 4}, flows, 3, ["h0"], True)
    in_c = len(calls)
    with cores.python_forms():
        py = trio.run(_fabric, {"kind": "fat_tree", "k": 4}, flows, 3, ["h0"], True)
    assert c == py
    assert in_c == 0
    assert sorted(calls) == sorted(list(range(16)) + list(range(10)))


def test_a_bulk_message_sends_the_shared_zero_chunk_in_both_forms():
    """send_message without data of its own: every full packet the sender core makes
    carries the one shared zeros(mtu) (the Segmenter's zero_chunk), as the Python forms
    do, and the frames are the same bytes either way (with no packet memoryview each);
    the core's packets share the ints of their sizes (pyint.h, memo_int)."""
    from uet.ses.segmentation import zeros

    def frames(dsts: tuple[str, ...] = (B_IP,)) -> tuple[list, list]:
        a = FabricEndpoint(ip=A_IP)
        for d in dsts:
            a.send_message(0, d, 10 * 4096 + 100)
        out = []
        for t in range(0, 10 ** 9, 10 ** 6):
            f = a.poll_frame(t)
            if f is None:
                break
            out.append(f)
        return out, [list(p.outstanding.values()) for p in a.pds.pdcs()]

    c, _ = frames()
    with cores.python_forms():
        py, _ = frames()
    # the sizes every full packet carries are one int each, not one per packet, and the
    # i-th packets of two messages share the ints of their index and offset
    _, (one, two) = frames((B_IP, "10.0.0.3"))
    full = one[1:-1]
    assert len(full) == 9
    for field in (lambda p: p.nbytes, lambda p: p.cost, lambda p: p.req.ses.payload_length):
        assert len({id(field(p)) for p in full}) == 1
    assert [p.req.ses.message_offset for p in one[1:-1]] == [4096 * i for i in range(1, 10)]
    for p, q in zip(one[1:-1], two[1:-1], strict=True):
        assert p.req.ses.message_offset is q.req.ses.message_offset
        assert p.req.msg_ref.index is q.req.msg_ref.index
    assert len(c) == len(py) == 11
    assert [f.payload is zeros(4096) for f in c] == [True] * 10 + [False]
    assert [f.payload is zeros(4096) for f in py] == [True] * 10 + [False]
    assert bytes(c[-1].payload) == bytes(100)
    assert [encode_frame(f) for f in c] == [encode_frame(f) for f in py]


def test_has_data_work_in_c_answers_as_the_python():
    """InitiatorPdc.has_data_work (asked after every data packet a PDC sends): the C form
    against the Python over every state, with and without a retransmission or queued
    messages, and a subclass that overrides what it reads gets the Python form."""
    from collections import deque

    from uet.pds.initiator import REFERENCE, InitiatorPdc, InitiatorState

    a, b = pair(PdsConfig(), PdsConfig(), seed=5)
    net = Net([a, b], seed=5)
    for i in range(3):
        a.ep.submit(0, request(payload=bytes(64), msg_ref=i, ses=ses_std(msg_id=i)))
    net.run(until=2 * US)
    pdc = next(p for p in a.ep.pdcs("initiator") if isinstance(p, InitiatorPdc))
    assert InitiatorPdc.has_data_work is not REFERENCE["has_data_work"]
    saved = (pdc.state, pdc.rec.retx, pdc.queue)
    seen = set()
    try:
        for state in InitiatorState:
            for retx in ([], [7]):
                for queued in (False, True):
                    pdc.state, pdc.rec.retx = state, retx
                    pdc.queue = deque(["m"]) if queued else deque()
                    got, want = pdc.has_data_work(), REFERENCE["has_data_work"](pdc)
                    assert got is want, (state, retx, queued)
                    seen.add(got)
    finally:
        pdc.state, pdc.rec.retx, pdc.queue = saved
    assert seen == {True, False}

    class Later(InitiatorPdc):
        __slots__ = ()

    assert type(pdc) is InitiatorPdc
    pdc.__class__ = Later
    try:
        pdc.rec.retx = [1]
        assert pdc.has_data_work() is True  # the reference, through the C entry
    finally:
        pdc.rec.retx = saved[1]
        pdc.__class__ = InitiatorPdc
