"""Building without the cyclic garbage collector.

Building a fabric allocates hundreds of thousands of long-lived objects (ports, links,
routes, end points) and frees next to nothing; with the collector on, every full
collection on the way traverses all built so far (at 8,192 hosts about half of the
build). :func:`paused_collector` keeps it off for a block, then hands what was allocated
to the oldest generation in one step (``gc.freeze`` + ``gc.unfreeze``: no traversal), as
if it had survived the collections it skipped, and turns it back on.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused_collector() -> Iterator[None]:
    """No cyclic collection until the block ends (nested blocks, or a collector already
    off, leave it as they find it)."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        if not gc.get_freeze_count():  # nobody else's frozen objects to thaw with ours
            gc.freeze()
            gc.unfreeze()
        gc.enable()


__all__ = ["paused_collector"]
