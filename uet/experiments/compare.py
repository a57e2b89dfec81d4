"""``uet compare RUN_DIR...``: runs side by side.

Each argument is a run directory (``results.json``) or a sweep directory over seeds only
(``sweep.json`` whose points differ only in seeds: it stands for the mean of its points,
shown with its 95% confidence interval, and its flows are pooled). The first one is the
reference: every metric of the others is also given as a ratio to it. The configuration
keys that differ between the runs are listed first (that is usually what is being
compared), then the summary metrics; ``compare.png`` overlays the per-flow FCT CDFs (µs
and FCT/ideal) of every run.

Runs are refused (:class:`CompareError`, one line naming both) when they did not carry
the same work: a different number of flows or different message sizes (FCTs of different
workloads do not compare), or a results document of another schema. The same directory
twice is refused too.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.markup import escape
from rich.table import Table

from uet.errors import LocalError
from uet.experiments.aggregate import METRIC_LABELS, aggregate, is_seed, parameter_keys
from uet.experiments.confidence import describe

#: metrics in the comparison table unless --metric says otherwise
COMPARE_METRICS = (
    "messages_delivered", "fct_min_us", "fct_median_us", "fct_p99_us", "fct_max_us",
    "fct_median_over_ideal", "fct_p99_over_ideal", "fct_tail_over_ideal", "goodput_gbps",
    "flow_goodput_mean_gbps", "retransmissions", "nacks", "trims", "ecn_marks", "drops",
    "pfc_pause_us", "pdcs_opened", "wire_bytes_sent",
)
#: config keys never listed as differences (provenance and display only)
IGNORED_KEYS = ("source.", "output.progress")


class CompareError(LocalError, ValueError):
    """Runs that cannot be compared, or a directory that is not a run."""


@dataclass
class Run:
    """One side of the comparison: a label, its directory and its results documents (one
    for a run, one per completed point for a sweep over seeds)."""

    label: str
    path: Path
    docs: list[dict[str, Any]]
    sweep_keys: tuple[str, ...] = ()

    @property
    def config(self) -> dict[str, Any]:
        return self.docs[0]["experiment"]["config"]

    def flows(self) -> list[dict[str, Any]]:
        return [f for d in self.docs for f in d["flows"]]

    def metric(self, name: str) -> dict[str, Any]:
        vals = [d["summary"].get(name) for d in self.docs]
        return describe([v for v in vals if isinstance(v, int | float)
                         and not isinstance(v, bool)])


def load_run(path: str | Path) -> Run:
    """A run or seed-sweep directory (see the module docstring)."""
    from uet.experiments.results import ResultsError, read_results
    from uet.experiments.sweep import read_sweep

    p = Path(path)
    if not p.is_dir():
        raise CompareError(f"{p}: no such directory")
    if (p / "results.json").is_file():
        try:
            return Run(p.name or str(p), p, [read_results(p / "results.json")])
        except (ValueError, ResultsError) as exc:
            raise CompareError(f"{p / 'results.json'}: not a valid results document "
                               f"({str(exc)[:200]})") from None
    if not (p / "sweep.json").is_file():
        raise CompareError(f"{p}: not a run directory (no results.json) nor a sweep "
                           f"(no sweep.json)")
    try:
        doc = read_sweep(p)
    except ValueError as exc:
        raise CompareError(str(exc)) from None
    keys = doc["keys"]
    params = parameter_keys(keys)
    groups = aggregate(doc["rows"], keys)
    if len(groups) > 1:
        swept = ", ".join(params)
        raise CompareError(f"{p}: a sweep of {len(doc['rows'])} points in {len(groups)} "
                           f"groups (over {swept}); compare its point directories, or a "
                           f"sweep over seeds only")
    docs = []
    for row in doc["rows"]:
        rdir = p / str(row.get("dir"))
        if row.get("error") or not (rdir / "results.json").is_file():
            continue
        try:
            docs.append(read_results(rdir / "results.json"))
        except (ValueError, ResultsError):
            continue
    if not docs:
        raise CompareError(f"{p}: a sweep with no completed point")
    return Run(p.name or str(p), p, docs, tuple(k for k in keys if is_seed(k)))


def _workload(run: Run) -> tuple[int, tuple[int, ...]]:
    flows = run.docs[0]["flows"]
    return len(flows), tuple(sorted(f["size"] for f in flows))


def _sizes_text(sizes: Sequence[int]) -> str:
    distinct = sorted(set(sizes))
    if len(distinct) == 1:
        return f"{distinct[0]:,} B each"
    return f"{min(distinct):,}-{max(distinct):,} B, {sum(sizes):,} B in all"


def check_compatible(runs: Sequence[Run]) -> None:
    """Raise :class:`CompareError` with the reason if the runs cannot be compared."""
    if len(runs) < 2:
        raise CompareError("uet compare needs at least two run directories")
    seen: dict[Path, str] = {}
    for r in runs:
        key = r.path.resolve()
        if key in seen:
            raise CompareError(f"{r.path} is given twice")
        seen[key] = r.label
    ref = runs[0]
    n0, s0 = _workload(ref)
    for r in runs[1:]:
        for d in r.docs:
            if d.get("schema") != ref.docs[0].get("schema"):
                raise CompareError(f"{r.label} has results schema {d.get('schema')}, "
                                   f"{ref.label} {ref.docs[0].get('schema')}")
        n, s = _workload(r)
        if (n, s) != (n0, s0):
            raise CompareError(
                f"runs are not comparable: {ref.label} has {n0} flows ({_sizes_text(s0)}), "
                f"{r.label} has {n} flows ({_sizes_text(s)}): a different workload "
                f"(compare runs of the same traffic)")


def _flat(cfg: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}

    def walk(prefix: str, node: Any) -> None:
        if isinstance(node, Mapping):
            for k, v in node.items():
                walk(f"{prefix}.{k}" if prefix else str(k), v)
        elif isinstance(node, list) and node and all(isinstance(x, Mapping) for x in node):
            for i, x in enumerate(node):
                walk(f"{prefix}[{i}]", x)
        else:
            out[prefix] = node

    walk("", cfg)
    return out


def config_differences(runs: Sequence[Run]) -> list[tuple[str, list[Any]]]:
    """``(key, [value per run])`` for every config key whose value differs (a sweep over
    seeds shows its seeds as a list)."""
    flats = [_flat(r.config) for r in runs]
    keys = list(dict.fromkeys(k for f in flats for k in f))
    out = []
    for k in keys:
        if any(k.startswith(p) if p.endswith(".") else k == p for p in IGNORED_KEYS):
            continue
        vals = []
        for r, f in zip(runs, flats, strict=True):
            if r.sweep_keys and k in r.sweep_keys:
                vals.append([_flat(d["experiment"]["config"]).get(k) for d in r.docs])
            else:
                vals.append(f.get(k))
        if any(json.dumps(v, default=str) != json.dumps(vals[0], default=str)
               for v in vals[1:]):
            out.append((k, vals))
    return out


def _ratio(v: float | None, ref: float | None) -> float | None:
    if v is None or ref is None:
        return None
    if ref == 0:
        return 1.0 if v == 0 else None
    return v / ref


def compare_doc(runs: Sequence[Run], metrics: Sequence[str] = COMPARE_METRICS
                ) -> dict[str, Any]:
    """The comparison as plain data (``compare.json``, ``uet compare --json``)."""
    out: dict[str, Any] = {
        "runs": [{"label": r.label, "dir": str(r.path), "points": len(r.docs),
                  "name": r.docs[0]["experiment"]["name"],
                  "seeds": [d["experiment"]["seed"] for d in r.docs]} for r in runs],
        "config_differences": [{"key": k, "values": v} for k, v in config_differences(runs)],
        "metrics": {},
    }
    for m in metrics:
        stats = [r.metric(m) for r in runs]
        ref = stats[0]["mean"]
        out["metrics"][m] = {"values": [s["mean"] for s in stats],
                             "ci": [[s["ci_low"], s["ci_high"]] for s in stats],
                             "ratio_to_first": [_ratio(s["mean"], ref) for s in stats]}
    return out


def _fmt(v: float | None) -> str:
    if v is None:
        return "-"
    if isinstance(v, int) or v.is_integer():
        return f"{int(v):,}"
    a = abs(v)
    return f"{v:,.0f}" if a >= 10_000 else f"{v:,.1f}" if a >= 10 else f"{v:.3f}"


def compare_table(runs: Sequence[Run], doc: Mapping[str, Any]) -> Table:
    """Metrics down, runs across; each run after the first with its ratio to the first."""
    table = Table(title=f"compare: {len(runs)} runs (ratios to {runs[0].label})",
                  header_style="bold")
    table.add_column("", no_wrap=True)
    for i, r in enumerate(runs):
        head = escape(r.label) + (f"\n[dim]mean of {len(r.docs)}" if len(r.docs) > 1 else "")
        table.add_column(head, justify="right", no_wrap=True)
        if i:
            table.add_column("ratio", justify="right", style="magenta", no_wrap=True)
    diffs = doc["config_differences"]
    if diffs:
        table.add_row("[bold cyan]config", *[""] * (2 * len(runs) - 1))
        for d in diffs[:12]:
            cells = []
            for i, v in enumerate(d["values"]):
                cells.append(escape(_short(v)))
                if i:
                    cells.append("")
            table.add_row(escape(d["key"]), *cells)
        if len(diffs) > 12:
            table.add_row(f"[dim]... {len(diffs) - 12} more (compare.json)",
                          *[""] * (2 * len(runs) - 1))
    table.add_row("[bold cyan]metrics", *[""] * (2 * len(runs) - 1))
    for m, d in doc["metrics"].items():
        cells = []
        for i, (v, ci) in enumerate(zip(d["values"], d["ci"], strict=True)):
            text = _fmt(v)
            if ci[1] is not None and v is not None:
                text += f" ± {_fmt(ci[1] - v)}"
            cells.append(text)
            if i:
                r = d["ratio_to_first"][i]
                cells.append("-" if r is None else f"{r:.3f}x")
        table.add_row(METRIC_LABELS.get(m, m), *cells)
    return table


def _short(v: Any) -> str:
    text = json.dumps(v, default=str) if not isinstance(v, str) else v
    return text if len(text) <= 40 else text[:37] + "..."


def plot_compare(runs: Sequence[Run], path: str | Path) -> Path | None:
    """``compare.png``: CDFs of FCT (µs) and of FCT / ideal, one line per run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    drawn = False
    for r in runs:
        done = [f for f in r.flows() if f.get("fct_ps") is not None]
        if not done:
            continue
        drawn = True
        label = r.label + (f" ({len(r.docs)} seeds pooled)" if len(r.docs) > 1 else "")
        xs = sorted(f["fct_ps"] / 1e6 for f in done)
        ys = [(i + 1) / len(xs) for i in range(len(xs))]
        line = ax1.step(xs, ys, where="post", label=label)[0]
        rs = sorted(f["fct_over_ideal"] for f in done if f.get("fct_over_ideal") is not None)
        if rs:
            ax2.step(rs, [(i + 1) / len(rs) for i in range(len(rs))], where="post",
                     color=line.get_color(), label=label)
    if not drawn:
        plt.close(fig)
        return None
    ax1.set_xlabel("flow completion time (µs)")
    ax2.set_xlabel("FCT / ideal")
    ax2.axvline(1.0, color="tab:gray", linestyle="--", linewidth=1)
    for ax in (ax1, ax2):
        ax.set_ylabel("fraction of flows")
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
    ax1.legend(fontsize="small", loc="lower right")
    fig.suptitle("per-flow FCT: " + " vs ".join(r.label for r in runs))
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
