"""RoCE on the emulated fabric: a PFC (lossless) incast loses nothing and pauses; a lossy
one drops and recovers; every QP keeps one UDP source port (per-QP ECMP) and a flow over
several QPs uses several ports, each taking the switch's ECMP choice for that port."""

from __future__ import annotations

from collections import defaultdict

import pytest
from harness import rig

from uet.fabric.clock import ser_ps
from uet.roce.config import RoceConfig
from uet.roce.constants import Opcode
from uet.roce.qp import qpn_for

INCAST = [(i, 15) for i in range(0, 15, 2)]  # 8:1 from every pod


def _incast(pfc: bool, size: int = 400_000):
    topo = {"kind": "fat_tree", "k": 4, "pfc": {"xoff": 60_000, "xon": 48_000} if pfc
            else False}
    r = rig(RoceConfig(timeout=6), topology=topo, sink_bytes=size)
    msgs = [r.eps[s].send_message(0, d, size) for s, d in INCAST]
    for s, _d in INCAST:
        r.poke(s)
    r.run()
    return r, msgs


@pytest.mark.parametrize("pfc", [True, False], ids=["lossless", "lossy"])
def test_incast_with_and_without_pfc(pfc):
    r, msgs = _incast(pfc)
    assert all(m.ok for m in msgs)
    c = r.net.counters()
    drops = sum(v for sec in ("nic", "port", "link") for ent in c[sec].values()
                for k, v in ent.items() if k.startswith("drop."))
    pauses = sum(ent.get("pause_tx", 0) for ent in c["port"].values())
    retx = sum(ep.stats["tx_retx"] for ep in r.eps)
    if pfc:  # lossless: no frame lost anywhere, nothing resent, PFC did the work
        assert drops == 0 and retx == 0 and pauses > 0
        assert all(ep.stats["rx_out_of_sequence"] == 0 for ep in r.eps)
    else:  # lossy: queues overflow, go-back-N recovers everything
        assert drops > 0 and retx > 0 and pauses == 0
    assert r.eps[15].stats["rx_payload_bytes"] == len(INCAST) * 400_000
    # the receiver's link was the bottleneck: no faster than its serialisation
    first = min(m.started_at for m in msgs)
    last = max(m.done_at for m in msgs)
    assert last - first >= ser_ps(len(INCAST) * 400_000, 100 * 10**9)


def test_every_qp_keeps_one_source_port_and_its_ecmp_path():
    cfg = RoceConfig(qps_per_flow=4, dcqcn={"enabled": False})
    r = rig(cfg, topology={"kind": "fat_tree", "k": 4})
    msg = r.eps[0].send_message(0, 13, 64 * 4096)
    r.poke(0)
    r.run()
    assert msg.ok
    ports_by_qp = defaultdict(set)
    for _t, host, f, _v in r.log:
        if host == 13 and f.bth.opcode not in (Opcode.ACKNOWLEDGE, Opcode.CNP):
            ports_by_qp[f.bth.dqpn].add(f.sport)
    assert set(ports_by_qp) == {qpn_for(0, k) for k in range(4)}
    assert all(len(p) == 1 for p in ports_by_qp.values())
    sports = {next(iter(p)) for p in ports_by_qp.values()}
    assert len(sports) == 4 and all(0xC000 <= p <= 0xFFFF for p in sports)
    # each QP's packets all left the ToR by the uplink the switch's hash picks for its port
    tor = r.net.switches["tor0"]
    src = bytes(map(int, r.eps[0].ip.split(".")))
    dst = bytes(map(int, r.eps[13].ip.split(".")))
    for qp in (r.eps[0].qp(13, k) for k in range(4)):
        want = tor.ecmp_port(src, dst, 17, qp.sport, 4791)
        tx = r.net.ifaces[f"tor0.p{want}"].tx_frames
        assert tx >= 16  # at least this QP's 16 packets went that way
    # the same QP numbering and source ports on every run with this seed
    again = rig(cfg, topology={"kind": "fat_tree", "k": 4})
    assert [again.eps[0].qp(13, k).sport for k in range(4)] == \
        [r.eps[0].qp(13, k).sport for k in range(4)]
