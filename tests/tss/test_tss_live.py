"""TSS over real loopback UDP, across processes: end points of one secure domain talk; one
without the key (or with another key) is refused, and the refusals are counted.

Addresses: 127.141.N.x with N from the process ID (other live tests use 127.61.N, 127.95.N,
127.100-199 and 127.160-249), so parallel runs do not collide."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import trio

from tests.fabric.helpers import start_ready
from tests.fabric.test_udp import ROOT, TIMEOUT, _stop
from uet.runtime.udp import UdpNode
from uet.ses.errors import SesError

NET = f"127.141.{os.getpid() % 250 + 1}"
KEY = "3f" * 32


def _keyfile(tmp_path, key: str = KEY, job: int = 1) -> str:
    path = tmp_path / f"keys-{key[:4]}-{job}.txt"
    path.write_text(f"# test key file\n7 cluster {key} job={job}\n", encoding="utf-8")
    return str(path)


def _client(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "uet.runtime.udp", *argv],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)


async def test_same_domain_talks_a_third_process_without_the_key_is_refused(tmp_path):
    keys = _keyfile(tmp_path)
    server = await start_ready("-m", "uet.runtime.udp", "--ip", f"{NET}.2", "--tss", keys,
                          "--json")
    try:
        ok = await trio.to_thread.run_sync(lambda: _client(
            "--ip", f"{NET}.3", "--write", f"{NET}.2", "--bytes", "65536", "--tss", keys,
            "--json"))
        assert ok.returncode == 0, ok.stderr
        report = json.loads(ok.stdout.splitlines()[1])
        assert report["equal"] is True
        plain = await trio.to_thread.run_sync(lambda: _client(
            "--ip", f"{NET}.4", "--write", f"{NET}.2", "--bytes", "4096", "--timeout", "3"))
        assert plain.returncode == 1, plain.stdout
        wrong = await trio.to_thread.run_sync(lambda: _client(
            "--ip", f"{NET}.5", "--write", f"{NET}.2", "--bytes", "4096", "--timeout", "3",
            "--tss", _keyfile(tmp_path, key="c4" * 32)))
        assert wrong.returncode == 1, wrong.stdout
    finally:
        out = _stop(server)
    counters = json.loads(out.splitlines()[-1])["counters"]
    assert counters["pds.rx_bytes"] == 65536  # the member's WRITE only: nothing else got in
    assert counters["tss.rx_refused.cleartext"] > 0
    assert counters["tss.rx_refused.auth_fail"] > 0
    assert counters["tss.rx_ok"] >= 32


async def test_uet_serve_tss_against_a_live_node(tmp_path):
    keys = _keyfile(tmp_path, job=0x00ABCD)
    server = await start_ready("-m", "uet.cli", "serve", "--listen", f"{NET}.12:4793",
                          "--tss", keys, "--json")
    try:
        opts = {"job_id": 0x00ABCD, "tss": {"key_file": keys}}
        async with UdpNode(ip=f"{NET}.13", profile="hpc", endpoint_options=opts) as a:
            await a.host.write(f"{NET}.12", 0x1111_0001, 64, b"safe" * 1000, index=1,
                               timeout_ps=TIMEOUT)
            r = await a.host.read(f"{NET}.12", 0x1111_0001, 64, 4000, index=1,
                                  timeout_ps=TIMEOUT)
            assert r.data == b"safe" * 1000
            assert a.ep.stats["tss.rx_ok"] > 0
        async with UdpNode(ip=f"{NET}.14", profile="hpc",
                           endpoint_options={"job_id": 0x00ABCD}) as b:
            try:
                await b.host.write(f"{NET}.12", 0x1111_0001, 0, b"x", index=1,
                                   timeout_ps=2 * 10**12)
                raise AssertionError("a cleartext WRITE reached a secured uet serve")
            except (SesError, TimeoutError):
                pass
    finally:
        out = _stop(server)
    counters = json.loads(out.splitlines()[-1])["counters"]
    assert counters["tss.rx_refused.cleartext"] > 0


def test_uet_serve_tss_refuses_a_key_file_without_the_setups_job(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "uet.cli", "serve", "--listen",
                           f"{NET}.20:4793", "--tss", _keyfile(tmp_path, job=5),
                           "--duration", "1"], capture_output=True, text=True, timeout=30,
                          cwd=ROOT)
    assert proc.returncode == 2
    assert "no secure domain carries the setup's job" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
