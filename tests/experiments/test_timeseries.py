"""The change-only recorder keeps exactly the points of the documented rule."""

from __future__ import annotations

import json
import random

import pytest

from uet.experiments import timeseries
from uet.experiments.timeseries import ChangeRecorder, Points, dumps, utilisation

NATIVE = timeseries._ChangeCore is not None


def reference(samples: list[tuple[int, list[int]]], n: int) -> list[list[list[int]]]:
    """The rule, one series at a time: store the first sample, every change, the last
    sample of a flat stretch before a change, and the last sample."""
    out: list[list[list[int]]] = [[] for _ in range(n)]
    for i in range(n):
        pts = out[i]
        skipped = None
        for t, values in samples:
            v = values[i]
            if not pts:
                pts.append([t, v])
            elif v == pts[-1][1]:
                skipped = [t, v]
            else:
                if skipped is not None:
                    pts.append(skipped)
                pts.append([t, v])
                skipped = None
        if skipped is not None:
            pts.append(skipped)
    return out


def _samples(rng: random.Random, n: int, count: int) -> list[tuple[int, list[int]]]:
    values = [rng.randrange(3) for _ in range(n)]
    samples = []
    t = 0
    for _ in range(count):
        t += rng.randrange(1, 5)
        values = [v + (rng.random() < 0.3) * rng.randrange(-2, 3) for v in values]
        if rng.random() < 0.05:  # counters past 2^31 and 2^50, and negative ones
            values = [v + rng.choice([2**31, 2**50, -(2**40)]) for v in values]
        samples.append((t, list(values)))
    return samples


@pytest.mark.parametrize("native", [True, False], ids=["core", "python"])
def test_change_recorder_matches_the_rule(native) -> None:
    rng = random.Random(7)
    for _ in range(60):
        n = rng.randrange(1, 6)
        samples = _samples(rng, n, rng.randrange(1, 200))
        series: dict = {}
        rec = ChangeRecorder([f"s{i}" for i in range(n)], series, native=native)
        assert (rec._core is not None) == (native and NATIVE)
        for t, vals in samples:
            rec.sample(t, vals)
        rec.close()
        want = reference(samples, n)
        got = [series[f"s{i}"].as_lists() for i in range(n)]
        assert got == want


@pytest.mark.skipif(not NATIVE, reason="the C core is off (UET_PURE_PYTHON=1)")
def test_the_core_hands_over_in_pieces_and_refuses_bad_samples_whole() -> None:
    """Points taken mid-run, then more samples, then close, give the rule's points; a
    sample with a wrong count or a value that is not a 64-bit int raises and changes
    nothing; an empty recorder closes to nothing."""
    rng = random.Random(11)
    n = 7
    samples = _samples(rng, n, 300)
    core = timeseries._ChangeCore(n)
    got: list[list[list[int]]] = [[] for _ in range(n)]

    def take() -> None:
        for i in range(n):
            pts = Points()
            t, v = core.take(i)
            pts.t.frombytes(t)
            pts.v.frombytes(v)
            got[i] += pts.as_lists()

    for k, (t, vals) in enumerate(samples):
        held = core.pending
        for bad in (vals[:-1], vals + [0], vals[:-1] + [2**63], vals[:-1] + [1.5],
                    vals[:-1] + [None]):
            with pytest.raises((ValueError, OverflowError, TypeError)):
                core.sample(t, bad)
            assert core.pending == held
        core.sample(t, vals)
        if k in (0, 50, 51, 199):
            take()
    core.close()
    core.close()  # idempotent: the last sample is stored once
    take()
    assert got == reference(samples, n)
    assert core.pending == 0 and core.series == n
    with pytest.raises(IndexError):
        core.take(n)
    empty = timeseries._ChangeCore(3)
    empty.close()
    assert [empty.take(i) for i in range(3)] == [(b"", b"")] * 3
    with pytest.raises(ValueError):
        timeseries._ChangeCore(-1)


def test_points_read_like_the_json_shape() -> None:
    pts = Points()
    for p in ([0, 0], [10, 500], [20, 1500]):
        pts.append(p)
    assert len(pts) == 3 and pts[-1] == (20, 1500) and list(pts)[1] == (10, 500)
    assert pts[1:] == [(10, 500), (20, 1500)]
    assert utilisation(pts) == utilisation(pts.as_lists())
    doc = json.loads(dumps({"queue_bytes": {"tor0.p2": pts}, "link_rate_bps": {"a": 1e11}}))
    assert doc == {"queue_bytes": {"tor0.p2": [[0, 0], [10, 500], [20, 1500]]},
                   "link_rate_bps": {"a": 1e11}}
