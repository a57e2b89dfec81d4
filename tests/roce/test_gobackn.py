"""The RC transport's loss recovery, one scripted loss at a time, on a real emulated link:
go-back-N resends exactly from the NAKed PSN, timeouts resend from the oldest unacked PSN
and give up after retry_cnt, RNR NAKs hold the QP, IRN resends only what was lost, PSNs
wrap at 2**24, and nothing is ever delivered to the application twice."""

from __future__ import annotations

import random
from collections import Counter

from harness import rig

from uet.roce.config import RoceConfig
from uet.roce.constants import AethType, NakCode, Opcode, syndrome_kind
from uet.roce.records import psn_add, psn_diff
from uet.roce.requester import WcStatus

MTU = 4096
ACK = int(Opcode.ACKNOWLEDGE)


def _data_psns(r, host=1):
    """PSNs of the request packets that reached ``host``, in arrival order."""
    return [f.bth.psn for f in r.arrivals(host) if f.bth.opcode != ACK
            and f.bth.opcode != Opcode.CNP]


def _naks(r, host=0):
    return [(f.bth.psn, f.aeth.syndrome & 0x1F) for f in r.arrivals(host, ACK)
            if syndrome_kind(f.aeth.syndrome) == AethType.NAK]


def _check_sink(r, data, host=1, offset=0):
    assert bytes(r.eps[host].sink[offset:offset + len(data)]) == data


def _no_duplicate_delivery(r):
    seen = Counter((d[0], d[2], d[4]) for d in r.delivered)  # (host, qpn, psn)
    assert seen and max(seen.values()) == 1


def test_gobackn_resends_exactly_from_the_naked_psn():
    """Drop the 10th data packet once: the responder NAKs its PSN once, and the requester
    resends that PSN and every later one, in order, and nothing before it."""
    dropped = []

    def rule(host, f, n):
        if host == 1 and f.bth.opcode != ACK and not dropped and len(_seen) == 9:
            dropped.append(f.bth.psn)
            return "drop"
        if host == 1 and f.bth.opcode != ACK:
            _seen.append(f.bth.psn)
        return None

    _seen: list[int] = []
    cfg = RoceConfig(dcqcn={"enabled": False})
    r = rig(cfg, rule=rule)
    data = random.Random(1).randbytes(64 * MTU)
    msg = r.eps[0].send_message(0, 1, len(data), data)
    r.poke(0)
    r.run()
    assert msg.ok
    p = dropped[0]
    assert _naks(r) == [(p, NakCode.PSN_SEQUENCE_ERROR)]
    psns = _data_psns(r)
    first = psns[0]
    # the first transmission ran ahead of the NAK; the second pass starts exactly at p
    restart = psns.index(p, psns.index(p) + 1) if psns.count(p) > 1 else psns.index(p)
    assert psns[:9] == [psn_add(first, i) for i in range(9)]
    second = psns[restart:]
    assert second == [psn_add(p, i) for i in range(len(second))]
    assert psn_diff(second[-1], first) == 63  # through the last packet, and no further
    assert all(psn_diff(q, p) >= 0 for q in psns[9:])  # nothing before p resent
    st = r.eps[0].stats
    assert st["tx_retx"] == len(psns) - 64 and st["tx_data"] == 64  # the dropped one arrived
    _check_sink(r, data)
    _no_duplicate_delivery(r)


def test_timeout_resends_from_the_oldest_unacked_psn():
    """Drop the last packet (no later packet to trigger a NAK): the local ACK timeout
    (4.096 us x 2**timeout) fires and the requester resends from the oldest unacked PSN."""
    cfg = RoceConfig(timeout=4, dcqcn={"enabled": False})  # 65.5 us
    drops = []

    def rule(host, f, n):
        if host == 1 and f.bth.opcode == Opcode.WRITE_LAST and not drops:
            drops.append(f.bth.psn)
            return "drop"
        return None

    r = rig(cfg, rule=rule)
    msg = r.eps[0].send_message(0, 1, 8 * MTU)
    r.poke(0)
    r.run()
    assert msg.ok and r.eps[0].stats["rto"] == 1
    psns = _data_psns(r)
    # the 7 first arrive and are ACKed; the timer resends the last one only
    assert psns[-1] == drops[0] and psns.count(drops[0]) == 2 and len(psns) == 9
    rto_at = [t for t, h, f, _v in r.log if h == 1 and f.bth.psn == drops[0]][-1]
    assert rto_at >= 4_096_000 << 4


