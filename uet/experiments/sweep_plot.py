"""``sweep.png``: each chosen metric against the swept parameter, mean and 95% confidence
interval over seeds as error bars, one line per value of the other parameters.

The x axis is the first non-seed ``--sweep`` key: numeric values on a numeric axis (log
when they are all positive and span 100x or more), other values (EV selectors, profiles)
as categories. A sweep over seeds only shows each seed's value and the mean with its
interval as a band. Inputs are plain data: sweep rows and :func:`~uet.experiments.
aggregate.aggregate` groups.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from uet.experiments.aggregate import METRIC_LABELS, is_seed, parameter_keys
from uet.experiments.confidence import LEVEL

DPI = 110


def _numeric(values: Sequence[Any]) -> bool:
    return all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)


def _short(key: str) -> str:
    return key.rsplit(".", 1)[-1]


def plot_sweep(rows: Sequence[Mapping[str, Any]], groups: Sequence[Mapping[str, Any]],
               keys: Sequence[str], metrics: Sequence[str], path: str | Path,
               title: str = "", level: float = LEVEL) -> Path | None:
    """Write the plot; None when no metric has a value."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = [m for m in metrics if any(g["metrics"][m]["mean"] is not None for g in groups)]
    if not metrics:
        return None
    ncols = 1 if len(metrics) == 1 else 2
    nrows = math.ceil(len(metrics) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(6.4 * ncols, 4.0 * nrows), squeeze=False)
    params = parameter_keys(keys)
    for ax, m in zip(axes.flat, metrics, strict=False):
        if params:
            _by_parameter(ax, rows, groups, params, m)
        else:
            _by_seed(ax, rows, groups, keys, m, level)
        ax.set_ylabel(METRIC_LABELS.get(m, m))
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(metrics):]:
        ax.set_visible(False)
    first = axes.flat[0]
    if first.get_legend_handles_labels()[0]:
        first.legend(fontsize="small", loc="best" if params else "upper right")
    ns = sorted({g["n"] for g in groups})
    n_text = f"n = {ns[0]}" if len(ns) == 1 else f"n = {ns[0]}-{ns[-1]}"
    seeds = [k for k in keys if is_seed(k)]
    what = (f"mean and {level:.0%} CI over {', '.join(_short(s) for s in seeds)} ({n_text})"
            if seeds else "one run per point (no seed axis: no error bars)")
    fig.suptitle(f"{title}: {what}" if title else what)
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=DPI)
    plt.close(fig)
    return out


def _by_parameter(ax: Any, rows: Sequence[Mapping[str, Any]],
                  groups: Sequence[Mapping[str, Any]], params: Sequence[str],
                  metric: str) -> None:
    xkey, others = params[0], params[1:]
    xs_all = list(dict.fromkeys(g["values"][xkey] for g in groups))
    numeric = _numeric(xs_all)
    log = numeric and min(xs_all) > 0 and max(xs_all) / min(xs_all) >= 100
    lines: dict[tuple, list[Mapping[str, Any]]] = {}
    for g in groups:
        lines.setdefault(tuple(g["values"][k] for k in others), []).append(g)
    count = len(lines)
    markers = itertools.cycle("osD^vP*X")
    for j, (label, gs) in enumerate(lines.items()):
        pts = [(g["values"][xkey], g["metrics"][metric]) for g in gs]
        pts = [(x, d) for x, d in pts if d["mean"] is not None]
        if not pts:
            continue
        if numeric:  # dodged a little so that lines on top of each other stay visible
            pts.sort(key=lambda p: p[0])
            lo_x, hi_x = float(min(xs_all)), float(max(xs_all))
            step = (j - (count - 1) / 2) * 0.006
            xs = ([float(x) * 10 ** step for x, _ in pts] if log else
                  [float(x) + step * (hi_x - lo_x) for x, _ in pts])
        else:  # categories, dodged so that the error bars do not hide each other
            off = (j - (count - 1) / 2) * min(0.08, 0.5 / max(count, 1))
            xs = [xs_all.index(x) + off for x, _ in pts]
        ys = [d["mean"] for _, d in pts]
        lo = [d["mean"] - d["ci_low"] if d["ci_low"] is not None else 0.0 for _, d in pts]
        hi = [d["ci_high"] - d["mean"] if d["ci_high"] is not None else 0.0 for _, d in pts]
        name = ", ".join(f"{_short(k)}={v}" for k, v in zip(others, label, strict=True))
        bars = ax.errorbar(xs, ys, yerr=[lo, hi], marker=next(markers), capsize=4,
                           linewidth=1.4, markersize=5, label=name or None,
                           linestyle="-" if numeric else "none")
        # every seed's own value, faint, behind the mean
        members = {p for g in gs for p in g["points"]}
        where = dict(zip((x for x, _ in pts), xs, strict=True))
        raw = [(where[r[xkey]], r["summary"][metric]) for r in rows
               if r["point"] in members and not r.get("error") and r[xkey] in where
               and r["summary"].get(metric) is not None]
        if raw:
            ax.plot([x for x, _ in raw], [y for _, y in raw], ".", alpha=0.3,
                    color=bars[0].get_color(), markersize=4)
    if log:
        ax.set_xscale("log")
    if not numeric:
        ax.set_xticks(range(len(xs_all)), [str(x) for x in xs_all])
        ax.set_xlim(-0.5, len(xs_all) - 0.5)
    ax.set_xlabel(xkey)


def _by_seed(ax: Any, rows: Sequence[Mapping[str, Any]], groups: Sequence[Mapping[str, Any]],
             keys: Sequence[str], metric: str, level: float) -> None:
    skey = next(k for k in keys if is_seed(k))
    ok = [r for r in rows if not r.get("error") and r["summary"].get(metric) is not None]
    xs = [r[skey] for r in ok]
    ys = [r["summary"][metric] for r in ok]
    ax.plot(xs, ys, "o", color="tab:blue", label="each seed")
    d = groups[0]["metrics"][metric]
    if d["mean"] is not None and xs:
        ax.axhline(d["mean"], color="tab:orange", label="mean")
        text = f"mean {d['mean']:.4g}"
        if d["ci_low"] is not None:
            ax.axhspan(d["ci_low"], d["ci_high"], color="tab:orange", alpha=0.15,
                       label=f"{level:.0%} CI")
            text += f" ± {d['ci_high'] - d['mean']:.3g} (sd {d['sd']:.3g})"
        ax.text(0.02, 0.97, text, transform=ax.transAxes, va="top", fontsize="small")
    ax.set_xlabel(skey)
    if _numeric(xs):
        ax.set_xticks(xs)
