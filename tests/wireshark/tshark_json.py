"""Run tshark with the bundled dissector and flatten its JSON output per frame."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from uet.wireshark import plugin_path

TSHARK_MISSING = (
    "tshark is not installed, and the Wireshark dissector tests need it: install it "
    "(Debian/Ubuntu: apt-get install tshark; .ci/run does this) and run the tests again."
)


def tshark_binary() -> str:
    path = shutil.which("tshark")
    if not path:
        pytest.fail(TSHARK_MISSING, pytrace=False)
    return path


@dataclass
class Expert:
    abbrev: str
    message: str
    severity: int


@dataclass
class Dissected:
    """What tshark showed for one frame: every ``uet.*`` field (list of values as tshark
    prints them, in tree order) and every expert info of the frame."""

    fields: dict[str, list[str]] = field(default_factory=dict)
    experts: list[Expert] = field(default_factory=list)
    info: str = ""

    def one(self, name: str) -> str:
        values = self.fields.get(name)
        assert values, f"{name} not shown"
        assert len(values) == 1, f"{name} shown {len(values)} times: {values}"
        return values[0]


_EMPTY_HOME: str | None = None


def tshark_env(home: str | Path | None = None) -> dict[str, str]:
    """The environment for a tshark run: HOME is ``home`` (default: an empty folder of
    this process), so that no plugin or profile of the real user is loaded."""
    global _EMPTY_HOME
    if home is None:
        if _EMPTY_HOME is None:
            _EMPTY_HOME = tempfile.mkdtemp(prefix="uet-tshark-home-")
        home = _EMPTY_HOME
    env = {k: v for k, v in os.environ.items()
           if k not in ("XDG_CONFIG_HOME", "WIRESHARK_CONFIG_DIR")}
    env["HOME"] = str(home)
    return env


def run_tshark(capture: Path, *, prefs: dict[str, str] | None = None,
               extra: list[str] | None = None, plugin: bool = True,
               home: str | Path | None = None) -> str:
    """tshark's stdout for ``capture`` (with the bundled dissector unless ``plugin`` is
    false; HOME as :func:`tshark_env`); fails on a non-zero exit or anything on stderr."""
    cmd = [tshark_binary(), "-n"]
    if plugin:
        cmd += ["-X", f"lua_script:{plugin_path()}"]
    for key, value in (prefs or {}).items():
        cmd += ["-o", f"{key}:{value}"]
    cmd += ["-r", str(capture)] + (extra or [])
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                          env=tshark_env(home))
    if proc.returncode != 0:
        raise AssertionError(f"tshark failed ({proc.returncode}): {proc.stderr}")
    err = "\n".join(line for line in proc.stderr.splitlines()
                    if "Running as user" not in line and line.strip())
    assert not err, f"tshark wrote to stderr: {err}"
    return proc.stdout


def _walk(node, out: Dissected) -> None:
    if isinstance(node, list):
        for item in node:
            _walk(item, out)
        return
    if not isinstance(node, dict):
        return
    if "_ws.expert.message" in node:
        abbrevs = [k for k in node if not k.startswith("_ws.expert.")]
        out.experts.append(Expert(abbrevs[0] if abbrevs else "", node["_ws.expert.message"],
                                  int(node.get("_ws.expert.severity", 0))))
        return
    for key, value in node.items():
        if key.startswith("uet") and not key.endswith("_tree") and not isinstance(value, dict):
            values = value if isinstance(value, list) else [value]
            out.fields.setdefault(key, []).extend(str(v) for v in values)
        else:
            _walk(value, out)


def dissect(capture: Path, *, prefs: dict[str, str] | None = None,
            info: bool = False) -> list[Dissected]:
    """One :class:`Dissected` per frame of ``capture`` (one tshark run, two with ``info``:
    the Info column is not part of tshark's JSON)."""
    text = run_tshark(capture, prefs=prefs, extra=["-T", "json", "--no-duplicate-keys"])
    frames = json.loads(text)
    infos = [""] * len(frames)
    if info:
        infos = run_tshark(capture, prefs=prefs,
                           extra=["-T", "fields", "-e", "_ws.col.Info"]).splitlines()
    result = []
    for pkt, line in zip(frames, infos, strict=True):
        d = Dissected(info=line)
        _walk(pkt["_source"]["layers"], d)
        result.append(d)
    return result
