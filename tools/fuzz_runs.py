"""Randomized experiment sweep: many seeded random configurations through the real runner.

Each configuration draws a profile, delivery mode (RUD, ROD, RUDI), EV selector, congestion
control, topology, trimming, PFC, IPv6, traffic pattern, message size and one impairment on
every link (loss, bursty loss, duplication, corruption, reordering, jitter, or every link
down for a while, with or without routing convergence), then runs it with
``uet.experiments.runner.run_experiment`` and checks what must hold whatever the network does:

* the run does not raise;
* nothing is delivered twice;
* every message either completes or fails with a reported error (e.g. UNDELIVERABLE after
  the retry limit, expected under several % loss per link); a message that neither
  completes nor fails before the time limit is a stall (2 s: a packet that keeps being lost
  fails after 5 backed-off RTOs, 315 ms from the 5 ms initial RTO). Collective steps that
  never started because an earlier step failed are not counted as stalls.

Configurations a profile refuses (RCCC on AI Base, ...) are counted as refused: the refusal
itself must be a ``ConfigError``. Usage::

    python tools/fuzz_runs.py --count 200 --seed 23          # prints one line per run
    python tools/fuzz_runs.py --count 1 --seed 23 --show 17  # the --set list of run 17

Exit status 1 if any run broke an invariant. This found the bugs fixed in the PDS in
November 2026 (docs/pds.md: CLEAR_REQ -> ACK_REQ, NACK and SACK RTT samples, CLEAR_REQ
backoff); ``tests/experiments/test_fuzz_runs.py`` runs a few fixed draws.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

from uet.experiments.config import ConfigError, load_config
from uet.experiments.runner import run_experiment

PROFILES = ("ai-base", "ai-full", "hpc")
MODES = ("RUD", "RUD", "ROD", "RUDI")
SELECTORS = ("fixed", "oblivious", "bitmap", "reps", "mixed", "profile")
ALGORITHMS = ("none", "nscc", "rccc", "nscc+rccc", "profile")
TOPOLOGIES = ("fat_tree", "star", "leaf_spine", "back_to_back")
PATTERNS = ("permutation", "incast", "outcast", "all_to_all", "allreduce_ring",
            "allreduce_butterfly", "single")
SIZES = ("1", "100", "4000", "4096", "5000", "64KiB", "300KiB", "1MiB")


def draw(rng: random.Random, time_limit_us: int = 2_000_000) -> list[str]:
    """One random configuration as ``--set`` strings (applied to the default experiment)."""
    sets = ["output.plots=false", "output.progress=false",
            f"experiment.time_limit_us={time_limit_us}", "capture.ifaces=[]",
            "capture.links=[]"]
    sets.append(f"transport.profile={rng.choice(PROFILES)}")
    sets.append(f"transport.mode={rng.choice(MODES)}")
    sets.append(f"transport.cms.ev_selector={rng.choice(SELECTORS)}")
    sets.append(f"transport.cms.algorithm={rng.choice(ALGORITHMS)}")
    topo = rng.choice(TOPOLOGIES)
    sets.append(f"topology.kind={topo}")
    if topo == "star":
        sets.append(f"topology.hosts={rng.choice([3, 5, 8])}")
    sets.append(f"topology.trimming={rng.choice(['true', 'false'])}")
    if rng.random() < 0.2:
        sets.append("topology.pfc=true")
    if rng.random() < 0.2:
        sets.append("topology.ipv6=true")
    pattern = rng.choice(PATTERNS)
    if topo == "back_to_back" and pattern in ("incast", "outcast", "all_to_all"):
        pattern = "permutation"
    sets.append(f"traffic.pattern={pattern}")
    sets.append(f"traffic.size={rng.choice(SIZES)}")
    r = rng.random()
    impairment = ["loss=0"]
    if r < 0.3:
        impairment = [f"loss={rng.choice([0.001, 0.01, 0.05])}"]
    elif r < 0.45:
        impairment = [f"duplicate={rng.choice([0.01, 0.05])}"]
    elif r < 0.6:
        impairment = [f"corrupt={rng.choice([0.01, 0.03])}"]
    elif r < 0.75:
        impairment = ["reorder=0.05", "reorder_delay_ps=3000000"]
    elif r < 0.85:
        impairment = ["jitter_ps=2000000"]
    elif r < 0.9:
        impairment = ["gilbert.p_gb=0.01", "gilbert.p_bg=0.3"]
    elif r < 0.95:
        start = rng.choice([0, 5, 50])
        impairment = [f"down=[[{start * 10**6}, {(start + rng.choice([20, 300])) * 10**6}]]"]
        if rng.random() < 0.5:
            sets.append(f"topology.reroute_us={rng.choice([0, 5, 50])}")
    # one impairment on every link, over a base of 0.1% loss (what the draws were first
    # measured against: the built-in experiment's impairment then)
    sets += ["impairments=[]", "impairments[0].match=*", "impairments[0].loss=0.001"]
    sets += [f"impairments[0].{x}" for x in impairment]
    sets.append(f"experiment.seed={rng.randrange(1000)}")
    return sets


def check(results: dict[str, Any]) -> list[str]:
    """The invariants a run broke (empty: none)."""
    problems = []
    s = results["summary"]
    if s["duplicates_delivered"]:
        problems.append(f"{s['duplicates_delivered']} duplicates delivered")
    flows = results["flows"]
    failed = any(f.get("error") for f in flows)
    stalled = [f["id"] for f in flows if f["fct_ps"] is None and not f.get("error")
               and not (failed and f.get("start_ps") is None)]
    if stalled:
        problems.append(f"{len(stalled)} messages neither completed nor failed "
                        f"(first ids {stalled[:5]}; stop: {results['run'].get('stop_reason')})")
    return problems


def run_one(sets: list[str], out_dir: Path) -> tuple[str, str]:
    """``(status, detail)``: status is ok, refused, bad or crash."""
    try:
        config = load_config(None, sets)
    except ConfigError as exc:
        return "refused", str(exc).splitlines()[0]
    try:
        results = run_experiment(config, out_dir)
    except Exception:  # noqa: BLE001 - any exception is the finding
        return "crash", traceback.format_exc()
    problems = check(results)
    return ("bad", "; ".join(problems)) if problems else ("ok", "")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=50, help="configurations to run")
    ap.add_argument("--seed", type=int, default=1, help="seed of the draws")
    ap.add_argument("--time-limit-us", type=int, default=2_000_000,
                    help="virtual time limit per run (default 2 s: longer than the worst "
                         "case of 5 RTOs with backoff from the 5 ms initial RTO, 315 ms)")
    ap.add_argument("--show", type=int, default=None,
                    help="print the --set list of run N of this seed and exit")
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    draws = [draw(rng, args.time_limit_us) for _ in range(max(args.count, (args.show or 0) + 1))]
    if args.show is not None:
        print(" ".join(f"--set '{s}'" for s in draws[args.show]))
        return 0
    tally: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for i, sets in enumerate(draws[:args.count]):
            t0 = time.perf_counter()
            status, detail = run_one(sets, Path(tmp) / str(i))
            tally[status] = tally.get(status, 0) + 1
            print(f"{i:4d} {status:7s} {time.perf_counter() - t0:5.1f} s {detail[:300]}")
            if status in ("bad", "crash"):
                print("     " + " ".join(sets))
            sys.stdout.flush()
    print(" ".join(f"{k} {v}" for k, v in sorted(tally.items())))
    return 1 if tally.get("bad") or tally.get("crash") else 0


if __name__ == "__main__":
    sys.exit(main())
