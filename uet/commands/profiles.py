"""``uet profiles [--json] [--profile NAME_OR_PATH ...]``: the profiles and what each allows."""

from __future__ import annotations

import argparse
import json
import sys

from uet.profiles import ProfileConfigError, builtin_profiles, feature_matrix, load_profile


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true",
                   help="print one JSON object keyed by profile name")
    p.add_argument("--profile", action="append", metavar="NAME_OR_PATH",
                   help="show this profile (a built-in name or a TOML file; repeatable); "
                        "default: the built-in profiles")


def run(args: argparse.Namespace) -> int:
    try:
        if args.profile:
            profiles = [load_profile(x) for x in args.profile]
        else:
            profiles = list(builtin_profiles().values())
    except ProfileConfigError as exc:
        print(f"uet profiles: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps({p.name: p.to_dict() for p in profiles}, indent=2))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title="UET profiles", show_lines=False)
    table.add_column("feature", style="bold")
    for p in profiles:
        table.add_column(f"{p.title}\n({p.name})", justify="center")
    for name, cells in feature_matrix(profiles):
        table.add_row(name, *cells)
    Console(width=max(100, 30 + 16 * len(profiles))).print(table)
    return 0
