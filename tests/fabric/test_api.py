"""The Trio API: virtual sleep, waiting, stalls, message completion, topologies, config."""

from __future__ import annotations

import tomllib

import pytest
import trio

from uet.bench.traffic_endpoint import factory as traffic
from uet.fabric.clock import MS, US
from uet.fabric.network import Network
from uet.fabric.topology import build
from uet.runtime.fabric import Fabric, FabricStalled

PERM = [(13, 6), (1, 4), (6, 0), (2, 13), (10, 5), (15, 1), (8, 14), (14, 2), (5, 15),
        (4, 12), (12, 11), (0, 8), (9, 7), (7, 9), (3, 10), (11, 3)]


async def test_virtual_sleep_is_exact_and_concurrent() -> None:
    woke: list[tuple[str, int]] = []
    async with Fabric({"kind": "back_to_back"}) as fab:
        async def sleeper(name: str, dt: int) -> None:
            await fab.sleep(dt)
            woke.append((name, fab.now))

        async with trio.open_nursery() as n:
            n.start_soon(sleeper, "b", 7 * US)
            n.start_soon(sleeper, "a", 3 * US)
            n.start_soon(sleeper, "c", 7 * US + 1)
        assert woke == [("a", 3 * US), ("b", 7 * US), ("c", 7 * US + 1)]
        await fab.sleep(10 * MS)  # virtual: returns at once in wall time
        assert fab.now == 10 * MS + 7 * US + 1


async def test_wait_until_stall_raises() -> None:
    async with Fabric({"kind": "back_to_back"}) as fab:
        with pytest.raises(FabricStalled):
            await fab.wait_until(lambda: False)
        assert await fab.wait_until(lambda: False, timeout_ps=5 * US) is False
        assert fab.now == 5 * US


async def test_wait_until_checks_on_every_change_only_while_someone_waits() -> None:
    """NICs call the fabric back only while a task waits on a condition; the condition is
    checked after every frame, so the waiter wakes at the frame that makes it true."""
    async with Fabric({"kind": "fat_tree", "k": 4}, seed=3,
                      endpoint_factory=traffic()) as fab:
        nics = fab.net.nics
        assert all(n.on_change is None for n in nics)
        seen: list[tuple[int, int]] = []
        watched: list[bool] = []

        def arrived(count: int) -> bool:
            watched.append(all(nic.on_change is not None for nic in nics))
            return fab.endpoint(13).stats["rx_data"] >= count

        async def watch(count: int) -> None:
            assert await fab.wait_until(lambda: arrived(count))
            seen.append((count, fab.endpoint(13).stats["rx_data"]))

        async with trio.open_nursery() as n:
            n.start_soon(watch, 10)
            n.start_soon(watch, 40)
            msg = await fab.send(0, 13, 256 * 1024)
        assert msg.done
        assert seen == [(10, 10), (40, 40)]  # woken at the very frame, not later
        assert len(watched) > 40 and all(watched)
        assert all(nic.on_change is None for nic in nics)
        await fab.sleep(5 * US)  # plain sleeps need no callbacks
        assert all(nic.on_change is None for nic in nics)


async def test_message_completes_with_real_frames() -> None:
    async with Fabric({"kind": "fat_tree", "k": 4}, seed=3,
                      endpoint_factory=traffic()) as fab:
        msg = await fab.send(0, 13, 256 * 1024)
        assert msg.done
        # 65 packets of 4150 B (last one shorter) + 6 hops + the ACK back: >= ideal
        ideal = 256 * 1024 * 8 * 1000 // 100 // 4052 * 4150 // 1000
        assert msg.fct_ps > ideal
        st = fab.endpoint(13).stats
        assert st["rx_data"] == 65 and st["decode_errors"] == 0
        c = fab.counters()
        assert c["nic"]["h0"]["tx_frames"] == 65
        assert c["link"]["h0->tor0.p0"]["tx_frames"] == 65


async def test_permutation_is_deterministic() -> None:
    async def run(seed: int) -> list[int]:
        async with Fabric({"kind": "fat_tree", "k": 4}, seed=seed,
                          endpoint_factory=traffic()) as fab:
            msgs = await fab.run_messages([(s, d, 128 * 1024) for s, d in PERM])
            return [m.fct_ps for m in msgs]

    a, b = await run(5), await run(5)
    assert a == b
    assert all(x > 0 for x in a)


