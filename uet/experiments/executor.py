"""Where sweep points run: one small executor interface, three engines.

The unit of work is a *run function* ``fn(config: dict, out_dir: Path | None, *,
series: dict | None = None) -> dict`` (a results document; ``uet.experiments.runner.
run_experiment``), module-level so that it pickles by reference. A point travels as plain
data: :meth:`Task.payload` is a dict (index, validated config, output directory, whether
to send the time series back) and :func:`run_task` returns a dict (index, results or
error, wall time, the worker's host name), so any engine can carry both.

An :class:`Executor` runs tasks and returns the outcomes **in task order**, whatever order
they finish in, so a sweep's output does not depend on scheduling; ``on_result`` is called
as each one finishes (progress). A failing point is an outcome with an ``error``, never an
exception, so it does not stop the others.

* :class:`SerialExecutor`: in this process, one after another (``--jobs 1``).
* :class:`ProcessExecutor`: local worker processes (``--jobs N``).
* :class:`DaskExecutor`: Dask distributed: a ``LocalCluster`` of N single-threaded worker
  processes (``--executor dask``), or an existing scheduler (``--executor
  dask://HOST:PORT``; dask-jobqueue's SLURM/PBS clusters are such schedulers). Dask is
  imported only when this engine runs.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import time
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from uet.errors import ConfigError

RunFn = Callable[..., dict[str, Any]]
OnResult = Callable[[int, dict[str, Any]], None]

#: what ``--executor`` accepts (the dask:// form names an existing scheduler)
EXECUTORS = "local, dask, or dask://HOST:PORT"
DASK_MISSING = ("--executor dask needs Dask distributed: pip install 'dask[distributed]' "
                "(or uet's extra: pip install -e '.[dask]' in the uet checkout)")


class ExecutorError(ConfigError):
    """A bad ``--executor`` / ``--jobs``, or a Dask cluster that cannot run the sweep."""


@dataclass(frozen=True, slots=True)
class Task:
    """One point: its index, validated config and output directory (None: write nothing;
    ``timeseries``: send the sampled series back with the results)."""

    index: int
    config: dict[str, Any]
    out_dir: str | None
    timeseries: bool = False

    def payload(self) -> dict[str, Any]:
        """The task as plain data (what travels to a worker)."""
        return {"index": self.index, "config": self.config, "out_dir": self.out_dir,
                "timeseries": self.timeseries}


def run_task(fn: RunFn, payload: dict[str, Any]) -> dict[str, Any]:
    """Run one task payload, never raising: ``{"index", "results" | "error" (+
    "traceback"), "timeseries"?, "wall_time_s", "worker" ("host:pid")}``."""
    t0 = time.perf_counter()
    out: dict[str, Any] = {"index": payload["index"],
                           "worker": f"{socket.gethostname()}:{os.getpid()}"}
    try:
        out_dir = payload.get("out_dir")
        if out_dir is not None:
            Path(out_dir).mkdir(parents=True, exist_ok=True)
        if payload.get("timeseries"):
            series: dict[str, Any] = {}
            out["results"] = fn(payload["config"], None if out_dir is None else Path(out_dir),
                                series=series)
            out["timeseries"] = series
        else:
            out["results"] = fn(payload["config"], None if out_dir is None else Path(out_dir))
    except Exception as exc:  # a failed point is reported, the sweep goes on
        out["error"] = f"{type(exc).__name__}: {exc}"
        out["traceback"] = traceback.format_exc()
    out["wall_time_s"] = time.perf_counter() - t0
    return out


def _lost(index: int, exc: BaseException) -> dict[str, Any]:
    """The outcome of a task whose worker died or whose future failed (not a Python error
    of the point itself)."""
    return {"index": index, "error": f"{type(exc).__name__}: {exc}", "wall_time_s": 0.0,
            "worker": None}


class Executor(Protocol):
    """Runs ``fn`` over tasks; returns one :func:`run_task` outcome per task, in order."""

    def run(self, fn: RunFn, tasks: Sequence[Task],
            on_result: OnResult | None = None) -> list[dict[str, Any]]: ...


class SerialExecutor:
    """In this process, one task after another."""

    name = "local (this process)"

    def run(self, fn: RunFn, tasks: Sequence[Task],
            on_result: OnResult | None = None) -> list[dict[str, Any]]:
        out = []
        for task in tasks:
            res = run_task(fn, task.payload())
            if on_result is not None:
                on_result(task.index, res)
            out.append(res)
        return out


class ProcessExecutor:
    """Local worker processes (:class:`concurrent.futures.ProcessPoolExecutor`)."""

    def __init__(self, jobs: int, mp_context: Any = None) -> None:
        self.jobs = check_jobs(jobs)
        self.mp_context = mp_context
        self.name = f"local ({jobs} processes)"

    def run(self, fn: RunFn, tasks: Sequence[Task],
            on_result: OnResult | None = None) -> list[dict[str, Any]]:
        results: dict[int, dict[str, Any]] = {}
        if not tasks:
            return []
        with ProcessPoolExecutor(max_workers=min(self.jobs, len(tasks)),
                                 mp_context=self.mp_context) as pool:
            futures = {pool.submit(run_task, fn, t.payload()): i for i, t in enumerate(tasks)}
            for fut in as_completed(futures):
                i = futures[fut]
                try:
                    results[i] = fut.result()
                except Exception as exc:  # the worker process died (BrokenProcessPool)
                    results[i] = _lost(tasks[i].index, exc)
                if on_result is not None:
                    on_result(tasks[i].index, results[i])
        return [results[i] for i in range(len(tasks))]


def _uet_version() -> str:
    """Runs on each Dask worker: the uet version it imports."""
    from uet import __version__

    return __version__


class DaskExecutor:
    """Dask distributed. ``address=None``: a ``LocalCluster`` of ``jobs`` single-threaded
    worker processes (``processes=False``: threads of this process, for tests), started and
    closed by :meth:`run`; ``address="tcp://HOST:PORT"``: that scheduler's workers (those
    connected must import the same uet version: checked before anything is submitted;
    points wait for workers that have not started yet); ``client``: an existing
    ``distributed.Client`` (the notebook API), left open."""

    def __init__(self, address: str | None = None, jobs: int | None = None, *,
                 processes: bool = True, client: Any = None,
                 connect_timeout_s: float = 10.0) -> None:
        if client is None and importlib.util.find_spec("distributed") is None:
            raise ExecutorError(DASK_MISSING)
        if address is not None and jobs is not None:
            raise ExecutorError("--jobs: not used with an existing Dask scheduler (its "
                                "workers run the points); drop --jobs")
        self.address = address
        self.jobs = check_jobs(jobs) if jobs is not None else (os.cpu_count() or 1)
        self.processes = processes
        self.client = client
        self.connect_timeout_s = connect_timeout_s
        if client is not None:
            self.name = f"dask ({client.scheduler.address})"
        elif address is not None:
            self.name = f"dask ({address})"
        else:
            self.name = f"dask (LocalCluster, {self.jobs} workers)"
        #: the scheduler address of the last run (for messages)
        self.scheduler_address: str | None = address

    def _connect(self) -> tuple[Any, list[Any]]:
        """A client, and what to close after the run (nothing for a client given to us)."""
        distributed = _import_distributed()
        if self.client is not None:
            return self.client, []
        if self.address is not None:
            try:
                client = distributed.Client(self.address, timeout=self.connect_timeout_s)
            except (OSError, TimeoutError) as exc:
                raise ExecutorError(f"--executor dask://: cannot reach the Dask scheduler "
                                    f"at {self.address}: {exc}") from None
            return client, [client]
        import logging

        cluster = distributed.LocalCluster(
            n_workers=self.jobs, threads_per_worker=1, processes=self.processes,
            dashboard_address="127.0.0.1:0", silence_logs=logging.ERROR,
            host="127.0.0.1" if self.processes else None)
        client = distributed.Client(cluster)
        return client, [client, cluster]

    def _check_workers(self, client: Any) -> None:
        from uet import __version__

        try:
            versions = client.run(_uet_version)
        except Exception as exc:  # a worker without uet: ModuleNotFoundError
            raise ExecutorError(f"Dask workers at {self.scheduler_address} cannot import "
                                f"uet ({type(exc).__name__}: {exc}); install uet on "
                                f"every worker") from None
        # no worker yet is fine: batch clusters (dask-jobqueue) start theirs when the
        # queue lets them, and the points wait for them
        bad = {w: v for w, v in versions.items() if v != __version__}
        if bad:
            w, v = next(iter(bad.items()))
            raise ExecutorError(f"Dask worker {w} runs uet {v}, this is uet {__version__}; "
                                f"install the same version on every worker")

    def run(self, fn: RunFn, tasks: Sequence[Task],
            on_result: OnResult | None = None) -> list[dict[str, Any]]:
        if not tasks:
            return []
        distributed = _import_distributed()
        client, owned = self._connect()
        try:
            self.scheduler_address = client.scheduler.address
            self._check_workers(client)
            futures = {}
            for i, t in enumerate(tasks):
                fut = client.submit(run_task, fn, t.payload(), pure=False,
                                    key=f"uet-point-{t.index}-{os.urandom(4).hex()}")
                futures[fut] = i
            results: dict[int, dict[str, Any]] = {}
            for fut in distributed.as_completed(list(futures)):
                i = futures[fut]
                try:
                    results[i] = fut.result()
                except Exception as exc:  # KilledWorker, CancelledError, ...
                    results[i] = _lost(tasks[i].index, exc)
                fut.release()
                if on_result is not None:
                    on_result(tasks[i].index, results[i])
            return [results[i] for i in range(len(tasks))]
        finally:
            for thing in owned:
                thing.close()


def _import_distributed() -> Any:
    try:
        import distributed
    except ModuleNotFoundError:
        raise ExecutorError(DASK_MISSING) from None
    return distributed


def check_jobs(jobs: Any) -> int:
    """``jobs`` as a positive integer, or :class:`ExecutorError`."""
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ExecutorError(f"--jobs: {jobs!r} is not a positive integer")
    return jobs


def make_executor(spec: str | None = None, jobs: int | None = None) -> Executor:
    """The executor named by ``--executor`` (``local``: serial for one job, local
    processes otherwise; ``dask``: a LocalCluster of ``jobs`` workers, default one per
    CPU; ``dask://HOST:PORT``: an existing scheduler)."""
    kind = (spec or "local").strip()
    if kind == "local":
        n = 1 if jobs is None else check_jobs(jobs)
        return SerialExecutor() if n == 1 else ProcessExecutor(n)
    if kind == "dask":
        return DaskExecutor(None, jobs)
    if kind.startswith("dask://"):
        hostport = kind[len("dask://"):]
        host, sep, port = hostport.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ExecutorError(f"--executor {kind}: expected dask://HOST:PORT (the Dask "
                                f"scheduler's address)")
        return DaskExecutor(f"tcp://{hostport}", jobs)
    raise ExecutorError(f"--executor {kind}: unknown executor; allowed: {EXECUTORS}")
