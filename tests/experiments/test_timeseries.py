"""The change-only recorder keeps exactly the points of the documented rule."""

from __future__ import annotations

import json
import random

from uet.experiments.timeseries import ChangeRecorder, Points, dumps, utilisation


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


def test_change_recorder_matches_the_rule() -> None:
    rng = random.Random(7)
    for _ in range(50):
        n = rng.randrange(1, 6)
        values = [rng.randrange(3) for _ in range(n)]
        samples = []
        t = 0
        for _ in range(rng.randrange(1, 40)):
            t += rng.randrange(1, 5)
            values = [v + (rng.random() < 0.3) * rng.randrange(-2, 3) for v in values]
            samples.append((t, list(values)))
        series: dict = {}
        rec = ChangeRecorder([f"s{i}" for i in range(n)], series)
        for t, vals in samples:
            rec.sample(t, vals)
        rec.close()
        want = reference(samples, n)
        got = [series[f"s{i}"].as_lists() for i in range(n)]
        assert got == want


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
