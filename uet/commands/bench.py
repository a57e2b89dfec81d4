"""``uet bench [--json] [--section NAME ...] [--quick]``: a table per section (ratios first,
units on every number; :mod:`uet.bench.report`), or with ``--json`` one object."""

from __future__ import annotations

import argparse
import importlib
import json
import sys

from uet.bench import SECTIONS


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--section", action="append", choices=SECTIONS,
                   help="run only this section (repeatable)")
    p.add_argument("--quick", action="store_true", help="shorter runs (less precise)")


def run(args: argparse.Namespace) -> int:
    wanted = args.section or list(SECTIONS)
    results: dict[str, dict] = {}
    for name in wanted:
        try:
            mod = importlib.import_module(f"uet.bench.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"uet.bench.{name}":
                raise
            continue
        if not args.json:
            print(f"[{name}] measuring...", file=sys.stderr)
        results[name] = mod.run(quick=args.quick)
    if args.json:
        print(json.dumps(results, indent=2, sort_keys=True))
    else:
        from rich.console import Console

        from uet.bench.report import section_table

        console = Console()
        for name, res in results.items():
            console.print(section_table(name, res))
    return 0
