"""Live mode on loopback: two end points, two processes, and what tshark sees."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest
import trio

from uet.capture.pcapng import read_capture
from uet.fabric.udp import UdpNode, udp_payload
from uet.wire.codec import decode_uet
from uet.wire.constants import PdsType


async def test_two_endpoints_on_loopback() -> None:
    async with UdpNode(ip="127.0.51.1") as a, UdpNode(ip="127.0.51.2") as b:
        msg = await a.send("127.0.51.2", 100_000, timeout_s=10)
        assert msg.done
        assert b.ep.stats["rx_data"] >= 25 and b.ep.stats["decode_errors"] == 0
        assert a.ep.stats["rx_ack"] > 0
        # the EV travels as the UDP source port: one bound socket per EV used
        assert len(a._ev_socks) == 8 and a.counters["ev_fallback"] == 0


async def _start_server(ip: str, duration: float) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-m", "uet.fabric.udp", "--ip", ip,
                             "--duration", str(duration)], stdout=subprocess.PIPE, text=True)
    line = await trio.to_thread.run_sync(proc.stdout.readline)
    assert line.startswith("ready"), line
    return proc


async def test_two_processes() -> None:
    proc = await _start_server("127.0.51.3", 20)
    try:
        async with UdpNode(ip="127.0.51.4") as a:
            msg = await a.send("127.0.51.3", 64 * 1024, timeout_s=10)
            assert msg.done and a.ep.stats["rx_ack"] > 0
    finally:
        proc.terminate()
        proc.wait(5)


@pytest.mark.tshark
async def test_tshark_sees_valid_uet(tmp_path) -> None:
    tshark = shutil.which("tshark")
    assert tshark, "tshark is required (installed by .ci/run)"
    out = tmp_path / "lo.pcapng"
    cap = subprocess.Popen([tshark, "-i", "lo", "-f", "udp port 4793", "-w", str(out)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        while True:  # wait until it captures
            line = await trio.to_thread.run_sync(cap.stderr.readline)
            assert line, "tshark exited"
            if "Capturing on" in line:
                break
        await trio.sleep(0.3)
        async with UdpNode(ip="127.0.51.5") as a, UdpNode(ip="127.0.51.6"):
            msg = await a.send("127.0.51.6", 32 * 1024, timeout_s=10)
            assert msg.done
        await trio.sleep(0.5)
    finally:
        cap.terminate()
        cap.wait(10)
    frames = list(read_capture(out))
    ours = [f for f in frames if f.data[26:29] == bytes([127, 0, 51]) and f.data[29] in (5, 6)]
    assert len(ours) >= 9  # 8 data packets + ACKs
    types = set()
    for f in ours:
        dst, ev, uet = udp_payload(f.data)
        types.add(decode_uet(uet).pds.type)
    assert {PdsType.RUD_REQ, PdsType.ACK} <= types
    # tshark itself sees them as UDP datagrams to port 4793
    text = subprocess.run([tshark, "-r", str(out), "-Y", "udp.dstport == 4793",
                           "-T", "fields", "-e", "ip.dst"], capture_output=True, text=True,
                          check=True).stdout.split()
    assert {"127.0.51.5", "127.0.51.6"} <= set(text)
