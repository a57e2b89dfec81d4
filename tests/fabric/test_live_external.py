"""External implementations as hosts of the live fabric: ``external = "udp:IP:PORT"``.

A real ``uet serve`` process is host 3 behind a lossy, trimming switch: a fabric host
writes into its well-known region and reads the bytes back through the switch. Then the
other way: an external live node process (``python -m uet.runtime.udp --write``) writes
into a fabric host's sink and reads back through the fabric. Bounded in real time; no
timed assertions.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import trio

from tests.fabric.helpers import start_ready
from uet.fabric.clock import MS
from uet.runtime.live import LiveFabric

ROOT = Path(__file__).resolve().parents[2]
B = 100 + os.getpid() % 60
BLOCK = f"127.{B}.0.0/16"
DILATION = 4000.0
#: uet serve's well-known setup (docs/conformance.md): profile hpc, job 0xABCD, region
#: "rma" at index 1 with key 0x11110001
SERVE_JOB, SERVE_INDEX, SERVE_KEY = 0x00ABCD, 1, 0x1111_0001


def test_uet_serve_as_a_host_behind_a_lossy_switch() -> None:
    serve_ip = f"127.{B}.9.1"
    topo = {"kind": "star", "hosts": 4,
            "impairments": [{"at": "sw0.p3", "direction": "tx", "loss": 0.02, "seed": 3},
                            {"at": "h0", "direction": "tx", "loss": 0.02, "seed": 4}],
            "external": {3: f"udp:{serve_ip}:4793"}}
    data = bytes(range(256)) * 256  # 64 KiB
    state: dict = {}

    async def main() -> None:
        proc = await start_ready("-m", "uet.cli", "serve", "--listen", f"{serve_ip}:4793")
        try:
            with trio.fail_after(120):
                async with LiveFabric(topo, seed=1, dilation=DILATION, address_block=BLOCK,
                                      profile="hpc",
                                      endpoint_options={"job_id": SERVE_JOB}) as fab:
                    assert fab.host_ip(3) == serve_ip
                    h0 = fab.ep(0)
                    w = await h0.write(3, SERVE_KEY, 64, data, index=SERVE_INDEX,
                                       timeout_ps=400 * MS)
                    assert w is not None  # a failed WRITE raises SesError
                    r = await h0.read(3, SERVE_KEY, 64, len(data), index=SERVE_INDEX,
                                      timeout_ps=400 * MS)
                    state["read"] = r.data
                    state["c"] = fab.counters()
        finally:
            proc.terminate()
            state["serve"] = await trio.to_thread.run_sync(lambda: proc.communicate(timeout=20))

    trio.run(main)
    assert state["read"] == data
    c = state["c"]
    edge = c["live"]["external"]["h3"]
    assert edge["address"] == f"udp:{serve_ip}:4793"
    assert edge["to_external"] > 0 and edge["from_external"] > 0
    assert 0 < edge["sent"] <= edge["to_external"]  # the last few may still be queued
    assert "drop.no_source_socket" not in edge
    # the external host's frames went through the switch like any host's
    assert c["port"]["sw0.p3"]["tx_frames"] >= edge["to_external"]
    assert c["nic"]["h3"]["tx_frames"] <= edge["from_external"]
    lossy = c["link"]["sw0.p3->h3"]
    in_flight = lossy["tx_frames"] - lossy["delivered"] - lossy.get("drop.loss", 0)
    assert 0 <= in_flight <= 16  # on the cable, or behind a late core
    assert "uet serve" in state["serve"][0]


def test_external_node_writes_into_a_fabric_host() -> None:
    """The external host initiates: a live node process writes 64 KiB into fabric host 1's
    sink through the switch and reads them back (it exits 0 only if they are equal)."""
    ext_ip = f"127.{B}.9.2"
    topo = {"kind": "star", "hosts": 3, "external": {2: f"udp:{ext_ip}:4793"}}
    state: dict = {}

    async def main() -> None:
        with trio.fail_after(120):
            async with LiveFabric(topo, seed=2, dilation=DILATION, address_block=BLOCK,
                                  endpoint_options={"sink_bytes": 1 << 20}) as fab:
                target = fab.host_ip(1)
                proc = await trio.to_thread.run_sync(lambda: subprocess.run(
                    [sys.executable, "-m", "uet.runtime.udp", "--ip", ext_ip, "--write",
                     target, "--bytes", "65536", "--timeout", "60", "--json"],
                    capture_output=True, text=True, cwd=ROOT, timeout=100))
                state["proc"] = proc
                state["c"] = fab.counters()
                state["rx"] = fab.endpoint(1).stats.get("pds.rx_packets", 0)

    trio.run(main)
    proc = state["proc"]
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == f"ready udp:{ext_ip}:4793"
    report = json.loads(lines[1])
    assert report["equal"] is True and report["write_bytes"] == 65536
    assert state["rx"] >= 16  # 64 KiB of WRITE packets reached host 1's PDS
    edge = state["c"]["live"]["external"]["h2"]
    assert edge["from_external"] >= 16 and edge["to_external"] >= 16
