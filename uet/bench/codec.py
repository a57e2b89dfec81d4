"""``uet bench`` section "codec": fast codec vs scapy, measured side by side in one run.

For each packet kind, one operation = encode the frame from its field values and decode
the bytes back. The fast codec does ``encode_frame`` + ``decode_frame``; scapy builds the
packet from the same field values (every address and MAC explicit, so it does no route or
ARP lookup) and dissects the bytes with ``Ether(data)``. Kinds: a full data packet
(Ethernet / IPv4 / UDP / RUD / standard SES / 4 KiB payload) and an ACK_CC.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from uet.wire.codec import decode_frame, encode_frame
from uet.wire.constants import NextHeader, PdsType, SesOpcode
from uet.wire.records import Frame, PdsAckCc, PdsRequest, SesStandard

NAME = "codec"


def _frames() -> dict[str, Frame]:
    data = Frame(
        pds=PdsRequest(PdsType.RUD_REQ, NextHeader.REQ_STD, 0x08, -1, 123456, 7, 9),
        ses=SesStandard(SesOpcode.WRITE, 0, 0x01, message_id=5, job_id=42, pid_on_fep=3,
                        resource_index=1, buffer_offset=0x100000, initiator=0x0A000001,
                        memory_key=0xC0FFEE, request_length=1 << 20),
        payload=bytes(range(256)) * 16, src_ip="10.0.0.1", dst_ip="10.0.0.2",
        src_mac="02:00:00:00:00:01", dst_mac="02:00:00:00:00:02", ev=4321)
    ack = Frame(
        pds=PdsAckCc(PdsType.ACK_CC, NextHeader.NONE, 0x20, -3, 123456, 9, 7, 0, 0, 1, -10,
                     0xFFFF0000FFFF0000, service_time=17, rcvd_bytes=1 << 20, ooo_count=2),
        src_ip="10.0.0.2", dst_ip="10.0.0.1", src_mac="02:00:00:00:00:02",
        dst_mac="02:00:00:00:00:01", ev=4321, dscp=46)
    return {"data": data, "ack_cc": ack}


def _rate(op: Callable[[], object], seconds: float, repeats: int) -> float:
    """Operations per second: best of ``repeats`` timed runs of about ``seconds`` each."""
    n = 1
    while True:  # calibrate the batch size
        t0 = time.perf_counter()
        for _ in range(n):
            op()
        dt = time.perf_counter() - t0
        if dt >= seconds / 5 or n >= 1 << 22:
            break
        n *= 4
    batch = max(1, int(n * (seconds / max(dt, 1e-9))))
    best = 0.0
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(batch):
            op()
        dt = time.perf_counter() - t0
        best = max(best, batch / dt)
    return best


def run(quick: bool) -> dict:
    """Measure and return ``fast_pps``, ``scapy_pps``, ``ratio`` (the smaller of the two
    kinds' fast/scapy ratios, with the pps of that kind) plus per-kind numbers."""
    from scapy.layers.l2 import Ether

    from uet.wire.layers import frame_to_scapy

    seconds, repeats = (0.15, 2) if quick else (0.6, 3)
    out: dict[str, float | int | str] = {}
    worst: tuple[float, float, float, str] | None = None
    for kind, frame in _frames().items():
        wire = encode_frame(frame)
        assert bytes(frame_to_scapy(frame)) == wire  # same bytes from both

        def fast(frame: Frame = frame) -> None:
            decode_frame(encode_frame(frame))

        def scapy(frame: Frame = frame) -> None:
            Ether(bytes(frame_to_scapy(frame)))

        fast_pps = _rate(fast, seconds, repeats)
        scapy_pps = _rate(scapy, seconds, repeats)
        ratio = fast_pps / scapy_pps
        out[f"{kind}_bytes"] = len(wire)
        out[f"{kind}_fast_pps"] = fast_pps
        out[f"{kind}_scapy_pps"] = scapy_pps
        out[f"{kind}_ratio"] = ratio
        out[f"{kind}_fast_encode_pps"] = _rate(lambda f=frame: encode_frame(f), seconds / 2, 1)
        out[f"{kind}_fast_decode_pps"] = _rate(lambda w=wire: decode_frame(w), seconds / 2, 1)
        if worst is None or ratio < worst[0]:
            worst = (ratio, fast_pps, scapy_pps, kind)
    assert worst is not None
    out["ratio"], out["fast_pps"], out["scapy_pps"], out["ratio_kind"] = worst
    return out
