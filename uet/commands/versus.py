"""``uet versus EXPERIMENT.toml [--set key=value ...] [--out DIR] [--stacks uet,roce |
--variant "label: key=value; ..." ...]``: the same experiment (same fabric, workload and
seed) once per variant, by default the file's ``versus.variants`` (UET and the RoCEv2
baseline unless it says otherwise), one side-by-side table and one plot (``docs/roce.md``).

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
    parser.add_argument("--stacks", default=None, metavar="A,B",
                        help="run one variant per stack, in this order (e.g. uet,roce)")
    parser.add_argument("--variant", dest="variants", action="append", default=None,
                        metavar="LABEL: KEY=VALUE; ...",
                        help="a run of its own with these keys changed; repeatable "
                             "(default: the file's versus.variants)")
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
        variant_configs,
        versus_table,
        write_versus,
    )

    console = Console()
    err = Console(stderr=True)
    sets = list(args.sets) + ["output.progress=false"]
    if args.no_plot:
        sets.append("output.plots=false")
    try:
        if args.stacks is not None:
            if args.variants:
                raise ConfigError("--stacks", "give --stacks or --variant, not both")
            stacks = [s.strip() for s in args.stacks.split(",") if s.strip()]
            if not stacks or any(s not in STACKS for s in stacks) \
                    or len(set(stacks)) != len(stacks):
                raise ConfigError(f"--stacks {args.stacks}", "bad stack list",
                                  allowed="distinct stacks from " + ", ".join(STACKS))
            configs = stack_configs(args.experiment, sets, stacks)
        else:
            configs = variant_configs(args.experiment, sets, args.variants)
    except ConfigError as exc:
        err.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False)
        return 2
    out = Path(args.out) if args.out else default_out_dir()
    console.print("running " + ", ".join(configs) + " ...")
    results = run_versus(configs, out)
    table = versus_table(results)
    need = console.measure(table, options=console.options.update_width(240)).maximum
    width = console.width
    console.width = max(width, need)  # a narrow terminal wraps lines rather than cells
    console.print(table)
    console.width = width
    files = write_versus(results, out, plot=not args.no_plot)
    console.print(escape(f"results: {out}/<variant>/results.json, "
                         + ", ".join(str(out / f) for f in files.values())))
    return 0 if all(r["run"]["completed"] for r in results.values()) else 1
