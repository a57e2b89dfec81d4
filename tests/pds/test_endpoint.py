"""End-point behaviour that spans both sides: timers at flow end, observability, limits and
configuration errors."""

from __future__ import annotations

import random

import pytest
from pds_harness import A_IP, B_IP, MS, US, Host, Net, pair, request

from uet.pds import PdcLimitError, PdsConfig, PdsEndpoint
from uet.pds.config import PdsConfigError
from uet.pds.retransmit import RtoEstimator
from uet.wire.constants import DeliveryMode, PdsType
from uet.wire.records import PdsAckCc


def test_flow_ending_with_reordering_is_acked_by_the_receiver_timer():
    """htsim anchors: a flow whose last packets arrive reordered is fully acknowledged within
    about the ACK timer, not after an RTO (5 ms)."""
    held = {}
    start = 50_000

    def drop(f):  # hold back packet start+4 until after the EOM packet start+8
        if f.pds.type == PdsType.RUD_REQ and f.pds.psn == start + 4 and "x" not in held:
            held["x"] = f
            return True
        return False

    # sack_dupthresh=0: only the receiver timer may acknowledge the straggler in time
    a, b = pair(PdsConfig(close_idle_ps=0, fixed_start_psn=start, sack_dupthresh=0),
                PdsConfig(ack_timer_ps=2 * US))
    net = Net([a, b], seed=1, delay=1 * US, drop=drop)
    a.ep.submit(0, request(msg_ref="first"))
    net.run(until=10 * US)  # established: no more SYN
    for i in range(8):
        a.ep.submit(net.now, request(msg_ref=i, eom=i == 7, payload=bytes(1000)))
    net.run(until=net.now + 1 * US + 500_000)  # burst arrived, its SACK not back yet
    assert not held["x"].pds.syn and len(a.acked) < 9
    b.ep.receive(net.now, held["x"])  # the straggler arrives after the EOM packet
    b.drain()
    t_arrival = net.now
    net.run(until=50 * US)
    assert sorted(e.msg_ref for e in a.acked if e.msg_ref != "first") == list(range(8))
    assert b.ep.counters["ack_timer"] >= 1
    assert net.now < 1 * MS and a.ep.counters["retx.rto"] == 0
    last_ack = max(t for t, f in net.sent if isinstance(f.pds, PdsAckCc))
    assert last_ack - t_arrival <= 2 * US


def test_log_hook_reports_pdc_lifecycle_retransmits_and_nacks():
    """Design principle 6: pdc_open, retransmit(psn, cause), nack_tx(code, why), nack_rx,
    pdc_close reach the structured log hook."""
    log = []

    def hook(now, kind, **fields):
        log.append((now, kind, fields))

    a, b = pair(PdsConfig(close_idle_ps=10 * US, rto_ps=100 * US),
                PdsConfig(rod_buffer_packets=1), log=hook)
    net = Net([a, b], seed=2, jitter=3 * US)
    for i in range(10):
        a.ep.submit(0, request(msg_ref=i, mode=DeliveryMode.ROD))
    net.run()
    kinds = {k for _, k, _ in log}
    assert {"pdc_open", "pdc_close", "retransmit", "nack_tx", "nack_rx"} <= kinds
    nack_tx = [f for _, k, f in log if k == "nack_tx"]
    assert all(f["code"] == "ROD_OOO" and "reorder buffer" in f["why"] for f in nack_tx)
    rt = [f for _, k, f in log if k == "retransmit"]
    assert all(f["cause"].startswith(("nack.", "rack", "rto", "ack_req")) for f in rt)
    assert a.ep.counters["nack_rx.ROD_OOO"] == b.ep.counters["nack_tx.ROD_OOO"] > 0
    assert sorted(e.msg_ref for e in a.acked) == list(range(10))


def test_counters_cover_traffic():
    """Counters: opened/closed, bytes, ACKs sent/received."""
    a, b = pair(PdsConfig(close_idle_ps=10 * US))
    net = Net([a, b], seed=3)
    for i in range(6):
        a.ep.submit(0, request(msg_ref=i, payload=bytes(500)))
    net.run()
    ca, cb = a.ep.counters, b.ep.counters
    assert ca["opened.initiator"] == cb["opened.target"] == 1
    assert ca["closed"] == cb["closed"] == 1
    assert ca["tx_bytes"] == cb["rx_bytes"] == 3000 and ca["tx_packets"] == 6
    assert ca["ack_rx"] == cb["ack_tx"] > 0


