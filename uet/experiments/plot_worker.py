"""Draw a run's plots in helper processes started before the run.

Importing matplotlib and drawing the five PNGs cost a ``uet run`` about 0.6 s and
1.2-1.8 s of one core after the run has ended. The command starts helpers first: each
imports :mod:`uet.experiments.plots` on another core while the run computes; when the run
hands them the results and time series (pickled once, written to each helper's stdin),
they draw their share of the plots side by side while the command writes
``timeseries.json``. Two helpers when the process may use two cores or more, else one.
The PNGs are the same bytes either way (same matplotlib, same code, same data): each helper
runs :func:`uet.experiments.plots.write_plots` for its kinds.

Anything that goes wrong with a helper (it cannot start, dies, or its drawing raises) makes
the caller draw every plot in its own process, as without helpers, so errors read the same.
Only the single ``uet run`` uses them (:func:`prestarted`); sweeps and the Python API draw
in-process (their points already fill the cores).

Protocol (private to this module): the parent writes one pickled ``(results, series,
out_dir)`` tuple, then one pickled tuple of the kinds to draw; the child answers one
pickled ``("ok", names)`` or ``("error", text)`` and exits. Closing its stdin without a job
ends it.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import pickle
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from uet.experiments.schema import PLOT_KINDS

__all__ = ["PlotWorker", "PlotHelpers", "prestarted", "current", "helper_count"]

#: rough drawing cost of each kind (s at 16-128 hosts), to split the plots between helpers
COST = {"link_utilisation": 0.55, "paths": 0.48, "fct_cdf": 0.40, "cwnd": 0.37,
        "queues": 0.20}

_CURRENT: contextvars.ContextVar[PlotHelpers | None] = contextvars.ContextVar(
    "uet_plot_helpers", default=None)


class PlotWorker:
    """One helper process that draws some of one run's plots (see the module docstring)."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[bytes] | None = None
        self._sent = False

    def start(self) -> bool:
        """Start the helper; False (and no helper) if the process cannot be started."""
        root = str(Path(__file__).resolve().parents[2])
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "uet.experiments.plot_worker"], stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        except OSError:
            self._proc = None
        return self._proc is not None

    def submit(self, job: bytes, kinds: Sequence[str]) -> bool:
        """Hand the helper the pickled job and the kinds it draws; False if it cannot take
        them."""
        proc = self._proc
        if proc is None or self._sent or proc.stdin is None:
            return False
        try:
            proc.stdin.write(job)
            pickle.dump(tuple(kinds), proc.stdin, protocol=pickle.HIGHEST_PROTOCOL)
            proc.stdin.close()
        except OSError:
            self.close()
            return False
        self._sent = True
        return True

    def result(self) -> list[str] | None:
        """The file names the helper wrote, or None if it failed."""
        proc = self._proc
        if proc is None or not self._sent or proc.stdout is None:
            return None
        try:
            status, value = pickle.load(proc.stdout)
        except Exception:  # noqa: BLE001 - a dead helper: the caller draws instead
            status, value = "error", None
        self.close()
        return list(value) if status == "ok" else None

    def close(self) -> None:
        """End the helper (idempotent): closing its stdin ends it; kill if it lingers."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if not self._sent:  # nothing to draw (the run failed or drew in-process): no wait
            proc.kill()
        for stream in (proc.stdin, proc.stdout):
            with contextlib.suppress(OSError):
                if stream is not None:
                    stream.close()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class PlotHelpers:
    """The helpers of one run; they share its plots by :data:`COST`."""

    def __init__(self, workers: list[PlotWorker]) -> None:
        self.workers = workers
        self._shares: list[tuple[PlotWorker, list[str]]] = []

    def submit(self, results: Mapping[str, Any], series: Mapping[str, Any] | None,
               out_dir: str | Path) -> bool:
        """Hand the plots to the helpers; False if they cannot take them (then the caller
        draws them itself)."""
        if not self.workers:
            return False
        try:
            job = pickle.dumps((dict(results), series, str(out_dir)),
                               protocol=pickle.HIGHEST_PROTOCOL)
        except (pickle.PicklingError, TypeError, AttributeError):
            return False
        loads = [0.0] * len(self.workers)
        kinds: list[list[str]] = [[] for _ in self.workers]
        for kind in sorted(PLOT_KINDS, key=lambda k: -COST.get(k, 0.0)):
            i = loads.index(min(loads))
            kinds[i].append(kind)
            loads[i] += COST.get(kind, 0.0)
        shares = [(w, k) for w, k in zip(self.workers, kinds, strict=True) if k]
        for w, k in shares:
            if not w.submit(job, k):
                self.close()
                return False
        self._shares = shares
        return True

    def result(self) -> list[str] | None:
        """Every helper's file names in ``PLOT_KINDS`` order, or None if any failed."""
        names: list[str] = []
        ok = bool(self._shares)
        for w, _ in self._shares:
            got = w.result()
            if got is None:
                ok = False
            else:
                names += got
        self.close()
        if not ok:
            return None
        order = {f"{k}.png": i for i, k in enumerate(PLOT_KINDS)}
        return sorted(names, key=lambda n: order.get(n, len(order)))

    def close(self) -> None:
        """End every helper (idempotent)."""
        for w in self.workers:
            w.close()


def helper_count() -> int:
    """Two helpers where this process may run on two cores or more, else one."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        cores = os.cpu_count() or 1
    return 2 if cores >= 2 else 1


def current() -> PlotHelpers | None:
    """The helpers :func:`prestarted` set up for this run, if any (taken: one run, one
    set)."""
    helpers = _CURRENT.get()
    if helpers is not None:
        _CURRENT.set(None)
    return helpers


@contextlib.contextmanager
def prestarted(enabled: bool = True, count: int | None = None
               ) -> Iterator[PlotHelpers | None]:
    """Start helpers (``count``, default :func:`helper_count`) for the run inside the
    ``with`` block, when ``enabled``; they are ended on the way out whatever happened."""
    helpers = None
    if enabled:
        workers = [PlotWorker() for _ in range(count or helper_count())]
        workers = [w for w in workers if w.start()]
        helpers = PlotHelpers(workers) if workers else None
    token = _CURRENT.set(helpers)
    try:
        yield helpers
    finally:
        _CURRENT.reset(token)
        if helpers is not None:
            helpers.close()


def _serve(stdin: IO[bytes], stdout: IO[bytes]) -> int:
    from uet.experiments.plots import write_plots  # the import this process exists for

    try:
        results, series, out_dir = pickle.load(stdin)
        only = pickle.load(stdin)
    except EOFError:  # the run ended without plots (failed, or nothing to draw)
        return 0
    try:
        reply: tuple[str, Any] = ("ok", write_plots(results, series, out_dir, only=only))
    except Exception as exc:  # noqa: BLE001 - reported; the parent draws again and raises
        reply = ("error", f"{type(exc).__name__}: {exc}")
    pickle.dump(reply, stdout, protocol=pickle.HIGHEST_PROTOCOL)
    stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(_serve(sys.stdin.buffer, sys.stdout.buffer))
