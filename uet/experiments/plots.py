"""PNG plots of a run (matplotlib, Agg backend): FCT CDF, link utilisation (by share of
each link's own rate), queue occupancy on the busiest ports, congestion windows with the
signals that moved them, and the load over parallel paths and EVs (spraying).

Inputs are plain data: the results document (:mod:`uet.experiments.results`) and the time
series (:mod:`uet.experiments.timeseries`). Axes carry units: µs, Gb/s, KiB.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.collections import PolyCollection  # noqa: E402

from uet.experiments.schema import PLOT_KINDS  # noqa: E402
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


#: rcParams of drawing: FreeType's hinting of every glyph of every text (laid out twice a
#: text: measured, then drawn) was a fifth of a figure's draw; at DPI, unhinted glyphs
#: look the same
DRAW_RC = {"text.hinting": "no_hinting"}


def _save(fig: Any, path: Path, *, tight: bool = True) -> Path:
    """Write ``fig`` as a PNG and close it; ``tight``: lay it out with tight_layout first
    (else it was placed with :func:`_place`)."""
    with matplotlib.rc_context(DRAW_RC):
        if tight:
            fig.tight_layout()
            # tight_layout leaves a placeholder layout engine, for which savefig draws the
            # whole figure once more before drawing it for real; the layout is done: drop it
            fig.set_layout_engine(None)
        # zlib level 1: a few % larger files, encoded in half the time of the default 6
        fig.savefig(path, dpi=DPI, pil_kwargs={"compress_level": 1})
    plt.close(fig)
    return path


#: a 10 pt tick label's character (DejaVu Sans digits: 0.64 em), in inches
TICK_CHAR_IN = 0.64 * 10 / 72
#: the right margin, in inches: room for half of a last tick label at the axis' end
RIGHT_IN = 0.3


def _place(fig: Any, *, left: float, bottom: float, top: float, right: float = RIGHT_IN,
           gap: float = 0.0) -> None:
    """Margins of the figure's grid of axes, and ``gap`` between its axes, in inches.

    What tight_layout finds for these figures (their texts are the same but for the
    numbers and names, which the callers measure), set without its pass over every text,
    which cost about a third of drawing the figure."""
    w, h = fig.get_size_inches()
    rows, cols = fig.axes[0].get_subplotspec().get_gridspec().get_geometry()
    span_w, span_h = w - left - right, h - bottom - top
    # subplots_adjust takes the gaps as fractions of the mean axes width / height
    fig.subplots_adjust(left=left / w, right=1 - right / w, bottom=bottom / h,
                        top=1 - top / h,
                        wspace=cols * gap / (span_w - (cols - 1) * gap) if cols > 1 else None,
                        hspace=rows * gap / (span_h - (rows - 1) * gap) if rows > 1 else None)


def _ytick_chars(ax: Any) -> int:
    """The length of the axes' longest y tick label (the ticks of its limits now)."""
    return max((len(t.get_text()) for t in ax.get_yticklabels()), default=0)


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
    _place(fig, left=0.67, bottom=0.59, top=0.47, gap=0.78)  # y: 0.0 to 1.0 on both
    return _save(fig, Path(path), tight=False)


def _bars(ax: Any, xs: Sequence[float], heights: Sequence[float], colors: Sequence[str],
          width: float = 0.8) -> None:
    """Bars from 0 as one collection: what ``ax.bar`` draws, without a patch (and its
    limit update and draw call) per bar."""
    half = width / 2
    verts = [((x - half, 0), (x - half, h), (x + half, h), (x + half, 0))
             for x, h in zip(xs, heights, strict=True)]
    ax.add_collection(PolyCollection(verts, facecolors=colors, edgecolors="none"))
    ax.autoscale_view()


def _share(name: str, means: Mapping[str, float], rates: Mapping[str, float]) -> float:
    """Mean utilisation as a fraction of the link's own rate (0 when the rate is unknown)."""
    r = rates.get(name) or 0
    return means[name] * 1e9 / r if r else 0.0


def _rate_text(bps: float) -> str:
    return f"{bps / 1e9:g} Gb/s"


