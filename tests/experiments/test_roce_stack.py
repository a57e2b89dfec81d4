"""transport.stack = "roce" through the real experiment runner, the uet versus command,
and the one-line errors for bad RoCE settings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from uet.cli import main
from uet.experiments.config import ConfigError, load_config, parse_config
from uet.experiments.results import validate_results
from uet.experiments.runner import run_experiment
from uet.experiments.versus import parse_variant, variant_configs

ROOT = Path(__file__).resolve().parents[2]
ROCE = ROOT / "experiments" / "roce"

SMALL = """
[experiment]
name = "roce-small"
seed = 5
[topology]
kind = "fat_tree"
k = 4
pfc = true
[transport]
stack = "roce"
[transport.roce]
qps_per_flow = 2
[traffic]
pattern = "allreduce_ring"
size = "256KiB"
hosts = [0, 5, 10, 15]
[output]
plots = false
timeseries = false
progress = false
"""


def test_roce_allreduce_delivers_every_byte(tmp_path):
    res = run_experiment(parse_config(SMALL), tmp_path)
    assert validate_results(res) == []
    assert res["run"]["completed"] and res["collective"]["ok"]
    s = res["summary"]
    assert s["duplicates_delivered"] == 0 and s["drops"] == 0
    assert s["bytes_delivered"] == s["bytes_sent"] > 0
    assert s["pdcs_opened"] == 0 and isinstance(s["cnps"], int)
    roce = res["counters"]["roce"]
    assert sum(h.get("tx_data", 0) for h in roce.values()) > 0
    assert all(f["duplicates"] == 0 and f["bytes_delivered"] == f["size"]
               for f in res["flows"])
    # the same seed gives the same run
    again = run_experiment(parse_config(SMALL), tmp_path / "again")
    assert [f["end_ps"] for f in again["flows"]] == [f["end_ps"] for f in res["flows"]]


def test_roce_bulk_flows_share_one_sink_collectives_keep_their_own(tmp_path):
    """As the UET runner: a permutation's WRITEs land in one sink every host shares (and
    one IP -> host map), counted per flow; a collective keeps a sink per host."""
    from uet.experiments.roce_stack import RoceRunner

    perm = parse_config(SMALL.replace('pattern = "allreduce_ring"', 'pattern = "permutation"')
                        .replace("hosts = [0, 5, 10, 15]\n", ""))
    run = RoceRunner(perm, tmp_path / "perm")
    run.build()
    assert len({id(ep.sink) for ep in run.eps}) == 1 and len(run.eps[0].sink) == 256 * 1024
    assert len({id(ep.peer_index) for ep in run.eps}) == 1
    res = run_experiment(perm, tmp_path / "perm-run")
    assert res["run"]["completed"] and res["summary"]["bytes_delivered"] == 16 * 256 * 1024
    assert all(f["bytes_delivered"] == f["size"] and f["duplicates"] == 0
               for f in res["flows"])
    coll = RoceRunner(parse_config(SMALL), tmp_path / "coll")
    coll.build()
    assert len({id(ep.sink) for ep in coll.eps}) == 16


def test_victim_flows_are_summarised(tmp_path):
    cfg = load_config(ROCE / "incast-victim.toml",
                      ["transport.stack=roce", "output.plots=false", "output.progress=false",
                       "output.timeseries=false"])
    res = run_experiment(cfg, tmp_path)
    s = res["summary"]
    assert s["victim_flows"] == 3 and s["messages_delivered"] == 11
    victims = [f for f in res["flows"] if f["id"] in (9, 10, 11)]
    assert s["victim_fct_max_us"] == max(f["fct_ps"] for f in victims) / 1e6
    assert s["pfc_pause_us"] > 0 and s["drops"] == 0


@pytest.mark.parametrize("expr, where", [
    ("transport.stack=rdma", "transport.stack"),
    ("transport.roce.mtu=4000", "transport.roce.mtu"),
    ("transport.roce.qps_per_flow=0", "transport.roce.qps_per_flow"),
    ("transport.roce.dcqcn={g=2.0}", "transport.roce.dcqcn.g"),
    ("transport.roce.bogus=1", "transport.roce.bogus"),
    ("traffic.victims=[99]", "traffic.victims[0]"),
])
def test_bad_roce_settings_name_the_key(expr, where):
    with pytest.raises(ConfigError) as exc:
        load_config(ROCE / "incast-victim.toml", [expr])
    msg = str(exc.value)
    assert where in msg and "\n" not in msg and "allowed" in msg


def test_every_roce_experiment_loads_for_every_variant():
    files = sorted(ROCE.glob("*.toml"))
    assert {f.stem for f in files} >= {"permutation-ecmp", "allreduce-qps", "incast-victim",
                                       "lossy-link", "degraded-link"}
    for f in files:
        configs = variant_configs(f)
        stacks = {c["transport"]["stack"] for c in configs.values()}
        assert stacks == {"uet", "roce"}, f.name
        seeds = {c["experiment"]["seed"] for c in configs.values()}
        topos = {json.dumps(c["topology"], sort_keys=True) for c in configs.values()}
        assert len(seeds) == 1 and len(topos) == 1, f.name  # same seed, same fabric


def test_bad_variants_are_refused():
    with pytest.raises(ConfigError):
        parse_variant("no label here")
    with pytest.raises(ConfigError):
        variant_configs(ROCE / "lossy-link.toml", (), ["a: transport.stack=roce",
                                                       "a: transport.stack=uet"])
    assert parse_variant("r8: transport.stack=roce; transport.roce.qps_per_flow=8") == \
        ("r8", ["transport.stack=roce", "transport.roce.qps_per_flow=8"])


def test_versus_command_prints_one_table_and_writes_one_plot(tmp_path, capsys):
    exp = tmp_path / "small.toml"
    exp.write_text(SMALL.replace('stack = "roce"\n', ""), encoding="utf-8")
    out = tmp_path / "out"
    rc = main(["versus", str(exp), "--out", str(out), "--set", "traffic.size=64KiB"])
    assert rc == 0
    text = capsys.readouterr().out
    assert "UET" in text and "RoCEv2" in text and "FCT tail / ideal" in text
    data = json.loads((out / "versus.json").read_text())
    assert list(data["variants"]) == ["uet", "roce"]
    assert data["variants"]["roce"]["stack"] == "roce"
    assert (out / "versus.png").stat().st_size > 10_000
    for v in ("uet", "roce"):
        assert json.loads((out / v / "results.json").read_text())["run"]["completed"]
    assert main(["versus", str(exp), "--stacks", "uet,tcp", "--out", str(out)]) == 2
    assert "allowed" in capsys.readouterr().err