def test_retry_exhaustion_fails_the_request_and_flushes_the_rest():
    cfg = RoceConfig(timeout=3, retry_cnt=2, dcqcn={"enabled": False})
    r = rig(cfg, rule=lambda host, f, n: "drop" if host == 1 else None)
    a = r.eps[0].send_message(0, 1, 2 * MTU)
    b = r.eps[0].send_message(0, 1, MTU)
    r.poke(0)
    r.run()
    assert a.done and a.status is WcStatus.RETRY_EXC_ERR
    assert b.done and b.status is WcStatus.WR_FLUSH_ERR
    st = r.eps[0].stats
    assert st["rto"] == 3 and st["qp_error"] == 1  # first try + retry_cnt retries
    # the QP stays in error: a new request is flushed at once
    c = r.eps[0].send_message(r.net.loop.now, 1, 100)
    assert c.status is WcStatus.WR_FLUSH_ERR


def test_rnr_nak_holds_the_qp_until_a_buffer_is_posted():
    cfg = RoceConfig(auto_post_recv=False, min_rnr_timer=1, dcqcn={"enabled": False})
    r = rig(cfg)
    w = r.eps[0].post_send(0, 1, b"x" * 5000)
    r.poke(0)
    r.run(200_000_000)  # 200 us: RNR NAKs every 10 us, no buffer yet
    assert w.status is None
    rnr = [f for f in r.arrivals(0, ACK) if syndrome_kind(f.aeth.syndrome) == AethType.RNR_NAK]
    assert len(rnr) >= 5 and {f.aeth.syndrome & 0x1F for f in rnr} == {1}
    buf = bytearray(8192)
    r.eps[1].post_recv(0, buf)
    r.run()
    assert w.status is WcStatus.SUCCESS and bytes(buf[:5000]) == b"x" * 5000
    _no_duplicate_delivery(r)


def test_rnr_retry_count_is_enforced():
    cfg = RoceConfig(auto_post_recv=False, min_rnr_timer=1, rnr_retry=3,
                     dcqcn={"enabled": False})
    r = rig(cfg)
    w = r.eps[0].post_send(0, 1, 100)
    r.poke(0)
    r.run()
    assert w.status is WcStatus.RNR_RETRY_EXC_ERR
    assert r.eps[1].stats["nak_tx.RNR"] == 4


def test_irn_resends_only_the_lost_packet():
    cfg = RoceConfig(irn=True, dcqcn={"enabled": False})
    dropped = []

    def rule(host, f, n):
        if host == 1 and f.bth.opcode == Opcode.WRITE_MIDDLE and len(dropped) < 1 \
                and n == 20:
            dropped.append(f.bth.psn)
            return "drop"
        return None

    r = rig(cfg, rule=rule)
    data = random.Random(2).randbytes(64 * MTU)
    msg = r.eps[0].send_message(0, 1, len(data), data)
    r.poke(0)
    r.run()
    assert msg.ok and len(dropped) == 1
    psns = _data_psns(r)
    assert len(psns) == 65 and psns.count(dropped[0]) == 2
    assert r.eps[0].stats["tx_retx"] == 1
    assert _naks(r) == [(dropped[0], NakCode.PSN_SEQUENCE_ERROR)]
    _check_sink(r, data)
    _no_duplicate_delivery(r)


