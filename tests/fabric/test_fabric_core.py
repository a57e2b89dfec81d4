"""The fabric's per-frame path in C (``uet/native/fabric_core.c``: ports, switch ports,
channels) against its Python reference (port.py, switch.py, link.py): the same scenarios
give the same events, counters, deliveries and captures byte for byte, and the C types keep
the Python classes' contracts (ECN marking, queue limits, errors, garbage collection)."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import weakref
from pathlib import Path

import pytest

from uet.fabric.eventlog import EventLog
from uet.fabric.link import Link
from uet.fabric.qos import QosConfig
from uet.fabric.scheduler import FABRIC_CORE, EventLoop, PyEventLoop
from uet.fabric.switch import PySwitchCore, PySwitchPortCore, Switch, SwitchPort
from uet.wire.codec import get_dscp_ecn, mark_ce

from .helpers import data_frame

SCENARIOS = Path(__file__).with_name("fabric_core_scenarios.py")
PURE = os.environ.get("UET_PURE_PYTHON", "").strip() not in ("", "0")


def _scenarios(pure: bool) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "UET_PURE_PYTHON"}
    if pure:
        env["UET_PURE_PYTHON"] = "1"
    out = subprocess.run([sys.executable, str(SCENARIOS)], capture_output=True, text=True,
                         env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout)


def _total(counters: dict, kind: str, prefix: str) -> int:
    return sum(v for cs in counters[kind].values() for k, v in cs.items()
               if k.startswith(prefix) and isinstance(v, int))


def test_c_and_python_paths_run_the_same_fabric() -> None:
    """Incasts over IPv4 and IPv6 (ECN, trimming, ECMP), PFC, every link impairment,
    malformed frames and 2,000 seeded mutations of real frames (cuts, header bytes,
    ethertypes, protocols) at random switch ports: C and Python agree on every counter,
    event, delivery and frame."""
    c, py = _scenarios(pure=False), _scenarios(pure=True)
    assert (c.pop("core"), py.pop("core")) == ("c", "python")
    for name in c:
        assert c[name] == py[name], f"scenario {name}: the C and Python paths differ"
    # the scenarios reach what they are for
    for name in ("incast_v4", "incast_v6"):
        cs = c[name]["counters"]
        assert all(c[name]["done"]) and _total(cs, "port", "trimmed") > 100
        assert _total(cs, "port", "ecn_marked") > 100
    pfc = c["pfc"]["counters"]
    assert all(c["pfc"]["done"]) and _total(pfc, "port", "pause_tx") > 0
    assert _total(pfc, "port", "drop.") == 0
    imp = c["impaired"]["counters"]["link"]
    assert all(c["impaired"]["done"])
    for key in ("drop.loss", "drop.burst_loss", "drop.link_down", "corrupted", "duplicated"):
        assert _total(c["impaired"]["counters"], "link", key) > 0, key
    assert any(v.get("rate_bps") == 25 * 10**9 for v in imp.values())
    port = c["hostile"]["counters"]["port"]["sw0.p0"]
    assert (port["drop.malformed"], port["drop.ethertype"], port["drop.no_route"]) == (5, 1, 4)
    assert port["pause_rx"] == 1  # a PAUSE frame from h0 paused the switch port toward it
    assert [len(g) for g in c["hostile"]["got"]] == [0, 16, 24]
    mutated = c["mutated"]["counters"]["port"]
    for key in ("drop.malformed", "drop.ethertype", "drop.no_route", "drop.mac_control"):
        assert _total(c["mutated"]["counters"], "port", key) > 0, key
    assert sum(len(g) for g in c["mutated"]["got"]) > 1000 and len(mutated) == 80


def test_the_c_path_is_the_one_in_use() -> None:
    """pip install builds it; without UET_PURE_PYTHON the fabric's ports run on it."""
    if PURE:
        assert FABRIC_CORE is None and issubclass(SwitchPort, PySwitchPortCore)
    else:
        assert FABRIC_CORE is not None and EventLoop is FABRIC_CORE.EventLoop
        assert issubclass(SwitchPort, FABRIC_CORE.SwitchPortCore)


def _switch(loop=None) -> tuple[Switch, SwitchPort, SwitchPort]:
    loop = loop if loop is not None else EventLoop()
    log = EventLog()
    sw = Switch("sw", loop, log, qos=QosConfig(), seed=1, ecmp_seed=2)
    a, b = sw.add_port("02:00:00:00:00:01"), sw.add_port("02:00:00:00:00:02")
    Link(a.name, "x", loop, 100 * 10**9, 1000, log)  # unused: a port needs no cable to queue
    return sw, a, b


