"""The plots' helper process of ``uet run``: same PNG bytes as drawing in-process, and a
helper that fails, dies or is never used leaves the run's outputs as they were."""

from __future__ import annotations

import io
import json
import os
import pickle
import tempfile
import threading
from pathlib import Path

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


def test_claims_give_each_kind_to_one_helper(tmp_path) -> None:
    assert all(plot_worker._claim(None, k) for k in PLOT_KINDS)  # no sharing: draw all
    assert plot_worker._claim(str(tmp_path), "paths")
    assert not plot_worker._claim(str(tmp_path), "paths")
    assert plot_worker._claim(str(tmp_path), "queues")


def test_two_drawers_draw_the_same_bytes_as_in_process(tmp_path, ref) -> None:
    d, results, series = ref
    with plot_worker.prestarted(helpers=2) as lead:
        pid = lead.pid
        assert lead.submit(results, series, tmp_path / "helper")
        names = lead.result()
        claims = list(Path(tempfile.gettempdir()).glob("uet-plots-*"))
    assert not claims  # the helper removed its claims folder
    assert names == ["fct_cdf.png", "link_utilisation.png", "queues.png", "cwnd.png",
                     "paths.png"]
    with pytest.raises(ProcessLookupError):  # it has exited
        os.kill(pid, 0)
    assert write_plots(results, series, tmp_path / "local") == names
    for n in names:
        assert (tmp_path / "helper" / n).read_bytes() == (tmp_path / "local" / n).read_bytes()
        assert (d / n).read_bytes() == (tmp_path / "local" / n).read_bytes()


def _serve(job: tuple, helpers: int) -> tuple:
    """Run the helper's loop in this process (its forks are forks of the test) on
    ``job``; returns its answer."""
    blob = pickle.dumps(job)
    r, w = os.pipe()
    os.write(w, len(blob).to_bytes(8, "big"))
    with os.fdopen(r, "rb") as stdin:
        writer = threading.Thread(target=lambda: (os.write(w, blob), os.close(w)))
        writer.start()
        out = io.BytesIO()
        assert plot_worker._serve(stdin, out, helpers) == 0
        writer.join()
    return pickle.loads(out.getvalue())


def test_the_fork_draws_the_cheapest_kinds_and_the_helper_the_rest(tmp_path, ref,
                                                                   monkeypatch) -> None:
    d, results, series = ref
    seen = tmp_path / "forks"
    seen.mkdir()
    real = plot_worker._draw

    def draw(job, order, claims, claimed=()):
        kinds, names = real(job, order, claims, claimed)
        (seen / str(os.getpid())).write_text(" ".join(kinds))
        return kinds, names

    monkeypatch.setattr(plot_worker, "_draw", draw)
    answer = _serve((results, series, str(tmp_path / "out"), PLOT_KINDS), 2)
    assert answer == ("ok", results["files"]["plots"])
    drew = {int(p.name): p.read_text().split() for p in seen.iterdir()}
    assert len(drew) == 2 and os.getpid() in drew  # this process and one fork
    fork = next(pid for pid in drew if pid != os.getpid())
    assert drew[fork][0] == "queues"  # the cheapest, claimed for it before it started
    assert sorted(drew[fork] + drew[os.getpid()]) == sorted(PLOT_KINDS)  # once each
    with pytest.raises(ChildProcessError):  # reaped
        os.waitpid(fork, os.WNOHANG)
    for n in answer[1]:
        assert (tmp_path / "out" / n).read_bytes() == (d / n).read_bytes()


def test_no_fork_outlives_a_failing_helper(tmp_path, ref, monkeypatch) -> None:
    """The helper fails after forking: it still waits for its fork before answering, as
    the command then draws the same files itself."""
    d, results, series = ref
    helper = os.getpid()
    forks = tmp_path / "forks"
    forks.mkdir()
    real = plot_worker._draw

    def draw(job, order, claims, claimed=()):
        if os.getpid() == helper:
            raise RuntimeError("the helper's drawing failed")
        (forks / str(os.getpid())).write_text("")
        return real(job, order, claims, claimed)

    monkeypatch.setattr(plot_worker, "_draw", draw)
    answer = _serve((results, series, str(tmp_path / "out"), PLOT_KINDS), 2)
    assert answer == ("error", "RuntimeError: the helper's drawing failed")
    (fork,) = (int(p.name) for p in forks.iterdir())
    with pytest.raises(ChildProcessError):  # reaped before the answer
        os.waitpid(fork, os.WNOHANG)
    drawn = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert drawn == sorted(results["files"]["plots"])  # the fork drew all five, whole
    for n in drawn:
        assert (tmp_path / "out" / n).read_bytes() == (d / n).read_bytes()


