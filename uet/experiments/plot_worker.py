"""Draw a run's plots in helper processes started before the run.

Importing matplotlib and drawing the five PNGs cost a ``uet run`` about 0.6 s and
1.2-1.8 s of one core after the run has ended. The command starts a helper first; it
imports :mod:`uet.experiments.plots` while the run computes, then (where the process may
use two cores or more) starts a second helper of its own, which imports in turn: so at
most two processes compute at once and the run keeps its core. When the run hands the
lead helper the results and time series (pickled once), it passes the same bytes on (from
a thread, as the other may still be importing) and the two draw side by side while the
command writes ``timeseries.json``: each claims a plot
(a marker file created exclusively in a private folder) before drawing it, the lead from
the costliest down (:data:`COST`), the other from the cheapest up, so a helper still
importing when the run ended simply draws fewer. The lead answers with every file name.
The PNGs are the same bytes either way (same matplotlib, same code, same data): each
helper runs :func:`uet.experiments.plots.write_plots` for the kinds it claimed.

Anything that goes wrong makes someone else draw: the lead draws what the second helper
had not drawn if that one cannot start, dies or fails; the command draws every plot in its
own process if the lead does, as without helpers, so errors read the same. Only the single
``uet run`` uses them (:func:`prestarted`); sweeps and the Python API draw in-process
(their points already fill the cores).

Protocol (private to this module): the parent writes the job, an 8-byte big-endian length
and a pickled ``(results, series, out_dir)`` tuple, then one pickled ``(kinds, claims)``
tuple (the kinds to draw; the claims folder, or None); the child answers one pickled
``("ok", names)`` or ``("error", text)`` and exits. Closing its stdin without a job ends it
(and its own helper).
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from uet.experiments.schema import PLOT_KINDS

__all__ = ["PlotWorker", "prestarted", "current", "helper_count"]

#: rough drawing cost of each kind (s at 16-128 hosts): the lead helper starts with the
#: costliest, the other with the cheapest
COST = {"link_utilisation": 0.55, "paths": 0.48, "fct_cdf": 0.40, "cwnd": 0.37,
        "queues": 0.20}

_CURRENT: contextvars.ContextVar[PlotWorker | None] = contextvars.ContextVar(
    "uet_plot_worker", default=None)


def _in_order(names: list[str]) -> list[str]:
    order = {f"{k}.png": i for i, k in enumerate(PLOT_KINDS)}
    return sorted(names, key=lambda n: order.get(n, len(order)))


class PlotWorker:
    """One helper process (and, through it, ``helpers - 1`` more) that draws plots."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[bytes] | None = None
        self._sent = False

    def start(self, helpers: int = 1) -> bool:
        """Start the helper; False (and no helper) if the process cannot be started."""
        root = str(Path(__file__).resolve().parents[2])
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "uet.experiments.plot_worker", str(max(1, helpers))],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                env=env)
        except OSError:
            self._proc = None
        return self._proc is not None

    @property
    def pid(self) -> int | None:
        """The helper's process ID while it runs."""
        return None if self._proc is None else self._proc.pid

    def submit(self, results: Mapping[str, Any], series: Mapping[str, Any] | None,
               out_dir: str | Path, kinds: Sequence[str] = PLOT_KINDS) -> bool:
        """Hand the helper the plots to draw; False if it cannot take them (then the
        caller draws them itself)."""
        try:
            job = pickle.dumps((dict(results), series, str(out_dir)),
                               protocol=pickle.HIGHEST_PROTOCOL)
        except (pickle.PicklingError, TypeError, AttributeError):
            return False
        return self.submit_job(job, kinds)

    def submit_job(self, job: bytes, kinds: Sequence[str], claims: str | None = None) -> bool:
        """Hand over a job already pickled (one pickle for every helper); ``claims``: the
        folder where helpers sharing ``kinds`` claim each before drawing it."""
        proc = self._proc
        if proc is None or self._sent or proc.stdin is None:
            return False
        try:
            proc.stdin.write(len(job).to_bytes(8, "big"))
            proc.stdin.write(job)
            pickle.dump((tuple(kinds), claims), proc.stdin, protocol=pickle.HIGHEST_PROTOCOL)
            proc.stdin.close()
        except OSError:
            self.close()
            return False
        self._sent = True
        return True

    def result(self) -> list[str] | None:
        """The file names written, in ``PLOT_KINDS`` order, or None if the helper failed
        (the caller then draws in-process)."""
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


