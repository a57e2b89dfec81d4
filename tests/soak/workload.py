"""A soak run: a long seeded stream of operations through the public ``Fabric`` API, over
impaired links, every result checked byte for byte.

One :class:`SoakSpec` says what to run (delivery mode, impairments, how many operations, how
large); :func:`run` runs it for one seed and returns a :class:`SoakResult` with the counts
issue 13 asks for: operations, hung (not ended when the fabric had nothing left to do, or
after a generous virtual-time bound), lost (reported complete but the data is not there),
duplicated (a request reached an SES twice: the end points' own ``DeliveryAudit``; an
atomic applied more often than it was issued), corrupted (the data there is wrong),
out of order (ROD messages completing out of submission order), failed with a code, failed
without one. ``tests/soak`` asserts on a CI subset; ``benchmarks/soak.py`` runs the long
matrix and prints the table of docs/pds.md.

The operations, per mode (3 hosts of a star, the HPC profile by default):

* RUD / ROD: tagged SEND (each into its own posted receive, the op ID in ``header_data``),
  WRITE (a region of each host, non-overlapping offsets), fetching ATOMIC SUM 1 on a
  64-bit counter of each host (non-idempotent: the fetched values of the operations that
  succeeded must all differ, and the counter must end between their number and that plus
  the failed ones), READ of a known pattern; sizes from 0 B to ``max_bytes`` (4 MiB, far
  beyond MP_RANGE x MTU = 512 KiB), a few large, most small;
* RUDI: WRITE and READ (its idempotent operations) on idempotent-safe regions; a request
  whose cached response was dropped may be delivered again (RUDI's contract: at least once,
  idempotent), which is counted apart (``rudi_redelivered``), never as a duplicate;
* UUD: DATAGRAM_SEND of one packet each: never retransmitted, never corrupted, delivered at
  most as often as the network delivered it.
"""

from __future__ import annotations

import contextlib
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import trio

from uet.runtime.fabric import Fabric, FabricStalled
from uet.ses.messages import RecvCompleted
from uet.wire.constants import ReturnCode

US = 10**6
MS = 10**9
S = 10**12
DATA_KEY, DATA_INDEX = 0x11, 1
PATTERN_KEY, PATTERN_INDEX = 0x22, 2
COUNTER_KEY, COUNTER_INDEX = 0x33, 3
RECV_INDEX = 4
PATTERN_BYTES = 4 << 20
#: wait this long (virtual time) past the last operation before calling the rest hung
HANG_BOUND_PS = 120 * S


@dataclass
class SoakSpec:
    """One configuration of the soak matrix."""

    name: str
    mode: str = "RUD"  # RUD | ROD | RUDI | UUD
    loss: float = 0.0
    gilbert: dict | None = None  # {"p_gb": .., "p_bg": .., "loss_bad": ..}
    duplicate: float = 0.0
    jitter_ps: int = 0  # uniform extra delay per frame: frames overtake each other
    corrupt: float = 0.0  # frames with a flipped bit (dropped by the modelled FCS)
    ops: int = 300
    max_bytes: int = 4 << 20
    hosts: int = 3
    profile: str = "hpc"
    #: impaired host links: "all", or one host name ("h0": issue 13's 3-host scenario)
    where: str = "all"
    pds: dict[str, Any] = field(default_factory=dict)
    #: operation kinds to draw from (None: the mode's default mix)
    kinds: tuple[str, ...] | None = None
    #: "mixed" (mostly small, a few up to max_bytes) or "uniform" (0 .. max_bytes)
    sizes: str = "mixed"
    #: transport security of every host (``FabricEndpoint.factory(tss=...)``), or None
    tss: dict[str, Any] | None = None

    def impairments(self) -> list[dict[str, Any]]:
        imp: dict[str, Any] = {"direction": "both"}
        if self.loss:
            imp["loss"] = self.loss
        if self.gilbert:
            imp["gilbert"] = dict(self.gilbert)
        if self.duplicate:
            imp["duplicate"] = self.duplicate
        if self.jitter_ps:
            imp["jitter_ps"] = self.jitter_ps
        if self.corrupt:
            imp["corrupt"] = self.corrupt
        if len(imp) == 1:
            return []
        hosts = [f"h{i}" for i in range(self.hosts)] if self.where == "all" else [self.where]
        return [dict(imp, at=h) for h in hosts]


