"""Hostile input: a flood of SYNs with random SPDCIDs must leave PDC state bounded (NO_PDC_AVAIL
once full) and established PDCs unharmed (design principle 7; ref 3.1, 3.2)."""

from __future__ import annotations

import random

from pds_harness import A_IP, B_IP, US, Host, Net, request
from pds_script import req

from uet.pds import PdsConfig, PdsEndpoint
from uet.wire.constants import DeliveryMode, NackCode, PdsType
from uet.wire.records import PdsNack


def _flood_frames(rng: random.Random, n: int):
    out = []
    for _ in range(n):
        start = rng.randrange(1 << 32)
        off = rng.randrange(128)  # valid SYNs: each would open a PDC
        src = f"10.9.{rng.randrange(256)}.{rng.randrange(1, 255)}"
        f = req((start + off) & 0xFFFFFFFF, syn=True, start=start,
                spdcid=rng.randrange(1, 1 << 16), src=src,
                ptype=rng.choice([PdsType.RUD_REQ, PdsType.ROD_REQ]), payload=b"f" * 32)
        out.append(f)
    return out


def test_syn_flood_state_bounded_and_established_pdc_unharmed():
    limit = 32
    cfg = PdsConfig(max_target_pdcs=limit, target_idle_ps=200 * US, close_req_time_ps=400 * US,
                    msl_ps=100 * US, rto_ps=100 * US)
    a = Host(PdsEndpoint(PdsConfig(rto_ps=100 * US), A_IP, random.Random(1)))
    b = Host(PdsEndpoint(cfg, B_IP, random.Random(2)))
    net = Net([a, b], seed=3, jitter=1 * US)
    # a legitimate flow is established first
    for i in range(20):
        a.ep.submit(0, request(msg_ref=("legit", i), eom=i % 5 == 4))
    net.run(until=50 * US)
    assert len(b.delivered) == 20
    rng = random.Random(99)
    flood = _flood_frames(rng, 5000)
    nacks = {}
    for k, f in enumerate(flood):
        b.ep.receive(net.now, f)
        b.drain()
        while (out := b.ep.poll_transmit(net.now, True)) is not None:
            if isinstance(out.pds, PdsNack):
                nacks[out.pds.nack_code] = nacks.get(out.pds.nack_code, 0) + 1
        assert len(b.ep.pdcs("target")) <= limit
        if k % 500 == 0:  # the legitimate flow keeps going during the flood
            a.ep.submit(net.now, request(msg_ref=("during", k)))
            net.run(until=net.now + 20 * US)
    assert nacks.get(NackCode.NO_PDC_AVAIL, 0) >= 5000 - limit
    assert len(b.ep.mgr.by_id) <= limit + cfg.max_lingering_pdcs
    # at most one buffered out-of-order ROD packet (32 B + 64 B overhead) per flood PDC
    assert b.ep.rx_memory <= limit * 96 and not b.ep._tokens
    # the established PDC was never disturbed
    net.run(until=net.now + 100 * US)
    legit = sorted(e.msg_ref for e in a.acked)
    assert [r for r in legit if r[0] == "legit"] == [("legit", i) for i in range(20)]
    assert len([r for r in legit if r[0] == "during"]) == 10
    assert not a.failed
    # flood PDCs go idle, ask for a close nobody answers, close in error and are freed;
    # the table accepts new SYNs again
    net.run(until=net.now + 2_000 * US)
    assert len(b.ep.pdcs("target")) <= 1
    b.ep.receive(net.now, req(12345, syn=True, start=12345, spdcid=4242, src="10.9.9.9"))
    b.drain()
    assert len(b.ep.pdcs("target")) <= 2 and b.ep.counters["closed_in_error"] >= limit - 1


def test_syn_flood_with_target_start_psn_reaps_pending():
    """start_psn_mode='target': every flood SYN only creates a PENDING PDC (NEW_START_PSN);
    those are reaped after New_PDC_Time, so the table frees itself."""
    cfg = PdsConfig(max_target_pdcs=16, start_psn_mode="target", new_pdc_time_ps=50 * US)
    ep = PdsEndpoint(cfg, B_IP, random.Random(4))
    codes = []
    for f in _flood_frames(random.Random(5), 100):
        ep.receive(0, f)
        while (out := ep.poll_transmit(0, True)) is not None:
            codes.append(out.pds.nack_code)
    assert codes.count(NackCode.NEW_START_PSN) == 16
    assert codes.count(NackCode.NO_PDC_AVAIL) == 84
    ep.handle_timer(50 * US)
    assert ep.pdcs() == [] and ep.counters["pending_reaped"] == 16


def test_rod_flood_cannot_exhaust_receive_memory():
    """Out-of-order ROD packets are buffered only up to the receive-memory limit."""
    cfg = PdsConfig(max_rx_memory_bytes=10_000)
    ep = PdsEndpoint(cfg, B_IP, random.Random(6))
    s = 5000
    ep.receive(0, req(s, syn=True, start=s, ptype=PdsType.ROD_REQ))
    for k in range(2, 120):
        ep.receive(0, req(s + k, syn=True, start=s, ptype=PdsType.ROD_REQ,
                          payload=bytes(1000)))
    while ep.poll_transmit(0, True) is not None:
        pass
    assert ep.rx_memory <= 10_000 + 1064
    assert ep.counters["nack_tx.NO_PKT_BUFFER"] > 100
    assert DeliveryMode.ROD  # the buffered ones are still delivered in order later
