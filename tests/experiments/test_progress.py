"""The progress bar shows messages done and virtual time."""

from __future__ import annotations

import io

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
