"""docs/pds.md prints the two transition tables; they must be the code's (uet.pds.states)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from uet.pds.states import INITIATOR_TRANSITIONS, TARGET_TRANSITIONS, describe

DOC = Path(__file__).resolve().parents[2] / "docs" / "pds.md"


def _rows(marker: str) -> list[tuple[str, str, str]]:
    text = DOC.read_text(encoding="utf-8")
    m = re.search(rf"<!-- {marker} -->(.*?)<!-- /{marker} -->", text, re.S)
    assert m, f"docs/pds.md lost its {marker} table"
    rows = []
    for line in m.group(1).splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[0] not in ("state", "---"):
            rows.append((cells[0], cells[1], cells[2]))
    return rows


@pytest.mark.parametrize(("marker", "table"), [("initiator-transitions", INITIATOR_TRANSITIONS),
                                              ("target-transitions", TARGET_TRANSITIONS)])
def test_docs_table_is_the_transition_table(marker, table):
    assert _rows(marker) == describe(table)
