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
    Source,
    apply_override,
    format_path,
    key_spec,
    parse_key_path,
    parse_value,
    read_raw,
    validate,
)
from uet.experiments.executor import Executor, OnResult, RunFn, SerialExecutor, Task
from uet.experiments.results import write_results

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
    base, source = read_raw(path)
    for expr in sets:
        key, value = parse_assignment(expr)
        label = f"--set {expr}"
        apply_override(base, key, value, label)
        source.overrides.append((key, label))
    return axes, expand_raw(base, source, axes)


def axis_of(key: str, values: Sequence[Any]) -> Axis:
    """An :class:`Axis` from Python values (the notebook API's ``sweep={key: [...]}``)."""
    path = parse_key_path(key)
    vals = tuple(values)
    label = f"sweep {key}"
    if not vals:
        raise ConfigError(format_path(path), "no values", where=label)
    if len(set(map(repr, vals))) != len(vals):
        raise ConfigError(format_path(path), "repeated value", where=label)
    return Axis(format_path(path), path, vals, f"{key}=" + ",".join(map(repr, vals)))


def expand_raw(base: dict[str, Any], source: Source, axes: Sequence[Axis]) -> list[Point]:
    """Every validated grid point of a raw (unvalidated) config and its axes."""
    keys = [a.key for a in axes]
    if len(set(keys)) != len(keys):
        raise ConfigError(", ".join(keys), "a key is swept twice", where="--sweep")
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
    return points


def run_points(points: Sequence[Point], fn: RunFn, out_dir: str | Path | None,
               executor: Executor | None = None, on_result: OnResult | None = None, *,
               resume: bool = False, timeseries: bool = False) -> list[dict[str, Any]]:
    """Run every point; one outcome per point, in point order: :func:`run_task`'s dict plus
    ``dir`` (the point's directory name, None without ``out_dir``), ``key`` (its
    :func:`~uet.experiments.resume.config_key`) and ``resumed`` (its results were already
    under ``out_dir``; only with ``resume``). A point's ``results.json`` is written here if
    its worker's disk is not this one (a remote cluster without a shared file system), so
    ``--resume`` finds it next time."""
    from uet.experiments.resume import config_key, existing_results

    out = None if out_dir is None else Path(out_dir)
    if resume and out is None:
        raise ValueError("resume needs an output directory")
    done = existing_results(out) if resume and out is not None else {}
    outcomes: dict[int, dict[str, Any]] = {}
    tasks: list[Task] = []
    keys = {}
    for p in points:
        key = keys[p.index] = config_key(p.config)
        if key in done:
            where, doc = done[key]
            res: dict[str, Any] = {"index": p.index, "results": doc, "wall_time_s": 0.0,
                                   "worker": None, "resumed": True, "dir": where.name,
                                   "key": key}
            if timeseries:
                res["timeseries"] = _read_series(where, doc)
            outcomes[p.index] = res
            if on_result is not None:
                on_result(p.index, res)
            continue
        tasks.append(Task(p.index, p.config, None if out is None else str(out / p.name),
                          timeseries))
    names = {p.index: p.name for p in points}

    def finished(i: int, res: dict[str, Any]) -> None:
        res.update(dir=None if out is None else names[i], key=keys[i], resumed=False)
        if out is not None and "results" in res:
            path = out / names[i] / "results.json"
            if not path.exists():
                path.parent.mkdir(parents=True, exist_ok=True)
                write_results(res["results"], path)
        outcomes[i] = res
        if on_result is not None:
            on_result(i, res)

    (executor or SerialExecutor()).run(fn, tasks, finished)
    return [outcomes[p.index] for p in points]


def _read_series(where: Path, doc: dict[str, Any]) -> dict[str, Any] | None:
    name = doc.get("files", {}).get("timeseries")
    if not name:
        return None
    try:
        return json.loads((where / name).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def sweep_rows(points: Sequence[Point], outcomes: Sequence[dict[str, Any]]
               ) -> list[dict[str, Any]]:
    """One row per point: point, dir, the varied values, key, summary, completed, error,
    resumed."""
    rows = []
    for p, res in zip(points, outcomes, strict=True):
        row: dict[str, Any] = {"point": p.index, "dir": res.get("dir"), **p.values,
                               "key": res.get("key")}
        results = res.get("results")
        if results is not None:
            row["summary"] = results.get("summary", {})
            row["completed"] = results.get("run", {}).get("completed")
            row["error"] = None
        else:
            row["summary"] = {}
            row["completed"] = False
            row["error"] = res.get("error", "no results")
        row["resumed"] = bool(res.get("resumed"))
        rows.append(row)
    return rows


def run_sweep(points: Sequence[Point], fn: RunFn, out_dir: str | Path | None,
              executor: Executor | None = None, on_result: OnResult | None = None, *,
              resume: bool = False) -> list[dict[str, Any]]:
    """Run every point (:func:`run_points`); one row per point (:func:`sweep_rows`)."""
    return sweep_rows(points, run_points(points, fn, out_dir, executor, on_result,
                                         resume=resume))


def write_sweep(rows: Sequence[dict[str, Any]], keys: Sequence[str], out_dir: str | Path,
                groups: Sequence[dict[str, Any]] | None = None,
                executor: str | None = None) -> list[Path]:
    """``sweep.json`` (keys, rows with full summaries, the aggregate over seeds, the
    executor), ``sweep.csv`` (varied keys + COLUMNS) and ``sweep_aggregate.csv``."""
    from uet.experiments.aggregate import aggregate, write_aggregate
    from uet.experiments.confidence import LEVEL

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if groups is None:
        groups = aggregate(rows, keys)
    jpath = out / "sweep.json"
    doc = {"keys": list(keys), "rows": list(rows), "aggregate": list(groups),
           "confidence_level": LEVEL, "executor": executor}
    jpath.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    cpath = out / "sweep.csv"
    with open(cpath, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["point", *keys, *COLUMNS, "completed", "error", "dir"])
        for r in rows:
            w.writerow([r["point"], *(_cell(r.get(k)) for k in keys),
                        *(_cell(r["summary"].get(c)) for c in COLUMNS),
                        r.get("completed"), r.get("error") or "", r["dir"]])
    return [jpath, cpath, write_aggregate(groups, keys, out)]


def read_sweep(out_dir: str | Path) -> dict[str, Any]:
    """``sweep.json`` of a sweep directory (ValueError if there is none)."""
    path = Path(out_dir) / "sweep.json"
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValueError(f"{out_dir}: no sweep.json ({exc.strerror})") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(doc, dict) or "rows" not in doc or "keys" not in doc:
        raise ValueError(f"{path}: not a sweep (no keys and rows)")
    return doc


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
