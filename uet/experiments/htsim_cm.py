"""htsim connection-matrix files: read them as workloads, write workloads as them.

The format (``htsim/sim/datacenter/connection_matrix.cpp``, ``ConnectionMatrix::load``):
header lines ``Nodes N``, ``Connections M`` and optionally ``Triggers T`` and
``Failures F``; ``#`` comment lines; then one line per flow

    src->dst [id I] (start T_us | trigger K) size BYTES [send_done_trigger K]
             [recv_done_trigger K] [prio P]

(``start`` in microseconds; htsim's main programs convert it with
``timeFromUs((uint32_t)start)``, i.e. whole microseconds) and one line per trigger

    trigger id K (oneshot | multishot | barrier count C)

A flow with ``trigger K`` starts when trigger K fires; a flow's ``recv_done_trigger K``
(all bytes received) or ``send_done_trigger K`` (all bytes acknowledged) activates K. A
barrier fires after ``count`` activations, a oneshot at the first. ``failure`` lines are
kept as text and not interpreted here.

Mapping to :class:`~uet.experiments.workload.Workload`: a triggered flow depends on the flows
that activate its trigger (barrier: all of them, and ``count`` must equal their number; a
oneshot/multishot must have exactly one activating flow). The writer groups dependent flows
by their dependency set, one trigger per set (oneshot for one dependency, barrier
otherwise), each dependency firing it with ``recv_done_trigger``; a flow can fire only one
trigger, so a flow that two different dependency sets need cannot be written.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path

from uet.errors import ConfigError
from uet.experiments.workload import Flow, Workload

US = 1_000_000
TRIGGER_TYPES = ("oneshot", "multishot", "barrier")


class CmFormatError(ConfigError):
    """A malformed or unsupported connection matrix; names the line."""


@dataclass
class CmConnection:
    """One ``src->dst`` line (``start_us`` None when started by a trigger)."""

    src: int
    dst: int
    size: int
    start_us: Decimal | None = None
    id: int = 0
    trigger: int = 0
    send_done_trigger: int = 0
    recv_done_trigger: int = 0
    prio: int | None = None
    line: int = 0


@dataclass
class CmTrigger:
    id: int
    type: str
    count: int = 0
    line: int = 0


@dataclass
class ConnectionMatrix:
    """A parsed connection-matrix file."""

    nodes: int
    connections: list[CmConnection]
    triggers: dict[int, CmTrigger] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)

    def to_workload(self, name: str = "cm_file", hosts: int | None = None) -> Workload:
        """The flows as a workload (ids from the file, or 1, 2, ... in file order)."""
        explicit = {c.id for c in self.connections if c.id}
        next_id = 1
        ids: list[int] = []
        for c in self.connections:
            if c.id:
                ids.append(c.id)
                continue
            while next_id in explicit:
                next_id += 1
            ids.append(next_id)
            next_id += 1
        firing: dict[int, list[int]] = defaultdict(list)
        for fid, c in zip(ids, self.connections, strict=True):
            for t in (c.send_done_trigger, c.recv_done_trigger):
                if t:
                    if t not in self.triggers:
                        raise CmFormatError(f"line {c.line}: trigger {t} is not defined")
                    firing[t].append(fid)
        flows: list[Flow] = []
        for fid, c in zip(ids, self.connections, strict=True):
            deps: tuple[int, ...] = ()
            if c.trigger:
                trig = self.triggers.get(c.trigger)
                if trig is None:
                    raise CmFormatError(f"line {c.line}: trigger {c.trigger} is not defined")
                srcs = firing.get(c.trigger, [])
                if not srcs:
                    raise CmFormatError(f"line {trig.line}: trigger {trig.id} is never "
                                        "activated, flows waiting on it never start")
                if trig.type == "barrier" and trig.count != len(srcs):
                    raise CmFormatError(
                        f"line {trig.line}: barrier {trig.id} has count {trig.count} but "
                        f"{len(srcs)} flows activate it (only count == activating flows "
                        "maps to dependencies)")
                if trig.type != "barrier" and len(srcs) != 1:
                    raise CmFormatError(
                        f"line {trig.line}: {trig.type} trigger {trig.id} is activated by "
                        f"{len(srcs)} flows ('first of' is not supported; use a barrier)")
                deps = tuple(srcs)
            start = 0 if c.start_us is None else int(c.start_us * US)
            flows.append(Flow(fid, c.src, c.dst, c.size, start, deps))
        n = self.nodes if hosts is None else hosts
        return Workload(name, n, flows, meta={"cm_nodes": self.nodes})


def _int(tok: str, what: str, line: int) -> int:
    try:
        return int(tok)
    except ValueError:
        raise CmFormatError(f"line {line}: {what} {tok!r} is not an integer") from None


def parse_cm(text: str) -> ConnectionMatrix:
    """Parse connection-matrix text (see the module docstring)."""
    nodes = conns = ntrig = nfail = None
    connections: list[CmConnection] = []
    triggers: dict[int, CmTrigger] = {}
    failures: list[str] = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        tokens = raw.split()
        if not tokens or tokens[0].startswith("#"):
            continue
        head = tokens[0]
        if head in ("Nodes", "Connections", "Triggers", "Failures"):
            if len(tokens) != 2:
                raise CmFormatError(f"line {lineno}: expected '{head} <number>'")
            value = _int(tokens[1], head, lineno)
            if head == "Nodes":
                nodes = value
            elif head == "Connections":
                conns = value
            elif head == "Triggers":
                ntrig = value
            else:
                nfail = value
        elif "->" in head:
            connections.append(_parse_connection(tokens, lineno))
        elif head == "trigger":
            t = _parse_trigger(tokens, lineno)
            if t.id in triggers:
                raise CmFormatError(f"line {lineno}: trigger {t.id} defined twice")
            triggers[t.id] = t
        elif head == "failure":
            failures.append(raw.strip())
        else:
            raise CmFormatError(f"line {lineno}: unknown line starting {head!r}")
    if nodes is None:
        raise CmFormatError("missing 'Nodes N' line")
    if conns is not None and conns != len(connections):
        raise CmFormatError(f"Connections {conns} but {len(connections)} connection lines")
    if ntrig is not None and ntrig != len(triggers):
        raise CmFormatError(f"Triggers {ntrig} but {len(triggers)} trigger lines")
    if nfail is not None and nfail != len(failures):
        raise CmFormatError(f"Failures {nfail} but {len(failures)} failure lines")
    seen: set[int] = set()
    for c in connections:
        if not (0 <= c.src < nodes and 0 <= c.dst < nodes):
            raise CmFormatError(f"line {c.line}: {c.src}->{c.dst} outside Nodes {nodes}")
        if c.id:
            if c.id in seen:
                raise CmFormatError(f"line {c.line}: flow id {c.id} used twice")
            seen.add(c.id)
    return ConnectionMatrix(nodes, connections, triggers, failures)


def _parse_connection(tokens: list[str], line: int) -> CmConnection:
    s, _, d = tokens[0].partition("->")
    c = CmConnection(_int(s, "source", line), _int(d, "destination", line), 0, line=line)
    size = None
    i = 1
    while i < len(tokens):
        tok = tokens[i]
        if i + 1 >= len(tokens):
            raise CmFormatError(f"line {line}: {tok!r} without a value")
        val = tokens[i + 1]
        if tok == "start":
            try:
                c.start_us = Decimal(val)
            except InvalidOperation:
                raise CmFormatError(f"line {line}: start {val!r} is not a number") from None
            if c.start_us < 0:
                raise CmFormatError(f"line {line}: negative start")
        elif tok == "size":
            size = _int(val, "size", line)
        elif tok == "id":
            c.id = _int(val, "id", line)
            if c.id <= 0:
                raise CmFormatError(f"line {line}: flow id must be positive (0 is 'none')")
        elif tok == "trigger":
            c.trigger = _int(val, "trigger", line)
        elif tok == "send_done_trigger":
            c.send_done_trigger = _int(val, "send_done_trigger", line)
        elif tok == "recv_done_trigger":
            c.recv_done_trigger = _int(val, "recv_done_trigger", line)
        elif tok == "prio":
            c.prio = _int(val, "prio", line)
        else:
            raise CmFormatError(f"line {line}: unknown token {tok!r} (allowed: start, size, "
                                "id, trigger, send_done_trigger, recv_done_trigger, prio)")
        i += 2
    if size is None or size <= 0:
        raise CmFormatError(f"line {line}: a positive 'size BYTES' is required")
    c.size = size
    if c.start_us is None and not c.trigger:
        raise CmFormatError(f"line {line}: no start method (give 'start T' or 'trigger K')")
    if c.start_us is not None and c.trigger:
        raise CmFormatError(f"line {line}: both start time and trigger given")
    if c.trigger and not c.id:
        raise CmFormatError(f"line {line}: a triggered flow needs an 'id'")
    return c


def _parse_trigger(tokens: list[str], line: int) -> CmTrigger:
    tid, ttype, count = 0, None, 0
    i = 1
    while i < len(tokens):
        tok = tokens[i]
        if tok in ("id", "count"):
            if i + 1 >= len(tokens):
                raise CmFormatError(f"line {line}: {tok!r} without a value")
            v = _int(tokens[i + 1], tok, line)
            if tok == "id":
                tid = v
            else:
                count = v
            i += 2
            continue
        if tok in TRIGGER_TYPES:
            if ttype is not None:
                raise CmFormatError(f"line {line}: trigger type given twice")
            ttype = tok
        else:
            raise CmFormatError(f"line {line}: unknown trigger token {tok!r}")
        i += 1
    if tid <= 0:
        raise CmFormatError(f"line {line}: trigger with no (positive) id")
    if ttype is None:
        raise CmFormatError(f"line {line}: trigger with no type (oneshot, multishot, barrier)")
    if ttype == "barrier" and count <= 0:
        raise CmFormatError(f"line {line}: barrier needs a positive count")
    return CmTrigger(tid, ttype, count, line)


def load_cm(path: str | Path) -> ConnectionMatrix:
    """Read a connection-matrix file."""
    return parse_cm(Path(path).read_text(encoding="utf-8"))


def _us(ps: int) -> str:
    whole, frac = divmod(ps, US)
    return str(whole) if not frac else f"{whole}.{frac:06d}".rstrip("0")


def write_cm(workload: Workload, *, ids: bool | None = None) -> str:
    """The workload in htsim's connection-matrix format.

    ``ids``: write ``id`` on every flow (default: only when there are dependencies or the
    ids are not 1..M in order). Start times are written in µs with ps precision; htsim
    itself truncates them to whole µs. Raises ValueError for what htsim cannot express (a
    dependent flow with a start time, a flow needed by two different dependency sets).
    """
    flows = workload.flows
    need_ids = any(f.depends_on for f in flows) or [f.id for f in flows] != list(
        range(1, len(flows) + 1))
    ids = need_ids if ids is None else ids
    if need_ids and not ids:
        raise ValueError("this workload needs flow ids (dependencies or non-sequential ids)")
    trig_of_set: dict[tuple[int, ...], int] = {}
    fires: dict[int, int] = {}
    for f in flows:
        if not f.depends_on:
            continue
        if f.start_ps:
            raise ValueError(f"flow {f.id} has both dependencies and a start time; htsim "
                             "flows start either at a time or on a trigger")
        key = tuple(sorted(set(f.depends_on)))
        if key not in trig_of_set:
            trig_of_set[key] = len(trig_of_set) + 1
        t = trig_of_set[key]
        for d in key:
            if fires.get(d, t) != t:
                raise ValueError(f"flow {d} is a dependency of two different sets of flows; "
                                 "an htsim flow can activate only one trigger")
            fires[d] = t
    lines = [f"Nodes {workload.hosts}", f"Connections {len(flows)}"]
    if trig_of_set:
        lines.append(f"Triggers {len(trig_of_set)}")
    for f in flows:
        parts = [f"{f.src}->{f.dst}"]
        if ids:
            parts += ["id", str(f.id)]
        if f.depends_on:
            parts += ["trigger", str(trig_of_set[tuple(sorted(set(f.depends_on)))])]
        else:
            parts += ["start", _us(f.start_ps)]
        parts += ["size", str(f.size)]
        if f.id in fires:
            parts += ["recv_done_trigger", str(fires[f.id])]
        lines.append(" ".join(parts))
    for key, t in trig_of_set.items():
        kind = "oneshot" if len(key) == 1 else f"barrier count {len(key)}"
        lines.append(f"trigger id {t} {kind}")
    return "\n".join(lines) + "\n"


def save_cm(workload: Workload, path: str | Path) -> Path:
    p = Path(path)
    p.write_text(write_cm(workload), encoding="utf-8")
    return p
