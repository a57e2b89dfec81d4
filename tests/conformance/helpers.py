"""Shared helpers of the conformance tests: loopback addresses per test process, servers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

#: a /24 of loopback per test process, so two suites running at once do not collide
_NET = 64 + os.getpid() % 150
SERVE_HPC = f"127.89.{_NET}.1"
SERVE_AI_BASE = f"127.89.{_NET}.2"
PEER_NET = f"127.{100 + _NET % 100}.0.0/22"


def uet(*args: str, cwd: Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run the ``uet`` CLI of this interpreter."""
    return subprocess.run([sys.executable, "-m", "uet.cli", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=timeout)


class Server:
    """``uet serve`` in a subprocess; ``stop()`` sends SIGTERM and returns its output."""

    def __init__(self, ip: str, *extra: str) -> None:
        self.ip = ip
        self.proc = subprocess.Popen([sys.executable, "-m", "uet.cli", "serve", "--listen",
                                      f"{ip}:4793", "--json", *extra],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)
        self.lines: list[str] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            self.lines.append(line)
            if line.startswith("ready "):
                return
        err = self.proc.stderr.read() if self.proc.poll() is not None else ""
        self.proc.kill()
        pytest.fail(f"uet serve on {ip} did not start: {''.join(self.lines)} {err}")

    @property
    def setup(self) -> dict:
        return json.loads(self.lines[0])["setup"]

    def stop(self) -> dict:
        self.proc.terminate()
        out, err = self.proc.communicate(timeout=30)
        assert self.proc.returncode == 0, err
        last = [json.loads(x) for x in out.splitlines() if x.startswith("{")]
        return last[-1]["counters"]