@dataclass
class SoakResult:
    """What one seeded run found (every count but ``ops``, ``ok`` and ``failed`` must be 0
    for the run to pass)."""

    spec: str
    seed: int
    ops: int = 0
    ok: int = 0
    failed: int = 0  # ended with a return code other than OK
    hung: int = 0
    lost: int = 0
    dup: int = 0
    corrupted: int = 0
    out_of_order: int = 0
    no_code: int = 0  # ended failed without a return code
    frames_lost: int = 0
    #: TSS runs: frames opened / refused by the hosts' TSS (refusals: replayed duplicates)
    tss_rx_ok: int = 0
    tss_refused: Counter = field(default_factory=Counter)
    bytes_moved: int = 0
    virtual_ms: float = 0.0
    wall_s: float = 0.0
    codes: Counter = field(default_factory=Counter)
    problems: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not (self.hung or self.lost or self.dup or self.corrupted or self.out_of_order
                    or self.no_code)

    def row(self) -> dict[str, Any]:
        return {"config": self.spec, "seed": self.seed, "ops": self.ops, "ok": self.ok,
                "hung": self.hung, "lost": self.lost, "dup": self.dup,
                "corrupted": self.corrupted, "out_of_order": self.out_of_order,
                "failed_with_code": self.failed, "failed_without_code": self.no_code,
                "frames_lost": self.frames_lost, "MB": round(self.bytes_moved / 1e6, 1),
                "virtual_ms": round(self.virtual_ms, 2), "wall_s": round(self.wall_s, 2)}


def _size(rng: random.Random, max_bytes: int) -> int:
    """Mostly small, some medium, a few large (up to ``max_bytes``)."""
    r = rng.random()
    if r < 0.08:
        return 0 if rng.random() < 0.3 else rng.randrange(1, 64)
    if r < 0.70:
        return rng.randrange(64, 16 << 10)
    if r < 0.96:
        return rng.randrange(16 << 10, min(max_bytes, 600 << 10) + 1)
    return rng.randrange(min(max_bytes, 600 << 10), max_bytes + 1)


def _payload(op_id: int, n: int) -> bytes:
    return random.Random(op_id * 7919 + 13).randbytes(n)


@dataclass
class _Op:
    op_id: int
    kind: str
    src: int
    dst: int
    size: int
    handle: Any = None
    recv: Any = None
    offset: int = 0
    data: bytes = b""


def _plan(spec: SoakSpec, rng: random.Random) -> list[_Op]:
    if spec.kinds:
        kinds = list(spec.kinds)
    elif spec.mode == "UUD":
        kinds = ["datagram"]
    elif spec.mode == "RUDI":
        kinds = ["write", "write", "read"]
    else:
        kinds = ["send", "send", "write", "write", "atomic", "read"]
    ops = []
    for k in range(spec.ops):
        src, dst = rng.sample(range(spec.hosts), 2)
        kind = rng.choice(kinds)
        size = (_size(rng, spec.max_bytes) if spec.sizes == "mixed"
                else rng.randrange(0, spec.max_bytes + 1))
        if kind == "datagram":
            size = rng.randrange(0, 4096 + 1)
        elif kind == "atomic":
            size = 8
        elif kind == "read":
            size = min(size, PATTERN_BYTES)
        ops.append(_Op(k + 1, kind, src, dst, size))
    return ops


