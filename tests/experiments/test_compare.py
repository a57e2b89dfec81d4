"""``uet compare``: runs side by side with ratios to the first, FCT CDFs in one PNG, seed
sweeps as aggregates, and refusals with a reason."""

from __future__ import annotations

import json

import pytest
from rich.console import Console

import uet
from uet.cli import build_parser
from uet.commands import compare as compare_cmd

SMALL = {"topology": {"kind": "star", "hosts": 4},
         "traffic": {"pattern": "permutation", "size": "64KiB"},
         "impairments": [{"class": "host", "direction": "up", "loss": 0.01}],
         "output": {"plots": False}}


def _compare(*argv: str, width: int = 220) -> tuple[int, str]:
    console = Console(record=True, width=width)
    rc = compare_cmd.run(build_parser().parse_args(["compare", *argv]), console)
    return rc, console.export_text()


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    for name, sel in (("fixed", "fixed"), ("oblivious", "oblivious"), ("reps", "reps")):
        uet.run(SMALL, out=root / name, set={"transport.cms.ev_selector": sel})
    uet.run(SMALL, out=root / "big", set={"traffic.size": "128KiB"})
    uet.sweep(SMALL, {"experiment.seed": [1, 2, 3]}, out=root / "seeds")
    uet.sweep(SMALL, {"transport.cms.ev_selector": ["fixed", "reps"],
                      "experiment.seed": [1, 2]}, out=root / "grid")
    return root


def test_runs_side_by_side(runs, tmp_path) -> None:
    rc, text = _compare(str(runs / "fixed"), str(runs / "oblivious"), str(runs / "reps"),
                        "--out", str(tmp_path))
    assert rc == 0
    assert "compare: 3 runs (ratios to fixed)" in text
    assert "transport.cms.ev_selector" in text and "oblivious" in text
    doc = json.loads((tmp_path / "compare.json").read_text())
    assert [r["label"] for r in doc["runs"]] == ["fixed", "oblivious", "reps"]
    assert doc["config_differences"] == [{"key": "transport.cms.ev_selector",
                                          "values": ["fixed", "oblivious", "reps"]}]
    results = [json.loads((runs / n / "results.json").read_text())["summary"]
               for n in ("fixed", "oblivious", "reps")]
    tail = doc["metrics"]["fct_tail_over_ideal"]
    assert tail["values"] == [s["fct_tail_over_ideal"] for s in results]
    assert tail["ratio_to_first"] == pytest.approx(
        [1.0, *(s["fct_tail_over_ideal"] / results[0]["fct_tail_over_ideal"]
                for s in results[1:])])
    assert f"{tail['ratio_to_first'][1]:.3f}x" in text
    png = tmp_path / "compare.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000
    assert doc["files"]["plot"] == str(png)


def test_a_seed_sweep_compares_as_its_mean(runs, tmp_path, capsys) -> None:
    rc, text = _compare(str(runs / "seeds"), str(runs / "fixed"), "--out", str(tmp_path),
                        "--metric", "fct_tail_over_ideal", "--json")
    assert rc == 0
    doc = json.loads(capsys.readouterr().out or text)
    seeds = json.loads((runs / "seeds" / "sweep.json").read_text())
    tails = [r["summary"]["fct_tail_over_ideal"] for r in seeds["rows"]]
    m = doc["metrics"]["fct_tail_over_ideal"]
    assert m["values"][0] == pytest.approx(sum(tails) / 3)
    assert m["ci"][0][0] < m["values"][0] < m["ci"][0][1] and m["ci"][1] == [None, None]
    assert doc["runs"][0]["points"] == 3 and doc["runs"][0]["seeds"] == [1, 2, 3]
    diff = {d["key"]: d["values"] for d in doc["config_differences"]}
    assert diff["experiment.seed"] == [[1, 2, 3], 1]


@pytest.mark.parametrize(("which", "reason"), [
    (("fixed", "big"), "runs are not comparable: fixed has 4 flows (65,536 B each), big has "
                       "4 flows (131,072 B each): a different workload"),
    (("fixed", "fixed"), "is given twice"),
    (("fixed", "nowhere"), "nowhere: no such directory"),
    (("fixed", "."), "not a run directory (no results.json) nor a sweep"),
    (("grid", "fixed"), "grid: a sweep of 4 points in 2 groups (over "
                        "transport.cms.ev_selector)"),
])
def test_refusals_say_why(runs, tmp_path, capsys, which, reason) -> None:
    paths = [str(runs / w) if w != "." else str(tmp_path) for w in which]
    rc, text = _compare(*paths, "--out", str(tmp_path / "out"))
    err = capsys.readouterr().err
    assert rc == 2 and reason in " ".join(err.split())
    assert "Traceback" not in err and not (tmp_path / "out").exists()


def test_one_run_and_a_bad_metric_are_refused(runs, capsys) -> None:
    assert _compare(str(runs / "fixed"))[0] == 2
    assert "at least two run directories" in capsys.readouterr().err
    assert _compare(str(runs / "fixed"), str(runs / "reps"), "--metric", "speed")[0] == 2
    assert "--metric speed: not a numeric summary metric" in capsys.readouterr().err
