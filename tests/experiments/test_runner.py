"""The experiment runner on the real fabric and real end points, end to end through
``uet run``: the default experiment, all-reduce data, results schema, limits, --set, sweeps.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from rich.console import Console

from uet.cli import main as uet_main
from uet.experiments import command
from uet.experiments.config import parse_config
from uet.experiments.ideal import WireFormat
from uet.experiments.plots import cwnd_flows, rank_links
from uet.experiments.results import read_results, validate_results
from uet.experiments.runner import Runner, SinkSpace, run_experiment
from uet.wireshark import plugin_path

QUIET = """
[output]
plots = false
timeseries = false
progress = false
"""


def small(text: str) -> dict:
    return parse_config(text + QUIET)


def uet(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = uet_main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_default_experiment_writes_everything(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """`uet run` with no file: table, results.json (schema-valid), captures, plots."""
    code, out, _ = uet(["run", "--out", str(tmp_path), "--no-progress"], capsys)
    assert code == 0
    for text in ("FCT median", "FCT p99", "x ideal", "goodput", "duplicates delivered",
                 "retransmissions", "NACKs", "trims", "ECN marks", "drops", "PFC pause",
                 "PDCs opened / closed"):
        assert text in out, text
    doc = read_results(tmp_path / "results.json")  # raises unless it matches the schema
    s = doc["summary"]
    assert doc["run"]["completed"] and doc["run"]["stop_reason"] == "done"
    assert s["messages_sent"] == s["messages_delivered"] == 16
    assert s["bytes_sent"] == s["bytes_delivered"] == 16 << 20
    assert s["duplicates_delivered"] == 0
    assert 1.0 <= s["fct_median_over_ideal"] <= s["fct_tail_over_ideal"]
    assert s["pdcs_opened"] == s["pdcs_closed"] == 16  # drained: every PDC closed
    assert s["wire_frames_sent"] > 16 * 256
    assert doc["run"]["last_delivery_ps"] < doc["run"]["virtual_time_ps"]
    # the first run shows what the README advertises (it showed 0 retransmissions, 0 NACKs
    # and 0 trims with 0.1% loss on one link): random loss on core2's links, recovered ...
    assert set(s["drops_by_reason"]) == {"loss"} and s["drops_by_reason"]["loss"] >= 10
    lossy = {k: v for k, v in doc["counters"]["link"].items() if "core2." in k}
    assert sum(v.get("drop.loss", 0) for v in lossy.values()) == s["drops_by_reason"]["loss"]
    by_cause = s["retransmissions_by_cause"]
    assert sum(v for k, v in by_cause.items() if not k.startswith("nack.")) >= 5
    # ... and the degraded core link: queues fill, packets are trimmed, NACKed, resent
    assert s["trims"] >= 20 and s["nacks_by_code"]["TRIMMED"] == s["trims"]
    assert by_cause["nack.TRIMMED"] == s["trims"] and s["ecn_marks"] >= 50
    assert doc["counters"]["port"]["core0.p0"]["trimmed"] > 0
    text = " ".join(out.split())
    assert "what happened" in text
    for line in ("loss recovery", "frames lost", "after RACK", "messages delivered exactly "
                 "once", "packets cut to their headers", "NACKs", "TRIMMED", "packets marked "
                 "CE", "core0.p0 (down) at 25 of 100 Gb/s"):
        assert line in text, line
    files = doc["files"]
    assert files["capture"] == "capture.pcapng"
    assert sorted(files["plots"]) == ["cwnd.png", "fct_cdf.png", "link_utilisation.png",
                                      "paths.png", "queues.png"]
    for name in files["plots"]:
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    series = json.loads((tmp_path / "timeseries.json").read_text())
    assert max(p[1] for v in series["queue_bytes"].values() for p in v) > 20_000
    assert len(series["cwnd_bytes"]) == 16
    # the cwnd plot shows windows that moved, with the signals that moved them
    names, moved, traced = cwnd_flows(series, 4)
    assert traced == 16 and moved >= 4 and len(names) == 4
    for name in names:
        assert series["flow_events"].get(name), name
        assert len({v for _, v in series["cwnd_bytes"][name]}) > 3
    kinds = {k for evs in series["flow_events"].values() for _, k in evs}
    assert {"nack", "loss"} <= kinds
    assert series["fabric_signals"]["trims"][-1][1] == s["trims"]
    assert series["fabric_signals"]["ecn_marks"][-1][1] == s["ecn_marks"]
    # the degraded link is among the busiest by share of its own rate, and marked
    busy, share, degraded = rank_links(series)
    assert degraded == ["core0.p0->agg0.p2"] and busy.index(degraded[0]) < 32
    assert series["link_rate_bps"][degraded[0]] == 25e9
    # every sender sprayed its data over its 128 EVs
    assert sorted(series["ev_bytes"]) == sorted(f"h{i}" for i in range(16))
    assert all(len(evs) == 128 for evs in series["ev_bytes"].values())
    assert sum(map(sum, (e.values() for e in series["ev_bytes"].values()))) >= 16 * 256 * 4194
    # the capture is a real pcapng that tshark reads and our dissector decodes
    proc = subprocess.run(["tshark", "-n", "-X", f"lua_script:{plugin_path()}", "-r",
                           str(tmp_path / "capture.pcapng"), "-Y", "uet",
                           "-T", "fields", "-e", "uet.pds.type"],
                          capture_output=True, text=True, timeout=120, check=True)
    types = proc.stdout.split()
    assert len(types) > 500
    assert len(set(types)) >= 3  # requests, ACKs, control packets (CLEAR/CLOSE)


def test_ideal_uses_the_emulators_frames(tmp_path: Path) -> None:
    cfg = small("""
