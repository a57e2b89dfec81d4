"""The ``uet`` command with bad input or a closed pipe: one clear line, never a traceback.

Each test is a mistake a new user made (issue 19): the message names the option or key and
what is allowed, the exit status is 2, and nothing half-done is left behind.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from uet.cli import EXIT_PIPE, is_user_error, main
from uet.conformance.setup import SetupError
from uet.conformance.udp_io import parse_hostport
from uet.experiments.config import ConfigError, load_config

ROOT = Path(__file__).resolve().parents[1]
CAPTURE = ROOT / "captures" / "rud_loss.pcapng"
#: loopback addresses of this test process
NET = f"127.95.{20 + os.getpid() % 200}"


def _one_line_error(capsys, argv: list[str], *needles: str) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    for n in needles:
        assert n in err, (n, err)
    return err


# ------------------------------------------------------------------ closed pipes


@pytest.mark.parametrize("argv", [
    ["profiles", "--json"], ["profiles"], ["conformance", "--list"], ["run", "--check"],
    ["decode", str(CAPTURE)], ["decode", "--json", str(CAPTURE)], ["--help"],
    ["diff", str(CAPTURE), str(CAPTURE)],
], ids=lambda a: " ".join(a[:2]))
def test_closed_output_pipe_ends_quietly(argv):
    """``uet ... | head``: the reader is gone before the command writes (deterministic:
    the pipe is closed before the child starts writing)."""
    proc = subprocess.Popen([sys.executable, "-m", "uet", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=ROOT)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    proc.wait(timeout=120)
    assert err == "", err
    assert proc.returncode in (0, 1, EXIT_PIPE)  # rich's own handler exits 1


# ------------------------------------------------------------------ uet serve


@pytest.mark.parametrize("args, needles", [
    (["--set", "rto_us=abc"], ["--set rto_us=abc", "rto_us: must be an integer", "'abc'"]),
    (["--set", "mp_range=1.5"], ["--set mp_range=1.5", "mp_range: must be an integer"]),
    (["--set", "mp_range=100"], ["mp_range: must be a multiple of 128"]),
    (["--set", "dscp_control=99"], ["dscp_control: must be in [0, 63]"]),
    (["--set", "nosuch=1"], ["unknown key 'nosuch'", "allowed: ack_every_bytes"]),
    (["--set", "rto_us"], ["expected KEY=VALUE"]),
    (["--profile", "nosuch"], ["--profile nosuch", "must be one of ai-base, ai-full, hpc"]),
])
def test_serve_bad_setup_values(capsys, args, needles):
    err = _one_line_error(capsys, ["serve", "--listen", f"{NET}.1:4793", "--duration", "0",
                                   *args], *needles)
    if "--profile" in args:
        assert "--set" not in err  # the option that brought the value is blamed


def test_serve_listens_on_a_host_name():
    assert parse_hostport("localhost:4793", 4793) == ("127.0.0.1", 4793)
    assert parse_hostport("[::1]:9", 4793) == ("::1", 9)
    with pytest.raises(ValueError, match="not an IPv6 address"):
        parse_hostport("[localhost]:9", 4793)


# ------------------------------------------------------------------ uet run


def test_run_taps_a_link_the_topology_lacks(capsys, tmp_path):
    out = tmp_path / "run"
    _one_line_error(capsys, ["run", "--set", "topology.kind=star", "--set", "impairments=[]",
                             "--out", str(out), "--no-progress"],
                    "capture.links[0]", "no link 'core0.p0' in this star topology",
                    "allowed: h0<->sw0.p0")
    assert not out.exists()  # nothing half-written


def test_run_impairment_selecting_nothing_is_a_config_error(capsys, tmp_path):
    _one_line_error(capsys, ["run", "--set", "topology.kind=star", "--out",
                             str(tmp_path / "r"), "--no-progress"],
                    "impairments[0].match: selects no link")


@pytest.mark.parametrize("jobs", ["0", "-3", "two"])
def test_run_jobs_must_be_positive(capsys, jobs):
    with pytest.raises(SystemExit) as exc:
        main(["run", "--sweep", "experiment.seed=1,2", "--jobs", jobs, "--check"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "argument --jobs" in err and "is not a positive integer" in err


def test_profile_path_from_set_is_relative_to_the_working_directory(tmp_path, monkeypatch):
    (tmp_path / "profiles").mkdir()
    mine = tmp_path / "profiles" / "mine.toml"
    mine.write_text('[profile]\nextends = "hpc"\nname = "mine"\ntitle = "Mine"\n')
    monkeypatch.chdir(tmp_path)
    cfg = load_config(None, ["transport.profile=profiles/mine.toml"])
    assert cfg["transport"]["profile"] == str(mine)
    with pytest.raises(ConfigError, match=r"--set transport.profile=profiles/none.toml.*"
                                          r"no such profile file"):
        load_config(None, ["transport.profile=profiles/none.toml"])


def test_paths_in_an_experiment_file_are_relative_to_the_file(tmp_path, monkeypatch):
    exp = tmp_path / "exp"
    exp.mkdir()
    prof = tmp_path / "hpc-like.toml"
    prof.write_text('[profile]\nextends = "hpc"\nname = "hpc-like"\ntitle = "x"\n')
    (exp / "perm.cm").write_text("Nodes 2\nConnections 1\n0->1 id 1 start 0 size 4096\n")
    (exp / "e.toml").write_text('[transport]\nprofile = "../hpc-like.toml"\n'
                                '[traffic]\npattern = "cm_file"\nfile = "perm.cm"\n')
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    cfg = load_config("../exp/e.toml")
    assert cfg["transport"]["profile"] == str(prof)
    assert cfg["traffic"]["file"] == str(exp / "perm.cm")
    # the same key given on the command line is the user's path, from the cwd
    (elsewhere / "perm.cm").write_text((exp / "perm.cm").read_text())
    cfg = load_config("../exp/e.toml", ["traffic.file=perm.cm"])
    assert cfg["traffic"]["file"] == str(elsewhere / "perm.cm")


# ------------------------------------------------------------------ uet diff


def test_diff_unknown_interface_is_an_error(capsys):
    _one_line_error(capsys, ["diff", "--iface", "nosuch", str(CAPTURE), str(CAPTURE)],
                    "--iface nosuch: no such interface in either capture",
                    "interfaces: h1")
    assert main(["diff", "--iface", "h1", str(CAPTURE), str(CAPTURE)]) == 0


# ------------------------------------------------------------------ uet conformance


def test_conformance_dut_by_host_name_and_unreachable_device(capsys):
    # a UDP port of this machine where nothing listens (bound, then released)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    err = _one_line_error(capsys, ["conformance", "--dut", f"udp:localhost:{port}",
                                   "--peer-net", f"{NET}.0/24", "--probe-timeout", "0.3",
                                   "-k", "PDS-EST-001"],
                          f"udp:127.0.0.1:{port}: no answer within 0.3 s")
    assert "--probe-timeout" in err


def test_conformance_refuses_a_dut_without_scheme(capsys):
    _one_line_error(capsys, ["conformance", "--dut", "localhost:4793"],
                    "expected udp:HOST:PORT")


# ------------------------------------------------------------------ the API


def test_fabric_endpoint_options_take_mode_names():
    from uet.runtime.fabric import Fabric
    from uet.wire.constants import DeliveryMode

    fab = Fabric({"kind": "star", "hosts": 2}, profile="hpc",
                 endpoint_options={"mode": "ROD"})
    assert fab.endpoint(0).mode is DeliveryMode.ROD
    fab.close()
    with pytest.raises(ValueError, match=r"mode='XYZ': allowed RUD, ROD, RUDI, UUD"):
        Fabric({"kind": "star", "hosts": 2}, endpoint_options={"mode": "XYZ"})


# ------------------------------------------------------------------ the safety net


def test_project_errors_are_one_line_and_bugs_keep_their_traceback(capsys, monkeypatch):
    import uet.commands.profiles as cmd

    assert is_user_error(SetupError("x")) and is_user_error(ConfigError("a.b", "bad"))
    assert not is_user_error(ValueError("x")) and not is_user_error(KeyError("x"))
    from uet.conformance.peer import ConformanceFailure

    assert not is_user_error(ConformanceFailure("x"))

    def boom(args):
        raise SetupError("setup.json: rto_us: must be > 0,\n got 0")

    monkeypatch.setattr(cmd, "run", boom)
    _one_line_error(capsys, ["profiles"], "uet profiles: setup.json: rto_us: must be > 0, got 0")
    monkeypatch.setenv("UET_TRACEBACK", "1")
    with pytest.raises(SetupError):
        main(["profiles"])

    def bug(args):
        raise KeyError("internal")

    monkeypatch.setattr(cmd, "run", bug)
    with pytest.raises(KeyError):
        main(["profiles"])


def test_profiles_json_is_whole_when_read(capsys):
    assert main(["profiles", "--json"]) == 0
    assert sorted(json.loads(capsys.readouterr().out)) == ["ai-base", "ai-full", "hpc"]


# ------------------------------------------------------------------ --log-level

#: the built-in experiment, small and without plots
QUICK_RUN = ["--set", "traffic.size=64KiB", "--set", "output.plots=false", "--set",
             "output.timeseries=false", "--no-progress"]


def test_event_log_levels():
    from uet.fabric.eventlog import event_level, level_filter

    assert event_level({"event": "pdc_close", "error": True}) == "error"
    assert event_level({"event": "pdc_close", "error": False}) == "info"
    assert event_level({"event": "retransmit"}) == "warning"
    assert event_level({"event": "something_new"}) == "debug"
    lines: list[str] = []
    show = level_filter("warning", lines.append)
    for kind in ("flow_failed", "trim", "pdc_open", "something_new"):
        show({"t_ps": 1_500_000, "event": kind, "host": "h1"})
    assert [ln.split()[3] for ln in lines] == ["flow_failed", "trim"]
    assert lines[0].split()[:3] == ["1.500", "µs", "error"] and "host=h1" in lines[0]
    with pytest.raises(ValueError, match="allowed off, error, warning, info, debug"):
        level_filter("verbose", print)


@pytest.mark.parametrize("level, shown, hidden", [
    ("warning", {"trim", "nack_tx", "nack_rx", "retransmit"}, {"pdc_open", "flow_done"}),
    ("info", {"trim", "pdc_open", "pdc_close", "flow_start", "flow_done"}, set()),
    ("error", set(), {"trim", "pdc_open"}),
])
def test_run_log_level_prints_the_event_log(capsys, tmp_path, level, shown, hidden):
    assert main(["run", *QUICK_RUN, "--log-level", level, "--out", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    kinds = {ln.split()[3] for ln in err.splitlines() if " µs " in ln}
    assert shown <= kinds and not hidden & kinds, kinds
    assert not (tmp_path / "events.jsonl").exists()  # the terminal view needs no file


def test_run_without_log_level_prints_no_events(capsys, tmp_path):
    assert main(["run", *QUICK_RUN, "--out", str(tmp_path)]) == 0
    assert " µs " not in capsys.readouterr().err


def test_serve_log_level_shows_the_served_end_point(tmp_path):
    ip = f"{NET}.3"
    serve = subprocess.Popen([sys.executable, "-m", "uet", "serve", "--listen", f"{ip}:4793",
                              "--duration", "30", "--log-level", "info"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert serve.stdout.readline()  # the banner, then "ready ..."
        for line in serve.stdout:
            if line.startswith("ready "):
                break
        assert main(["conformance", "--dut", f"udp:{ip}:4793", "--peer-net",
                     f"{NET}.128/25", "-k", "PDS-EST-001", "--capture-dir",
                     str(tmp_path)]) == 0
    finally:
        serve.terminate()  # a clean stop on SIGTERM
        _out, err = serve.communicate(timeout=60)
    kinds = {ln.split()[3] for ln in err.splitlines() if " µs " in ln}
    assert {"pdc_open"} <= kinds, err[-2000:]
