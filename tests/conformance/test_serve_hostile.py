"""``uet serve`` under a hostile peer on real loopback UDP: thousands of mutated, cut and
replayed UET datagrams from many source ports, then the catalogue's establishment and
operation cases still pass against the same process, which shuts down cleanly."""

from __future__ import annotations

import importlib.util
import json
import random
import socket
import sys
import time
from pathlib import Path

from helpers import PEER_NET, SERVE_HPC, Server, uet

ROOT = Path(__file__).resolve().parents[2]


def _payloads(seed: int, n: int) -> list[bytes]:
    """The hostile frames of tests/fep/test_fep_hostile.py (a real HPC exchange, mutated,
    cut, replayed), as UDP payloads: what follows Ethernet + IPv4 + UDP (42 bytes)."""
    sys.path.insert(0, str(ROOT / "tests" / "fep"))  # its fep_wire helper
    spec = importlib.util.spec_from_file_location(
        "fep_hostile", ROOT / "tests" / "fep" / "test_fep_hostile.py")
    hostile = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hostile)
    frames = hostile._record_exchange()
    rng = random.Random(seed)
    return [hostile._hostile(rng, frames)[42:] for _ in range(n)]


def test_serve_survives_hostile_datagrams_and_still_passes(tmp_path: Path) -> None:
    hpc = Server(SERVE_HPC, "--setup-out", str(tmp_path / "setup.json"))
    try:
        payloads = _payloads(seed=9, n=3000)
        socks = []
        for port in (40001, 40002, 40003):
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.bind((PEER_NET.split("/")[0][:-1] + "7", port))
            socks.append(s)
        for i, p in enumerate(payloads):
            socks[i % 3].sendto(p, (SERVE_HPC, 4793))
            if i % 200 == 199:
                time.sleep(0.01)  # let the server keep up (loopback buffers are finite)
        for s in socks:
            s.close()
        proc = uet("conformance", "--dut", f"udp:{SERVE_HPC}:4793", "--setup",
                   str(tmp_path / "setup.json"), "--peer-net", PEER_NET, "--json", "r.json",
                   "-k", "PDS-EST or SES-OP", cwd=tmp_path, timeout=300)
    finally:
        counters = hpc.stop()  # SIGTERM: exits 0 with its counters (asserted in stop())
    data = json.loads((tmp_path / "r.json").read_text())
    failed = [(r["id"], r["why"]) for r in data["results"]
              if r["status"] not in ("pass", "not run")]
    assert proc.returncode == 0 and not failed, failed
    assert data["summary"]["pass"] >= 30
    assert counters["udp.rx_datagrams"] >= 2500
    assert counters["driver.rx_decode_errors"] > 100
