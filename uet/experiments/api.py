"""The notebook API: ``uet.run``, ``uet.sweep``, ``uet.load`` and what they return.

``run(config, *, out=None, progress=False) -> Results``: ``config`` is a path to an
experiment file, a TOML string, a dict of the same tables (``{"topology": {"kind":
"star"}, ...}``) or None (the built-in default); ``set={key: value}`` overrides keys as
``--set`` does. ``out=None`` writes nothing (no capture, event log, plots or JSON; the
results are the same). :class:`Results` holds the results document (``.results``) and
gives pandas DataFrames: ``.summary`` (one row), ``.flows``, ``.timeseries``.

``sweep(config, {key: [values], ...}, *, executor="local", jobs=None, ...) ->
SweepResults``: the grid, run by any executor (``"dask"``, ``"dask://HOST:PORT"`` or a
``distributed.Client`` too), with ``.summary`` (a row per point), ``.aggregate`` (per group
of points that differ only in seeds, per metric: mean, sd, min, max, 95% CI), ``.flows``
and ``.timeseries`` over every point, and ``.points`` (a :class:`Results` per point, None
for a failed one). ``load(dir)`` reads a run or sweep directory back.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from uet.experiments.config import (
    ConfigError,
    Source,
    apply_override,
    format_path,
    parse_key_path,
    read_raw,
    validate,
)

ConfigLike = str | Path | Mapping[str, Any] | None


def _raw_config(config: ConfigLike, sets: Mapping[str, Any] | None
                ) -> tuple[dict[str, Any], Source]:
    """The raw (unvalidated) tables and their source, with ``sets`` applied."""
    import tomllib

    if config is None or isinstance(config, Path):
        raw, src = read_raw(config)
    elif isinstance(config, Mapping):
        raw, src = copy.deepcopy(dict(config)), Source("<dict>")
    elif isinstance(config, str):
        looks_like_toml = "\n" in config or "=" in config or config.lstrip().startswith("[")
        if looks_like_toml and not Path(config).is_file():
            try:
                raw = tomllib.loads(config)
            except tomllib.TOMLDecodeError as exc:
                raise ConfigError("<string>", f"not valid TOML: {exc}") from None
            src = Source("<string>", config)
        else:
            raw, src = read_raw(config)
    else:
        raise TypeError(f"config: a path, a TOML string or a dict, not "
                        f"{type(config).__name__}")
    for key, value in (sets or {}).items():
        path = parse_key_path(key)
        label = f"set {format_path(path)}={json.dumps(value, default=str)}"
        apply_override(raw, path, value, label)
        src.overrides.append((path, label))
    return raw, src


def _set_progress(raw: dict[str, Any], progress: bool) -> None:
    """The run's own progress bar (``output.progress``) on or off."""
    output = raw.setdefault("output", {})
    if isinstance(output, dict):
        output["progress"] = bool(progress)


def run(config: ConfigLike = None, *, out: str | Path | None = None,
        progress: bool = False, set: Mapping[str, Any] | None = None) -> Results:  # noqa: A002
    """Run one experiment (see the module docstring)."""
    from uet.experiments.runner import run_experiment

    raw, src = _raw_config(config, set)
    _set_progress(raw, progress)
    cfg = validate(raw, src)
    series: dict[str, Any] = {}
    out_dir = None if out is None else Path(out)
    results = run_experiment(cfg, out_dir, series=series)
    return Results(results, series or None, out_dir)


def _executor(executor: Any, jobs: int | None) -> Any:
    from uet.experiments.executor import DaskExecutor, make_executor

    if executor is None or isinstance(executor, str):
        return make_executor(executor, jobs)
    if hasattr(executor, "run"):  # an Executor
        return executor
    if hasattr(executor, "submit") and hasattr(executor, "scheduler"):  # distributed.Client
        return DaskExecutor(client=executor)
    raise TypeError("executor: 'local', 'dask', 'dask://HOST:PORT', a distributed.Client "
                    "or an Executor")


