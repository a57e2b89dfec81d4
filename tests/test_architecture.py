"""The protocol core stays sans-IO: no Trio, no clock, no sockets (docs/architecture.md)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "uet"
CORE = [*(ROOT / pkg for pkg in ("wire", "native", "pds", "ses", "cms")),
        ROOT / "fep.py", ROOT / "fep_config.py", ROOT / "profiles.py"]
FORBIDDEN_MODULES = {"trio", "asyncio", "selectors", "threading"}
FORBIDDEN_CALLS = {("time", "time"), ("time", "monotonic"), ("time", "perf_counter"),
                   ("datetime", "now"), ("socket", "socket")}  # inet_pton is fine


def _files():
    for path in CORE:
        yield from (sorted(path.rglob("*.py")) if path.is_dir() else [path])


@pytest.mark.parametrize("path", list(_files()), ids=lambda p: str(p.relative_to(ROOT)))
def test_core_module_is_sans_io(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name.split(".")[0] for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module.split(".")[0]]
        else:
            names = []
        bad = FORBIDDEN_MODULES.intersection(names)
        assert not bad, f"{path.name}:{node.lineno} imports {bad}: the core must stay sans-IO"
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            base = node.func.value
            if isinstance(base, ast.Name) and (base.id, node.func.attr) in FORBIDDEN_CALLS:
                raise AssertionError(f"{path.name}:{node.lineno} calls {base.id}."
                                     f"{node.func.attr}: the core does no I/O and reads no "
                                     "clock (time is passed in as now)")


def test_core_file_list_is_not_empty():
    assert len(list(_files())) > 30
