"""Target resources: jobs, PIDonFEP, resource indices with generations, memory regions.

A request names ``job_id``, ``pid_on_fep``, ``resource_index`` and ``ri_generation``; RMA
requests also a ``memory_key`` and an offset. :meth:`ResourceTable.resolve` and
:func:`check_region` turn a request into a place in memory or into the return code of the
first check that fails, in this order: BAD_JOB_ID, BAD_PID, BAD_INDEX, BAD_GENERATION,
DISABLED, then BAD_MKEY, PERM_VIOLATION, BAD_ADDR. Nothing is written before every check
has passed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntFlag

from uet.ses.matching import MatchQueue
from uet.wire.constants import ReturnCode as Rc


class Perm(IntFlag):
    """Remote access rights of a memory region."""

    READ = 0x1
    WRITE = 0x2
    ATOMIC = 0x4
    ALL = 0x7


@dataclass(eq=False, slots=True)
class MemoryRegion:
    """Registered memory: ``buffer`` is the host memory the region exposes.

    ``base_va`` is the virtual address of byte 0 (absolute addressing, REL=0);
    ``idempotent_safe`` allows RUDI requests (ref. 3.10); ``on_read(offset, length)`` is
    called after a remote READ was served (rendezvous bookkeeping). ``store=False`` makes
    a scratch region: a WRITE into it passes every check (key, permission, bounds,
    reassembly, duplicates) and completes, but its bytes are not copied in (the sink many
    hosts share in experiments that never read their data back, where each copy was a
    4 KiB memory write per packet for nothing).
    """

    key: int
    buffer: bytearray
    perms: Perm = Perm.ALL
    base_va: int = 0
    idempotent_safe: bool = False
    on_read: Callable[[int, int], None] | None = None
    store: bool = True


@dataclass(eq=False, slots=True)
class Resource:
    """One resource index of one process (PIDonFEP) of one job."""

    job_id: int
    pid_on_fep: int
    index: int
    generation: int = 0
    enabled: bool = True
    regions: dict[int, MemoryRegion] = field(default_factory=dict)
    queue: MatchQueue = field(default_factory=MatchQueue)


class ResourceTable:
    """Every resource an end point exposes, by (job, pid, index)."""

    # slots for what the SES core reads per packet
    __slots__ = ("_jobs", "__dict__", "__weakref__")

    def __init__(self) -> None:
        self._jobs: dict[int, dict[int, dict[int, Resource]]] = {}

    def register(self, job_id: int, pid_on_fep: int = 0, resource_index: int = 0, *,
                 generation: int = 0) -> Resource:
        """Create (or return the existing) resource index."""
        pids = self._jobs.setdefault(job_id, {})
        indices = pids.setdefault(pid_on_fep, {})
        res = indices.get(resource_index)
        if res is None:
            res = indices[resource_index] = Resource(job_id, pid_on_fep, resource_index,
                                                     generation)
        return res

    def get(self, job_id: int, pid_on_fep: int, resource_index: int) -> Resource | None:
        return self._jobs.get(job_id, {}).get(pid_on_fep, {}).get(resource_index)

    def add_region(self, job_id: int, pid_on_fep: int, resource_index: int, key: int,
                   buffer: bytearray, perms: Perm = Perm.ALL, *, base_va: int = 0,
                   idempotent_safe: bool = False, store: bool = True) -> MemoryRegion:
        """Register ``buffer`` under ``key`` on a resource (registering the resource too);
        ``store=False``: a scratch region (see :class:`MemoryRegion`)."""
        res = self.register(job_id, pid_on_fep, resource_index)
        if key in res.regions:
            raise ValueError(f"memory key {key:#x} already registered on {job_id}/"
                             f"{pid_on_fep}/{resource_index}")
        mr = MemoryRegion(key, buffer, perms, base_va, idempotent_safe, store=store)
        res.regions[key] = mr
        return mr

    def remove_region(self, job_id: int, pid_on_fep: int, resource_index: int,
                      key: int) -> None:
        res = self.get(job_id, pid_on_fep, resource_index)
        if res is not None:
            res.regions.pop(key, None)

    def bump_generation(self, job_id: int, pid_on_fep: int, resource_index: int) -> int:
        """Invalidate a resource index (requests with the old generation get BAD_GENERATION)."""
        res = self.get(job_id, pid_on_fep, resource_index)
        if res is None:
            raise KeyError((job_id, pid_on_fep, resource_index))
        res.generation = (res.generation + 1) & 0xFF
        return res.generation

    def resolve(self, job_id: int, pid_on_fep: int, resource_index: int,
                ri_generation: int) -> Resource | Rc:
        """The addressed resource, or the return code of the first failing check."""
        pids = self._jobs.get(job_id)
        if pids is None:
            return Rc.BAD_JOB_ID
        indices = pids.get(pid_on_fep)
        if indices is None:
            return Rc.BAD_PID
        res = indices.get(resource_index)
        if res is None:
            return Rc.BAD_INDEX
        if res.generation != ri_generation:
            return Rc.BAD_GENERATION
        if not res.enabled:
            return Rc.DISABLED
        return res


def check_region(res: Resource, key: int, perm: Perm | int, buffer_offset: int, length: int,
                 relative: bool) -> tuple[MemoryRegion, int] | Rc:
    """The region and start offset for ``length`` bytes, or the failing check's code."""
    mr = res.regions.get(key)
    if mr is None:
        return Rc.BAD_MKEY
    if not int(mr.perms) & int(perm):  # plain ints: an IntFlag "&" costs ~1 us per packet
        return Rc.PERM_VIOLATION
    start = buffer_offset if relative else buffer_offset - mr.base_va
    if start < 0 or start + length > len(mr.buffer):
        return Rc.BAD_ADDR
    return mr, start
