"""Sweeps: ``--sweep key=v1,v2,... [--sweep ...]`` over an experiment, as a grid.

:func:`expand` builds every combination (the first ``--sweep`` varies slowest), validating
each point like a ``--set`` (errors name the ``--sweep`` that caused them).
:func:`run_sweep` runs the points through an :class:`~uet.experiments.executor.Executor`
and returns one row per point: the varied values, the point's directory and its summary
(or its error). :func:`write_sweep` writes ``sweep.json`` and ``sweep.csv``;
:func:`sweep_table` renders the comparison with rich. Each point runs with its own config
(its own seed), so results do not depend on how many jobs ran them.
"""

from __future__ import annotations

import csv
import itertools
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.markup import escape
from rich.table import Table

from uet.experiments.config import (
    ConfigError,
    PathT,
    apply_override,
    format_path,
    key_spec,
    parse_key_path,
    parse_value,
    read_raw,
    validate,
)
from uet.experiments.executor import Executor, OnResult, RunFn, SerialExecutor, Task

#: summary fields shown in the comparison table and sweep.csv
COLUMNS = ("messages_delivered", "fct_median_us", "fct_p99_us", "fct_max_us",
           "fct_median_over_ideal", "fct_tail_over_ideal", "goodput_gbps",
           "retransmissions", "nacks", "trims", "ecn_marks", "drops")
#: their headers in the table (two lines each, short enough for a terminal)
LABELS = {"messages_delivered": "msgs\ndone", "fct_median_us": "FCT med\nµs",
          "fct_p99_us": "FCT p99\nµs", "fct_max_us": "FCT max\nµs",
          "fct_median_over_ideal": "med /\nideal", "fct_tail_over_ideal": "tail /\nideal",
          "goodput_gbps": "goodput\nGb/s", "retransmissions": "retx", "nacks": "NACKs",
          "trims": "trims", "ecn_marks": "ECN\nmarks", "drops": "drops"}


@dataclass(frozen=True, slots=True)
class Axis:
    """One ``--sweep``: a key path and its values."""

    key: str
    path: PathT
    values: tuple[Any, ...]
    spec: str


@dataclass(frozen=True, slots=True)
class Point:
    """One grid point: its varied values (key -> value), config and directory name."""

    index: int
    values: dict[str, Any]
    config: dict[str, Any]
    name: str


def split_values(text: str) -> list[str]:
    """Split at top-level commas (not inside brackets, braces or quotes)."""
    out, depth, quote, cur = [], 0, "", ""
    for ch in text:
        if quote:
            cur += ch
            if ch == quote:
                quote = ""
            continue
        if ch in "\"'":
            quote = ch
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
            continue
        cur += ch
    out.append(cur.strip())
    return out


def parse_sweep(spec: str) -> Axis:
    """``"transport.cms.ev_selector=fixed,reps"`` -> an :class:`Axis`."""
    key, sep, rest = spec.partition("=")
    label = f"--sweep {spec}"
    if not sep or not rest.strip():
        raise ConfigError(spec, "expected key.path=v1,v2,...", where=label)
    path = parse_key_path(key)
    ks = key_spec(path)
    values = []
    for text in split_values(rest):
        if not text:
            raise ConfigError(format_path(path), "empty value", where=label)
        v = parse_value(text)
        if ks is not None and ks.type in ("str", "enum") and not isinstance(v, str):
            v = text
        values.append(v)
    if len(set(map(repr, values))) != len(values):
        raise ConfigError(format_path(path), "repeated value", where=label)
    return Axis(format_path(path), path, tuple(values), spec)


def _slug(values: dict[str, Any]) -> str:
    parts = []
    for key, v in values.items():
        short = key.rsplit(".", 1)[-1]
        parts.append(f"{short}={v}")
    text = re.sub(r"[^A-Za-z0-9._=+-]+", "-", "_".join(parts)).strip("-")
    return text[:80]