def test_psn_wraps_at_2_pow_24():
    cfg = RoceConfig(start_psn=0xFFFFF0, dcqcn={"enabled": False})
    lost = {0xFFFFFE, 0x000003}
    r = rig(cfg, rule=lambda h, f, n: "drop" if h == 1 and f.bth.psn in lost
            and f.bth.opcode != ACK and lost.discard(f.bth.psn) is None else None)
    data = random.Random(3).randbytes(40 * MTU + 17)
    msg = r.eps[0].send_message(0, 1, len(data), data)
    r.poke(0)
    r.run()
    assert msg.ok and not lost
    assert r.eps[0].qp(1).req.una == (0xFFFFF0 + 41) & 0xFFFFFF
    _check_sink(r, data)
    _no_duplicate_delivery(r)


def test_bad_rkey_is_a_remote_access_error():
    r = rig(RoceConfig(dcqcn={"enabled": False}))
    w = r.eps[0].post_write(0, 1, 100, rkey=0x9999)
    after = r.eps[0].post_write(0, 1, 100)
    r.poke(0)
    r.run()
    assert w.status is WcStatus.REM_ACCESS_ERR and after.status is WcStatus.WR_FLUSH_ERR
    assert r.eps[1].stats["nak_tx.REMOTE_ACCESS_ERROR"] == 1


def _lossy_stream(irn: bool, seed: int) -> None:
    """A long stream over a link that drops 3%, duplicates 2% and reorders some frames in
    both directions: every message completes, every byte lands where it belongs, and no
    packet is delivered to the application twice."""
    rng = random.Random(seed)

    def rule(host, f, n):
        x = rng.random()
        return "drop" if x < 0.03 else "dup" if x < 0.05 else None

    cfg = RoceConfig(irn=irn, timeout=5, qps_per_flow=2, dcqcn={"enabled": False})
    r = rig(cfg, rule=rule, topology={"kind": "back_to_back", "impairments": [
        {"at": "h0", "direction": "tx", "reorder": 0.05, "reorder_delay_ps": 3_000_000}]})
    payloads = [rng.randbytes(rng.randrange(1, 9 * MTU)) for _ in range(60)]
    msgs, off = [], 0
    for p in payloads:
        msgs.append(r.eps[0].send_message(0, 1, len(p), p, offset=off))
        off += len(p)
    r.poke(0)
    r.run()
    assert all(m.ok for m in msgs)
    off = 0
    for p in payloads:
        _check_sink(r, p, offset=off)
        off += len(p)
    _no_duplicate_delivery(r)
    st = r.eps[1].stats
    assert st["rx_duplicate"] > 0 and st["rx_out_of_sequence"] > 0
    assert r.eps[0].idle() and r.eps[1].idle()


def test_long_lossy_stream_gobackn():
    _lossy_stream(False, 7)


def test_long_lossy_stream_irn():
    _lossy_stream(True, 8)


def test_ack_coalescing_acks_every_nth_packet_and_the_last():
    cfg = RoceConfig(ack_coalesce=4, dcqcn={"enabled": False})
    r = rig(cfg)
    msg = r.eps[0].send_message(0, 1, 66 * MTU)
    r.poke(0)
    r.run()
    assert msg.ok
    acks = [f.bth.psn for f in r.arrivals(0, ACK)]
    first = r.arrivals(1)[0].bth.psn
    # every 4th packet, then the last one (it asks: AckReq)
    assert acks == [psn_add(first, i) for i in range(3, 64, 4)] + [psn_add(first, 65)]
    assert r.arrivals(1)[-1].bth.ackreq and not r.arrivals(1)[0].bth.ackreq


def test_bdp_flow_control_caps_the_packets_in_flight():
    cfg = RoceConfig(irn=True, max_inflight_packets=6, dcqcn={"enabled": False})
    r = rig(cfg, rule=lambda h, f, n: "drop" if h == 1 and n in (10, 30, 31) else None)
    qp = r.eps[0].qp(1)
    seen = []
    pop = r.net.nics[0].ep.pop_data

    def watched(now):
        out = pop(now)
        seen.append(qp.req.inflight)
        return out

    r.net.nics[0].ep.pop_data = watched
    msg = r.eps[0].send_message(0, 1, 80 * MTU)
    r.poke(0)
    r.run()
    assert msg.ok and max(seen) == 6