def rank_links(series: Mapping[str, Any]) -> tuple[list[str], dict[str, float], list[str]]:
    """(link directions that carried traffic, busiest first by mean utilisation as a share
    of their own rate; each one's share; the degraded ones among them: a rate below their
    ``link_nominal_bps``)."""
    tx = series.get("link_tx_bytes") or {}
    rates = series.get("link_rate_bps") or {}
    nominal = series.get("link_nominal_bps") or {}
    means = {name: mean_utilisation(pts) for name, pts in tx.items()}
    share = {n: _share(n, means, rates) for n in means}
    busy = sorted((n for n in means if means[n] > 0), key=lambda n: (-share[n], n))
    degraded = [n for n in busy if n in nominal and rates.get(n, 0) < nominal[n]]
    return busy, share, degraded


def plot_link_utilisation(series: Mapping[str, Any], path: str | Path, *, top: int = 32,
                          lines: int = 6, title: str = "") -> Path | None:
    """Mean utilisation of the busiest link directions as a share of each one's own rate
    (bars), and the busiest ones' utilisation over time. Ranking by share, not by Gb/s, is
    what lets a degraded 25 Gb/s link running full show among 100 Gb/s ones; degraded links
    (rate below nominal, ``link_nominal_bps``) are drawn in red and always shown."""
    tx = series.get("link_tx_bytes") or {}
    rates = series.get("link_rate_bps") or {}
    nominal = series.get("link_nominal_bps") or {}
    busy, share, degraded = rank_links(series)
    if not busy:
        return None
    shown = busy[:top] + [n for n in degraded if n not in busy[:top]]
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(11, 8),
                                   gridspec_kw={"height_ratios": [1.1, 1]})
    colors = ["tab:red" if n in degraded else "tab:blue" for n in shown]
    _bars(ax1, range(len(shown)), [100 * share[n] for n in shown], colors)
    ax1.set_xticks(range(len(shown)))
    ax1.set_xticklabels(shown, rotation=70, ha="right", fontsize=7)
    for i, n in enumerate(shown):
        if n in degraded:
            ax1.text(i, 100 * share[n] + 2, f"{_rate_text(rates[n])}\n(of "
                     f"{_rate_text(nominal[n])})", ha="center", va="bottom", fontsize=6,
                     color="tab:red")
    ax1.axhline(100, color="tab:gray", linestyle="--", linewidth=1)
    ax1.set_ylim(0, 125)
    ax1.set_ylabel("mean utilisation (% of the link's rate)")
    kinds = sorted({rates[n] for n in shown if n in rates and n not in degraded})
    rate_note = ", ".join(_rate_text(r) for r in kinds)
    deg_note = f"; red: {len(degraded)} degraded" if degraded else ""
    ax1.set_title(f"busiest {len(shown)} of {len(tx)} link directions by share of their own "
                  f"rate (mean over the run; links at {rate_note}{deg_note})", fontsize=10)
    ax1.grid(axis="y", alpha=0.3)
    # windows of at least ~20 full frames at the link rate (and at most 1/20 of the run),
    # so that the number of frames per window does not show as ripple
    span = max(pts[-1][0] - pts[0][0] for pts in tx.values() if pts)
    picked = busy[:lines] + [n for n in degraded if n not in busy[:lines]][:2]
    for name in picked:
        r = rates.get(name) or 0
        window = min(20 * FRAME_BYTES * 8 / (r or 100e9) * 1e12, span / 10)
        t, g = utilisation(thin(tx[name], window))
        pct = [100 * x * 1e9 / r for x in g] if r else g
        style = {"linestyle": "--", "linewidth": 2.0} if name in degraded else {"linewidth": 1.2}
        label = f"{name} ({_rate_text(r)})" if name in degraded else name
        ax2.plot(t, pct, label=label, **style)
    ax2.set_xlabel("virtual time (µs)")
    ax2.set_ylabel("utilisation (% of the link's rate)")
    ax2.set_ylim(0, 135)
    ax2.grid(alpha=0.3)
    ax2.legend(fontsize=7, loc="upper right", ncol=3)
    ax2.set_title(f"{len(picked)} busiest link directions over time")
    fig.suptitle(f"{title}: link utilisation" if title else "Link utilisation")
    # between the axes: the names, 70° down from the bars, then the lower title
    _place(fig, left=0.72, bottom=0.59, top=0.67, gap=0.46 + _rotated_height(shown))
    return _save(fig, Path(path), tight=False)


