"""Hostile datagrams towards a UET end point on real UDP (run as a subprocess by
tests/soak/test_serve_flood.py and benchmarks/soak.py, so its sending does not compete with
the test's own client for the interpreter).

    python flood.py KIND COUNT SECONDS DST SRC_NET [JOB]

KIND: ``garbage`` (random bytes), ``syn`` (SYN requests with a wrong job ID, one fresh
source address and PDC per datagram), ``wrong_pdc`` (non-SYN requests and control packets
naming unknown PDCs and PSNs), ``half`` (the first packet of 8 KiB WRITEs, each on a PDC of
its own: reassembly slots that never complete), ``sends`` (single-packet SENDs to the
well-known receive queue, each on a PDC of its own). Sources are spread over SRC_NET
(``127.A.B``: addresses 127.A.B.1 .. and 127.A.B+1.*, ...). The datagrams are built
before the clock starts and paced evenly over SECONDS.
"""

from __future__ import annotations

import contextlib
import random
import socket
import sys
import time

from uet.wire.codec import encode_uet
from uet.wire.constants import CtlType, NextHeader, PdsType, SesFlag, SesOpcode
from uet.wire.records import Frame, PdsControl, PdsRequest, SesStandard

JOB = 0x00ABCD  # the well-known setup's job (uet.conformance.setup.WELL_KNOWN)
RMA_INDEX, RMA_KEY = 0x001, 0x1111_0001
WRITEONLY_INDEX, WRITEONLY_KEY = 0x003, 0x3333_0003  # not the client's region
RECV_INDEX = 0x010


def _request(rng: random.Random, ses: SesStandard, payload: bytes, syn: bool = True) -> bytes:
    start = rng.randrange(1 << 16, 1 << 31)
    flags = (0x04 if syn else 0) | 0x08  # SYN, AR
    pds = PdsRequest(PdsType.RUD_REQ, NextHeader.REQ_STD, flags, 0, start,
                     rng.randrange(1, 1 << 16), 0 if syn else rng.randrange(1, 1 << 16),
                     False, 0)
    return encode_uet(Frame(pds=pds, ses=ses, payload=payload, src_ip="127.0.0.1",
                            dst_ip="127.0.0.2"))


def build(kind: str, n: int, seed: int, job: int = JOB) -> list[bytes]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        if kind == "garbage":
            out.append(rng.randbytes(rng.randrange(1, 300)))
        elif kind == "syn":
            ses = SesStandard(opcode=SesOpcode.WRITE, flags=int(SesFlag.SOM | SesFlag.EOM),
                              job_id=0xBAD, resource_index=RMA_INDEX, memory_key=RMA_KEY,
                              request_length=32, message_id=i & 0xFFFF)
            out.append(_request(rng, ses, b"s" * 32))
        elif kind == "wrong_pdc":
            if i % 2:
                ses = SesStandard(opcode=SesOpcode.WRITE, flags=int(SesFlag.SOM | SesFlag.EOM),
                                  job_id=job, resource_index=RMA_INDEX, memory_key=RMA_KEY,
                                  request_length=16, message_id=i & 0xFFFF)
                out.append(_request(rng, ses, b"w" * 16, syn=False))
            else:
                cp = PdsControl(ctl_type=rng.choice([CtlType.ACK_REQ, CtlType.CLEAR,
                                                     CtlType.CLOSE]),
                                psn=rng.randrange(1 << 32), spdcid=rng.randrange(1, 1 << 16),
                                dpdcid=rng.randrange(1, 1 << 16))
                out.append(encode_uet(Frame(pds=cp, src_ip="127.0.0.1", dst_ip="127.0.0.2")))
        elif kind == "half":
            ses = SesStandard(opcode=SesOpcode.WRITE, flags=int(SesFlag.SOM | SesFlag.REL),
                              job_id=job, resource_index=WRITEONLY_INDEX,
                              memory_key=WRITEONLY_KEY, request_length=8192,
                              message_id=i & 0xFFFF)
            out.append(_request(rng, ses, bytes(1024)))
        elif kind == "sends":
            ses = SesStandard(opcode=SesOpcode.SEND, flags=int(SesFlag.SOM | SesFlag.EOM),
                              job_id=job, resource_index=RECV_INDEX, request_length=64,
                              message_id=i & 0xFFFF)
            out.append(_request(rng, ses, b"m" * 64))
        else:
            raise SystemExit(f"flood.py: unknown kind {kind!r}")
    return out


def sources(net: str, n: int) -> list[str]:
    """``n`` distinct loopback addresses under ``net`` (``127.A.B``)."""
    a, b = (int(x) for x in net.split(".")[1:3])
    out = []
    for i in range(n):
        hi, lo = divmod(i, 250)
        out.append(f"127.{a}.{(b + hi) % 256}.{lo + 1}")
    return out


def main(argv: list[str]) -> int:
    kind, n, seconds, dst, net = argv[0], int(argv[1]), float(argv[2]), argv[3], argv[4]
    job = int(argv[5], 0) if len(argv) > 5 else JOB
    data = build(kind, n, seed=n, job=job)
    srcs = sources(net, min(n, 2000))
    socks: dict[str, socket.socket] = {}
    t0 = time.monotonic()
    for i, d in enumerate(data):
        src = srcs[i % len(srcs)]
        s = socks.get(src)
        if s is None:
            s = socks[src] = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.bind((src, 0))
        with contextlib.suppress(OSError):  # a full socket buffer: that one is lost
            s.sendto(d, (dst, 4793))
        if i % 50 == 49:
            lag = t0 + seconds * (i + 1) / n - time.monotonic()
            if lag > 0:
                time.sleep(lag)
    for s in socks.values():
        s.close()
    print(f"{kind} {n} in {time.monotonic() - t0:.2f}s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
