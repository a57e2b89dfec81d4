"""Where sweep points run: a small executor interface and two local implementations.

The unit of work is ``run_experiment(config: dict, out_dir: Path) -> dict`` (a results
document), a module-level function so that it pickles. An :class:`Executor` runs it over a
list of :class:`Task` s and returns the outcomes **in task order**, whatever order they
finish in, so a sweep's output does not depend on scheduling. Configs and results are
plain data (TOML in, JSON out), so any engine can carry them; a Dask or Ray backend only has
to implement :meth:`Executor.run` (e.g. ``client.map(run_task, [fn] * n, tasks)`` then
``client.gather``).
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

RunFn = Callable[[dict[str, Any], Path], dict[str, Any]]
OnResult = Callable[[int, dict[str, Any]], None]


@dataclass(frozen=True, slots=True)
class Task:
    """One point: its index, validated config and output directory."""

    index: int
    config: dict[str, Any]
    out_dir: str


def run_task(fn: RunFn, task: Task) -> dict[str, Any]:
    """Run one task, never raising: ``{"index", "results" | "error", "wall_time_s"}``."""
    t0 = time.perf_counter()
    out: dict[str, Any] = {"index": task.index}
    try:
        Path(task.out_dir).mkdir(parents=True, exist_ok=True)
        out["results"] = fn(task.config, Path(task.out_dir))
    except Exception as exc:  # a failed point is reported, the sweep goes on
        out["error"] = f"{type(exc).__name__}: {exc}"
        out["traceback"] = traceback.format_exc()
    out["wall_time_s"] = time.perf_counter() - t0
    return out


class Executor(Protocol):
    """Runs ``fn`` over tasks; returns one :func:`run_task` outcome per task, in order."""

    def run(self, fn: RunFn, tasks: Sequence[Task],
            on_result: OnResult | None = None) -> list[dict[str, Any]]: ...


class SerialExecutor:
    """In this process, one task after another."""

    def run(self, fn: RunFn, tasks: Sequence[Task],
            on_result: OnResult | None = None) -> list[dict[str, Any]]:
        out = []
        for task in tasks:
            res = run_task(fn, task)
            if on_result is not None:
                on_result(task.index, res)
            out.append(res)
        return out


class ProcessExecutor:
    """Local worker processes (:class:`concurrent.futures.ProcessPoolExecutor`)."""

    def __init__(self, jobs: int, mp_context: Any = None) -> None:
        if jobs < 1:
            raise ValueError(f"jobs={jobs}: at least 1")
        self.jobs = jobs
        self.mp_context = mp_context

    def run(self, fn: RunFn, tasks: Sequence[Task],
            on_result: OnResult | None = None) -> list[dict[str, Any]]:
        results: dict[int, dict[str, Any]] = {}
        with ProcessPoolExecutor(max_workers=min(self.jobs, max(1, len(tasks))),
                                 mp_context=self.mp_context) as pool:
            futures = {pool.submit(run_task, fn, t): i for i, t in enumerate(tasks)}
            for fut in as_completed(futures):
                i = futures[fut]
                results[i] = fut.result()
                if on_result is not None:
                    on_result(tasks[i].index, results[i])
        return [results[i] for i in range(len(tasks))]


def make_executor(jobs: int = 1) -> Executor:
    """Serial for ``jobs == 1``, local processes otherwise."""
    return SerialExecutor() if jobs <= 1 else ProcessExecutor(jobs)