[topology]
kind = "fat_tree"
[traffic]
pattern = "single"
src = 0
dst = 15
size = "1MiB"
""")
    doc = run_experiment(cfg, tmp_path)
    flow = doc["flows"][0]
    # 256 frames of 4096 + 98 B at 80 ps/B, 6 links of 1 us, 5 store-and-forward times
    assert flow["ideal_ps"] == 256 * 4194 * 80 + 6 * 1_000_000 + 5 * 4194 * 80
    assert WireFormat.emulator().packet == 4194
    assert 1.0 < flow["fct_over_ideal"] < 1.2  # alone on an idle fabric


@pytest.mark.parametrize("pattern", ["allreduce_ring", "allreduce_butterfly"])
def test_allreduce_puts_every_byte_where_it_belongs(pattern: str, tmp_path: Path) -> None:
    cfg = small(f"""
[topology]
kind = "fat_tree"
[[impairments]]
class = "switch"
loss = 0.002
[traffic]
pattern = "{pattern}"
hosts = [0, 3, 5, 6, 9, 10, 12, 15]
size = "96KiB"
""")
    doc = run_experiment(cfg, tmp_path)
    assert doc["run"]["completed"]
    coll = doc["collective"]
    assert coll == {"kind": pattern, "ranks": 8, "buffer_bytes": 96 * 1024,
                    "complete": True, "mismatched_ranks": [], "ok": True}
    assert doc["summary"]["duplicates_delivered"] == 0
    assert not validate_results(doc)
    # dependent flows start after what they wait for was delivered
    end = {f["id"]: f["end_ps"] for f in doc["flows"]}
    for f in doc["flows"]:
        for d in f.get("depends_on", ()):
            assert f["start_ps"] >= end[d]


def test_allreduce_check_catches_a_wrong_byte(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The byte check is real: one flipped byte in one delivered message is reported."""
    cfg = small("""
[topology]
kind = "star"
hosts = 4
[traffic]
pattern = "allreduce_ring"
size = "16KiB"
""")
    original = Runner._finished
    hit = []

    def corrupting(self, flow, op, now):
        if not hit and flow.id == 3:
            off = self.offsets[flow.id]
            self.eps[flow.dst].sink[off + 100] ^= 0x5A
            hit.append(flow.dst)
        return original(self, flow, op, now)

    monkeypatch.setattr(Runner, "_finished", corrupting)
    doc = run_experiment(cfg, tmp_path)
    assert hit and doc["run"]["completed"]
    assert not doc["collective"]["ok"] and doc["collective"]["mismatched_ranks"]


