"""Facts read off a validated experiment config: how many hosts, where relative paths
resolve from. Below :mod:`uet.experiments.config` (which re-exports them) and the modules
it checks with (:mod:`~uet.experiments.traffic`, :mod:`~uet.experiments.ideal`), so that
none of them imports another upwards."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["base_dir", "host_count", "resolve_path"]


def host_count(topology: dict[str, Any]) -> int:
    """Number of hosts of a validated ``[topology]`` table."""
    kind = topology["kind"]
    if kind == "back_to_back":
        return 2
    if kind == "star":
        return topology["hosts"]
    if kind == "leaf_spine":
        return topology["leaves"] * topology["hosts_per_leaf"]
    k = topology["k"]
    return k * k * k // 4


def base_dir(config: dict[str, Any]) -> Path:
    """Directory that relative paths in the config are resolved from."""
    name = config.get("source", {}).get("file", "")
    p = Path(name)
    return p.parent if p.is_file() else Path.cwd()


def resolve_path(config: dict[str, Any], rel: str) -> Path:
    p = Path(rel).expanduser()
    return p if p.is_absolute() else base_dir(config) / p
