"""A deterministic stand-in for the experiment runner (no fabric): plausible synthetic data.

``fake_run(config, out_dir)`` has the signature of the real ``run_experiment``: it builds the
workload, starts flows as their dependencies complete (each flow taking its ideal FCT
stretched by a seeded random factor), makes up counters and time series, and writes the
outputs through the real report code.
"""

from __future__ import annotations

import heapq
import math
import os
import random
from pathlib import Path
from typing import Any

from uet.experiments.ideal import TopologyModel, WireFormat, ideal_fcts
from uet.experiments.report import write_outputs
from uet.experiments.results import build_results
from uet.experiments.timeseries import SeriesRecorder
from uet.experiments.traffic import build_workload
from uet.experiments.workload import DependencyTracker

US = 1_000_000


def synthetic_run(config: dict[str, Any]) -> tuple[list[dict], dict, dict, dict]:
    """Flow records, counters, time series and run info for ``config``."""
    seed = config["experiment"]["seed"]
    rng = random.Random(seed)
    wl = build_workload(config)
    model = TopologyModel.from_config(config["topology"])
    ideals = ideal_fcts(wl.flows, model, WireFormat.htsim())
    loss = sum(imp["loss"] for imp in config["impairments"])
    tracker = DependencyTracker(wl)
    events: list[tuple[int, int]] = []
    records: dict[int, dict[str, Any]] = {}

    def start(t: int, flow: Any) -> None:
        stretch = 1.0 + rng.random() * 0.4 + 20 * loss
        end = t + int(ideals[flow.id] * stretch)
        records[flow.id] = {"id": flow.id, "src": flow.src, "dst": flow.dst,
                            "size": flow.size, "start_ps": t, "end_ps": end,
                            "bytes_delivered": flow.size, "duplicates": rng.randrange(2)}
        heapq.heappush(events, (end, flow.id))

    for t, f in tracker.initial():
        start(t, f)
    now = 0
    limit = round(config["experiment"]["time_limit_us"] * US)
    while events:
        now, fid = heapq.heappop(events)
        if now > limit:
            now = limit
            break
        for t, f in tracker.delivered(fid, now):
            start(t, f)
    flows = []
    for f in wl.flows:
        rec = records.get(f.id) or {"id": f.id, "src": f.src, "dst": f.dst, "size": f.size,
                                    "start_ps": None, "end_ps": None, "bytes_delivered": 0,
                                    "duplicates": 0}
        if rec["end_ps"] is not None and rec["end_ps"] > limit:
            rec = {**rec, "end_ps": None, "bytes_delivered": rec["size"] // 2}
        flows.append(rec)
    retx = int(len(flows) * (1 + 100 * loss) * rng.random() * 5)
    counters = {
        "nic": {f"h{i}": {"tx_frames": 1000 + i, "tx_bytes": 4_150_000 + i,
                          "paused_ps.0": 0} for i in range(model.hosts)},
        "port": {f"tor{i}.p2": {"trimmed": rng.randrange(50), "ecn_marked": rng.randrange(90),
                                "drop.queue": rng.randrange(3)} for i in range(4)},
        "link": {"agg0.p2->core0.p0": {"tx_frames": 10, "drop.loss": int(loss * 1e4)}},
        "pds": {f"h{i}": {"opened": 2, "closed": 2, "retx.nack": retx // 2,
                          "retx.rto": retx % 3, "nack_tx.TRIMMED": retx // 2}
                for i in range(model.hosts)},
    }
    series = synthetic_series(model, now or limit, rng)
    run = {"completed": all(r["end_ps"] is not None for r in flows),
           "stop_reason": "done" if events == [] else "time_limit",
           "virtual_time_ps": now, "wall_time_s": 0.0, "events": 1234}
    return flows, counters, series, run


def synthetic_series(model: TopologyModel, end_ps: int, rng: random.Random) -> dict:
    """Link bytes, queues and cwnds with some shape to them."""
    rec = SeriesRecorder()
    step = max(end_ps // 200, 1)
    names = [f"h{i}->tor{i // 2}.p{i % 2}" for i in range(model.hosts)] + [
        f"agg{i}.p2->core{i % 4}.p0" for i in range(8)]
    rates = {n: model.host_rate_bps for n in names}
    sent = dict.fromkeys(names, 0)
    queues = [f"tor{i}.p{j}" for i in range(4) for j in range(4)]
    for k in range(201):
        t = k * step
        for j, n in enumerate(names):
            share = 0.9 if j < model.hosts else 0.45 + 0.05 * j / len(names)
            sent[n] += int(model.host_rate_bps * share * step / 8e12 * (0.9 + 0.2 * rng.random()))
        rec.links(t, dict(sent), rates if k == 0 else None)
        rec.queues(t, {q: max(0, int(120_000 * math.sin(t / end_ps * math.pi * (1 + i % 3))
                                      + rng.randrange(-8000, 8000)))
                       for i, q in enumerate(queues)})
    for flow in range(1, 6):
        w = 178_450
        for k in range(120):
            t = k * end_ps // 120
            w = max(8_300, min(267_000, int(w * (1.02 if rng.random() < 0.7 else 0.8))))
            rec.cwnd(t, f"flow {flow}", w)
    return rec.data


def fake_run(config: dict[str, Any], out_dir: Path | None, *,
             series: dict[str, Any] | None = None) -> dict[str, Any]:
    """Stand-in for ``run_experiment(config, out_dir, series=None) -> results``."""
    flows, counters, data, run = synthetic_run(config)
    results = build_results(config, flows, counters, run=run, workload=build_workload(config))
    if series is not None:
        series.update(data)
    if out_dir is None:
        return results
    return write_outputs(results, out_dir, data)


def crash_run(config: dict[str, Any], out_dir: Path | None, **kw: Any) -> dict[str, Any]:
    """Like :func:`fake_run`, but the process running seed 2 dies on the spot (a worker
    killed by the OOM killer or a segfault in a C library looks like this)."""
    if config["experiment"]["seed"] == 2:
        os._exit(3)
    return fake_run(config, out_dir, **kw)
