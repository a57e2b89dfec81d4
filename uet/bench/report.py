"""``uet bench`` on a terminal: one table per section, ratios first, every number with its
unit (``--json`` prints the raw dict instead, unchanged).

A section's keys carry their unit in their name (``_pps``, ``_per_s``, ``_ns``, ``_us``,
``_gbps``, ``_bytes``, ``_mb``, ``_s``; ``ratio`` or ``_over_`` for a ratio measured side by
side); :func:`unit_of` reads it, so a new key gets its unit without a table to maintain.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from rich.table import Table

#: what each section measures (the table title)
TITLES = {
    "codec": "codec: the fast codec against scapy",
    "native": "native: the C fast path against pure Python",
    "pds": "pds: the PDS state machines alone",
    "emulation": "emulation: the fabric with the real end point against the traffic end point",
    "tss": "tss: a packet sealed and opened (AES-GCM-256) against the plain encode + decode",
}
RATIO = "×"


def unit_of(key: str, value: Any) -> str:
    """The unit a key's name announces ("" for counts, names and flags)."""
    if isinstance(value, bool | str):
        return ""
    if "ratio" in key or "_over_" in key:
        return RATIO
    if re.search(r"(^|_)ns(_|$)", key):
        return "ns"
    if re.search(r"(^|_)us(_|$)", key):
        return "µs"
    if key.endswith("_gbps"):
        return "Gb/s"
    if "_pps" in key or "per_s" in key:
        what = "hops" if "hops" in key else "ops" if "ops" in key else "packets"
        return f"{what}/s"
    if key.endswith("_mb"):
        return "MB"
    if key.endswith("_bytes") or key == "bytes":
        return "B"
    if key.endswith("_s"):
        return "s"
    m = re.search(r"_per_(\w+)$", key)
    if m:
        return f"per {m.group(1).replace('_', ' ')}"
    last = key.rsplit("_", 1)[-1]
    return last if isinstance(value, int) and last.endswith("s") else ""  # a count


def _number(value: Any, unit: str) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if unit == RATIO:
            return f"{value:,.2f}"
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        if abs(value) >= 10:
            return f"{value:,.1f}"
        return f"{value:.3g}"
    return str(value)


def ordered(section: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """``(key, value, unit)`` rows: ratios first (in the section's order), then the rest."""
    rows = [(k, _number(v, unit_of(k, v)), unit_of(k, v)) for k, v in section.items()]
    return [r for r in rows if r[2] == RATIO] + [r for r in rows if r[2] != RATIO]


def section_table(name: str, section: Mapping[str, Any]) -> Table:
    """One section as a rich table (key, value, unit)."""
    table = Table(title=TITLES.get(name, name), title_justify="left", show_header=True,
                  header_style="bold")
    table.add_column("measure")
    table.add_column("value", justify="right")
    table.add_column("unit")
    rows = ordered(section)
    for i, (key, value, unit) in enumerate(rows):
        ratio = unit == RATIO
        table.add_row(f"[bold]{key}[/bold]" if ratio else key, value, unit,
                      end_section=ratio and i + 1 < len(rows) and rows[i + 1][2] != RATIO)
    return table
