"""``uet bench`` section "pds": PDS operations per second, per side, on records (no bytes).

One operation is one data packet sent and acknowledged. The initiator side is timed over
``submit`` + ``poll_transmit`` (data) + ``receive`` of the ACKs + ``next_event``; the target
side over ``receive`` of the requests + ``next_event`` + ``poll_transmit`` (ACKs). Packets
carry 4096-byte payloads in 64 KiB messages (AR on the last packet), ACKs are ACK_CC
coalesced every 16 KiB, no loss. A second run adds 1% loss to show the retransmission path.
"""

from __future__ import annotations

import random
import time

from uet.pds import PdsConfig, PdsEndpoint, SendRequest
from uet.wire.constants import DeliveryMode, SesFlag, SesOpcode
from uet.wire.records import SesStandard

NAME = "pds"

_A = "10.0.0.1"
_B = "10.0.0.2"
_PAYLOAD = bytes(4096)
_PER_MSG = 16


def _requests(n: int) -> list[SendRequest]:
    out = []
    for i in range(n):
        k = i % _PER_MSG
        flags = (SesFlag.SOM if k == 0 else 0) | (SesFlag.EOM if k == _PER_MSG - 1 else 0)
        ses = SesStandard(opcode=SesOpcode.WRITE, flags=int(flags), message_id=i // _PER_MSG,
                          job_id=1, request_length=_PER_MSG * 4096)
        out.append(SendRequest(_B, DeliveryMode.RUD, 1, 0, ses, None, _PAYLOAD, i // _PER_MSG,
                               k == _PER_MSG - 1))
    return out


def _run(packets: int, loss: float, seed: int = 1) -> dict:
    cfg = PdsConfig(close_idle_ps=0, target_idle_ps=0)
    a = PdsEndpoint(cfg, _A, random.Random(seed))
    b = PdsEndpoint(cfg, _B, random.Random(seed + 1))
    rng = random.Random(seed + 2)
    reqs = _requests(packets)
    perf = time.perf_counter
    t_a = t_b = 0.0
    now = 0
    step = 330_000  # ~ one 4 KiB packet at 100 Gb/s, in ps
    i = 0
    acked = 0
    while acked < packets:
        t0 = perf()
        # initiator: submit what the window should take, send a burst
        while i < packets and i - acked < 256:
            a.submit(now, reqs[i])
            i += 1
        out = []
        for _ in range(32):
            f = a.poll_transmit(now, False)
            if f is None:
                break
            out.append(f)
            now += step
        t1 = perf()
        t_a += t1 - t0
        # target: receive, deliver, acknowledge
        acks = []
        for f in out:
            if loss and rng.random() < loss:
                continue
            b.receive(now, f)
            while b.next_event() is not None:
                pass
            while (ack := b.poll_transmit(now, True)) is not None:
                acks.append(ack)
        b.handle_timer(now)
        while (ack := b.poll_transmit(now, True)) is not None:
            acks.append(ack)
        t2 = perf()
        t_b += t2 - t1
        # initiator: ACKs in
        for ack in acks:
            if loss and rng.random() < loss:
                continue
            a.receive(now, ack)
        while (ev := a.next_event()) is not None:
            if type(ev).__name__ == "PacketAcked":
                acked += 1
        if not out and not acks:  # waiting for a timer (RTO)
            d = [x for x in (a.next_deadline(), b.next_deadline()) if x is not None]
            if d:
                now = max(now, min(d))
            a.handle_timer(now)
            b.handle_timer(now)
            while (cp := a.poll_transmit(now, True)) is not None:
                b.receive(now, cp)
        t_a += perf() - t2
    return {
        "packets": packets,
        "initiator_ops_per_s": packets / t_a,
        "target_ops_per_s": packets / t_b,
        "initiator_us_per_packet": t_a / packets * 1e6,
        "target_us_per_packet": t_b / packets * 1e6,
        "acks": a.counters["ack_rx"],
        "retransmissions": sum(v for k, v in a.counters.items() if k.startswith("retx.")),
    }


def run(quick: bool) -> dict:
    """PDS ops/s per side (records, no bytes); ``ops_per_s`` is the slower side."""
    packets = 20_000 if quick else 100_000
    clean = _run(packets, 0.0)
    lossy = _run(packets // 4, 0.01)
    return {
        "ops_per_s": min(clean["initiator_ops_per_s"], clean["target_ops_per_s"]),
        "initiator_ops_per_s": clean["initiator_ops_per_s"],
        "target_ops_per_s": clean["target_ops_per_s"],
        "initiator_us_per_packet": clean["initiator_us_per_packet"],
        "target_us_per_packet": clean["target_us_per_packet"],
        "acks_per_packet": clean["acks"] / clean["packets"],
        "lossy_1pct_initiator_ops_per_s": lossy["initiator_ops_per_s"],
        "lossy_1pct_target_ops_per_s": lossy["target_ops_per_s"],
        "lossy_1pct_retransmissions": lossy["retransmissions"],
        "packets": clean["packets"],
    }


if __name__ == "__main__":  # pragma: no cover
    for k, v in run(quick=True).items():
        print(f"{k:34s} {v:,.3f}" if isinstance(v, float) else f"{k:34s} {v}")
