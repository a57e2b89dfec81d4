"""The four failures issue 13 reported, each as it was found (the public APIs, the same
scenario), each failing on the tree before its fix:

1. a 3-host star (HPC profile) with 10% loss on one host's links and 300 mixed operations:
   an initiator blocked on the peer window whose CLEAR's ACK was lost stalled for ever
   (11 of 300 operations never ended for this seed: ``FabricStalled``);
2. half-received multi-packet messages kept their reassembly slots for ever, so after
   ``reassembly_max_messages`` of them every multi-packet WRITE got NACK NO_SES_MSG_AVAIL;
3. ``FabricEndpoint.completions`` was never drained: ``uet serve`` kept every receive
   buffer (49 MB -> 829 MB RSS after 12,000 small SENDs);
4. a burst of SYNs made ``uet serve`` run its idle / close timers before the datagrams
   already waiting in its socket (tests/soak/test_serve_flood.py has the live burst).
"""

from __future__ import annotations

import contextlib
import random

from uet.runtime.fabric import Fabric, FabricStalled
from uet.wire.constants import ReturnCode


async def test_lost_clear_ack_on_a_lossy_star_no_longer_stalls_operations():
    """Failure 1: SEND / WRITE / fetching ATOMIC of 0-100 KB, 10% loss on h0's links."""
    seed = 8
    rng = random.Random(seed)
    topo = {"kind": "star", "hosts": 3,
            "impairments": [{"at": "h0", "direction": "both", "loss": 0.1}]}
    async with Fabric(topo, profile="hpc", seed=seed) as fab:
        hosts = fab.hosts
        mems = [bytearray(4 << 20) for _ in hosts]
        for h, m in zip(hosts, mems, strict=True):
            h.register(m, key=1, index=1)
        counter = bytearray(8)
        hosts[0].register(counter, key=2, index=2, perms="a")
        ops, recvs, sent = [], [], [[] for _ in hosts]
        for k in range(300):
            s, d = rng.sample(range(3), 2)
            kind = rng.choice(["send", "write", "amo"])
            size = rng.randrange(0, 100_000)
            data = random.Random(k).randbytes(size)
            if kind == "write":
                off = rng.randrange(0, (4 << 20) - size)
                op = hosts[s].write(hosts[d], 1, off, data, index=1)
            elif kind == "send":
                recvs.append((d, hosts[d].post_recv(size)))
                op = hosts[s].send(hosts[d], data)
                sent[d].append(data)
            elif s != 0:  # the counter on h0
                op = hosts[s].atomic(0, 2, 0, "SUM", "UINT64", 1, fetch=True, index=2)
            else:  # h0's own atomics go to h1's region
                op = hosts[s].atomic(1, 1, 0, "SUM", "UINT64", 1, fetch=True, index=1)
            ops.append(op)
            if rng.random() < 0.3:
                await fab.sleep(rng.randrange(0, 20_000_000))
        with contextlib.suppress(FabricStalled):  # it stalled before the fix
            await fab.wait_until(lambda: all(op.done for op in ops))
        hung = [op for op in ops if not op.done]
        assert not hung, f"{len(hung)} of {len(ops)} operations never ended: {hung[:3]}"
        assert all(op.op.return_code == ReturnCode.OK for op in ops)
        # every message arrived intact (untagged receives of one host take its messages in
        # arrival order, truncated to the receive's buffer: each one received is the start
        # of one that was sent there, with its full length reported)
        for d, r in recvs:
            rr = r.result()
            assert any(len(x) == rr.request_length and x.startswith(rr.data) for x in sent[d])
        # the scenario did hit the peer window (MP_RANGE 128 PSNs, CACK held by stored
        # responses) and lost frames
        stats = [fab.endpoint(i).stats for i in range(3)]
        assert sum(st.get("pds.blocked.peer_window", 0) for st in stats) > 0
        assert sum(c.get("drop.loss", 0) for c in fab.counters()["link"].values()) > 100


def _half_write(ep, dst: str, msg_id: int, job: int, tc: int) -> None:
    """The first 4 KiB of an 8 KiB WRITE into the sink, handed straight to ``ep``'s PDS: a
    sender that never sends the rest (what loss does slowly, and any peer can do)."""
    from uet.endpoint.fep import SINK_INDEX, SINK_KEY
    from uet.pds import SendRequest
    from uet.wire.constants import DeliveryMode, SesFlag, SesOpcode
    from uet.wire.records import SesStandard

    ses = SesStandard(opcode=SesOpcode.WRITE, flags=int(SesFlag.SOM | SesFlag.REL),
                      job_id=job, resource_index=SINK_INDEX, memory_key=SINK_KEY,
                      initiator=ep.ses.initiator_id, message_id=msg_id, request_length=8192)
    ep.pds.submit(0, SendRequest(dst, DeliveryMode.RUD, job, tc, ses, None, bytes(4096),
                                 ("half", msg_id), True))