def sweep(config: ConfigLike = None, grid: Mapping[str, Sequence[Any]] | None = None, *,
          out: str | Path | None = None, executor: Any = "local", jobs: int | None = None,
          progress: bool = False, resume: bool = False,
          set: Mapping[str, Any] | None = None) -> SweepResults:  # noqa: A002
    """Run the grid ``{key: [values]}`` over ``config`` (see the module docstring)."""
    from uet.experiments.progress import PointProgress
    from uet.experiments.runner import run_experiment
    from uet.experiments.sweep import axis_of, expand_raw, run_points, sweep_rows, write_sweep

    raw, src = _raw_config(config, set)
    _set_progress(raw, False)  # the sweep shows points instead
    axes = [axis_of(k, v) for k, v in (grid or {}).items()]
    points = expand_raw(raw, src, axes)
    keys = [a.key for a in axes]
    ex = _executor(executor, jobs)
    out_dir = None if out is None else Path(out)
    with PointProgress(len(points), enabled=progress) as bar:
        outcomes = run_points(points, run_experiment, out_dir, ex,
                              bar.point_done if progress else None, resume=resume,
                              timeseries=True)
    rows = sweep_rows(points, outcomes)
    res = SweepResults(keys, rows, [
        None if "results" not in o else Results(
            o["results"], o.get("timeseries"),
            None if out_dir is None or o.get("dir") is None else out_dir / o["dir"])
        for o in outcomes])
    if out_dir is not None:
        write_sweep(rows, keys, out_dir, res.groups, getattr(ex, "name", None))
        res.plot(out_dir / "sweep.png")
    return res


def load(path: str | Path) -> Results | SweepResults:
    """A run directory (``results.json``) or a sweep directory (``sweep.json``) read back."""
    from uet.experiments.results import read_results
    from uet.experiments.sweep import read_sweep

    p = Path(path)
    if (p / "sweep.json").is_file():
        doc = read_sweep(p)
        points: list[Results | None] = []
        for row in doc["rows"]:
            rdir = p / row["dir"] if row.get("dir") else None
            if rdir is None or row.get("error") or not (rdir / "results.json").is_file():
                points.append(None)
                continue
            points.append(Results(read_results(rdir / "results.json"), None, rdir))
        return SweepResults(doc["keys"], doc["rows"], points)
    if (p / "results.json").is_file():
        return Results(read_results(p / "results.json"), None, p)
    raise FileNotFoundError(f"{p}: neither a run (results.json) nor a sweep (sweep.json)")


class Results:
    """One run: ``.results`` (the results document), ``.summary`` / ``.flows`` /
    ``.timeseries`` (DataFrames), ``.out`` (its directory, None if nothing was written)."""

    def __init__(self, results: dict[str, Any], series: dict[str, Any] | None = None,
                 out: Path | None = None) -> None:
        self.results = results
        self._series = series
        self.out = out

    def __repr__(self) -> str:
        s = self.results["summary"]
        return (f"<Results {self.results['experiment']['name']!r} seed "
                f"{self.results['experiment']['seed']}: {s['messages_delivered']}/"
                f"{s['flows']} delivered, tail/ideal {s['fct_tail_over_ideal']}>")

    @property
    def completed(self) -> bool:
        """Every message was delivered."""
        return bool(self.results["run"]["completed"])

    @property
    def series(self) -> dict[str, Any] | None:
        """The sampled time series as plain data (timeseries.json's shape), if any."""
        if self._series is None and self.out is not None:
            name = self.results.get("files", {}).get("timeseries")
            if name and (self.out / name).is_file():
                self._series = json.loads((self.out / name).read_text(encoding="utf-8"))
        return self._series

    @property
    def summary(self) -> Any:
        """One-row DataFrame: experiment, seed, completed, ... then every summary field."""
        from uet.experiments.tables import summary_frame, summary_record

        return summary_frame([summary_record(self.results)])

    @property
    def flows(self) -> Any:
        """Per-flow DataFrame (columns: ``uet.experiments.tables.FLOW_COLUMNS``)."""
        from uet.experiments.tables import flows_frame

        return flows_frame(self.results)

    @property
    def timeseries(self) -> Any:
        """Long-format time-series DataFrame (series, name, t_ps, value)."""
        from uet.experiments.tables import series_frame

        return series_frame(self.series)

    def tables(self) -> dict[str, Any]:
        """What ``--export`` writes: flows, timeseries, summary."""
        return {"flows": self.flows, "timeseries": self.timeseries, "summary": self.summary}

    def export(self, out_dir: str | Path, formats: str | Sequence[str] = "csv,parquet"
               ) -> list[Path]:
        """Write :meth:`tables` as ``flows.csv``, ``flows.parquet``, ..."""
        from uet.experiments.export import parse_formats, write_tables

        return write_tables(self.tables(), out_dir, parse_formats(formats))


