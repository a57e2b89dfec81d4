"""Fabric scenarios for tests/fabric/test_fabric_core.py: run as a script, it prints one
JSON object per scenario (counters, events, end time, what every host received and a
SHA-256 of the captured frames), so that the C per-frame path and the Python one
(``UET_PURE_PYTHON=1``) can be compared run against run."""

from __future__ import annotations

import hashlib
import json
import sys
import tempfile
from pathlib import Path

import trio

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.fabric.helpers import data_frame, script_factory  # noqa: E402
from uet.bench.traffic_endpoint import factory as traffic  # noqa: E402
from uet.fabric.pfc import encode_pause  # noqa: E402
from uet.fabric.scheduler import FABRIC_CORE  # noqa: E402
from uet.runtime.fabric import Fabric  # noqa: E402


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


async def _messages(topo: dict, flows: list, seed: int, taps: list[str]) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        cap_path = Path(tmp) / "c.pcapng"
        async with Fabric(topo, seed=seed, endpoint_factory=traffic()) as fab:
            cap = fab.capture(cap_path, links=taps)
            msgs = await fab.run_messages(flows)
            cap.close()
            out = {"done": [m.done for m in msgs], "counters": fab.counters(),
                   "now": fab.net.loop.now, "events": fab.net.loop.events}
        out["capture"] = _digest(cap_path)
    return out


INCAST = [(s, 0, 96 * 1024) for s in range(1, 16)]


async def incast_trim_ecn(ipv6: bool) -> dict:
    """15:1 incast on a k=4 fat tree: ECN marks, trims, ECMP over 128 EVs."""
    topo = {"kind": "fat_tree", "k": 4, "queue_bytes": 60_000, "ecn_kmin": 10_000,
            "ecn_kmax": 50_000, "ipv6": ipv6}
    return await _messages(topo, INCAST, 5, ["h0", "tor0.p2"])


async def pfc_incast() -> dict:
    """A lossless class: PAUSE frames, ingress accounting, refreshes and resumes."""
    topo = {"kind": "leaf_spine", "leaves": 2, "spines": 1, "hosts_per_leaf": 4,
            "uplink_gbps": 100, "trimming": False, "queue_bytes": 50_000,
            "pfc": {"classes": [0], "xoff": 60_000, "xon": 30_000}}
    return await _messages(topo, [(s, 4, 128 * 1024) for s in (0, 1, 2, 3, 5, 6, 7)], 21,
                           ["h0", "leaf0.p4"])


async def impaired() -> dict:
    """Loss, bursts, duplicates, corruption, reordering, a degraded and a flapping link."""
    topo = {"kind": "fat_tree", "k": 4, "impairments": [
        {"at": "tor0.p2", "loss": 0.02, "duplicate": 0.02, "corrupt": 0.01},
        {"at": "tor1.p3", "loss": 0.01, "duplicate": 0.03, "corrupt": 0.02, "direction": "rx"},
        {"at": "agg0.p2", "rate_bps": 25 * 10**9, "queue_factor": 0.25},
        {"at": "core1.p1", "jitter_ps": 300_000, "reorder": 0.05,
         "reorder_delay_ps": 2_000_000},
        {"at": "tor2.p2", "gilbert": {"p_gb": 0.01, "p_bg": 0.3}},
        {"at": "core2.p2", "down": [[20_000_000, 60_000_000]]},
    ]}
    flows = [(s, (s * 5 + 3) % 16, 160 * 1024) for s in range(16)]
    return await _messages(topo, flows, 9, ["h0", "tor0.p2", "agg0.p2"])


