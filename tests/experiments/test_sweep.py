"""Sweeps: grid expansion, validation per point, parallel == serial, outputs, `uet run`."""

from __future__ import annotations

import csv
import json

import pytest
from rich.console import Console

from uet.experiments import command
from uet.experiments.config import ConfigError
from uet.experiments.executor import ProcessExecutor, SerialExecutor, Task, run_task
from uet.experiments.sweep import expand, parse_sweep, run_sweep, split_values, write_sweep

from .fake_runner import fake_run
from .run_args import run_args

QUIET = ["output.plots=false", "output.timeseries=false", "output.progress=false"]


def failing_run(config, out_dir, **kw):
    if config["experiment"]["seed"] == 2:
        raise RuntimeError("boom")
    return fake_run(config, out_dir, **kw)


def test_parse_and_split() -> None:
    assert split_values("1, 2,3") == ["1", "2", "3"]
    assert split_values('[1, 2], "a,b", {x = 1, y = 2}') == ["[1, 2]", '"a,b"',
                                                            "{x = 1, y = 2}"]
    axis = parse_sweep("transport.cms.ev_selector=fixed,reps")
    assert axis.key == "transport.cms.ev_selector" and axis.values == ("fixed", "reps")
    axis = parse_sweep("impairments[0].loss=0,0.001,0.01")
    assert axis.values == (0, 0.001, 0.01) and axis.key == "impairments[0].loss"
    for bad in ("traffic.size", "traffic.size=", "traffic.size=1,1"):
        with pytest.raises(ConfigError):
            parse_sweep(bad)


def test_grid_expansion() -> None:
    axes, points = expand(None, QUIET, ["transport.cms.ev_selector=fixed,oblivious,reps",
                                        "experiment.seed=1,2"])
    assert [a.key for a in axes] == ["transport.cms.ev_selector", "experiment.seed"]
    assert len(points) == 6
    assert [p.values for p in points[:3]] == [
        {"transport.cms.ev_selector": "fixed", "experiment.seed": 1},
        {"transport.cms.ev_selector": "fixed", "experiment.seed": 2},
        {"transport.cms.ev_selector": "oblivious", "experiment.seed": 1}]
    assert points[5].config["transport"]["cms"]["ev_selector"] == "reps"
    assert points[5].config["experiment"]["seed"] == 2
    assert points[0].name == "000_ev_selector=fixed_seed=1"
    assert len({p.name for p in points}) == 6
    assert "--set experiment.seed=2" in points[5].config["source"]["overrides"]


def test_each_point_is_validated() -> None:
    with pytest.raises(ConfigError) as info:
        expand(None, [], ["transport.cms.ev_count=64,100"])
    assert info.value.path == "transport.cms.ev_count"
    assert info.value.where.startswith("--sweep transport.cms.ev_count=64,100 (value 100)")
    with pytest.raises(ConfigError, match="swept twice"):
        expand(None, [], ["experiment.seed=1,2", "experiment.seed=3"])
    _, points = expand(None, [], ["topology.kind=fat_tree,star"])  # k dropped for star
    assert "k" not in points[1].config["topology"]


def test_parallel_equals_serial(tmp_path) -> None:
    sweeps = ["experiment.seed=1,2,3", "traffic.size=64KiB,128KiB"]
    _, points = expand(None, QUIET, sweeps)
    serial = run_sweep(points, fake_run, tmp_path / "s", SerialExecutor())
    parallel = run_sweep(points, fake_run, tmp_path / "p", ProcessExecutor(2))
    assert serial == parallel
    assert [r["point"] for r in serial] == list(range(6))
    assert all(r["completed"] and r["error"] is None for r in serial)
    # different seeds give different results, the same seed the same
    medians = [r["summary"]["fct_median_us"] for r in serial]
    assert len(set(medians)) > 1
    again = run_sweep(points[:2], fake_run, tmp_path / "again")
    assert [r["summary"] for r in again] == [r["summary"] for r in serial[:2]]
    for r in serial:
        assert (tmp_path / "p" / r["dir"] / "results.json").exists()


def test_failures_are_reported_and_files_written(tmp_path) -> None:
    _, points = expand(None, QUIET, ["experiment.seed=1,2"])
    rows = run_sweep(points, failing_run, tmp_path, ProcessExecutor(2))
    assert rows[0]["error"] is None and rows[1]["error"] == "RuntimeError: boom"
    jpath, cpath, _ = write_sweep(rows, ["experiment.seed"], tmp_path)
    assert json.loads(jpath.read_text())["rows"][1]["error"] == "RuntimeError: boom"
    table = list(csv.DictReader(cpath.read_text().splitlines()))
    assert [t["experiment.seed"] for t in table] == ["1", "2"]
    assert table[0]["fct_median_us"] and table[1]["error"] == "RuntimeError: boom"
    out = run_task(failing_run, Task(0, points[1].config, str(tmp_path / "x")).payload())
    assert "Traceback" in out["traceback"]


def test_command_single_run_sweep_and_errors(tmp_path, capsys) -> None:
    console = Console(record=True, width=160)
    sets = [x for s in QUIET for x in ("--set", s)]
    rc = command.run(run_args(*sets, "--out", str(tmp_path / "one")), fake_run, console)
    assert rc == 0 and (tmp_path / "one" / "results.json").exists()
    assert "FCT median" in console.export_text()
    rc = command.run(run_args(*sets, "--sweep", "experiment.seed=1,2", "--jobs", "2",
                           "--out", str(tmp_path / "sw")), fake_run, console)
    assert rc == 0 and (tmp_path / "sw" / "sweep.csv").exists()
    assert "sweep: 2 points" in console.export_text()
    rc = command.run(run_args("--set", "traffic.size=huge"), fake_run, console)
    assert rc == 2 and "traffic.size" in capsys.readouterr().err
    rc = command.run(run_args("--check"), fake_run, console)
    assert rc == 0 and '"fat_tree"' in console.export_text()
    rc = command.run(run_args("--set", "traffic.pattern=allreduce_ring", "--write-cm",
                           str(tmp_path / "ring.cm")), fake_run, console)
    assert rc == 0 and (tmp_path / "ring.cm").read_text().startswith("Nodes 16\n")
    rc = command.run(run_args(*sets, "--set", "experiment.time_limit_us=50",
                           "--out", str(tmp_path / "short")), fake_run, console)
    assert rc == 1
