"""Time series a runner samples during a run, as plain data (``timeseries.json``).

Shape (every series a list of ``[t_ps, value]`` points in time order)::

    {
      "link_tx_bytes": {"h0->tor0.p0": [[t_ps, cumulative bytes sent], ...], ...},
      "link_rate_bps": {"h0->tor0.p0": 100e9, ...},
      "queue_bytes":   {"tor0.p2": [[t_ps, bytes queued], ...], ...},
      "cwnd_bytes":    {"flow 3 (h2->h11)": [[t_ps, congestion window], ...], ...}
    }

The experiment runner's sampler adds (:mod:`uet.experiments.signals`)::

      "link_nominal_bps": {"core0.p0->agg0.p2": 100e9, ...},   # degraded links only
      "flow_events":   {"flow 3 (h2->h11)": [[t_ps, "nack" | "loss" | "rto" | "ecn_cut"
                                              | "quick_adapt"], ...], ...},
      "fabric_signals": {"ecn_marks" | "trims" | "drops": [[t_ps, cumulative count], ...]},
      "ev_bytes":      {"h0": {"49152": data bytes sent with that EV, ...}, ...}

Link names are fabric channel names (one direction of a link), port names switch port
names. :class:`SeriesRecorder` builds this; :func:`utilisation` turns cumulative bytes into
Gb/s per sampling interval.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

PS_PER_US = 1_000_000


def flow_label(flow_id: int, src: int, dst: int) -> str:
    """Name of a flow's ``cwnd_bytes`` series: ``"flow 3 (h2->h11)"``."""
    return f"flow {flow_id} (h{src}->h{dst})"


class SeriesRecorder:
    """Collects samples; ``data`` is the plain-data shape above."""

    def __init__(self) -> None:
        self.data: dict[str, Any] = {"link_tx_bytes": {}, "link_rate_bps": {},
                                     "queue_bytes": {}, "cwnd_bytes": {}}

    def links(self, now_ps: int, tx_bytes: Mapping[str, int],
              rates: Mapping[str, float] | None = None) -> None:
        """Cumulative bytes sent per channel at ``now_ps`` (and nominal rates, once)."""
        series = self.data["link_tx_bytes"]
        for name, value in tx_bytes.items():
            series.setdefault(name, []).append([now_ps, value])
        if rates:
            self.data["link_rate_bps"].update(rates)

    def queues(self, now_ps: int, occupancy: Mapping[str, int]) -> None:
        """Bytes queued per port at ``now_ps``."""
        series = self.data["queue_bytes"]
        for name, value in occupancy.items():
            series.setdefault(name, []).append([now_ps, value])

    def cwnd(self, now_ps: int, label: str, window_bytes: int) -> None:
        """One congestion-window sample of a flow (call on change)."""
        self.data["cwnd_bytes"].setdefault(label, []).append([now_ps, window_bytes])


def utilisation(points: Sequence[Sequence[float]]) -> tuple[list[float], list[float]]:
    """``(t_us, gbps)``: mean rate over each interval between cumulative-byte samples,
    stamped at the interval's end."""
    t, g = [], []
    for (t0, b0), (t1, b1) in zip(points, points[1:], strict=False):
        if t1 > t0:
            t.append(t1 / PS_PER_US)
            g.append((b1 - b0) * 8 / ((t1 - t0) / 1e12) / 1e9)
    return t, g


def thin(points: Sequence[Sequence[float]], min_dt: float) -> list[Sequence[float]]:
    """Cumulative samples at least ``min_dt`` apart (first and last kept): rates over the
    coarser windows stay exact means, and fewer frames per window no longer quantise them
    (2 µs holds 5 or 6 full frames at 100 Gb/s: 84 or 101 Gb/s)."""
    if len(points) < 3 or min_dt <= 0:
        return list(points)
    out = [points[0]]
    for p in points[1:-1]:
        if p[0] - out[-1][0] >= min_dt:
            out.append(p)
    if points[-1][0] > out[-1][0]:
        out.append(points[-1])
    return out


def mean_utilisation(points: Sequence[Sequence[float]]) -> float:
    """Mean Gb/s over the whole series (0 for fewer than two samples)."""
    if len(points) < 2 or points[-1][0] <= points[0][0]:
        return 0.0
    (t0, b0), (t1, b1) = points[0], points[-1]
    return (b1 - b0) * 8 / ((t1 - t0) / 1e12) / 1e9
