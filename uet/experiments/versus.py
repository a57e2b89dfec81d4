"""UET against the RoCEv2 baseline on the same fabric, workload and seed.

:func:`run_versus` runs one experiment file once per stack (``transport.stack`` set to
``uet`` then ``roce``; everything else, the seed included, unchanged), each into its own
directory, and returns both results; :func:`versus_table` puts the headline numbers side
by side, :func:`plot_versus` draws one figure (FCT / ideal CDF of both stacks, and their
tail, median and victim-flow FCT over ideal), and :func:`write_versus` saves
``versus.json`` (the numbers) and ``versus.png``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.table import Table

from uet.experiments.config import load_config

STACKS = ("uet", "roce")
LABELS = {"uet": "UET", "roce": "RoCEv2"}

#: (label, summary key, format, lower is better)
ROWS: tuple[tuple[str, str, str, bool], ...] = (
    ("FCT tail / ideal", "fct_tail_over_ideal", ".3f", True),
    ("FCT p99 / ideal", "fct_p99_over_ideal", ".3f", True),
    ("FCT median / ideal", "fct_median_over_ideal", ".3f", True),
    ("FCT tail (µs)", "fct_max_us", ",.1f", True),
    ("goodput (Gb/s)", "goodput_gbps", ",.1f", False),
    ("victim flow FCT (µs)", "victim_fct_max_us", ",.1f", True),
    ("victim flow FCT / ideal", "victim_fct_max_over_ideal", ".3f", True),
    ("PFC pause (µs)", "pfc_pause_us", ",.1f", True),
    ("PFC pause frames", "pfc_pause_frames", ",d", True),
    ("retransmissions", "retransmissions", ",d", True),
    ("NACKs / NAKs", "nacks", ",d", True),
    ("CNPs", "cnps", ",d", True),
    ("ECN marks", "ecn_marks", ",d", True),
    ("trims", "trims", ",d", True),
    ("drops", "drops", ",d", True),
    ("messages delivered", "messages_delivered", ",d", False),
    ("duplicates delivered", "duplicates_delivered", ",d", True),
)

RunFn = Callable[[dict[str, Any], Path], dict[str, Any]]


def stack_configs(path: str | Path | None, sets: Sequence[str] = (),
                  stacks: Sequence[str] = STACKS) -> dict[str, dict[str, Any]]:
    """The validated config of each stack (raises ConfigError for a bad file or key)."""
    return {s: load_config(path, [*sets, f"transport.stack={s}"]) for s in stacks}


def run_versus(configs: Mapping[str, dict[str, Any]], out_dir: str | Path,
               run: RunFn | None = None) -> dict[str, dict[str, Any]]:
    """Run each stack's config into ``out_dir/<stack>/``; returns results by stack."""
    if run is None:
        from uet.experiments.runner import run_experiment as run
    out = Path(out_dir)
    return {stack: run(cfg, out / stack) for stack, cfg in configs.items()}


def _fmt(v: Any, fmt: str) -> str:
    if v is None:
        return "-"
    if fmt.endswith("d"):
        return format(int(v), fmt)
    return format(float(v), fmt)