def test_half_received_messages_free_their_slots_when_their_pdc_closes():
    """Failure 2: 1,100 WRITEs of which only the first packet is sent fill the target's
    1,024 reassembly slots (hpc ``reassembly_max_messages``); once the sender's PDC closes,
    their slots must be free again and a legitimate multi-packet WRITE must complete.
    Before the fix they stayed for ever and every later WRITE got NO_SES_MSG_AVAIL."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fep"))
    from fep_wire import A_IP, B_IP, Wire, pair

    from uet.endpoint.fep import SINK_INDEX, SINK_KEY

    a, b = pair("hpc", sink_bytes=1 << 20)
    wire = Wire(a, b)
    for mid in range(1100):
        _half_write(a, B_IP, mid, a.job_id, tc=1)  # tc 1: a PDC of its own
    a.pump(0)
    assert wire.run_until(lambda: len(b.ses.target.reassembly.active) == 1024, 10**9)
    # the half messages' PDC ends (the refused packets run out of retries; the target
    # is asked to close); its messages in progress are abandoned at once
    assert wire.run_until(lambda: not b.ses.target.reassembly.active, 60 * 10**12)
    assert b.ses.counters["reassembly_dropped_on_close"] >= 1024
    data = random.Random(2).randbytes(40_000)  # 10 packets
    op = a.call(wire.now, "write", a.target(B_IP, resource_index=SINK_INDEX), SINK_KEY, 0,
                data)
    assert wire.run_until(lambda: op.done, wire.now + 60 * 10**12)
    assert op.return_code == ReturnCode.OK, op.reason
    assert bytes(b.sink[:len(data)]) == data
    assert A_IP in {k[0] for k in b.ses.target.reassembly._history}


def test_the_serve_end_point_keeps_no_completed_receive():
    """Failure 3: every SEND ``uet serve`` receives completes one of its 64 KiB receives
    (the well-known setup keeps 8 posted, reposting as they complete); the end point kept
    each completion, so every buffer stayed alive (49 MB -> 829 MB RSS after 12,000
    SENDs). Now it keeps none it does not need: memory stays flat."""
    import gc
    import sys
    import tracemalloc
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fep"))
    from fep_wire import A_IP, A_MAC, B_IP, B_MAC, Wire

    from uet.conformance.driver import FepDriver
    from uet.conformance.setup import WELL_KNOWN
    from uet.endpoint.fep import FabricEndpoint

    drv = FepDriver(WELL_KNOWN, B_IP)
    b = drv.ep
    b.peer_macs[A_IP] = A_MAC
    a = FabricEndpoint(ip=A_IP, mac=A_MAC, profile="hpc", peers={B_IP: B_MAC}, seed=3,
                       job_id=WELL_KNOWN.job_id)
    a.ses.initiator.set_peer_cap(B_IP, b.profile.fep_cap)
    wire = Wire(a, b)
    recv_index = WELL_KNOWN.resource("recv").index
    tgt = a.target(B_IP, job_id=WELL_KNOWN.job_id, resource_index=recv_index)

    def sends(n: int) -> None:
        for _ in range(n // 4):
            ops = [a.call(wire.now, "send", tgt, b"x" * 64) for _ in range(4)]
            assert wire.run_until(lambda ops=ops: all(op.done for op in ops))
            assert all(op.return_code == ReturnCode.OK for op in ops)

    sends(100)
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    sends(600)
    gc.collect()
    grown = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert drv.counters["recv_completed"] == 700
    assert len(b.completions) == 0
    # 600 completed 64 KiB receives would be 39 MB; allow bookkeeping (history FIFOs)
    assert grown < 4 << 20, f"{grown / 1e6:.1f} MB retained"


async def test_datagrams_already_received_run_before_timers_and_before_new_state():
    """Failure 4's root cause: the live loop ran the end point's timers (idle, Close_REQ_Time)
    while datagrams from established peers were still waiting in its socket, behind a SYN
    burst, so a peer that was alive looked silent. Now each tick first takes every datagram
    already queued, established state first and a bounded budget of state-opening ones,
    then the timers due."""
    import os
    import socket

    import trio

    from uet.runtime.udp import DatagramLoop

    net = 64 + os.getpid() % 150
    ip, peer = f"127.93.{net}.1", f"127.93.{net}.2"
    syn = bytes([0x10, 0x04]) + bytes(30)  # RUD_REQ (type 2) with SYN
    ack = bytes([0x38, 0x00]) + bytes(10)  # ACK (type 7)
    log: list[str] = []

    class Driver:
        due = 0  # a timer already due when the loop starts

        def datagram_in(self, now, payload, src_ip, ev, tos=0):
            log.append("syn" if payload[1] & 0x04 else "ack")

        def datagrams_out(self, now):
            return []

        def next_deadline(self):
            return self.due

        def handle_timer(self, now):
            log.append("timer")
            self.due = None

    client = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    client.bind((peer, 0))
    async with DatagramLoop(Driver(), ip, 4793) as loop:
        for i in range(400):  # queued before the loop's first tick: 300 SYNs, then 100 ACKs
            client.sendto(syn if i < 300 else ack, (ip, 4793))
        with trio.fail_after(10):
            while log.count("syn") + log.count("ack") < 400:
                await trio.sleep(0.01)
    client.close()
    first_timer = log.index("timer")
    before = log[:first_timer]
    assert before.count("ack") == 100, before.count("ack")  # every established datagram
    assert log.index("ack") < log.index("syn")  # served before the burst
    assert before.count("syn") <= 64  # a bounded budget of new state per tick
    assert loop.counters["ticks"] >= 2
