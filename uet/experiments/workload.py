"""Workloads as plain data: flows (messages) with start times and dependencies.

A :class:`Flow` is one message ``src -> dst`` of ``size`` bytes. It starts at ``start_ps``,
or, if it ``depends_on`` other flows, once all of them have been delivered (and not before
``start_ps``). Flow ids are positive integers (as in htsim, where id 0 means "none").
Collectives also say what data each message carries (:class:`Piece`: a chunk of the
all-reduce buffer and whose contributions it holds) so that a run can be checked for
"every byte where it belongs" (:mod:`uet.experiments.collectives`).

:class:`DependencyTracker` is what a runner drives: it hands out the flows to start at the
beginning and, as flows are delivered, the flows that become ready.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from uet.errors import ConfigError


@dataclass(frozen=True, slots=True)
class Piece:
    """Part of a collective's buffer carried by a message.

    ``op``: "reduce" (the receiver adds it to its own copy of the chunk) or "copy" (the
    receiver stores it). ``contributors``: ranks whose inputs the data already combines.
    """

    chunk: int
    offset: int
    length: int
    contributors: tuple[int, ...]
    op: str = "reduce"

    def to_dict(self) -> dict[str, Any]:
        return {"chunk": self.chunk, "offset": self.offset, "length": self.length,
                "contributors": list(self.contributors), "op": self.op}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Piece:
        return cls(d["chunk"], d["offset"], d["length"], tuple(d["contributors"]),
                   d.get("op", "reduce"))


@dataclass(frozen=True, slots=True)
class Flow:
    """One message of a workload."""

    id: int
    src: int
    dst: int
    size: int
    start_ps: int = 0
    depends_on: tuple[int, ...] = ()
    step: int = 0
    pieces: tuple[Piece, ...] = ()
    #: collectives: the receiver combines this message's data into its buffer only once its
    #: own flow ``apply_after`` has started (until then it sits in a receive buffer)
    apply_after: int = 0
    #: the SES operation that carries the flow (``traffic.ops``; uet.experiments.ops)
    op: str = "write"

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"id": self.id, "src": self.src, "dst": self.dst,
                             "size": self.size, "start_ps": self.start_ps,
                             "depends_on": list(self.depends_on), "step": self.step}
        if self.pieces:
            d["pieces"] = [p.to_dict() for p in self.pieces]
        if self.apply_after:
            d["apply_after"] = self.apply_after
        if self.op != "write":
            d["op"] = self.op
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Flow:
        return cls(d["id"], d["src"], d["dst"], d["size"], d.get("start_ps", 0),
                   tuple(d.get("depends_on", ())), d.get("step", 0),
                   tuple(Piece.from_dict(p) for p in d.get("pieces", ())),
                   d.get("apply_after", 0), d.get("op", "write"))


@dataclass(frozen=True, slots=True)
class Collective:
    """What a collective computes: ``ranks[i]`` is the host of rank i; the buffer of
    ``buffer_bytes`` is cut into ``chunks`` ``(offset, length)``."""

    kind: str
    ranks: tuple[int, ...]
    buffer_bytes: int
    chunks: tuple[tuple[int, int], ...]
    op: str = "sum"

    def rank_of(self, host: int) -> int:
        return self.ranks.index(host)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "ranks": list(self.ranks),
                "buffer_bytes": self.buffer_bytes,
                "chunks": [list(c) for c in self.chunks], "op": self.op}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Collective:
        return cls(d["kind"], tuple(d["ranks"]), d["buffer_bytes"],
                   tuple((a, b) for a, b in d["chunks"]), d.get("op", "sum"))


class WorkloadError(ConfigError):
    """An inconsistent workload (duplicate ids, unknown or cyclic dependencies)."""


@dataclass
class Workload:
    """Flows over ``hosts`` hosts (the htsim ``Nodes``), optionally a collective."""

    name: str
    hosts: int
    flows: list[Flow]
    collective: Collective | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> None:
        """Raise :class:`WorkloadError` unless ids are unique and dependencies acyclic."""
        ids = {}
        for f in self.flows:
            if f.id <= 0:
                raise WorkloadError(f"flow id {f.id}: ids are positive")
            if f.id in ids:
                raise WorkloadError(f"flow id {f.id} appears twice")
            if not (0 <= f.src < self.hosts and 0 <= f.dst < self.hosts) or f.src == f.dst:
                raise WorkloadError(f"flow {f.id}: {f.src}->{f.dst} with {self.hosts} hosts")
            if f.size < 0 or (f.size == 0 and f.op != "no_op"):
                raise WorkloadError(f"flow {f.id}: size {f.size}")
            ids[f.id] = f
        for f in self.flows:
            for d in f.depends_on:
                if d not in ids:
                    raise WorkloadError(f"flow {f.id} depends on unknown flow {d}")
            if f.apply_after and f.apply_after not in ids:
                raise WorkloadError(f"flow {f.id}: apply_after unknown flow {f.apply_after}")
        self.order()

    def by_id(self) -> dict[int, Flow]:
        return {f.id: f for f in self.flows}

    def dependents(self) -> dict[int, list[int]]:
        """flow id -> ids of the flows that wait for it."""
        out: dict[int, list[int]] = defaultdict(list)
        for f in self.flows:
            for d in f.depends_on:
                out[d].append(f.id)
        return dict(out)

    def order(self) -> list[Flow]:
        """The flows in a dependency order (Kahn; ties by id). Raises on a cycle."""
        by_id = self.by_id()
        waiting = {f.id: len(set(f.depends_on)) for f in self.flows}
        deps = self.dependents()
        queue = deque(sorted(i for i, n in waiting.items() if n == 0))
        out: list[Flow] = []
        while queue:
            i = queue.popleft()
            out.append(by_id[i])
            for j in sorted(set(deps.get(i, ()))):
                waiting[j] -= 1
                if waiting[j] == 0:
                    queue.append(j)
        if len(out) != len(self.flows):
            stuck = sorted(i for i, n in waiting.items() if n > 0)[:5]
            raise WorkloadError(f"dependency cycle among flows {stuck}...")
        return out

    def steps(self) -> int:
        return 1 + max((f.step for f in self.flows), default=-1)

    def total_bytes(self) -> int:
        return sum(f.size for f in self.flows)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name, "hosts": self.hosts,
                             "flows": [f.to_dict() for f in self.flows]}
        if self.collective is not None:
            d["collective"] = self.collective.to_dict()
        if self.meta:
            d["meta"] = dict(self.meta)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Workload:
        coll = d.get("collective")
        return cls(d["name"], d["hosts"], [Flow.from_dict(f) for f in d["flows"]],
                   Collective.from_dict(coll) if coll else None, dict(d.get("meta", {})))


class DependencyTracker:
    """Which flows may start: the runner's view of a workload's dependencies.

    ``initial()`` gives ``(start_ps, flow)`` for every flow without dependencies;
    ``delivered(flow_id, now_ps)`` marks a flow delivered and returns the flows that are now
    ready as ``(start_ps, flow)`` with ``start_ps = max(now_ps, flow.start_ps)``.
    """

    def __init__(self, workload: Workload) -> None:
        self.flows = workload.by_id()
        self._deps = workload.dependents()
        self._waiting = {f.id: set(f.depends_on) for f in workload.flows}
        self.done: set[int] = set()

    def initial(self) -> list[tuple[int, Flow]]:
        ready = [f for f in self.flows.values() if not f.depends_on]
        return sorted(((f.start_ps, f) for f in ready), key=lambda x: (x[0], x[1].id))

    def delivered(self, flow_id: int, now_ps: int) -> list[tuple[int, Flow]]:
        if flow_id in self.done:
            return []
        self.done.add(flow_id)
        out = []
        for j in self._deps.get(flow_id, ()):
            w = self._waiting[j]
            if flow_id in w:
                w.discard(flow_id)
                if not w:
                    f = self.flows[j]
                    out.append((max(now_ps, f.start_ps), f))
        return sorted(out, key=lambda x: (x[0], x[1].id))

    @property
    def remaining(self) -> int:
        return len(self.flows) - len(self.done)

    def all_done(self) -> bool:
        return len(self.done) == len(self.flows)


def renumber(flows: Iterable[Flow], first: int = 1) -> list[Flow]:
    """Flows with ids ``first, first+1, ...`` in the given order (dependencies remapped)."""
    flows = list(flows)
    new = {f.id: first + i for i, f in enumerate(flows)}
    from dataclasses import replace

    return [replace(f, id=new[f.id], depends_on=tuple(new[d] for d in f.depends_on),
                    apply_after=new.get(f.apply_after, 0)) for f in flows]
