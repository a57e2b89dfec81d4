"""ECN marking (RED between kmin and kmax) and packet trimming at the configured points."""

from __future__ import annotations

import math

from tests.fabric.helpers import data_frame, script_factory
from uet.bench.traffic_endpoint import factory as traffic
from uet.fabric.clock import US
from uet.fabric.qos import DSCP_TRIMMED, DSCP_TRIMMED_LASTHOP
from uet.native import internet_checksum
from uet.runtime.fabric import Fabric
from uet.wire.codec import decode_frame, get_dscp_ecn


def _ip_ok(frame: bytes) -> bool:
    return internet_checksum(frame[14:34]) == 0 and \
        int.from_bytes(frame[16:18], "big") == len(frame) - 14


async def test_red_marking_between_thresholds() -> None:
    kmin, kmax, n = 50_000, 150_000, 200
    topo = {"kind": "star", "hosts": 3, "queue_bytes": 1_000_000, "ecn_kmin": kmin,
            "ecn_kmax": kmax}
    async with Fabric(topo, seed=11, endpoint_factory=script_factory) as fab:
        s, d = fab.net.hosts[0], fab.net.hosts[2]
        # the first 10 frames are Not-ECT: never marked, even above kmax
        frames = [data_frame(s, d, psn=i, payload=902, ecn=0 if i < 10 else 2)
                  for i in range(n)]
        assert len(frames[0]) == 1000
        fab.host(2).send_pause({0: 0xFFFF})  # park everything in sw0.p2 ...
        fab.submit(0, lambda ep, now: ep.out.extend(frames))
        await fab.sleep(30 * US)
        assert fab.net.switches["sw0"].ports[2].qbytes[0] == n * 1000
        fab.host(2).send_pause({0: 0})  # ... then drain: frame i leaves with 200 kB - i kB
        await fab.sleep(30 * US)
        got = fab.endpoint(2).got
        assert len(got) == n
        marked = [get_dscp_ecn(f)[1] == 3 for _, f in got]
        assert all(_ip_ok(f) for _, f in got)
        q = [n * 1000 - i * 1000 for i in range(n)]
        assert not any(marked[:10])
        assert all(marked[i] for i in range(10, n) if q[i] >= kmax)
        assert not any(marked[i] for i in range(n) if q[i] <= kmin)
        mid = [i for i in range(n) if kmin < q[i] < kmax]
        p = [(q[i] - kmin) / (kmax - kmin) for i in mid]
        mean, sd = sum(p), math.sqrt(sum(x * (1 - x) for x in p))
        assert abs(sum(marked[i] for i in mid) - mean) < 4 * sd
        port = fab.counters()["port"]["sw0.p2"]
        assert port["ecn_marked"] == sum(marked)
        assert port["queue_hwm.0"] == n * 1000


async def _incast(topo: dict, senders: list[int], dst: int, n: int, dscp: int | None = None):
    async with Fabric(topo, seed=4, endpoint_factory=script_factory) as fab:
        d = fab.net.hosts[dst]
        for s in senders:
            frames = [data_frame(fab.net.hosts[s], d, psn=i, dscp=dscp) for i in range(n)]
            fab.submit(s, lambda ep, now, f=frames: ep.out.extend(f))
        await fab.sleep(200 * US)
        return fab.endpoint(dst).got, fab.counters()


async def test_trim_at_last_hop() -> None:
    topo = {"kind": "star", "hosts": 3, "queue_bytes": 10 * 4150}
    got, c = await _incast(topo, [0, 1], 2, 40)
    assert len(got) == 80  # nothing lost: trimmed, not dropped
    short = [f for _, f in got if len(f) < 4150]
    assert short and len(short) == c["port"]["sw0.p2"]["trimmed"]
    for f in short:
        assert len(f) == 98 and _ip_ok(f)
        assert get_dscp_ecn(f)[0] == DSCP_TRIMMED_LASTHOP
        fr = decode_frame(f)
        assert fr.payload == b"" and fr.ses.request_length == 4052
    assert not any(k.startswith("drop.") for k in c["port"]["sw0.p2"])
    assert c["port"]["sw0.p2"]["queue_hwm.0"] <= 10 * 4150


async def test_trim_before_last_hop_uses_other_dscp() -> None:
    topo = {"kind": "leaf_spine", "leaves": 2, "spines": 1, "hosts_per_leaf": 2,
            "uplink_gbps": 100, "queue_bytes": 8 * 4150}
    async with Fabric(topo, seed=4, endpoint_factory=script_factory) as fab:
        for s, dst in ((0, 2), (1, 3)):
            frames = [data_frame(fab.net.hosts[s], fab.net.hosts[dst], psn=i)
                      for i in range(40)]
            fab.submit(s, lambda ep, now, f=frames: ep.out.extend(f))
        await fab.sleep(200 * US)
        got = fab.endpoint(2).got + fab.endpoint(3).got
        short = [f for _, f in got if len(f) < 4150]
        assert len(got) == 80 and short
        assert {get_dscp_ecn(f)[0] for f in short} == {DSCP_TRIMMED}
        assert fab.counters()["port"]["leaf0.p2"]["trimmed"] == len(short)


async def test_no_trim_when_off_or_not_trimmable() -> None:
    topo = {"kind": "star", "hosts": 3, "queue_bytes": 10 * 4150, "trimming": False}
    got, c = await _incast(topo, [0, 1], 2, 40)
    drops = c["port"]["sw0.p2"]["drop.queue_full"]
    assert drops > 0 and len(got) == 80 - drops and c["port"]["sw0.p2"]["trimmed"] == 0
    got, c = await _incast({**topo, "trimming": True}, [0, 1], 2, 40, dscp=0)
    assert c["port"]["sw0.p2"]["trimmed"] == 0 and c["port"]["sw0.p2"]["drop.queue_full"] > 0


async def test_trimmed_packets_are_nacked_and_retransmitted() -> None:
    topo = {"kind": "star", "hosts": 5, "queue_bytes": 20 * 4150}
    async with Fabric(topo, seed=9,
                      endpoint_factory=traffic()) as fab:
        msgs = await fab.run_messages([(s, 4, 256 * 1024) for s in range(4)])
        assert all(m.done for m in msgs)
        rx = fab.endpoint(4).stats
        assert rx["rx_trimmed"] > 0 and rx["tx_nack"] == rx["rx_trimmed"]
        rtx = sum(fab.endpoint(s).stats["tx_rtx"] for s in range(4))
        assert rtx >= rx["rx_trimmed"]


async def test_htsim_incast_with_trimming_completes() -> None:
    async with Fabric({"kind": "fat_tree", "k": 4}, seed=13,
                      endpoint_factory=traffic()) as fab:
        msgs = await fab.run_messages([(i, 15, 256 * 1024) for i in range(15)])
        assert all(m.done for m in msgs)
        rx = fab.endpoint(15).stats
        port = fab.counters()["port"]["tor7.p1"]  # the ToR port facing host 15
        assert port["trimmed"] > 0 and rx["rx_trimmed"] >= port["trimmed"]
        assert rx["tx_nack"] == rx["rx_trimmed"]
        assert not [k for k in port if k.startswith("drop.")]
        # ideal: the receiver link carries 15 x 256 KiB; trimming keeps the tail close to it
        ideal = 15 * 65 * 4150 * 80
        assert max(m.fct_ps for m in msgs) < 1.6 * ideal
