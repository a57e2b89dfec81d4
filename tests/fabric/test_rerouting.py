"""Routing that reacts to link failures (``topology.reroute_us``, uet.fabric.routing)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from uet.experiments.config import load_config
from uet.experiments.runner import run_experiment
from uet.fabric.clock import US
from uet.fabric.network import Network
from uet.fabric.topology import build


def _routes(net: Network) -> dict[tuple[str, bytes], list[str]]:
    return {(sw.name, ip): [p.name for p in ports]
            for sw in net.switches.values() for ip, ports in sw.routes.items()}


def _down(net: Network, iface: str, up: bool = False) -> None:
    for direction in ("tx", "rx"):
        net.channel(iface, direction).set_up(up)


def test_routes_avoid_a_dead_link_after_the_delay_and_come_back_with_it() -> None:
    """k=4 fat tree: core0's link to agg0 dies; 5 us later no switch routes onto it (ECMP
    over the other paths), nothing changes before; when it comes back, the original
    up/down routes return exactly, in the same order."""
    net = build(Network(seed=1), {"kind": "fat_tree", "k": 4, "reroute_us": 5})
    original = _routes(net)
    dead = net.link_of["core0.p0"]
    ends = {dead.ab.name.split("->")[0], dead.ab.name.split("->")[1]}
    net.loop.at(1 * US, lambda _: _down(net, "core0.p0"))
    net.loop.run(until=5 * US)
    assert _routes(net) == original  # converges delay after the change, not before
    net.loop.run(until=7 * US)
    now = _routes(net)
    assert now != original
    assert not [k for k, ports in now.items() if ends & set(ports)]  # nobody uses it
    # agg0 still reaches other pods, over its other core link only
    agg0_up = {tuple(v) for (sw, _), v in now.items() if sw == "agg0" and len(v) == 1}
    assert agg0_up and all("core" not in p for p in ends - {"core0.p0"})
    assert net.rerouter.recomputations == 1
    net.loop.at(10 * US, lambda _: _down(net, "core0.p0", up=True))
    net.loop.run(until=20 * US)
    assert _routes(net) == original and net.rerouter.recomputations == 2


def test_fixed_routes_by_default() -> None:
    net = build(Network(seed=1), {"kind": "fat_tree", "k": 4})
    original = _routes(net)
    _down(net, "core0.p0")
    net.loop.run(until=100 * US)
    assert net.rerouter is None and _routes(net) == original


def test_bad_reroute_delay_names_the_key() -> None:
    with pytest.raises(ValueError, match="topology.reroute_us"):
        build(Network(seed=1), {"kind": "fat_tree", "k": 4, "reroute_us": -1})


def _run(reroute: bool) -> dict:
    sets = ["output.plots=false", "output.progress=false", "capture.ifaces=[]",
            "capture.links=[]", "impairments[0].loss=0",
            "impairments[0].down=[[20000000]]",  # core0's link to agg0 dies at 20 us
            "traffic.size=256KiB", "experiment.seed=3"]
    if reroute:
        sets.append("topology.reroute_us=10")
    cfg = load_config(None, sets)
    return run_experiment(cfg, Path(tempfile.mkdtemp()))


def test_rerouting_stops_the_losses_on_a_dead_core_link() -> None:
    """The default experiment's fabric with its core link dead from 20 us on: with fixed
    routes the flows hashed onto it keep losing packets there until their senders' EVs
    move away; with routing converging 10 us after the failure, the losses stop then
    (what was queued or sent before convergence is still lost), and every message
    completes either way."""
    fixed, rerouted = _run(False), _run(True)
    for res in (fixed, rerouted):
        assert res["summary"]["messages_delivered"] == res["summary"]["flows"] == 16
        assert res["summary"]["duplicates_delivered"] == 0
    lost_fixed = sum(v for k, v in fixed["counters"]["link"]["core0.p0->agg0.p2"].items()
                     if k == "drop.link_down")
    lost_rerouted = sum(v for k, v in
                        rerouted["counters"]["link"]["core0.p0->agg0.p2"].items()
                        if k == "drop.link_down")
    assert 0 < lost_rerouted < lost_fixed  # measured: 94 against 237 (both directions)
    tail = [r["summary"]["fct_tail_over_ideal"] for r in (fixed, rerouted)]
    assert tail[1] < tail[0]  # measured: 3.3 against 20.1 times the ideal