@pytest.mark.parametrize("how", ["dies", "fails"])
def test_a_fork_that_dies_or_fails_leaves_its_share_to_the_helper(tmp_path, ref, how,
                                                                  monkeypatch) -> None:
    d, results, series = ref

    def broken(job, order, claims, first, answer):
        if how == "dies":
            os._exit(9)
        with os.fdopen(answer, "wb") as w:
            pickle.dump(("error", "RuntimeError: no"), w)
        os._exit(0)

    monkeypatch.setattr(plot_worker, "_fork_main", broken)
    answer = _serve((results, series, str(tmp_path / "out"), PLOT_KINDS), 2)
    assert answer == ("ok", results["files"]["plots"])  # the helper drew all five
    for n in answer[1]:
        assert (tmp_path / "out" / n).read_bytes() == (d / n).read_bytes()


def test_one_helper_draws_the_kinds_it_is_given(tmp_path, ref) -> None:
    _, results, series = ref
    w = plot_worker.PlotWorker()
    assert w.start(1)
    assert w.submit(results, series, tmp_path, ["paths", "fct_cdf"])
    assert not w.submit(results, series, tmp_path, ["queues"])  # one job per helper
    assert w.result() == ["fct_cdf.png", "paths.png"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fct_cdf.png", "paths.png"]
    assert write_plots(results, series, tmp_path / "b", only=["queues"]) == ["queues.png"]


def test_write_outputs_uses_the_prestarted_helper_once(tmp_path, ref) -> None:
    d, results, series = ref
    with plot_worker.prestarted() as lead:
        assert lead is not None and plot_worker._CURRENT.get() is lead
        out = write_outputs(dict(results, files={}), tmp_path / "run", series)
        assert plot_worker._CURRENT.get() is None  # taken by that run
        assert lead._sent and lead.pid is None
    assert out["files"]["plots"] == results["files"]["plots"]
    assert read_results(tmp_path / "run" / "results.json")["files"] == out["files"]
    for n in out["files"]["plots"]:
        assert (tmp_path / "run" / n).read_bytes() == (d / n).read_bytes()


def test_a_failing_helper_leaves_the_drawing_to_the_caller(tmp_path, ref) -> None:
    d, results, series = ref
    broken = dict(results, flows=None)  # plot_fct_cdf cannot iterate None
    for helpers in (1, 2):  # whichever helper draws fct_cdf fails: no names at all
        with plot_worker.prestarted(helpers=helpers) as lead:
            assert lead.submit(broken, series, tmp_path / "x")
            assert lead.result() is None
    # through write_outputs: the caller draws again and raises the error itself
    with plot_worker.prestarted(), pytest.raises(TypeError):
        write_outputs(dict(broken, files={}), tmp_path / "y", series)


def test_a_dead_helper_is_replaced_by_in_process_drawing(tmp_path, ref) -> None:
    d, results, series = ref
    with plot_worker.prestarted(helpers=2) as lead:
        lead._proc.kill()
        lead._proc.wait()
        out = write_outputs(dict(results, files={}), tmp_path / "run", series)
    assert out["files"]["plots"] == results["files"]["plots"]
    for n in out["files"]["plots"]:
        assert (tmp_path / "run" / n).read_bytes() == (d / n).read_bytes()


def test_unused_helpers_end_with_the_block(tmp_path) -> None:
    with pytest.raises(RuntimeError), plot_worker.prestarted(helpers=2) as lead:
        proc = lead._proc
        raise RuntimeError("the run failed")
    assert proc.poll() is not None and plot_worker._CURRENT.get() is None
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
    assert isinstance(seen[0], plot_worker.PlotWorker) and seen[1] is None
    assert seen[0].pid is None  # ended with the command
    assert sorted(p.name for p in (tmp_path / "a").glob("*.png")) == sorted(
        read_results(tmp_path / "a" / "results.json")["files"]["plots"])


def test_the_helper_imports_this_uet_whatever_the_working_folder(tmp_path, ref,
                                                                   monkeypatch) -> None:
    """A folder holding another ``uet`` package (an older checkout, say) must not
    shadow the command's own in its helper."""
    d, results, series = ref
    decoy = tmp_path / "checkout" / "uet"
    (decoy / "experiments").mkdir(parents=True)
    (decoy / "__init__.py").write_text("raise ImportError('the decoy uet was imported')\n")
    (decoy / "experiments" / "__init__.py").write_text("")
    monkeypatch.chdir(tmp_path / "checkout")
    w = plot_worker.PlotWorker()
    assert w.start(1)
    assert w.submit(results, series, tmp_path / "out", ["queues"])
    assert w.result() == ["queues.png"]
    assert (tmp_path / "out" / "queues.png").read_bytes() == (d / "queues.png").read_bytes()
