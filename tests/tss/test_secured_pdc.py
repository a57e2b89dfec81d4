"""Secured PDCs and job isolation between two end points (sans-IO, frames in a list).

Ref. 3.2 (secured PDCs): EXPECTED_0RTT_START (the target's Expected-PSN floor per SDI,
NACK NEW_START_PSN below it, the EPSN closing ACK), RANDOM_1RTT_START, PENDING reaped
after New_PDC_Time, close before Start_PSN + 2^31; replays after the PDC closed. And the
job isolation of docs/tss.md: BAD_JOB_ID for a request naming a job its domain (or, without
TSS, its source address) may not use, PDC_HDR_MISMATCH for a job switched mid-PDC.
"""

from __future__ import annotations

import random

import pytest

from tests.fep.fep_wire import A_IP, A_MAC, B_IP, B_MAC, Wire
from uet.endpoint.fep import FabricEndpoint
from uet.ses import TargetAddr
from uet.ses.memory import Perm
from uet.tss import TssConfig, TssSublayer
from uet.wire.codec import split_frame
from uet.wire.constants import AtomicDatatype, AtomicOpcode, NackCode
from uet.wire.constants import ReturnCode as Rc
from uet.wire.records import PdsAck, PdsNack, PdsRequest

MS = 10**9
K1 = bytes(range(32))
K2 = bytes(range(100, 132))
MEMKEY = 0x4B


def domain(job: int = 1, sdi: int = 1, key: bytes = K1, **kw) -> dict:
    return {"mode": "direct", "sdi": sdi, "key": key.hex(), "job": job, **kw}


def fep(ip: str, mac: str, tss: dict | None = None, *, job: int = 1, seed: int = 1,
        pds: dict | None = None) -> FabricEndpoint:
    from uet.endpoint.config import pds_config_from_profile

    cfg = pds_config_from_profile("hpc", pds or {})
    ep = FabricEndpoint(ip=ip, mac=mac, profile="hpc", peers={A_IP: A_MAC, B_IP: B_MAC},
                        seed=seed, job_id=job, tss=tss, pds=cfg)
    ep.ses.initiator.set_peer_cap(B_IP if ip == A_IP else A_IP, ep.profile.fep_cap)
    return ep


def region(ep: FabricEndpoint, size: int = 4096, fill: int = 0, job: int | None = None):
    mem = bytearray([fill]) * size
    ep.ses.resources.add_region(ep.job_id if job is None else job, 0, 1, MEMKEY, mem, Perm.ALL)
    return mem


def tgt(job: int = 1) -> TargetAddr:
    return TargetAddr(B_IP, job, 0, 1)


def observer(tss: dict) -> TssSublayer:
    """Reads the frames on the wire (a member's key, its own replay state)."""
    return TssSublayer(TssConfig.from_dict(tss), "10.255.0.1")


def opened(obs: TssSublayer, data: bytes):
    return obs.open_frame(0, data)


def test_expected_0rtt_floor_epsn_closing_ack_and_the_next_pdc_starts_there():
    a, b = fep(A_IP, A_MAC, domain()), fep(B_IP, B_MAC, domain(), seed=2)
    mem = region(b)
    wire = Wire(a, b)
    w = a.call(0, "write", tgt(), MEMKEY, 0, b"first")
    assert wire.run_until(lambda: w.done and not a.pds.pdcs() and not b.pds.pdcs())
    assert w.return_code == Rc.OK and mem[:5] == b"first"
    obs = observer(domain())
    acks = [f for _, src, d in wire.tap if src == B_IP
            and isinstance((f := opened(obs, d)).pds, PdsAck) and f.pds.flags & 0x40]
    assert len(acks) == 1  # the closing ACK, with the EPSN flag and B's Expected PSN
    floor = b.pds.ctx.secure_floor[1]
    assert acks[0].pds.epsn == floor and len(acks[0].pds.__class__.__slots__) > 0
    assert a.pds.ctx.secure_learned[(1, B_IP)] == floor
    # the next PDC starts at the floor: 0-RTT, no NEW_START_PSN
    w2 = a.call(wire.now, "write", tgt(), MEMKEY, 8, b"second")
    assert wire.run_until(lambda: w2.done)
    assert w2.return_code == Rc.OK and mem[8:14] == b"second"
    assert b.pds.counters["nack_tx.NEW_START_PSN"] == 0
    assert a.pds.counters["epsn_rx"] == 1
    starts = [f.pds.start_psn for _, src, d in wire.tap if src == A_IP
              and isinstance((f := opened(obs, d)).pds, PdsRequest) and f.pds.syn]
    assert starts[-1] == floor


