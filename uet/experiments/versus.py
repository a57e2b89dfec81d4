"""UET against the RoCEv2 baseline on the same fabric, workload and seed.

A comparison is a list of *variants*, each a label and ``--set`` style assignments applied
to the same experiment file: by default ``uet: transport.stack=uet`` and ``roce:
transport.stack=roce``, or the file's ``versus.variants`` (e.g. RoCE with 1 and with 8
QPs per flow, or go-back-N and IRN). Everything else, the seed included, is the same.
:func:`run_versus` runs each variant into ``DIR/<label>/``, :func:`versus_table` puts the
headline numbers side by side, :func:`plot_versus` draws one figure (the FCT / ideal CDF
of every variant, and their tail, p99, median and victim-flow FCT over ideal), and
:func:`write_versus` saves ``versus.json`` (the numbers) and ``versus.png``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.table import Table

from uet.experiments.config import ConfigError, load_config, parse_assignment

STACKS = ("uet", "roce")
LABELS = {"uet": "UET", "roce": "RoCEv2"}
COLORS = ("tab:blue", "tab:red", "tab:orange", "tab:green", "tab:purple", "tab:brown")

#: (label, summary key, format, lower is better)
ROWS: tuple[tuple[str, str, str, bool], ...] = (
    ("FCT tail / ideal", "fct_tail_over_ideal", ".3f", True),
    ("FCT p99 / ideal", "fct_p99_over_ideal", ".3f", True),
    ("FCT median / ideal", "fct_median_over_ideal", ".3f", True),
    ("FCT tail (µs)", "fct_max_us", ",.1f", True),
    ("last delivery (µs)", "last_delivery_us", ",.1f", True),
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
_LABEL = re.compile(r"[A-Za-z0-9_.+-]+")


def parse_variant(text: str, where: str = "versus.variants") -> tuple[str, list[str]]:
    """``"roce-8qp: transport.stack=roce; transport.roce.qps_per_flow=8"`` ->
    ``("roce-8qp", ["transport.stack=roce", "transport.roce.qps_per_flow=8"])``."""
    label, sep, rest = text.partition(":")
    label = label.strip()
    if not sep or not _LABEL.fullmatch(label):
        raise ConfigError(where, f"bad variant {text!r}",
                          allowed='"label: key=value; key=value" with a label of letters, '
                          "digits and _ . + -")
    sets = [a.strip() for a in rest.split(";") if a.strip()]
    for a in sets:
        parse_assignment(a)  # raises ConfigError naming the bad assignment
    return label, sets


def variant_configs(path: str | Path | None, sets: Sequence[str] = (),
                    variants: Sequence[str] | None = None) -> dict[str, dict[str, Any]]:
    """The validated config of every variant (``variants`` None: the file's
    ``versus.variants``). Raises :class:`ConfigError` for a bad file, key or variant."""
    if variants is None:
        variants = load_config(path, sets)["versus"]["variants"]
    out: dict[str, dict[str, Any]] = {}
    for i, text in enumerate(variants):
        label, vsets = parse_variant(text, f"versus.variants[{i}]")
        if label in out:
            raise ConfigError(f"versus.variants[{i}]", f"label {label!r} used twice",
                              allowed="distinct labels")
        out[label] = load_config(path, [*sets, *vsets])
    if not out:
        raise ConfigError("versus.variants", "no variants", allowed="at least one")
    return out


def stack_configs(path: str | Path | None, sets: Sequence[str] = (),
                  stacks: Sequence[str] = STACKS) -> dict[str, dict[str, Any]]:
    """One variant per stack, labelled by the stack's name."""
    return variant_configs(path, sets, [f"{s}: transport.stack={s}" for s in stacks])


def run_versus(configs: Mapping[str, dict[str, Any]], out_dir: str | Path,
               run: RunFn | None = None) -> dict[str, dict[str, Any]]:
    """Run each variant's config into ``out_dir/<label>/``; returns results by label."""
    if run is None:
        from uet.experiments.runner import run_experiment as run
    out = Path(out_dir)
    return {label: run(cfg, out / label) for label, cfg in configs.items()}


def _value(res: Mapping[str, Any], key: str) -> Any:
    """A summary number, or ``last_delivery_us`` (the run's last delivery: a collective's
    completion time)."""
    if key == "last_delivery_us":
        last = res["run"].get("last_delivery_ps")
        return None if last is None else last / 1e6
    return res["summary"].get(key)


def _name(label: str) -> str:
    return LABELS.get(label, label)


def _fmt(v: Any, fmt: str) -> str:
    if v is None:
        return "-"
    if fmt.endswith("d"):
        return format(int(v), fmt)
    return format(float(v), fmt)


