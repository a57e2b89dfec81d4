"""Turn ``[[impairments]]`` selections into per-link fabric impairments.

The fabric impairs one direction of one link at a time
(``Network.impair(iface, cfg, direction)`` with :class:`uet.fabric.impairments.Impairments`
keys). An experiment selects links by name pattern and/or class instead; :func:`plan`
expands the selections over the links of the built network and merges selections that hit
the same direction of a link (later tables win key by key).

Links are given as ``(a, b)`` interface-name pairs (``net.links`` items work too: anything
with ``.a`` and ``.b``), ``a`` being the end nearer the hosts, as the topology builders
cable them. Classes come from the names: ``h<i>`` is a host, ``tor``/``leaf``/``sw``
switches are tier 1, ``agg``/``spine`` tier 2, ``core`` tier 3.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable
from typing import Any

from uet.experiments.config import error_at

_HOST = re.compile(r"h\d+")
_TIER = {"tor": 1, "leaf": 1, "sw": 1, "agg": 2, "spine": 2, "core": 3}
FABRIC_KEYS = ("loss", "corrupt", "ber", "duplicate", "jitter_ps", "reorder",
               "reorder_delay_ps")


def _switch_kind(iface: str) -> str:
    return re.sub(r"\d+$", "", iface.split(".", 1)[0])


def tier(iface: str) -> int:
    """0 for a host interface, else the tier of the switch the port belongs to."""
    if _HOST.fullmatch(iface):
        return 0
    return _TIER.get(_switch_kind(iface), 1)


def link_class(a: str, b: str) -> set[str]:
    """The classes a link ``a<->b`` belongs to (``all`` always)."""
    out = {"all"}
    if tier(a) == 0 or tier(b) == 0:
        out.add("host")
        return out
    out.add("switch")
    kinds = {_switch_kind(a), _switch_kind(b)}
    if kinds == {"tor", "agg"}:
        out.add("tor_agg")
    elif kinds == {"agg", "core"}:
        out.add("agg_core")
    elif kinds == {"leaf", "spine"}:
        out.add("leaf_spine")
    return out


def _ends(link: Any) -> tuple[str, str]:
    if isinstance(link, tuple | list):
        return str(link[0]), str(link[1])
    return link.a, link.b


def _matches(patterns: list[str], a: str, b: str) -> bool:
    names = (f"{a}<->{b}", f"{b}<->{a}", a, b)
    return any(fnmatch.fnmatchcase(n, p) for p in patterns for n in names)


def select(entry: dict[str, Any], links: Iterable[Any]) -> list[tuple[str, str]]:
    """Links ``(lower end, upper end)`` chosen by one validated impairment table."""
    out = []
    for link in links:
        a, b = _ends(link)
        if tier(b) < tier(a):
            a, b = b, a
        if entry.get("match") and not _matches(entry["match"], a, b):
            continue
        if entry.get("class") and entry["class"] not in link_class(a, b):
            continue
        out.append((a, b))
    return out


def fabric_keys(entry: dict[str, Any], nominal_rate_bps: float) -> dict[str, Any]:
    """The :class:`~uet.fabric.impairments.Impairments` keys of one table (set ones only)."""
    out: dict[str, Any] = {}
    for key in FABRIC_KEYS:
        v = entry.get(key)
        if v:
            out[key] = v
    if entry.get("seed") is not None:
        out["seed"] = entry["seed"]
    if entry.get("corrupt_bits", 1) != 1:
        out["corrupt_bits"] = entry["corrupt_bits"]
    if entry.get("gilbert"):
        out["gilbert"] = dict(entry["gilbert"])
    if entry.get("rate_gbps") is not None:
        out["rate_bps"] = round(entry["rate_gbps"] * 1e9)
    elif entry.get("rate_factor") is not None:
        out["rate_bps"] = round(nominal_rate_bps * entry["rate_factor"])
    if entry.get("queue_factor") is not None:
        out["queue_factor"] = entry["queue_factor"]
    if entry.get("down"):
        out["down"] = [[t[0], t[1] if len(t) > 1 else None] for t in entry["down"]]
    return out


def plan(config: dict[str, Any], links: Iterable[Any],
         rates: dict[str, float] | None = None) -> list[dict[str, Any]]:
    """Per-direction impairments: ``[{"at": iface, "direction": "tx"|"rx", "cfg": {...}}]``.

    ``at`` is the lower end of the link; ``tx`` is the upward direction. ``rates`` maps a
    link name ``a<->b`` to its nominal rate for ``rate_factor`` (default: the fabric link's
    own rate when ``links`` are fabric links, else ``topology.rate_gbps``). Raises
    :class:`~uet.experiments.config.ConfigError` (with the line of the table) when a
    selection matches no link.
    """
    links = list(links)
    rates = dict(rates or {})
    for x in links:
        ab = getattr(x, "ab", None)
        if ab is not None and hasattr(ab, "rate_bps"):
            a, b = _ends(x)
            rates.setdefault(f"{a}<->{b}", ab.rate_bps)
            rates.setdefault(f"{b}<->{a}", ab.rate_bps)
    links = [_ends(x) for x in links]
    nominal = config["topology"]["rate_gbps"] * 1e9
    merged: dict[tuple[str, str], dict[str, Any]] = {}
    order: list[tuple[str, str]] = []
    for i, entry in enumerate(config.get("impairments", [])):
        chosen = select(entry, links)
        if not chosen:
            sample = ", ".join(f"{a}<->{b}" for a, b in links[:4])
            raise error_at(config, ("impairments", i, "match" if entry.get("match")
                                    else "class"), "selects no link",
                           allowed=f"link or interface names such as {sample}")
        dirs = {"both": ("tx", "rx"), "up": ("tx",), "down": ("rx",)}[entry["direction"]]
        for a, b in chosen:
            rate = rates.get(f"{a}<->{b}", nominal)
            keys = fabric_keys(entry, rate)
            for d in dirs:
                slot = (a, d)
                if slot not in merged:
                    merged[slot] = {}
                    order.append(slot)
                merged[slot].update(keys)
    return [{"at": a, "direction": d, "cfg": merged[a, d]} for a, d in order]
