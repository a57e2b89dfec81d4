"""Metrics from plain run data: flow records, counters and ideal FCTs (no fabric needed).

Inputs (what a runner collects):

* flow records: dicts ``{id, src, dst, size, start_ps, end_ps, bytes_delivered,
  duplicates}``; ``start_ps`` None if the flow never started, ``end_ps`` None if it did not
  complete (FCT = end_ps - start_ps).
* counters: ``{"nic": {name: {...}}, "port": {...}, "link": {...}}`` as
  :meth:`uet.runtime.fabric.Fabric.counters` returns them (keys ``drop.<reason>``, ``trimmed``,
  ``ecn_marked``, ``paused_ps.<prio>``, ``pause_tx``, ``tx_frames``, ``tx_bytes``), plus
  ``"pds": {host: PdsEndpoint.counters}`` (``retx.<cause>``, ``nack_tx.<CODE>``,
  ``opened``, ``closed``, ``closed_in_error``, and per end ``opened.initiator``,
  ``closed.initiator``, ``closed_in_error.initiator``: a PDC is then counted once, at its
  initiator). With ``"roce": {host: RoceEndpoint.stats}`` instead (the RoCEv2 stack:
  ``retx.<cause>``, ``nak_tx.<CODE>``, ``tx_cnp``), those are used. Without either, the
  test end point's ``"endpoint"`` stats (``tx_rtx``, ``tx_nack``) are used.
* ideal FCTs: flow id -> ps (:func:`uet.experiments.ideal.ideal_fcts`).
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

PS_PER_US = 1_000_000


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (``q`` in (0, 100]) of non-empty ``values``."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def stats(values: Sequence[float]) -> dict[str, float | None]:
    """min / median / p99 / max (None for no values)."""
    if not values:
        return {"min": None, "median": None, "p99": None, "max": None}
    return {"min": min(values), "median": float(statistics.median(values)),
            "p99": percentile(values, 99), "max": max(values)}


def flow_rows(flows: Iterable[Mapping[str, Any]], ideals: Mapping[int, int]
              ) -> list[dict[str, Any]]:
    """Flow records with ``fct_ps``, ``ideal_ps`` and ``fct_over_ideal`` added."""
    out = []
    for f in flows:
        row = {"id": f["id"], "src": f["src"], "dst": f["dst"], "size": f["size"],
               "start_ps": f.get("start_ps"), "end_ps": f.get("end_ps"),
               "bytes_delivered": f.get("bytes_delivered", 0),
               "duplicates": f.get("duplicates", 0)}
        if f.get("depends_on"):
            row["depends_on"] = list(f["depends_on"])
        if f.get("op"):
            row["op"] = str(f["op"])
        if f.get("error"):
            row["error"] = str(f["error"])
        start, end = row["start_ps"], row["end_ps"]
        fct = end - start if start is not None and end is not None else None
        ideal = ideals.get(f["id"])
        row["fct_ps"] = fct
        row["ideal_ps"] = ideal
        row["fct_over_ideal"] = fct / ideal if fct is not None and ideal else None
        out.append(row)
    return out


def _entities(counters: Mapping[str, Any], *sections: str) -> Iterable[Mapping[str, Any]]:
    for s in sections:
        for ent in (counters.get(s) or {}).values():
            if isinstance(ent, Mapping):
                yield ent


def _prefixed(ents: Iterable[Mapping[str, Any]], prefix: str) -> dict[str, int]:
    out: Counter[str] = Counter()
    for ent in ents:
        for k, v in ent.items():
            if k.startswith(prefix) and isinstance(v, int | float):
                out[k[len(prefix):]] += v
    return dict(sorted(out.items()))


def _total(ents: Iterable[Mapping[str, Any]], key: str) -> int:
    return sum(ent.get(key, 0) for ent in ents if isinstance(ent.get(key, 0), int | float))


def counter_totals(counters: Mapping[str, Any]) -> dict[str, Any]:
    """Fabric-wide totals of the counters (see the module docstring for the keys read)."""
    fabric = ("nic", "port", "link")
    drops = _prefixed(_entities(counters, *fabric), "drop.")
    paused = _prefixed(_entities(counters, "nic", "port"), "paused_ps.")
    out: dict[str, Any] = {
        "drops": sum(drops.values()), "drops_by_reason": drops,
        "trims": _total(_entities(counters, "port"), "trimmed"),
        "ecn_marks": _total(_entities(counters, "port"), "ecn_marked"),
        "pfc_pause_us": sum(paused.values()) / PS_PER_US,
        "pfc_pause_frames": _total(_entities(counters, "nic", "port"), "pause_tx"),
        "wire_frames_sent": _total(_entities(counters, "nic"), "tx_frames"),
        "wire_bytes_sent": _total(_entities(counters, "nic"), "tx_bytes"),
        "cnps": 0,
    }
    if counters.get("roce"):
        roce = list(_entities(counters, "roce"))
        retx = _prefixed(roce, "retx.")
        nacks = _prefixed(roce, "nak_tx.")
        out.update(pdcs_opened=0, pdcs_closed=0, pdcs_closed_in_error=0,
                   cnps=_total(roce, "tx_cnp"))
    elif counters.get("pds"):
        pds = list(_entities(counters, "pds"))
        retx = _prefixed(pds, "retx.")
        nacks = _prefixed(pds, "nack_tx.")
        # a PDC has two ends, each counting its open and close: count it at its initiator
        # when the counters say which end is which (the runner adds closed.<role>)
        roles = any("closed.initiator" in ent for ent in pds)
        sfx = ".initiator" if roles else ""
        out.update(pdcs_opened=_total(pds, "opened" + sfx),
                   pdcs_closed=_total(pds, "closed" + sfx),
                   pdcs_closed_in_error=_total(pds, "closed_in_error" + sfx))
    else:
        ep = list(_entities(counters, "endpoint"))
        retx = {"unspecified": _total(ep, "tx_rtx")} if _total(ep, "tx_rtx") else {}
        nacks = {"unspecified": _total(ep, "tx_nack")} if _total(ep, "tx_nack") else {}
        out.update(pdcs_opened=0, pdcs_closed=0, pdcs_closed_in_error=0)
    out.update(retransmissions=sum(retx.values()), retransmissions_by_cause=retx,
               nacks=sum(nacks.values()), nacks_by_code=nacks)
    return out


def summarize(rows: Sequence[Mapping[str, Any]], counters: Mapping[str, Any],
              victims: Sequence[int] = ()) -> dict[str, Any]:
    """The ``summary`` of results.json from :func:`flow_rows` output and counters.

    FCT statistics cover completed flows. ``fct_tail_over_ideal`` is the largest
    FCT/ideal ratio (htsim's "tail": the slowest flow), ``fct_p99_over_ideal`` the 99th
    percentile (nearest rank). Goodput: bytes delivered x 8 over the span from the first
    start to the last completion. ``victims``: flow ids also summarised apart (their
    slowest FCT; None while one is unfinished).
    """
    started = [r for r in rows if r["start_ps"] is not None]
    done = [r for r in rows if r["fct_ps"] is not None]
    fct = stats([r["fct_ps"] / PS_PER_US for r in done])
    ratio = stats([r["fct_over_ideal"] for r in done if r["fct_over_ideal"] is not None])
    delivered = sum(r["bytes_delivered"] for r in rows)
    span = 0
    if done:
        span = max(r["end_ps"] for r in done) - min(r["start_ps"] for r in started)
    per_flow = [r["size"] * 8 / (r["fct_ps"] / 1e12) / 1e9 for r in done if r["fct_ps"]]
    out: dict[str, Any] = {
        "flows": len(rows),
        "messages_sent": len(started),
        "messages_delivered": len(done),
        "messages_unfinished": len(rows) - len(done),
        "bytes_sent": sum(r["size"] for r in started),
        "bytes_delivered": delivered,
        "duplicates_delivered": sum(r["duplicates"] for r in rows),
        "fct_min_us": fct["min"], "fct_median_us": fct["median"],
        "fct_p99_us": fct["p99"], "fct_max_us": fct["max"],
        "fct_min_over_ideal": ratio["min"], "fct_median_over_ideal": ratio["median"],
        "fct_p99_over_ideal": ratio["p99"], "fct_tail_over_ideal": ratio["max"],
        "ideal_max_us": max((r["ideal_ps"] for r in rows if r["ideal_ps"]), default=0)
        / PS_PER_US,
        "goodput_gbps": delivered * 8 / (span / 1e12) / 1e9 if span > 0 else 0.0,
        "flow_goodput_mean_gbps": statistics.fmean(per_flow) if per_flow else 0.0,
    }
    vict = [r for r in rows if r["id"] in set(victims)]
    vdone = [r for r in vict if r["fct_ps"] is not None]
    whole = bool(vict) and len(vdone) == len(vict)
    out["victim_flows"] = len(vict)
    out["victim_fct_max_us"] = max(r["fct_ps"] for r in vdone) / PS_PER_US if whole else None
    ratios = [r["fct_over_ideal"] for r in vdone if r["fct_over_ideal"] is not None]
    out["victim_fct_max_over_ideal"] = max(ratios) if whole and ratios else None
    out.update(counter_totals(counters))
    return out
