"""Traffic generators: the workloads of ``[traffic]`` as :class:`Workload` s.

Patterns: ``single`` (one flow), ``permutation`` (a seeded derangement, or explicit pairs
such as htsim's ``perm_16n_16c_2MB``), ``incast`` (N:1), ``outcast`` (1:N), ``all_to_all``
(N(N-1) flows, at once or as pairwise-exchange steps), the all-reduce collectives of
:mod:`uet.experiments.collectives`, and ``cm_file`` (an htsim connection matrix,
:mod:`uet.experiments.htsim_cm`). Every generator is a pure function of its arguments; the
random ones take a seed. Flow ids start at 1.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from uet.experiments import collectives, ops
from uet.experiments.validated import host_count, resolve_path
from uet.experiments.workload import Flow, Workload

US = 1_000_000


def single(src: int, dst: int, size: int, hosts: int, *, start_ps: int = 0) -> Workload:
    """One flow ``src -> dst`` (htsim's ``one.cm``)."""
    return Workload("single", hosts, [Flow(1, src, dst, size, start_ps)])


def derangement(items: Sequence[int], rng: random.Random) -> list[int]:
    """A uniformly random permutation of ``items`` with no fixed point (rejection)."""
    if len(items) < 2:
        raise ValueError("a derangement needs at least 2 items")
    out = list(items)
    while True:
        rng.shuffle(out)
        if all(a != b for a, b in zip(items, out, strict=True)):
            return out


def permutation(participants: Sequence[int], size: int, hosts: int, *, seed: int = 0,
                pairs: Sequence[Sequence[int]] = (), start_ps: int = 0) -> Workload:
    """Every participant sends ``size`` bytes to one other, each receiving once.

    ``pairs`` gives the permutation explicitly (in that order); otherwise it is a seeded
    derangement of ``participants``.
    """
    if pairs:
        todo = [(int(s), int(d)) for s, d in pairs]
    else:
        dsts = derangement(list(participants), random.Random(seed))
        todo = list(zip(participants, dsts, strict=True))
    flows = [Flow(i + 1, s, d, size, start_ps) for i, (s, d) in enumerate(todo)]
    return Workload("permutation", hosts, flows)


def _choose(others: list[int], degree: int, pick: str, seed: int) -> list[int]:
    if degree == 0 or degree >= len(others):
        return others
    if pick == "random":
        return sorted(random.Random(seed).sample(others, degree))
    return others[:degree]


def incast(participants: Sequence[int], dst: int, size: int, hosts: int, *, degree: int = 0,
           pick: str = "first", seed: int = 0, start_ps: int = 0) -> Workload:
    """``degree`` senders (0: every other participant) each send ``size`` bytes to ``dst``."""
    senders = _choose([h for h in participants if h != dst], degree, pick, seed)
    flows = [Flow(i + 1, s, dst, size, start_ps) for i, s in enumerate(senders)]
    return Workload("incast", hosts, flows)


def outcast(participants: Sequence[int], src: int, size: int, hosts: int, *, degree: int = 0,
            pick: str = "first", seed: int = 0, start_ps: int = 0) -> Workload:
    """``src`` sends ``size`` bytes to each of ``degree`` receivers (0: every other)."""
    receivers = _choose([h for h in participants if h != src], degree, pick, seed)
    flows = [Flow(i + 1, src, d, size, start_ps) for i, d in enumerate(receivers)]
    return Workload("outcast", hosts, flows)


def all_to_all(participants: Sequence[int], size: int, hosts: int, *,
               schedule: str = "simultaneous", start_ps: int = 0) -> Workload:
    """Every participant sends ``size`` bytes to every other: N(N-1) flows.

    ``schedule="pairwise"``: N-1 steps; at step j rank i sends to rank i+j (mod N) once its
    message of step j-1 has been delivered.
    """
    n = len(participants)
    flows: list[Flow] = []
    fid = 1
    last: dict[int, int] = {}
    for j in range(1, n):
        for i in range(n):
            src, dst = participants[i], participants[(i + j) % n]
            if schedule == "pairwise":
                deps = (last[i],) if j > 1 else ()
                flows.append(Flow(fid, src, dst, size, start_ps if j == 1 else 0, deps, j - 1))
                last[i] = fid
            elif schedule == "simultaneous":
                flows.append(Flow(fid, src, dst, size, start_ps))
            else:
                raise ValueError(f"schedule={schedule!r}: allowed simultaneous, pairwise")
            fid += 1
    return Workload("all_to_all", hosts, flows)


def participants(traffic: dict[str, Any], hosts: int) -> list[int]:
    """The hosts taking part: ``traffic.hosts`` or every host."""
    chosen = traffic.get("hosts") or []
    return list(chosen) if chosen else list(range(hosts))


def traffic_seed(config: dict[str, Any]) -> int:
    """The seed of the traffic's random choices and data: ``traffic.seed``, or
    ``experiment.seed`` when it is -1 (the default)."""
    seed = config["traffic"].get("seed", -1)
    return int(config["experiment"]["seed"] if seed == -1 else seed)


def build_workload(config: dict[str, Any]) -> Workload:
    """The workload of a validated experiment config, each flow with its operation
    (``traffic.ops``, :mod:`uet.experiments.ops`)."""
    wl = _pattern_workload(config)
    if not config["traffic"].get("ops"):
        return wl
    from uet.profiles import BUILTIN_PROFILES, load_profile

    name = config["transport"]["profile"]
    profile = load_profile(name if name in BUILTIN_PROFILES else str(resolve_path(config,
                                                                                  name)))
    return ops.assign(wl, config, traffic_seed(config), profile.ses.mtu_payload)


def _pattern_workload(config: dict[str, Any]) -> Workload:
    """The pattern's flows (every one a WRITE)."""

    tr = config["traffic"]
    n = host_count(config["topology"])
    pattern = tr["pattern"]
    if pattern == "cm_file":
        from uet.experiments.htsim_cm import load_cm

        cm = load_cm(resolve_path(config, tr["file"]))
        wl = cm.to_workload(hosts=n)
        wl.meta["cm_file"] = tr["file"]
        return wl
    hosts = participants(tr, n)
    size, start = tr["size"], round(tr["start_us"] * US)
    seed = traffic_seed(config)
    if pattern == "single":
        dst = hosts[-1] if tr["dst"] == -1 else tr["dst"]
        return single(tr["src"], dst, size, n, start_ps=start)
    if pattern == "permutation":
        return permutation(hosts, size, n, seed=seed, pairs=tr["pairs"], start_ps=start)
    if pattern == "incast":
        dst = hosts[-1] if tr["dst"] == -1 else tr["dst"]
        return incast(hosts, dst, size, n, degree=tr["degree"], pick=tr["pick"], seed=seed,
                      start_ps=start)
    if pattern == "outcast":
        return outcast(hosts, tr["src"], size, n, degree=tr["degree"], pick=tr["pick"],
                       seed=seed, start_ps=start)
    if pattern == "all_to_all":
        return all_to_all(hosts, size, n, schedule=tr["schedule"], start_ps=start)
    gen = {"allreduce_ring": collectives.allreduce_ring,
           "allreduce_butterfly": collectives.allreduce_butterfly,
           "allreduce_halving_doubling": collectives.allreduce_halving_doubling}[pattern]
    return gen(hosts, size, n, start_ps=start)
