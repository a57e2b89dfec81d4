"""Exact serialisation + propagation + store-and-forward timing in virtual time."""

from __future__ import annotations

import pytest

from tests.fabric.helpers import data_frame, script_factory
from uet.fabric.clock import US, ser_ps
from uet.runtime.fabric import Fabric

HOP = 332_000 + 1_000_000  # a 4150 B frame at 100 Gb/s + 1 us of cable


def test_serialisation_constants() -> None:
    assert ser_ps(4150, 100 * 10**9) == 332_000
    assert ser_ps(1, 100 * 10**9) == 80
    assert ser_ps(4150, 25 * 10**9) == 1_328_000
    assert ser_ps(1, 3 * 10**9) == 2667  # rounded up


async def _one_way(topo: dict, src: int, dst: int, n: int = 1) -> list[tuple[int, bytes]]:
    async with Fabric(topo, seed=1, endpoint_factory=script_factory) as fab:
        s, d = fab.net.hosts[src], fab.net.hosts[dst]
        frames = [data_frame(s, d, psn=i) for i in range(n)]
        assert len(frames[0]) == 4150
        fab.submit(src, lambda ep, now: ep.out.extend(frames))
        await fab.sleep(50 * US)
        assert fab.now == 50 * US
        return fab.endpoint(dst).got


@pytest.mark.parametrize(("topo", "src", "dst", "hops"), [
    ({"kind": "back_to_back"}, 0, 1, 1),
    ({"kind": "star", "hosts": 3}, 0, 2, 2),
    ({"kind": "fat_tree", "k": 4}, 0, 1, 2),
    ({"kind": "fat_tree", "k": 4}, 0, 2, 4),
    ({"kind": "fat_tree", "k": 4}, 0, 13, 6),
    ({"kind": "leaf_spine", "leaves": 2, "spines": 2, "hosts_per_leaf": 2}, 0, 3, 4),
])
async def test_store_and_forward(topo: dict, src: int, dst: int, hops: int) -> None:
    got = await _one_way(topo, src, dst)
    assert [t for t, _ in got] == [hops * HOP]


async def test_back_to_back_frames_are_serialised() -> None:
    got = await _one_way({"kind": "fat_tree", "k": 4}, 0, 13, n=3)
    assert [t for t, _ in got] == [6 * HOP, 6 * HOP + 332_000, 6 * HOP + 664_000]


async def test_degraded_rate_and_delay() -> None:
    topo = {"kind": "back_to_back", "delay_ns": 500,
            "impairments": [{"at": "h0", "direction": "tx", "rate_bps": 25 * 10**9}]}
    got = await _one_way(topo, 0, 1, n=2)
    assert [t for t, _ in got] == [1_328_000 + 500_000, 2 * 1_328_000 + 500_000]


async def test_rate_change_at_a_time() -> None:
    async with Fabric({"kind": "back_to_back"}, endpoint_factory=script_factory) as fab:
        s, d = fab.net.hosts
        fab.net.set_rate("h0", 25 * 10**9, at_ps=400_000, direction="tx")
        fab.submit(0, lambda ep, now: ep.out.extend([data_frame(s, d, psn=i) for i in range(2)]))
        await fab.sleep(10 * US)
        # the first frame started at 100 Gb/s; the second (t=332 ns) too; a third would not
        assert [t for t, _ in fab.endpoint(1).got] == [HOP, HOP + 332_000]
        fab.submit(0, lambda ep, now: ep.out.append(data_frame(s, d, psn=9)))
        await fab.sleep(10 * US)
        t_sent = fab.endpoint(0).sent_at[-1]
        assert fab.endpoint(1).got[-1][0] == t_sent + 1_328_000 + 1_000_000