def _rotated_height(names: Sequence[str], size: float = 7, angle: float = 70) -> float:
    """The height in inches of the tallest of ``names`` set at ``size`` pt and turned by
    ``angle`` degrees (the longest names measured)."""
    from matplotlib.font_manager import FontProperties
    from matplotlib.textpath import text_to_path

    prop = FontProperties(size=size)
    sin, cos = math.sin(math.radians(angle)), math.cos(math.radians(angle))
    tallest = 0.0
    for name in sorted(names, key=len)[-5:]:
        w, h, _ = text_to_path.get_text_width_height_descent(name, prop, ismath=False)
        tallest = max(tallest, (w * sin + h * cos) / 72)
    return tallest


def _tier(name: str) -> str:
    """``agg0.p2->core0.p0`` -> ``agg->core`` (the switch kinds at both ends)."""
    a, _, b = name.partition("->")
    return f"{a.rstrip('0123456789.p')}->{b.rstrip('0123456789.p')}"


def _kind(iface: str) -> str:
    return iface.split(".")[0].rstrip("0123456789")


def plot_paths(series: Mapping[str, Any], path: str | Path, *, title: str = "") -> Path | None:
    """The load of parallel paths, for spraying studies: (top) every switch-to-switch link
    direction, grouped by tier (ToR to aggregation, aggregation to core, and back down),
    as a share of its own rate, degraded ones in red; (bottom) how each sender spread its
    data over its entropy values (bytes per EV relative to an even spread), from
    ``ev_bytes``."""
    tx = series.get("link_tx_bytes") or {}
    rates = series.get("link_rate_bps") or {}
    nominal = series.get("link_nominal_bps") or {}
    ev_bytes = series.get("ev_bytes") or {}
    means = {n: mean_utilisation(p) for n, p in tx.items()}
    fabric = [n for n in tx if _kind(n.split("->")[0]) != "h"
              and _kind(n.partition("->")[2]) != "h"]
    if not fabric and not ev_bytes:
        return None
    order = {"tor": 0, "leaf": 0, "agg": 1, "spine": 2, "core": 2}
    tiers: dict[str, list[str]] = {}
    for n in sorted(fabric, key=_natural):
        tiers.setdefault(_tier(n), []).append(n)

    def tier_key(t: str) -> tuple:
        a, b = t.split("->")
        up = order.get(b, 0) > order.get(a, 0)
        return (not up, order.get(a, 0) if up else -order.get(a, 0))

    groups = sorted(tiers, key=tier_key)
    rows = 2 if (groups and ev_bytes) else 1
    fig, axes = plt.subplots(rows, 1, figsize=(11, 4.2 * rows), squeeze=False)
    ax = axes[0][0]
    if groups:
        x = 0
        ticks, labels = [], []
        for g in groups:
            names = tiers[g]
            xs, heights, colors = [], [], []
            for n in names:
                deg = n in nominal and rates.get(n, 0) < nominal[n]
                xs.append(x)
                heights.append(100 * _share(n, means, rates))
                colors.append("tab:red" if deg else "tab:blue")
                if deg:
                    ax.text(x, heights[-1] + 2, _rate_text(rates[n]), ha="center",
                            fontsize=6, color="tab:red", rotation=90)
                x += 1
            _bars(ax, xs, heights, colors)
            ticks.append(x - len(names) / 2 - 0.5)
            labels.append(f"{g}\n({len(names)} links)")
            ax.axvline(x - 0.5, color="tab:gray", linewidth=0.6)
            x += 0.5
        ax.set_xticks(ticks)
        ax.set_xticklabels(labels, fontsize=8)
        ax.set_ylabel("mean utilisation\n(% of the link's rate)")
        ax.set_ylim(0, 125)
        ax.grid(axis="y", alpha=0.3)
        ax.set_title("switch-to-switch links by tier, in name order (even bars: load spread "
                     "evenly over the parallel paths; red: degraded)", fontsize=10)
    if ev_bytes:
        ax = axes[-1][0]
        # each sender sprays over its own EVs: columns are a sender's EVs in ascending order
        hosts = sorted(ev_bytes, key=_natural)
        width = max(len(ev_bytes[h]) for h in hosts)
        grid = [[float("nan")] * width for _ in hosts]
        spread = []
        for r, h in enumerate(hosts):
            counts = [n for _, n in sorted((int(e), n) for e, n in ev_bytes[h].items())]
            mean = sum(counts) / len(counts)
            for c, n in enumerate(counts):
                grid[r][c] = n / mean
            spread.append(max(counts) / mean)
        im = ax.imshow(grid, aspect="auto", cmap="viridis", vmin=0, vmax=2,
                       interpolation="nearest")
        every = max(1, len(hosts) // 16)  # at most ~16 sender labels
        ax.set_yticks(range(0, len(hosts), every))
        ax.set_yticklabels(hosts[::every], fontsize=7)
        ax.set_xlabel("the sender's entropy values, in ascending order (UDP source ports of "
                      "its data packets)")
        ax.set_ylabel("sender")
        fig.colorbar(im, ax=ax, label="bytes / the sender's mean per EV")
        ax.set_title(f"data per EV and sender (up to {width} EVs each; 1 = an even spread, "
                     f"dark: EVs used less; busiest EV {max(spread):.1f}x the mean)",
                     fontsize=10)
    fig.suptitle(f"{title}: load over paths and EVs" if title else "Load over paths and EVs")
    if rows == 1:  # rare (no switch-to-switch links, or no EV counts): laid out to fit
        return _save(fig, Path(path))
    _place(fig, left=0.92, bottom=0.59, top=0.67, right=0.15, gap=0.72)
    return _save(fig, Path(path), tight=False)


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
    _place(fig, left=0.45 + TICK_CHAR_IN * _ytick_chars(ax), bottom=0.59, top=0.37)
    return _save(fig, Path(path), tight=False)


#: how each flow event is marked on its window line (marker, colour, legend text)
EVENT_STYLE = {
    "nack": ("v", "tab:red", "NACK received (trimmed packet)"),
    "loss": ("o", "tab:orange", "loss found (SACK gap / RACK)"),
    "rto": ("X", "black", "retransmission timeout"),
    "ecn_cut": ("D", "tab:purple", "NSCC decrease (ECN, high delay)"),
    "quick_adapt": ("^", "tab:brown", "NSCC quick adapt"),
}


def _movement(pts: Sequence[Sequence[float]]) -> float:
    """How much a window series moved: the sum of its step sizes."""
    return float(sum(abs(b[1] - a[1]) for a, b in zip(pts, pts[1:], strict=False)))


def _value_at(pts: Sequence[Sequence[float]], times: Sequence[float], t: float) -> float:
    """The step series' value at ``t`` (the last point at or before it; the first point's
    before it); ``times``: the points' times."""
    return pts[max(bisect_right(times, t) - 1, 0)][1]


def cwnd_flows(series: Mapping[str, Any], flows: int, prefer: Sequence[str] = ()
               ) -> tuple[list[str], int, int]:
    """(the flows the cwnd plot shows, how many traced flows' windows moved, how many were
    traced): first the ``flows`` that got the most congestion signals and whose window
    moved (then: moved most, the sum of its steps), then ``prefer`` (e.g. the slowest),
    then by name."""
    cw = series.get("cwnd_bytes") or {}
    events = series.get("flow_events") or {}
    have = [n for n in cw if cw[n]]
    moved = sorted((n for n in have if _movement(cw[n]) > 0),
                   key=lambda n: (-len(events.get(n, ())), -_movement(cw[n]), n))
    names = moved[:flows]
    rest = [n for n in prefer if n in have and n not in names] + sorted(
        (n for n in have if n not in names and n not in prefer), key=_natural)
    names += rest[:flows - len(names)]
    return names, len(moved), len(have)


def flat_note(series: Mapping[str, Any]) -> str:
    """What the cwnd plot says when no traced window moved."""
    cw = series.get("cwnd_bytes") or {}
    values = sorted({int(p[0][1]) for p in cw.values() if p})
    at = " / ".join(f"{v / KIB:.0f}" for v in values[:3])
    return (f"no window changed during the run (all {len(cw)} traced flows stayed at {at} "
            "KiB):\nno flow got a signal that made it back off (NACK, loss, timeout, ECN "
            "with high delay)")


def plot_cwnd(series: Mapping[str, Any], path: str | Path, *, flows: int = 4,
              bdp_bytes: int | None = None, title: str = "",
              prefer: Sequence[str] = (), which: str = "") -> Path | None:
    """Congestion control at work: (top) the window (KiB) over time of the ``flows`` flows
    whose window moved most, each congestion signal and reaction of a flow marked on its
    line (``flow_events``: NACKs, losses, RTOs, NSCC decreases); (bottom) the fabric's
    signals per microsecond (``fabric_signals``: ECN marks, trims, drops). Flows whose
    window never moved fill up from ``prefer`` (e.g. the slowest); when no window moved at
    all the plot says so."""
    cw = series.get("cwnd_bytes") or {}
    events = series.get("flow_events") or {}
    names, moved, have = cwnd_flows(series, flows, prefer)
    if not names:
        return None
    fig, (ax, ax2) = plt.subplots(2, 1, figsize=(10, 6.5), sharex=True,
                                  gridspec_kw={"height_ratios": [2.2, 1]})
    kinds_seen: dict[str, None] = {}
    for name in names:
        pts = cw[name]
        times = [t for t, _ in pts]
        (line,) = ax.step([t / PS_PER_US for t in times], [v / KIB for _, v in pts],
                          where="post", label=name, linewidth=1.2)
        # one line of markers per kind of event (not one per event)
        marks: dict[str, tuple[list[float], list[float]]] = {}
        for t, kind in events.get(name, ()):
            xs, ys = marks.setdefault(kind, ([], []))
            xs.append(t / PS_PER_US)
            ys.append(_value_at(pts, times, t) / KIB)
            kinds_seen.setdefault(kind)
        for kind, (xs, ys) in marks.items():
            marker, color, _ = EVENT_STYLE.get(kind, ("|", "tab:gray", kind))
            ax.plot(xs, ys, marker=marker, color=color, markeredgecolor=line.get_color(),
                    markersize=6, linestyle="none")
    for kind in kinds_seen:
        marker, color, text = EVENT_STYLE.get(kind, ("|", "tab:gray", kind))
        ax.plot([], [], marker=marker, color=color, linestyle="none", label=text)
    if bdp_bytes:
        ax.axhline(bdp_bytes / KIB, color="tab:gray", linestyle="--", linewidth=1,
                   label=f"BDP {bdp_bytes / KIB:.0f} KiB")
    ax.set_ylabel("congestion window (KiB)")
    low = min(v for n in names for _, v in cw[n]) / KIB
    top = max([v for n in names for _, v in cw[n]] + [bdp_bytes or 0]) / KIB
    # zoomed on what the windows did (from 0 when they went low)
    ax.set_ylim(0 if low < 0.4 * top else 0.6 * low, top * 1.05)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower left", ncol=2)
    if moved:
        what = (f"window of the {len(names)} flows with the most congestion signals "
                f"({moved} of {have} windows moved)")
    else:
        what = f"window of {len(names)} {which + ' ' if which else ''}flows"
        ax.text(0.5, 0.55, flat_note(series), transform=ax.transAxes, ha="center",
                va="center", fontsize=9, bbox={"facecolor": "white", "edgecolor": "tab:gray"})
    ax.set_title(f"{title}: {what}" if title else what[0].upper() + what[1:], fontsize=10)
    _plot_signals(ax2, series.get("fabric_signals") or {})
    ax2.set_xlabel("virtual time (µs)")
    chars = max(_ytick_chars(ax), _ytick_chars(ax2))
    _place(fig, left=0.45 + TICK_CHAR_IN * chars, bottom=0.59, top=0.35, gap=0.43)
    return _save(fig, Path(path), tight=False)


def _plot_signals(ax: Any, signals: Mapping[str, Sequence[Sequence[float]]]) -> None:
    """ECN marks, trims and drops per µs over time (cumulative counts -> rates)."""
    styles = {"ecn_marks": ("ECN marks", "tab:purple"), "trims": ("trims", "tab:red"),
              "drops": ("drops", "black")}
    total = 0
    for key, (label, color) in styles.items():
        pts = signals.get(key) or []
        if len(pts) < 2:
            continue
        n = pts[-1][1] - pts[0][1]
        total += n
        span = pts[-1][0] - pts[0][0]
        t, r = [], []
        for (t0, c0), (t1, c1) in zip(thin(pts, span / 60), thin(pts, span / 60)[1:],
                                      strict=False):
            if t1 > t0:
                t.append(t1 / PS_PER_US)
                r.append((c1 - c0) / ((t1 - t0) / PS_PER_US))
        ax.step(t, r, where="pre", color=color, linewidth=1.2, label=f"{label} ({n:,})")
    ax.set_ylabel("per µs")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    if not signals:
        ax.text(0.5, 0.5, "the fabric's signals were not recorded", ha="center",
                va="center", transform=ax.transAxes, fontsize=9)
    elif total:
        ax.legend(fontsize=7, loc="upper right")
        ax.set_title("congestion signals in the fabric", fontsize=9)
    else:
        ax.text(0.5, 0.5, "no ECN marks, trims or drops in the fabric", ha="center",
                va="center", transform=ax.transAxes, fontsize=9)


def _natural(name: str) -> tuple:
    import re

    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name))