def test_bulk_flows_share_one_sink_collectives_keep_their_own(tmp_path: Path) -> None:
    """A permutation's WRITEs land in one scratch buffer shared by every host (memory does
    not grow by the message size per host) and are still counted per flow; collectives,
    whose bytes are read back and checked, keep a sink per host."""
    cfg = small("""
[topology]
kind = "fat_tree"
[traffic]
pattern = "permutation"
size = "200KiB"
""")
    run = Runner(cfg, tmp_path)
    run.build()
    sinks = {id(ep.sink) for ep in run.eps}
    assert len(sinks) == 1 and len(run.eps[0].sink) == 200 * 1024
    doc = run_experiment(cfg, tmp_path / "run")
    assert doc["run"]["completed"] and doc["summary"]["bytes_delivered"] == 16 * 200 * 1024
    assert all(f["bytes_delivered"] == f["size"] and f["duplicates"] == 0
               for f in doc["flows"])
    coll = Runner(small("""
[topology]
kind = "star"
hosts = 4
[traffic]
pattern = "allreduce_ring"
size = "16KiB"
"""), tmp_path / "coll")
    coll.build()
    assert len({id(ep.sink) for ep in coll.eps}) == 4


def test_sink_space_reuses_and_grows() -> None:
    class Ep:
        sink = bytearray(10)

    space = SinkSpace(Ep())
    assert space.take(8) == 0 and space.take(8) == 8 and len(Ep.sink) == 16
    space.give(0, 8)
    assert space.take(4) == 0 and space.take(4) == 4 and space.take(2) == 16
    space.give(0, 4)
    space.give(4, 4)
    assert space.free == [(0, 8)]
    no_reuse = SinkSpace(Ep(), reuse=False)
    off = no_reuse.take(4)
    no_reuse.give(off, 4)
    assert no_reuse.take(4) != off


def test_time_limit_stops_the_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                  ) -> None:
    code, out, _ = uet(["run", "--out", str(tmp_path), "--no-progress",
                        "--set", "experiment.time_limit_us=40",
                        "--set", "output.plots=false"], capsys)
    assert code == 1
    doc = read_results(tmp_path / "results.json")
    assert doc["run"]["stop_reason"] == "time_limit" and not doc["run"]["completed"]
    assert doc["run"]["virtual_time_ps"] == 40_000_000
    assert doc["summary"]["messages_delivered"] == 0
    assert all(f["end_ps"] is None and 0 < f["bytes_delivered"] < f["size"]
               for f in doc["flows"])
    assert "16 unfinished" in out


def test_failed_messages_stall_the_run(tmp_path: Path) -> None:
    """A host whose link is down: its messages fail, the run stops as stalled."""
    cfg = small("""
[topology]
kind = "star"
hosts = 4
[[impairments]]
match = "h1"
down = [[0]]
[transport.pds]
max_retries = 2
[traffic]
pattern = "permutation"
pairs = [[0, 1], [1, 2], [2, 3], [3, 0]]
size = "32KiB"
""")
    doc = run_experiment(cfg, tmp_path)
    assert doc["run"]["stop_reason"] == "stalled" and not doc["run"]["completed"]
    by_id = {f["id"]: f for f in doc["flows"]}
    assert by_id[1]["error"].startswith("WRITE failed") and by_id[1]["end_ps"] is None
    assert by_id[2]["error"].startswith("WRITE failed")
    assert by_id[3]["end_ps"] is not None and by_id[4]["end_ps"] is not None
    assert doc["summary"]["drops_by_reason"]["link_down"] > 0