async def run(spec: SoakSpec, seed: int) -> SoakResult:
    """Run ``spec`` for ``seed`` through the Fabric API; check every result."""
    t0 = time.perf_counter()
    rng = random.Random(seed)
    plan = _plan(spec, rng)
    res = SoakResult(spec.name, seed, ops=len(plan))
    topo = {"kind": "star", "hosts": spec.hosts, "impairments": spec.impairments()}
    opts: dict[str, Any] = {}
    if spec.pds:
        opts["pds_overrides"] = dict(spec.pds)
    if spec.tss:
        opts["tss"] = dict(spec.tss)
    async with Fabric(topo, profile=spec.profile, seed=seed, endpoint_options=opts) as fab:
        hosts = fab.hosts
        fill = [0] * spec.hosts
        for op in plan:
            if op.kind == "write":
                op.offset = fill[op.dst]
                fill[op.dst] += op.size
        pattern = random.Random(seed + 1).randbytes(PATTERN_BYTES)
        mems, counters, order = [], [], []
        rudi = spec.mode == "RUDI"
        for i, h in enumerate(hosts):
            mem = bytearray(max(fill[i], 1))
            mems.append(mem)
            h.register(mem, key=DATA_KEY, index=DATA_INDEX, idempotent_safe=rudi)
            h.register(bytearray(pattern), key=PATTERN_KEY, index=PATTERN_INDEX, perms="r",
                       idempotent_safe=rudi)
            ctr = bytearray(8)
            counters.append(ctr)
            h.register(ctr, key=COUNTER_KEY, index=COUNTER_INDEX, perms="a")
            h.open_index(RECV_INDEX)
            seen: list[tuple[int | None, int | None]] = []
            order.append(seen)
            fep = h.fep
            prev = fep.on_complete

            def record(done: Any, seen=seen, prev=prev) -> None:
                if type(done) is RecvCompleted:
                    seen.append((done.recv.match_bits, done.recv.return_code))
                if prev is not None:
                    prev(done)

            fep.on_complete = record
        mode = None if spec.mode in ("RUD", "UUD") else spec.mode
        uud_recvs: list[list[Any]] = [[] for _ in hosts]
        for op in plan:
            a, b = hosts[op.src], hosts[op.dst]
            if op.kind == "send":
                op.data = _payload(op.op_id, op.size)
                op.recv = b.post_recv(op.size, tag=op.op_id, index=RECV_INDEX)
                op.handle = a.send(b, op.data, tag=op.op_id, index=RECV_INDEX,
                                   header_data=op.op_id, mode=mode)
            elif op.kind == "write":
                op.data = _payload(op.op_id, op.size)
                op.handle = a.write(b, DATA_KEY, op.offset, op.data, index=DATA_INDEX,
                                    mode=mode)
            elif op.kind == "read":
                op.offset = rng.randrange(0, PATTERN_BYTES - op.size + 1)
                op.handle = a.read(b, PATTERN_KEY, op.offset, op.size, index=PATTERN_INDEX,
                                   mode=mode)
            elif op.kind == "atomic":
                op.handle = a.atomic(b, COUNTER_KEY, 0, "SUM", "UINT64", 1, fetch=True,
                                     index=COUNTER_INDEX, mode=mode)
            else:  # datagram (UUD): untagged, into any of the receives posted at its index
                op.data = _payload(op.op_id, op.size)
                uud_recvs[op.dst].append(b.post_recv(4096, index=RECV_INDEX))
                op.handle = a.datagram(b, op.data, index=RECV_INDEX, header_data=op.op_id)
            if rng.random() < 0.3:
                await fab.sleep(rng.randrange(0, 20 * US))
        waiting = [op for op in plan if op.kind != "datagram"]
        with contextlib.suppress(FabricStalled):  # nothing left to do: the rest is hung
            await fab.wait_until(lambda: all(op.handle.done for op in waiting),
                                 timeout_ps=HANG_BOUND_PS)
        if spec.mode == "UUD":  # let the last datagrams land
            await fab.sleep(1 * MS)
        _check(spec, plan, res, mems, counters, order, pattern)
        if spec.mode == "UUD":
            _check_datagrams(plan, res, uud_recvs)
            retx = sum(v for i in range(spec.hosts)
                       for k, v in fab.endpoint(i).stats.items() if k.startswith("pds.retx."))
            if retx:
                res.dup += retx
                res.problems.append(f"UUD: {retx} retransmissions (UUD never resends)")
        for i in range(spec.hosts):
            for k, v in fab.endpoint(i).stats.items():
                if k == "tss.rx_ok":
                    res.tss_rx_ok += v
                elif k.startswith("tss.rx_refused."):
                    res.tss_refused[k.rsplit(".", 1)[1]] += v
        res.frames_lost = sum(c.get("drop.loss", 0) + c.get("drop.burst_loss", 0)
                              + c.get("corrupted", 0)  # dropped by the receiver's FCS
                              for c in fab.counters()["link"].values())
        for i in range(spec.hosts):
            st = fab.endpoint(i).stats
            redelivered = st.get("fep.duplicates_delivered", 0)
            if spec.mode == "RUDI":  # idempotent: a request whose cached response was
                res.codes["rudi_redelivered"] += redelivered  # evicted may run again
            elif spec.mode != "UUD":
                res.dup += redelivered
            res.bytes_moved += st.get("pds.rx_bytes", 0)
        res.virtual_ms = fab.now / MS
    res.wall_s = time.perf_counter() - t0
    return res


