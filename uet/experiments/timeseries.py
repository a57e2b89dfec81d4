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

In memory a run's series may also be :class:`Points` (two integer arrays: 16 bytes a point
instead of ~130 for a list of two ints) recorded by :class:`ChangeRecorder`, which stores a
point only where a series changed; they read as sequences of ``(t_ps, value)`` pairs, and
:func:`dumps` writes them as the same ``[[t_ps, value], ...]`` lists.
"""

from __future__ import annotations

import json
from array import array
from collections.abc import Iterator, Mapping, Sequence
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


class Points:
    """One series as two ``array('q')`` (times, values): a read-only sequence of
    ``(t_ps, value)`` pairs (integers) with ``append``."""

    __slots__ = ("t", "v")

    def __init__(self) -> None:
        self.t = array("q")
        self.v = array("q")

    def append(self, point: Sequence[int]) -> None:
        self.t.append(point[0])
        self.v.append(point[1])

    def __len__(self) -> int:
        return len(self.t)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return list(zip(self.t[i], self.v[i], strict=True))
        return self.t[i], self.v[i]

    def __iter__(self) -> Iterator[tuple[int, int]]:
        return zip(self.t, self.v, strict=True)

    def as_lists(self) -> list[list[int]]:
        """The JSON shape: ``[[t_ps, value], ...]``."""
        return [[t, v] for t, v in zip(self.t, self.v, strict=True)]


def _change_core() -> Any:
    """The C form of :class:`ChangeRecorder`'s bookkeeping (``uet/native/series_core.c``),
    or None (``UET_PURE_PYTHON=1``, or not built)."""
    from uet.native._common import load_core

    core = load_core("_event_core")
    return getattr(core, "ChangeCore", None) if core is not None else None


_ChangeCore = _change_core()


class ChangeRecorder:
    """Samples of a fixed set of integer series taken together (e.g. every link's
    cumulative bytes): a point is stored only where a series changed, plus the last sample
    of a flat stretch before a change (so a step plot of the points is exact), and every
    series is closed with its last sample (:meth:`close`). A sample where nothing changed
    costs one list comparison; otherwise the work is per changed series.

    With the C core (``uet.native._event_core.ChangeCore``, the same rule) the points are
    kept in C and reach the :class:`Points` at :meth:`close`; ``native=False`` keeps the
    Python form (the reference the tests hold the core to)."""

    def __init__(self, names: Sequence[str], series: dict[str, Any], *,
                 native: bool = True) -> None:
        self.names = list(names)
        self.points = [Points() for _ in self.names]
        for name, pts in zip(self.names, self.points, strict=True):
            series[name] = pts
        self.last: list[int] | None = None
        self.prev_t = 0
        self._core = _ChangeCore(len(self.names)) if native and _ChangeCore else None
        if self._core is not None:
            self.sample = self._core.sample  # type: ignore[method-assign]

    def sample(self, now: int, values: list[int]) -> None:
        """Values of every series (in ``names`` order) at ``now`` (after the last sample)."""
        last = self.last
        if last is None:
            for pts, v in zip(self.points, values, strict=True):
                pts.t.append(now)
                pts.v.append(v)
        elif values != last:
            prev = self.prev_t
            points = self.points
            for i in [i for i, (a, b) in enumerate(zip(values, last, strict=True)) if a != b]:
                pts = points[i]
                if pts.t[-1] != prev:  # close the flat stretch
                    pts.t.append(prev)
                    pts.v.append(last[i])
                pts.t.append(now)
                pts.v.append(values[i])
        self.last = values
        self.prev_t = now

    def close(self) -> None:
        """End every series with the last sample (if it was not stored already)."""
        core = self._core
        if core is not None:
            core.close()
            for i, pts in enumerate(self.points):
                t, v = core.take(i)
                pts.t.frombytes(t)
                pts.v.frombytes(v)
            return
        if self.last is None:
            return
        prev = self.prev_t
        for pts, v in zip(self.points, self.last, strict=True):
            if pts.t[-1] != prev:
                pts.t.append(prev)
                pts.v.append(v)


def _json_default(obj: Any) -> Any:
    if isinstance(obj, Points):
        return obj.as_lists()
    raise TypeError(f"{type(obj).__name__} is not JSON serialisable")


def plain(series: Mapping[str, Any]) -> dict[str, Any]:
    """The series with every :class:`Points` as ``[[t_ps, value], ...]`` lists (the
    ``timeseries.json`` shape, for callers that keep or ship them)."""
    return {kind: {name: pts.as_lists() if isinstance(pts, Points) else pts
                   for name, pts in table.items()} if isinstance(table, dict) else table
            for kind, table in series.items()}


def dumps(series: Mapping[str, Any]) -> str:
    """The series as JSON (:class:`Points` written as ``[[t_ps, value], ...]``)."""
    return json.dumps(series, default=_json_default)


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
