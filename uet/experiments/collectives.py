"""All-reduce as the dependent message steps it really is, and checks that it is correct.

Generators (``ranks`` = the hosts taking part, rank i on host ``ranks[i]``; ``size`` = the
buffer each rank reduces):

* :func:`allreduce_ring`: reduce-scatter then all-gather around the ring, 2(N-1) steps of N
  messages of size/N. Step s > 0 of rank r waits for the message rank r-1 sent it at s-1.
* :func:`allreduce_butterfly`: recursive doubling, log2 N steps; at step s rank r exchanges
  its whole (partially reduced) buffer with r XOR 2^s. The partner's data is reduced in
  only once r's own step-s message has taken r's buffer (``Flow.apply_after``).
* :func:`allreduce_halving_doubling` (Rabenseifner): recursive-halving reduce-scatter then
  recursive-doubling all-gather, 2 log2 N steps of N messages of size/2, size/4, ...

In the butterflies a step waits for both messages of the pair exchange before it (each rank
needs what it received, and its own previous send delivered stands for everything it had
received before). Every message lists its :class:`~uet.experiments.workload.Piece` s.

:func:`replay` starts each message as soon as its dependencies are delivered (taking its
data from the sender at that moment, as a runner must), delivers the messages in flight in
a random order, and checks that every sender holds exactly the data its message claims,
that no contribution is added twice, and that every rank ends with every chunk reduced over
all ranks.
:class:`ByteState` does the same with real bytes (bytewise sum mod 256), for runs that carry
real payloads.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from uet.errors import LocalError
from uet.experiments.workload import Collective, Flow, Piece, Workload

if TYPE_CHECKING:
    import numpy as np


def split_chunks(size: int, n: int) -> tuple[tuple[int, int], ...]:
    """``n`` chunks ``(offset, length)`` covering ``size`` bytes (first ones 1 B longer)."""
    base, extra = divmod(size, n)
    out, off = [], 0
    for i in range(n):
        ln = base + (1 if i < extra else 0)
        out.append((off, ln))
        off += ln
    return tuple(out)


def _log2(n: int) -> int:
    if n < 2 or n & (n - 1):
        raise ValueError(f"{n} ranks: a power of two >= 2 is needed")
    return n.bit_length() - 1


def allreduce_ring(ranks: Sequence[int], size: int, hosts: int, *, start_ps: int = 0,
                   first_id: int = 1) -> Workload:
    """Ring all-reduce (reduce-scatter + all-gather), 2(N-1) steps of N flows."""
    n = len(ranks)
    if n < 2:
        raise ValueError("a ring needs at least 2 ranks")
    chunks = split_chunks(size, n)
    if any(ln == 0 for _, ln in chunks):
        raise ValueError(f"size {size} B is smaller than {n} chunks")
    flows: list[Flow] = []
    prev: dict[int, int] = {}  # rank -> id of the flow it received at the previous step
    fid = first_id
    for step in range(2 * (n - 1)):
        cur: dict[int, int] = {}
        for r in range(n):
            dst = (r + 1) % n
            if step < n - 1:  # reduce-scatter
                c = (r - step) % n
                contrib = tuple(sorted((r - j) % n for j in range(step + 1)))
                op = "reduce"
            else:  # all-gather
                s = step - (n - 1)
                c = (r + 1 - s) % n
                contrib = tuple(range(n))
                op = "copy"
            off, ln = chunks[c]
            deps = (prev[r],) if step else ()
            flows.append(Flow(fid, ranks[r], ranks[dst], ln, start_ps if not step else 0,
                              deps, step, (Piece(c, off, ln, contrib, op),)))
            cur[dst] = fid
            fid += 1
        prev = cur
    coll = Collective("allreduce_ring", tuple(ranks), size, chunks)
    return Workload("allreduce_ring", hosts, flows, coll)


def allreduce_butterfly(ranks: Sequence[int], size: int, hosts: int, *, start_ps: int = 0,
                        first_id: int = 1) -> Workload:
    """Recursive-doubling all-reduce: log2 N steps, each rank sends its whole buffer."""
    n = len(ranks)
    levels = _log2(n)
    chunks = ((0, size),)
    flows: list[Flow] = []
    sent: dict[tuple[int, int], int] = {}  # (step, rank) -> flow id
    fid = first_id
    for step in range(levels):
        for r in range(n):
            p = r ^ (1 << step)
            group = tuple(sorted(r ^ x for x in range(1 << step)))
            deps: tuple[int, ...] = ()
            if step:
                q = r ^ (1 << (step - 1))
                deps = (sent[step - 1, q], sent[step - 1, r])
            flows.append(Flow(fid, ranks[r], ranks[p], size, start_ps if not step else 0,
                              deps, step, (Piece(0, 0, size, group, "reduce"),)))
            sent[step, r] = fid
            fid += 1
    # the partner's data is reduced in only after the receiver's own send of that step took
    # its buffer (a sendrecv into a temporary buffer)
    flows = [replace(f, apply_after=sent[f.step, ranks.index(f.dst)]) for f in flows]
    coll = Collective("allreduce_butterfly", tuple(ranks), size, chunks)
    return Workload("allreduce_butterfly", hosts, flows, coll)


def allreduce_halving_doubling(ranks: Sequence[int], size: int, hosts: int, *,
                               start_ps: int = 0, first_id: int = 1) -> Workload:
    """Rabenseifner all-reduce: recursive-halving reduce-scatter, recursive-doubling
    all-gather; 2 log2 N steps, N chunks."""
    n = len(ranks)
    levels = _log2(n)
    chunks = split_chunks(size, n)
    if any(ln == 0 for _, ln in chunks):
        raise ValueError(f"size {size} B is smaller than {n} chunks")
    everyone = tuple(range(n))
    flows: list[Flow] = []
    sent: dict[tuple[int, int], int] = {}
    fid = first_id
    for step in range(2 * levels):
        for r in range(n):
            if step < levels:  # reduce-scatter: keep chunks matching r in bits 0..step
                bit = step
                p = r ^ (1 << bit)
                low = (1 << bit) - 1
                held = [c for c in range(n) if (c & low) == (r & low)]
                give = [c for c in held if (c >> bit) & 1 == (p >> bit) & 1]
                group = tuple(sorted(r ^ x for x in range(1 << bit)))
                pieces = tuple(Piece(c, *chunks[c], group, "reduce") for c in give)
            else:  # all-gather: bit L-1 first; r holds chunks matching it in bits < bit+1
                bit = levels - 1 - (step - levels)
                p = r ^ (1 << bit)
                low = (1 << (bit + 1)) - 1
                held = [c for c in range(n) if (c & low) == (r & low)]
                pieces = tuple(Piece(c, *chunks[c], everyone, "copy") for c in held)
            deps: tuple[int, ...] = ()
            if step:
                prev_bit = step - 1 if step - 1 < levels else levels - 1 - (step - 1 - levels)
                q = r ^ (1 << prev_bit)
                deps = (sent[step - 1, q], sent[step - 1, r])
            nbytes = sum(pc.length for pc in pieces)
            flows.append(Flow(fid, ranks[r], ranks[p], nbytes, start_ps if not step else 0,
                              deps, step, pieces))
            sent[step, r] = fid
            fid += 1
    coll = Collective("allreduce_halving_doubling", tuple(ranks), size, chunks)
    return Workload("allreduce_halving_doubling", hosts, flows, coll)


# ----------------------------------------------------------------------------- checking

class CollectiveError(LocalError, AssertionError):
    """A collective schedule that would leave some byte in the wrong place."""


def replay(workload: Workload, rng: random.Random | None = None
           ) -> dict[int, dict[int, frozenset[int]]]:
    """Run the schedule in a random delivery order; check every message.

    Returns rank -> chunk -> contributors at the end. Raises :class:`CollectiveError` if a
    sender does not hold what its message claims, a contribution would be counted twice, a
    message is never sendable, or some rank ends without every chunk fully reduced.
    """
    coll = workload.collective
    if coll is None:
        raise ValueError(f"{workload.name} is not a collective")
    rng = rng or random.Random(0)
    n = len(coll.ranks)
    state = {r: {c: frozenset({r}) for c in range(len(coll.chunks))} for r in range(n)}
    by_id = workload.by_id()
    waiting = {f.id: set(f.depends_on) for f in workload.flows}
    dependents = workload.dependents()
    in_flight: list[tuple[int, list[frozenset[int]]]] = []
    started: set[int] = set()
    parked: dict[int, list[tuple[int, list[frozenset[int]]]]] = {}

    def apply(fid: int, data: list[frozenset[int]]) -> None:
        f = by_id[fid]
        dst = coll.rank_of(f.dst)
        for pc, got in zip(f.pieces, data, strict=True):
            have = state[dst][pc.chunk]
            if pc.op == "reduce":
                if have & got:
                    raise CollectiveError(
                        f"flow {fid} (step {f.step}) adds {sorted(have & got)} twice to "
                        f"chunk {pc.chunk} at rank {dst}")
                state[dst][pc.chunk] = have | got
            else:
                state[dst][pc.chunk] = got

    def start(fid: int) -> None:
        # a message takes its data when it starts: when its dependencies are delivered
        f = by_id[fid]
        src = coll.rank_of(f.src)
        for pc in f.pieces:
            have = state[src][pc.chunk]
            if have != frozenset(pc.contributors):
                raise CollectiveError(
                    f"flow {fid} (step {f.step}) sends chunk {pc.chunk} as "
                    f"{sorted(pc.contributors)} but rank {src} holds {sorted(have)}")
        in_flight.append((fid, [state[src][pc.chunk] for pc in f.pieces]))
        started.add(fid)
        for item in parked.pop(fid, []):
            apply(*item)

    for fid in sorted(i for i, w in waiting.items() if not w):
        start(fid)
    delivered = 0
    while in_flight:
        fid, data = in_flight.pop(rng.randrange(len(in_flight)))
        after = by_id[fid].apply_after
        if after and after not in started:
            parked.setdefault(after, []).append((fid, data))
        else:
            apply(fid, data)
        delivered += 1
        for j in dependents.get(fid, ()):
            waiting[j].discard(fid)
            if not waiting[j]:
                start(j)
    if delivered != len(workload.flows):
        raise CollectiveError(f"only {delivered} of {len(workload.flows)} messages ran")
    everyone = frozenset(range(n))
    for r in range(n):
        for c, have in state[r].items():
            if have != everyone:
                raise CollectiveError(f"rank {r} ends with chunk {c} reduced over "
                                      f"{sorted(have)}, not all {n} ranks")
    return state


def rank_input(rank: int, nbytes: int, seed: int = 0) -> np.ndarray:
    """Deterministic input buffer of one rank (uint8)."""
    import numpy as np  # here: a run without collective buffers does not import it

    return np.random.default_rng([seed, rank]).integers(0, 256, nbytes, dtype=np.uint8)


class ByteState:
    """Real buffers for a collective: payloads to send and what receivers do with them.

    Call ``payload(flow)`` when a message starts: the bytes it carries (its pieces cut from
    the sender's buffer, in order). Call ``deliver(flow, data)`` when it has been delivered:
    its pieces are reduced (bytewise sum mod 256) or copied into the receiver's buffer, at
    once or, with ``apply_after``, when that flow starts. ``mismatches()`` lists the ranks
    whose buffer differs from the expected all-reduce result.
    """

    def __init__(self, collective: Collective, seed: int = 0) -> None:
        import numpy as np

        self.coll = collective
        n, size = len(collective.ranks), collective.buffer_bytes
        self.buf = [rank_input(r, size, seed).copy() for r in range(n)]
        total = np.zeros(size, dtype=np.uint64)
        for b in self.buf:
            total += b
        self.expected = (total % 256).astype(np.uint8)
        self.started: set[int] = set()
        self.parked: dict[int, list[tuple[Flow, bytes]]] = {}

    def payload(self, flow: Flow) -> bytes:
        src = self.buf[self.coll.rank_of(flow.src)]
        data = b"".join(src[p.offset:p.offset + p.length].tobytes() for p in flow.pieces)
        self.started.add(flow.id)
        for parked in self.parked.pop(flow.id, []):
            self._apply(*parked)
        return data

    def deliver(self, flow: Flow, data: bytes) -> None:
        if sum(p.length for p in flow.pieces) != len(data):
            raise CollectiveError(f"flow {flow.id}: {len(data)} B delivered, its pieces "
                                  f"hold {sum(p.length for p in flow.pieces)}")
        if flow.apply_after and flow.apply_after not in self.started:
            self.parked.setdefault(flow.apply_after, []).append((flow, data))
        else:
            self._apply(flow, data)

    def _apply(self, flow: Flow, data: bytes) -> None:
        import numpy as np

        dst = self.buf[self.coll.rank_of(flow.dst)]
        arr = np.frombuffer(data, dtype=np.uint8)
        pos = 0
        for p in flow.pieces:
            part = arr[pos:pos + p.length]
            pos += p.length
            view = dst[p.offset:p.offset + p.length]
            if p.op == "reduce":
                view += part  # uint8 arithmetic wraps: sum mod 256
            else:
                view[:] = part

    def mismatches(self) -> list[int]:
        import numpy as np

        return [r for r, b in enumerate(self.buf) if not np.array_equal(b, self.expected)]
