"""The plots' helper process of ``uet run``: same PNG bytes as drawing in-process, and a
helper that fails, dies or is never used leaves the run's outputs as they were."""

from __future__ import annotations

import json
import os
import pickle

import pytest

from uet.experiments import plot_worker
from uet.experiments.config import load_config
from uet.experiments.plots import write_plots
from uet.experiments.report import write_outputs
from uet.experiments.results import read_results
from uet.experiments.schema import PLOT_KINDS

from .fake_runner import fake_run


@pytest.fixture(scope="module")
def ref(tmp_path_factory):
    """A run's results and series, and the plots drawn in-process from them."""
    d = tmp_path_factory.mktemp("ref")
    cfg = load_config(None, ["traffic.pattern=allreduce_ring", "traffic.size=256KiB"])
    results = fake_run(cfg, d)
    series = json.loads((d / "timeseries.json").read_text())
    return d, results, series


def test_helpers_draw_the_same_bytes_as_in_process(tmp_path, ref) -> None:
    d, results, series = ref
    with plot_worker.prestarted(count=2) as helpers:
        assert len(helpers.workers) == 2
        pids = [w._proc.pid for w in helpers.workers]
        assert helpers.submit(results, series, tmp_path / "helper")
        # the work is shared: each helper draws some kinds, together all five
        shares = [k for _, k in helpers._shares]
        assert len(shares) == 2 and all(shares)
        assert sorted(sum(shares, [])) == sorted(PLOT_KINDS)
        names = helpers.result()
    assert names == ["fct_cdf.png", "link_utilisation.png", "queues.png", "cwnd.png",
                     "paths.png"]
    assert all(w._proc is None for w in helpers.workers)  # the helpers have exited
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert write_plots(results, series, tmp_path / "local") == names
    for n in names:
        assert (tmp_path / "helper" / n).read_bytes() == (tmp_path / "local" / n).read_bytes()
        assert (d / n).read_bytes() == (tmp_path / "local" / n).read_bytes()


def test_one_helper_draws_the_kinds_it_is_given(tmp_path, ref) -> None:
    _, results, series = ref
    w = plot_worker.PlotWorker()
    assert w.start()
    job = pickle.dumps((results, series, str(tmp_path)))
    assert w.submit(job, ["paths", "fct_cdf"])
    assert not w.submit(job, ["queues"])  # one job per helper
    assert w.result() == ["fct_cdf.png", "paths.png"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fct_cdf.png", "paths.png"]
    assert write_plots(results, series, tmp_path / "b", only=["queues"]) == ["queues.png"]


def test_write_outputs_uses_the_prestarted_helpers_once(tmp_path, ref) -> None:
    d, results, series = ref
    with plot_worker.prestarted() as helpers:
        assert helpers is not None and plot_worker._CURRENT.get() is helpers
        assert len(helpers.workers) == plot_worker.helper_count()
        out = write_outputs(dict(results, files={}), tmp_path / "run", series)
        assert plot_worker._CURRENT.get() is None  # taken by that run
        assert helpers._shares and all(w._sent and w._proc is None
                                       for w in helpers.workers)
    assert out["files"]["plots"] == results["files"]["plots"]
    assert read_results(tmp_path / "run" / "results.json")["files"] == out["files"]
    for n in out["files"]["plots"]:
        assert (tmp_path / "run" / n).read_bytes() == (d / n).read_bytes()


def test_a_failing_helper_leaves_the_drawing_to_the_caller(tmp_path, ref) -> None:
    d, results, series = ref
    broken = dict(results, flows=None)  # plot_fct_cdf cannot iterate None
    with plot_worker.prestarted(count=2) as helpers:
        assert helpers.submit(broken, series, tmp_path / "x")
        assert helpers.result() is None  # the helper with fct_cdf failed: no names at all
    # through write_outputs: the caller draws again and raises the error itself
    with plot_worker.prestarted(count=2), pytest.raises(TypeError):
        write_outputs(dict(broken, files={}), tmp_path / "y", series)


@pytest.mark.parametrize("count", [1, 2])
def test_a_dead_helper_is_replaced_by_in_process_drawing(tmp_path, ref, count) -> None:
    d, results, series = ref
    with plot_worker.prestarted(count=count) as helpers:
        victim = helpers.workers[-1]._proc
        victim.kill()
        victim.wait()
        out = write_outputs(dict(results, files={}), tmp_path / "run", series)
    assert out["files"]["plots"] == results["files"]["plots"]
    for n in out["files"]["plots"]:
        assert (tmp_path / "run" / n).read_bytes() == (d / n).read_bytes()


def test_unused_helpers_end_with_the_block(tmp_path) -> None:
    with pytest.raises(RuntimeError), plot_worker.prestarted(count=2) as helpers:
        procs = [w._proc for w in helpers.workers]
        raise RuntimeError("the run failed")
    assert all(p.poll() is not None for p in procs) and plot_worker._CURRENT.get() is None
    with plot_worker.prestarted(False) as none:
        assert none is None and plot_worker.current() is None


def test_the_command_prestarts_helpers_only_when_plots_are_on(tmp_path) -> None:
    from uet.cli import main

    seen: list[object] = []

    def spy(config, out):
        seen.append(plot_worker._CURRENT.get())
        return fake_run(config, out)

    import uet.experiments.command as command

    orig = command._runner
    command._runner = lambda: spy
    try:
        assert main(["run", "--set", "traffic.size=64KiB", "--out", str(tmp_path / "a")]) == 0
        assert main(["run", "--set", "output.plots=false", "--out",
                     str(tmp_path / "b")]) == 0
    finally:
        command._runner = orig
    assert isinstance(seen[0], plot_worker.PlotHelpers) and seen[1] is None
    assert all(w._proc is None for w in seen[0].workers)  # ended with the command
    assert sorted(p.name for p in (tmp_path / "a").glob("*.png")) == sorted(
        read_results(tmp_path / "a" / "results.json")["files"]["plots"])
