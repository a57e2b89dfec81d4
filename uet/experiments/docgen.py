"""Keep the generated tables of ``docs/experiments.md`` in step with the code.

The page holds three generated blocks between HTML-comment markers: the experiment key
table (:func:`uet.experiments.schema.doc_table`), the results.json field table
(:func:`uet.experiments.results.results_doc_table`) and the exported table columns
(:func:`uet.experiments.tables.export_doc_table`). ``python -m uet.experiments.docgen
[docs/experiments.md]`` rewrites them; a test checks they are current.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from uet.experiments.results import results_doc_table
from uet.experiments.schema import doc_table
from uet.experiments.tables import export_doc_table

BLOCKS: dict[str, Callable[[], str]] = {
    "schema-table": doc_table,
    "results-table": results_doc_table,
    "export-table": export_doc_table,
}


def markers(name: str) -> tuple[str, str]:
    return (f"<!-- {name}:begin (generated: python -m uet.experiments.docgen) -->",
            f"<!-- {name}:end -->")


def render(text: str) -> str:
    """``text`` with every generated block replaced by its current content."""
    for name, make in BLOCKS.items():
        begin, end = markers(name)
        head, sep, rest = text.partition(begin)
        if not sep:
            raise ValueError(f"missing marker {begin}")
        _, sep, tail = rest.partition(end)
        if not sep:
            raise ValueError(f"missing marker {end}")
        text = f"{head}{begin}\n{make()}{end}{tail}"
    return text


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    path = Path(args[0] if args else "docs/experiments.md")
    path.write_text(render(path.read_text(encoding="utf-8")), encoding="utf-8")
    print(f"updated {path}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
