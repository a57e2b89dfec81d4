"""``--resume``: points whose results exist (keyed by a hash of the resolved config) are
skipped; only the missing ones run."""

from __future__ import annotations

import json

import pytest
from rich.console import Console

from uet.experiments import command
from uet.experiments.config import load_config
from uet.experiments.executor import SerialExecutor
from uet.experiments.resume import config_key, existing_results
from uet.experiments.sweep import expand, run_points

from .fake_runner import fake_run
from .run_args import run_args

QUIET = ["output.plots=false", "output.progress=false"]


class Counting:
    """A run function that records which seeds it ran (serial executor: same process)."""

    def __init__(self) -> None:
        self.seeds: list[int] = []

    def __call__(self, config, out_dir, **kw):
        self.seeds.append(config["experiment"]["seed"])
        return fake_run(config, out_dir, **kw)


def test_resume_runs_only_the_missing_points(tmp_path) -> None:
    _, points = expand(None, QUIET, ["experiment.seed=1,2,3,4"])
    first = Counting()
    full = run_points(points, first, tmp_path, SerialExecutor())
    assert first.seeds == [1, 2, 3, 4] and not any(o["resumed"] for o in full)
    # lose two points' results (an interrupted sweep, a crashed node)
    (tmp_path / points[1].name / "results.json").unlink()
    (tmp_path / points[3].name / "results.json").write_text("{ not json")
    again = Counting()
    seen = []
    resumed = run_points(points, again, tmp_path, SerialExecutor(),
                         lambda i, o: seen.append((i, o["resumed"])), resume=True)
    assert again.seeds == [2, 4]
    assert sorted(seen) == [(0, True), (1, False), (2, True), (3, False)]
    assert [o["resumed"] for o in resumed] == [True, False, True, False]
    # the same results whether a point ran now or before
    for a, b in zip(full, resumed, strict=True):
        assert a["results"]["summary"] == b["results"]["summary"]
        assert a["key"] == b["key"]
    # a grown grid: seeds 1-4 are found under their old directories (the indices moved)
    _, grown = expand(None, QUIET, ["experiment.seed=0,1,2,3,4"])
    third = Counting()
    out = run_points(grown, third, tmp_path, SerialExecutor(), resume=True)
    assert third.seeds == [0]
    assert [o["dir"] for o in out[1:]] == [p.name for p in points]
    assert out[0]["dir"] == grown[0].name and not out[0]["resumed"]


def test_config_key_follows_what_changes_results(tmp_path) -> None:
    cfg = load_config(None, QUIET)
    key = config_key(cfg)
    assert len(key) == 16
    # provenance and the progress bar do not count ...
    assert config_key(load_config(None, ["output.progress=true", "output.plots=false"])
                      ) == key
    cfg2 = json.loads(json.dumps(cfg))
    cfg2["source"] = {"file": "elsewhere.toml", "overrides": ["--set x=1"]}
    assert config_key(cfg2) == key
    # ... any other key does
    assert config_key(load_config(None, [*QUIET, "traffic.size=2MiB"])) != key
    assert config_key(load_config(None, [*QUIET, "experiment.seed=2"])) != key
    # a results document records its config: same key as the config that ran
    out = fake_run(cfg, tmp_path / "run")
    assert config_key(out["experiment"]["config"]) == key
    assert existing_results(tmp_path)[key][0] == tmp_path / "run"
    # the contents of a connection matrix count, not only its name
    cm = tmp_path / "w.cm"
    cm.write_text("Nodes 16\nConnections 1\n0->1 id 1 start 0 size 1000\n")
    exp = tmp_path / "cm.toml"
    exp.write_text('[traffic]\npattern = "cm_file"\nfile = "w.cm"\n')
    k1 = config_key(load_config(exp))
    cm.write_text("Nodes 16\nConnections 1\n0->1 id 1 start 0 size 2000\n")
    assert config_key(load_config(exp)) != k1


def test_resume_from_the_command_line(tmp_path, capsys) -> None:
    sets = [x for s in QUIET for x in ("--set", s)]
    console = Console(record=True, width=200)
    out = str(tmp_path / "sw")
    argv = [*sets, "--sweep", "experiment.seed=1,2,3", "--out", out]
    assert command.run(run_args(*argv), fake_run, console) == 0
    rows = json.loads((tmp_path / "sw" / "sweep.json").read_text())["rows"]
    (tmp_path / "sw" / rows[2]["dir"] / "results.json").unlink()
    capsys.readouterr()
    assert command.run(run_args(*argv, "--resume"), fake_run, console) == 0
    err = capsys.readouterr().err
    assert err.count("already done") == 2 and "point 2 done" in err
    rows2 = json.loads((tmp_path / "sw" / "sweep.json").read_text())["rows"]
    assert [r["resumed"] for r in rows2] == [True, True, False]
    assert [r["summary"] for r in rows2] == [r["summary"] for r in rows]
    # --resume needs the directory to resume; a single run has nothing to resume
    assert command.run(run_args(*sets, "--sweep", "experiment.seed=1,2", "--resume"),
                       fake_run, console) == 2
    assert "--resume needs --out DIR" in capsys.readouterr().err
    assert command.run(run_args(*sets, "--resume", "--out", out), fake_run, console) == 2
    assert "--resume applies to sweeps" in capsys.readouterr().err


@pytest.mark.parametrize("bad", ["0", "-3", "two", "1.5"])
def test_jobs_must_be_a_positive_integer(bad, capsys) -> None:
    from uet.cli import main

    with pytest.raises(SystemExit) as info:
        main(["run", "--sweep", "experiment.seed=1,2", "--jobs", bad])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert f"argument --jobs: {bad!r} is not a positive integer" in err
    assert "Traceback" not in err


def test_results_from_a_worker_without_the_shared_disk_are_kept(tmp_path) -> None:
    """A remote worker may write its point directory on its own disk: the results that come
    back are written here, so --resume finds them next time."""
    _, points = expand(None, QUIET, ["experiment.seed=1,2"])
    remote = Counting()
    out = run_points(points, lambda c, o, **kw: remote(c, None, **kw), tmp_path,
                     SerialExecutor())
    assert all((tmp_path / o["dir"] / "results.json").is_file() for o in out)
    again = Counting()
    run_points(points, again, tmp_path, SerialExecutor(), resume=True)
    assert remote.seeds == [1, 2] and again.seeds == []
