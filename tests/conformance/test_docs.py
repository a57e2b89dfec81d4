"""docs/conformance.md: its generated parts match the catalogue and the setup."""

from __future__ import annotations

from pathlib import Path

from uet.conformance.registry import catalogue
from uet.conformance.report import docs_table, update_doc

DOC = Path(__file__).resolve().parents[2] / "docs" / "conformance.md"


def test_generated_sections_are_current():
    text = DOC.read_text()
    assert update_doc(text) == text, (
        "docs/conformance.md is out of date: run `uet conformance --docs docs/conformance.md`")


def test_table_lists_every_case():
    text = DOC.read_text()
    rows = [line for line in text.splitlines() if line.startswith("| ")
            and line.split("|")[1].strip() in {c.id for c in catalogue()}]
    assert len(rows) == len(catalogue()) >= 80
    for c in catalogue():
        assert f"| {c.id} | {c.ref} |" in text
        if not c.udp_capable:
            assert c.limits().split(":")[0] in docs_table()
