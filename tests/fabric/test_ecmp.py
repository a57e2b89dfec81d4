"""ECMP: distinct EVs spread over every path, one EV keeps one path."""

from __future__ import annotations

import ipaddress
from collections import Counter

from tests.fabric.helpers import data_frame, script_factory
from uet.fabric.clock import US
from uet.fabric.ecmp import hash_tuple, pick
from uet.runtime.fabric import Fabric


def _paths(fab: Fabric) -> Counter:
    """Frames per (agg, core) hop actually used, from the port counters."""
    c = fab.counters()["port"]
    return Counter({name: v["tx_frames"] for name, v in c.items()
                    if name.startswith(("tor0.", "agg0.", "agg1.")) and v["tx_frames"]})


async def test_distinct_evs_use_all_four_paths() -> None:
    async with Fabric({"kind": "fat_tree", "k": 4}, seed=7, endpoint_factory=script_factory) as fab:
        s, d = fab.net.hosts[0], fab.net.hosts[13]
        frames = [data_frame(s, d, psn=i, ev=0xC000 + i, payload=100) for i in range(256)]
        fab.submit(0, lambda ep, now: ep.out.extend(frames))
        await fab.sleep(100 * US)
        assert len(fab.endpoint(13).got) == 256
        used = _paths(fab)
        # both ToR uplinks and all four aggregation uplinks (2 aggs x 2 cores) carry traffic
        ups = {k: v for k, v in used.items() if k in ("tor0.p2", "tor0.p3")}
        assert len(ups) == 2 and min(ups.values()) > 256 * 0.35
        agg_up = {k: v for k, v in used.items() if k in ("agg0.p2", "agg0.p3", "agg1.p2",
                                                         "agg1.p3")}
        assert len(agg_up) == 4 and min(agg_up.values()) > 256 * 0.15


async def test_one_ev_one_path() -> None:
    async with Fabric({"kind": "fat_tree", "k": 4}, seed=7, endpoint_factory=script_factory) as fab:
        s, d = fab.net.hosts[0], fab.net.hosts[13]
        for ev in (0xC001, 0xD00D, 0xFFFE):
            before = _paths(fab)
            frames = [data_frame(s, d, psn=i, ev=ev, payload=100) for i in range(20)]
            fab.submit(0, lambda ep, now, f=frames: ep.out.extend(f))
            await fab.sleep(50 * US)
            delta = {k: v - before.get(k, 0) for k, v in _paths(fab).items()
                     if v - before.get(k, 0)}
            # exactly one ToR uplink and one aggregation uplink, each with all 20 frames
            assert sorted(delta.values()) == [20, 20], delta


def test_hash_spreads_and_depends_on_seed() -> None:
    src = ipaddress.ip_address("10.0.0.2").packed
    dst = ipaddress.ip_address("10.3.0.3").packed
    for n in (2, 4, 8):
        counts = Counter(pick(hash_tuple(99, src, dst, 17, ev, 4793), n)
                         for ev in range(0xC000, 0xC000 + 4096))
        assert len(counts) == n
        assert max(counts.values()) < 4096 / n * 1.15
    a = [pick(hash_tuple(1, src, dst, 17, ev, 4793), 4) for ev in range(64)]
    b = [pick(hash_tuple(2, src, dst, 17, ev, 4793), 4) for ev in range(64)]
    assert a != b
    assert a == [pick(hash_tuple(1, src, dst, 17, ev, 4793), 4) for ev in range(64)]
