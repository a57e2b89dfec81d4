"""PNG plots of a run (matplotlib, Agg backend): FCT CDF, link utilisation, queue
occupancy on the busiest ports, congestion windows of a few flows.

Inputs are plain data: the results document (:mod:`uet.experiments.results`) and the time
series (:mod:`uet.experiments.timeseries`). Axes carry units: µs, Gb/s, KiB.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from uet.experiments.timeseries import (  # noqa: E402
    flow_label,
    mean_utilisation,
    thin,
    utilisation,
)

PS_PER_US = 1_000_000
KIB = 1024
DPI = 110
#: a full data frame (4096 B payload + 98 B headers), for utilisation windows
FRAME_BYTES = 4194


def _cdf(values: Sequence[float]) -> tuple[list[float], list[float]]:
    xs = sorted(values)
    n = len(xs)
    return xs, [(i + 1) / n for i in range(n)]


def _save(fig: Any, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def plot_fct_cdf(rows: Sequence[Mapping[str, Any]], path: str | Path,
                 title: str = "") -> Path | None:
    """CDF of FCT (µs) and of FCT / ideal over completed flows."""
    done = [r for r in rows if r.get("fct_ps") is not None]
    if not done:
        return None
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    xs, ys = _cdf([r["fct_ps"] / PS_PER_US for r in done])
    ax1.step(xs, ys, where="post", color="tab:blue", label="FCT")
    ideals = [r["ideal_ps"] / PS_PER_US for r in done if r.get("ideal_ps")]
    if ideals:
        ix, iy = _cdf(ideals)
        ax1.step(ix, iy, where="post", color="tab:gray", linestyle="--", label="ideal")
    ax1.set_xlabel("flow completion time (µs)")
    ax1.set_ylabel("fraction of flows")
    ax1.set_ylim(0, 1.02)
    ax1.grid(alpha=0.3)
    ax1.legend(loc="lower right")
    ratios = [r["fct_over_ideal"] for r in done if r.get("fct_over_ideal") is not None]
    if ratios:
        rx, ry = _cdf(ratios)
        ax2.step(rx, ry, where="post", color="tab:orange")
        ax2.axvline(1.0, color="tab:gray", linestyle="--", linewidth=1)
    ax2.set_xlabel("FCT / ideal")
    ax2.set_ylabel("fraction of flows")
    ax2.set_ylim(0, 1.02)
    ax2.grid(alpha=0.3)
    fig.suptitle(f"{title}: flow completion times ({len(done)} of {len(rows)} flows done)"
                 if title else f"Flow completion times ({len(done)} of {len(rows)} done)")
    return _save(fig, Path(path))


def plot_link_utilisation(series: Mapping[str, Any], path: str | Path, *, top: int = 32,
                          lines: int = 6, title: str = "") -> Path | None:
    """Mean utilisation of the busiest link directions (bars, Gb/s) and the busiest ones'
    utilisation over time."""
    tx = series.get("link_tx_bytes") or {}
    rates = series.get("link_rate_bps") or {}
    means = {name: mean_utilisation(pts) for name, pts in tx.items()}
    busy = sorted((n for n in means if means[n] > 0), key=lambda n: (-means[n], n))
    if not busy:
        return None
    shown = busy[:top]
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(11, 8),
                                   gridspec_kw={"height_ratios": [1.1, 1]})
    ax1.bar(range(len(shown)), [means[n] for n in shown], color="tab:blue")
    ax1.set_xticks(range(len(shown)))
    ax1.set_xticklabels(shown, rotation=70, ha="right", fontsize=7)
    nominal = {rates[n] for n in shown if n in rates}
    for r in sorted(nominal):
        ax1.axhline(r / 1e9, color="tab:red", linestyle="--", linewidth=1,
                    label=f"link rate {r / 1e9:g} Gb/s")
    if nominal:
        ax1.legend(loc="upper right", fontsize=8)
    ax1.set_ylabel("mean utilisation (Gb/s)")
    ax1.set_title(f"busiest {len(shown)} of {len(tx)} link directions (mean over the run)")
    ax1.grid(axis="y", alpha=0.3)
    # windows of at least ~20 full frames at the link rate (and at most 1/20 of the run),
    # so that the number of frames per window does not show as ripple
    span = max(pts[-1][0] - pts[0][0] for pts in tx.values() if pts)
    rate = max((rates.get(n, 0) for n in busy[:lines]), default=0) or 100e9
    window = min(20 * FRAME_BYTES * 8 / rate * 1e12, span / 20)
    for name in busy[:lines]:
        t, g = utilisation(thin(tx[name], window))
        ax2.plot(t, g, label=name, linewidth=1.2)
    ax2.set_xlabel("virtual time (µs)")
    ax2.set_ylabel("utilisation (Gb/s)")
    if nominal:  # headroom above the link rate for the legend
        ax2.set_ylim(0, max(nominal) / 1e9 * 1.35)
    else:
        ax2.set_ylim(bottom=0)
    ax2.grid(alpha=0.3)
    ax2.legend(fontsize=7, loc="upper right", ncol=3)
    ax2.set_title(f"{min(lines, len(busy))} busiest link directions over time")
    fig.suptitle(f"{title}: link utilisation" if title else "Link utilisation")
    return _save(fig, Path(path))


def plot_queues(series: Mapping[str, Any], path: str | Path, *, top: int = 4,
                limit_bytes: int | None = None, ecn: tuple[int, int] | None = None,
                title: str = "") -> Path | None:
    """Queue occupancy (KiB) over time on the ``top`` ports with the highest peak."""
    q = series.get("queue_bytes") or {}
    peaks = {n: max((v for _, v in pts), default=0) for n, pts in q.items()}
    busiest = sorted((n for n in peaks if peaks[n] > 0), key=lambda n: (-peaks[n], n))[:top]
    if not busiest:
        return None
    fig, ax = plt.subplots(figsize=(10, 4.5))
    for name in busiest:
        pts = q[name]
        ax.step([t / PS_PER_US for t, _ in pts], [v / KIB for _, v in pts], where="post",
                label=f"{name} (peak {peaks[name] / KIB:.0f} KiB)", linewidth=1.2)
    if limit_bytes:
        ax.axhline(limit_bytes / KIB, color="tab:red", linestyle="--", linewidth=1,
                   label=f"queue limit {limit_bytes / KIB:.0f} KiB")
    if ecn:
        for v, label, style in zip(ecn, ("ECN kmin", "ECN kmax"), (":", "-."), strict=True):
            ax.axhline(v / KIB, color="tab:gray", linestyle=style, linewidth=1,
                       label=f"{label} {v / KIB:.0f} KiB")
    ax.set_xlabel("virtual time (µs)")
    ax.set_ylabel("queue occupancy (KiB)")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper right")
    ax.set_title(f"{title}: queues of the {len(busiest)} busiest ports" if title
                 else f"Queues of the {len(busiest)} busiest ports")
    return _save(fig, Path(path))


def plot_cwnd(series: Mapping[str, Any], path: str | Path, *, flows: int = 4,
              bdp_bytes: int | None = None, title: str = "",
              prefer: Sequence[str] = (), which: str = "") -> Path | None:
    """Congestion window (KiB) over time of ``flows`` flows: those named in ``prefer`` that
    have a series (in that order), else the first ones by name; ``which`` says how they
    were chosen (for the title)."""
    cw = series.get("cwnd_bytes") or {}
    names = [n for n in prefer if cw.get(n)][:flows]
    if not names:
        names = sorted((n for n in cw if cw[n]), key=_natural)[:flows]
        which = ""
    if not names:
        return None
    fig, ax = plt.subplots(figsize=(10, 4.5))
    for name in names:
        pts = cw[name]
        ax.step([t / PS_PER_US for t, _ in pts], [v / KIB for _, v in pts], where="post",
                label=name, linewidth=1.2)
    if bdp_bytes:
        ax.axhline(bdp_bytes / KIB, color="tab:gray", linestyle="--", linewidth=1,
                   label=f"BDP {bdp_bytes / KIB:.0f} KiB")
    ax.set_xlabel("virtual time (µs)")
    ax.set_ylabel("congestion window (KiB)")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper right")
    what = f"congestion window of {len(names)} {which + ' ' if which else ''}flows"
    ax.set_title(f"{title}: {what}" if title else what[0].upper() + what[1:])
    return _save(fig, Path(path))


def _natural(name: str) -> tuple:
    import re

    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name))


def write_plots(results: Mapping[str, Any], series: Mapping[str, Any] | None,
                out_dir: str | Path) -> list[str]:
    """Every plot there is data for; returns the file names written (relative)."""
    from uet.experiments.ideal import TopologyModel

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cfg = results["experiment"]["config"]
    title = results["experiment"]["name"]
    topo = cfg["topology"]
    opts = cfg["output"]
    written = [plot_fct_cdf(results["flows"], out / "fct_cdf.png", title)]
    if series:
        written.append(plot_link_utilisation(series, out / "link_utilisation.png",
                                             title=title))
        ecn = (topo["ecn_kmin"], topo["ecn_kmax"]) if topo["ecn"] else None
        written.append(plot_queues(series, out / "queues.png", top=opts["plot_ports"],
                                   limit_bytes=topo["queue_bytes"], ecn=ecn, title=title))
        bdp = TopologyModel.from_config(topo).bdp_bytes()
        # the slowest flows (largest FCT / ideal; unfinished ones first) are the story
        rows = sorted(results["flows"], key=lambda r: (
            r.get("fct_over_ideal") is not None, -(r.get("fct_over_ideal") or 0), r["id"]))
        prefer = [flow_label(r["id"], r["src"], r["dst"]) for r in rows]
        written.append(plot_cwnd(series, out / "cwnd.png", flows=opts["plot_flows"],
                                 bdp_bytes=bdp, title=title, prefer=prefer,
                                 which="slowest"))
    return [p.name for p in written if p is not None]
