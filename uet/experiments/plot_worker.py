"""Draw a run's plots in a helper process started before the run.

Importing matplotlib and drawing the five PNGs cost a ``uet run`` about 0.6 s and
1.0-1.8 s of one core after the run has ended. The command starts a helper first; it
imports :mod:`uet.experiments.plots` while the run computes (on the other core, where
there is one). When the run hands it the results and time series (pickled once), the
helper forks, where the process may use two cores or more, one more drawer (matplotlib
is then imported once, not twice, and the job unpickled once), and the two draw side by
side while the command writes ``timeseries.json``: each claims a plot (a marker file
created exclusively in a private folder) before drawing it, the helper from the costliest
down (:data:`COST`), the fork from the cheapest up, so each takes more if the other is
slow. The helper answers with every file name. The PNGs are the same bytes either way
(same matplotlib, same code, same data): each process runs
:func:`uet.experiments.plots.write_plots` for the kinds it claimed.

Anything that goes wrong makes someone else draw: the helper draws what the fork had not
drawn if it cannot start, dies or fails; the command draws every plot in its own process
if the helper does, as without helpers, so errors read the same. Only the single
``uet run`` uses them (:func:`prestarted`); sweeps and the Python API draw in-process
(their points already fill the cores).

Protocol (private to this module): the parent writes the job, an 8-byte big-endian length
and a pickled ``(results, series, out_dir, kinds)`` tuple; the helper answers one pickled
``("ok", names)`` or ``("error", text)`` and exits. Closing its stdin without a job ends
it. A fork answers its helper the same way through a pipe, with the kinds it drew.
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
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from uet.experiments.schema import PLOT_KINDS

__all__ = ["PlotWorker", "prestarted", "current", "helper_count"]

#: rough drawing cost of each kind (s at 16-128 hosts): the helper starts with the
#: costliest, its fork with the cheapest
COST = {"link_utilisation": 0.55, "paths": 0.48, "fct_cdf": 0.40, "cwnd": 0.37,
        "queues": 0.20}

_CURRENT: contextvars.ContextVar[PlotWorker | None] = contextvars.ContextVar(
    "uet_plot_worker", default=None)


def _by_cost(kinds: Sequence[str], costliest_first: bool = False) -> list[str]:
    """``kinds`` by :data:`COST`, cheapest first (or costliest), then by name."""
    sign = -1.0 if costliest_first else 1.0
    return sorted(kinds, key=lambda k: (sign * COST.get(k, 0.0), k))


def _in_order(names: list[str]) -> list[str]:
    order = {f"{k}.png": i for i, k in enumerate(PLOT_KINDS)}
    return sorted(names, key=lambda n: order.get(n, len(order)))


class PlotWorker:
    """One helper process (and, in it, ``helpers - 1`` forks) that draws plots."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[bytes] | None = None
        self._sent = False

    def start(self, helpers: int = 1) -> bool:
        """Start the helper; False (and no helper) if the process cannot be started."""
        root = str(Path(__file__).resolve().parents[2])
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        try:
            # -P: not the working folder first on the path, where another checkout's uet
            # package would shadow this one (the command's, put first by PYTHONPATH)
            self._proc = subprocess.Popen(
                [sys.executable, "-P", "-m", "uet.experiments.plot_worker",
                 str(max(1, helpers))],
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
        proc = self._proc
        if proc is None or self._sent or proc.stdin is None:
            return False
        try:
            job = pickle.dumps((dict(results), series, str(out_dir), tuple(kinds)),
                               protocol=pickle.HIGHEST_PROTOCOL)
        except (pickle.PicklingError, TypeError, AttributeError):
            return False
        try:
            proc.stdin.write(len(job).to_bytes(8, "big"))
            proc.stdin.write(job)
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
    """Two drawers (the helper and a fork) where this process may run on two cores or
    more, else one."""
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
    """Start the helper (``helpers`` drawers in all, default :func:`helper_count`) for
    the run inside the ``with`` block, when ``enabled``; ended on the way out whatever
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


def _read_job(stdin: IO[bytes]) -> tuple[Any, Any, str, tuple[str, ...]] | None:
    head = stdin.read(8)
    if len(head) < 8:
        return None  # the run ended without plots (failed, or nothing to draw)
    n = int.from_bytes(head, "big")
    blob = stdin.read(n)
    if len(blob) < n:
        return None
    results, series, out_dir, kinds = pickle.loads(blob)
    return results, series, out_dir, tuple(kinds)


def _claim(claims: str | None, kind: str) -> bool:
    """Whether this process draws ``kind``: the first to create its marker does."""
    if claims is None:
        return True
    try:
        os.close(os.open(os.path.join(claims, kind), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    return True


def _draw(job: tuple[Any, Any, str, tuple[str, ...]], order: Sequence[str],
          claims: str | None, claimed: Sequence[str] = ()) -> tuple[list[str], list[str]]:
    """Draw the kinds ``claimed`` already, then each kind of ``order`` this process
    claims; returns (kinds drawn, file names)."""
    from uet.experiments.plots import write_plots

    results, series, out_dir, _ = job
    drawn: list[str] = []
    names: list[str] = []
    for kind in [*claimed, *(k for k in order if k not in claimed)]:
        if kind in claimed or _claim(claims, kind):
            drawn.append(kind)
            names += write_plots(results, series, out_dir, only=(kind,))
    return drawn, names


def _fork_main(job: tuple[Any, Any, str, tuple[str, ...]], order: Sequence[str],
               claims: str, first: str, answer: int) -> None:
    """A forked drawer: draw ``first`` and what else it claims, write ``("ok", kinds,
    names)`` or ``("error", text)`` to the ``answer`` pipe. Never returns: the fork ends
    here, whatever happens."""
    code = 1
    try:
        try:
            reply: tuple[Any, ...] = ("ok", *_draw(job, order, claims, (first,)))
        except Exception as exc:  # noqa: BLE001 - reported; the helper draws instead
            reply = ("error", f"{type(exc).__name__}: {exc}")
        with os.fdopen(answer, "wb") as w:
            pickle.dump(reply, w, protocol=pickle.HIGHEST_PROTOCOL)
        code = 0
    finally:
        os._exit(code)


def _fork_drawers(job: tuple[Any, Any, str, tuple[str, ...]], claims: str, n: int,
                  inherited: Sequence[IO[bytes]] = ()) -> list[tuple[int, int]]:
    """Fork up to ``n`` drawers sharing the job's kinds through ``claims``. Each gets the
    cheapest kind still free, claimed before it starts (so each draws at least one),
    then claims kinds from the cheapest up; it closes its copies of ``inherited`` (the
    helper's own pipes, which only the helper answers on). Returns (pid, answer pipe)
    per fork."""
    cheapest = _by_cost(job[3])
    forks: list[tuple[int, int]] = []
    for _ in range(n):
        first = next((k for k in cheapest if _claim(claims, k)), None)
        if first is None:
            break
        r, w = os.pipe()
        try:
            pid = os.fork()
        except OSError:  # cannot fork: the helper draws that kind as well
            os.close(r)
            os.close(w)
            os.unlink(os.path.join(claims, first))
            break
        if pid == 0:
            os.close(r)
            for stream in inherited:
                with contextlib.suppress(OSError, ValueError):
                    os.close(stream.fileno())
            _fork_main(job, cheapest, claims, first, w)
        os.close(w)
        forks.append((pid, r))
    return forks


def _answer(pid: int, fd: int) -> tuple[list[str], list[str]] | None:
    """A fork's (kinds drawn, file names), or None if it failed or died; reaps it."""
    try:
        with os.fdopen(fd, "rb") as r:
            reply = pickle.load(r)
    except Exception:  # noqa: BLE001 - it died before answering
        reply = ("error", None)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)
    return (list(reply[1]), list(reply[2])) if reply[0] == "ok" else None


def _serve(stdin: IO[bytes], stdout: IO[bytes], helpers: int) -> int:
    import uet.experiments.plots  # noqa: F401 - the import this process exists for

    made = None
    forks: list[tuple[int, int]] = []
    try:
        try:
            job = _read_job(stdin)
            if job is None:
                return 0
            kinds = job[3]
            claims = None
            if helpers > 1 and len(kinds) > 1 and hasattr(os, "fork"):
                claims = made = tempfile.mkdtemp(prefix="uet-plots-")
                forks = _fork_drawers(job, claims, helpers - 1, (stdin, stdout))
            costliest = _by_cost(kinds, costliest_first=True)
            drawn, names = _draw(job, costliest, claims)
            failed = False
            while forks:
                theirs = _answer(*forks.pop(0))
                if theirs is None:
                    failed = True
                else:
                    drawn += theirs[0]
                    names += theirs[1]
            if failed:  # a fork failed or died: draw here what nobody drew
                names += _draw(job, [k for k in kinds if k not in drawn], None)[1]
            reply: tuple[str, Any] = ("ok", _in_order(names))
        except Exception as exc:  # noqa: BLE001 - reported; the parent draws and raises
            reply = ("error", f"{type(exc).__name__}: {exc}")
        finally:
            # no fork outlives the answer: the command may draw the same files next
            for pid, fd in forks:
                _answer(pid, fd)
        pickle.dump(reply, stdout, protocol=pickle.HIGHEST_PROTOCOL)
        stdout.flush()
        return 0
    finally:
        if made is not None:
            shutil.rmtree(made, ignore_errors=True)


if __name__ == "__main__":
    code = _serve(sys.stdin.buffer, sys.stdout.buffer,
                  int(sys.argv[1]) if len(sys.argv) > 1 else 1)
    sys.stdout.flush()
    # no interpreter teardown (matplotlib's takes ~0.1-0.2 s): the command waits for the
    # helper's exit, and everything of value is written and flushed by now
    os._exit(code)
