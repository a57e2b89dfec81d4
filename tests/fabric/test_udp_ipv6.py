"""Live mode over IPv6, between real sockets, in a network namespace of the test's own.

Loopback outside has only ``::1``, so the test creates a namespace (``ip netns``, root:
the CI user), brings its ``lo`` up with addresses fd00::1 .. fd00::9 and runs everything
in it through ``ip netns exec``: two end points writing and reading back, seen by tshark
with our dissector (IPv6 forbids a zero UDP checksum: every datagram must carry one; the
kernel fills it, and loopback's checksum offload leaves only the pseudo-header sum in the
capture, so its value is not checked), and the conformance catalogue against ``uet serve``
listening on an IPv6 address. The namespace is deleted afterwards; nothing outside it is
touched.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NS = f"uet-v6-{os.getpid()}"
PEER_NET = "fd00::100/120"


def _ip(*args: str) -> None:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, (
        f"'ip {' '.join(args)}' failed ({proc.stderr.strip()}): this test needs root and "
        "iproute2 to create its own network namespace (CI runs as root)")


@pytest.fixture(scope="module")
def netns():
    assert shutil.which("ip"), "iproute2 ('ip') is required to create a network namespace"
    _ip("netns", "add", NS)
    try:
        _ip("netns", "exec", NS, "ip", "link", "set", "lo", "up")
        for i in range(1, 10):
            _ip("netns", "exec", NS, "ip", "-6", "addr", "add", f"fd00::{i}/128", "dev", "lo",
                "nodad")
        # the conformance peer binds many addresses of PEER_NET: local, and bindable
        _ip("netns", "exec", NS, "ip", "-6", "route", "add", "local", PEER_NET, "dev", "lo")
        proc = subprocess.run(["ip", "netns", "exec", NS, "sysctl", "-qw",
                               "net.ipv6.ip_nonlocal_bind=1"], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        yield NS
    finally:
        subprocess.run(["ip", "netns", "del", NS], capture_output=True, timeout=30)


def _in_ns(*cmd: str, timeout: float = 120, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", "netns", "exec", NS, *cmd], capture_output=True, text=True,
                          timeout=timeout, **kw)


NODES = textwrap.dedent("""
    import random, sys, trio
    from uet.fabric.clock import S
    from uet.runtime.udp import UdpNode
    from uet.endpoint.fep import SINK_INDEX, SINK_KEY
    from uet.wire.constants import ReturnCode

    async def main():
        data = random.Random(11).randbytes(48 * 1024)
        async with UdpNode(ip="fd00::5") as a, UdpNode(ip="fd00::6") as b:
            w = await a.host.write("fd00::6", SINK_KEY, 0, data, index=SINK_INDEX,
                                   timeout_ps=10 * S)
            assert w.return_code == ReturnCode.OK, w.return_code
            assert bytes(b.ep.sink[:len(data)]) == data
            r = await a.host.read("fd00::6", SINK_KEY, 0, len(data), index=SINK_INDEX,
                                  timeout_ps=10 * S)
            assert r.data == data
            print("ok", a.counters["tx_datagrams"], b.counters["tx_datagrams"],
                  len(a.ev_ports), a.counters["rx_decode_errors"], b.counters["rx_decode_errors"])

    trio.run(main)
""")


def test_two_endpoints_over_ipv6_with_valid_udp_checksums(netns, tmp_path: Path) -> None:
    tshark = shutil.which("tshark")
    assert tshark, "tshark is required (installed by .ci/run)"
    pcap = tmp_path / "v6.pcapng"
    cap = subprocess.Popen(["ip", "netns", "exec", NS, tshark, "-i", "lo", "-f",
                            "udp port 4793", "-a", "duration:60", "-w", str(pcap)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        while True:  # wait until dumpcap captures ("Capturing on" comes earlier)
            line = cap.stderr.readline()
            assert line, "tshark exited before capturing"
            if "Capture started" in line:
                break
        proc = _in_ns(sys.executable, "-c", NODES, cwd=ROOT)
        time.sleep(0.5)
        cap.send_signal(signal.SIGINT)  # a clean stop: every captured packet is written
        cap.wait(30)
    finally:
        if cap.poll() is None:
            cap.terminate()
            cap.wait(15)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ok, tx_a, tx_b, evs, err_a, err_b = proc.stdout.split()
    assert ok == "ok" and int(tx_a) >= 12 and int(tx_b) >= 12 and int(evs) > 1
    assert err_a == err_b == "0"
    rows = subprocess.run(
        [tshark, "-n", "-r", str(pcap), "-X", f"lua_script:{ROOT / 'tools/wireshark/uet.lua'}",
         "-o", "uet.check_udp_checksum:FALSE",  # partial sums on loopback (docs/fabric.md)
         "-o", "udp.try_heuristic_first:TRUE",  # an EV source port may be another's port
         "-T", "fields", "-E", "separator=|", "-e", "ipv6.src", "-e", "udp.checksum",
         "-e", "uet.pds.type", "-e", "_ws.expert.severity", "-e", "_ws.expert.message"],
        capture_output=True, text=True, timeout=60)
    assert rows.returncode == 0, rows.stderr
    frames = [r.split("|") for r in rows.stdout.splitlines()]
    assert len(frames) >= 24  # 12 WRITE + 12 READ data packets, their ACKs
    for src, checksum, pds_type, severity, message in frames:
        assert src in ("fd00::5", "fd00::6") and pds_type, (src, pds_type)
        assert checksum != "0x0000", checksum
        assert not severity, (severity, message)  # no expert info from our dissector
    assert {int(f[2]) for f in frames} >= {2, 8}  # RUD requests and ACK_CC


def test_conformance_catalogue_over_ipv6(netns, tmp_path: Path) -> None:
    """The whole catalogue against ``uet serve --listen [fd00::1]:4793`` (hpc), the peer on
    addresses of fd00::100/120: every case a single HPC device can take passes."""
    serve = subprocess.Popen(["ip", "netns", "exec", NS, sys.executable, "-m", "uet.cli",
                              "serve", "--listen", "[fd00::1]:4793", "--json", "--setup-out",
                              str(tmp_path / "setup.json")],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        while True:
            line = serve.stdout.readline()
            assert line, f"uet serve exited: {serve.stderr.read()[-2000:]}"
            if line.startswith("ready "):
                break
        proc = _in_ns(sys.executable, "-m", "uet.cli", "conformance", "--dut",
                      "udp:[fd00::1]:4793", "--setup", str(tmp_path / "setup.json"),
                      "--peer-net", PEER_NET, "--json", "r.json", cwd=tmp_path, timeout=300)
    finally:
        serve.terminate()
        serve.communicate(timeout=30)
    data = json.loads((tmp_path / "r.json").read_text())
    failed = [(r["id"], r["why"]) for r in data["results"]
              if r["status"] not in ("pass", "not run")]
    assert proc.returncode == 0 and not failed, failed or proc.stderr[-2000:]
    # every case a single HPC device can take (the rest need an AI Base device or an end
    # point configured otherwise: not run, as over IPv4)
    assert data["summary"]["pass"] >= 200
    assert data["target"].startswith("udp:[fd00::1]:4793") or "fd00::1" in data["target"]