def test_new_start_psn_recovery_below_the_floor():
    b = fep(B_IP, B_MAC, domain(), seed=2)
    b.pds.ctx.secure_floor[1] = 1 << 30  # earlier PDCs of the domain raised it
    a = fep(A_IP, A_MAC, domain(), pds={"fixed_start_psn": 5000})
    mem = region(b, 64 * 1024)
    wire = Wire(a, b)
    data = random.Random(1).randbytes(30_000)  # 8 packets sent in SYN before the NACK
    w = a.call(0, "write", tgt(), MEMKEY, 0, data)
    assert wire.run_until(lambda: w.done)
    assert w.return_code == Rc.OK and mem[:30_000] == data
    assert b.pds.counters["secure_start_below_floor"] == 1
    assert b.pds.counters["nack_tx.NEW_START_PSN"] >= 1
    assert a.pds.counters["retx.nack.NEW_START_PSN"] >= 1
    assert b.audit.duplicates == 0 and b.audit.seen == 8


def test_random_1rtt_start_always_takes_the_targets_start_psn():
    b = fep(B_IP, B_MAC, domain(), seed=2, pds={"secure_start_psn": "random_1rtt"})
    a = fep(A_IP, A_MAC, domain())
    mem = region(b)
    wire = Wire(a, b)
    for i in range(3):  # three PDCs one after the other: each starts with one NACK
        w = a.call(wire.now, "write", tgt(), MEMKEY, i, b"x")
        assert wire.run_until(lambda w=w: w.done and not a.pds.pdcs() and not b.pds.pdcs())
        assert w.return_code == Rc.OK
    assert mem[:3] == b"xxx" and b.pds.counters["nack_tx.NEW_START_PSN"] == 3


def test_pending_pdc_is_reaped_after_new_pdc_time():
    b = fep(B_IP, B_MAC, domain(), seed=2, pds={"new_pdc_time_ps": 5 * MS})
    b.pds.ctx.secure_floor[1] = 1 << 30
    a = fep(A_IP, A_MAC, domain(), pds={"fixed_start_psn": 5000, "max_retries": 1})
    region(b)
    sent = []
    # the initiator never comes back with the new Start_PSN (only its first frame passes)
    wire = Wire(a, b, drop=lambda d: (sent.append(d) or len(sent) > 1) and
                split_frame(d)[0].src_ip == A_IP)
    a.call(0, "write", tgt(), MEMKEY, 0, b"x")
    assert wire.run_until(lambda: b.pds.counters["pending_reaped"] == 1, limit_ps=50 * MS)
    assert not b.pds.pdcs() and b.pds.counters["nack_tx.NEW_START_PSN"] == 1


def test_secured_pdc_closes_before_its_psn_range_ends():
    a = fep(A_IP, A_MAC, domain(), pds={"secure_psn_range": 16})
    b = fep(B_IP, B_MAC, domain(), seed=2)
    mem = region(b, 200_000)
    wire = Wire(a, b)
    data = random.Random(2).randbytes(160_000)
    # ten messages of 4 packets: three fit a PDC of 16 PSNs (12 + the CLOSE); a message
    # never spans two PDCs
    ops = [a.call(0, "write", tgt(), MEMKEY, i * 16_000, data[i * 16_000:(i + 1) * 16_000])
           for i in range(10)]
    assert wire.run_until(lambda: all(o.done for o in ops) and not a.pds.pdcs())
    assert all(o.return_code == Rc.OK for o in ops) and mem[:160_000] == data
    assert a.pds.counters["psn_range_close"] == 3 and a.pds.counters["opened.initiator"] == 4
    assert b.audit.duplicates == 0 and b.audit.seen == 40


