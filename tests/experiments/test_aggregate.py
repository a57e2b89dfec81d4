"""Aggregation over seeds: grouping, the numbers against a hand computation, the Student t
quantile against printed tables, the CSV, the terminal table and sweep.png."""

from __future__ import annotations

import csv
import math

import pytest
from rich.console import Console

from uet.experiments.aggregate import (
    aggregate,
    aggregate_columns,
    aggregate_table,
    check_metrics,
    is_seed,
    metric_names,
    write_aggregate,
)
from uet.experiments.confidence import betainc, describe, t_cdf, t_quantile
from uet.experiments.sweep_plot import plot_sweep

#: tail/ideal of the per-flow ECMP row of docs/validation.md, seeds 1-5 (rounded as there)
TAILS = [3.16, 2.30, 2.54, 3.03, 3.14]


def test_describe_against_a_hand_computation() -> None:
    d = describe(TAILS)
    # by hand: sum 14.17, mean 2.834; squared deviations 0.106276 + 0.285156 + 0.086436
    # + 0.038416 + 0.093636 = 0.60992; sd = sqrt(0.60992 / 4) = 0.390487;
    # t(0.975, 4) = 2.776445 (tables: 2.776); half-width 2.776445 * 0.174631 (sd / sqrt 5)
    # = 0.484853
    assert d["n"] == 5
    assert d["mean"] == pytest.approx(2.834, abs=1e-12)
    assert d["sd"] == pytest.approx(math.sqrt(0.60992 / 4), rel=1e-12)
    assert d["sd"] == pytest.approx(0.390487, abs=1e-6)
    assert (d["min"], d["max"]) == (2.30, 3.16)
    assert d["ci_low"] == pytest.approx(2.834 - 0.484853, abs=2e-6)
    assert d["ci_high"] == pytest.approx(2.834 + 0.484853, abs=2e-6)
    one = describe([4.0])
    assert one["mean"] == 4.0 and one["sd"] is None and one["ci_low"] is None
    assert describe([])["mean"] is None and describe([])["n"] == 0
    # a 90% interval is narrower: t(0.95, 4) = 2.132
    assert describe(TAILS, 0.90)["ci_high"] - 2.834 == pytest.approx(
        2.131847 * 0.390487 / math.sqrt(5), abs=2e-6)


@pytest.mark.parametrize(("df", "t975"), [(1, 12.706), (2, 4.303), (4, 2.776), (9, 2.262),
                                          (29, 2.045), (120, 1.980), (100000, 1.960)])
def test_t_quantile_matches_the_printed_table(df, t975) -> None:
    assert round(t_quantile(0.975, df), 3) == t975
    assert t_cdf(t_quantile(0.975, df), df) == pytest.approx(0.975, abs=1e-10)
    assert t_quantile(0.025, df) == pytest.approx(-t_quantile(0.975, df))


def test_t_distribution_closed_forms() -> None:
    # df = 1 is the Cauchy distribution, df = 2 has F(t) = 1/2 + t / (2 sqrt(2 + t^2))
    for t in (-3.0, -0.5, 0.0, 0.7, 4.0, 30.0):
        assert t_cdf(t, 1) == pytest.approx(0.5 + math.atan(t) / math.pi, abs=1e-12)
        assert t_cdf(t, 2) == pytest.approx(0.5 + t / (2 * math.sqrt(2 + t * t)), abs=1e-12)
    assert betainc(2, 3, 0.4) == pytest.approx(0.5248, abs=1e-12)  # 1 - 0.6^3 (1 + 3*0.4)
    with pytest.raises(ValueError):
        t_quantile(1.0, 3)


def _row(point, selector, seed, tail, *, error=None):
    summary = {} if error else {"fct_tail_over_ideal": tail, "goodput_gbps": 100.0 + seed,
                                "fct_median_us": None if tail is None else 10.0}
    return {"point": point, "dir": f"{point:03d}", "transport.cms.ev_selector": selector,
            "experiment.seed": seed, "summary": summary, "error": error,
            "completed": error is None}


KEYS = ["transport.cms.ev_selector", "experiment.seed"]


