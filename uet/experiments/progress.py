"""Progress bars: for a run, messages done out of the total and virtual time reached; for
a sweep, points finished out of the total.

The runner calls :meth:`RunProgress.update` as often as it likes; the display is refreshed
at most every ``min_interval_s`` of wall time, so calling it per event costs little.
"""

from __future__ import annotations

import time
from types import TracebackType

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)

PS_PER_US = 1_000_000


class RunProgress:
    """``with RunProgress(total_messages, time_limit_ps) as p: p.update(now_ps, done)``."""

    def __init__(self, total_messages: int, time_limit_ps: int | None = None, *,
                 description: str = "run", enabled: bool = True,
                 console: Console | None = None, min_interval_s: float = 0.1) -> None:
        self.total = total_messages
        self.limit = time_limit_ps
        self.enabled = enabled
        self.min_interval = min_interval_s
        self.now_ps = 0
        self.done = 0
        self._last = 0.0
        self._progress: Progress | None = None
        self._task = None
        if enabled:
            self._progress = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("messages"),
                TextColumn("[cyan]{task.fields[vtime]}"),
                TimeElapsedColumn(),
                console=console or Console(stderr=True),
                transient=False,
            )
            self._task = self._progress.add_task(description, total=total_messages,
                                                 vtime=self._vtime())

    def _vtime(self) -> str:
        text = f"t = {self.now_ps / PS_PER_US:,.1f} µs"
        if self.limit:
            text += f" of {self.limit / PS_PER_US:,.0f} µs"
        return text

    def __enter__(self) -> RunProgress:
        if self._progress is not None:
            self._progress.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.refresh()
        if self._progress is not None:
            self._progress.stop()

    def update(self, now_ps: int, done: int, *, force: bool = False) -> None:
        """Virtual time reached and messages delivered so far."""
        self.now_ps = now_ps
        self.done = done
        if self._progress is None:
            return
        t = time.monotonic()
        if force or t - self._last >= self.min_interval:
            self._last = t
            self.refresh()

    def refresh(self) -> None:
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, completed=self.done, vtime=self._vtime())


class PointProgress:
    """Sweep progress: points finished out of the total (resumed and failed ones counted
    apart). On a terminal a bar, with a line printed above it per failed point; elsewhere
    (logs, batch jobs) one line per point."""

    def __init__(self, total_points: int, *, console: Console | None = None,
                 enabled: bool = True, description: str = "sweep") -> None:
        self.total = total_points
        self.console = console or Console(stderr=True)
        self.bar = enabled and (self.console.is_terminal or self.console.is_jupyter)
        self.done = self.failed = self.resumed = 0
        self._progress: Progress | None = None
        self._task = None
        if self.bar:
            self._progress = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("points"),
                TextColumn("{task.fields[extra]}"),
                TimeElapsedColumn(),
                console=self.console,
                transient=False,
            )
            self._task = self._progress.add_task(description, total=total_points, extra="")

    def __enter__(self) -> PointProgress:
        if self._progress is not None:
            self._progress.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._progress is not None:
            self._progress.stop()

    def point_done(self, index: int, outcome: dict) -> None:
        """Record one finished point (an executor's ``on_result``)."""
        self.done += 1
        error = outcome.get("error")
        if error:
            self.failed += 1
            state = f"[red]failed[/red]: {escape(str(error))}"
        elif outcome.get("resumed"):
            self.resumed += 1
            state = f"already done ({escape(str(outcome.get('dir')))}), skipped"
        else:
            state = f"done ({outcome.get('wall_time_s', 0.0):.2f} s)"
        if self._progress is not None and self._task is not None:
            parts = []
            if self.failed:
                parts.append(f"[red]{self.failed} failed")
            if self.resumed:
                parts.append(f"{self.resumed} resumed")
            self._progress.update(self._task, completed=self.done, extra=", ".join(parts))
            if error:
                self._progress.console.print(f"point {index} {state}", highlight=False)
        else:
            self.console.print(f"point {index} {state} [{self.done}/{self.total}]",
                               highlight=False)
