"""Each impairment at its configured rate within statistical bounds (seeded)."""

from __future__ import annotations

import math

import pytest

from tests.fabric.helpers import data_frame, script_factory
from uet.bench.traffic_endpoint import factory as traffic
from uet.fabric.clock import US
from uet.fabric.eventlog import EventLog
from uet.fabric.impairments import GilbertElliott, Impairments
from uet.fabric.network import Network
from uet.fabric.topology import build
from uet.runtime.fabric import Fabric

N = 10_000
FRAME = 98  # headers only: 7.84 ns at 100 Gb/s


@pytest.fixture(scope="module")
def frames() -> list[bytes]:
    net = build(Network(), {"kind": "back_to_back"})
    s, d = net.hosts
    return [data_frame(s, d, psn=i, payload=0) for i in range(N)]


def psn(f: bytes) -> int:
    return int.from_bytes(f[46:50], "big")


async def _run(frames: list[bytes], seed: int = 1, log: EventLog | None = None, **imp):
    topo = {"kind": "back_to_back",
            "impairments": [{"at": "h0", "direction": "tx", **imp}]}
    async with Fabric(topo, seed=seed, endpoint_factory=script_factory, eventlog=log) as fab:
        fab.submit(0, lambda ep, now: ep.out.extend(frames))
        await fab.sleep(N * 8000 + 200 * US)
        return fab.endpoint(0).sent_at, fab.endpoint(1).got, fab.counters()


def _within(x: float, n: int, p: float, sigmas: float = 4.0) -> bool:
    return abs(x - n * p) <= sigmas * math.sqrt(n * p * (1 - p))


async def test_bernoulli_loss(frames) -> None:
    _, got, c = await _run(frames, loss=0.1)
    lost = N - len(got)
    assert _within(lost, N, 0.1)
    assert c["link"]["h0->h1"]["drop.loss"] == lost
    _, got2, _ = await _run(frames, loss=0.1)
    assert [psn(f) for _, f in got2] == [psn(f) for _, f in got]  # seeded
    _, got3, _ = await _run(frames, seed=2, loss=0.1)
    assert [psn(f) for _, f in got3] != [psn(f) for _, f in got]


async def test_gilbert_elliott_bursts(frames) -> None:
    ge = GilbertElliott(p_gb=0.01, p_bg=0.1)
    _, got, c = await _run(frames, gilbert={"p_gb": 0.01, "p_bg": 0.1})
    received = {psn(f) for _, f in got}
    lost = [i for i in range(N) if i not in received]
    assert abs(len(lost) / N - ge.mean_loss()) < 0.35 * ge.mean_loss()
    bursts, run = [], 1
    for a, b in zip(lost, lost[1:], strict=False):
        if b == a + 1:
            run += 1
        else:
            bursts.append(run)
            run = 1
    bursts.append(run)
    assert 7 <= sum(bursts) / len(bursts) <= 14  # mean burst 1 / p_bg = 10
    assert c["link"]["h0->h1"]["drop.burst_loss"] == len(lost)


async def test_corruption_fails_the_fcs(frames) -> None:
    _, got, c = await _run(frames, corrupt=0.05, corrupt_bits=3)
    bad = c["nic"]["h1"]["drop.fcs"]
    assert _within(bad, N, 0.05) and len(got) + bad == N
    assert c["link"]["h0->h1"]["corrupted"] == bad
    assert all(f == frames[psn(f)] for _, f in got)  # what got through is intact


async def test_duplication(frames) -> None:
    _, got, c = await _run(frames, duplicate=0.05)
    dups = len(got) - N
    assert _within(dups, N, 0.05) and c["link"]["h0->h1"]["duplicated"] == dups
    assert len({psn(f) for _, f in got}) == N


async def test_jitter_reorders_within_bounds(frames) -> None:
    sent, got, _ = await _run(frames, jitter_ps=2 * US)
    assert len(got) == N
    extra = [t - (sent[psn(f)] + FRAME * 80 + 1_000_000) for t, f in got]
    assert min(extra) >= 0 and max(extra) <= 2 * US
    assert sum(1 for a, b in zip(got, got[1:], strict=False) if psn(b[1]) < psn(a[1])) > 100


