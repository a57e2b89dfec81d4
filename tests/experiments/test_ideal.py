"""The ideal FCT against htsim's own ideal (docs/validation.md, "The ideal: like for like")."""

from __future__ import annotations

import pytest

from uet.experiments import traffic
from uet.experiments.config import load_config
from uet.experiments.ideal import Hop, TopologyModel, WireFormat, ideal_fct_ps, ideal_fcts

MB2 = 2_000_000
FT = TopologyModel.from_config(load_config()["topology"])  # k=4, 100 Gb/s, 1 us


def us(ps: int) -> float:
    return ps / 1e6


def test_wire_format() -> None:
    w = WireFormat.htsim()
    assert w.packets(MB2) == 490 and w.wire_bytes(MB2) == 2_033_500
    exact = WireFormat(pad_last=False)
    assert exact.wire_bytes(MB2) == MB2 + 490 * 64
    assert w.packets(1) == 1


def test_paths_of_the_fat_tree() -> None:
    assert FT.hosts == 16
    assert FT.hops(0, 1) == 2 and FT.hops(0, 2) == 4 and FT.hops(0, 13) == 6
    assert FT.diameter() == 6


def test_two_megabytes_across_pods_is_170_3_us() -> None:
    assert round(us(ideal_fct_ps(MB2, FT.path(0, 13))), 1) == 170.3
    # 162.7 us of serialisation is the part every extra incast sender adds
    serial = ideal_fct_ps(MB2, [Hop(100e9, 0)])
    assert round(us(serial), 1) == 162.7


def test_incast_is_bounded_by_the_receiver_link() -> None:
    wl = traffic.incast(list(range(16)), 15, MB2, 16)
    ideals = ideal_fcts(wl.flows, FT)
    assert round(us(max(ideals.values()))) == 2448  # htsim: "ideal 2448"
    for n in (2, 4, 8):
        small = traffic.incast(list(range(16)), 15, MB2, 16, degree=n)
        worst = max(ideal_fcts(small.flows, FT).values())
        assert us(worst) == pytest.approx(n * 162.68, abs=8)  # N x 162.7 + path terms


def test_dependent_and_staggered_flows_do_not_share() -> None:
    from uet.experiments.workload import Flow

    flows = [Flow(1, 0, 15, MB2), Flow(2, 1, 15, MB2, start_ps=10**9),
             Flow(3, 2, 15, MB2, depends_on=(1,))]
    ideals = ideal_fcts(flows, FT)
    assert len(set(ideals.values())) == 1 and round(us(ideals[1]), 1) == 170.3


def test_rtt_and_bdp() -> None:
    assert round(us(FT.base_rtt_ps()), 2) == 14.02
    assert FT.bdp_bytes() == 178_450  # 43 packets


def test_other_topologies() -> None:
    ls = TopologyModel.from_config(load_config(None, [
        "topology.kind=leaf_spine", "topology.oversubscription=2.0"])["topology"])
    assert ls.hops(0, 1) == 2 and ls.hops(0, 4) == 4
    # 4 hosts per leaf, 2 spines, 2:1: uplinks at 100 Gb/s each, 200 Gb/s per leaf
    assert ls.uplink_rate_bps == 100e9
    star = TopologyModel.from_config(load_config(None, ["topology.kind=star"])["topology"])
    assert star.hops(0, 3) == 2
    b2b = TopologyModel.from_config(load_config(None, [
        "topology.kind=back_to_back", "traffic.pattern=single", "traffic.dst=1",
        "capture.ifaces=[]", "capture.links=[]"])["topology"])
    assert b2b.hops(0, 1) == 1
    with pytest.raises(ValueError):
        b2b.path(0, 0)
    slow = [Hop(100e9, 1000), Hop(25e9, 1000), Hop(100e9, 1000)]
    t = ideal_fct_ps(MB2, slow)
    assert t == -(-2_033_500 * 8 * 10**12 // int(25e9)) + 3000 + 2 * 332_000
