"""Exactly-once through the public Fabric API under every impairment (issue 13): the CI subset
of the soak matrix (the long one is ``benchmarks/soak.py``, whose table docs/pds.md shows).

Each run streams 300 seeded operations between three hosts (SEND, WRITE, fetching ATOMIC,
READ; messages up to 4 MiB, far beyond MP_RANGE x MTU = 512 KiB) and checks every result
byte for byte (tests/soak/workload.py): 0 hung, 0 lost, 0 duplicated, 0 corrupted, ROD in
order, every failure reported with a return code, every atomic applied exactly once.
"""

from __future__ import annotations

import pytest
from workload import SoakSpec, run

GILBERT = {"p_gb": 0.01, "p_bg": 0.3, "loss_bad": 0.5}
MIX = {"loss": 0.05, "duplicate": 0.03, "jitter_ps": 2_000_000, "corrupt": 0.02}
HEAVY = {"max_retries": 12}  # 10% per link is 34% per round trip
HEAVIER = {"max_retries": 20}  # 20%: 59% per round trip
#: every frame sealed: cluster mode (a key per source), an SSI per host, a new derived key
#: every 256 frames (docs/tss.md)
TSS = {"mode": "cluster", "sdi": 7, "job": 1, "ssi": "auto", "rekey_mask": 0xFF00,
       "key": "736f616b2074657374206b6579206f6620746865207473732073756974652121"}

CI = [
    (SoakSpec("rud-loss0"), 1),
    (SoakSpec("rud-loss1", loss=0.01), 2),
    (SoakSpec("rud-loss5", loss=0.05), 3),
    (SoakSpec("rud-loss10", loss=0.10, pds=HEAVY), 4),
    (SoakSpec("rud-loss20", loss=0.20, pds=HEAVIER, ops=150, max_bytes=1 << 20), 5),
    (SoakSpec("rud-gilbert", gilbert=GILBERT), 6),
    (SoakSpec("rud-dup", duplicate=0.05), 7),
    (SoakSpec("rud-reorder", jitter_ps=3_000_000), 8),
    (SoakSpec("rud-corrupt", corrupt=0.03), 9),
    (SoakSpec("rud-mix", **MIX), 10),
    (SoakSpec("rud-mix", **MIX), 11),
    (SoakSpec("rod-loss5", mode="ROD", loss=0.05), 12),
    (SoakSpec("rod-mix", mode="ROD", **MIX), 13),
    (SoakSpec("rudi-loss5", mode="RUDI", loss=0.05), 14),
    (SoakSpec("rudi-mix", mode="RUDI", **MIX), 15),
    (SoakSpec("uud-loss5-dup", mode="UUD", loss=0.05, duplicate=0.05), 16),
    (SoakSpec("rud-mix-tss", tss=TSS, **MIX), 17),
]


@pytest.mark.parametrize(("spec", "seed"), CI, ids=[f"{s.name}-{seed}" for s, seed in CI])
async def test_soak(spec, seed):
    res = await run(spec, seed)
    assert res.ops == spec.ops and res.ok + res.failed == res.ops, res.row()
    assert res.clean, (res.row(), res.problems[:5])
    assert res.hung == res.lost == res.dup == res.corrupted == res.out_of_order == 0
    assert res.no_code == 0
    if spec.loss or spec.gilbert or spec.corrupt:
        assert res.frames_lost > 0  # the impairments did act
    if spec.mode != "UUD":
        # most of the stream gets through; what fails, fails with a code
        assert res.ok >= res.ops * 0.6, res.row()
        assert set(res.codes) <= {"UNDELIVERABLE", "rudi_redelivered"}, res.codes
    if spec.tss:
        # every frame was sealed and opened; the only refusals are the fabric's duplicated
        # copies, which the TSS takes for replays (corrupted frames die at the FCS)
        assert res.tss_rx_ok > 1000, res.tss_rx_ok
        assert set(res.tss_refused) <= {"replay"} and res.tss_refused["replay"] > 0, \
            res.tss_refused
