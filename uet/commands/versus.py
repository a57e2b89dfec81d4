"""``uet versus EXPERIMENT.toml [--set key=value ...] [--out DIR] [--stacks uet,roce]``:
the same experiment (same fabric, workload and seed) once with UET and once with the
RoCEv2 baseline, one side-by-side table and one plot (``docs/roce.md``).

Exit status: 0 when every run delivered every message, 1 when a run stopped early, 2 for a
bad configuration.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from uet.experiments.config import ConfigError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("experiment", nargs="?", default=None,
                        help="experiment TOML file (default: the built-in experiment)")
    parser.add_argument("--set", dest="sets", action="append", default=[],
                        metavar="KEY=VALUE", help="override a key for both stacks; repeatable")
    parser.add_argument("--stacks", default="uet,roce", metavar="A,B",
                        help="stacks to run, in this order (default: uet,roce)")
    parser.add_argument("--out", default=None, metavar="DIR",
                        help="output directory (default: runs/<timestamp>/): DIR/<stack>/ "
                             "per run, DIR/versus.json and DIR/versus.png")
    parser.add_argument("--no-plot", action="store_true", help="write no plots")


def run(args: argparse.Namespace) -> int:
    from uet.experiments.command import default_out_dir
    from uet.experiments.versus import (
        STACKS,
        run_versus,
        stack_configs,
        versus_table,
        write_versus,
    )

    console = Console()
    err = Console(stderr=True)
    stacks = [s.strip() for s in args.stacks.split(",") if s.strip()]
    bad = [s for s in stacks if s not in STACKS]
    if bad or not stacks or len(set(stacks)) != len(stacks):
        err.print(f"[red]error:[/red] --stacks {escape(args.stacks)}: allowed a comma-separated "
                  f"list of distinct stacks from {', '.join(STACKS)}", highlight=False)
        return 2
    sets = list(args.sets) + ["output.progress=false"]
    if args.no_plot:
        sets.append("output.plots=false")
    try:
        configs = stack_configs(args.experiment, sets, stacks)
    except ConfigError as exc:
        err.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False)
        return 2
    out = Path(args.out) if args.out else default_out_dir()
    for s in stacks:
        console.print(f"running {s} ...")
    results = run_versus(configs, out)
    console.print(versus_table(results))
    files = write_versus(results, out, plot=not args.no_plot)
    console.print(escape(f"results: {out}/<stack>/results.json, "
                         + ", ".join(str(out / f) for f in files.values())))
    return 0 if all(r["run"]["completed"] for r in results.values()) else 1
