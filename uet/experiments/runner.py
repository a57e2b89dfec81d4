"""The experiment runner: one validated config in, one results document (and files) out.

``run_experiment(config, out_dir)`` runs the experiment on the stack it names: the UET
stack's :class:`~uet.experiments.uet_stack.Runner` or the RoCEv2 baseline's
:class:`~uet.experiments.roce_stack.RoceRunner` (both below this module, which imports
them; neither imports it; the RoCE stack only when a run asks for it). It is module-level
so that sweeps can run it in worker processes. ``Runner``, ``SinkSpace`` and the other
names of the UET stack's runner, and ``RoceRunner``, are re-exported here for existing
imports.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from uet.experiments import timeseries
from uet.experiments.uet_stack import (
    DRAIN_CHECK_PS,
    EVENT_LOG,
    Runner,
    Sampler,
    SinkSpace,
    check_live,
)

if TYPE_CHECKING:
    from uet.experiments.roce_stack import RoceRunner

__all__ = ["run_experiment", "Runner", "RoceRunner", "SinkSpace", "Sampler", "check_live",
           "DRAIN_CHECK_PS", "EVENT_LOG"]


def run_experiment(config: dict[str, Any], out_dir: Path | None,
                   *, series: dict[str, Any] | None = None) -> dict[str, Any]:
    """Run one validated experiment; write its files into ``out_dir``; return the results
    document (``results.json``). ``transport.stack = "roce"`` runs the RoCEv2 baseline
    (:class:`uet.experiments.roce_stack.RoceRunner`) on the same fabric and workload.

    ``out_dir=None`` writes nothing (no capture, event log, plots or JSON files: the
    notebook API's ``uet.run(config)``); the results are the same. ``series``: a dict that
    receives the sampled time series (``timeseries.json``'s shape), for callers that keep
    them in memory.
    """
    out = None if out_dir is None else Path(out_dir)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    cls: type[Runner] = Runner
    if config["transport"].get("stack", "uet") == "roce":
        from uet.experiments.roce_stack import RoceRunner

        cls = RoceRunner
    run = cls(config, out)
    results = run.execute()
    if series is not None and run.series is not None:
        series.update(timeseries.plain(run.series))
    return results


def __getattr__(name: str) -> Any:  # RoceRunner loads with the RoCE stack, on first use
    if name == "RoceRunner":
        from uet.experiments.roce_stack import RoceRunner

        return RoceRunner
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