def comparison(results: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The side-by-side numbers as plain data (``versus.json``)."""
    labels = list(results)
    first = results[labels[0]]
    rows = []
    for label, key, _f, lower in ROWS:
        rows.append({"metric": label, "key": key, "lower_is_better": lower,
                     **{v: _value(results[v], key) for v in labels}})
    return {"experiment": first["experiment"]["name"], "seed": first["experiment"]["seed"],
            "variants": {v: {"stack": results[v]["experiment"]["config"]["transport"]
                             .get("stack", "uet"),
                             "overrides": results[v]["experiment"]["config"]["source"]
                             ["overrides"]} for v in labels},
            "rows": rows, "completed": {v: results[v]["run"]["completed"] for v in labels}}


def versus_table(results: Mapping[str, Mapping[str, Any]]) -> Table:
    """One rich table: a column per variant, then each other variant over the first."""
    labels = list(results)
    first = results[labels[0]]
    title = f"{first['experiment']['name']}: " + " vs ".join(_name(v) for v in labels)
    table = Table(title=title + f" (seed {first['experiment']['seed']})", header_style="bold")
    table.add_column("metric")
    for v in labels:
        table.add_column(_name(v), justify="right")
    for v in labels[1:]:
        table.add_column(f"{_name(v)} / {_name(labels[0])}", justify="right", style="dim")
    for label, key, fmt, lower in ROWS:
        vals = [_value(results[v], key) for v in labels]
        if all(x is None for x in vals):
            continue
        cells = [_fmt(x, fmt) for x in vals]
        a = vals[0]
        for b in vals[1:]:
            if isinstance(a, int | float) and isinstance(b, int | float) and a:
                r = b / a
                worse = r > 1.0 if lower else r < 1.0
                colour = "red" if worse and abs(r - 1) > 0.05 else "green"
                cells.append(f"[{colour}]{r:.2f}x")
            else:
                cells.append("")
        table.add_row(label, *cells)
    table.add_row("[dim]wall time", *[f"[dim]{results[v]['run']['wall_time_s']:.1f} s"
                                      for v in labels], *[""] * (len(labels) - 1))
    return table


def plot_versus(results: Mapping[str, Mapping[str, Any]], path: str | Path) -> Path:
    """The FCT / ideal CDF of every variant (left) and their tail, p99, median and
    victim FCT over ideal side by side (right)."""
    from uet.experiments.plots import _cdf, _save, plt

    labels = list(results)
    colors = {v: COLORS[i % len(COLORS)] for i, v in enumerate(labels)}
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    for v in labels:
        ratios = [f["fct_over_ideal"] for f in results[v]["flows"]
                  if f.get("fct_over_ideal") is not None]
        if ratios:
            xs, ys = _cdf(ratios)
            ax1.step(xs, ys, where="post", color=colors[v], linewidth=1.6,
                     label=f"{_name(v)} ({len(ratios)} flows)")
    ax1.axvline(1.0, color="tab:gray", linestyle="--", linewidth=1, label="ideal")
    ax1.set_xlabel("FCT / ideal")
    ax1.set_ylabel("fraction of flows")
    ax1.set_ylim(0, 1.02)
    ax1.grid(alpha=0.3)
    ax1.legend(fontsize=8, loc="lower right")
    metrics = [("tail", "fct_tail_over_ideal"), ("p99", "fct_p99_over_ideal"),
               ("median", "fct_median_over_ideal"), ("victim", "victim_fct_max_over_ideal")]
    metrics = [m for m in metrics if any(results[v]["summary"].get(m[1]) is not None
                                         for v in labels)]
    width = 0.8 / max(1, len(labels))
    for i, v in enumerate(labels):
        vals = [results[v]["summary"].get(k) or 0.0 for _n, k in metrics]
        xs = [j + (i - (len(labels) - 1) / 2) * width for j in range(len(metrics))]
        bars = ax2.bar(xs, vals, width, color=colors[v], label=_name(v))
        for bar, val in zip(bars, vals, strict=True):
            ax2.annotate(f"{val:.2f}", (bar.get_x() + bar.get_width() / 2, val), ha="center",
                         va="bottom", fontsize=7)
    ax2.axhline(1.0, color="tab:gray", linestyle="--", linewidth=1)
    ax2.set_xticks(range(len(metrics)), [n for n, _k in metrics])
    ax2.set_ylabel("FCT / ideal")
    ax2.grid(alpha=0.3, axis="y")
    ax2.legend(fontsize=8)
    name = results[labels[0]]["experiment"]["name"]
    fig.suptitle(f"{name}: " + " vs ".join(_name(v) for v in labels), fontsize=11)
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
