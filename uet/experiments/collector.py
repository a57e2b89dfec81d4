"""Garbage-collector settings for a long run over a large, long-lived object graph.

A built fabric is hundreds of thousands of long-lived objects (end points, PDCs, ports,
routes) and a run allocates millions of short-lived ones (frames, records) that reference
counting frees. With the default thresholds Python's cyclic collector keeps traversing the
long-lived graph, which costs ~10% of a 128-host run and grows with the fabric.
:func:`quiet_collector` moves everything that exists at its start out of the collector's
reach (``gc.freeze``; without a collection first: the build runs with the collector off and
leaves next to no garbage, 0-5 objects at 1,024 hosts, while a full collection of the built
fabric cost ~0.15 s there) and collects young objects less often; both are undone at its
end, so a process running many experiments (sweeps) still frees each one. While a fabric is built
the collector is off (:func:`uet.fabric.gcpause.paused_collector`, re-exported here).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

from uet.fabric.gcpause import paused_collector

__all__ = ["YOUNG_THRESHOLD", "paused_collector", "quiet_collector"]

#: allocations between young-generation collections while a run is on (Python: 700).
#: Each collection walks the young objects' references into the (cold) fabric: at 1,024
#: hosts 20,000 cost ~1.6 s of collections per run, 200,000 ~0.3 s (a run makes next to no
#: cycles: ~2,400 objects collected in all)
YOUNG_THRESHOLD = 200_000


@contextmanager
def quiet_collector() -> Iterator[None]:
    """Freeze what exists now and collect young objects every ``YOUNG_THRESHOLD``
    allocations until the block ends."""
    old = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(YOUNG_THRESHOLD, old[1], old[2])
    try:
        yield
    finally:
        gc.set_threshold(*old)
        gc.unfreeze()
