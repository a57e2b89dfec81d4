"""Native-IP UET (ref 1.3) in live mode: raw IP sockets on loopback (as root), in one
process and across processes, and what tshark sees on lo with the bundled dissector.

Addresses: 127.62.N.x with N from the process ID (other live tests use 127.61.N.x)."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from uet.endpoint.fep import SINK_INDEX, SINK_KEY
from uet.fabric.clock import S
from uet.runtime.udp import UdpNode
from uet.wire.constants import ReturnCode

ROOT = Path(__file__).resolve().parents[2]
NET = f"127.62.{os.getpid() % 250 + 1}"
TIMEOUT = 10 * S


async def test_write_read_over_native_ip_between_live_nodes() -> None:
    data = random.Random(11).randbytes(64 * 1024)
    async with UdpNode(ip=f"{NET}.1", encap="native-ip") as a, \
            UdpNode(ip=f"{NET}.2", encap="native-ip") as b:
        w = await a.host.write(f"{NET}.2", SINK_KEY, 0, data, index=SINK_INDEX,
                               timeout_ps=TIMEOUT)
        assert w.return_code == ReturnCode.OK and bytes(b.ep.sink[:len(data)]) == data
        r = await a.host.read(f"{NET}.2", SINK_KEY, 0, len(data), index=SINK_INDEX,
                              timeout_ps=TIMEOUT)
        assert r.data == data
        assert a.counters["tx_datagrams"] >= 17 and b.counters["rx_datagrams"] >= 17
        assert a.counters.get("rx_malformed", 0) == 0 and a.ev_ports == []
        # a node speaking UDP does not hear them, nor they it: another protocol
        async with UdpNode(ip=f"{NET}.3") as c:
            with pytest.raises(TimeoutError):
                await c.host.write(f"{NET}.2", SINK_KEY, 0, b"x" * 64, index=SINK_INDEX,
                                   timeout_ps=S // 5)


async def test_native_ip_of_another_protocol_number() -> None:
    async with UdpNode(ip=f"{NET}.4", encap="native-ip", ip_proto=200) as a, \
            UdpNode(ip=f"{NET}.5", encap="native-ip", ip_proto=200):
        r = await a.host.write(f"{NET}.5", SINK_KEY, 0, b"proto 200" * 100,
                               index=SINK_INDEX, timeout_ps=TIMEOUT)
        assert r.return_code == ReturnCode.OK


def test_two_processes_over_native_ip() -> None:
    server = subprocess.Popen([sys.executable, "-m", "uet.runtime.udp", "--ip", f"{NET}.6",
                               "--encap", "native-ip", "--json"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert server.stdout.readline().strip() == f"ready ip:{NET}.6 proto 253"
        client = subprocess.run([sys.executable, "-m", "uet.runtime.udp", "--ip", f"{NET}.7",
                                 "--encap", "native-ip", "--write", f"{NET}.6", "--bytes",
                                 "100000", "--json"], capture_output=True, text=True,
                                timeout=60, cwd=ROOT)
        assert client.returncode == 0, client.stderr
        report = json.loads(client.stdout.splitlines()[1])
        assert report["equal"] is True and report["write_bytes"] == 100000
    finally:
        server.terminate()
        out, err = server.communicate(timeout=15)
    assert server.returncode == 0, err
    counters = json.loads(out.splitlines()[-1])["counters"]
    assert counters["pds.rx_bytes"] == 100000  # the WRITE; the READ requests carry none
    bad = subprocess.run([sys.executable, "-m", "uet.runtime.udp", "--ip-proto", "17",
                          "--encap", "native-ip"], capture_output=True, text=True, timeout=30)
    assert bad.returncode == 2 and "--ip-proto 17" in bad.stderr


@pytest.mark.tshark
async def test_tshark_sees_native_ip_uet_on_lo(tmp_path) -> None:
    """tshark -i lo -f 'ip proto 253': the live nodes' packets are IP protocol 253, no UDP,
    the entropy header then PDS/SES, dissected by uet.lua without expert infos."""
    tshark = shutil.which("tshark")
    assert tshark, "tshark is required (installed by .ci/run)"
    out = tmp_path / "lo.pcapng"
    cap = subprocess.Popen([tshark, "-i", "lo", "-f", f"ip proto 253 and net {NET}.0/24",
                            "-a", "duration:2", "-w", str(out)], stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True)
    try:
        with trio.fail_after(15):
            while True:
                line = await trio.to_thread.run_sync(cap.stderr.readline)
                assert line, "tshark exited before capturing"
                if "Capture started" in line:
                    break
        async with UdpNode(ip=f"{NET}.8", encap="native-ip") as a, \
                UdpNode(ip=f"{NET}.9", encap="native-ip"):
            data = random.Random(5).randbytes(16 * 1024)
            await a.host.write(f"{NET}.9", SINK_KEY, 0, data, index=SINK_INDEX,
                               timeout_ps=TIMEOUT)
            r = await a.host.read(f"{NET}.9", SINK_KEY, 0, len(data), index=SINK_INDEX,
                                  timeout_ps=TIMEOUT)
            assert r.data == data
        await trio.to_thread.run_sync(lambda: cap.wait(15))
    finally:
        if cap.poll() is None:
            cap.terminate()
            cap.wait(10)
    proc = subprocess.run([tshark, "-n", "-r", str(out), "-X",
                           f"lua_script:{ROOT / 'tools' / 'wireshark' / 'uet.lua'}",
                           "-T", "fields", "-E", "separator=|", "-e", "ip.proto",
                           "-e", "udp.srcport", "-e", "uet.pds.entropy", "-e", "uet.pds.type",
                           "-e", "_ws.expert.severity", "-e", "_ws.malformed"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    rows = [line.split("|") for line in proc.stdout.splitlines()]
    assert len(rows) >= 12
    for proto, udp, ev, pds_type, severity, malformed in rows:
        assert proto == "253" and not udp and ev and pds_type, rows
        assert not severity and not malformed
    assert len({r[2] for r in rows if r[3] == "2"}) > 1  # requests sprayed over EVs