def write_plots(results: Mapping[str, Any], series: Mapping[str, Any] | None,
                out_dir: str | Path, *, only: Collection[str] | None = None) -> list[str]:
    """The plots ``output.plot_kinds`` names (all by default) there is data for; returns
    the file names written (relative), in ``PLOT_KINDS`` order (each named KIND.png).
    ``only``: draw just those kinds of them (helper processes share the work)."""
    from uet.experiments.ideal import TopologyModel

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cfg = results["experiment"]["config"]
    title = results["experiment"]["name"]
    topo = cfg["topology"]
    opts = cfg["output"]
    kinds = set(opts.get("plot_kinds", PLOT_KINDS))
    if only is not None:
        kinds &= set(only)
    written = []
    if "fct_cdf" in kinds:
        written.append(plot_fct_cdf(results["flows"], out / "fct_cdf.png", title))
    if series:
        if "link_utilisation" in kinds:
            written.append(plot_link_utilisation(series, out / "link_utilisation.png",
                                                 title=title))
        if "queues" in kinds:
            ecn = (topo["ecn_kmin"], topo["ecn_kmax"]) if topo["ecn"] else None
            written.append(plot_queues(series, out / "queues.png", top=opts["plot_ports"],
                                       limit_bytes=topo["queue_bytes"], ecn=ecn,
                                       title=title))
        if "cwnd" in kinds:
            bdp = TopologyModel.from_config(topo).bdp_bytes()
            # the slowest flows (largest FCT / ideal; unfinished ones first) are the story
            rows = sorted(results["flows"], key=lambda r: (
                r.get("fct_over_ideal") is not None, -(r.get("fct_over_ideal") or 0),
                r["id"]))
            prefer = [flow_label(r["id"], r["src"], r["dst"]) for r in rows]
            written.append(plot_cwnd(series, out / "cwnd.png", flows=opts["plot_flows"],
                                     bdp_bytes=bdp, title=title, prefer=prefer,
                                     which="slowest"))
        if "paths" in kinds:
            written.append(plot_paths(series, out / "paths.png", title=title))
    return [p.name for p in written if p is not None]
