"""``uet bench`` section "tss": the cost of TSS per packet, side by side with the plain path.

One operation = what a packet costs its two end points on the wire side: the sender's
encode and the receiver's decode. Plain: ``encode_frame`` + ``decode_frame``. TSS:
``TssSublayer.seal_frame`` (stamp the header, encode, AES-GCM-256 encrypt, tag) + ``open_frame``
(replay check, decrypt and verify, decode). Measured interleaved, best of several runs, for
a 4 KiB data packet and a 32-byte ACK_CC, in DIRECT mode (the domain key as is) and in
CLUSTER mode (a per-source key derived by the KDF, cached per source and rekey value,
with an IV mask), and the KDF itself (what a cache miss costs: a new source or a rekey).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from uet.tss import TssConfig, TssSublayer
from uet.tss.crypto import LABEL_CLUSTER, kdf
from uet.wire.codec import decode_frame, encode_frame
from uet.wire.constants import NextHeader, PdsType, SesOpcode
from uet.wire.records import Frame, PdsAckCc, PdsRequest, SesStandard, TssHeader

NAME = "tss"
_KEY = bytes(range(32))


def _frames() -> dict[str, Frame]:
    data = Frame(
        pds=PdsRequest(PdsType.RUD_REQ, NextHeader.REQ_STD, 0x08, -1, 123456, 7, 9),
        ses=SesStandard(SesOpcode.WRITE, 0, 0x01, message_id=5, job_id=1, pid_on_fep=0,
                        resource_index=1, buffer_offset=0x100000, initiator=0x0A000001,
                        memory_key=0xC0FFEE, request_length=1 << 20),
        payload=bytes(range(256)) * 16, src_ip="10.0.0.1", dst_ip="10.0.0.2", ev=4321)
    ack = Frame(
        pds=PdsAckCc(PdsType.ACK_CC, NextHeader.NONE, 0x20, -3, 123456, 9, 7, 0, 0, 1, -10,
                     0xFFFF0000FFFF0000, rcvd_bytes=1 << 20),
        src_ip="10.0.0.1", dst_ip="10.0.0.2", ev=4321, dscp=46)
    return {"data": data, "ack_cc": ack}


def _best_us(ops: dict[str, Callable[[], object]], n: int, repeats: int) -> dict[str, float]:
    """Microseconds per call of each op: best of ``repeats`` rounds, the ops interleaved in
    every round (so machine load hits them alike)."""
    best = {k: float("inf") for k in ops}
    for _ in range(repeats):
        for name, op in ops.items():
            t0 = time.perf_counter()
            for _ in range(n):
                op()
            best[name] = min(best[name], (time.perf_counter() - t0) / n * 1e6)
    return best


def run(quick: bool) -> dict:
    """Per-packet microseconds of the plain and the TSS path, and their ratio."""
    n, repeats = (300, 3) if quick else (2000, 5)
    out: dict[str, float | int] = {}
    for mode in ("direct", "cluster"):
        cfg = TssConfig.from_dict({"mode": mode, "sdi": 1, "key": _KEY.hex(), "job": 1})
        tx, rx = TssSublayer(cfg, "10.0.0.1"), TssSublayer(cfg, "10.0.0.2")
        for kind, frame in _frames().items():
            wire = encode_frame(frame)

            def plain(frame: Frame = frame) -> None:
                decode_frame(encode_frame(frame))

            def secured(frame: Frame = frame, tx: TssSublayer = tx,
                        rx: TssSublayer = rx) -> None:
                frame.tss = TssHeader(sdi=1)
                got = rx.open_frame(0, tx.seal_frame(0, frame))
                assert got is not None

            secured()  # warm the key cache
            us = _best_us({"plain": plain, "tss": secured}, n, repeats)
            if mode == "direct":
                out[f"{kind}_bytes"] = len(wire)
                out[f"{kind}_plain_us"] = us["plain"]
            out[f"{kind}_{mode}_us"] = us["tss"]
            out[f"{kind}_{mode}_over_plain"] = us["tss"] / us["plain"]
            frame.tss = None
        assert not any("refused" in k for k in rx.counters), rx.counters
    ctx = bytes(10)
    k = [0]

    def derive() -> None:  # a cache miss: new context every call
        k[0] += 1
        kdf(_KEY, LABEL_CLUSTER, ctx[:6] + k[0].to_bytes(4, "big"))

    out["kdf_us"] = _best_us({"kdf": derive}, max(50, n // 4), repeats)["kdf"]
    out["ratio"] = out["data_direct_over_plain"]
    return out
