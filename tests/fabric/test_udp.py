"""Live mode on loopback: the real end point on real UDP sockets, in one process, across
processes, and what tshark sees on lo.

Addresses: 127.61.N.x with N from the process ID, so that two test runs at once (other
tests use 127.0.51.x, 127.0.92.0/22 and 127.89.x.x) do not collide."""

from __future__ import annotations

import json
import os
import random
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from tests.fabric.helpers import start_ready
from uet.bench import traffic_endpoint
from uet.endpoint.fep import SINK_INDEX, SINK_KEY, FabricEndpoint
from uet.fabric.clock import MS, S
from uet.runtime.udp import LiveHost, UdpNode
from uet.ses.errors import SesError
from uet.wire.constants import ReturnCode

ROOT = Path(__file__).resolve().parents[2]
NET = f"127.61.{os.getpid() % 250 + 1}"
TIMEOUT = 10 * S


async def test_write_then_read_64k_between_two_real_endpoints() -> None:
    data = random.Random(7).randbytes(64 * 1024)
    async with UdpNode(ip=f"{NET}.1") as a, UdpNode(ip=f"{NET}.2") as b:
        assert isinstance(a.ep, FabricEndpoint) and isinstance(a.host, LiveHost)
        w = await a.host.write(f"{NET}.2", SINK_KEY, 0, data, index=SINK_INDEX,
                               timeout_ps=TIMEOUT)
        assert w.return_code == ReturnCode.OK and w.modified_length == len(data)
        assert bytes(b.ep.sink[:len(data)]) == data
        r = await a.host.read(b.host, SINK_KEY, 0, len(data), index=SINK_INDEX,
                              timeout_ps=TIMEOUT)
        assert r.data == data
        # 16 WRITE packets and 16 READ responses crossed real sockets, sprayed over EVs
        assert a.ep.stats["pds.tx_bytes"] == len(data) == b.ep.stats["pds.tx_bytes"]
        assert a.counters["tx_datagrams"] >= 17 and b.counters["rx_datagrams"] >= 17
        assert len(a.ev_ports) > 1 and a.counters["ev_fallback"] == 0
        assert a.counters["rx_decode_errors"] == b.counters["rx_decode_errors"] == 0
        # garbage on the port is counted and dropped; the end point carries on
        junk = trio.socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        await junk.bind((f"{NET}.1", 0))
        await junk.sendto(b"\xff" * 20, (f"{NET}.2", 4793))
        junk.close()
        assert await b.wait_until(lambda: b.counters["rx_decode_errors"] == 1, TIMEOUT)
        assert b.counters["rx_decode_error.pds"] == 1
        again = await a.host.read(b.host, SINK_KEY, 100, 10, index=SINK_INDEX,
                                  timeout_ps=TIMEOUT)
        assert again.data == data[100:110]


async def test_restarted_node_is_a_new_incarnation() -> None:
    """A node restarted at the same address (fresh seed, hence a new SES initiator ID and
    new PDC IDs and PSNs) is not taken for its previous incarnation by a peer that outlives
    it; and nodes that leave close their PDCs first (no half-open PDC, no CLOSE retried)."""
    async with UdpNode(ip=f"{NET}.14") as b:
        ids = set()
        for k in range(3):
            data = bytes([k]) * 40_000
            async with UdpNode(ip=f"{NET}.15") as a:
                ids.add(a.ep.ses.initiator_id)
                await a.host.write(b.host, SINK_KEY, 0, data, index=SINK_INDEX,
                                   timeout_ps=TIMEOUT)
                r = await a.host.read(b.host, SINK_KEY, 0, len(data), index=SINK_INDEX,
                                      timeout_ps=TIMEOUT)
                assert r.data == data
            assert a.open_pdcs() == 0
        assert len(ids) == 3
        assert await b.wait_until(lambda: b.open_pdcs() == 0, TIMEOUT)
        stats = b.ep.stats
        assert stats["pds.opened"] == stats["pds.closed"] == 6
        assert "pds.closed_in_error" not in stats and stats["fep.duplicates_delivered"] == 0


