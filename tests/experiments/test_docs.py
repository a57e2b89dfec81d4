"""docs/experiments.md carries the generated key and results tables; they must be current."""

from __future__ import annotations

from pathlib import Path

from uet.experiments.docgen import render
from uet.experiments.results import RESULTS_SCHEMA, SUMMARY_SPEC
from uet.experiments.schema import TABLES

DOC = Path(__file__).resolve().parents[2] / "docs" / "experiments.md"


def test_doc_tables_match_the_schema() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert render(text) == text, "run: python -m uet.experiments.docgen docs/experiments.md"


def test_every_key_and_field_is_in_the_doc() -> None:
    text = DOC.read_text(encoding="utf-8")
    for table in TABLES.values():
        for key in table.keys:
            assert f"`{table.name}.{key}`" in text
    for name in RESULTS_SCHEMA:
        assert f"`{name}`" in text
    for name in SUMMARY_SPEC:
        assert f"`summary.{name}`" in text