def test_points_that_differ_only_in_seeds_are_one_group() -> None:
    rows = [_row(i, "fixed", s, t) for i, (s, t) in enumerate(zip(range(1, 6), TAILS,
                                                                   strict=True))]
    rows += [_row(5, "reps", 1, 1.2), _row(6, "reps", 2, None),
             _row(7, "reps", 3, None, error="RuntimeError: boom")]
    groups = aggregate(rows, KEYS)
    assert [g["values"] for g in groups] == [{"transport.cms.ev_selector": "fixed"},
                                             {"transport.cms.ev_selector": "reps"}]
    fixed, reps = groups
    assert fixed["points"] == [0, 1, 2, 3, 4] and fixed["seeds"] == {
        "experiment.seed": [1, 2, 3, 4, 5]}
    assert fixed["n"] == 5 and fixed["failed"] == 0
    assert fixed["metrics"]["fct_tail_over_ideal"]["mean"] == pytest.approx(2.834)
    assert fixed["metrics"]["goodput_gbps"]["mean"] == pytest.approx(103.0)
    # failed points are counted apart; a null metric leaves that metric's n
    assert reps["n"] == 2 and reps["failed"] == 1
    assert reps["metrics"]["fct_tail_over_ideal"]["n"] == 1
    assert reps["metrics"]["fct_tail_over_ideal"]["mean"] == 1.2
    assert reps["metrics"]["goodput_gbps"]["n"] == 2
    # no seed axis: one point per group
    assert [g["n"] for g in aggregate(rows[:3], ["transport.cms.ev_selector",
                                                 "experiment.seed"][:1])] == [3]
    assert len(aggregate(rows[:3], ["experiment.seed"])) == 1


def test_which_keys_are_seeds() -> None:
    assert is_seed("experiment.seed") and is_seed("traffic.seed")
    assert is_seed("impairments[0].seed")
    assert not is_seed("transport.cms.ev_selector") and not is_seed("seedless.x")
    assert "fct_tail_over_ideal" in metric_names() and "drops_by_reason" not in metric_names()
    with pytest.raises(ValueError, match="--metric fct_tail: not a numeric summary metric; "
                       "allowed: flows, "):
        check_metrics(["fct_tail"])


def test_aggregate_csv_and_table(tmp_path) -> None:
    rows = [_row(i, "fixed", s, t) for i, (s, t) in enumerate(zip(range(1, 6), TAILS,
                                                                   strict=True))]
    groups = aggregate(rows, KEYS)
    path = write_aggregate(groups, KEYS, tmp_path)
    lines = list(csv.DictReader(path.read_text(encoding="utf-8").splitlines()))
    assert list(lines[0]) == aggregate_columns(KEYS)
    line = lines[0]
    assert line["transport.cms.ev_selector"] == "fixed" and line["n"] == "5"
    assert line["points"] == "0 1 2 3 4"
    assert float(line["fct_tail_over_ideal.mean"]) == pytest.approx(2.834)
    assert float(line["fct_tail_over_ideal.sd"]) == pytest.approx(0.390487, abs=1e-6)
    assert float(line["fct_tail_over_ideal.ci_high"]) == pytest.approx(3.318853, abs=2e-6)
    assert line["fct_p99_us.mean"] == ""  # no value in any point
    console = Console(record=True, width=200)
    console.print(aggregate_table(groups, KEYS, ["fct_tail_over_ideal"]))
    text = console.export_text()
    assert "2.834 ± 0.485" in text and "sd 0.390, 2.300-3.160" in text
    assert "mean ± 95% CI (Student t)" in " ".join(text.split())


def test_sweep_png_for_each_kind_of_grid(tmp_path) -> None:
    numeric = [{"point": i, "impairments[0].loss": loss, "transport.cms.ev_selector": sel,
                "experiment.seed": s, "error": None,
                "summary": {"fct_tail_over_ideal": 1 + loss * 100 + s / 10 + (sel == "reps"),
                            "goodput_gbps": 90.0 - loss * 1000}}
               for i, (loss, sel, s) in enumerate(
                   (loss, sel, s) for loss in (0.0001, 0.001, 0.01) for sel in ("fixed", "reps")
                   for s in (1, 2, 3))]
    keys = ["impairments[0].loss", "transport.cms.ev_selector", "experiment.seed"]
    metrics = ["fct_tail_over_ideal", "goodput_gbps"]
    for name, rows, k in (("numeric", numeric, keys),
                          ("categorical", numeric, keys[1:]),
                          ("seeds", numeric[:3], keys[2:])):
        groups = aggregate(rows, k)
        path = plot_sweep(rows, groups, k, metrics, tmp_path / f"{name}.png", title=name)
        assert path is not None and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert path.stat().st_size > 20_000
    assert plot_sweep(numeric, aggregate(numeric, keys), keys, ["fct_p99_us"],
                      tmp_path / "none.png") is None