@pytest.mark.parametrize("ecn", [0, 1, 2, 3])
@pytest.mark.parametrize("v6", [False, True])
def test_ecn_marks_like_the_codec(ecn: int, v6: bool) -> None:
    """Above kmax every ECT frame leaves with CE and a valid IPv4 checksum, as
    ``codec.mark_ce`` writes it; Not-ECT and CE frames leave unchanged."""
    from uet.fabric.endpoint import HostContext

    qos = QosConfig()
    ips = ("fd00::1", "fd00::2") if v6 else ("10.0.0.1", "10.0.0.2")
    hosts = [HostContext(index=i, name=f"h{i}", ip=ip, mac=f"02:00:00:00:00:0{i + 1}",
                         rate_bps=10**11, qos=qos, seed=i) for i, ip in enumerate(ips)]
    frame = data_frame(hosts[0], hosts[1], payload=500, ecn=ecn)
    _, port, _ = _switch()
    port.set_ecn(0, 0, 1)
    port.set_limit(0, 1 << 20)
    port.queued = 0
    port.wake_pending = True  # keep it queued: no cable to send on
    port.enqueue(frame, 0, frame[15], None)
    assert port.qbytes[0] == len(frame) and port.hwm[0] == len(frame)
    out = port._dequeue(0)
    want = bytearray(frame)
    mark_ce(want)
    assert out == bytes(want) and port.qbytes[0] == 0
    assert get_dscp_ecn(out)[1] == (3 if ecn else 0)
    assert port.ecn_marked == (1 if ecn in (1, 2) else 0)
    assert port._dequeue(0) is None
    # the sampler's total over every class
    port.set_limit(1, 1 << 20)
    port.enqueue(frame, 0, frame[15], None)
    port.enqueue(frame, 1, frame[15], None)
    assert port.qtotal == 2 * len(frame) == sum(port.qbytes) and port.qbytes[1] == len(frame)
    assert port._dequeue(0) is not None and port.qtotal == len(frame)
    assert port._dequeue(0) is not None and port.qtotal == 0


def test_the_python_core_totals_its_classes_as_the_c_one() -> None:
    core = PySwitchPortCore.__new__(PySwitchPortCore)
    assert core.qtotal == 0
    core.qbytes[2], core.qbytes[7] = 4150, 64
    assert core.qtotal == 4214


def test_limits_thresholds_and_queues_read_back() -> None:
    _, port, _ = _switch()
    port.set_limit(3, 12345)
    port.set_ecn(3, 100, 200)
    assert port.limit[3] == 12345 and (port.kmin[3], port.kmax[3]) == (100, 200)
    assert port.queue_len(3) == 0
    with pytest.raises((IndexError, ValueError)):
        port.set_limit(8, 1)


@pytest.mark.skipif(FABRIC_CORE is None, reason="the route table is the C path's")
def test_the_route_table_holds_known_destinations_only() -> None:
    """The C path keeps a table of the IPv4 destinations a switch looked up (route_lookup):
    it enters only destinations the switch's dicts hold and shares their few distinct
    answers, so a flood of frames to unknown addresses (seeded) adds nothing; a change of
    either dict empties it, and the next frames follow the change."""
    import random

    from uet.fabric.endpoint import HostContext

    loop = EventLoop()
    sw, a, b = _switch(loop)
    c = sw.add_port("02:00:00:00:00:03")
    qos = QosConfig()
    hosts = [HostContext(index=i, name=f"h{i}", ip=f"10.0.{i // 200}.{i % 200 + 1}",
                         mac="02:00:00:00:01:01", rate_bps=10**11, qos=qos, seed=i)
             for i in range(300)]
    for h in hosts[1:]:
        sw.add_route(bytes(int(x) for x in h.ip.split(".")), [b, c])  # one shared answer
    for p in (b, c):
        p.queued = 0
        p.wake_pending = True  # keep what is queued: no cable to send on
        p.set_limit(0, 1 << 30)
    for i, h in enumerate(hosts[1:]):
        loop.at(i, a.on_frame, data_frame(hosts[0], h, payload=64))
    loop.run()
    t = sw.route_table
    assert t == {"entries": 299, "slots": 1024, "answers": 1}
    assert b.queue_len(0) + c.queue_len(0) == 299
    rng = random.Random(11)
    unknown = [HostContext(index=0, name="x", ip=f"10.{rng.randrange(1, 256)}.{rng.randrange(256)}"
                           f".{rng.randrange(256)}", mac="02:00:00:00:01:02", rate_bps=10**11,
                           qos=qos, seed=0) for _ in range(2000)]
    for i, h in enumerate(unknown):
        loop.at(1000 + i, a.on_frame, data_frame(hosts[0], h, payload=64))
    loop.run()
    assert sw.route_table == t and a.drops["no_route"] == 2000
    # a new route for a known destination: the table is emptied, and the frame follows it
    sw.add_route(bytes(int(x) for x in hosts[1].ip.split(".")), [c])
    before = c.queue_len(0)
    loop.at(10_000, a.on_frame, data_frame(hosts[0], hosts[1], payload=64))
    loop.run()
    assert c.queue_len(0) == before + 1
    assert sw.route_table["entries"] == 1


