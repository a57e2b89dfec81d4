"""Run cases against a target without pytest, and the result records both paths share.

``uet conformance`` runs the catalogue through pytest (the plugin); this module is the
engine under it and the programmatic API (``run_cases``) used by tools and fault-injection
tests. A failing case keeps its capture (``<capture_dir>/<ID>.pcapng``) and its result
names it.
"""

from __future__ import annotations

import os
import time
import traceback
from dataclasses import asdict, dataclass
from typing import Any

from .capture import CaseCapture
from .peer import ConformanceFailure
from .registry import Case

PASS, FAIL, ERROR, NOT_RUN = "pass", "fail", "error", "not run"


@dataclass
class Result:
    """Outcome of one case: ``status`` pass / fail / error / not run, ``why`` (first line:
    the rule that was broken and what was seen), the capture kept, the duration."""

    id: str
    ref: str
    rule: str
    status: str
    why: str = ""
    capture: str | None = None
    duration_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def failure_text(case: Case, exc: BaseException) -> tuple[str, str]:
    """(status, why) for an exception raised by a case."""
    if isinstance(exc, ConformanceFailure):
        return FAIL, f"{case.id} [ref {case.ref}] {case.rule}: {exc}"
    if isinstance(exc, AssertionError):
        return FAIL, f"{case.id} [ref {case.ref}] {case.rule}: {exc}"
    tb = traceback.format_exception_only(type(exc), exc)[-1].strip()
    return ERROR, f"{case.id}: the case could not run: {tb}"


def keep_capture(capture: CaseCapture, capture_dir: str | os.PathLike[str] | None,
                 case_id: str) -> str | None:
    if capture_dir is None or not capture.records:
        return None
    return capture.write(os.path.join(os.fspath(capture_dir), f"{case_id}.pcapng"))


def run_case(case: Case, target: Any, index: int = 0, *,
             capture_dir: str | os.PathLike[str] | None = None,
             keep_all: bool = False) -> Result:
    """Run one case against ``target``; never raises for a failing device."""
    reason = target.unavailable(case)
    if reason:
        return Result(case.id, case.ref, case.rule, NOT_RUN, reason)
    cap = CaseCapture(case.id)
    t0 = time.perf_counter()
    status, why = PASS, ""
    try:
        with target.peer(case, index, cap) as peer:
            case.fn(peer)
    except Exception as exc:  # a case must never take the run down
        status, why = failure_text(case, exc)
    dt = time.perf_counter() - t0
    path = keep_capture(cap, capture_dir, case.id) if (status != PASS or keep_all) else None
    return Result(case.id, case.ref, case.rule, status, why, path, dt)


def run_cases(cases: list[Case], target: Any, **kw: Any) -> list[Result]:
    """Run ``cases`` in order (each with its catalogue index for its scratch slot)."""
    return [run_case(c, target, i, **kw) for i, c in enumerate(cases)]


def summary(results: list[Result]) -> dict[str, int]:
    out = {PASS: 0, FAIL: 0, ERROR: 0, NOT_RUN: 0}
    for r in results:
        out[r.status] += 1
    return out
