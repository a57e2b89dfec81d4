"""Results as tables (pandas DataFrames): per flow, time series, summary, sweep aggregates.

The column names, types and units below are the contract of ``--export`` (CSV and
Parquet) and of the notebook API (``Results.flows`` ...); ``docs/experiments.md`` lists
them (a test checks the doc against these tuples). Sweep tables start with ``point`` and
the swept keys (full key paths, e.g. ``transport.cms.ev_selector``). pandas is imported
when a table is built, not with this module.

The time-series table is read from the public shape of ``timeseries.json``
(:mod:`uet.experiments.timeseries`): every top-level entry is a mapping of names to
``[[t_ps, value], ...]`` lists (a series per link direction, port or flow) or to single
values (``link_rate_bps``, a row each with an empty ``t_ps``), so series a sampler adds
later appear without a change here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

#: (column, dtype, unit, meaning) of the per-flow table
FLOW_COLUMNS: tuple[tuple[str, str, str, str], ...] = (
    ("flow", "int64", "", "flow id (as in the workload / connection matrix)"),
    ("src", "int64", "", "sending host index"),
    ("dst", "int64", "", "receiving host index"),
    ("size_bytes", "int64", "B", "message size"),
    ("start_ps", "Int64", "ps", "when the flow started (empty: never started)"),
    ("end_ps", "Int64", "ps", "when its data was placed at the target (empty: unfinished)"),
    ("fct_ps", "Int64", "ps", "flow completion time, end_ps - start_ps"),
    ("fct_us", "float64", "µs", "the same in microseconds"),
    ("ideal_ps", "Int64", "ps", "ideal FCT (docs/experiments.md, \"The ideal\")"),
    ("fct_over_ideal", "float64", "ratio", "fct_ps / ideal_ps"),
    ("bytes_delivered", "int64", "B", "payload bytes delivered (first copies)"),
    ("duplicates", "int64", "packets", "duplicate packets delivered to the application"),
    ("depends_on", "str", "", "flows it waited for, space-separated ids (empty: none)"),
    ("error", "str", "", "why the message failed (SES return code; empty: it did not)"),
)

#: (column, dtype, unit, meaning) of the time-series table (long format)
SERIES_COLUMNS: tuple[tuple[str, str, str, str], ...] = (
    ("series", "str", "", "what is sampled: link_tx_bytes, queue_bytes, cwnd_bytes, "
     "link_rate_bps, ... (the keys of timeseries.json)"),
    ("name", "str", "", "link direction (\"h0->tor0.p0\"), switch port (\"tor0.p2\") or "
     "flow (\"flow 3 (h2->h11)\"); nested entries and events join with / "
     "(ev_bytes \"h0/49152\", flow_events \"flow 3 (h2->h11)/nack\" with value 1)"),
    ("t_ps", "Int64", "ps", "virtual time of the sample (empty for one-value entries such "
     "as link_rate_bps)"),
    ("value", "float64", "per series (below)", "the sampled value"),
)

#: unit of ``value`` per series
SERIES_UNITS = {
    "link_tx_bytes": "B, cumulative bytes sent on the link direction",
    "link_rate_bps": "b/s, nominal rate of the link direction",
    "queue_bytes": "B queued at the switch port (all classes)",
    "cwnd_bytes": "B, the flow's congestion window",
}

#: fixed leading columns of the summary table (then every summary field of results.json,
#: count tables flattened as ``field.key``, e.g. ``drops_by_reason.loss``)
SUMMARY_LEAD: tuple[tuple[str, str, str, str], ...] = (
    ("experiment", "str", "", "experiment.name"),
    ("seed", "int64", "", "experiment.seed"),
    ("traffic_seed", "Int64", "", "the seed the traffic used (traffic.seed, or "
     "experiment.seed when that is -1)"),
    ("completed", "bool", "", "every message was delivered"),
    ("stop_reason", "str", "", "done, time_limit, wall_limit, stalled or error"),
    ("virtual_time_us", "float64", "µs", "virtual time reached"),
    ("wall_time_s", "float64", "s", "wall-clock time of the run"),
)

#: (column, dtype, unit, meaning) of the sweep aggregate table (tidy: a row per group and
#: metric; the group's swept parameter values come first)
AGGREGATE_COLUMNS: tuple[tuple[str, str, str, str], ...] = (
    ("metric", "str", "", "summary field (unit as in results.json)"),
    ("n", "int64", "", "points with a value"),
    ("failed", "int64", "", "points of the group that failed"),
    ("mean", "float64", "metric", "mean over the group's seeds"),
    ("sd", "float64", "metric", "sample standard deviation (n - 1; empty for n < 2)"),
    ("min", "float64", "metric", "smallest value"),
    ("max", "float64", "metric", "largest value"),
    ("ci_low", "float64", "metric", "95% confidence interval of the mean, Student t"),
    ("ci_high", "float64", "metric", "upper end of that interval"),
)


def pandas() -> Any:
    """The pandas module, or a one-line error saying how to get it."""
    try:
        import pandas as pd
    except ModuleNotFoundError:
        from uet.experiments.export import DATA_HINT

        raise ModuleNotFoundError("tables need pandas: " + DATA_HINT) from None
    return pd


def _frame(rows: list[dict[str, Any]], columns: Sequence[tuple[str, str, str, str]],
           lead: Mapping[str, Any] | None = None) -> Any:
    pd = pandas()
    lead = dict(lead or {})
    data: dict[str, Any] = {}
    for k, v in lead.items():
        data[k] = [v] * len(rows)
    for name, dtype, _, _ in columns:
        data[name] = pd.array([r.get(name) for r in rows], dtype=dtype)
    return pd.DataFrame(data, columns=[*lead, *(c[0] for c in columns)])


def flow_records(results: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The ``flows`` of a results document as table rows (FLOW_COLUMNS)."""
    out = []
    for f in results["flows"]:
        fct = f.get("fct_ps")
        out.append({"flow": f["id"], "src": f["src"], "dst": f["dst"],
                    "size_bytes": f["size"], "start_ps": f.get("start_ps"),
                    "end_ps": f.get("end_ps"), "fct_ps": fct,
                    "fct_us": None if fct is None else fct / 1e6,
                    "ideal_ps": f.get("ideal_ps"), "fct_over_ideal": f.get("fct_over_ideal"),
                    "bytes_delivered": f.get("bytes_delivered", 0),
                    "duplicates": f.get("duplicates", 0),
                    "depends_on": " ".join(map(str, f.get("depends_on") or [])),
                    "error": f.get("error") or ""})
    return out


