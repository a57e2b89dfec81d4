"""The protocol core stays sans-IO: no Trio, no clock, no sockets (docs/architecture.md).

Trio itself is imported only by ``uet.runtime`` (``TRIO_ALLOWED`` is empty), and no two
uet modules import each other, directly or around a cycle (imports only go down).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "uet"
CORE = [*(ROOT / pkg for pkg in ("wire", "native", "pds", "ses", "cms", "roce", "tss",
                                   "fabric")),
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


#: Modules outside uet/runtime that may import trio (none: the drivers of ``uet run``,
#: ``uet bench`` and ``uet serve`` call ``uet.runtime.run`` instead of ``trio.run``).
TRIO_ALLOWED: dict[str, str] = {}


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


# ------------------------------------------------------------------------- import cycles

#: Imports that may close a cycle, each with the documented reason: ``(importer,
#: imported): why``. Only imports inside a function may be listed (a lazy import runs
#: after both modules are loaded); a module-level one never. Empty: no cycle at all.
LAZY_CYCLES_ALLOWED: dict[tuple[str, str], str] = {}

#: Type-only imports (``if TYPE_CHECKING:``) that may close a cycle, with the reason.
#: Empty: a module that needs the type of one above it names what it uses in a narrow
#: protocol (uet.ses.context, uet.pds.states.NamedPdc) or a type parameter
#: (uet.pds.manager.PdcManager[InitiatorPdc, TargetPdc]).
TYPE_CYCLES_ALLOWED: dict[tuple[str, str], str] = {}


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def _import_edges(mods: dict[str, Path]) -> dict[tuple[str, str], str]:
    """``(importer, imported) -> "top" | "type" | "lazy"`` between uet modules.

    Counted: every ``import``/``from`` of a uet module, at module level, in a
    ``TYPE_CHECKING`` block ("type": a type-only import still points upwards), or inside
    a function ("lazy"). ``from pkg import sub`` names the submodule ``sub``; a submodule's
    implicit import of its own package does not count.
    """
    def resolve(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    edges: dict[tuple[str, str], str] = {}
    for mod, path in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        in_func: set[int] = set()
        type_only: set[int] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                in_func.update(id(sub) for sub in ast.walk(node))
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                type_only.update(id(sub) for sub in ast.walk(node))
        pkg = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = pkg.split(".")[:len(pkg.split(".")) - node.level + 1]
                    base = ".".join(up + ([base] if base else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base
                           for a in node.names]
            else:
                continue
            for t in targets:
                dst = resolve(t) if t.split(".")[0] == "uet" else None
                if dst is None or dst == mod:
                    continue
                kind = "lazy" if id(node) in in_func else \
                    "type" if id(node) in type_only else "top"
                if edges.get((mod, dst)) != "top":
                    edges[(mod, dst)] = kind
    return edges


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    x = stack.pop()
                    on.discard(x)
                    comp.append(x)
                    if x == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_no_import_cycles_between_uet_modules():
    """Imports only go down: no two uet modules reach each other through imports
    (type-only ones included), except the imports listed in LAZY_CYCLES_ALLOWED and
    TYPE_CYCLES_ALLOWED with their reasons."""
    edges = _import_edges(_modules())
    allowed = {**LAZY_CYCLES_ALLOWED, **TYPE_CYCLES_ALLOWED}
    for table, kind in ((LAZY_CYCLES_ALLOWED, "lazy"), (TYPE_CYCLES_ALLOWED, "type")):
        for pair, why in table.items():
            assert edges.get(pair) == kind, f"{pair} ({why}): not a {kind} import (stale?)"
    graph: dict[str, set[str]] = {}
    for (a, b) in edges:
        if (a, b) not in allowed:
            graph.setdefault(a, set()).add(b)
    bad = []
    for comp in _cycles(graph):
        inside = sorted(f"{a} -> {b} ({edges[a, b]})" for a in comp
                        for b in graph.get(a, ()) if b in comp)
        bad.append("; ".join(inside))
    assert not bad, "import cycles: " + " | ".join(bad)


def test_the_cycle_check_finds_a_cycle():
    graph = {"uet.a": {"uet.b"}, "uet.b": {"uet.c"}, "uet.c": {"uet.a"}, "uet.d": {"uet.a"}}
    assert _cycles(graph) == [["uet.a", "uet.b", "uet.c"]]
    assert _cycles({"uet.a": {"uet.b"}, "uet.b": set()}) == []
    edges = _import_edges(_modules())
    assert edges["uet.fabric.network", "uet.fabric.routing"] == "top"
    assert edges["uet.runtime.host", "uet.endpoint.fep"] == "type"  # TYPE_CHECKING
    assert edges["uet.experiments.config", "uet.experiments.ideal"] == "lazy"
    assert edges["uet.ses.initiator", "uet.ses.atomics"] == "top"  # from uet.ses import
    assert ("uet.ses.initiator", "uet.ses") not in edges