def _check(spec: SoakSpec, plan: list[_Op], res: SoakResult, mems: list[bytearray],
           counters: list[bytearray], order: list[list], pattern: bytes) -> None:
    ok_atomics: dict[int, list[int]] = {}
    failed_atomics: Counter = Counter()
    for op in plan:
        h = op.handle
        if op.kind == "datagram":
            res.ok += 1  # done once queued: UUD promises no delivery
            continue
        if not h.done:
            res.hung += 1
            res.problems.append(f"op {op.op_id} {op.kind} {op.size} B h{op.src}->h{op.dst} "
                                "never ended")
            continue
        rc = h.op.return_code
        if rc != ReturnCode.OK:
            if rc is None:
                res.no_code += 1
            else:
                res.failed += 1
                res.codes[ReturnCode(rc).name] += 1
            if op.kind == "atomic":
                failed_atomics[op.dst] += 1
            # the receiver may have got it all although the sender's op failed (its last
            # response was lost): not a loss, but the bytes must be right
            r = op.recv
            if r is not None and r.done and r.recv.return_code == ReturnCode.OK \
                    and r.result(check=False).data != op.data:
                res.corrupted += 1
            continue
        res.ok += 1
        result = h.result()
        if op.kind == "write":
            got = bytes(mems[op.dst][op.offset:op.offset + op.size])
            if got != op.data:
                _bad(res, op, got, op.data)
        elif op.kind == "read":
            want = pattern[op.offset:op.offset + op.size]
            if result.data != want:
                _bad(res, op, result.data, want)
        elif op.kind == "send":
            r = op.recv
            if not r.done or r.recv.return_code != ReturnCode.OK:
                res.lost += 1
                res.problems.append(f"op {op.op_id}: SEND ok, receive not complete")
            else:
                rr = r.result()
                if rr.data != op.data or rr.header_data != op.op_id:
                    _bad(res, op, rr.data, op.data)
        elif op.kind == "atomic":
            ok_atomics.setdefault(op.dst, []).append(result.value)
    for dst, values in ok_atomics.items():
        final = int.from_bytes(counters[dst], "little")
        if len(set(values)) != len(values):
            res.dup += len(values) - len(set(values))
            res.problems.append(f"h{dst}: an atomic's old value was fetched twice")
        if not len(values) <= final <= len(values) + failed_atomics[dst]:
            res.dup += max(0, final - len(values) - failed_atomics[dst])
            res.lost += max(0, len(values) - final)
            res.problems.append(f"h{dst}: counter {final} for {len(values)} successful "
                                f"and {failed_atomics[dst]} failed atomics")
    if spec.mode == "ROD":
        for dst, seen in enumerate(order):
            by_src: dict[int, list[int]] = {}
            for tag, rc in seen:
                op = plan[tag - 1] if tag and 0 < tag <= len(plan) else None
                if op is not None and op.kind == "send" and op.handle.done \
                        and op.handle.op.return_code == ReturnCode.OK and rc == ReturnCode.OK:
                    by_src.setdefault(op.src, []).append(tag)
            for src, tags in by_src.items():
                if tags != sorted(tags):
                    pairs = zip(tags, tags[1:], strict=False)
                    res.out_of_order += sum(1 for x, y in pairs if y < x)
                    res.problems.append(f"ROD h{src}->h{dst}: completions {tags[:20]}...")


def _check_datagrams(plan: list[_Op], res: SoakResult, recvs: list[list[Any]]) -> None:
    """Every datagram that arrived is one that was sent, intact, to that host; delivered
    twice only if the network duplicated it (counted apart: UUD does not deduplicate)."""
    seen: Counter = Counter()
    for dst, posted in enumerate(recvs):
        for r in posted:
            if not r.done:
                continue
            rr = r.result(check=False)
            tag = rr.header_data
            op = plan[tag - 1] if tag and 0 < tag <= len(plan) else None
            if op is None or op.kind != "datagram" or op.dst != dst:
                res.corrupted += 1
                res.problems.append(f"h{dst}: a datagram nobody sent (header {tag})")
                continue
            seen[tag] += 1
            if rr.data != op.data:
                _bad(res, op, rr.data, op.data)
    res.codes["uud_delivered"] = len(seen)
    res.codes["uud_network_duplicates"] = sum(n - 1 for n in seen.values())


def _bad(res: SoakResult, op: _Op, got: bytes, want: bytes) -> None:
    if not any(got) and any(want):
        res.lost += 1
        res.problems.append(f"op {op.op_id} {op.kind} {op.size} B: ok, but nothing there")
    else:
        res.corrupted += 1
        first = next((i for i, (x, y) in enumerate(zip(got, want, strict=False)) if x != y),
                     min(len(got), len(want)))
        res.problems.append(f"op {op.op_id} {op.kind} {op.size} B: wrong bytes from {first}")


def run_sync(spec: SoakSpec, seed: int) -> SoakResult:
    """:func:`run` outside Trio."""
    return trio.run(run, spec, seed)


__all__ = ["SoakResult", "SoakSpec", "run", "run_sync"]
