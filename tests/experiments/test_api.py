"""The notebook API: docs/api.md's example runs as written (extracted from the doc, so the
doc and this test cannot drift), out=None writes nothing and changes nothing, every config
form gives the same run, and ``import uet`` stays cheap."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pd = pytest.importorskip("pandas")

import uet  # noqa: E402
from uet.experiments.config import ConfigError  # noqa: E402
from uet.experiments.tables import FLOW_COLUMNS, SERIES_COLUMNS  # noqa: E402

DOC = Path(__file__).resolve().parents[2] / "docs" / "api.md"
SECTION = "## Experiments from Python"

SMALL = {"topology": {"kind": "star", "hosts": 4},
         "traffic": {"pattern": "permutation", "size": "64KiB"},
         "impairments": [{"class": "host", "direction": "up", "loss": 0.01}]}


def notebook_blocks() -> list[str]:
    text = DOC.read_text(encoding="utf-8")
    assert SECTION in text
    return re.findall(r"```python\n(.*?)```", text.split(SECTION, 1)[1], re.S)


def test_the_doc_example_runs(tmp_path, monkeypatch, capsys) -> None:
    blocks = notebook_blocks()
    assert len(blocks) == 1 and "uet.sweep(" in blocks[0]
    monkeypatch.chdir(tmp_path)
    ns: dict = {"__name__": "api_notebook_example"}
    exec(compile(blocks[0], f"{DOC.name}[notebook]", "exec"), ns)
    printed = capsys.readouterr().out
    res, sw, again = ns["res"], ns["sw"], ns["again"]
    assert res.completed and res.out is None
    assert list(res.flows.columns) == [c[0] for c in FLOW_COLUMNS]
    assert len(res.flows) == 4 and res.flows["fct_us"].notna().all()
    assert list(res.timeseries.columns) == [c[0] for c in SERIES_COLUMNS]
    assert {"link_tx_bytes", "queue_bytes"} <= set(res.timeseries["series"])
    assert len(sw.points) == 6 and len(sw.groups) == 2
    tail = ns["tail"]
    assert list(tail["n"]) == [3, 3] and (tail["ci_low"] < tail["mean"]).all()
    # the aggregate is the mean over the group's points
    by_hand = sw.summary.groupby("transport.cms.ev_selector")["fct_tail_over_ideal"].mean()
    assert list(tail["mean"]) == pytest.approx(list(by_hand[["fixed", "oblivious"]]))
    assert len(sw.flows) == 24 and set(sw.flows["experiment.seed"]) == {1, 2, 3}
    # the files of the last part, and the last line printed
    for name in ("results.json", "flows.csv", "flows.parquet", "timeseries.parquet",
                 "summary.csv"):
        assert (tmp_path / "runs" / "star" / name).is_file(), name
    assert not (tmp_path / "runs" / "star" / "fct_cdf.png").exists()
    assert again.results["summary"] == ns["fixed"].results["summary"]
    assert printed.rstrip().endswith("True")
    # nothing else was written by the out=None parts
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs"]


def _same(a: uet.Results, b: uet.Results) -> None:
    da, db = a.results, b.results
    assert da["summary"] == db["summary"] and da["flows"] == db["flows"]
    assert da["counters"] == db["counters"]


def test_out_none_writes_nothing_and_changes_nothing(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    cfg = {**SMALL, "capture": {"ifaces": ["h0"]}, "output": {"event_log": True}}
    mem = uet.run(cfg)
    assert list(tmp_path.iterdir()) == []
    disk = uet.run(cfg, out=tmp_path / "run")
    assert {"results.json", "capture.pcapng", "events.jsonl", "timeseries.json"} <= {
        p.name for p in (tmp_path / "run").iterdir()}
    _same(mem, disk)
    # the time series read back from the directory equal the ones kept in memory
    pd.testing.assert_frame_equal(uet.load(tmp_path / "run").timeseries, mem.timeseries)


def test_every_config_form_runs_the_same(tmp_path) -> None:
    toml = ('[topology]\nkind = "star"\nhosts = 4\n[traffic]\npattern = "permutation"\n'
            'size = "64KiB"\n[[impairments]]\nclass = "host"\ndirection = "up"\n'
            'loss = 0.01\n')
    path = tmp_path / "000_seed=1" / "star.toml"  # a sweep point's directory name
    path.parent.mkdir()
    path.write_text(toml, encoding="utf-8")
    a, b, c = uet.run(SMALL), uet.run(toml), uet.run(path)
    d = uet.run(str(path))
    _same(a, b)
    _same(a, c)
    _same(a, d)
    e = uet.run(SMALL, set={"experiment.seed": 2})
    assert e.results["experiment"]["seed"] == 2 and e.results["flows"] != a.results["flows"]
    with pytest.raises(ConfigError, match="traffic.sise: unknown key"):
        uet.run(SMALL, set={"traffic.sise": 1})
    with pytest.raises(ConfigError, match="cannot read"):
        uet.run("no/such/file.toml")
    with pytest.raises(TypeError):
        uet.run(42)


def test_sweep_to_a_directory_and_back(tmp_path) -> None:
    quiet = {"output.plots": False}  # per-point plots (sweep.png is the sweep's own)
    sw = uet.sweep(SMALL, {"experiment.seed": [1, 2, 3]}, out=tmp_path / "sw", set=quiet)
    for name in ("sweep.json", "sweep.csv", "sweep_aggregate.csv", "sweep.png"):
        assert (tmp_path / "sw" / name).is_file()
    back = uet.load(tmp_path / "sw")
    assert isinstance(back, uet.SweepResults)
    pd.testing.assert_frame_equal(back.summary, sw.summary)
    pd.testing.assert_frame_equal(back.aggregate, sw.aggregate)
    pd.testing.assert_frame_equal(back.timeseries, sw.timeseries)
    assert list(sw.summary["experiment.seed"]) == [1, 2, 3]
    again = uet.sweep(SMALL, {"experiment.seed": [1, 2, 3, 4]}, out=tmp_path / "sw",
                      resume=True, set=quiet)
    assert [r["resumed"] for r in again.rows] == [True, True, True, False]
    with pytest.raises(FileNotFoundError, match="neither a run"):
        uet.load(tmp_path)


def test_import_uet_is_cheap() -> None:
    code = ("import sys, uet; heavy = [m for m in ('pandas', 'dask', 'distributed', "
            "'pyarrow', 'trio', 'matplotlib', 'scapy', 'numpy') if m in sys.modules]; "
            "print(heavy); uet.run; print(sorted(m for m in ('pandas', 'dask', "
            "'distributed', 'trio', 'matplotlib') if m in sys.modules))")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONSTARTUP"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env=env).stdout.split("\n")
    assert out[0] == "[]"
    assert out[1] == "[]"  # uet.run itself loads no engine until it runs
    assert "run" in dir(uet) and "sweep" in uet.__all__
    with pytest.raises(AttributeError):
        uet.no_such_name  # noqa: B018
