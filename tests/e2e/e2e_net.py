"""The lossy fabric of the end-to-end tests, and what every test checks at its end.

A star of ``hosts`` hosts (100 Gb/s, 1 us links) where every host link loses 2% of the
frames in each direction (Bernoulli) and delays each frame by up to 2 us more (uniform
jitter: frames overtake each other). Seeds are fixed, so every run is the same.
"""

from __future__ import annotations

import random
from typing import Any

from uet.runtime.fabric import Fabric

LOSS = 0.02
JITTER_PS = 2_000_000
#: generous per-operation bound in fabric time (RTOs at 2% loss stay far below it)
TIMEOUT_PS = 2 * 10**11


def lossy_topology(hosts: int = 3, loss: float = LOSS, jitter_ps: int = JITTER_PS) -> dict:
    return {"kind": "star", "hosts": hosts, "impairments": [
        {"at": f"h{i}", "direction": "both", "loss": loss, "jitter_ps": jitter_ps}
        for i in range(hosts)]}


def lossy_fabric(profile: Any = "hpc", *, hosts: int = 3, seed: int = 1,
                 **kw: Any) -> Fabric:
    fab = Fabric(lossy_topology(hosts), profile=profile, seed=seed, **kw)
    for h in fab.hosts:
        h.timeout_ps = TIMEOUT_PS
    return fab


def payload(n: int, seed: int) -> bytes:
    return random.Random(seed).randbytes(n)


def frames_lost(fab: Fabric) -> int:
    return sum(c.get("drop.loss", 0) for c in fab.counters()["link"].values())


def check_clean(fab: Fabric, *, min_lost: int = 1) -> None:
    """The run lost frames (the test exercised recovery) and no request reached an SES
    twice; no frame failed to decode."""
    assert frames_lost(fab) >= min_lost, "the fabric lost nothing: the test proves little"
    for i in range(len(fab.hosts)):
        st = fab.endpoint(i).stats
        assert st["fep.duplicates_delivered"] == 0, (i, st)
        assert st.get("fep.rx_decode_error", 0) == 0, (i, st)
