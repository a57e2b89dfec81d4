"""The ``uet run`` command line, importable: ``uet.commands.run`` only has to re-export
:func:`add_arguments` and :func:`run`.

``uet run [EXPERIMENT.toml] [--set key=value ...] [--sweep key=v1,v2 ...] [--jobs N]
[--executor local|dask|dask://HOST:PORT] [--resume] [--export csv,parquet] [--out DIR]``.
The work itself is ``run_experiment(config, out_dir) -> results`` from
``uet.experiments.runner`` (or the callable passed to :func:`run`). Exit status: 0 when
every message was delivered (every point, for a sweep), 1 when a run stopped early or a
point failed, 2 for a bad configuration or command line.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape

from uet.experiments import plot_worker
from uet.experiments.config import ConfigError, load_config
from uet.fabric.eventlog import LOG_LEVELS

if TYPE_CHECKING:  # the executors (multiprocessing, sockets) load for sweeps only
    from uet.experiments.executor import RunFn


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
    parser.add_argument("--jobs", type=positive_int, default=None, metavar="N",
                        help="sweep points run in parallel: local processes, or the "
                             "workers of --executor dask (default: 1; one per CPU for dask)")
    parser.add_argument("--executor", default="local", metavar="ENGINE",
                        help="where sweep points run: local (processes, the default), dask "
                             "(a Dask LocalCluster of --jobs workers) or dask://HOST:PORT "
                             "(an existing Dask scheduler, e.g. dask-jobqueue on SLURM)")
    parser.add_argument("--resume", action="store_true",
                        help="sweeps: skip points whose results are already in --out DIR "
                             "(matched by a hash of the resolved config)")
    parser.add_argument("--export", default=None, metavar="FORMATS",
                        help="also write per-flow results, time series and the summary as "
                             "tables: csv, parquet or csv,parquet")
    parser.add_argument("--metric", dest="metrics", action="append", default=[],
                        metavar="NAME",
                        help="sweeps: summary metric for the aggregate table and sweep.png "
                             "(repeatable; default: tail and median FCT/ideal, goodput, "
                             "retransmissions)")
    parser.add_argument("--out", default=None, metavar="DIR",
                        help="output directory (default: runs/<timestamp>/)")
    parser.add_argument("--check", action="store_true",
                        help="validate and print the resolved config, run nothing")
    parser.add_argument("--write-cm", default=None, metavar="FILE",
                        help="write the workload as an htsim connection matrix, run nothing")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--live", action="store_true",
                        help="run in real time: NICs and switches as Trio tasks exchanging "
                        "real frames on loopback (the [live] table: dilation, backend)")
    parser.add_argument("--log-level", choices=LOG_LEVELS, default=None,
                        help="print the structured event log on stderr as the run goes: "
                             "error, warning (+ drops, trims, NACKs, retransmissions), info "
                             "(+ flows and PDCs opening and closing), debug (everything); "
                             "the same as --set output.log_level=LEVEL")


def positive_int(text: str) -> int:
    """argparse type of ``--jobs``: a positive integer (one rule:
    :func:`uet.experiments.executor.check_jobs`)."""
    from uet.experiments.executor import ExecutorError, check_jobs

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer") from None
    try:
        return check_jobs(value)
    except ExecutorError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer") from None


def default_out_dir(root: str | Path = "runs", prefix: str = "") -> Path:
    """``runs/<prefix><YYYYmmdd-HHMMSS>/`` (``-2``, ``-3``, ... if that exists already)."""
    import time

    base = Path(root) / (prefix + time.strftime("%Y%m%d-%H%M%S"))
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


def _fail(message: str) -> int:
    Console(stderr=True).print(f"[red]error:[/red] {escape(message)}", highlight=False,
                               soft_wrap=True)
    return 2


def run(args: argparse.Namespace, run_experiment: RunFn | None = None,
        console: Console | None = None) -> int:
    """Carry out ``uet run`` (see the module docstring for the exit status)."""
    from uet.experiments.export import ExportError, check_available, parse_formats

    console = console or Console()
    sets = list(args.sets)
    if args.no_progress:
        sets.append("output.progress=false")
    if getattr(args, "live", False):
        sets.append("live.enabled=true")
    if getattr(args, "log_level", None):
        sets.append(f"output.log_level={args.log_level}")
    try:
        formats = parse_formats(args.export) if args.export is not None else []
        if formats:
            check_available(formats)
        if args.sweeps:  # the executors load for sweeps only
            from uet.experiments.executor import ExecutorError

            try:
                return _run_sweep(args, sets, formats, run_experiment, console)
            except ExecutorError as exc:
                return _fail(str(exc))
        for flag, given in (("--resume", args.resume),
                            ("--executor", args.executor != "local"),
                            ("--metric", bool(args.metrics))):
            if given:
                return _fail(f"{flag} applies to sweeps (--sweep key=v1,v2,...); a single "
                             f"run runs here")
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
    except (ConfigError, ExportError) as exc:
        return _fail(str(exc))
    # the plots' helper processes import matplotlib while this one loads the runner and
    # runs the experiment (uet.experiments.plot_worker)
    with plot_worker.prestarted(bool(config["output"].get("plots", True))):
        return _run_one(config, args, formats, run_experiment, console)


def _run_one(config: dict[str, Any], args: argparse.Namespace, formats: list[str],
             run_experiment: RunFn | None, console: Console) -> int:
    fn = run_experiment or _runner()
    if fn is None:
        return _fail("uet run: the experiment runner is not available in this build")
    out = Path(args.out) if args.out else default_out_dir()
    created = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    from uet.runtime.wire import LiveError

    try:
        results = fn(config, out)
    except (ConfigError, LiveError) as exc:  # found once the fabric is built (taps,
        # impairments) or started (live mode: sockets, namespaces)
        if created:
            shutil.rmtree(out, ignore_errors=True)
        return _fail(str(exc))
    from uet.experiments.report import print_summary

    print_summary(results, console)
    console.print(f"results: {escape(str(out / 'results.json'))}")
    if formats:
        from uet.experiments.api import Results
        from uet.experiments.export import write_tables

        paths = write_tables(Results(results, None, out).tables(), out, formats)
        console.print(escape("tables: " + ", ".join(p.name for p in paths)))
    return 0 if results["run"]["completed"] else 1


def _run_sweep(args: argparse.Namespace, sets: list[str], formats: list[str],
               run_experiment: RunFn | None, console: Console) -> int:
    from uet.experiments.aggregate import (
        DEFAULT_METRICS,
        aggregate,
        aggregate_table,
        check_metrics,
    )
    from uet.experiments.executor import make_executor
    from uet.experiments.progress import PointProgress
    from uet.experiments.sweep import expand, run_points, sweep_rows, sweep_table, write_sweep

    axes, points = expand(args.experiment, sets, args.sweeps)
    if args.check:
        for p in points:
            console.print(f"{p.index:3d} {escape(p.name)}")
        return 0
    try:
        metrics = check_metrics(args.metrics or DEFAULT_METRICS)
    except ValueError as exc:
        return _fail(str(exc))
    if args.resume and not args.out:
        return _fail("--resume needs --out DIR: the directory of the sweep to resume")
    executor = make_executor(args.executor, args.jobs)
    fn = run_experiment or _runner()
    if fn is None:
        return _fail("uet run: the experiment runner is not available in this build")
    out = Path(args.out) if args.out else default_out_dir()
    for p in points:  # one bar for the sweep; a point's own bar would fight it
        p.config["output"]["progress"] = False
    console.print(escape(f"sweep: {len(points)} points on {executor.name} -> {out}"))
    err = Console(stderr=True)
    with PointProgress(len(points), console=err, enabled=not args.no_progress) as bar:
        outcomes = run_points(points, fn, out, executor, bar.point_done, resume=args.resume)
    rows = sweep_rows(points, outcomes)
    keys = [a.key for a in axes]
    groups = aggregate(rows, keys)
    files = write_sweep(rows, keys, out, groups, executor.name)
    from uet.experiments.sweep_plot import plot_sweep

    name = points[0].config["experiment"]["name"] if points else ""
    png = plot_sweep(rows, groups, keys, metrics, out / "sweep.png", title=name)
    if png is not None:
        files.append(png)
    print_wide(console, sweep_table(rows, keys))
    if any(len(g["points"]) > 1 for g in groups):
        print_wide(console, aggregate_table(groups, keys, metrics))
    for o in outcomes:
        if o.get("error"):
            console.print(f"[red]point {o['index']} failed:[/red] {escape(o['error'])}",
                          highlight=False)
    if formats:
        from uet.experiments.api import Results, SweepResults
        from uet.experiments.export import write_tables

        res = SweepResults(keys, rows, [
            Results(o["results"], None, out / o["dir"]) if "results" in o else None
            for o in outcomes])
        files += write_tables(res.tables(), out, formats)
    console.print(escape("sweep: " + ", ".join(str(f) for f in files)))
    return 0 if all(r["completed"] and not r["error"] for r in rows) else 1


def print_wide(console: Console, table: Any) -> None:
    """Print as wide as the table needs (a narrow terminal wraps lines rather than
    cells)."""
    need = console.measure(table, options=console.options.update_width(240)).maximum
    width = console.width
    console.width = max(width, need)
    console.print(table)
    console.width = width


def main(argv: list[str] | None = None) -> int:  # pragma: no cover - manual use
    parser = argparse.ArgumentParser(prog="uet run")
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