async def test_host_api_sends_receives_atomics_and_errors() -> None:
    """The virtual fabric's Host API, unchanged, on live nodes: tagged send into a posted
    receive, an atomic on registered memory, a return code as SesError, a timeout."""
    peers = {0: f"{NET}.7", 1: f"{NET}.8"}
    async with UdpNode(ip=f"{NET}.7", profile="hpc", peers=peers) as a, \
            UdpNode(ip=f"{NET}.8", profile="hpc", peers=peers, index=1) as b:
        recv = b.host.post_recv(64, tag=0x55)
        op = a.host.send(1, b"hello live", tag=0x55)  # destination by peer index
        got = await recv.wait(TIMEOUT)
        await op.wait(TIMEOUT)
        assert (got.data, got.tag, got.src, got.src_host) == (b"hello live", 0x55,
                                                             f"{NET}.7", 0)
        mem = bytearray(16)
        b.host.register(mem, key=0xA70, index=2, perms="rwa")
        res = await a.host.atomic(b.host, 0xA70, 8, "SUM", "UINT64", 5, index=2, fetch=True,
                                  timeout_ps=TIMEOUT)
        assert res.value == 0 and int.from_bytes(mem[8:], "little") == 5
        with pytest.raises(SesError) as err:
            await a.host.write(b.host, 0xBAD, 0, b"x", index=2, timeout_ps=TIMEOUT)
        assert err.value.return_code == ReturnCode.BAD_MKEY
        with pytest.raises(ValueError, match="no peer 5"):
            a.host.write(5, 0xA70, 0, b"x")
        with pytest.raises(TimeoutError):  # nothing is sent to that receive
            await b.host.post_recv(8, tag=0x66, timeout_ps=50 * MS)


async def test_operation_to_an_absent_peer_fails_after_retries() -> None:
    """Timers run under the real clock from the first packet on: the RTO resends to a
    peer that never answers until the PDS gives up, and the operation fails (no hang)."""
    opts = {"pds_overrides": {"rto_ps": 10 * MS}}
    async with UdpNode(ip=f"{NET}.16", endpoint_options=opts, linger_ps=0) as a:
        with pytest.raises(SesError):
            await a.host.write(f"{NET}.17", SINK_KEY, 0, b"x" * 100, index=SINK_INDEX,
                               timeout_ps=TIMEOUT)
        stats = a.ep.stats
        assert stats["pds.retx.rto"] == a.ep.pds_config.max_retries
        assert stats["pds.closed_in_error"] == 1 and a.counters["timers"] >= 5


async def test_traffic_endpoint_over_udp() -> None:
    """Other FrameEndpoints still plug in: whole frames cut after UDP and rebuilt."""
    make = traffic_endpoint.factory(evs=8, rto_ps=50 * MS)
    async with UdpNode(make, ip=f"{NET}.9") as a, UdpNode(make, ip=f"{NET}.10") as b:
        msg = await a.send(f"{NET}.10", 100_000, timeout_ps=TIMEOUT)
        assert msg.done
        assert b.ep.stats["rx_data"] >= 25 and b.ep.stats["decode_errors"] == 0
        assert a.ep.stats["rx_ack"] > 0
        assert len(a.ev_ports) == 8 and a.counters["ev_fallback"] == 0


def _stop(proc: subprocess.Popen) -> str:
    proc.terminate()
    out, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err
    return out


async def test_two_processes_write_and_read_back() -> None:
    """A live end point in another process (python -m uet.runtime.udp): this process writes
    64 KiB into its sink and reads them back; then a third process does the same from the
    shell (--write); the server reports its counters on SIGTERM."""
    server = await start_ready("-m", "uet.runtime.udp", "--ip", f"{NET}.3", "--json")
    try:
        data = random.Random(3).randbytes(64 * 1024)
        async with UdpNode(ip=f"{NET}.4") as a:
            await a.host.write(f"{NET}.3", SINK_KEY, 4096, data, index=SINK_INDEX,
                               timeout_ps=TIMEOUT)
            r = await a.host.read(f"{NET}.3", SINK_KEY, 4096, len(data), index=SINK_INDEX,
                                  timeout_ps=TIMEOUT)
            assert r.data == data
        client = await trio.to_thread.run_sync(lambda: subprocess.run(
            [sys.executable, "-m", "uet.runtime.udp", "--ip", f"{NET}.11", "--write",
             f"{NET}.3", "--bytes", "65536", "--json"], capture_output=True, text=True,
            timeout=30, cwd=ROOT))
        assert client.returncode == 0, client.stderr
        lines = client.stdout.splitlines()
        assert lines[0] == f"ready udp:{NET}.11:4793"
        report = json.loads(lines[1])
        assert report["equal"] is True and report["write_bytes"] == 65536
    finally:
        out = _stop(server)
    counters = json.loads(out.splitlines()[-1])["counters"]
    assert counters["udp.rx_datagrams"] >= 32 and counters["pds.rx_bytes"] == 2 * 65536
    assert counters.get("udp.rx_decode_errors", 0) == 0