async def test_reorder_probability(frames) -> None:
    sent, got, _ = await _run(frames, reorder=0.02, reorder_delay_ps=5 * US)
    held = sum(1 for t, f in got if t - sent[psn(f)] >= 5 * US)
    assert _within(held, N, 0.02)


async def test_link_down_and_up(frames) -> None:
    log = EventLog(keep=True)
    sent, got, c = await _run(frames, log=log, down=[(20 * US, 40 * US)])
    lost = c["link"]["h0->h1"]["drop.link_down"]
    # frames that started transmission while down, or were on the wire when it went down
    expect = sum(1 for t in sent if 20 * US - FRAME * 80 - 1_000_000 < t < 40 * US)
    assert abs(lost - expect) <= 1 and len(got) == N - lost
    assert [r["event"] for r in log.records if r["event"].startswith("link")] == \
        ["link_down", "link_up"]


def test_bad_impairment_config_names_the_key() -> None:
    with pytest.raises(ValueError, match="loss"):
        Impairments(loss=1.5)
    with pytest.raises(ValueError, match="jiter"):
        Impairments.from_dict({"jiter": 3})


async def test_flow_ending_with_reordering_does_not_wait_for_rto() -> None:
    topo = {"kind": "back_to_back",
            "impairments": [{"at": "h0", "direction": "tx", "jitter_ps": 3 * US}]}
    async with Fabric(topo, seed=8,
                      endpoint_factory=traffic()) as fab:
        for _ in range(5):
            msg = await fab.send(0, 1, 64 * 1024)
            assert msg.fct_ps < 20 * US  # 16 packets: ~5.3 us + 1 us + jitter, RTO is 100 us
        assert fab.endpoint(0).stats["rto"] == 0
        assert fab.endpoint(1).stats["rx_data"] == 5 * 17


def test_queue_factor_scales_the_sending_switch_port() -> None:
    """docs/fabric.md "Links and impairments": queue_factor scales the byte limits and ECN
    thresholds of the switch port that transmits in the impaired direction (htsim keeps a
    degraded link's buffer the same in time), and only that port."""
    net = build(Network(seed=1), {"kind": "fat_tree", "k": 4})
    down, up = net.ifaces["core0.p0"], net.ifaces["agg0.p2"]
    assert (down.limit[0], down.kmin[0], down.kmax[0]) == (178450, 37350, 145250)
    net.impair("core0.p0", {"rate_bps": 25 * 10**9, "queue_factor": 0.25}, "tx")
    assert (down.limit[0], down.kmin[0], down.kmax[0]) == (44612, 9337, 36312)
    assert down.limit[1] == 44612  # the control / trimmed class too (htsim: 2 x maxsize)
    assert (up.limit[0], up.kmin[0]) == (178450, 37350)  # the other direction's sender
    net.impair("agg0.p2", {"queue_factor": 0.5}, "rx")  # rx of agg0.p2 = sent by core0.p0
    assert down.limit[0] == 22306
    with pytest.raises(ValueError, match="host NIC"):
        net.impair("h0", {"queue_factor": 0.5}, "tx")
    with pytest.raises(ValueError, match="queue_factor"):
        Impairments(queue_factor=0.0)


async def test_queue_factor_limits_the_queue_in_traffic() -> None:
    """A 2:1 incast through a port scaled to a quarter: its queue never exceeds the scaled
    limit (one frame in service aside) and the excess is trimmed."""
    topo = {"kind": "star", "hosts": 3,
            "impairments": [{"at": "h2", "direction": "rx", "queue_factor": 0.25}]}
    async with Fabric(topo, seed=3, endpoint_factory=traffic()) as fab:
        await fab.run_messages([(0, 2, 1 << 20), (1, 2, 1 << 20)])
        port = fab.counters()["port"]["sw0.p2"]
    assert 0 < port["queue_hwm.0"] <= 44612 and port["trimmed"] > 0
