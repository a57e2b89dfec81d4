"""Plots and the other output files from synthetic data."""

from __future__ import annotations

import json

from uet.experiments.config import load_config
from uet.experiments.results import read_results

from .fake_runner import fake_run


def test_outputs_written(tmp_path) -> None:
    cfg = load_config(None, ["traffic.pattern=allreduce_ring", "traffic.size=256KiB"])
    results = fake_run(cfg, tmp_path)
    assert results["files"]["plots"] == ["fct_cdf.png", "link_utilisation.png", "queues.png",
                                         "cwnd.png"]
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