def test_duplicating_links_deliver_exactly_once(tmp_path: Path) -> None:
    cfg = small("""
[topology]
kind = "star"
hosts = 4
[[impairments]]
class = "all"
duplicate = 0.05
[traffic]
pattern = "permutation"
size = "256KiB"
""")
    doc = run_experiment(cfg, tmp_path)
    assert doc["run"]["completed"]
    dup = sum(v.get("duplicated", 0) for v in doc["counters"]["link"].values())
    assert dup > 20  # the links did duplicate frames ...
    assert doc["summary"]["duplicates_delivered"] == 0  # ... the PDS delivered each once
    assert all(f["duplicates"] == 0 for f in doc["flows"])


def test_same_seed_same_run(tmp_path: Path) -> None:
    text = """
[experiment]
seed = 7
[topology]
kind = "fat_tree"
[[impairments]]
class = "switch"
loss = 0.005
[traffic]
size = "128KiB"
[capture]
ifaces = ["h3"]
"""
    a = run_experiment(small(text), tmp_path / "a")
    b = run_experiment(small(text), tmp_path / "b")
    c = run_experiment(small(text.replace("seed = 7", "seed = 8")), tmp_path / "c")
    for doc in (a, b, c):
        doc["run"].pop("wall_time_s")
    assert a["flows"] == b["flows"] and a["summary"] == b["summary"]
    assert a["counters"] == b["counters"]
    assert (tmp_path / "a/capture.pcapng").read_bytes() == \
        (tmp_path / "b/capture.pcapng").read_bytes()
    assert a["flows"] != c["flows"]


def test_set_reaches_the_run_and_bad_keys_are_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = uet(["run", "--set", "traffic.sizee=1"], capsys)
    assert code == 2 and "traffic.sizee" in err and "unknown key in [traffic]" in err
    code, _, err = uet(["run", "--set", "transport.cms.ev_selector=spray"], capsys)
    assert code == 2 and "one of fixed, oblivious" in err
    code, _, err = uet(["run", "--set", "transport.mode=UUD", "--set",
                        "transport.profile=ai-full"], capsys)
    assert code == 2 and "DATAGRAM_SEND" in err and "allowed: ROD, RUD" in err
    code, _, _ = uet(["run", "--out", str(tmp_path), "--no-progress",
                      "--set", "traffic.size=48KiB", "--set", "topology.kind=star",
                      "--set", "topology.hosts=4", "--set", "capture.links=[]",
                      "--set", "impairments=[]", "--set", "output.plots=false"], capsys)
    assert code == 0
    doc = read_results(tmp_path / "results.json")
    assert [f["size"] for f in doc["flows"]] == [48 * 1024] * 4
    assert doc["experiment"]["config"]["topology"]["kind"] == "star"
    assert "--set traffic.size=48KiB" in doc["experiment"]["config"]["source"]["overrides"]


def test_rudi_and_rod_runs(tmp_path: Path) -> None:
    for i, (profile, mode) in enumerate((("hpc", "RUDI"), ("ai-full", "ROD"))):
        cfg = small(f"""
[topology]
kind = "star"
hosts = 4
[transport]
profile = "{profile}"
mode = "{mode}"
[traffic]
pattern = "allreduce_ring"
size = "32KiB"
""")
        doc = run_experiment(cfg, tmp_path / str(i))
        assert doc["run"]["completed"], mode
        assert doc["collective"]["ok"], mode


def test_sweep_runs_real_points_in_parallel(tmp_path: Path) -> None:
    exp = tmp_path / "exp.toml"
    exp.write_text("""
[topology]
kind = "star"
hosts = 4
[[impairments]]
match = "h*"
loss = 0.01
[traffic]
size = "64KiB"
""" + QUIET)
    rows = {}
    for jobs in (1, 2):
        args = argparse_ns(str(exp), tmp_path / f"j{jobs}", jobs,
                           ["experiment.seed=1,2", "transport.cms.ev_selector=fixed,reps"])
        with open(tmp_path / f"table{jobs}.txt", "w") as fh:
            assert command.run(args, console=Console(file=fh, width=200)) == 0
        assert "sweep: 4 points" in (tmp_path / f"table{jobs}.txt").read_text()
        sweep = json.loads((tmp_path / f"j{jobs}" / "sweep.json").read_text())
        rows[jobs] = sweep["rows"]
        for r in sweep["rows"]:
            doc = read_results(tmp_path / f"j{jobs}" / r["dir"] / "results.json")
            assert doc["summary"] == r["summary"]
    assert len(rows[1]) == 4
    assert [r["summary"] for r in rows[1]] == [r["summary"] for r in rows[2]]
    assert rows[1][0]["summary"] != rows[1][2]["summary"]  # seed 1 vs seed 2 differ