def test_a_failing_tap_stops_the_run_with_its_error() -> None:
    """An exception raised inside the per-frame path (here by a tap) ends ``run()`` with it,
    like any event's; the loop stays usable."""
    loop = EventLoop()
    sw, a, b = _switch(loop)
    from uet.fabric.endpoint import HostContext

    qos = QosConfig()
    h = [HostContext(index=i, name=f"h{i}", ip=f"10.0.0.{i + 1}", mac=f"02:00:00:00:01:0{i}",
                     rate_bps=10**11, qos=qos, seed=i) for i in range(2)]
    frame = data_frame(h[0], h[1], payload=100)
    sw.add_route(bytes([10, 0, 0, 2]), [b])

    def boom(now, data, direction):
        raise RuntimeError("tap failed")

    a.taps.append(boom)
    loop.at(5, a.on_frame, frame)
    with pytest.raises(RuntimeError, match="tap failed"):
        loop.run()
    a.taps.clear()
    loop.at(6, a.on_frame, frame)
    with pytest.raises(AttributeError):
        loop.run()  # b has no cable: it cannot transmit
    assert b.queue_len(0) == 0 and b.tx_frames == 0


def test_ports_and_their_events_are_collected() -> None:
    """Ports, the loop and the frames queued in C form cycles the collector frees."""
    loop = EventLoop()
    sw, a, b = _switch(loop)
    b.queued = 0
    b.wake_pending = True
    b._admit(0, b"x" * 100, None)
    loop.at(10**6, a.kick)
    refs = [weakref.ref(x) for x in (sw, a, b)]
    del sw, a, b, loop
    gc.collect()
    assert [r() for r in refs] == [None] * 3


def test_a_python_event_loop_drives_the_c_ports() -> None:
    """The C ports push through any loop's ``push`` (here the Python core's)."""
    ref = _one_hop(EventLoop())
    assert _one_hop(PyEventLoop()) == ref and ref[0] == 3


def _one_hop(loop) -> tuple[int, list]:
    from uet.fabric.endpoint import HostContext

    log = EventLog()
    sw = Switch("sw", loop, log, qos=QosConfig(), seed=1, ecmp_seed=2)
    a, b = sw.add_port("02:00:00:00:00:01"), sw.add_port("02:00:00:00:00:02")
    got: list = []

    class Sink:
        def on_frame(self, data):
            got.append((loop.now, data))

    link = Link(b.name, "sink", loop, 100 * 10**9, 1000, log)
    b.channel = link.ab
    link.ab.rx = Sink()
    qos = QosConfig()
    h = [HostContext(index=i, name=f"h{i}", ip=f"10.0.0.{i + 1}", mac=f"02:00:00:00:01:0{i}",
                     rate_bps=10**11, qos=qos, seed=i) for i in range(2)]
    sw.add_route(bytes([10, 0, 0, 2]), [b])
    for i in range(3):
        loop.at(i, a.on_frame, data_frame(h[0], h[1], psn=i, payload=1000))
    loop.run()
    return len(got), got


def test_the_switch_must_be_a_switch() -> None:
    """The C path reads the switch's tables by layout, so it takes a switch only (the
    Python reference reads them by name and takes what it is given)."""
    sw, port, _ = _switch()
    if FABRIC_CORE is not None:
        with pytest.raises(TypeError, match="SwitchCore"):
            port.switch = object()
        assert port.switch is sw
    else:
        port.switch = sw
        assert port.switch is sw and isinstance(sw, PySwitchCore)