def helper_count() -> int:
    """Two helpers where this process may run on two cores or more, else one."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        cores = os.cpu_count() or 1
    return 2 if cores >= 2 else 1


def current() -> PlotWorker | None:
    """The helper :func:`prestarted` set up for this run, if any (taken: one run, one
    helper)."""
    worker = _CURRENT.get()
    if worker is not None:
        _CURRENT.set(None)
    return worker


@contextlib.contextmanager
def prestarted(enabled: bool = True, helpers: int | None = None
               ) -> Iterator[PlotWorker | None]:
    """Start the lead helper (of ``helpers`` in all, default :func:`helper_count`) for the
    run inside the ``with`` block, when ``enabled``; ended on the way out whatever
    happened."""
    worker = PlotWorker() if enabled else None
    if worker is not None and not worker.start(helpers or helper_count()):
        worker = None
    token = _CURRENT.set(worker)
    try:
        yield worker
    finally:
        _CURRENT.reset(token)
        if worker is not None:
            worker.close()


def _read_job(stdin: IO[bytes]) -> tuple[bytes, tuple[str, ...], str | None] | None:
    head = stdin.read(8)
    if len(head) < 8:
        return None  # the run ended without plots (failed, or nothing to draw)
    n = int.from_bytes(head, "big")
    job = stdin.read(n)
    if len(job) < n:
        return None
    try:
        kinds, claims = pickle.load(stdin)
    except EOFError:
        return None
    return job, tuple(kinds), claims


def _claim(claims: str | None, kind: str) -> bool:
    """Whether this helper draws ``kind``: the first to create its marker does."""
    if claims is None:
        return True
    try:
        os.close(os.open(os.path.join(claims, kind), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    return True


def _serve(stdin: IO[bytes], stdout: IO[bytes], helpers: int) -> int:
    from uet.experiments.plots import write_plots  # the import this process exists for

    sub = None
    if helpers > 1:  # the next helper imports now, while this one waits: one at a time
        sub = PlotWorker()
        if not sub.start(helpers - 1):
            sub = None
    made = None
    try:
        got = _read_job(stdin)
        if got is None:
            return 0
        job, kinds, claims = got
        results, series, out_dir = pickle.loads(job)
        handing = None
        if sub is not None:
            if claims is None:
                claims = made = tempfile.mkdtemp(prefix="uet-plots-")
            # a thread writes the job: the pipe blocks until the other helper, maybe still
            # importing, reads it, and this one draws meanwhile
            handing = threading.Thread(target=sub.submit_job, args=(job, kinds, claims),
                                       daemon=True)
            handing.start()
        # work stealing: the lead takes the costliest kinds first, the others the
        # cheapest, each claiming a kind before drawing it; a helper still importing when
        # the job came joins late and so draws less
        order = sorted(kinds, key=lambda k: (-COST.get(k, 0.0), k))
        if made is None and claims is not None:
            order.reverse()
        try:
            names: list[str] = []
            drawn = []
            for kind in order:
                if _claim(claims, kind):
                    drawn.append(kind)
                    names += write_plots(results, series, out_dir, only=(kind,))
            if sub is not None and handing is not None:
                handing.join()
                theirs = sub.result()  # None if the job could not be handed over
                if theirs is None:  # it failed or died: draw what it may have claimed
                    rest = tuple(k for k in kinds if k not in drawn)
                    theirs = write_plots(results, series, out_dir, only=rest)
                names += theirs
            reply: tuple[str, Any] = ("ok", _in_order(names))
        except Exception as exc:  # noqa: BLE001 - reported; the parent draws and raises
            reply = ("error", f"{type(exc).__name__}: {exc}")
        pickle.dump(reply, stdout, protocol=pickle.HIGHEST_PROTOCOL)
        stdout.flush()
        return 0
    finally:
        if sub is not None:
            sub.close()
        if made is not None:
            shutil.rmtree(made, ignore_errors=True)


if __name__ == "__main__":
    code = _serve(sys.stdin.buffer, sys.stdout.buffer,
                  int(sys.argv[1]) if len(sys.argv) > 1 else 1)
    sys.stdout.flush()
    # no interpreter teardown (matplotlib's takes ~0.1-0.2 s): the command waits for the
    # helper's exit, and everything of value is written and flushed by now
    os._exit(code)