def test_fat_tree_shapes_and_addresses() -> None:
    net = build(Network(seed=0), {"kind": "fat_tree", "k": 4})
    assert len(net.nics) == 16 and len(net.switches) == 20
    assert [h.ip for h in net.hosts[:5]] == ["10.0.0.2", "10.0.0.3", "10.0.1.2", "10.0.1.3",
                                              "10.1.0.2"]
    assert net.link_of["h0"].name == "h0<->tor0.p0"
    assert net.link_of["h3"].name == "h3<->tor1.p1"
    assert net.link_of["tor0.p2"].name == "tor0.p2<->agg0.p0"
    assert all(p.lasthop == (p.index < 2) for p in net.switches["tor5"].ports)
    big = build(Network(seed=0), {"kind": "fat_tree", "k": 8})
    assert len(big.nics) == 128 and len(big.switches) == 80
    v6 = build(Network(seed=0), {"kind": "fat_tree", "k": 4, "ipv6": True})
    assert v6.hosts[13].ip == "fd00::3:0:3"


def test_topology_from_toml_and_bad_keys() -> None:
    cfg = tomllib.loads("""
[topology]
kind = "leaf_spine"
leaves = 3
spines = 2
hosts_per_leaf = 4
oversubscription = 2.0
rate_gbps = 100
""")
    net = build(Network(seed=0), cfg["topology"])
    assert len(net.nics) == 12
    assert net.link_of["leaf0.p4"].ab.rate_bps == 100 * 10**9 * 4 // 4  # 4x100 / (2 x 2)
    with pytest.raises(ValueError, match="queue_byts"):
        build(Network(seed=0), {"kind": "star", "queue_byts": 1})
    with pytest.raises(ValueError, match="allowed"):
        build(Network(seed=0), {"kind": "torus"})


async def test_ipv6_fabric_carries_messages() -> None:
    async with Fabric({"kind": "fat_tree", "k": 4, "ipv6": True}, seed=2,
                      endpoint_factory=traffic()) as fab:
        msgs = await fab.run_messages([(0, 13, 64 * 1024), (13, 0, 64 * 1024)])
        assert all(m.done for m in msgs)
        assert fab.endpoint(13).stats["decode_errors"] == 0


async def test_body_exception_propagates_unwrapped() -> None:
    with pytest.raises(KeyError):
        async with Fabric({"kind": "back_to_back"}) as fab:
            await fab.sleep(US)
            raise KeyError("x")


async def test_custom_endpoint_factory_and_realtime_mode() -> None:
    from tests.fabric.helpers import data_frame, script_factory

    async with Fabric({"kind": "back_to_back"}, endpoint_factory=script_factory,
                      realtime=True) as fab:
        s, d = fab.net.hosts
        fab.submit(0, lambda ep, now: ep.out.append(data_frame(s, d)))
        ok = await fab.wait_until(lambda: bool(fab.endpoint(1).got), timeout_ps=2 * MS * 1000)
        assert ok
        (t, _), = fab.endpoint(1).got
        assert t >= 1_332_000  # never earlier than the modelled time


async def test_k8_fat_tree_permutation() -> None:
    import random

    rng = random.Random(1)
    perm = list(range(128))
    while any(p == i for i, p in enumerate(perm)):
        rng.shuffle(perm)
    async with Fabric({"kind": "fat_tree", "k": 8}, seed=1,
                      endpoint_factory=traffic()) as fab:
        msgs = await fab.run_messages([(i, perm[i], 64 * 1024) for i in range(128)])
        assert all(m.done for m in msgs)
        assert sum(e["decode_errors"] for e in fab.counters()["endpoint"].values()) == 0


