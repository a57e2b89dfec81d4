"""Every Python example of the operation API in docs/api.md runs as written (the notebook
examples, which use ``uet.run`` and no Trio, run in tests/experiments/test_api.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "api.md"
BLOCKS = [b for b in re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
          if "import trio" in b]


def test_the_guide_has_its_examples():
    assert len(BLOCKS) >= 10


@pytest.mark.parametrize("i", range(len(BLOCKS)))
def test_example_runs(i, capsys):
    code = BLOCKS[i]
    assert "trio.run(main)" in code
    exec(compile(code, f"{DOC.name}[{i}]", "exec"), {"__name__": f"api_example_{i}"})
