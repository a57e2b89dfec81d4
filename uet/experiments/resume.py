"""``--resume``: which sweep points already have results, keyed by what they ran.

A point's key (:func:`config_key`) is a hash of its resolved config (every default
filled in) without what cannot change its results: the ``source`` table (file name and
the ``--set``/``--sweep`` labels that led to it) and ``output.progress``; the contents of
the files the config reads (an htsim connection matrix, a profile file) are hashed with
it, so an edited ``.cm`` file is run again. :func:`existing_results` reads every
``results.json`` under a sweep directory and indexes it by the key of the config it
records, so a point is found even if the grid changed around it (a new seed shifts every
directory index).
"""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any

from uet.experiments.results import ResultsError, read_results

#: hex digits of the key kept (64 bits: collisions are not a concern for a sweep)
KEY_DIGITS = 16


def _referenced_files(config: dict[str, Any]) -> dict[str, str]:
    """Hashes of the files a config reads (relative paths resolved as the runner does)."""
    from uet.experiments.config import resolve_path
    from uet.profiles import BUILTIN_PROFILES

    out: dict[str, str] = {}
    names = []
    traffic = config.get("traffic", {})
    if traffic.get("pattern") == "cm_file" and traffic.get("file"):
        names.append(("traffic.file", traffic["file"]))
    profile = config.get("transport", {}).get("profile")
    if profile and profile not in BUILTIN_PROFILES:
        names.append(("transport.profile", profile))
    for key, name in names:
        try:
            data = resolve_path(config, name).read_bytes()
        except OSError:
            continue  # the run itself reports the missing file
        out[key] = hashlib.sha256(data).hexdigest()
    return out


def config_key(config: dict[str, Any]) -> str:
    """The resume key of a validated config (see the module docstring)."""
    cfg = copy.deepcopy(config)
    cfg.pop("source", None)
    cfg.get("output", {}).pop("progress", None)
    doc = {"config": cfg, "files": _referenced_files(config)}
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:KEY_DIGITS]


def existing_results(sweep_dir: str | Path) -> dict[str, tuple[Path, dict[str, Any]]]:
    """Key -> (point directory, results document) for every valid ``results.json`` one
    level under ``sweep_dir`` (unreadable or invalid ones are skipped: those points run
    again)."""
    root = Path(sweep_dir)
    found: dict[str, tuple[Path, dict[str, Any]]] = {}
    if not root.is_dir():
        return found
    for path in sorted(root.glob("*/results.json")):
        try:
            doc = read_results(path)
        except (OSError, ValueError, ResultsError):
            continue
        found.setdefault(config_key(doc["experiment"]["config"]), (path.parent, doc))
    return found