class _Ep:
    """A scripted end point: sends ``out``, records arrivals, one timer at ``deadline``."""

    def __init__(self, out=(), deadline=None, fail=False):
        self.out, self.got, self.deadline, self.fail, self.fired = list(out), [], deadline, fail, []

    def receive(self, now, data):
        if self.fail:
            raise ValueError("end point failed")
        self.got.append((now, data))

    def pop_control(self, now):
        return None

    def pop_data(self, now):
        return self.out.pop(0) if self.out else None

    def next_deadline(self):
        return self.deadline

    def handle_timer(self, now):
        self.fired.append(now)
        self.deadline = None


def _two_nics(loop, ep_a, ep_b):
    from uet.fabric.nic import Nic

    log, qos = EventLog(), QosConfig()
    a = Nic("h0", 0, loop, log, "02:00:00:00:00:01", qos)
    b = Nic("h1", 1, loop, log, "02:00:00:00:00:02", qos)
    link = Link(a.name, b.name, loop, 100 * 10**9, 1000, log)
    a.channel, b.channel = link.ab, link.ba
    link.ab.rx, link.ba.rx = b, a
    a.ep, b.ep = ep_a, ep_b
    return a, b


@pytest.mark.parametrize("make_loop", [EventLoop, PyEventLoop], ids=["c-loop", "py-loop"])
def test_nics_send_receive_and_fire_timers(make_loop) -> None:
    """Two NICs back to back under either loop: frames arrive at serialisation + delay,
    the end point's timer fires once at its deadline, counters add up."""
    loop = make_loop()
    frames = [bytes([0] * 12) + b"\x08\x00" + bytes([0x45, 0]) + bytes(84 + i) for i in range(3)]
    a, b = _two_nics(loop, _Ep(frames), _Ep(deadline=5_000_000))
    a.poke()
    b.poke()
    loop.run()
    got = b.ep.got
    assert [d for _, d in got] == frames
    assert got[0][0] == len(frames[0]) * 80 + 1_000  # 100 Gb/s: 80 ps a byte, 1 ns cable
    assert b.ep.fired == [5_000_000] and b.timers == 1 and b.timer_at is None
    assert (a.tx_frames, b.rx_frames, b.delivered) == (3, 3, 3)
    assert a.channel.tx_frames == 3 and a.channel.tx_bytes == sum(map(len, frames))


def test_an_end_point_error_stops_the_run() -> None:
    loop = EventLoop()
    frame = bytes(12) + b"\x08\x00" + bytes([0x45, 0]) + bytes(100)
    a, b = _two_nics(loop, _Ep([frame]), _Ep(fail=True))
    a.poke()
    with pytest.raises(ValueError, match="end point failed"):
        loop.run()
    assert b.rx_frames == 1 and b.delivered == 1


async def test_a_star_of_600_hosts_builds_and_delivers() -> None:
    """A switch with more than 256 ports gets valid MACs (bytes 5-6 carry the port)."""
    from uet.bench.traffic_endpoint import factory as traffic
    from uet.runtime.fabric import Fabric

    async with Fabric({"kind": "star", "hosts": 600}, seed=1,
                      endpoint_factory=traffic()) as fab:
        ports = fab.net.switches["sw0"].ports
        assert len({p.mac for p in ports}) == 600 and ports[300].mac.hex() == "02ff0000012c"
        msgs = await fab.run_messages([(599, 1, 8192), (2, 598, 8192)])
        assert all(m.done for m in msgs)


def test_missing_parts_raise_instead_of_crashing() -> None:
    """A NIC whose end point was deleted, a switch whose routes a tap replaced by a
    non-dict: Python exceptions out of run(), never a crash (C: TypeError naming the
    tables; Python: the AttributeError of a list without get)."""
    loop = EventLoop()
    frame = bytes(12) + b"\x08\x00" + bytes([0x45, 0]) + bytes(100)
    a, b = _two_nics(loop, _Ep([frame]), _Ep())
    del a.ep
    with pytest.raises(AttributeError):
        a.poke()
    sw, p, q = _switch(loop)

    def swap(now, data, direction):
        sw.direct = [1]

    p.taps.append(swap)
    loop.at(loop.now, p.on_frame, data_frame_v4())
    if FABRIC_CORE is not None:
        with pytest.raises(TypeError, match="dicts"):
            loop.run()
    else:
        with pytest.raises(AttributeError, match="get"):
            loop.run()


def data_frame_v4() -> bytes:
    from uet.fabric.endpoint import HostContext

    qos = QosConfig()
    h = [HostContext(index=i, name=f"h{i}", ip=f"10.0.0.{i + 1}", mac=f"02:00:00:00:01:0{i}",
                     rate_bps=10**11, qos=qos, seed=i) for i in range(2)]
    return data_frame(h[0], h[1], payload=100)
