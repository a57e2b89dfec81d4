"""Exactly-once delivery under loss, duplication and reordering (hypothesis-driven).

Two end points, each both initiator and target, exchange random RUD / ROD / RUDI / UUD
messages through an in-memory channel that loses (0-30%), duplicates and reorders frames,
under virtual time. Hypothesis chooses the seed, the impairments, the PDS settings and the
traffic; the simulation runs to quiescence. Then:

* every RUD and ROD packet reached the SES exactly once with its bytes intact, or its
  message was reported failed (``MessageFailed``) and it arrived at most once;
* ROD packets reached the SES in submission order;
* every message is either acknowledged in full or failed, and guaranteed SES responses
  reach the initiator exactly once (unless the message failed);
* every RUDI request got exactly one response, or failed;
* UUD packets were never retransmitted.

In a third of the runs the SES refuses 10% of RUD/RUDI deliveries (``PdsEndpoint.reject``,
NO_SES_MSG_AVAIL): those must come back and be delivered once more.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pds_harness import A_IP, B_IP, US, Host, Net, ses_std

from uet.cms.api import CmsConfig
from uet.cms.factory import make_credit_scheduler, make_receiver, make_sender
from uet.pds import PdsConfig, PdsEndpoint, SendRequest
from uet.wire.constants import DeliveryMode, NackCode, PdsType, ReturnCode, RspOpcode
from uet.wire.records import SesResponse

MODES = [DeliveryMode.RUD, DeliveryMode.ROD, DeliveryMode.RUDI, DeliveryMode.UUD]


def _responder(ev, reject_rng=None):
    """Guaranteed response on EOM packets of RUD/ROD and on every RUDI request; with
    ``reject_rng``, 10% of RUD/RUDI deliveries are refused (NO_SES_MSG_AVAIL)."""
    if (reject_rng is not None and ev.mode in (DeliveryMode.RUD, DeliveryMode.RUDI)
            and reject_rng.random() < 0.1):
        return ("reject", NackCode.NO_SES_MSG_AVAIL)
    if ev.mode == DeliveryMode.RUDI or ev.ses.flags & 0x02:
        return (SesResponse(opcode=RspOpcode.RESPONSE, return_code=ReturnCode.OK,
                            message_id=ev.ses.message_id, job_id=ev.ses.job_id), b"")
    return None


configs = st.fixed_dictionaries({
    "ack_type": st.sampled_from(["ack_cc", "ack_cc", "ack"]),
    "sack_dupthresh": st.sampled_from([0, 0, 1, 3]),
    "rack": st.sampled_from([True, True, False]),
    "rack_reo_wnd_ps": st.sampled_from([0, 0, 2 * US]),
    "ooo_loss_threshold": st.sampled_from([0, 0, 4]),
    "probe_after_ps": st.sampled_from([0, 150 * US]),
    "ar_every_packet": st.booleans(),
    "rod_buffer_packets": st.sampled_from([0, 4]),
    "ack_every_bytes": st.sampled_from([16384, 1000]),
    "rto_adaptive": st.booleans(),
})

messages = st.lists(
    st.tuples(st.booleans(),  # A -> B (else B -> A)
              st.sampled_from(MODES),
              st.integers(1, 6),  # packets
              st.integers(0, 300),  # payload bytes per packet
              st.integers(0, 400)),  # submit time (us)
    min_size=1, max_size=14)


@settings(max_examples=400)
@given(seed=st.integers(0, 2**32 - 1), loss=st.sampled_from([0.0, 0.02, 0.1, 0.2, 0.3]),
       dup=st.sampled_from([0.0, 0.05]), jitter=st.sampled_from([0, 1, 5]),
       codec=st.booleans(), cfg=configs, msgs=messages)
def test_exactly_once_under_loss(seed, loss, dup, jitter, codec, cfg, msgs):
    run_scenario(seed, loss, dup, jitter, codec, cfg, msgs)


@pytest.mark.parametrize("loss", [0.0, 0.05, 0.15, 0.3])
@pytest.mark.parametrize("seed", [1, 2])
def test_exactly_once_heavy(seed, loss):
    """Larger seeded scenarios: 80 messages of up to 12 packets, both directions."""
    rng = random.Random(seed * 1000 + int(loss * 100))
    msgs = [(rng.random() < 0.6, rng.choice(MODES), rng.randint(1, 12), rng.randint(0, 2000),
             rng.randint(0, 2000)) for _ in range(80)]
    cfg = {"ack_type": "ack_cc", "sack_dupthresh": 0, "rack": True, "ooo_loss_threshold": 0,
           "probe_after_ps": 150 * US if seed == 2 else 0, "ar_every_packet": False,
           "rod_buffer_packets": 0, "ack_every_bytes": 16384, "rto_adaptive": seed == 2}
    run_scenario(seed, loss, 0.02, 3, seed == 1, cfg, msgs)


@pytest.mark.parametrize("algorithm", ["nscc", "rccc"])
@pytest.mark.parametrize("loss", [0.02, 0.2])
def test_exactly_once_with_real_cms(algorithm, loss):
    """The same checks with the real congestion control and oblivious spraying."""
    rng = random.Random(int(loss * 100) + len(algorithm))
    msgs = [(rng.random() < 0.6, rng.choice(MODES), rng.randint(1, 12), rng.randint(0, 2000),
             rng.randint(0, 2000)) for _ in range(50)]
    cfg = {"ack_type": "ack_cc", "sack_dupthresh": 0, "rack": True, "ooo_loss_threshold": 0,
           "probe_after_ps": 0, "ar_every_packet": False, "rod_buffer_packets": 0,
           "ack_every_bytes": 16384, "rto_adaptive": True}
    cms = CmsConfig(ev_selector="oblivious", algorithm=algorithm, base_rtt_ps=10 * US,
                    mtu_payload=2048)
    run_scenario(3, loss, 0.02, 3, False, cfg, msgs, cms=cms)


def _endpoint(pcfg, ip, seed, cms):
    rng = random.Random(seed)
    if cms is None:
        return PdsEndpoint(pcfg, ip, rng)
    sched = make_credit_scheduler(cms) if "rccc" in cms.algorithm else None
    return PdsEndpoint(
        pcfg, ip, rng,
        sender_cc=lambda mode: make_sender(cms, rng, ordered=mode == DeliveryMode.ROD),
        receiver_cc=lambda key: make_receiver(cms, sched, key=key), credit_scheduler=sched)


def run_scenario(seed, loss, dup, jitter, codec, cfg, msgs, cms=None, report_acked=True):
    """Run and check one scenario; returns the channel (every frame sent) and the end
    points. ``report_acked=False``: no PacketAcked events, as a fabric end point asks."""
    pcfg = PdsConfig(rto_ps=300 * US, min_rto_ps=50 * US, max_retries=8,
                     close_idle_ps=100 * US, msl_ps=500 * US, target_idle_ps=5_000 * US,
                     close_req_time_ps=20_000 * US, clear_req_ps=200 * US, **cfg)
    eps = {ip: _endpoint(pcfg, ip, seed + i, cms) for i, ip in enumerate((A_IP, B_IP))}
    for ep in eps.values():
        ep.ctx.report_acked = report_acked
    reject_rng = random.Random(seed) if seed % 3 == 0 else None
    hosts = {ip: Host(ep, lambda ev: _responder(ev, reject_rng)) for ip, ep in eps.items()}
    net = Net(list(hosts.values()), seed=seed, loss=loss, dup=dup, delay=2 * US,
              jitter=jitter * US, codec=codec)

    rng = random.Random(seed)
    plan = []  # (time, src, SendRequest)
    expected = {}  # (src, msg, idx) -> payload
    kinds = {}
    msgs = sorted(msgs, key=lambda x: x[4])  # number messages in submission order
    for m, (a_to_b, mode, npkts, size, t) in enumerate(msgs):
        src, dst = (A_IP, B_IP) if a_to_b else (B_IP, A_IP)
        if mode in (DeliveryMode.RUDI, DeliveryMode.UUD):
            npkts = 1
        kinds[(src, m)] = (mode, npkts)
        for i in range(npkts):
            data = rng.randbytes(size)
            expected[(src, m, i)] = data
            ses = ses_std(msg_id=m, som=i == 0, eom=i == npkts - 1)
            ses.buffer_offset = i  # lets the test identify the packet
            ses.initiator = m
            plan.append((t * US, src, SendRequest(dst, mode, 7, 0, ses, None, data,
                                                  (src, m), i == npkts - 1)))
    plan.sort(key=lambda x: x[0])

    for t, src, request in plan:
        net.run(until=t)
        eps[src].submit(net.now, request)
    net.run()

    # ------------------------------------------------------------------ checks
    for src, sender in hosts.items():
        dst = B_IP if src == A_IP else A_IP
        receiver = hosts[dst]
        failed = {f.msg_ref for f in sender.failed}
        got = Counter()
        rod_order = defaultdict(list)
        for ev in receiver.delivered:
            if ev.src_ip != src:
                continue
            key = (src, ev.ses.initiator, ev.ses.buffer_offset)
            assert ev.payload == expected[key], f"corrupted payload for {key}"
            got[key] += 1
            if ev.mode == DeliveryMode.ROD:
                rod_order[ev.pdc_id].append((ev.ses.initiator, ev.ses.buffer_offset))
        acked = Counter((a.msg_ref, a.psn) for a in sender.acked)
        assert all(c == 1 for c in acked.values()), "a packet was acknowledged twice"
        acked_msgs = Counter(a.msg_ref for a in sender.acked)
        responses = Counter(r.msg_ref for r in sender.responses)
        for (s, m), (mode, npkts) in kinds.items():
            if s != src:
                continue
            ref = (src, m)
            counts = [got[(src, m, i)] for i in range(npkts)]
            if mode in (DeliveryMode.RUD, DeliveryMode.ROD):
                if ref in failed:
                    assert all(c <= 1 for c in counts), f"{ref} duplicated"
                else:
                    assert counts == [1] * npkts, f"{mode.name} {ref}: {counts} loss={loss}"
                    assert acked_msgs[ref] == (npkts if report_acked else 0)
                    assert responses[ref] == 1, f"{ref}: {responses[ref]} responses"
            elif mode == DeliveryMode.RUDI:
                assert responses[ref] + (ref in failed) == 1, f"RUDI {ref}"
                if ref not in failed:
                    assert counts[0] >= 1
            else:  # UUD: at most once per copy on the wire, never retransmitted
                assert ref not in failed
        for seq in rod_order.values():
            assert seq == sorted(seq), "ROD delivered out of order"
        uud_sent = sum(1 for _, f in net.sent if f.src_ip == src
                       and f.pds.type == PdsType.UUD_REQ)
        uud_planned = sum(1 for (s, _), (mode, _) in kinds.items()
                          if s == src and mode == DeliveryMode.UUD)
        assert uud_sent == uud_planned
        assert eps[src].counters["retx.rto"] >= 0
    # state is released once everything is done
    for ep in eps.values():
        assert ep.tx_memory == 0
        assert ep.pdcs("initiator") == [] and ep.pdcs("target") == []
    return net, eps


def test_found_example_a_syn_retransmitted_after_the_target_closed_in_error():
    """The example hypothesis found (tests/pds/test_close_in_error_linger.py explains it):
    the initiator never heard an ACK, the target closed in error and forgot the PDC after
    MSL, and a later SYN retransmission delivered the message a second time."""
    cfg = {"ack_type": "ack_cc", "sack_dupthresh": 0, "rack": True, "rack_reo_wnd_ps": 0,
           "ooo_loss_threshold": 0, "probe_after_ps": 0, "ar_every_packet": False,
           "rod_buffer_packets": 0, "ack_every_bytes": 16384, "rto_adaptive": False}
    run_scenario(200, 0.3, 0, 0, False, cfg, [(False, DeliveryMode.RUD, 1, 0, 0)])