@pytest.mark.parametrize("key,value,allowed", [
    ("ack_type", "sack", "ack, ack_cc"),
    ("start_psn_mode", "server", "initiator, target"),
    ("mp_range", 100, "multiple of 128"),
    ("rto_ps", 0, "> 0"),
    ("max_syn_packets", 5000, "[1, 4096]"),
    ("dscp_control", 64, "[0, 63]"),
    ("ar_every_packet", 1, "true or false"),
])
def test_bad_config_names_key_and_allowed_values(key, value, allowed):
    with pytest.raises(PdsConfigError) as exc:
        PdsConfig(**{key: value})
    assert f"pds.{key}" in str(exc.value) and allowed in str(exc.value)


def test_config_from_dict_rejects_unknown_keys():
    with pytest.raises(PdsConfigError, match="pds.rto: unknown key; allowed keys: .*rto_ps"):
        PdsConfig.from_dict({"rto": 5})
    assert PdsConfig.from_dict({"rto_ps": 7}).rto_ps == 7


def test_initiator_pdc_limit():
    ep = PdsEndpoint(PdsConfig(max_initiator_pdcs=1), A_IP, random.Random(1))
    ep.submit(0, request(dst=B_IP))
    ep.submit(0, request(dst=B_IP, msg_ref=2))  # same key: same PDC
    with pytest.raises(PdcLimitError, match="max_initiator_pdcs=1"):
        ep.submit(0, request(dst="10.0.0.3"))
    assert ep.counters["initiator_pdc_limit"] == 1


def test_tx_memory_limit_backpressure():
    """Retained (un-ACKed) packet bytes never exceed max_tx_memory_bytes (except for a lone
    packet); everything still completes."""
    cfg = PdsConfig(max_tx_memory_bytes=4 * (1000 + 64))
    a, b = pair(cfg, PdsConfig())
    net = Net([a, b], seed=4, delay=5 * US)
    peak = 0
    for i in range(40):
        a.ep.submit(0, request(msg_ref=i, payload=bytes(1000)))
    while net.step():
        peak = max(peak, a.ep.tx_memory)
    assert peak <= 4 * 1064 and a.ep.counters["blocked.memory"] > 0
    assert sorted(e.msg_ref for e in a.acked) == list(range(40))


def test_payload_larger_than_mtu_is_refused():
    ep = PdsEndpoint(PdsConfig(mtu_payload=1000), A_IP, random.Random(1))
    with pytest.raises(ValueError, match="mtu_payload"):
        ep.submit(0, request(payload=bytes(1001)))


def test_adaptive_rto_estimator():
    """ref 3.8: RTO from srtt + 4 rttvar, clamped to [min_rto, max_rto], with backoff."""
    est = RtoEstimator(PdsConfig(rto_adaptive=True, min_rto_ps=100 * US, rto_ps=5 * MS))
    assert est.rto_for(0) == 5 * MS
    for _ in range(20):
        est.sample(10 * US)
    assert est.rto_for(0) == 100 * US  # clamped to the minimum
    assert est.rto_for(2) == 400 * US
    fixed = RtoEstimator(PdsConfig())
    fixed.sample(10 * US)
    assert fixed.rto_for(0) == 5 * MS and fixed.rto_for(1) == 10 * MS


def test_both_directions_share_one_endpoint():
    """An end point is initiator and target at once; PDC IDs are unique across roles."""
    a, b = pair(PdsConfig(close_idle_ps=0), PdsConfig(close_idle_ps=0))
    net = Net([a, b], seed=5, jitter=2 * US)
    for i in range(5):
        a.ep.submit(0, request(dst=B_IP, msg_ref=("ab", i)))
        b.ep.submit(0, request(dst=A_IP, msg_ref=("ba", i)))
    net.run(until=100 * US)
    assert len(a.acked) == len(b.acked) == 5
    for h in (a, b):
        ids = [p.pdc_id for p in h.ep.pdcs()]
        assert len(ids) == 2 and len(set(ids)) == 2 and 0 not in ids
    assert isinstance(Host, type)
