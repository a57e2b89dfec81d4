"""Aggregation of sweep points over seeds: mean, sd, min/max and a 95% confidence interval.

Points that differ only in their seeds are one *group*: a swept key is a seed when its last
part is ``seed`` (``experiment.seed``, ``traffic.seed``, ``impairments[0].seed``); every
other swept key is a parameter. For each group and each numeric summary metric,
:func:`aggregate` gives :func:`~uet.experiments.confidence.describe` over the group's
completed points (failed points are counted apart, a metric that is null in a point, such
as a median FCT with nothing delivered, is left out of that metric's ``n``). A sweep with
no seed axis has one point per group (sd and interval null).
"""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.markup import escape
from rich.table import Table

from uet.experiments.confidence import LEVEL, describe
from uet.experiments.results import SUMMARY_SPEC

#: metrics shown in the terminal table and sweep.png unless --metric says otherwise
DEFAULT_METRICS = ("fct_tail_over_ideal", "fct_median_over_ideal", "goodput_gbps",
                   "retransmissions")
#: axis labels (with units) of the metrics people plot most
METRIC_LABELS = {
    "fct_tail_over_ideal": "tail FCT / ideal", "fct_median_over_ideal": "median FCT / ideal",
    "fct_p99_over_ideal": "p99 FCT / ideal", "fct_min_over_ideal": "min FCT / ideal",
    "fct_median_us": "median FCT (µs)", "fct_p99_us": "p99 FCT (µs)",
    "fct_max_us": "max FCT (µs)", "fct_min_us": "min FCT (µs)",
    "goodput_gbps": "goodput (Gb/s)", "flow_goodput_mean_gbps": "mean flow goodput (Gb/s)",
    "retransmissions": "retransmissions", "nacks": "NACKs", "trims": "trims",
    "ecn_marks": "ECN marks", "drops": "drops", "pfc_pause_us": "PFC pause (µs)",
}
#: statistics per metric, in CSV column order
STATS = ("mean", "sd", "min", "max", "ci_low", "ci_high")


def is_seed(key: str) -> bool:
    """A swept key that only reseeds (its last part is ``seed``)."""
    return key.rsplit(".", 1)[-1].split("[", 1)[0] == "seed"


def metric_names() -> list[str]:
    """Every numeric summary field (results.json ``summary``), in schema order."""
    return [name for name, f in SUMMARY_SPEC.items()
            if isinstance(f.type, str) and f.type.rstrip("?") in ("int", "num")]


def check_metrics(names: Sequence[str]) -> list[str]:
    """``names`` if each is a numeric summary metric, else ValueError naming the allowed."""
    allowed = metric_names()
    for n in names:
        if n not in allowed:
            raise ValueError(f"--metric {n}: not a numeric summary metric; allowed: "
                             + ", ".join(allowed))
    return list(names)


def parameter_keys(keys: Sequence[str]) -> list[str]:
    """The swept keys that are not seeds."""
    return [k for k in keys if not is_seed(k)]


def aggregate(rows: Sequence[Mapping[str, Any]], keys: Sequence[str],
              level: float = LEVEL) -> list[dict[str, Any]]:
    """One group per combination of the non-seed swept values, in first-seen order:
    ``{"values": {key: value}, "points": [...], "seeds": {seed key: [...]}, "n",
    "failed", "metrics": {metric: describe(...)}}``."""
    params = parameter_keys(keys)
    seeds = [k for k in keys if is_seed(k)]
    groups: dict[str, dict[str, Any]] = {}
    members: dict[str, list[Mapping[str, Any]]] = {}
    for r in rows:
        values = {k: r.get(k) for k in params}
        gid = repr(sorted((k, repr(v)) for k, v in values.items()))
        if gid not in groups:
            groups[gid] = {"values": values, "points": [], "seeds": {s: [] for s in seeds}}
            members[gid] = []
        g = groups[gid]
        g["points"].append(r["point"])
        for s in seeds:
            g["seeds"][s].append(r.get(s))
        members[gid].append(r)
    out = []
    for gid, g in groups.items():
        ok = [r for r in members[gid] if not r.get("error")]
        g["n"] = len(ok)
        g["failed"] = len(members[gid]) - len(ok)
        metrics = {}
        for m in metric_names():
            vals = [r["summary"][m] for r in ok if _number(r["summary"].get(m))]
            metrics[m] = describe(vals, level)
        g["metrics"] = metrics
        out.append(g)
    return out


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def aggregate_columns(keys: Sequence[str]) -> list[str]:
    """The header of ``sweep_aggregate.csv``."""
    cols = [*parameter_keys(keys), "n", "failed", "points"]
    for m in metric_names():
        cols += [f"{m}.{s}" for s in STATS]
    return cols


def write_aggregate(groups: Sequence[Mapping[str, Any]], keys: Sequence[str],
                    out_dir: str | Path) -> Path:
    """``sweep_aggregate.csv``: one line per group (columns: :func:`aggregate_columns`)."""
    path = Path(out_dir) / "sweep_aggregate.csv"
    params = parameter_keys(keys)
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(aggregate_columns(keys))
        for g in groups:
            line: list[Any] = [g["values"][k] for k in params]
            line += [g["n"], g["failed"], " ".join(map(str, g["points"]))]
            for m in metric_names():
                d = g["metrics"][m]
                line += ["" if d[s] is None else d[s] for s in STATS]
            w.writerow(line)
    return path


def _fmt(v: float | None) -> str:
    if v is None:
        return "-"
    a = abs(v)
    if a >= 1000:
        return f"{v:,.0f}"
    if a >= 10:
        return f"{v:,.1f}"
    return f"{v:.3f}"


def aggregate_table(groups: Sequence[Mapping[str, Any]], keys: Sequence[str],
                    metrics: Sequence[str] = DEFAULT_METRICS, level: float = LEVEL
                    ) -> Table:
    """Mean ± half-width of the confidence interval per group and metric, with sd and
    min-max below."""
    seeds = [k for k in keys if is_seed(k)]
    over = ", ".join(seeds) if seeds else "no seed axis"
    table = Table(title=f"sweep over seeds ({over}): mean ± {level:.0%} CI (Student t)",
                  header_style="bold")
    params = parameter_keys(keys)
    for k in params:
        table.add_column(k.rsplit(".", 1)[-1], style="cyan", no_wrap=True)
    table.add_column("n", justify="right")
    for m in metrics:
        table.add_column(METRIC_LABELS.get(m, m), justify="right", no_wrap=True)
    for g in groups:
        cells = []
        for m in metrics:
            d = g["metrics"][m]
            if d["mean"] is None:
                cells.append("-")
                continue
            head = _fmt(d["mean"])
            if d["ci_high"] is not None:
                head += f" ± {_fmt(d['ci_high'] - d['mean'])}"
                cells.append(f"{head}\n[dim]sd {_fmt(d['sd'])}, "
                             f"{_fmt(d['min'])}-{_fmt(d['max'])}")
            else:
                cells.append(head)
        n = f"{g['n']}" + (f" [red]({g['failed']} failed)" if g["failed"] else "")
        table.add_row(*(escape(str(g["values"][k])) for k in params), n, *cells)
    return table