def test_replay_after_the_pdc_closed_applies_nothing_again():
    """The issue's scenario: a fetching ATOMIC replayed after its PDC is gone was applied
    again every time. Secured, the TSS refuses the replays; with the replay state lost
    (evicted), the Start_PSN floor still keeps them out of the SES."""
    a, b = fep(A_IP, A_MAC, domain()), fep(B_IP, B_MAC, domain(), seed=2)
    mem = region(b)
    wire = Wire(a, b)
    op = a.call(0, "atomic", tgt(), MEMKEY, 0, AtomicOpcode.SUM, AtomicDatatype.UINT64, 7,
                fetch=True)
    assert wire.run_until(lambda: op.done and not b.pds.pdcs())
    assert op.return_code == Rc.OK and int.from_bytes(mem[:8], "little") == 7
    requests = [d for _, src, d in wire.tap if src == A_IP]
    for _ in range(100):
        for d in requests:
            b.receive(wire.now, d)
    assert b.tss.counters["rx_refused.replay"] == 100 * len(requests)
    # the replay state is gone (evicted, say): while the PDC lingers it answers the
    # replayed packets as duplicates; after that the Start_PSN floor refuses the SYN
    for linger_over in (False, True):
        if linger_over:
            wire.run_until(lambda: b.pds.pdc(1) is None and not b.pds.mgr.by_id,
                           limit_ps=wire.now + 50 * MS)
        b.tss.domains[1].windows.clear()
        for d in requests:
            b.receive(wire.now, d)
        wire.run_until(lambda: False, limit_ps=wire.now + 5 * MS)
        assert int.from_bytes(mem[:8], "little") == 7  # applied once
    assert b.pds.counters["secure_start_below_floor"] >= 1
    assert b.pds.counters["nack_tx.NEW_START_PSN"] >= 1


def test_cleartext_is_refused_by_a_secured_end_point_and_tss_by_a_plain_one():
    a, b = fep(A_IP, A_MAC), fep(B_IP, B_MAC, domain(), seed=2)
    mem = region(b, fill=0x11)
    wire = Wire(a, b)
    a.call(0, "write", tgt(), MEMKEY, 0, b"plain")
    wire.run_until(lambda: False, limit_ps=30 * MS)
    assert b.tss.counters["rx_refused.cleartext"] > 0 and mem[:5] == b"\x11" * 5
    # a plain end point never takes a TSS frame for cleartext (the issue: "answered")
    a2, b2 = fep(A_IP, A_MAC, domain()), fep(B_IP, B_MAC, seed=2)
    mem2 = region(b2, fill=0x11)
    wire2 = Wire(a2, b2)
    a2.call(0, "write", tgt(), MEMKEY, 0, b"plain")
    wire2.run_until(lambda: False, limit_ps=30 * MS)
    assert b2.counters["rx_tss_without_domain"] > 0 and mem2[:5] == b"\x11" * 5
    assert b2.counters["tx_control"] == 0  # nothing answered


def test_member_without_the_key_gets_nothing_through():
    a = fep(A_IP, A_MAC, domain(key=K2))
    b = fep(B_IP, B_MAC, domain(), seed=2)
    mem = region(b, fill=0x11)
    wire = Wire(a, b)
    w = a.call(0, "write", tgt(), MEMKEY, 0, b"x" * 100)
    wire.run_until(lambda: w.done, limit_ps=5000 * MS)
    assert w.done and w.return_code != Rc.OK
    assert b.tss.counters["rx_refused.auth_fail"] > 0 and mem == bytearray([0x11]) * 4096
    assert b.counters["tx_control"] == 0


OPS = ["write", "read", "send", "atomic"]


def _op(ep: FabricEndpoint, now: int, kind: str, job: int):
    t = tgt(job)
    if kind == "write":
        return ep.call(now, "write", t, MEMKEY, 0, b"evil")
    if kind == "read":
        return ep.call(now, "read", t, MEMKEY, 0, 16)
    if kind == "send":
        return ep.call(now, "send", TargetAddr(B_IP, job, 0, 0), b"evil")
    return ep.call(now, "atomic", t, MEMKEY, 0, AtomicOpcode.SUM, AtomicDatatype.UINT64, 1,
                   fetch=True)


