"""The ``uet run`` command line, importable: ``uet.commands.run`` only has to re-export
:func:`add_arguments` and :func:`run`.

``uet run [EXPERIMENT.toml] [--set key=value ...] [--sweep key=v1,v2 ...] [--jobs N]
[--out DIR]``. The work itself is ``run_experiment(config, out_dir) -> results`` from
``uet.experiments.runner`` (or the callable passed to :func:`run`). Exit status: 0 when
every message was delivered (every point, for a sweep), 1 when a run stopped early or a
point failed, 2 for a bad configuration.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from uet.experiments.config import ConfigError, load_config
from uet.experiments.executor import RunFn, make_executor
from uet.fabric.eventlog import LOG_LEVELS


def positive_int(text: str) -> int:
    """An argparse type: an integer >= 1 (``--jobs 0`` is refused, not run serially)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {value}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``uet run``."""
    parser.add_argument("experiment", nargs="?", default=None,
                        help="experiment TOML file (default: the built-in experiment)")
    parser.add_argument("--set", dest="sets", action="append", default=[],
                        metavar="KEY=VALUE",
                        help="override a key, e.g. --set traffic.size=2MiB (value: a TOML "
                             "literal, else a string); repeatable")
    parser.add_argument("--sweep", dest="sweeps", action="append", default=[],
                        metavar="KEY=V1,V2,...",
                        help="run every combination of these values; repeatable")
    parser.add_argument("--jobs", type=positive_int, default=1, metavar="N",
                        help="sweep points run in parallel (local processes; N >= 1)")
    parser.add_argument("--out", default=None, metavar="DIR",
                        help="output directory (default: runs/<timestamp>/)")
    parser.add_argument("--check", action="store_true",
                        help="validate and print the resolved config, run nothing")
    parser.add_argument("--write-cm", default=None, metavar="FILE",
                        help="write the workload as an htsim connection matrix, run nothing")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--log-level", choices=LOG_LEVELS, default=None,
                        help="print the structured event log on stderr as the run goes: "
                             "error, warning (+ drops, trims, NACKs, retransmissions), info "
                             "(+ flows and PDCs opening and closing), debug (everything); "
                             "the same as --set output.log_level=LEVEL")


def default_out_dir(root: str | Path = "runs") -> Path:
    """``runs/<YYYYmmdd-HHMMSS>/`` (``-2``, ``-3``, ... if that exists already)."""
    import time

    base = Path(root) / time.strftime("%Y%m%d-%H%M%S")
    out, n = base, 1
    while out.exists():
        n += 1
        out = base.with_name(f"{base.name}-{n}")
    return out


def _runner() -> RunFn | None:
    try:
        from uet.experiments.runner import run_experiment
    except ModuleNotFoundError as exc:
        if exc.name == "uet.experiments.runner":
            return None
        raise
    return run_experiment


def run(args: argparse.Namespace, run_experiment: RunFn | None = None,
        console: Console | None = None) -> int:
    """Carry out ``uet run`` (see the module docstring for the exit status)."""
    console = console or Console()
    err = Console(stderr=True)
    sets = list(args.sets)
    if args.no_progress:
        sets.append("output.progress=false")
    if getattr(args, "log_level", None):
        sets.append(f"output.log_level={args.log_level}")
    try:
        if args.sweeps:
            return _run_sweep(args, sets, run_experiment, console)
        config = load_config(args.experiment, sets)
        if args.check:
            console.print_json(json.dumps(config))
            return 0
        if args.write_cm:
            from uet.experiments.htsim_cm import save_cm
            from uet.experiments.traffic import build_workload

            p = save_cm(build_workload(config), args.write_cm)
            console.print(f"wrote {escape(str(p))}")
            return 0
    except ConfigError as exc:
        err.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False, soft_wrap=True)
        return 2
    fn = run_experiment or _runner()
    if fn is None:
        err.print("uet run: the experiment runner is not available in this build")
        return 2
    out = Path(args.out) if args.out else default_out_dir()
    created = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    try:
        results = fn(config, out)
    except ConfigError as exc:  # found once the fabric is built (taps, impairments)
        if created:
            shutil.rmtree(out, ignore_errors=True)
        err.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False, soft_wrap=True)
        return 2
    from uet.experiments.report import print_summary

    print_summary(results, console)
    console.print(f"results: {escape(str(out / 'results.json'))}")
    return 0 if results["run"]["completed"] else 1


def _run_sweep(args: argparse.Namespace, sets: list[str], run_experiment: RunFn | None,
               console: Console) -> int:
    from uet.experiments.sweep import expand, run_sweep, sweep_table, write_sweep

    axes, points = expand(args.experiment, sets, args.sweeps)
    if args.check:
        for p in points:
            console.print(f"{p.index:3d} {escape(p.name)}")
        return 0
    fn = run_experiment or _runner()
    if fn is None:
        Console(stderr=True).print("uet run: the experiment runner is not available")
        return 2
    out = Path(args.out) if args.out else default_out_dir()
    if args.jobs > 1:  # worker processes do not draw progress bars over each other
        for p in points:
            p.config["output"]["progress"] = False

    def progress(index: int, res: dict[str, Any]) -> None:
        state = "failed" if "error" in res else "done"
        console.print(f"point {index} {state} ({res['wall_time_s']:.1f} s)")

    rows = run_sweep(points, fn, out, make_executor(args.jobs), progress)
    keys = [a.key for a in axes]
    write_sweep(rows, keys, out)
    table = sweep_table(rows, keys)
    # as wide as the table needs (a narrow terminal wraps lines rather than cells)
    need = console.measure(table, options=console.options.update_width(240)).maximum
    width = console.width
    console.width = max(width, need)
    console.print(table)
    console.width = width
    console.print(escape(f"sweep: {out / 'sweep.json'}, {out / 'sweep.csv'}"))
    return 0 if all(r["completed"] and not r["error"] for r in rows) else 1


def main(argv: list[str] | None = None) -> int:  # pragma: no cover - manual use
    parser = argparse.ArgumentParser(prog="uet run")
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
