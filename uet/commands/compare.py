"""``uet compare RUN_DIR RUN_DIR... [--metric NAME] [--out DIR] [--json]``.

Results side by side, ratios to the first run, the FCT CDFs overlaid in ``compare.png``
(:mod:`uet.experiments.compare`). Exit status 0; 2 when a directory is not a run or the
runs cannot be compared (the reason on one line).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.console import Console
from rich.markup import escape


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``uet compare``."""
    parser.add_argument("runs", nargs="+", metavar="RUN_DIR",
                        help="run directories (results.json) or sweeps over seeds only "
                             "(sweep.json); the first is the reference")
    parser.add_argument("--metric", dest="metrics", action="append", default=[],
                        metavar="NAME", help="summary metric to show (repeatable; default: "
                        "FCTs, FCT/ideal, goodput, retransmissions, NACKs, trims, ...)")
    parser.add_argument("--out", default=None, metavar="DIR",
                        help="where compare.png and compare.json go (default: "
                             "runs/compare-<timestamp>/)")
    parser.add_argument("--json", action="store_true",
                        help="print the comparison as JSON instead of a table")


def run(args: argparse.Namespace, console: Console | None = None) -> int:
    from uet.experiments.aggregate import check_metrics
    from uet.experiments.command import default_out_dir, print_wide
    from uet.experiments.compare import (
        COMPARE_METRICS,
        CompareError,
        check_compatible,
        compare_doc,
        compare_table,
        load_run,
        plot_compare,
    )

    console = console or Console()
    err = Console(stderr=True)
    try:
        metrics = check_metrics(args.metrics) if args.metrics else list(COMPARE_METRICS)
        runs = [load_run(p) for p in args.runs]
        labels = [r.label for r in runs]
        if len(set(labels)) != len(labels):  # same directory names: show more of the path
            for r in runs:
                r.label = str(r.path)
        check_compatible(runs)
    except (CompareError, ValueError) as exc:
        err.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False, soft_wrap=True)
        return 2
    doc = compare_doc(runs, metrics)
    out = Path(args.out) if args.out else default_out_dir("runs", prefix="compare-")
    out.mkdir(parents=True, exist_ok=True)
    png = plot_compare(runs, out / "compare.png")
    doc["files"] = {"plot": None if png is None else str(png)}
    (out / "compare.json").write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    if args.json:
        console.print_json(json.dumps(doc))
        return 0
    print_wide(console, compare_table(runs, doc))
    console.print(escape(f"compare: {out / 'compare.json'}"
                         + (f", {png}" if png is not None else "")))
    return 0