async def hostile_frames() -> dict:
    """Frames a switch must not choke on: cut IPv4/IPv6 headers, unknown ethertypes, PAUSE
    frames from a host, a packet without a route; then good frames."""
    topo = {"kind": "star", "hosts": 3, "queue_bytes": 20_000}
    with tempfile.TemporaryDirectory() as tmp:
        cap_path = Path(tmp) / "c.pcapng"
        async with Fabric(topo, seed=3, endpoint_factory=script_factory) as fab:
            cap = fab.capture(cap_path, ifaces=["h1", "h2"])
            a, b, c = (fab.net.hosts[i] for i in range(3))
            good = data_frame(a, b, payload=3000)
            ep = fab.endpoint(0)
            cut = [good[:n] for n in (16, 20, 30, 37, 38, 60)]
            v6 = bytearray(good)
            v6[12:14] = b"\x86\xdd"
            cut += [bytes(v6[:n]) for n in (20, 40, 57, 58, 70)]
            odd = bytearray(good)
            odd[12:14] = b"\x12\x34"
            noroute = bytearray(good)
            noroute[30:34] = b"\x0a\xff\xff\xfe"
            ep.out.extend(cut + [bytes(odd), bytes(noroute), good]
                          + [data_frame(a, b, psn=i, ev=0xC000 + i) for i in range(12)]
                          + [data_frame(a, c, psn=i, ecn=1) for i in range(12)])
            ep.ctl.append(encode_pause(bytes.fromhex(a.mac.replace(":", "")), {0: 200}))
            fab.endpoint(1).out.extend(data_frame(b, c, psn=i) for i in range(12))
            for i in (0, 1):
                fab.host(i).poke()
            await fab.sleep(50_000_000)
            cap.close()
            out = {"counters": fab.counters(), "now": fab.net.loop.now,
                   "events": fab.net.loop.events,
                   "got": [[(t, hashlib.sha256(bytes(d)).hexdigest()) for t, d in
                            fab.endpoint(i).got] for i in range(3)]}
        out["capture"] = _digest(cap_path)
    return out


async def mutated_frames() -> dict:
    """2,000 seeded mutations of real data and ACK frames (cuts, byte flips in the headers,
    other ethertypes and protocols) injected at a switch port of a k=4 fat tree: what each
    host receives, in order, and every counter."""
    import random

    from uet.wire.codec import encode_frame
    from uet.wire.records import Frame, PdsAckCc, PdsRequest, SesStandard

    rng = random.Random(20261207)
    topo = {"kind": "fat_tree", "k": 4, "queue_bytes": 30_000, "ecn_kmin": 5_000,
            "ecn_kmax": 20_000}
    async with Fabric(topo, seed=7, endpoint_factory=script_factory) as fab:
        hosts = fab.net.hosts
        base = []
        for i in range(40):
            a, b = hosts[i % 16], hosts[(i * 7 + 3) % 16]
            base.append(data_frame(a, b, psn=i, ev=rng.randrange(1 << 16),
                                   payload=rng.choice([0, 64, 1500, 4052]),
                                   ecn=rng.choice([0, 1, 2, 3])))
            base.append(encode_frame(Frame(PdsAckCc(8, 0, 0, 0, i, 6, 5, 0, 0, 4, 1, 3),
                                           src_mac=b.mac, dst_mac=a.mac, src_ip=b.ip,
                                           dst_ip=a.ip, ev=rng.randrange(1 << 16), dscp=46)))
            base.append(encode_frame(Frame(PdsRequest(2, 3, 1, 0, i, 5, 6), SesStandard(1),
                                           payload=b"x" * 100, src_mac=a.mac, dst_mac=b.mac,
                                           src_ip=a.ip, dst_ip=b.ip, ev=i, dscp=26, ecn=2,
                                           ip_id=i, ttl=rng.randrange(1, 256))))
        ports = [p for sw in fab.net.switches.values() for p in sw.ports]
        loop = fab.net.loop
        t = loop.now
        for _ in range(2000):
            f = bytearray(rng.choice(base))
            kind = rng.randrange(5)
            if kind == 0:
                f = f[:rng.randrange(len(f) + 1)]
            elif kind == 1:
                for _ in range(rng.randrange(1, 4)):
                    f[rng.randrange(min(len(f), 60))] = rng.randrange(256)
            elif kind == 2:
                f[12:14] = rng.choice([b"\x86\xdd", b"\x88\x08", b"\x08\x06", b"\x12\x34"])
            elif kind == 3:
                f[23] = rng.choice([6, 17, 253, 0])
            t += rng.randrange(0, 400_000)
            loop.at(t, rng.choice(ports).on_frame, bytes(f))
        await fab.sleep_until(t + 50_000_000)
        return {"counters": fab.counters(), "now": fab.net.loop.now,
                "events": fab.net.loop.events,
                "got": [[(t, hashlib.sha256(bytes(d)).hexdigest()) for t, d in
                         fab.endpoint(i).got] for i in range(16)]}


async def main() -> None:
    out = {"core": "c" if FABRIC_CORE is not None else "python",
           "incast_v4": await incast_trim_ecn(False), "incast_v6": await incast_trim_ecn(True),
           "pfc": await pfc_incast(), "impaired": await impaired(),
           "hostile": await hostile_frames(), "mutated": await mutated_frames()}
    print(json.dumps(out, sort_keys=True, default=str))


if __name__ == "__main__":
    trio.run(main)