async def test_live_node_against_uet_serve() -> None:
    """The live node and `uet serve` (the conformance responder) are the same end point on
    the same sockets: WRITE and READ its well-known 'rma' region."""
    server = await start_ready("-m", "uet.cli", "serve", "--listen", f"{NET}.12:4793",
                          "--json")
    try:
        async with UdpNode(ip=f"{NET}.13", profile="hpc",
                           endpoint_options={"job_id": 0x00ABCD}) as a:
            await a.host.write(f"{NET}.12", 0x1111_0001, 64, b"live" * 1000, index=1,
                               timeout_ps=TIMEOUT)
            r = await a.host.read(f"{NET}.12", 0x1111_0001, 64, 4000, index=1,
                                  timeout_ps=TIMEOUT)
            assert r.data == b"live" * 1000
    finally:
        _stop(server)


@pytest.mark.tshark
async def test_tshark_sees_valid_uet_on_lo(tmp_path) -> None:
    """tshark -i lo -f 'udp port 4793' with our dissector: every frame between two live
    nodes is UET (requests, ACKs, READ responses), DSCP/ECN as the end point set them,
    EVs in the source port, and no expert info of Warning or Error severity."""
    tshark = shutil.which("tshark")
    assert tshark, "tshark is required (installed by .ci/run)"
    out = tmp_path / "lo.pcapng"
    cap = subprocess.Popen([tshark, "-i", "lo", "-f", "udp port 4793", "-a", "duration:2",
                            "-w", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           text=True)
    try:
        with trio.fail_after(15):
            while True:  # wait until dumpcap captures ("Capturing on" comes earlier)
                line = await trio.to_thread.run_sync(cap.stderr.readline)
                assert line, "tshark exited before capturing"
                if "Capture started" in line:
                    break
        data = random.Random(5).randbytes(32 * 1024)
        # seeded end points: the EVs (UDP source ports) are the same every run
        async with UdpNode(ip=f"{NET}.5", seed=5) as a, UdpNode(ip=f"{NET}.6", seed=6):
            await a.host.write(f"{NET}.6", SINK_KEY, 0, data, index=SINK_INDEX,
                               timeout_ps=TIMEOUT)
            r = await a.host.read(f"{NET}.6", SINK_KEY, 0, len(data), index=SINK_INDEX,
                                  timeout_ps=TIMEOUT)
            assert r.data == data
        await trio.to_thread.run_sync(lambda: cap.wait(15))
    finally:
        if cap.poll() is None:
            cap.terminate()
            cap.wait(10)
    ours = f"ip.src=={NET}.5 || ip.src=={NET}.6"
    proc = subprocess.run([tshark, "-n", "-r", str(out), "-X",
                           f"lua_script:{ROOT / 'tools' / 'wireshark' / 'uet.lua'}",
                           # an EV is any source port: one below 4793 that another
                           # dissector registered (3804 HiQnet ...) wins unless the
                           # heuristic runs first, as the `uet` profile sets it
                           "-o", "udp.try_heuristic_first:TRUE",
                           "-Y", ours, "-T", "fields", "-E", "occurrence=a",
                           "-E", "separator=|", "-e", "udp.srcport", "-e", "udp.checksum",
                           "-e", "ip.dsfield.dscp", "-e", "ip.dsfield.ecn",
                           "-e", "uet.pds.type", "-e", "uet.ses.std.opcode",
                           "-e", "_ws.expert.severity", "-e", "_ws.expert.message",
                           "-e", "_ws.malformed", "-e", "uet.pds.psn"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    rows = [line.split("|") for line in proc.stdout.splitlines()]
    # 8 WRITE packets, 8 READ requests, 8 READ responses, their ACKs, CLEARs
    assert len(rows) >= 24
    for row in rows:
        _sport, checksum, _dscp, _ecn, pds_type, _op, severity, message, malformed, _psn = row
        assert pds_type, f"not dissected as UET: {row}"
        assert not severity and not message and not malformed, row  # no expert info
        assert checksum == "0x0000"  # UET sends no UDP checksum over IPv4
    types = {int(r[4]) for r in rows}
    assert {2, 8} <= types  # RUD requests, ACK_CC
    writes = [r for r in rows if r[5] == "1"]  # WRITE requests
    # 8 WRITE packets (a loaded machine may add a retransmission: same PSN again)
    assert len({r[9] for r in writes}) == 8 and len({r[0] for r in writes}) > 1  # EV = port
    assert {(r[2], r[3]) for r in writes} == {("10", "2")}  # data DSCP, ECT(0)
    assert {r[2] for r in rows if r[4] == "8"} == {"46"}  # ACKs in the control class
