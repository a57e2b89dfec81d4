"""``uet run --live``: the same experiment files and results in real time (uet.runtime.live).

Bounded in real time (dilation set, no drain); nothing timed is asserted.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from uet.capture.pcapng import read_capture
from uet.cli import main as uet_main
from uet.experiments.config import parse_config
from uet.experiments.results import validate_results
from uet.experiments.runner import run_experiment
from uet.wire.codec import decode_frame
from uet.wireshark import plugin_path

BLOCK = f"127.{40 + os.getpid() % 60}.0.0/16"
#: 4 hosts on one switch, an incast (trims and ECN marks at sw0.p3: 64 KiB queues, so it
#: trims whatever the schedule), 1% loss on h1's uplink
SMALL = f"""
[experiment]
name = "live-small"
seed = 3
drain = false

[topology]
kind = "star"
hosts = 4
queue_bytes = "64KiB"

[[impairments]]
match = ["h1"]
direction = "up"
loss = 0.01

[traffic]
pattern = "incast"
size = "256KiB"

[capture]
ifaces = ["h0", "sw0.p3"]

[output]
progress = false
timeseries = true

[live]
enabled = true
dilation = 10000.0
address_block = "{BLOCK}"
"""


def test_live_run_same_files_same_results(tmp_path: Path) -> None:
    res = run_experiment(parse_config(SMALL), tmp_path)
    validate_results(res)
    run = res["run"]
    assert run["completed"] and run["stop_reason"] == "done"
    live = run["live"]
    assert live["backend"] == "udp" and live["dilation"] == 10000.0
    assert live["calibration"] is None and live["behind"]["wire_losses"] == 0
    s = res["summary"]
    assert s["messages_delivered"] == s["flows"] == 3
    assert s["duplicates_delivered"] == 0
    assert s["trims"] > 0 and s["ecn_marks"] > 0
    assert set(s["drops_by_reason"]) <= {"loss"}
    assert {"capture", "timeseries", "plots"} <= set(res["files"])
    # the pcapng taps decode as UET (frames as the emulated interfaces saw them)
    tshark = shutil.which("tshark")
    assert tshark, "tshark is required"
    out = subprocess.run([tshark, "-r", str(tmp_path / "capture.pcapng"), "-X",
                          f"lua_script:{plugin_path()}", "-T", "fields", "-e",
                          "frame.interface_name", "-Y", "uet"], capture_output=True,
                         text=True, timeout=120)
    names = out.stdout.split()
    assert set(names) == {"h0", "sw0.p3"} and len(names) > 100, out.stderr[-300:]


def test_run_live_flag_and_what_live_mode_refuses(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    exp = tmp_path / "small.toml"
    exp.write_text(SMALL.replace("enabled = true", "enabled = false"), encoding="utf-8")
    # over native IP (the entropy header after IP, no UDP) for once: the live fabric's
    # switches hash and trim it as the virtual ones do
    code = uet_main(["run", str(exp), "--live", "--out", str(tmp_path / "o"),
                     "--set", 'capture.ifaces=["h3"]', "--set", "output.plots=false",
                     "--set", "transport.encap=native-ip"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "live (real time)" in out and "udp, 1/10,000" in out
    doc = json.loads((tmp_path / "o" / "results.json").read_text())
    assert doc["experiment"]["config"]["live"]["enabled"] is True
    assert doc["summary"]["messages_delivered"] == 3
    frames = [decode_frame(cf.data, udp_port=None, ip_proto=253)
              for cf in read_capture(tmp_path / "o" / "capture.pcapng")]
    assert len(frames) > 100 and {f.encap for f in frames} == {"ip"}
    code = uet_main(["run", str(exp), "--live", "--set", "transport.stack=roce"])
    _, err = capsys.readouterr()
    assert code != 0 and len(err.strip().splitlines()) == 1
    assert "transport.stack" in err and "live mode runs the UET stack" in err
    code = uet_main(["run", str(exp), "--live", "--set", "live.backend=tcp"])
    _, err = capsys.readouterr()
    assert code != 0 and "live.backend" in err and "udp, veth" in err
    # an external host: the Python API's, named as such (not "unknown key")
    code = uet_main(["run", str(exp), "--live", "--set",
                     "topology.external={3 = 'udp:127.0.0.1:4793'}"])
    _, err = capsys.readouterr()
    assert code != 0 and len(err.strip().splitlines()) == 1, err
    assert "topology.external" in err and "unknown key" not in err
    assert "audits it at the receiving one" in err and "LiveFabric(topology, externals=" in err


def test_virtual_config_has_no_live_table() -> None:
    """The [live] table is left out unless named, so virtual runs' results.json is what
    it was before live mode existed."""
    cfg = parse_config("[experiment]\nname = 'x'\n")
    assert "live" not in cfg
    cfg = parse_config("[live]\ndilation = 100.0\n")
    assert cfg["live"] == {"enabled": False, "dilation": 100.0, "backend": "udp",
                           "address_block": None}
