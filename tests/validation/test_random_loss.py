"""Random (non-trim) loss on the htsim permutation: recovery from SACK gaps by time (RACK).

docs/validation.md ("Random (non-trim) losses") and docs/pds.md ("Loss recovery,
measured"): the 2 MB permutation with 0.1% loss on every switch link. Before RACK the
losses waited for the RTO (tails 2.71 / 2.22 / 2.52 for seeds 1-3, ~750 retransmissions,
mostly ACK_REQs); htsim's SLEEK resends ~8 packets per loss. Here each lost packet costs one
retransmission: none reaches its target twice, and the tails stay below 1.9.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from uet.experiments.config import load_config
from uet.experiments.runner import run_experiment

ROOT = Path(__file__).resolve().parents[2]
LOSSY = ["output.plots=false", "output.timeseries=false", "output.progress=false",
         "experiment.drain=false", 'impairments[0].class="switch"', "impairments[0].loss=0.001"]


@pytest.mark.parametrize("seed", [1, 2])
def test_sprayed_permutation_recovers_each_random_loss_with_one_retransmission(seed, tmp_path):
    cfg = load_config(ROOT / "experiments" / "htsim" / "permutation-128ev.toml",
                      sets=[*LOSSY, f"experiment.seed={seed}"])
    out = run_experiment(cfg, tmp_path)
    assert out["run"]["completed"]
    s = out["summary"]
    pds = out["counters"]["pds"]
    lost = s["drops_by_reason"]["loss"]  # data and ACK frames
    assert lost > 30 and s["trims"] == 0
    by_cause = s["retransmissions_by_cause"]
    assert by_cause.get("rack", 0) > 20
    # every retransmission replaced a lost packet: no target saw a packet twice
    assert sum(c.get("duplicates", 0) for c in pds.values()) == 0
    assert s["retransmissions"] <= lost
    assert s["duplicates_delivered"] == 0
    assert s["fct_tail_over_ideal"] < 1.9, s["fct_tail_over_ideal"]  # RTO only: 2.2-2.7
