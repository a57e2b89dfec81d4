"""Regression guard for the htsim_roce rows of docs/validation.md: the RoCEv2 stack on
the htsim fabric (k=4 fat tree, PFC at 15 / 12 packets, no DCQCN, one path per flow, an
ACK per packet) against the FCTs htsim_roce gave for the same connection matrices, within
10%. Every seed is fixed; each row takes about a second."""

from __future__ import annotations

from pathlib import Path

import pytest

from uet.experiments.config import load_config
from uet.experiments.runner import run_experiment

ROOT = Path(__file__).resolve().parents[2]
ROWS = ROOT / "experiments" / "roce" / "htsim"
FAST = ["output.plots=false", "output.timeseries=false", "output.progress=false"]

#: htsim_roce FCTs in us (min, median, max) at seed 13 (docs/validation.md)
HTSIM = {
    "single-flow": (176.197, 176.197, 176.197),
    "incast": (483.88, 2122.25, 2445.93),
    "permutation": (188.454, 341.794, 501.206),
}


@pytest.mark.parametrize("name", sorted(HTSIM))
def test_fct_within_10_percent_of_htsim_roce(name, tmp_path):
    cfg = load_config(ROWS / f"{name}.toml", FAST)
    assert cfg["transport"]["stack"] == "roce"
    assert cfg["topology"]["pfc"]["xoff"] == 15 * 4090 and not cfg["transport"]["roce"][
        "dcqcn"]["enabled"]
    res = run_experiment(cfg, tmp_path)
    s = res["summary"]
    assert res["run"]["completed"] and s["drops"] == 0 and s["retransmissions"] == 0
    _lo, med, tail = HTSIM[name]
    assert abs(s["fct_max_us"] / tail - 1) <= 0.10, (name, s["fct_max_us"], tail)
    assert abs(s["fct_median_us"] / med - 1) <= 0.10, (name, s["fct_median_us"], med)
