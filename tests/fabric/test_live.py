"""The live fabric (uet.runtime.live): the same models as the virtual fabric, driven in real
time by one Trio task per NIC and per switch, frames on real sockets (VXLAN on loopback).

Each test runs the same small experiment shape, bounded in real time by ``trio.fail_after``
and with a generous dilation, so a loaded 2-core machine slows it down without changing
what is asserted (nothing here is timed: the live run is not deterministic, so the
assertions are the identities the counters must satisfy whatever the schedule).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import trio

from uet.fabric.clock import MS, US
from uet.runtime.fabric import Fabric
from uet.runtime.live import LiveError, LiveFabric

ROOT = Path(__file__).resolve().parents[2]
LUA = ROOT / "uet" / "wireshark" / "uet.lua"
#: this process's /16 on loopback (hosts 127.B.0.x, wires 127.B.128.x+)
BLOCK = f"127.{160 + os.getpid() % 60}.0.0/16"
B = BLOCK.split(".")[1]
#: a generous slow-down: 100 Gb/s links carry 10 Mb/s of real bytes (2.5x what a loaded
#: 2-core machine needs for 4 hosts, benchmarks/live_fabric.py)
DILATION = 10000.0
#: 4 hosts on one switch, 1% loss on h1's uplink, trimming and ECN on (the defaults), 64 KB
#: queues so that the incast trims whatever the schedule
TOPO = {"kind": "star", "hosts": 4, "queue_bytes": 65536,
        "impairments": [{"at": "h1", "direction": "tx", "loss": 0.01, "seed": 7}]}
#: an incast (three senders to host 3, which congests sw0.p3: trimming and ECN) plus one
#: reverse flow; (src, dst, bytes)
FLOWS = [(0, 3, 384 * 1024), (1, 3, 384 * 1024), (2, 3, 384 * 1024), (3, 0, 256 * 1024)]


def _payload(i: int, n: int) -> bytes:
    return bytes((i * 37 + k * 7) & 0xFF for k in range(251)) * (n // 251) + bytes(n % 251)


async def _scenario(fab: Fabric) -> dict:
    """Every flow writes its own bytes at its own offset of the destination's sink; waits
    until all complete; returns the counters."""
    offsets: dict[int, int] = {}
    for dst in {d for _, d, _ in FLOWS}:
        total = 0
        for i, (_s, d, n) in enumerate(FLOWS):
            if d == dst:
                offsets[i] = total
                total += n
        fab.endpoint(dst).ensure_sink(total)
    msgs = []
    for i, (src, dst, n) in enumerate(FLOWS):
        data = _payload(i, n)
        msgs.append(fab.submit(src, lambda ep, now, d=dst, b=data, o=offsets[i]:
                               ep.send_message(now, d, len(b), b, offset=o)))
    assert await fab.wait_until(lambda: all(m.done for m in msgs), 200 * MS)
    for i, (_src, dst, n) in enumerate(FLOWS):
        sink = fab.endpoint(dst).sink
        assert bytes(sink[offsets[i]:offsets[i] + n]) == _payload(i, n), f"flow {i} bytes"
    await fab.sleep(20 * US)  # the last ACKs land
    return fab.counters()


def _check_counters(fab: Fabric, c: dict) -> None:
    """What the configured impairments allow, and nothing else."""
    for i in range(4):
        audit = fab.endpoint(i).audit
        assert audit.duplicates == 0, f"h{i} got a request twice"
    lossy = c["link"]["h1->sw0.p1"]
    in_flight = lossy["tx_frames"] - lossy["delivered"] - lossy.get("drop.loss", 0)
    assert 0 <= in_flight <= 16  # on the cable, or behind a late core
    assert lossy.get("drop.loss", 0) <= max(6, lossy["tx_frames"] // 20)  # 1% of them
    for name, link in c["link"].items():
        if name != "h1->sw0.p1":
            assert not [k for k in link if k.startswith("drop.")], (name, link)
    ports = c["port"]
    for name, p in [*ports.items(), *c["nic"].items()]:
        assert not [k for k in p if k.startswith("drop.")], (name, p)
    trimmed = sum(p["trimmed"] for p in ports.values())
    assert trimmed == ports["sw0.p3"]["trimmed"] > 0  # only the incast port overflows
    assert trimmed == sum(e.get("pds.trimmed_rx", 0) for e in c["endpoint"].values())
    assert ports["sw0.p3"]["ecn_marked"] > 0  # the incast port marks (others may too)
    assert all(p["pause_tx"] == 0 for p in ports.values())


def test_same_experiment_virtual_and_live() -> None:
    """4 hosts, one switch, 1% loss on one link, trimming on: every message delivered
    exactly once (byte for byte) in virtual time and in live mode, and the live counters
    are what the configuration allows (loss only on the lossy link, trims and ECN marks
    only at the congested port, every trimmed header reaching its receiver)."""
    async def virtual() -> None:
        async with Fabric(TOPO, seed=3) as fab:
            _check_counters(fab, await _scenario(fab))

    async def live() -> None:
        with trio.fail_after(120):
            async with LiveFabric(TOPO, seed=3, dilation=DILATION,
                                  address_block=BLOCK) as fab:
                c = await _scenario(fab)
        _check_counters(fab, c)
        live = c["live"]
        assert live["dilation"] == DILATION and live["backend"] == "udp"
        assert live["behind"]["wire_losses"] == 0
        # every frame a wire end sent arrived at the other end of its cable (or is on
        # its way: sent, not yet read)
        for name, w in live["wires"].items():
            assert 0 <= w["a"]["tx"] - w["b"]["rx"] <= 16, (name, w)
            assert 0 <= w["b"]["tx"] - w["a"]["rx"] <= 16, (name, w)
        assert sum(n["rx_frames"] for n in live["nodes"].values()) == sum(
            w["a"]["rx"] + w["b"]["rx"] for w in live["wires"].values())

    trio.run(virtual)
    trio.run(live)


def test_live_pfc_pause_stops_the_sender_and_loses_nothing() -> None:
    """PFC on the data class: the switch pauses the three incast senders (real 802.1Qbb
    frames on the wires), they stop (time paused counted), and nothing is dropped,
    trimmed or retransmitted.

    The headroom is 200 KB, not the 43 KB that 1 us cables need: in real time a switch
    the OS schedules late sends its pause late, and the senders, on time, keep sending
    meanwhile (docs/fabric.md, "Falling behind"); 200 KB covers 16 us of such lag at
    100 Gb/s, more than a loaded 2-core machine showed (at most ~10 us)."""
    topo = {"kind": "star", "hosts": 4, "trimming": False,
            "pfc": {"classes": [0], "xoff": 30000, "xon": 15000, "headroom": 200_000}}

    async def main() -> dict:
        with trio.fail_after(120):
            async with LiveFabric(topo, seed=5, dilation=DILATION,
                                  address_block=BLOCK) as fab:
                return await _scenario(fab)

    c = trio.run(main)
    for i in range(3):
        nic = c["nic"][f"h{i}"]
        assert nic["pause_rx"] > 0 and nic.get("paused_ps.0", 0) > 0, nic
        assert c["port"][f"sw0.p{i}"]["pause_tx"] == nic["pause_rx"]
    for name, p in [*c["port"].items(), *c["nic"].items(), *c["link"].items()]:
        assert not [k for k in p if k.startswith("drop.")], (name, p)
    assert sum(p["trimmed"] for p in c["port"].values()) == 0
    for name, e in c["endpoint"].items():
        assert not [k for k in e if k.startswith("pds.retx")], (name, e)
    assert c["port"]["sw0.p3"]["queue_hwm.0"] > 30000  # the queue built up, then paused


#: an EV is any UDP source port: one below 4793 that another dissector registered (3804
#: HiQnet ...) wins unless the heuristic runs first, as the `uet` profile sets it
HEURISTIC_FIRST = ("-o", "udp.try_heuristic_first:TRUE")


def _tshark() -> str:
    path = shutil.which("tshark")
    assert path, "tshark is required (apt-get install tshark)"
    return path


def test_tshark_on_lo_decodes_uet_inside_the_live_frames(tmp_path: Path) -> None:
    """``tshark -i lo`` (filtered on this test's wire addresses) shows every live frame as
    Ethernet / IP / UDP 4789 / VXLAN / Ethernet / IP / UDP 4793 / UET, and the project's
    dissector decodes the UET headers inside."""
    tshark = _tshark()
    pcap = tmp_path / "lo.pcapng"
    cap = subprocess.Popen([tshark, "-i", "lo", "-f", f"udp port 4789 and net 127.{B}.0.0/16",
                            "-a", "duration:30", "-w", str(pcap)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    async def main() -> None:
        with trio.fail_after(60):
            while True:  # tshark is capturing once it says so (and a moment later)
                line = await trio.to_thread.run_sync(cap.stderr.readline)
                if not line or "Capturing on" in line:
                    break
            await trio.sleep(1.0)
            async with LiveFabric({"kind": "star", "hosts": 2}, seed=1, dilation=DILATION,
                                  address_block=BLOCK) as fab:
                fab.endpoint(1).ensure_sink(64 * 1024)
                await fab.send(0, 1, 64 * 1024, timeout_ps=200 * MS)
            await trio.sleep(0.5)

    try:
        trio.run(main)
    finally:
        cap.terminate()
        cap.wait(20)
    out = subprocess.run([tshark, "-r", str(pcap), "-X", f"lua_script:{LUA}", *HEURISTIC_FIRST,
                          "-T", "fields",
                          "-e", "frame.protocols", "-e", "vxlan.vni", "-e", "udp.dstport"],
                         capture_output=True, text=True, timeout=120)
    rows = [r.split("\t") for r in out.stdout.splitlines() if r]
    # 16 data frames over two cables, and the ACKs (the capture may miss the first few)
    assert len(rows) >= 16, out.stderr
    uet_rows = [r for r in rows if "vxlan:eth:ethertype:ip:udp:uet" in r[0]]
    assert len(uet_rows) == len(rows), {r[0] for r in rows}
    assert {r[1] for r in rows} <= {"1", "2"}  # the two cables' VNIs
    assert all(r[2].split(",") == ["4789", "4793"] for r in rows)
    fields = subprocess.run([tshark, "-r", str(pcap), "-X", f"lua_script:{LUA}",
                             *HEURISTIC_FIRST, "-T", "fields", "-e", "uet.pds.type", "-Y", "uet"],
                            capture_output=True, text=True, timeout=120)
    assert len([x for x in fields.stdout.splitlines() if x.strip()]) == len(rows)


def test_veth_backend_in_a_namespace(tmp_path: Path) -> None:
    """As root: veth pairs in a namespace the fabric creates, AF_PACKET sockets; tshark on
    a veth sees real Ethernet frames (PFC pause frames, UET data) and the namespace is
    gone afterwards."""
    if os.geteuid() != 0:
        with pytest.raises(LiveError, match="root"):
            LiveFabric({"kind": "star", "hosts": 2}, backend="veth", dilation=DILATION)
        return
    tshark = _tshark()
    topo = {"kind": "star", "hosts": 3, "trimming": False,
            "pfc": {"classes": [0], "xoff": 20000, "xon": 10000, "headroom": 200_000}}
    pcap = tmp_path / "veth.pcapng"
    state: dict = {}

    async def main() -> None:
        with trio.fail_after(120):
            async with LiveFabric(topo, seed=2, dilation=DILATION, backend="veth",
                                  address_block=BLOCK) as fab:
                ns = fab.netns.name
                state["ns"] = ns
                assert ns in subprocess.run(["ip", "netns", "list"], capture_output=True,
                                            text=True).stdout
                # the cable h0 <-> sw0.p0 is link 0: its switch end is u0b
                cap = subprocess.Popen(["ip", "netns", "exec", ns, tshark, "-i", "u0b",
                                        "-a", "duration:40", "-w", str(pcap)],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                       text=True)
                state["cap"] = cap
                while True:
                    line = await trio.to_thread.run_sync(cap.stderr.readline)
                    if not line or "Capturing on" in line:
                        break
                fab.endpoint(2).ensure_sink(2 * 256 * 1024)
                msgs = [fab.start_message(0, 2, 256 * 1024), fab.start_message(1, 2, 256 * 1024)]
                assert await fab.wait_until(lambda: all(m.done for m in msgs), 200 * MS)
                c = fab.counters()
                state["c"] = c
                await trio.sleep(0.3)
                cap.terminate()
                await trio.to_thread.run_sync(lambda: cap.wait(20))

    try:
        trio.run(main)
    finally:
        if "cap" in state and state["cap"].poll() is None:
            state["cap"].kill()
    assert state["ns"] not in subprocess.run(["ip", "netns", "list"], capture_output=True,
                                             text=True).stdout
    c = state["c"]
    assert c["live"]["backend"] == "veth"
    assert c["nic"]["h0"]["pause_rx"] > 0
    for name, p in [*c["port"].items(), *c["nic"].items()]:
        assert not [k for k in p if k.startswith("drop.")], (name, p)
    out = subprocess.run([tshark, "-r", str(pcap), "-X", f"lua_script:{LUA}", *HEURISTIC_FIRST,
                          "-T", "fields",
                          "-e", "frame.protocols"],
                         capture_output=True, text=True, timeout=120)
    protos = [r for r in out.stdout.splitlines() if r]
    assert any(p.startswith("eth:ethertype:ip:udp:uet") for p in protos), out.stderr
    pauses = subprocess.run([tshark, "-r", str(pcap), "-Y", "macc.opcode == 0x0101", "-T",
                             "fields", "-e", "eth.dst"],
                            capture_output=True, text=True, timeout=120)
    # the switch's pause frames towards h0 (802.1Qbb: class-based pause, 01:80:c2:00:00:01)
    assert set(pauses.stdout.split()) == {"01:80:c2:00:00:01"}, pauses.stderr
    # nothing but the fabric's frames on the veth (IPv6 is off in the namespace)
    assert all(p.startswith(("eth:ethertype:ip:udp:uet", "eth:ethertype:macc")) for p in
               protos), set(protos)


def test_what_the_live_fabric_refuses() -> None:
    """Clear one-line errors: an external host in a virtual fabric, a bad external
    address, a bad backend or dilation, an address block outside loopback."""
    with pytest.raises(ValueError, match="need the live fabric"):
        Fabric({"kind": "star", "hosts": 2, "external": {1: "udp:127.0.0.9:4793"}})
    for bad, what in (({1: "tcp:127.0.0.9:4793"}, "udp:IP:PORT"),
                      ({1: "udp:10.0.0.9:4793"}, "loopback only"),
                      ({5: "udp:127.0.0.9:4793"}, "no host 5"),
                      ({1: "udp:127.0.0.9:0"}, "port 1..65535")):
        with pytest.raises(ValueError, match=what):
            LiveFabric({"kind": "star", "hosts": 2, "external": bad}, dilation=DILATION)
    with pytest.raises(ValueError, match="allowed"):
        LiveFabric({"kind": "star", "hosts": 2}, backend="tcp")
    with pytest.raises(ValueError, match="dilation"):
        LiveFabric({"kind": "star", "hosts": 2}, dilation=0)
    with pytest.raises(ValueError, match="inside 127.0.0.0/8"):
        LiveFabric({"kind": "star", "hosts": 2}, address_block="10.1.0.0/16")

    async def taken() -> None:
        async with LiveFabric({"kind": "star", "hosts": 2}, dilation=DILATION,
                              address_block=BLOCK):
            with pytest.raises(LiveError, match="taken"):
                async with LiveFabric({"kind": "star", "hosts": 2}, dilation=DILATION,
                                      address_block=BLOCK):
                    pass

    trio.run(taken)


def test_a_live_fabric_cannot_be_stepped_from_plain_code() -> None:
    """advance_to is for virtual fabrics: a live one's nodes are Trio tasks on the clock."""
    from uet.errors import LocalError

    fab = LiveFabric({"kind": "star", "hosts": 2}, seed=1, dilation=DILATION,
                     address_block=BLOCK)
    with pytest.raises(LocalError, match="real time"):
        fab.advance_to(1000)
    fab.close()
