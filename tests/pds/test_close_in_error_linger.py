"""A target that closed a PDC in error remembers it while the initiator may still retransmit.

The initiator of a PDC that never heard an ACK keeps retransmitting its first packets with
SYN (RTO with backoff, ``max_retries`` times). If the target closes the PDC in error (no
CLOSE within Close_REQ_Time) and forgets it after only ``msl_ps``, a later SYN
retransmission finds no PDC, opens a new one and the packet is delivered a second time.
Found by tests/pds/test_exactly_once.py (seed 200, 30% loss, one one-packet RUD message).
The target PDC therefore lingers ``PdsConfig.error_linger_ps()``: at least the initiator's
retry span.
"""

from __future__ import annotations

import random

from pds_harness import A_IP, B_IP, MS, US, Host, Net, is_request, request

from uet.pds import PdsConfig, PdsEndpoint
from uet.wire.constants import ReqFlag

SYN = int(ReqFlag.SYN)


def _cfg() -> PdsConfig:
    # the retry span (300 us doubling over 8 retransmissions, capped at max_rto_ps) is far
    # longer than msl_ps, as with the profiles' defaults (RTO 5 ms x 5 retries vs 10 ms)
    return PdsConfig(rto_ps=300 * US, min_rto_ps=50 * US, max_retries=8, rto_adaptive=False,
                     close_idle_ps=100 * US, msl_ps=500 * US, target_idle_ps=5_000 * US,
                     close_req_time_ps=20_000 * US, clear_req_ps=200 * US)


def test_error_linger_covers_the_retry_span() -> None:
    cfg = _cfg()
    span = cfg.retry_span_ps()
    cap = cfg.max_rto_ps
    assert span == sum(min(300 * US * 2 ** r, cap) for r in range(9))
    assert cfg.error_linger_ps() == span + cap > cfg.msl_ps
    # a long MSL is kept as it is
    long = PdsConfig(msl_ps=10_000 * MS)
    assert long.error_linger_ps() == long.msl_ps


def test_syn_retransmitted_after_the_target_closed_in_error_is_not_delivered_again() -> None:
    """Every frame from the target back to the initiator is lost: the initiator stays in
    SYN and retransmits for its whole retry span, long after the target closed in error."""
    cfg = _cfg()
    a = Host(PdsEndpoint(cfg, A_IP, random.Random(1)))
    b = Host(PdsEndpoint(cfg, B_IP, random.Random(2)))
    net = Net([a, b], seed=1, delay=2 * US, drop=lambda f: f.src_ip == B_IP)
    a.ep.submit(0, request(payload=b"once"))
    net.run()
    # the target delivered the packet, then closed in error (no CLOSE ever came) ...
    assert [ev.payload for ev in b.delivered] == [b"once"]
    assert [c.error for c in b.closed] == [True]
    close_at = cfg.target_idle_ps + cfg.close_req_time_ps
    # ... while the initiator went on retransmitting with SYN well after that close and
    # after an MSL-only linger would have ended
    late = [t for t, f in net.sent if f.src_ip == A_IP and is_request(f) and f.pds.flags & SYN
            and t > close_at + cfg.msl_ps]
    assert late, "the scenario must retransmit after the target's close"
    # the late SYNs found the lingering PDC: no second PDC, no second delivery
    assert len(b.opened) == 1
    assert len(b.delivered) == 1
    # the initiator never heard an answer: its message failed, with a reason
    assert len(a.failed) == 1
    assert b.ep.pdcs() == []
