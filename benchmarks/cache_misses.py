"""Work and memory traffic per packet-hop, counted (not timed), at several fabric sizes.

Wall and CPU times on a shared machine move by 2x between hours; instruction and cache-miss
counts of a simulated CPU do not. This runs the scale benchmark's workload (the htsim
anchor permutation, ``experiments/htsim/permutation-128ev.toml`` with ``--set
topology.k=K --set traffic.pattern=permutation --set traffic.size=SIZE``, plots off) under
``valgrind --tool=callgrind --cache-sim=yes`` with the collection on only inside the event
loop (``EventLoop_run``), and prints per packet-hop: instructions, first-level data misses
and last-level misses (read, write), and the functions with the most last-level misses
(their own, not their callees').

The last-level cache simulated is ``--ll`` (default: 32 MiB, 16-way, 64-byte lines, the L3
of the machine this was written on; valgrind would otherwise pick its own guess). It has
no prefetcher: sequential copies count in full though a CPU hides most of them.

    python benchmarks/cache_misses.py                         # 16 hosts 2 MB, 1,024 hosts 256 KiB
    python benchmarks/cache_misses.py --run 8:2MB --top 20    # 128 hosts only
    python benchmarks/cache_misses.py --json

Slow: valgrind runs the interpreter ~50-100x slower (the 16-host run ~2 minutes, the
1,024-host one with 256 KiB messages ~10). Needs valgrind (Debian: ``valgrind``).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
EXPERIMENT = ROOT / "experiments" / "htsim" / "permutation-128ev.toml"
EVENTS = ("Ir", "Dr", "Dw", "I1mr", "D1mr", "D1mw", "ILmr", "DLmr", "DLmw")
#: a count (with its share in brackets when not 0), or a dot (none)
_VALUE = re.compile(r"\s*([\d,]+(?: \(\s*[\d.]+%\))?(?=\s)|\.(?=\s))")


def parse_annotate(text: str) -> tuple[dict[str, int], list[tuple[str, dict[str, int]]]]:
    """callgrind_annotate's totals and per-function rows (own costs) as dicts by event."""
    totals: dict[str, int] = {}
    rows: list[tuple[str, dict[str, int]]] = []
    for line in text.splitlines():
        pos, vals = 0, []
        while (m := _VALUE.match(line, pos)) is not None:
            v = m.group(1)
            vals.append(0 if v == "." else int(v.split(" ")[0].replace(",", "")))
            pos = m.end()
        if len(vals) != len(EVENTS):
            continue
        name = line[pos:].strip()
        counts = dict(zip(EVENTS, vals, strict=True))
        if name.startswith("PROGRAM TOTALS"):
            totals = counts
        elif name:
            func = name.split(" [")[0]
            rows.append((func.rsplit("/", 1)[-1], counts))
    return totals, rows


def measure(k: int, size: str, ll: str, top: int, keep: Path | None) -> dict[str, Any]:
    """One callgrind run; the counts per packet-hop."""
    with tempfile.TemporaryDirectory(prefix="uet-cachesim-") as tmp:
        out = Path(tmp) / "run"
        prof = (keep or Path(tmp)) / f"callgrind.k{k}.{size}.out"
        cmd = ["valgrind", "--tool=callgrind", "--cache-sim=yes", f"--LL={ll}",
               "--toggle-collect=EventLoop_run", f"--callgrind-out-file={prof}",
               sys.executable, "-m", "uet.cli", "run", str(EXPERIMENT),
               "--set", f"topology.k={k}", "--set", "traffic.pattern=permutation",
               "--set", f"traffic.size={size}", "--set", "output.plots=false",
               "--no-progress", "--out", str(out)]
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        if proc.returncode != 0:
            raise SystemExit(f"cache_misses: the run under valgrind failed "
                             f"(k={k}, {size}): {proc.stderr.strip().splitlines()[-1:]}")
        run = json.loads((out / "results.json").read_text())["run"]
        ann = subprocess.run(["callgrind_annotate", "--threshold=100", "--tree=none",
                              "--inclusive=no", "--auto=no", "--sort=Ir", str(prof)],
                             capture_output=True, text=True, check=True).stdout
    totals, rows = parse_annotate(ann)
    hops = run["packet_hops"]

    def per_hop(c: dict[str, int]) -> dict[str, float]:
        return {e: c[e] / hops for e in EVENTS}

    ranked = sorted(rows, key=lambda r: -(r[1]["DLmr"] + r[1]["DLmw"]))[:top]
    return {"hosts": k ** 3 // 4, "k": k, "size": size, "packet_hops": hops,
            "events": run["events"], "per_hop": per_hop(totals),
            "top": [{"function": f, **per_hop(c)} for f, c in ranked]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", action="append", metavar="K:SIZE",
                    help="a fat tree's k and the message size (default: 4:2MB and 16:256KiB)")
    ap.add_argument("--ll", default="33554432,16,64",
                    help="the simulated last-level cache: size,associativity,line (bytes)")
    ap.add_argument("--top", type=int, default=12, help="functions listed per run")
    ap.add_argument("--keep", type=Path, help="keep the callgrind profiles in this folder")
    ap.add_argument("--json", action="store_true", help="print JSON instead of tables")
    args = ap.parse_args(argv)
    if shutil.which("valgrind") is None or shutil.which("callgrind_annotate") is None:
        print("cache_misses: valgrind is not installed (Debian: apt-get install valgrind)",
              file=sys.stderr)
        return 2
    runs = []
    for spec in args.run or ["4:2MB", "16:256KiB"]:
        k, sep, size = spec.partition(":")
        if not sep or not k.isdigit() or int(k) < 2 or int(k) % 2:
            print(f"cache_misses: --run {spec!r}: want K:SIZE with an even K >= 2 "
                  "(e.g. 8:2MB)", file=sys.stderr)
            return 2
        runs.append((int(k), size))
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
    results = [measure(k, size, args.ll, args.top, args.keep) for k, size in runs]
    if args.json:
        print(json.dumps(results, indent=1))
        return 0
    print("| hosts | size | packet-hops | instructions / hop | D1 misses / hop | "
          "LL misses / hop (read + write) |")
    print("|---|---|---|---|---|---|")
    for r in results:
        h = r["per_hop"]
        print(f"| {r['hosts']:,} | {r['size']} | {r['packet_hops']:,} | {h['Ir']:,.0f} | "
              f"{h['D1mr'] + h['D1mw']:.1f} | {h['DLmr'] + h['DLmw']:.1f} "
              f"({h['DLmr']:.1f} + {h['DLmw']:.1f}) |")
    for r in results:
        print(f"\n{r['hosts']:,} hosts, {r['size']}: last-level misses per hop by function")
        for t in r["top"]:
            print(f"  {t['DLmr'] + t['DLmw']:6.2f}  (instr {t['Ir']:7.0f})  {t['function']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
