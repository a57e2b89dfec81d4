"""Huge pages for the run's objects: frames and pymalloc's arenas in one advised region.

A large fabric keeps tens of thousands of ~4.2 KB frames in flight and hundreds of MB of
small objects (PDCs, per-packet records, route tables), and every hop reads a dozen of them
cold; in 4 KiB pages those reads miss the TLB as often as the caches. :func:`enable` has
``uet.native._huge_heap`` (``huge_heap.c``) reserve one region that the kernel is asked to
back with 2 MiB pages (``madvise(MADV_HUGEPAGE)``) and serve from it, from then on:

- every allocation of 2,049-8,192 bytes (the data frames and their payloads: a 4,096-byte
  payload's frame is a 4,183-byte bytes object), from the region's first half. It wraps
  the raw allocator, where pymalloc sends every object of more than 512 bytes (so objects
  of 512 bytes or less pay nothing for it), and the object allocator too where pymalloc is
  not under it (``PYTHONMALLOC=malloc``). Freed blocks are reused by the next block of
  their size class, never returned to the system; other sizes go to the allocator as
  before;
- every new pymalloc arena (1 MiB, holding all objects of 512 bytes or less), from the
  second half. An arena pymalloc frees is kept for its next one.

Once a half is full, its requests go where they went before. It is on for ``uet run``
(:mod:`uet.experiments.uet_stack`) where transparent huge pages are offered
(``/sys/kernel/mm/transparent_hugepage/enabled``: ``always`` or ``madvise``) and stays
for the life of the process. ``UET_HUGE_HEAP=0`` leaves the allocators alone, and so does
``UET_PURE_PYTHON=1``. Outputs do not depend on it: only where objects live.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from uet.native._common import load_core

#: the kernel's setting for transparent huge pages
THP_SETTING = Path("/sys/kernel/mm/transparent_hugepage/enabled")


def thp_mode(path: Path = THP_SETTING) -> str | None:
    """The kernel's transparent-huge-page mode (``always``, ``madvise``, ``never``), or
    None where there is no such setting."""
    try:
        text = path.read_text()
    except OSError:
        return None
    for word in text.split():
        if word.startswith("[") and word.endswith("]"):
            return word[1:-1]
    return None


def disabled_by_env() -> bool:
    """``UET_HUGE_HEAP=0`` (or ``off``, ``no``, ``false``) turns the region off."""
    return os.environ.get("UET_HUGE_HEAP", "").strip().lower() in ("0", "off", "no", "false")


def enable(reserve_bytes: int | None = None) -> bool:
    """Serve 2-8 KiB objects and pymalloc's arenas from a huge-page region from now on;
    True if it is on.

    Once per process (later calls report). ``reserve_bytes``: the region's address space
    (default: the machine's memory; pages are only made when written)."""
    core = _core()
    if core is None:
        return False
    if core.stats()["installed"]:
        return True
    if disabled_by_env() or sys.platform != "linux" or thp_mode() not in ("always", "madvise"):
        return False
    if reserve_bytes is not None:
        return bool(core.install(int(reserve_bytes), True))
    # the machine's memory, or less where the kernel will not reserve that much address
    # space (vm.overcommit_memory=2)
    size = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    while size >= 64 << 20:
        if core.install(size, True):
            return True
        size //= 4
    return False


def stats() -> dict[str, Any]:
    """The region's use: ``installed``, ``huge_pages_advised``, ``object_domain`` (the
    object allocator is wrapped too: no pymalloc under it), ``reserved_bytes``,
    ``region_bytes`` (handed out in runs so far), ``in_use_bytes``, ``peak_in_use_bytes``,
    ``allocs``, ``frees``, ``fallbacks`` (blocks served by the allocator before),
    ``full`` (requests the region could not take); for the arenas ``arena_size``,
    ``arena_region_bytes`` (handed out so far), ``arenas_live``, ``arenas_free`` (kept for
    reuse), ``arena_allocs``, ``arena_frees``, ``arena_fallbacks`` (arenas served by the
    allocator before: the half was full)."""
    core = _core()
    if core is None:
        return {"installed": False}
    return dict(core.stats())


def _core() -> Any:
    return load_core("_huge_heap")


__all__ = ["disabled_by_env", "enable", "stats", "thp_mode"]
