"""``--export csv,parquet``: the tables of :mod:`uet.experiments.tables` as files.

A run directory gets ``flows``, ``timeseries`` and ``summary``; a sweep directory the same
over every point (``point`` and the swept keys first) plus ``aggregate`` (per group and
metric). Each table is written once per format: ``flows.csv``, ``flows.parquet``, ...
CSV: UTF-8, a header line, empty cells for missing values. Parquet: pyarrow, the column
types of the tables (nullable integers stay integers), so ``pandas.read_parquet`` gives
back the same DataFrame.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from uet.errors import ConfigError

#: the formats ``--export`` accepts
FORMATS = ("csv", "parquet")
#: how to get the libraries the tables need
DATA_HINT = ("pip install pandas pyarrow (or uet's extra: pip install -e '.[data]' in the "
             "uet checkout)")


class ExportError(ConfigError):
    """A bad ``--export`` value, or a format whose library is not installed."""


def parse_formats(text: str | Sequence[str]) -> list[str]:
    """``"csv,parquet"`` -> ``["csv", "parquet"]``; unknown names are an error."""
    items = text.split(",") if isinstance(text, str) else list(text)
    out = []
    for item in (i.strip().lower() for i in items):
        if not item:
            continue
        if item not in FORMATS:
            raise ExportError(f"--export {item}: unknown format; allowed: "
                              + ", ".join(FORMATS))
        if item not in out:
            out.append(item)
    if not out:
        raise ExportError("--export: no format given; allowed: " + ", ".join(FORMATS))
    return out


def check_available(formats: Sequence[str]) -> None:
    """Fail before running anything if a format's library is missing."""
    try:
        import pandas  # noqa: F401
    except ModuleNotFoundError:
        raise ExportError("--export needs pandas: " + DATA_HINT) from None
    if "parquet" in formats:
        try:
            import pyarrow  # noqa: F401
        except ModuleNotFoundError:
            raise ExportError("--export parquet needs pyarrow: " + DATA_HINT) from None


def write_tables(tables: Mapping[str, Any], out_dir: str | Path, formats: Sequence[str]
                 ) -> list[Path]:
    """Write each DataFrame of ``tables`` (name -> frame) in each format; the paths."""
    check_available(formats)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, df in tables.items():
        for fmt in formats:
            path = out / f"{name}.{fmt}"
            if fmt == "csv":
                df.to_csv(path, index=False)
            else:
                df.to_parquet(path, index=False, engine="pyarrow")
            paths.append(path)
    return paths
