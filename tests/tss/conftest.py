"""Helpers for the TSS tests: sublayers of one domain, frames to seal."""

from __future__ import annotations

import pytest

from uet.tss import TssConfig, TssSublayer
from uet.wire.records import Frame, PdsRequest, SesStandard, TssHeader

KEY = bytes(range(32))
A, B, C = "10.0.0.1", "10.0.0.2", "10.0.0.3"


def sublayer(ip: str, key: bytes = KEY, **domain) -> TssSublayer:
    d = {"mode": "direct", "sdi": 1, "key": key.hex(), "job": 1, **domain}
    return TssSublayer(TssConfig.from_dict(d), ip)


def frame(src: str = A, dst: str = B, psn: int = 1000, payload: bytes = b"payload!",
          sdi: int = 1, ev: int = 0x1234, **kw) -> Frame:
    return Frame(pds=PdsRequest(psn=psn, spdcid=7, flags=0x04),
                 ses=SesStandard(job_id=1, request_length=len(payload)), payload=payload,
                 src_ip=src, dst_ip=dst, ev=ev, tss=TssHeader(sdi=sdi), **kw)


@pytest.fixture
def pair():
    return sublayer(A), sublayer(B)
