"""The progress bar shows messages done and virtual time."""

from __future__ import annotations

import io
import re

from rich.console import Console

from uet.experiments.progress import RunProgress


def test_progress_reports_time_and_messages() -> None:
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=False, width=120)
    with RunProgress(10, 2_000_000_000, console=console, min_interval_s=0) as p:
        for i in range(11):
            p.update(i * 100_000_000, i)
    text = buf.getvalue()
    assert "10/10" in text and "1,000.0 µs" in text and "2,000 µs" in text


def test_disabled_progress_is_silent() -> None:
    with RunProgress(5, None, enabled=False) as p:
        p.update(10, 1)
    assert p.done == 1 and p.now_ps == 10


def test_sweep_progress_counts_points() -> None:
    from uet.experiments.progress import PointProgress

    outcomes = [{"wall_time_s": 0.5}, {"error": "RuntimeError: boom"},
                {"resumed": True, "dir": "002_seed=3"}, {"wall_time_s": 1.25}]
    # on a terminal: a bar counting points, failures printed above it
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, width=120)
    with PointProgress(4, console=console) as p:
        for i, o in enumerate(outcomes):
            p.point_done(i, o)
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", buf.getvalue())  # no colours, cursor moves
    assert p.bar and (p.done, p.failed, p.resumed) == (4, 1, 1)
    assert "4/4" in text and "points" in text and "1 failed" in text and "1 resumed" in text
    assert "point 1 failed: RuntimeError: boom" in text
    # elsewhere (a log, a batch job): one line per point
    buf = io.StringIO()
    with PointProgress(4, console=Console(file=buf, force_terminal=False)) as p:
        for i, o in enumerate(outcomes):
            p.point_done(i, o)
    lines = buf.getvalue().splitlines()
    assert not p.bar and lines == [
        "point 0 done (0.50 s) [1/4]", "point 1 failed: RuntimeError: boom [2/4]",
        "point 2 already done (002_seed=3), skipped [3/4]", "point 3 done (1.25 s) [4/4]"]