MALLORY = {  # a member of job 1's domain that names job 2, per key mode
    "direct": (domain(job=1), domain(job=2)),
    "cluster": (domain(job=1, mode="cluster"), domain(job=2, mode="cluster")),
    "server": (domain(job=1, mode="server", role="server"),
               domain(job=2, mode="server", role="client")),
}


@pytest.mark.parametrize("mode", list(MALLORY))
@pytest.mark.parametrize("kind", OPS)
def test_cross_job_requests_are_refused_bad_job_id(mode, kind):
    b_cfg, mallory_cfg = MALLORY[mode]
    b = fep(B_IP, B_MAC, {"domains": [b_cfg, {**domain(job=2, sdi=2, key=K2),
                                              "mode": b_cfg["mode"],
                                              **({"role": "server"} if mode == "server"
                                                 else {})}]}, seed=2)
    mallory = fep(A_IP, A_MAC, mallory_cfg, job=2)
    job2 = region(b, fill=0x22, job=2)  # job 2's memory, reachable only through SDI 2
    recv = b.post_recv(0, bytearray(64), job_id=2, register=True)
    wire = Wire(mallory, b)
    op = _op(mallory, 0, kind, 2)
    assert wire.run_until(lambda: op.done)
    assert op.return_code == Rc.BAD_JOB_ID, (kind, op.return_code)
    assert job2 == bytearray([0x22]) * 4096 and not recv.done
    assert b.counters["rx_job_refused"] >= 1


@pytest.mark.parametrize("kind", OPS)
def test_non_secure_fallback_table(kind):
    """Without TSS the job a source address may use is a table: the job it is not listed
    for is refused; what the table cannot see is a spoofed address (docs/tss.md)."""
    b = fep(B_IP, B_MAC, {"job_sources": {A_IP: [1]}}, seed=2, job=2)
    a = fep(A_IP, A_MAC, job=1)
    job2 = region(b, fill=0x22)
    recv = b.post_recv(0, bytearray(64))
    wire = Wire(a, b)
    op = _op(a, 0, kind, 2)
    assert wire.run_until(lambda: op.done)
    assert op.return_code == Rc.BAD_JOB_ID and job2 == bytearray([0x22]) * 4096
    assert not recv.done


def test_a_job_switched_mid_pdc_is_nacked_pdc_hdr_mismatch():
    b = fep(B_IP, B_MAC, {"job_sources": {A_IP: [1, 2]}}, seed=2, job=1)
    a = fep(A_IP, A_MAC, job=1)
    mem1 = region(b, fill=0x11)
    mem2 = region(b, fill=0x22, job=2)
    wire = Wire(a, b)
    w = a.call(0, "write", tgt(1), MEMKEY, 0, b"ok")
    assert wire.run_until(lambda: w.done) and w.return_code == Rc.OK
    assert mem1[:2] == b"ok"
    # a request on the same PDC (its DPDCID and the next PSN) naming job 2
    ini = a.pds.pdcs("initiator")[0]
    sent = [d for _, src, d in wire.tap if src == A_IP]
    from uet.wire.codec import decode_frame, encode_frame

    f = decode_frame(sent[0], udp_port=None)
    f.pds = PdsRequest(f.pds.type, f.pds.next_hdr, 0x08, -1, ini.next_psn, ini.pdc_id,
                       ini.dpdcid)
    f.ses.job_id = 2
    b.receive(wire.now, encode_frame(f))
    frames = []
    while (d := b.pop_control(wire.now)) is not None:
        frames.append(decode_frame(d, udp_port=None))
    nacks = [x.pds for x in frames if isinstance(x.pds, PdsNack)]
    assert [n.nack_code for n in nacks] == [NackCode.PDC_HDR_MISMATCH]
    assert mem2 == bytearray([0x22]) * 4096 and b.counters["rx_job_switched"] == 1
