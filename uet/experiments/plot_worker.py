"""Draw a run's plots in a helper process started before the run.

Importing matplotlib and drawing the five PNGs cost a ``uet run`` about 0.6 s and
0.6-1.3 s of one core after the run has ended. The command starts this helper first: it
imports :mod:`uet.experiments.plots` on the other core while the run computes, then draws
when the run hands it the results and time series (pickled over its stdin), while the
command writes ``timeseries.json``. The PNGs are the same bytes either way (same matplotlib,
same code, same data): :func:`uet.experiments.plots.write_plots` runs in the helper.

Anything that goes wrong with the helper (it cannot start, dies, or its drawing raises)
makes the caller draw in its own process, as without a helper, so errors read the same.
Only the single ``uet run`` uses it (:func:`prestarted`); sweeps and the Python API draw
in-process (their points already fill the cores).

Protocol (private to this module): the parent writes one pickled ``(results, series,
out_dir)`` tuple; the child answers one pickled ``("ok", names)`` or ``("error", text)``
and exits. Closing its stdin without a job ends it.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import pickle
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, Any

__all__ = ["PlotWorker", "prestarted", "current"]

_CURRENT: contextvars.ContextVar[PlotWorker | None] = contextvars.ContextVar(
    "uet_plot_worker", default=None)


class PlotWorker:
    """One helper process that draws one run's plots (see the module docstring)."""

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

    def submit(self, results: Mapping[str, Any], series: Mapping[str, Any] | None,
               out_dir: str | Path) -> bool:
        """Hand the helper the plots to draw; False if it cannot take them (then the
        caller draws them itself)."""
        proc = self._proc
        if proc is None or self._sent or proc.stdin is None:
            return False
        try:
            pickle.dump((dict(results), series, str(out_dir)), proc.stdin,
                        protocol=pickle.HIGHEST_PROTOCOL)
            proc.stdin.close()
        except (OSError, pickle.PicklingError, TypeError, AttributeError):
            self.close()
            return False
        self._sent = True
        return True

    def result(self) -> list[str] | None:
        """The file names the helper wrote, or None if it failed (the caller then draws
        in-process)."""
        proc = self._proc
        if proc is None or not self._sent or proc.stdout is None:
            return None
        try:
            status, value = pickle.load(proc.stdout)
        except Exception:  # noqa: BLE001 - a dead helper: draw in-process instead
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


def current() -> PlotWorker | None:
    """The helper :func:`prestarted` set up for this run, if any (taken: one run, one
    helper)."""
    worker = _CURRENT.get()
    if worker is not None:
        _CURRENT.set(None)
    return worker


@contextlib.contextmanager
def prestarted(enabled: bool = True) -> Iterator[PlotWorker | None]:
    """Start a helper for the run inside the ``with`` block (when ``enabled``); it is
    ended on the way out whatever happened."""
    worker = PlotWorker() if enabled else None
    if worker is not None and not worker.start():
        worker = None
    token = _CURRENT.set(worker)
    try:
        yield worker
    finally:
        _CURRENT.reset(token)
        if worker is not None:
            worker.close()


def _serve(stdin: IO[bytes], stdout: IO[bytes]) -> int:
    from uet.experiments.plots import write_plots  # the import this process exists for

    try:
        job = pickle.load(stdin)
    except EOFError:  # the run ended without plots (failed, or nothing to draw)
        return 0
    results, series, out_dir = job
    try:
        reply: tuple[str, Any] = ("ok", write_plots(results, series, out_dir))
    except Exception as exc:  # noqa: BLE001 - reported; the parent draws again and raises
        reply = ("error", f"{type(exc).__name__}: {exc}")
    pickle.dump(reply, stdout, protocol=pickle.HIGHEST_PROTOCOL)
    stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(_serve(sys.stdin.buffer, sys.stdout.buffer))
