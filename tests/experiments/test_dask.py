"""Sweeps on a real Dask distributed cluster (a LocalCluster of two worker processes on
loopback) against the local executor, with the real runner on a small fabric.

One cluster serves the module (started in about a second, closed at the end); the CLI's
``--executor dask`` starts and closes its own. Points are a 4-host star with 64 KiB
messages and 1% loss on the host uplinks, so every point retransmits and differs by seed.
"""

from __future__ import annotations

import json
import logging
import os

import pytest
from rich.console import Console

distributed = pytest.importorskip("distributed")
import dask  # noqa: E402

from uet.experiments import command  # noqa: E402
from uet.experiments.executor import (  # noqa: E402
    DaskExecutor,
    ExecutorError,
    ProcessExecutor,
    SerialExecutor,
    make_executor,
)
from uet.experiments.runner import run_experiment  # noqa: E402
from uet.experiments.sweep import expand, run_points, run_sweep  # noqa: E402

from .fake_runner import crash_run  # noqa: E402
from .run_args import run_args  # noqa: E402

SMALL = """
[experiment]
name = "star4"
seed = 1
[topology]
kind = "star"
hosts = 4
[traffic]
pattern = "permutation"
size = "64KiB"
[[impairments]]
class = "host"
direction = "up"
loss = 0.01
[output]
plots = false
progress = false
"""
SWEEPS = ["transport.cms.ev_selector=fixed,oblivious", "experiment.seed=1,2"]


@pytest.fixture(scope="module")
def experiment(tmp_path_factory):
    path = tmp_path_factory.mktemp("exp") / "star4.toml"
    path.write_text(SMALL, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def cluster():
    # a task whose worker dies is not retried (the default retries it on 3 more workers)
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}), \
            distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  host="127.0.0.1", dashboard_address="127.0.0.1:0",
                                  silence_logs=logging.ERROR) as c, \
            distributed.Client(c) as client:
        yield c, client


def _comparable(outcome: dict) -> dict:
    """A point's results without what differs between any two runs (wall and CPU time)."""
    doc = json.loads(json.dumps(outcome["results"]))
    doc["run"].pop("wall_time_s")
    doc["run"].pop("timing", None)
    return doc


def test_dask_cluster_gives_the_local_results(experiment, cluster, tmp_path):
    _, points = expand(experiment, [], SWEEPS)
    local = run_points(points, run_experiment, tmp_path / "local", ProcessExecutor(2))
    on_dask = run_points(points, run_experiment, tmp_path / "dask",
                         DaskExecutor(client=cluster[1]))
    assert [o["index"] for o in on_dask] == [0, 1, 2, 3]
    assert all("error" not in o for o in local + on_dask), [o.get("error") for o in on_dask]
    # the same points, identical metrics and per-flow records
    for a, b in zip(local, on_dask, strict=True):
        assert _comparable(a) == _comparable(b)
        assert a["key"] == b["key"] and a["dir"] == b["dir"]
    summaries = [o["results"]["summary"] for o in on_dask]
    assert all(s["retransmissions"] > 0 for s in summaries)
    assert len({s["fct_tail_over_ideal"] for s in summaries}) > 1
    # the workers wrote the point directories (a shared file system here)
    for o in on_dask:
        assert (tmp_path / "dask" / o["dir"] / "results.json").is_file()
    # and the points really ran in the cluster's worker processes, not in this one
    pids = {int(o["worker"].rsplit(":", 1)[1]) for o in on_dask}
    assert pids <= set(cluster[1].run(os.getpid).values()) and os.getpid() not in pids