def comparison(results: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The side-by-side numbers as plain data (``versus.json``)."""
    stacks = list(results)
    first = results[stacks[0]]
    rows = []
    for label, key, _fmt_s, lower in ROWS:
        vals = {s: results[s]["summary"].get(key) for s in stacks}
        rows.append({"metric": label, "key": key, "lower_is_better": lower, **vals})
    return {"experiment": first["experiment"]["name"], "seed": first["experiment"]["seed"],
            "stacks": stacks, "rows": rows,
            "completed": {s: results[s]["run"]["completed"] for s in stacks}}


def versus_table(results: Mapping[str, Mapping[str, Any]]) -> Table:
    """One rich table: a column per stack, and RoCE / UET where both are numbers."""
    stacks = list(results)
    first = results[stacks[0]]
    title = f"{first['experiment']['name']}: " + " vs ".join(LABELS.get(s, s) for s in stacks)
    table = Table(title=title + f" (seed {first['experiment']['seed']})", header_style="bold")
    table.add_column("metric")
    for s in stacks:
        table.add_column(LABELS.get(s, s), justify="right")
    ratio = len(stacks) == 2
    if ratio:
        table.add_column(f"{LABELS.get(stacks[1], stacks[1])} / {LABELS.get(stacks[0], stacks[0])}",
                         justify="right", style="dim")
    for label, key, fmt, lower in ROWS:
        vals = [results[s]["summary"].get(key) for s in stacks]
        if all(v is None for v in vals):
            continue
        cells = [_fmt(v, fmt) for v in vals]
        if ratio:
            a, b = vals
            if isinstance(a, int | float) and isinstance(b, int | float) and a:
                r = b / a
                worse = (r > 1.0) if lower else (r < 1.0)
                cells.append(f"[{'red' if worse and abs(r - 1) > 0.05 else 'green'}]{r:.2f}x")
            else:
                cells.append("")
        table.add_row(label, *cells)
    walls = [f"{results[s]['run']['wall_time_s']:.1f} s" for s in stacks]
    table.add_row("[dim]wall time", *[f"[dim]{w}" for w in walls], *([""] if ratio else []))
    return table


def plot_versus(results: Mapping[str, Mapping[str, Any]], path: str | Path) -> Path:
    """FCT / ideal CDF of every stack (left) and tail / median / victim FCT over ideal
    side by side (right)."""
    from uet.experiments.plots import _cdf, _save, plt

    stacks = list(results)
    colors = {"uet": "tab:blue", "roce": "tab:red"}
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    for s in stacks:
        ratios = [f["fct_over_ideal"] for f in results[s]["flows"]
                  if f.get("fct_over_ideal") is not None]
        if ratios:
            xs, ys = _cdf(ratios)
            ax1.step(xs, ys, where="post", color=colors.get(s), linewidth=1.6,
                     label=f"{LABELS.get(s, s)} ({len(ratios)} flows)")
    ax1.axvline(1.0, color="tab:gray", linestyle="--", linewidth=1, label="ideal")
    ax1.set_xlabel("FCT / ideal")
    ax1.set_ylabel("fraction of flows")
    ax1.set_ylim(0, 1.02)
    ax1.grid(alpha=0.3)
    ax1.legend(fontsize=8, loc="lower right")
    metrics = [("tail", "fct_tail_over_ideal"), ("p99", "fct_p99_over_ideal"),
               ("median", "fct_median_over_ideal"), ("victim", "victim_fct_max_over_ideal")]
    metrics = [m for m in metrics if any(results[s]["summary"].get(m[1]) is not None
                                         for s in stacks)]
    width = 0.8 / max(1, len(stacks))
    for i, s in enumerate(stacks):
        vals = [results[s]["summary"].get(k) or 0.0 for _n, k in metrics]
        xs = [j + (i - (len(stacks) - 1) / 2) * width for j in range(len(metrics))]
        bars = ax2.bar(xs, vals, width, color=colors.get(s), label=LABELS.get(s, s))
        for b, v in zip(bars, vals, strict=True):
            ax2.annotate(f"{v:.2f}", (b.get_x() + b.get_width() / 2, v), ha="center",
                         va="bottom", fontsize=7)
    ax2.axhline(1.0, color="tab:gray", linestyle="--", linewidth=1)
    ax2.set_xticks(range(len(metrics)), [n for n, _k in metrics])
    ax2.set_ylabel("FCT / ideal")
    ax2.grid(alpha=0.3, axis="y")
    ax2.legend(fontsize=8)
    name = results[stacks[0]]["experiment"]["name"]
    fig.suptitle(f"{name}: " + " vs ".join(LABELS.get(s, s) for s in stacks), fontsize=11)
    return _save(fig, Path(path))


def write_versus(results: Mapping[str, Mapping[str, Any]], out_dir: str | Path,
                 plot: bool = True) -> dict[str, str]:
    """``versus.json`` (and ``versus.png``) in ``out_dir``; returns the file names."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "versus.json").write_text(json.dumps(comparison(results), indent=1) + "\n",
                                     encoding="utf-8")
    files = {"json": "versus.json"}
    if plot:
        plot_versus(results, out / "versus.png")
        files["plot"] = "versus.png"
    return files
