"""The protocol core stays sans-IO: no Trio, no clock, no sockets (docs/architecture.md).

And Trio itself is imported only by ``uet.runtime`` (plus the drivers still listed in
``TRIO_ALLOWED`` below, each with the reason it has not moved yet).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "uet"
CORE = [*(ROOT / pkg for pkg in ("wire", "native", "pds", "ses", "cms", "roce", "tss")),
        ROOT / "endpoint", ROOT / "profiles"]
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


#: Modules outside uet/runtime that may still import trio. Each entry is a driver that runs
#: the virtual fabric through the Trio API and is due to move behind uet.runtime.
TRIO_ALLOWED = {
    "experiments/runner.py": "drives the Fabric API with trio.run",
    "bench/emulation.py": "drives the Fabric API with trio.run",
    "commands/serve.py": "runs the runtime responder with trio.run",
}


def _imports_trio(path: Path) -> int | None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "trio"
                                                for a in node.names):
            return node.lineno
        if isinstance(node, ast.ImportFrom) and node.module and \
                node.module.split(".")[0] == "trio":
            return node.lineno
    return None


def test_trio_only_in_runtime():
    bad = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("runtime/") or rel in TRIO_ALLOWED:
            continue
        line = _imports_trio(path)
        if line is not None:
            bad.append(f"uet/{rel}:{line}")
    assert not bad, f"trio imported outside uet/runtime: {bad}"


def test_runtime_is_where_trio_lives():
    assert _imports_trio(ROOT / "runtime" / "fabric.py") is not None
    for rel in TRIO_ALLOWED:
        assert (ROOT / rel).exists(), f"stale TRIO_ALLOWED entry {rel}"


def test_fabric_does_not_import_runtime():
    """The fabric models sit below the runtime; only the compatibility alias names it."""
    allowed = {"api.py", "__init__.py"}
    for path in sorted((ROOT / "fabric").rglob("*.py")):
        if path.name in allowed:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith("uet.runtime"), \
                    f"{path.name}:{node.lineno} imports {node.module}"


#: PDS modules that hold protocol state: they reach the end point only through the
#: PdcContext it hands them (docs/pds.md, "Structure"), never by importing it
PDC_MODULES = ("initiator.py", "target.py", "recovery.py", "ack.py", "rudi.py", "uud.py",
               "context.py", "manager.py", "states.py")


@pytest.mark.parametrize("name", PDC_MODULES)
def test_pdc_modules_do_not_import_the_end_point(name):
    tree = ast.parse((ROOT / "pds" / name).read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            assert node.module != "uet.pds.endpoint", f"pds/{name}:{node.lineno}"
        if isinstance(node, ast.Attribute):
            assert node.attr not in ("now_hint",), f"pds/{name}:{node.lineno}: {node.attr}"
    src = (ROOT / "pds" / name).read_text(encoding="utf-8")
    assert "self.ep." not in src and "getattr(cc" not in src, name
