"""PFC: an incast on a lossless class loses nothing and pauses upstream, visibly."""

from __future__ import annotations

from uet.bench.traffic_endpoint import factory as traffic
from uet.capture.pcapng import read_capture
from uet.fabric.eventlog import EventLog
from uet.fabric.pfc import PFC_DST_MAC, PfcConfig, decode_pause, encode_pause, quanta_ps
from uet.runtime.fabric import Fabric


def test_pause_frame_format() -> None:
    f = encode_pause(bytes.fromhex("02ff00000001"), {0: 0xFFFF, 3: 7})
    assert len(f) == 60
    assert f[:6] == PFC_DST_MAC and f[12:14] == b"\x88\x08" and f[14:16] == b"\x01\x01"
    assert f[16:18] == b"\x00\x09"  # class-enable vector: priorities 0 and 3
    assert decode_pause(f) == {0: 0xFFFF, 3: 7}
    assert quanta_ps(0xFFFF, 100 * 10**9) == 335_539_200
    assert PfcConfig().headroom_for(100 * 10**9, 1_000_000) == 2 * 12_500 + 2 * 9216 + 60


async def test_incast_is_lossless_and_pauses_upstream(tmp_path) -> None:
    topo = {"kind": "leaf_spine", "leaves": 2, "spines": 1, "hosts_per_leaf": 4,
            "uplink_gbps": 100, "trimming": False, "queue_bytes": 50_000,
            "pfc": {"classes": [0], "xoff": 60_000, "xon": 30_000}}
    log = EventLog(keep=True)
    senders = [0, 1, 2, 3, 5, 6, 7]
    async with Fabric(topo, seed=21, eventlog=log,
                      endpoint_factory=traffic()) as fab:
        cap = fab.capture(tmp_path / "pfc.pcapng", links=["h0", "leaf0.p4"])
        msgs = await fab.run_messages([(s, 4, 256 * 1024) for s in senders])
        assert all(m.done for m in msgs)
        c = fab.counters()
        cap.close()
    drops = {(kind, name, k): v for kind in ("nic", "port", "link")
             for name, cs in c[kind].items() for k, v in cs.items() if k.startswith("drop.")}
    assert drops == {}
    for s in senders:
        assert c["endpoint"][f"h{s}"]["tx_rtx"] == 0 and c["endpoint"][f"h{s}"]["rto"] == 0
    # the receiver's ToR pauses the spine and its local senders; the spine pauses leaf0,
    # which pauses its hosts: back-pressure reaches the sources two switches upstream
    assert c["port"]["leaf1.p4"]["pause_tx"] > 0  # leaf1 -> spine
    assert c["port"]["spine0.p1"]["pause_rx"] > 0 and c["port"]["spine0.p1"]["paused_ps.0"] > 0
    assert c["port"]["spine0.p0"]["pause_tx"] > 0  # spine -> leaf0
    assert c["nic"]["h0"]["pause_rx"] > 0 and c["nic"]["h0"]["paused_ps.0"] > 0
    assert c["nic"]["h5"]["pause_rx"] > 0
    bound = 60_000 + PfcConfig().headroom_for(100 * 10**9, 1_000_000)
    assert all(v.get("ingress_hwm.0", 0) <= bound for v in c["port"].values())
    assert log.of("pfc_xoff") and log.of("pfc_xon") and log.of("pause_on")
    frames = list(read_capture(tmp_path / "pfc.pcapng"))
    pauses = [f for f in frames if f.data[12:14] == b"\x88\x08"]
    assert pauses and {f.if_name for f in pauses} == {"h0<->leaf0.p0", "leaf0.p4<->spine0.p0"}
    assert all(f.data[14:16] == b"\x01\x01" and f.data[:6] == PFC_DST_MAC for f in pauses)


async def test_fat_tree_incast_lossless_under_pfc() -> None:
    topo = {"kind": "fat_tree", "k": 4, "trimming": False, "pfc": {"classes": [0]}}
    async with Fabric(topo, seed=5,
                      endpoint_factory=traffic()) as fab:
        msgs = await fab.run_messages([(s, 15, 128 * 1024) for s in range(15)])
        assert all(m.done for m in msgs)
        c = fab.counters()
    assert not [k for kind in ("nic", "port", "link") for cs in c[kind].values() for k in cs
                if k.startswith("drop.")]
    assert sum(e["tx_rtx"] for e in c["endpoint"].values()) == 0
    assert sum(v["pause_tx"] for k, v in c["port"].items() if k.startswith("core")) > 0
    assert sum(v["pause_rx"] for v in c["nic"].values()) > 0


async def test_nic_holds_a_frame_of_a_paused_class() -> None:
    from tests.fabric.helpers import data_frame, script_factory

    async with Fabric({"kind": "back_to_back"}, endpoint_factory=script_factory) as fab:
        s, d = fab.net.hosts
        fab.host(1).send_pause({0: 0xFFFF})  # h1 pauses class 0 at h0
        await fab.sleep(2_000_000)
        data = data_frame(s, d, psn=1)  # DSCP 10 -> class 0
        ctl = data_frame(s, d, psn=2, dscp=46, payload=10)  # DSCP 46 -> class 1
        fab.submit(0, lambda ep, now: ep.ctl.extend([data, ctl]))
        await fab.sleep(5_000_000)
        assert [f for _, f in fab.endpoint(1).got] == [ctl]
        assert fab.counters()["nic"]["h0"]["held_hwm"] == 1
        fab.host(1).send_pause({0: 0})
        await fab.sleep(5_000_000)
        assert [f for _, f in fab.endpoint(1).got] == [ctl, data]
        assert fab.counters()["nic"]["h0"]["paused_ps.0"] > 0


def test_only_ports_with_a_lossless_class_carry_pfc_accounting() -> None:
    """A port keeps per-class PFC ingress accounting only for its lossless classes; without
    any (the lossy fabrics, trimming) it has none, and forwarding reads nothing for PFC."""
    lossless = Fabric({"kind": "leaf_spine", "leaves": 2, "spines": 1, "hosts_per_leaf": 2,
                       "trimming": False, "pfc": {"classes": [0, 3]}},
                      endpoint_factory=traffic())
    lossy = Fabric({"kind": "leaf_spine", "leaves": 2, "spines": 1, "hosts_per_leaf": 2},
                   endpoint_factory=traffic())
    for sw in lossless.net.switches.values():
        for p in sw.ports:
            assert p.pfc_in == [p, None, None, p, None, None, None, None], p.name
    assert all(p.pfc_in is None for sw in lossy.net.switches.values() for p in sw.ports)
    lossless.close()
    lossy.close()