async def test_switches_follow_route_changes_between_frames() -> None:
    """The C path memoises a switch's two table lookups per destination: a change of either
    table (a direct entry, a host route's list) redirects the very next frames."""
    import ipaddress

    async with Fabric({"kind": "fat_tree", "k": 4}, seed=3,
                      endpoint_factory=traffic()) as fab:
        tor = fab.net.switches["tor0"]
        dst = ipaddress.ip_address(fab.net.hosts[13].ip).packed
        ups = sorted(tor.routes[dst], key=lambda p: p.name)
        assert len(ups) == 2 and dst not in tor.direct

        def sent() -> dict[str, int]:
            links = fab.counters()["link"]
            return {p.name: next(v["tx_frames"] for k, v in links.items()
                                 if k.startswith(p.name + "->")) for p in ups}

        await fab.send(0, 13, 64 * 1024)
        first = sent()
        assert all(first.values())  # ECMP over both uplinks, lookups memoised
        tor.routes[dst] = [ups[0]]  # one host route left
        await fab.send(0, 13, 64 * 1024)
        second = sent()
        assert second[ups[1].name] == first[ups[1].name] and second[ups[0].name] > first[
            ups[0].name]
        tor.direct[dst] = ups[1]  # a direct entry wins
        await fab.send(0, 13, 64 * 1024)
        third = sent()
        assert third[ups[0].name] == second[ups[0].name] and third[ups[1].name] > second[
            ups[1].name]
        tor.routes[dst].append(ups[1])  # an in-place change of a list: read at each frame
        del tor.direct[dst]
        await fab.send(0, 13, 256 * 1024)
        fourth = sent()
        assert all(fourth[p.name] > third[p.name] for p in ups)


async def test_advance_to_runs_the_same_events_as_sleep_until() -> None:
    """The plain-code driver (uet run's) and a Trio task see the same fabric at the same
    times, down to the frame counts, and end with the same counters and completion times."""
    flows = [(s, d, 64 * 1024) for s, d in PERM]
    grid = [2 * US * i for i in range(1, 40)]

    plain = Fabric({"kind": "fat_tree", "k": 4}, seed=7, endpoint_factory=traffic())
    msgs_a = [plain.start_message(s, d, n) for s, d, n in flows]
    seen_a = []
    for t in grid:
        plain.advance_to(t)
        seen_a.append((plain.now, plain.endpoint(13).stats["rx_data"],
                       sum(m.done for m in msgs_a)))
    plain.close()

    async with Fabric({"kind": "fat_tree", "k": 4}, seed=7,
                      endpoint_factory=traffic()) as fab:
        msgs_b = [fab.start_message(s, d, n) for s, d, n in flows]
        seen_b = []
        for t in grid:
            await fab.sleep_until(t)
            seen_b.append((fab.now, fab.endpoint(13).stats["rx_data"],
                           sum(m.done for m in msgs_b)))
        counters_b = fab.counters()

    assert seen_a == seen_b
    assert seen_a[-1][2] == len(flows)  # every message done within the grid
    assert [m.fct_ps for m in msgs_a] == [m.fct_ps for m in msgs_b]
    assert plain.counters() == counters_b
    assert plain.wakeups == len(grid)


async def test_advance_to_refuses_what_it_cannot_do() -> None:
    from uet.errors import LocalError

    fab = Fabric({"kind": "back_to_back"})
    fab.advance_to(5 * US)
    assert fab.now == 5 * US
    with pytest.raises(LocalError, match="in the past"):
        fab.advance_to(US)
    async with fab:
        with pytest.raises(LocalError, match="running under Trio"):
            fab.advance_to(10 * US)
        await fab.sleep(US)  # the Trio driver still works on a fabric stepped before
        assert fab.now == 6 * US
    with pytest.raises(LocalError, match="closed"):
        fab.advance_to(10 * US)
    real = Fabric({"kind": "back_to_back"}, realtime=True)
    with pytest.raises(LocalError, match="real-time"):
        real.advance_to(US)


def test_a_virtual_uet_run_never_imports_trio(tmp_path) -> None:
    """Trio is only for programs with tasks: the virtual `uet run` steps the fabric from
    plain code (~0.2 s of start-up saved); the live run still goes through Trio."""
    import subprocess
    import sys

    code = ("import sys; from uet.cli import main; rc = main(['run', '--no-progress', "
            "'--set', 'traffic.size=64KiB', '--set', 'output.plots=false', "
            f"'--out', {str(tmp_path)!r}]); "
            "print(rc, 'trio' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out[-2:] == ["0", "False"]
    assert (tmp_path / "results.json").exists()
