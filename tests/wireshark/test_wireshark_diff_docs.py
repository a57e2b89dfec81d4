"""The step-by-step diff workflow of docs/wireshark.md, run as written: two runs of
experiments/degraded-core.toml with one knob changed, ``uet diff --write``, ``uet
wireshark install`` and the tshark filters, in a temporary folder and HOME."""

from __future__ import annotations

import io
import shlex
import subprocess
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
from tshark_json import tshark_binary, tshark_env

from uet.capture.pcapng import read_capture
from uet.cli import main

pytestmark = [pytest.mark.tshark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
MARK = "<!-- tests/wireshark/test_wireshark_diff_docs.py runs the commands of this block -->"


def _commands() -> list[str]:
    doc = (ROOT / "docs" / "wireshark.md").read_text()
    block = doc.split(MARK, 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.strip()]


def test_the_documented_diff_workflow(tmp_path, monkeypatch):
    commands = _commands()
    assert [c.split()[0] for c in commands] == ["uet"] * 4 + ["tshark"] * 3
    (tmp_path / "experiments").symlink_to(ROOT / "experiments")
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(home))
    outputs = []
    for line in commands:
        argv = shlex.split(line)
        if argv[0] == "uet":
            out, err = io.StringIO(), io.StringIO()
            with redirect_stdout(out), redirect_stderr(err):
                quiet = ["--no-progress", "--set", "output.plots=false"]  # same packets
                rc = main(argv[1:] + (quiet if argv[1] == "run" else []))
            assert rc == (1 if argv[1] == "diff" else 0), (line, err.getvalue())
        else:
            proc = subprocess.run([tshark_binary(), *argv[1:]], capture_output=True,
                                  text=True, timeout=300, env=tshark_env(home))
            err = io.StringIO("\n".join(ln for ln in proc.stderr.splitlines()
                                        if "Running as user" not in ln))
            assert proc.returncode == 0 and not err.getvalue(), (line, err.getvalue())
            out = io.StringIO(proc.stdout)
        outputs.append(out.getvalue())
    run_a, run_b, report, install, moved, only_a, ar = outputs
    # the report starts with the counts and the summary of each side
    lines = report.splitlines()
    assert "moved to another path" in lines[1]
    assert any(ln.startswith("  on agg0.p2<->core0.p0") for ln in lines)
    assert any(ln.startswith("fields that differ most") for ln in lines)
    # the installed copy is the one tshark uses: the documented commands need no -X
    assert "tshark loads it at start-up" in install
    # moved packets: A's copy and B's copy on different tapped links
    sides = {line.split()[2] for line in moved.splitlines()}
    assert {s[:2] for s in sides} == {"A:", "B:"}
    assert sides <= {"A:agg0.p2<->core0.p0", "A:agg0.p3<->core1.p0",
                     "B:agg0.p2<->core0.p0", "B:agg0.p3<->core1.p0", "A:h13", "B:h13"}
    assert all("[moved to another path]" in line for line in moved.splitlines())
    # only in A: every line is an A packet with its comment
    rows = [r.split("\t") for r in only_a.splitlines()]
    assert rows and all(r[1].startswith("A:") and r[2].startswith("uet-diff: only in A | A#")
                        for r in rows)
    # the AR pairs: each names the other as its peer
    pairs = {int(r.split("\t")[0]): r.split("\t") for r in ar.splitlines()}
    assert pairs
    for num, (_n, iface, peer) in pairs.items():
        if peer and int(peer) in pairs:
            assert int(pairs[int(peer)][2]) == num and pairs[int(peer)][1][0] != iface[0]
    merged = list(read_capture(tmp_path / "runs" / "diff.pcapng"))
    a_frames = sum(1 for _ in read_capture(tmp_path / "runs" / "oblivious" / "capture.pcapng"))
    assert sum(1 for cf in merged if cf.if_name.startswith("A:")) == a_frames
