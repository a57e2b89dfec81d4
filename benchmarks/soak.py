#!/usr/bin/env python3
"""The long soak matrix: every delivery mode under every impairment, several seeds, 1,000
operations per run (messages up to 4 MiB), through the public Fabric API, every result
checked (tests/soak/workload.py). Prints one Markdown table row per configuration, summed
over its seeds: the table of docs/pds.md ("Soak and flood").

    python benchmarks/soak.py                 # the whole matrix, 3 seeds, 1000 ops
    python benchmarks/soak.py --seeds 1 --ops 300 --only rud-mix rod-mix
    python benchmarks/soak.py --jobs 2 --json results.json

Exit status 1 if any run hung, lost, duplicated, corrupted or reordered anything, or ended
an operation without a return code. The CI subset is tests/soak/test_soak.py.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "soak"))
from workload import SoakSpec, run_sync  # noqa: E402

GILBERT = {"p_gb": 0.01, "p_bg": 0.3, "loss_bad": 0.5}
MIX = {"loss": 0.05, "duplicate": 0.03, "jitter_ps": 2_000_000, "corrupt": 0.02}
#: the TSS row: every frame sealed in cluster mode, an SSI per host, rekeyed every 256 frames
TSS = {"mode": "cluster", "sdi": 7, "job": 1, "ssi": "auto", "rekey_mask": 0xFF00,
       "key": "736f616b2074657374206b6579206f6620746865207473732073756974652121"}


def matrix(ops: int) -> list[SoakSpec]:
    """The configurations (heavy loss gets more retries: 20% per link loses 59% of round
    trips, and one packet out of retries fails its whole PDC)."""
    r10, r20, r30 = {"max_retries": 12}, {"max_retries": 20}, {"max_retries": 30}
    return [
        SoakSpec("rud-loss0", ops=ops),
        SoakSpec("rud-loss1", loss=0.01, ops=ops),
        SoakSpec("rud-loss5", loss=0.05, ops=ops),
        SoakSpec("rud-loss10", loss=0.10, pds=r10, ops=ops),
        SoakSpec("rud-loss20", loss=0.20, pds=r20, ops=ops),
        SoakSpec("rud-loss30", loss=0.30, pds=r30, ops=ops),
        SoakSpec("rud-gilbert", gilbert=GILBERT, ops=ops),
        SoakSpec("rud-dup5", duplicate=0.05, ops=ops),
        SoakSpec("rud-reorder", jitter_ps=3_000_000, ops=ops),
        SoakSpec("rud-corrupt3", corrupt=0.03, ops=ops),
        SoakSpec("rud-mix", ops=ops, **MIX),
        SoakSpec("issue13-star", loss=0.10, where="h0", kinds=("send", "write", "atomic"),
                 sizes="uniform", max_bytes=100_000, ops=ops),
        SoakSpec("rod-loss5", mode="ROD", loss=0.05, ops=ops),
        SoakSpec("rod-loss20", mode="ROD", loss=0.20, pds=r20, ops=ops),
        SoakSpec("rod-mix", mode="ROD", ops=ops, **MIX),
        SoakSpec("rudi-loss5", mode="RUDI", loss=0.05, ops=ops),
        SoakSpec("rudi-mix", mode="RUDI", ops=ops, **MIX),
        SoakSpec("uud-loss5-dup5", mode="UUD", loss=0.05, duplicate=0.05, ops=ops),
        SoakSpec("rud-mix-tss", ops=ops, tss=TSS, **MIX),
    ]


def _one(args: tuple[SoakSpec, int]) -> dict:
    spec, seed = args
    res = run_sync(spec, seed)
    row = res.row()
    row["codes"] = dict(res.codes)
    row["problems"] = res.problems[:5]
    row["clean"] = res.clean
    return row


COLUMNS = ("config", "seeds", "ops", "ok", "hung", "lost", "dup", "corrupted",
           "out_of_order", "failed_with_code", "failed_without_code", "frames_lost", "MB",
           "wall_s")


def table(rows: list[dict]) -> str:
    by: dict[str, dict] = {}
    for r in rows:
        agg = by.setdefault(r["config"], {"config": r["config"], "seeds": 0})
        agg["seeds"] += 1
        for k in COLUMNS[2:]:
            agg[k] = round(agg.get(k, 0) + r[k], 2)
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for agg in by.values():
        lines.append("| " + " | ".join(str(agg[k]) for k in COLUMNS) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=3, help="seeds per configuration")
    ap.add_argument("--ops", type=int, default=1000, help="operations per run")
    ap.add_argument("--only", nargs="*", default=None, help="configuration names")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--json", default=None, help="write every run's row here")
    args = ap.parse_args(argv)
    specs = [s for s in matrix(args.ops) if not args.only or s.name in args.only]
    work = [(s, seed) for s in specs for seed in range(1, args.seeds + 1)]
    t0 = time.perf_counter()
    if args.jobs > 1:
        with multiprocessing.Pool(args.jobs) as pool:
            rows = pool.map(_one, work, chunksize=1)
    else:
        rows = [_one(w) for w in work]
    print(table(rows))
    print(f"\n{len(rows)} runs, {sum(r['ops'] for r in rows)} operations, "
          f"{time.perf_counter() - t0:.0f} s wall ({args.jobs} jobs)")
    bad = [r for r in rows if not r["clean"]]
    for r in bad:
        print(f"NOT CLEAN: {r['config']} seed {r['seed']}: {r['problems']}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
