"""Plots and the other output files from synthetic data."""

from __future__ import annotations

import json

from uet.experiments.config import load_config
from uet.experiments.plots import (
    cwnd_flows,
    flat_note,
    plot_cwnd,
    plot_link_utilisation,
    plot_paths,
    rank_links,
)
from uet.experiments.results import read_results

from .fake_runner import fake_run


def test_outputs_written(tmp_path) -> None:
    cfg = load_config(None, ["traffic.pattern=allreduce_ring", "traffic.size=256KiB"])
    results = fake_run(cfg, tmp_path)
    assert results["files"]["plots"] == ["fct_cdf.png", "link_utilisation.png", "queues.png",
                                         "cwnd.png", "paths.png"]
    for name in results["files"]["plots"]:
        data = (tmp_path / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 15_000, name
    assert read_results(tmp_path / "results.json")["files"] == results["files"]
    series = json.loads((tmp_path / "timeseries.json").read_text())
    assert set(series) == {"link_tx_bytes", "link_rate_bps", "queue_bytes", "cwnd_bytes"}


def test_no_plots_when_switched_off(tmp_path) -> None:
    cfg = load_config(None, ["output.plots=false", "output.timeseries=false"])
    results = fake_run(cfg, tmp_path)
    assert "plots" not in results["files"] and not list(tmp_path.glob("*.png"))
    assert not (tmp_path / "timeseries.json").exists()


US = 1_000_000


def _links(spec: dict[str, tuple[float, float]], span_us: int = 100) -> dict:
    """Series of link directions running at a share of their rate: name -> (rate, share)."""
    return {"link_tx_bytes": {n: [[t * US, int(rate * share * t * US / 8e12)]
                                  for t in range(0, span_us + 1, 2)]
                              for n, (rate, share) in spec.items()},
            "link_rate_bps": {n: rate for n, (rate, _) in spec.items()}}


def test_a_degraded_link_running_full_ranks_first(tmp_path) -> None:
    """By Gb/s a 25 Gb/s link at 100% (25 Gb/s) is below 40 100 Gb/s links at 60% (60 Gb/s)
    and never showed among the busiest 32; by share of its own rate it comes first."""
    spec = {f"agg{i}.p{j}->core{j}.p{i}": (100e9, 0.6) for i in range(8) for j in range(5)}
    spec["core0.p0->agg0.p2"] = (25e9, 1.0)
    series = _links(spec)
    series["link_nominal_bps"] = {"core0.p0->agg0.p2": 100e9}
    busy, share, degraded = rank_links(series)
    assert busy[0] == "core0.p0->agg0.p2" and degraded == ["core0.p0->agg0.p2"]
    assert abs(share[busy[0]] - 1.0) < 0.02 and abs(share[busy[1]] - 0.6) < 0.02
    assert plot_link_utilisation(series, tmp_path / "u.png", top=8).stat().st_size > 20_000
    # not degraded: nominal and actual rate agree
    series["link_nominal_bps"] = {}
    assert rank_links(series)[2] == []


def test_cwnd_plot_picks_the_flows_that_got_signals_and_says_when_nothing_moved(
        tmp_path) -> None:
    flat = {f"flow {i}": [[0, 258_880], [50 * US, 258_880]] for i in range(6)}
    series = {"cwnd_bytes": dict(flat), "flow_events": {}, "fabric_signals": {}}
    names, moved, traced = cwnd_flows(series, 4, prefer=["flow 5"])
    assert (moved, traced) == (0, 6) and names[0] == "flow 5" and len(names) == 4
    assert "no window changed during the run (all 6 traced flows stayed at 253 KiB)" in (
        flat_note(series))
    assert plot_cwnd(series, tmp_path / "flat.png").stat().st_size > 20_000
    # two flows back off on NACKs, one only grows: the ones with signals come first
    series["cwnd_bytes"]["flow 1"] = [[0, 258_880], [20 * US, 200_000], [40 * US, 150_000]]
    series["cwnd_bytes"]["flow 2"] = [[0, 258_880], [30 * US, 230_000]]
    series["cwnd_bytes"]["flow 3"] = [[0, 100_000], [30 * US, 258_880]]
    series["flow_events"] = {"flow 1": [[20 * US, "nack"], [40 * US, "nack"]],
                             "flow 2": [[30 * US, "rto"]]}
    series["fabric_signals"] = {"trims": [[0, 0], [40 * US, 2]],
                                "ecn_marks": [[0, 0], [40 * US, 30]]}
    names, moved, _ = cwnd_flows(series, 2)
    assert names == ["flow 1", "flow 2"] and moved == 3
    assert plot_cwnd(series, tmp_path / "moved.png", flows=3).stat().st_size > 20_000


def test_paths_plot_shows_tiers_and_ev_spread(tmp_path) -> None:
    spec = {f"tor{i}.p{2 + j}->agg{j}.p{i}": (100e9, 0.5 + 0.1 * j) for i in range(4)
            for j in range(2)}
    spec.update({f"agg{i}.p2->core{i}.p0": (100e9, 0.4) for i in range(4)})
    spec["core0.p0->agg0.p2"] = (25e9, 0.9)
    spec["h0->tor0.p0"] = (100e9, 0.9)  # host links are not paths
    series = _links(spec)
    series["link_nominal_bps"] = {"core0.p0->agg0.p2": 100e9}
    series["ev_bytes"] = {f"h{h}": {str(1000 * h + e): 4194 * (1 + (e % 3 == 0))
                                   for e in range(128)} for h in range(4)}
    assert plot_paths(series, tmp_path / "p.png").stat().st_size > 30_000
    assert plot_paths({"link_tx_bytes": {}, "ev_bytes": {}}, tmp_path / "none.png") is None