def test_failing_point_is_reported_and_the_others_complete(experiment, cluster, tmp_path):
    _, points = expand(experiment, [], SWEEPS)
    # a point whose config the runner cannot build (it travels as plain data, so any
    # mistake in it reaches the worker): a profile file that does not exist
    points[1].config["transport"]["profile"] = "no-such-profile.toml"
    done = []
    rows = run_sweep(points, run_experiment, tmp_path, DaskExecutor(client=cluster[1]),
                     lambda i, res: done.append((i, "error" in res)))
    assert sorted(done) == [(0, False), (1, True), (2, False), (3, False)]
    assert rows[1]["error"].startswith("ProfileConfigError: ") and not rows[1]["completed"]
    assert "no-such-profile.toml: no such profile file" in rows[1]["error"]
    assert [r["completed"] for i, r in enumerate(rows) if i != 1] == [True, True, True]
    assert not (tmp_path / points[1].name / "results.json").exists()


def test_a_worker_that_dies_fails_its_point_only(cluster, tmp_path) -> None:
    _, points = expand(None, ["output.plots=false", "output.progress=false"],
                       ["experiment.seed=1,2,3"])
    rows = run_sweep(points, crash_run, tmp_path, DaskExecutor(client=cluster[1]))
    assert rows[1]["error"].startswith("KilledWorker: ") and not rows[1]["completed"]
    assert [rows[0]["completed"], rows[2]["completed"]] == [True, True]
    cluster[1].wait_for_workers(2, timeout=30)  # the nanny restarted it


def test_existing_scheduler_and_local_cluster_from_the_command_line(experiment, cluster,
                                                                    tmp_path, capsys):
    address = cluster[0].scheduler_address  # tcp://127.0.0.1:PORT
    console = Console(record=True, width=200)
    base = [str(experiment), *(x for s in SWEEPS for x in ("--sweep", s)),
            "--metric", "fct_tail_over_ideal"]
    rc = command.run(run_args(*base, "--executor", address.replace("tcp", "dask"),
                                 "--out", str(tmp_path / "remote")),
                     console=console)
    assert rc == 0
    text = console.export_text()
    assert f"dask ({address})" in text and "sweep over seeds" in text
    rc = command.run(run_args(*base, "--executor", "dask", "--jobs", "2",
                              "--out", str(tmp_path / "own")), console=console)
    assert rc == 0 and "LocalCluster, 2 workers" in console.export_text()
    a = json.loads((tmp_path / "remote" / "sweep.json").read_text())
    b = json.loads((tmp_path / "own" / "sweep.json").read_text())
    assert [r["summary"] for r in a["rows"]] == [r["summary"] for r in b["rows"]]
    assert a["executor"] == f"dask ({address})"
    assert (tmp_path / "own" / "sweep.png").is_file()
    # an existing scheduler decides its workers: --jobs is refused, in one line
    rc = command.run(run_args(*base, "--executor", "dask://127.0.0.1:1", "--jobs", "2"),
                     console=console)
    assert rc == 2 and "--jobs: not used with an existing Dask scheduler" in \
        capsys.readouterr().err


def test_unreachable_scheduler_is_one_clear_error(experiment, tmp_path) -> None:
    _, points = expand(experiment, [], ["experiment.seed=1,2"])
    # port 1 on loopback: nothing listens there
    ex = DaskExecutor("tcp://127.0.0.1:1", connect_timeout_s=1)
    with pytest.raises(ExecutorError, match="cannot reach the Dask scheduler at "
                       "tcp://127.0.0.1:1"):
        run_points(points, run_experiment, tmp_path, ex)


def test_executor_specs() -> None:
    assert isinstance(make_executor(), SerialExecutor)
    assert isinstance(make_executor("local", 3), ProcessExecutor)
    assert make_executor("dask", 2).name == "dask (LocalCluster, 2 workers)"
    assert make_executor("dask://10.1.2.3:8786").address == "tcp://10.1.2.3:8786"
    for bad, msg in (("ray", "unknown executor; allowed: local, dask, or dask://HOST:PORT"),
                     ("dask://nohost", "expected dask://HOST:PORT")):
        with pytest.raises(ExecutorError, match=msg):
            make_executor(bad)
    for jobs in (0, -3, 1.5, True):
        with pytest.raises(ExecutorError, match="not a positive integer"):
            make_executor("local", jobs)
