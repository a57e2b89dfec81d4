"""The parsers of the benchmark tools (the tools themselves run for minutes)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


#: part of a callgrind_annotate report: totals, counts with and without shares, dots
ANNOTATE = (ROOT / "tests" / "data" / "callgrind_annotate.txt").read_text()


def test_cache_misses_reads_every_row_of_callgrind_annotate() -> None:
    cm = _load("cache_misses")
    totals, rows = cm.parse_annotate(ANNOTATE)
    assert totals["Ir"] == 58_574_942 and totals["DLmw"] == 26_464
    names = [name for name, _ in rows]
    assert names == ["fabric_core.c:swport_forward",
                     "memmove-vec-unaligned-erms.S:__memcpy_avx_unaligned_erms", "???:f"]
    memcpy = rows[1][1]
    assert memcpy["ILmr"] == 0 and memcpy["DLmr"] == 0 and memcpy["DLmw"] == 15_772
    assert rows[2][1] == {"Ir": 3, "Dr": 0, "Dw": 1, "I1mr": 0, "D1mr": 0, "D1mw": 0,
                          "ILmr": 0, "DLmr": 0, "DLmw": 0}
