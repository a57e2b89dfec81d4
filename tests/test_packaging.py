"""What a user gets from ``pip install .`` (a real wheel) and from a clone, not an editable
install of this checkout.

* The wheel is built from a copy of the sources, installed with pip into a fresh virtual
  environment made here, and its ``uet`` command runs from a folder outside the repository:
  ``uet profiles``, a small ``uet run``, one conformance case, ``uet wireshark path`` and
  ``uet serve`` must find everything they read inside the installed package.
* The environment holds exactly the wheel's declared dependencies and what they depend on
  (no network: each distribution of that closure is linked in from this interpreter's
  site-packages), so a missing dependency fails here as it would for a user (``uet
  conformance`` needs pytest at run time). ``--system-site-packages`` would not show that:
  it lends the venv every package of the base interpreter, test tools included.
* A clone named ``uet`` seen from its parent folder is a namespace package ``uet`` (and its
  ``experiments/`` folder ``uet.experiments``) unless the installed package comes first.
"""

from __future__ import annotations

import email.parser
import importlib.metadata as md
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
#: what a wheel is built from (what `pip install .` reads of the project)
SOURCES = ("pyproject.toml", "setup.py", "README.md", "MANIFEST.in", "uet")
#: a loopback address of this test process for `uet serve`
SERVE_IP = f"127.95.{20 + os.getpid() % 200}.1"


def _copy_sources(dst: Path) -> None:
    skip = shutil.ignore_patterns("__pycache__", "*.so", "*.pyc", "*.egg-info")
    for name in SOURCES:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, dst / name, ignore=skip)
        else:
            shutil.copy2(src, dst / name)


def _requirements(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as zf:
        meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        text = zf.read(meta).decode()
    return email.parser.Parser().parsestr(text).get_all("Requires-Dist") or []


def _closure(requirements: list[str]) -> list[md.Distribution]:
    """The installed distributions the requirements (without extras) pull in, recursively."""
    seen: dict[str, md.Distribution] = {}
    todo = [Requirement(r) for r in requirements]
    while todo:
        req = todo.pop()
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        name = canonicalize_name(req.name)
        if name in seen:
            continue
        try:
            dist = md.distribution(req.name)
        except md.PackageNotFoundError:
            pytest.fail(f"dependency {req} of the wheel is not installed here "
                        "(run `make test`, which installs the package and its dependencies)")
        seen[name] = dist
        todo.extend(Requirement(r) for r in dist.requires or [])
    return list(seen.values())


def _link_dependencies(dists: list[md.Distribution], site: Path) -> list[str]:
    """Link each distribution's top-level files and folders into ``site``."""
    linked = []
    for dist in dists:
        root = Path(dist.locate_file(""))
        files = dist.files
        assert files is not None, f"{dist.metadata['Name']} has no RECORD"
        for top in sorted({f.parts[0] for f in files}):
            if top in ("..", "__pycache__") or (site / top).exists():
                continue
            if (root / top).exists():
                (site / top).symlink_to(root / top)
                linked.append(top)
    return linked


def _site_packages(venv: Path) -> Path:
    out = subprocess.run([str(venv / "bin" / "python"), "-c",
                          "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         capture_output=True, text=True, check=True)
    return Path(out.stdout.strip())


def _run(cmd: list[str], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "UET_PROFILES_DIR", "VIRTUAL_ENV")}
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env=env)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, Path, Path]:
    """(venv, its site-packages, a work folder outside the repository)."""
    base = tmp_path_factory.mktemp("wheel")
    src = base / "src"
    src.mkdir()
    _copy_sources(src)
    dist = base / "dist"
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q",
                            "-w", str(dist), str(src)], capture_output=True, text=True,
                           timeout=600)
    assert build.returncode == 0, build.stderr[-3000:]
    (wheel,) = dist.glob("uet-*.whl")
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = _site_packages(venv)
    inst = subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"),
                           "install", "--no-deps", "--no-index", "-q", str(wheel)],
                          capture_output=True, text=True, timeout=300)
    assert inst.returncode == 0, inst.stderr[-3000:]
    _link_dependencies(_closure(_requirements(wheel)), site)
    work = base / "work"
    work.mkdir()
    return venv, site, work


@pytest.mark.slow
def test_wheel_holds_the_package_data(installed):
    _venv, site, _work = installed
    pkg = site / "uet"
    for rel in ("profiles/ai-base.toml", "profiles/ai-full.toml", "profiles/hpc.toml",
                "experiments/default.toml", "wireshark/uet.lua",
                "conformance/suite.py"):
        assert (pkg / rel).is_file(), rel
    assert not (site / "profiles").exists()  # nothing outside the package


@pytest.mark.slow
def test_wheel_commands_run_outside_the_repository(installed):
    venv, site, work = installed
    uet = str(venv / "bin" / "uet")
    where = _run([str(venv / "bin" / "python"), "-c", "import uet; print(uet.__file__)"], work)
    assert where.stdout.strip() == str(site / "uet" / "__init__.py"), where

    prof = _run([uet, "profiles", "--json"], work)
    assert prof.returncode == 0, prof.stderr
    assert sorted(json.loads(prof.stdout)) == ["ai-base", "ai-full", "hpc"]

    run = _run([uet, "run", "--set", "traffic.size=64KiB", "--no-progress",
                "--out", str(work / "run")], work)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    res = json.loads((work / "run" / "results.json").read_text())
    assert res["run"]["completed"] and res["summary"]["messages_delivered"] == 16
    assert str(site) in res["experiment"]["config"]["source"]["file"]
    for name in ("capture.pcapng", "fct_cdf.png", "cwnd.png", "link_utilisation.png"):
        assert (work / "run" / name).stat().st_size > 0, name

    conf = _run([uet, "conformance", "-k", "PDS-EST-001", "--capture-dir",
                 str(work / "cc")], work)
    assert conf.returncode == 0, conf.stdout[-2000:] + conf.stderr[-2000:]
    assert "PDS-EST-001" in conf.stdout and "pass" in conf.stdout

    lua = _run([uet, "wireshark", "path"], work)
    assert lua.returncode == 0, lua.stderr
    path = Path(lua.stdout.strip())
    assert path == site / "uet" / "wireshark" / "uet.lua" and path.stat().st_size > 10_000

    serve = _run([uet, "serve", "--listen", f"{SERVE_IP}:4793", "--duration", "0.3",
                  "--json"], work)
    assert serve.returncode == 0, serve.stderr
    lines = [json.loads(x) for x in serve.stdout.splitlines() if x.startswith("{")]
    assert lines[0]["setup"]["profile"] == "hpc" and "counters" in lines[-1]


def test_clone_seen_from_its_parent_folder(tmp_path):
    """``python -m uet`` from the folder holding a clone named ``uet``: the installed
    package, not the clone's folders, answers ``import uet.profiles`` and
    ``import uet.experiments``."""
    (tmp_path / "uet").symlink_to(ROOT, target_is_directory=True)
    code = ("import uet, uet.profiles, uet.experiments.config; "
            "print(uet.__file__); print(uet.profiles.ProfileError.__name__)")
    out = _run([sys.executable, "-c", code], tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    where, name = out.stdout.split()
    assert where != "None" and not where.startswith(str(tmp_path)), where
    assert Path(where).is_file() and name == "ProfileError"
    prof = _run([sys.executable, "-m", "uet", "profiles", "--json"], tmp_path)
    assert prof.returncode == 0, prof.stderr[-2000:]
    assert "hpc" in json.loads(prof.stdout)
