"""A SendMessage (packets made as the PDC sends them) is the same on the wire as its packets
submitted one by one: same frames, same events, same counters, with loss, with RCCC credit,
over RUD, ROD and RUDI; and a queued message holds one object, not one per packet."""

from __future__ import annotations

import random

import pytest
from pds_harness import A_IP, B_IP, US, Host, Net, ses_std

from uet.cms.api import CmsConfig
from uet.cms.factory import make_credit_scheduler, make_receiver, make_sender
from uet.pds import PdsConfig, PdsEndpoint, SendMessage, SendRequest
from uet.wire.codec import encode_frame
from uet.wire.constants import DeliveryMode

MTU = 4096


def _packets(n: int, mode: DeliveryMode, msg: int) -> list[SendRequest]:
    """The packets of one ``n``-packet message (the last one shorter)."""
    out = []
    for i in range(n):
        size = MTU if i < n - 1 else 1000
        ses = ses_std(msg_id=msg, som=i == 0, eom=i == n - 1, length=(n - 1) * MTU + 1000,
                      offset=i * MTU, payload_length=size)
        out.append(SendRequest(B_IP, mode, 7, 0, ses, None, bytes([i % 251]) * size,
                               (msg, i), i == n - 1))
    return out


def _message(pkts: list[SendRequest]) -> SendMessage:
    it = iter(pkts)
    first = pkts[0]

    def next_part():
        r = next(it)
        return r.ses, r.payload, r.msg_ref, r.eom

    return SendMessage(first.dst_ip, first.mode, first.job_id, first.tc, None, len(pkts),
                       sum(len(p.payload) for p in pkts),
                       max(len(p.payload) for p in pkts), next_part)


def _hosts(algorithm: str | None, seed: int = 3) -> list[Host]:
    hosts = []
    for i, ip in enumerate((A_IP, B_IP)):
        rng = random.Random(seed + i)
        kw = {}
        if algorithm:
            cms = CmsConfig(ev_selector="oblivious", algorithm=algorithm, base_rtt_ps=10 * US,
                            mtu_payload=MTU)
            sched = make_credit_scheduler(cms) if "rccc" in algorithm else None
            crng = random.Random(50 + i)
            kw = dict(sender_cc=lambda mode, crng=crng, cms=cms: make_sender(
                          cms, crng, ordered=mode == DeliveryMode.ROD),
                      receiver_cc=lambda key, sched=sched, cms=cms: make_receiver(
                          cms, sched, key=key),
                      credit_scheduler=sched)
        ep = PdsEndpoint(PdsConfig(rto_ps=200 * US, max_retries=10), ip, rng, **kw)
        hosts.append(Host(ep))
    return hosts


def _run(lazy: bool, algorithm: str | None, loss: float, mode: DeliveryMode,
         sizes=(40, 1, 25)):
    a, b = hosts = _hosts(algorithm)
    net = Net(hosts, seed=11, loss=loss, delay=2 * US, jitter=1 * US, ps_per_byte=80)
    for m, n in enumerate(sizes):
        pkts = _packets(n, mode, m)
        if lazy and n > 1:
            a.ep.submit(0, _message(pkts))
        else:
            for p in pkts:
                a.ep.submit(0, p)
    net.run(until=50_000 * US)
    wire = [(t, encode_frame(f)) for t, f in net.sent]
    events = [(type(e).__name__, e.msg_ref) for e in a.acked + a.failed]
    delivered = [(e.psn, e.payload) for e in b.delivered]
    return wire, events, delivered, dict(a.ep.counters), dict(b.ep.counters)


@pytest.mark.parametrize("algorithm,mode", [
    (alg, mode) for alg in (None, "nscc", "rccc")
    for mode in (DeliveryMode.RUD, DeliveryMode.ROD, DeliveryMode.RUDI)
    if not (alg == "rccc" and mode == DeliveryMode.RUDI)])  # RUDI carries no credit
@pytest.mark.parametrize("loss", [0.0, 0.05])
def test_a_message_is_its_packets_on_the_wire(algorithm, loss, mode):
    eager = _run(False, algorithm, loss, mode)
    lazy = _run(True, algorithm, loss, mode)
    assert eager[0] and len(eager[2]) >= 66  # every packet was delivered at least once
    assert lazy == eager


def test_a_queued_message_is_one_object_until_its_packets_go():
    """A 489-packet message waits as one entry; packets are made only as they are sent."""
    a, b = _hosts(None)
    made = []
    pkts = _packets(489, DeliveryMode.RUD, 1)
    msg = _message(pkts)
    inner = msg._next

    def counting():
        made.append(1)
        return inner()

    msg._next = counting
    a.ep.submit(0, msg)
    pdc = a.ep.pdcs("initiator")[0]
    assert list(pdc.queue) == [msg] and not made
    sent = 0
    while a.ep.poll_transmit(0, False) is not None:
        sent += 1
    assert sent and sent < 489  # the window stopped it
    assert len(made) == sent  # the window refused before the next packet was made
    assert list(pdc.queue) == [msg] and msg.count == 489 - sent
    assert msg.nbytes == sum(len(p.payload) for p in pkts[sent:])


def test_a_message_failing_in_its_pdc_fails_every_packet_left():
    """The PDC closes in error with a message half sent: every packet's reference fails,
    those in flight and those never made, in order."""
    a, b = _hosts(None)
    a.ep.submit(0, _message(_packets(300, DeliveryMode.RUD, 4)))
    pdc = a.ep.pdcs("initiator")[0]
    while a.ep.poll_transmit(0, False) is not None:
        pass
    pdc.close_in_error(0, "test")
    a.drain(0)
    assert [e.msg_ref for e in a.failed] == [(4, i) for i in range(300)]
    assert not pdc.queue


def test_a_message_over_rccc_counts_its_whole_backlog_at_once():
    a, b = _hosts("rccc")
    msg = _message(_packets(300, DeliveryMode.RUD, 2))
    a.ep.submit(0, msg)
    pdc = a.ep.pdcs("initiator")[0]
    assert pdc.backlog == 299 * MTU + 1000 == pdc.credit.credit.backlog
    sent = 0
    while a.ep.poll_transmit(0, False) is not None:
        sent += 1
    assert 0 < sent < 300  # RCCC lets a first window go before any credit
    assert pdc.backlog == msg.nbytes == 299 * MTU + 1000 - sent * MTU
    assert pdc.credit.credit.backlog == pdc.backlog


def test_a_message_above_the_mtu_is_refused():
    a, _ = _hosts(None)
    pkts = _packets(3, DeliveryMode.RUD, 1)
    pkts[0].payload = bytes(MTU + 1)
    with pytest.raises(ValueError, match="exceeds mtu_payload"):
        a.ep.submit(0, _message(pkts))