class SweepResults:
    """A sweep: ``.keys`` (swept keys), ``.rows`` (sweep.json rows), ``.points``
    (:class:`Results` per point, None where it failed), ``.groups`` (the aggregate over
    seeds as plain data) and the DataFrames ``.summary``, ``.aggregate``, ``.flows``,
    ``.timeseries``."""

    def __init__(self, keys: Sequence[str], rows: Sequence[dict[str, Any]],
                 points: Sequence[Results | None]) -> None:
        from uet.experiments.aggregate import aggregate

        self.keys = list(keys)
        self.rows = list(rows)
        self.points = list(points)
        self.groups = aggregate(self.rows, self.keys)

    def __repr__(self) -> str:
        failed = sum(1 for r in self.rows if r.get("error"))
        return (f"<SweepResults {len(self.rows)} points over {', '.join(self.keys) or '-'}"
                f", {len(self.groups)} groups, {failed} failed>")

    def _lead(self, row: Mapping[str, Any]) -> dict[str, Any]:
        return {"point": row["point"], **{k: row.get(k) for k in self.keys}}

    @property
    def summary(self) -> Any:
        """A row per point: point, the swept keys, error, then Results.summary's columns."""
        from uet.experiments.tables import summary_frame, summary_record

        recs = []
        for row, res in zip(self.rows, self.points, strict=True):
            rec = {**self._lead(row), "error": row.get("error") or ""}
            if res is not None:
                rec.update(summary_record(res.results))
            recs.append(rec)
        return summary_frame(recs)

    @property
    def aggregate(self) -> Any:
        """Tidy aggregate: the group's parameters, metric, n, failed, mean, sd, min, max,
        ci_low, ci_high."""
        from uet.experiments.aggregate import parameter_keys
        from uet.experiments.tables import aggregate_frame

        return aggregate_frame(self.groups, parameter_keys(self.keys))

    @property
    def flows(self) -> Any:
        """Per-flow rows of every completed point (point and swept keys first)."""
        from uet.experiments.tables import FLOW_COLUMNS, concat, flows_frame

        return concat([None if res is None else flows_frame(res.results, self._lead(row))
                       for row, res in zip(self.rows, self.points, strict=True)],
                      FLOW_COLUMNS, ["point", *self.keys])

    @property
    def timeseries(self) -> Any:
        """Time-series rows of every point that has them (point and swept keys first)."""
        from uet.experiments.tables import SERIES_COLUMNS, concat, series_frame

        return concat([None if res is None or res.series is None
                       else series_frame(res.series, self._lead(row))
                       for row, res in zip(self.rows, self.points, strict=True)],
                      SERIES_COLUMNS, ["point", *self.keys])

    def tables(self) -> dict[str, Any]:
        """What ``--export`` writes for a sweep: flows, timeseries, summary (the aggregate
        is ``sweep_aggregate.csv`` and :attr:`aggregate`)."""
        return {"flows": self.flows, "timeseries": self.timeseries, "summary": self.summary}

    def export(self, out_dir: str | Path, formats: str | Sequence[str] = "csv,parquet"
               ) -> list[Path]:
        """Write :meth:`tables` in each format."""
        from uet.experiments.export import parse_formats, write_tables

        return write_tables(self.tables(), out_dir, parse_formats(formats))

    def plot(self, path: str | Path, metrics: Sequence[str] | None = None) -> Path | None:
        """Write ``sweep.png`` (see :mod:`uet.experiments.sweep_plot`)."""
        from uet.experiments.aggregate import DEFAULT_METRICS
        from uet.experiments.sweep_plot import plot_sweep

        name = next((p.results["experiment"]["name"] for p in self.points if p), "")
        return plot_sweep(self.rows, self.groups, self.keys, metrics or DEFAULT_METRICS,
                          path, title=name)