def argparse_ns(exp: str, out: Path, jobs: int, sweeps: list[str]):
    import argparse

    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    argv = [exp, "--out", str(out), "--jobs", str(jobs), "--no-progress"]
    for s in sweeps:
        argv += ["--sweep", s]
    return parser.parse_args(argv)


def test_wall_limit_and_event_log(tmp_path: Path) -> None:
    cfg = small("""
[experiment]
wall_limit_s = 0.05
[topology]
kind = "fat_tree"
[traffic]
size = "16MiB"
""")  # about 8 s of work without the limit
    doc = run_experiment(cfg, tmp_path / "wall")
    assert doc["run"]["stop_reason"] == "wall_limit" and not doc["run"]["completed"]
    assert doc["run"]["wall_time_s"] < 5
    cfg = small("""
[topology]
kind = "star"
hosts = 4
[traffic]
pattern = "incast"
size = "32KiB"
""")
    cfg["output"]["event_log"] = True
    doc = run_experiment(cfg, tmp_path / "log")
    assert doc["files"]["event_log"] == "events.jsonl"
    events = [json.loads(line) for line in
              (tmp_path / "log" / "events.jsonl").read_text().splitlines()]
    kinds = [e["event"] for e in events]
    assert kinds.count("flow_start") == kinds.count("flow_done") == 3
    assert kinds.count("pdc_open") == 6 and kinds.count("pdc_close") == 6
    done = {e["flow"]: e["fct_ps"] for e in events if e["event"] == "flow_done"}
    assert done == {f["id"]: f["fct_ps"] for f in doc["flows"]}
    assert [e["t_ps"] for e in events] == sorted(e["t_ps"] for e in events)


def test_only_the_plots_asked_for_are_drawn_and_sampled(tmp_path: Path) -> None:
    """output.plot_kinds: the plots written are those named; without timeseries.json the
    sampler records only the series they draw (none at all for the FCT CDF alone), and
    with it everything, whatever the plots."""
    text = """
[topology]
kind = "fat_tree"
[traffic]
pattern = "permutation"
size = "64KiB"
"""
    cfg = small(text)
    cfg["output"].update(plots=True, timeseries=False, plot_kinds=["fct_cdf", "queues"])
    run = Runner(cfg, tmp_path / "some")
    doc = run.execute()
    assert sorted(doc["files"]["plots"]) == ["fct_cdf.png", "queues.png"]
    assert sorted(p.name for p in (tmp_path / "some").glob("*.png")) == doc["files"]["plots"]
    assert run.sampler is not None and not run.sampler.channels and run.sampler.ports
    series = run.series
    assert series is not None and series["queue_bytes"] and not series["link_tx_bytes"]
    assert "ev_bytes" not in series and not series["cwnd_bytes"]
    cdf = small(text)
    cdf["output"].update(plots=True, timeseries=False, plot_kinds=["fct_cdf"])
    only = Runner(cdf, tmp_path / "cdf")
    assert only.execute()["files"]["plots"] == ["fct_cdf.png"] and only.sampler is None
    full = small(text)
    full["output"].update(plots=False, timeseries=True, plot_kinds=["fct_cdf"])
    every = Runner(full, tmp_path / "all")
    every.execute()
    assert every.series is not None and every.series["link_tx_bytes"]
    assert every.series["ev_bytes"] and every.series["cwnd_bytes"]