def series_records(series: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """Time series (timeseries.json's shape) as long-format rows (SERIES_COLUMNS)."""
    out: list[dict[str, Any]] = []

    def walk(kind: str, name: str, pts: Any) -> None:
        if isinstance(pts, int | float) and not isinstance(pts, bool):
            out.append({"series": kind, "name": name, "t_ps": None, "value": pts})
        elif isinstance(pts, Mapping):  # nested (ev_bytes: host -> EV -> bytes)
            for sub, x in pts.items():
                walk(kind, f"{name}/{sub}", x)
        elif isinstance(pts, list):
            for p in pts:
                if isinstance(p[1], str):  # an event ([t, "nack"]): its kind joins the name
                    out.append({"series": kind, "name": f"{name}/{p[1]}", "t_ps": int(p[0]),
                                "value": 1.0})
                else:
                    out.append({"series": kind, "name": name, "t_ps": int(p[0]),
                                "value": float(p[1])})

    for kind, entries in (series or {}).items():
        if isinstance(entries, Mapping):
            for name, pts in entries.items():
                walk(kind, str(name), pts)
    return out


def _flatten(summary: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in summary.items():
        if isinstance(v, Mapping):
            for sub, x in v.items():
                out[f"{k}.{sub}"] = x
        else:
            out[k] = v
    return out


def summary_record(results: Mapping[str, Any]) -> dict[str, Any]:
    """One run's summary row: SUMMARY_LEAD then the flattened ``summary``."""
    run = results["run"]
    exp = results["experiment"]
    return {"experiment": exp["name"], "seed": exp["seed"],
            "traffic_seed": exp.get("traffic_seed"), "completed": run["completed"],
            "stop_reason": run["stop_reason"],
            "virtual_time_us": run["virtual_time_ps"] / 1e6,
            "wall_time_s": run["wall_time_s"], **_flatten(results["summary"])}


def flows_frame(results: Mapping[str, Any], lead: Mapping[str, Any] | None = None) -> Any:
    """Per-flow DataFrame of one run (``lead``: constant leading columns, e.g. point)."""
    return _frame(flow_records(results), FLOW_COLUMNS, lead)


def series_frame(series: Mapping[str, Any] | None, lead: Mapping[str, Any] | None = None
                 ) -> Any:
    """Long-format time-series DataFrame of one run."""
    return _frame(series_records(series), SERIES_COLUMNS, lead)


def summary_frame(records: Iterable[Mapping[str, Any]]) -> Any:
    """Summary DataFrame: one row per record (:func:`summary_record`, with any leading
    columns the caller put first); counts are nullable integers, 0 where a run lacks the
    key (``drops_by_reason.fcs`` of a run with no FCS drop), empty for a failed point."""
    pd = pandas()
    recs = [dict(r) for r in records]
    df = pd.DataFrame(recs)
    if "traffic_seed" in df:  # older results.json do not record it
        df["traffic_seed"] = df["traffic_seed"].astype("Int64")
    counts = [c for c in df.columns if "." in c and c.split(".", 1)[0] in _COUNT_FIELDS]
    if counts:
        ran = df["completed"].notna() if "completed" in df else slice(None)
        df[counts] = df[counts].astype("Int64")
        df.loc[ran, counts] = df.loc[ran, counts].fillna(0)
    return df


def _count_fields() -> frozenset[str]:
    from uet.experiments.results import SUMMARY_SPEC

    return frozenset(k for k, f in SUMMARY_SPEC.items() if f.type == "counts")


_COUNT_FIELDS = _count_fields()


def concat(frames: Sequence[Any], columns: Sequence[tuple[str, str, str, str]],
           lead: Sequence[str]) -> Any:
    """Frames of several points as one (an empty frame with the right columns for none)."""
    pd = pandas()
    frames = [f for f in frames if f is not None]
    if frames:
        return pd.concat(frames, ignore_index=True)
    return _frame([], columns, dict.fromkeys(lead))


def aggregate_frame(groups: Sequence[Mapping[str, Any]], params: Sequence[str]) -> Any:
    """The sweep aggregate, tidy: a row per group and metric (AGGREGATE_COLUMNS after the
    group's parameter values)."""
    pd = pandas()
    recs = []
    for g in groups:
        for metric, d in g["metrics"].items():
            recs.append({**{k: g["values"][k] for k in params}, "metric": metric,
                         "n": d["n"], "failed": g["failed"],
                         **{s: d[s] for s in ("mean", "sd", "min", "max", "ci_low",
                                              "ci_high")}})
    data: dict[str, Any] = {k: [r[k] for r in recs] for k in params}
    for name, dtype, _, _ in AGGREGATE_COLUMNS:
        data[name] = pd.array([r[name] for r in recs], dtype=dtype)
    return pd.DataFrame(data, columns=[*params, *(c[0] for c in AGGREGATE_COLUMNS)])


def export_doc_table() -> str:
    """Markdown tables of every exported column (kept in docs/experiments.md)."""
    def table(title: str, cols: Sequence[tuple[str, str, str, str]]) -> list[str]:
        lines = [f"**{title}**", "", "| column | type | unit | meaning |", "|---|---|---|---|"]
        lines += [f"| `{n}` | {t} | {u} | {m} |" for n, t, u, m in cols]
        return [*lines, ""]

    out = table("`flows` (one row per flow)", FLOW_COLUMNS)
    out += table("`timeseries` (one row per sample)", SERIES_COLUMNS)
    out += ["Units of `value`:", "", "| series | unit of value |", "|---|---|"]
    out += [f"| `{k}` | {v} |" for k, v in SERIES_UNITS.items()]
    out += [""]
    out += table("`summary` (one row per run; for a sweep one per point, after `point`, the "
                 "swept keys and `error`; then every `summary.*` field of results.json with "
                 "its unit, count tables flattened as `drops_by_reason.loss`)", SUMMARY_LEAD)
    out += table("`SweepResults.aggregate` (tidy: one row per group and metric, after the "
                 "group's swept parameters)", AGGREGATE_COLUMNS)
    return "\n".join(out)
