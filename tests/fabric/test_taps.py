"""pcapng taps: virtual-time ns timestamps, one interface per tap, byte-identical reruns."""

from __future__ import annotations

import io

from uet.bench.traffic_endpoint import factory as traffic
from uet.capture.pcapng import read_capture
from uet.fabric.clock import US
from uet.fabric.eventlog import EventLog
from uet.runtime.fabric import Fabric
from uet.wire.codec import decode_frame

PERM = [(13, 6), (1, 4), (6, 0), (2, 13)]


async def _capture(path, seed: int, snaplen: int = 0) -> bytes:
    topo = {"kind": "fat_tree", "k": 4, "queue_bytes": 60_000,
            "impairments": [{"at": "core0.p0", "loss": 0.01}]}
    buf = io.StringIO()
    async with Fabric(topo, seed=seed, eventlog=EventLog(buf),
                      endpoint_factory=traffic()) as fab:
        fab.capture(path, ["h0", "tor0.p2"], links=["core1.p3"], snaplen=snaplen)
        await fab.run_messages([(s, d, 200_000) for s, d in PERM])
    return path.read_bytes() + buf.getvalue().encode()


async def test_same_seed_same_bytes(tmp_path) -> None:
    a = await _capture(tmp_path / "a.pcapng", 3)
    b = await _capture(tmp_path / "b.pcapng", 3)
    c = await _capture(tmp_path / "c.pcapng", 4)
    assert a == b
    assert a != c


async def test_tap_contents(tmp_path) -> None:
    await _capture(tmp_path / "t.pcapng", 3, snaplen=128)
    frames = list(read_capture(tmp_path / "t.pcapng"))
    names = {f.if_name for f in frames}
    assert names == {"h0", "tor0.p2", "agg6.p3<->core1.p3"}
    assert all(len(f.data) <= 128 for f in frames)
    assert max(f.orig_len for f in frames) == 4150
    h0 = [f for f in frames if f.if_name == "h0"]
    # h0 receives from h6 (another pod): first frame after 6 hops of 332 ns + 1 us
    assert h0[0].ts_ns == 6 * 1332
    ts = [f.ts_ns for f in h0]
    assert ts == sorted(ts)
    # frames from the tap decode (cut to the snap length, so only the headers)
    full = [f for f in frames if f.orig_len == len(f.data)]
    assert full and all(decode_frame(f.data).pds is not None for f in full)


async def test_interface_tap_sees_tx_and_rx(tmp_path) -> None:
    async with Fabric({"kind": "back_to_back"}, seed=1,
                      endpoint_factory=traffic()) as fab:
        fab.capture(tmp_path / "x.pcapng", ["h1"])
        await fab.send(0, 1, 8192)
        await fab.sleep(10 * US)
    frames = list(read_capture(tmp_path / "x.pcapng"))
    srcs = [decode_frame(f.data).src_ip for f in frames]
    assert srcs.count("10.0.0.2") == 3 and srcs.count("10.0.0.3") >= 1
    # rx of the first data frame: 4150 B at 100 Gb/s + 1 us
    assert frames[0].ts_ns == 1332
