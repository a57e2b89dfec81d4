"""Traffic generators: the right flows, sizes and dependencies."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from uet.experiments import traffic
from uet.experiments.config import load_config
from uet.experiments.workload import DependencyTracker, Flow, Workload, WorkloadError

HOSTS = list(range(16))


def test_permutation_is_a_seeded_derangement() -> None:
    for seed in range(20):
        wl = traffic.permutation(HOSTS, 1000, 16, seed=seed)
        assert len(wl.flows) == 16
        assert all(f.src != f.dst for f in wl.flows)
        assert sorted(f.src for f in wl.flows) == HOSTS
        assert sorted(f.dst for f in wl.flows) == HOSTS
    a = traffic.permutation(HOSTS, 1000, 16, seed=5)
    b = traffic.permutation(HOSTS, 1000, 16, seed=5)
    c = traffic.permutation(HOSTS, 1000, 16, seed=6)
    assert a.flows == b.flows and a.flows != c.flows


def test_permutation_from_explicit_pairs() -> None:
    pairs = [[13, 6], [1, 4], [6, 0]]
    wl = traffic.permutation(HOSTS, 2_000_000, 16, pairs=pairs)
    assert [(f.id, f.src, f.dst, f.size) for f in wl.flows] == [
        (1, 13, 6, 2_000_000), (2, 1, 4, 2_000_000), (3, 6, 0, 2_000_000)]


def test_derangement_is_uniform_enough() -> None:
    rng = random.Random(1)
    counts = Counter(tuple(traffic.derangement([0, 1, 2], rng)) for _ in range(600))
    assert set(counts) == {(1, 2, 0), (2, 0, 1)}
    assert min(counts.values()) > 240


def test_incast_and_outcast() -> None:
    wl = traffic.incast(HOSTS, 15, 2_000_000, 16)
    assert len(wl.flows) == 15
    assert {f.dst for f in wl.flows} == {15}
    assert sorted(f.src for f in wl.flows) == list(range(15))
    wl = traffic.incast(HOSTS, 0, 10, 16, degree=4)
    assert [f.src for f in wl.flows] == [1, 2, 3, 4]
    wl = traffic.incast(HOSTS, 0, 10, 16, degree=4, pick="random", seed=3)
    assert len({f.src for f in wl.flows}) == 4 and 0 not in {f.src for f in wl.flows}
    wl = traffic.outcast(HOSTS, 2, 10, 16, degree=5)
    assert {f.src for f in wl.flows} == {2} and [f.dst for f in wl.flows] == [0, 1, 3, 4, 5]


def test_all_to_all() -> None:
    wl = traffic.all_to_all(HOSTS, 100, 16)
    assert len(wl.flows) == 16 * 15
    assert len({(f.src, f.dst) for f in wl.flows}) == 16 * 15
    assert all(not f.depends_on for f in wl.flows)
    wl = traffic.all_to_all(list(range(5)), 100, 5, schedule="pairwise")
    assert len(wl.flows) == 20 and wl.steps() == 4
    by_id = wl.by_id()
    for f in wl.flows:
        if f.step == 0:
            assert not f.depends_on
        else:
            (d,) = f.depends_on
            prev = by_id[d]
            assert prev.src == f.src and prev.step == f.step - 1
            assert f.dst == (f.src + f.step + 1) % 5


def test_build_workload_from_config() -> None:
    wl = traffic.build_workload(load_config(None, ["traffic.pattern=incast"]))
    assert len(wl.flows) == 15 and {f.dst for f in wl.flows} == {15}
    wl = traffic.build_workload(load_config(None, ["traffic.pattern=single",
                                                   "traffic.src=0", "traffic.dst=13",
                                                   "traffic.size=2MB", "traffic.start_us=1.5"]))
    assert [(f.src, f.dst, f.size, f.start_ps) for f in wl.flows] == [(0, 13, 2_000_000,
                                                                      1_500_000)]
    base = traffic.build_workload(load_config(None))
    same = traffic.build_workload(load_config(None, ["traffic.seed=1"]))
    other = traffic.build_workload(load_config(None, ["experiment.seed=2"]))
    assert base.flows == same.flows and base.flows != other.flows
    wl = traffic.build_workload(load_config(None, ["traffic.pattern=permutation",
                                                   "traffic.hosts=[0, 5, 9]"]))
    assert {f.src for f in wl.flows} == {0, 5, 9} == {f.dst for f in wl.flows}


def test_workload_checks() -> None:
    with pytest.raises(WorkloadError, match="twice"):
        Workload("x", 4, [Flow(1, 0, 1, 10), Flow(1, 1, 2, 10)])
    with pytest.raises(WorkloadError, match="unknown flow"):
        Workload("x", 4, [Flow(1, 0, 1, 10, depends_on=(7,))])
    with pytest.raises(WorkloadError, match="cycle"):
        Workload("x", 4, [Flow(1, 0, 1, 10, depends_on=(2,)), Flow(2, 1, 0, 10,
                                                                  depends_on=(1,))])
    with pytest.raises(WorkloadError, match="hosts"):
        Workload("x", 2, [Flow(1, 0, 2, 10)])
    wl = traffic.all_to_all(list(range(4)), 100, 4, schedule="pairwise")
    assert Workload.from_dict(wl.to_dict()).flows == wl.flows


def test_dependency_tracker() -> None:
    flows = [Flow(1, 0, 1, 10, start_ps=5), Flow(2, 1, 2, 10), Flow(3, 2, 3, 10,
                                                                    start_ps=100,
                                                                    depends_on=(1, 2)),
             Flow(4, 3, 0, 10, depends_on=(3,))]
    tr = DependencyTracker(Workload("x", 4, flows))
    assert [(t, f.id) for t, f in tr.initial()] == [(0, 2), (5, 1)]
    assert tr.delivered(1, 50) == []
    assert [(t, f.id) for t, f in tr.delivered(2, 60)] == [(100, 3)]  # not before start_ps
    assert tr.delivered(2, 70) == []  # twice is harmless
    assert [(t, f.id) for t, f in tr.delivered(3, 200)] == [(200, 4)]
    assert tr.remaining == 1 and not tr.all_done()
    tr.delivered(4, 300)
    assert tr.all_done()