def expand(path: str | Path | None, sets: Sequence[str], sweeps: Sequence[str]
           ) -> tuple[list[Axis], list[Point]]:
    """The axes and every validated grid point of an experiment file (None: the default)."""
    from uet.experiments.config import parse_assignment

    axes = [parse_sweep(s) for s in sweeps]
    keys = [a.key for a in axes]
    if len(set(keys)) != len(keys):
        raise ConfigError(", ".join(keys), "a key is swept twice", where="--sweep")
    base, source = read_raw(path)
    for expr in sets:
        key, value = parse_assignment(expr)
        label = f"--set {expr}"
        apply_override(base, key, value, label)
        source.overrides.append((key, label))
    points = []
    for i, combo in enumerate(itertools.product(*(a.values for a in axes))):
        raw = json.loads(json.dumps(base))
        src = type(source)(source.name, source.text, list(source.overrides))
        values = {}
        for axis, value in zip(axes, combo, strict=True):
            label = f"--sweep {axis.spec} (value {value!r})"
            apply_override(raw, axis.path, value, label)
            src.overrides.append((axis.path, label))
            values[axis.key] = value
        cfg = validate(raw, src)
        cfg["source"]["overrides"] = [lbl for _, lbl in source.overrides] + [
            f"--set {k}={json.dumps(v)}" for k, v in values.items()]
        points.append(Point(i, values, cfg, f"{i:03d}_{_slug(values)}" if values
                            else f"{i:03d}"))
    return axes, points


def run_sweep(points: Sequence[Point], fn: RunFn, out_dir: str | Path,
              executor: Executor | None = None, on_result: OnResult | None = None
              ) -> list[dict[str, Any]]:
    """Run every point; one row per point, in point order."""
    out = Path(out_dir)
    tasks = [Task(p.index, p.config, str(out / p.name)) for p in points]
    outcomes = (executor or SerialExecutor()).run(fn, tasks, on_result)
    rows = []
    for p, res in zip(points, outcomes, strict=True):
        row: dict[str, Any] = {"point": p.index, "dir": p.name, **p.values}
        results = res.get("results")
        if results is not None:
            row["summary"] = results.get("summary", {})
            row["completed"] = results.get("run", {}).get("completed")
            row["error"] = None
        else:
            row["summary"] = {}
            row["completed"] = False
            row["error"] = res.get("error", "no results")
        rows.append(row)
    return rows


def write_sweep(rows: Sequence[dict[str, Any]], keys: Sequence[str], out_dir: str | Path
                ) -> tuple[Path, Path]:
    """``sweep.json`` (rows with full summaries) and ``sweep.csv`` (varied keys + COLUMNS)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    jpath = out / "sweep.json"
    jpath.write_text(json.dumps({"keys": list(keys), "rows": list(rows)}, indent=1) + "\n",
                     encoding="utf-8")
    cpath = out / "sweep.csv"
    with open(cpath, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["point", *keys, *COLUMNS, "completed", "error", "dir"])
        for r in rows:
            w.writerow([r["point"], *(_cell(r.get(k)) for k in keys),
                        *(_cell(r["summary"].get(c)) for c in COLUMNS),
                        r.get("completed"), r.get("error") or "", r["dir"]])
    return jpath, cpath


def _cell(v: Any) -> Any:
    if isinstance(v, list | dict):
        return json.dumps(v)
    return "" if v is None else v


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:,.3f}" if abs(v) < 10 else f"{v:,.1f}"
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}"
    return str(v)


def sweep_table(rows: Sequence[dict[str, Any]], keys: Sequence[str],
                columns: Sequence[str] = COLUMNS) -> Table:
    """One line per point: the varied keys, then the summary columns."""
    table = Table(title=f"sweep: {len(rows)} points", header_style="bold")
    table.add_column("#", justify="right", no_wrap=True)
    for k in keys:
        table.add_column(k.rsplit(".", 1)[-1], style="cyan", no_wrap=True)
    for c in columns:
        table.add_column(LABELS.get(c, c), justify="right", no_wrap=True)
    for r in rows:
        if r.get("error"):
            cells = [f"[red]{escape(r['error'][:60])}"] + [""] * (len(columns) - 1)
        else:
            cells = [_fmt(r["summary"].get(c)) for c in columns]
        table.add_row(str(r["point"]), *(escape(_fmt(r.get(k))) for k in keys), *cells)
    return table
