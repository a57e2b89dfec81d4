"""All-reduce schedules: steps, sizes, dependencies, and every byte where it belongs."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from uet.experiments import collectives as coll
from uet.experiments.workload import DependencyTracker, Workload

N = 8
SIZE = 64 * 1024 + 3  # not a multiple of N: chunks differ by a byte


def _by_step(wl: Workload) -> dict[int, list]:
    out: dict[int, list] = {}
    for f in wl.flows:
        out.setdefault(f.step, []).append(f)
    return out


def test_ring_structure() -> None:
    ranks = list(range(N))
    wl = coll.allreduce_ring(ranks, SIZE, 16)
    steps = _by_step(wl)
    assert wl.steps() == 2 * (N - 1) and len(wl.flows) == 2 * (N - 1) * N
    by_id = wl.by_id()
    for s, flows in steps.items():
        assert len(flows) == N
        assert sorted((f.src, f.dst) for f in flows) == [(r, (r + 1) % N) for r in ranks]
        for f in flows:
            assert f.size in (SIZE // N, SIZE // N + 1)
            if s == 0:
                assert f.depends_on == ()
            else:
                (d,) = f.depends_on
                assert by_id[d].dst == f.src and by_id[d].step == s - 1
    assert sum(f.size for f in steps[0]) == SIZE


def test_butterfly_structure() -> None:
    wl = coll.allreduce_butterfly(list(range(N)), SIZE, N)
    steps = _by_step(wl)
    assert wl.steps() == 3 and len(wl.flows) == 3 * N
    by_id = wl.by_id()
    for s, flows in steps.items():
        assert sorted((f.src, f.dst) for f in flows) == [(r, r ^ (1 << s)) for r in range(N)]
        assert all(f.size == SIZE for f in flows)
        for f in flows:
            if s:
                deps = {(by_id[d].src, by_id[d].dst) for d in f.depends_on}
                q = f.src ^ (1 << (s - 1))
                assert deps == {(q, f.src), (f.src, q)}
    with pytest.raises(ValueError, match="power of two"):
        coll.allreduce_butterfly([0, 1, 2], 100, 3)


def test_halving_doubling_structure() -> None:
    wl = coll.allreduce_halving_doubling(list(range(N)), SIZE, N)
    steps = _by_step(wl)
    assert wl.steps() == 6
    sizes = [sum(f.size for f in steps[s]) // N for s in range(6)]
    assert sizes[0] == pytest.approx(SIZE / 2, abs=2) and sizes[2] == pytest.approx(SIZE / 8,
                                                                                   abs=2)
    assert sizes[3:] == sizes[2::-1]


@pytest.mark.parametrize("gen", [coll.allreduce_ring, coll.allreduce_butterfly,
                                 coll.allreduce_halving_doubling])
@pytest.mark.parametrize("n", [2, 4, 8])
def test_every_byte_where_it_belongs(gen, n: int) -> None:
    ranks = [3 * i for i in range(n)]  # ranks on arbitrary hosts
    wl = gen(ranks, 999, 3 * n)
    for seed in range(15):
        state = coll.replay(wl, random.Random(seed))
        assert all(c == frozenset(range(n)) for r in state.values() for c in r.values())
    for seed in range(5):  # with real bytes, delivered in a random order
        bs = coll.ByteState(wl.collective, seed)
        rng = random.Random(seed)
        tracker = DependencyTracker(wl)
        flying = [(f, bs.payload(f)) for _, f in tracker.initial()]
        while flying:
            f, data = flying.pop(rng.randrange(len(flying)))
            bs.deliver(f, data)
            flying += [(g, bs.payload(g)) for _, g in tracker.delivered(f.id, 0)]
        assert tracker.all_done() and bs.mismatches() == []


def test_replay_catches_a_missing_dependency() -> None:
    wl = coll.allreduce_ring(list(range(4)), 400, 4)
    broken = [replace(f, depends_on=()) if f.id == 6 else f for f in wl.flows]
    bad = Workload(wl.name, 4, broken, wl.collective)
    with pytest.raises(coll.CollectiveError):
        for seed in range(30):
            coll.replay(bad, random.Random(seed))


def test_replay_catches_double_counting() -> None:
    wl = coll.allreduce_butterfly(list(range(4)), 400, 4)
    broken = [replace(f, apply_after=0) for f in wl.flows]  # reduce into the send buffer
    bad = Workload(wl.name, 4, broken, wl.collective)
    with pytest.raises(coll.CollectiveError):
        for seed in range(30):
            coll.replay(bad, random.Random(seed))
