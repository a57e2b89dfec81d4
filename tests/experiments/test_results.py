"""Metrics and results.json: definitions, schema, validator, summary table."""

from __future__ import annotations

import copy
import json

import pytest
from rich.console import Console

from uet.experiments.config import load_config
from uet.experiments.metrics import counter_totals, percentile, stats
from uet.experiments.report import print_summary
from uet.experiments.results import (
    build_results,
    check_results,
    read_results,
    validate_results,
    write_results,
)

from .fake_runner import synthetic_run

US = 1_000_000


def _results(sets=()):
    cfg = load_config(None, list(sets))
    flows, counters, series, run = synthetic_run(cfg)
    return build_results(cfg, flows, counters, run=run), flows


def test_percentiles() -> None:
    assert percentile([5, 1, 3], 50) == 3
    assert percentile(list(range(1, 101)), 99) == 99
    assert percentile(list(range(1, 11)), 99) == 10
    assert stats([]) == {"min": None, "median": None, "p99": None, "max": None}
    assert stats([1, 2, 3, 10])["median"] == 2.5


def test_summary_from_hand_made_records() -> None:
    cfg = load_config(None, ["traffic.pattern=incast", "traffic.degree=3"])
    flows = [
        {"id": 1, "src": 0, "dst": 15, "size": 1000, "start_ps": 0, "end_ps": 10 * US,
         "bytes_delivered": 1000, "duplicates": 1},
        {"id": 2, "src": 1, "dst": 15, "size": 1000, "start_ps": 0, "end_ps": 20 * US,
         "bytes_delivered": 1000, "duplicates": 0},
        {"id": 3, "src": 2, "dst": 15, "size": 1000, "start_ps": None, "end_ps": None,
         "bytes_delivered": 0, "duplicates": 0},
    ]
    counters = {
        "nic": {"h0": {"tx_frames": 3, "tx_bytes": 300, "paused_ps.0": 2 * US,
                       "pause_tx": 1}},
        "port": {"tor0.p0": {"trimmed": 4, "ecn_marked": 5, "drop.queue": 2,
                             "paused_ps.3": US},
                 "tor0.p1": {"trimmed": 1, "drop.queue": 1, "drop.fcs": 1}},
        "link": {"h0->tor0.p0": {"drop.loss": 7, "tx_frames": 3}},
        "pds": {"h0": {"retx.nack": 3, "retx.rto": 1, "nack_tx.TRIMMED": 2, "opened": 2,
                       "closed": 1, "closed_in_error": 1},
                "h1": {"retx.nack": 1, "nack_tx.NO_PDC": 1, "opened": 1}},
    }
    run = {"completed": False, "stop_reason": "time_limit", "virtual_time_ps": 30 * US,
           "wall_time_s": 0.5}
    doc = build_results(cfg, flows, counters, run=run)
    check_results(doc)
    s = doc["summary"]
    assert (s["flows"], s["messages_sent"], s["messages_delivered"]) == (3, 2, 2)
    assert s["messages_unfinished"] == 1
    assert (s["bytes_sent"], s["bytes_delivered"], s["duplicates_delivered"]) == (2000, 2000, 1)
    assert (s["fct_min_us"], s["fct_median_us"], s["fct_max_us"]) == (10, 15, 20)
    assert s["goodput_gbps"] == pytest.approx(2000 * 8 / 20e-6 / 1e9)
    assert (s["retransmissions"], s["retransmissions_by_cause"]) == (5, {"nack": 4, "rto": 1})
    assert (s["nacks"], s["nacks_by_code"]) == (3, {"NO_PDC": 1, "TRIMMED": 2})
    assert (s["trims"], s["ecn_marks"]) == (5, 5)
    assert s["drops_by_reason"] == {"fcs": 1, "loss": 7, "queue": 3} and s["drops"] == 11
    assert s["pfc_pause_us"] == 3.0 and s["pfc_pause_frames"] == 1
    assert (s["pdcs_opened"], s["pdcs_closed"], s["pdcs_closed_in_error"]) == (3, 1, 1)
    ideal = doc["flows"][0]["ideal_ps"]  # 3 senders share the receiver link
    assert doc["flows"][0]["fct_over_ideal"] == pytest.approx(10 * US / ideal)
    assert s["fct_tail_over_ideal"] == pytest.approx(20 * US / ideal)
    assert doc["flows"][2]["fct_ps"] is None and doc["run"]["stop_reason"] == "time_limit"


def test_endpoint_stats_without_pds() -> None:
    totals = counter_totals({"endpoint": {"h0": {"tx_rtx": 4, "tx_nack": 2}}})
    assert totals["retransmissions_by_cause"] == {"unspecified": 4}
    assert totals["nacks"] == 2


def test_results_validate_and_round_trip(tmp_path) -> None:
    doc, _ = _results()
    assert validate_results(doc) == []
    path = write_results(doc, tmp_path / "results.json")
    assert read_results(path) == json.loads(json.dumps(doc))


@pytest.mark.parametrize("breakage", [
    lambda d: d.pop("summary"),
    lambda d: d["summary"].pop("fct_tail_over_ideal"),
    lambda d: d["summary"].update(messages_sent="16"),
    lambda d: d["summary"].update(nacks_by_code={"TRIMMED": "x"}),
    lambda d: d["flows"][0].update(end_ps=1.5),
    lambda d: d["flows"][0].pop("size"),
    lambda d: d["run"].update(completed=1),
    lambda d: d.update(extra=1),
    lambda d: d.update(schema="other/1"),
    lambda d: d.update(flows={}),
])
def test_broken_results_fail(breakage, tmp_path) -> None:
    doc, _ = _results()
    broken = copy.deepcopy(doc)
    breakage(broken)
    assert validate_results(broken)
    with pytest.raises(ValueError):
        write_results(broken, tmp_path / "r.json")


def test_summary_table_prints_every_section() -> None:
    doc, _ = _results(["impairments[0].loss=0.01"])
    console = Console(record=True, width=120)
    print_summary(doc, console)
    text = console.export_text()
    for word in ("FCT median", "x ideal", "retransmissions", "NACKs", "trims", "ECN marks",
                 "drops", "PFC pause", "PDCs opened", "goodput", "duplicates delivered"):
        assert word in text
