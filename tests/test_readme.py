"""The README's Python example runs as written and prints what it says."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_example_runs(capsys):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    assert len(blocks) == 1
    exec(compile(blocks[0], "README.md", "exec"), {"__name__": "readme_example"})
    assert capsys.readouterr().out.strip() == "b'hello ue'"


def test_readme_names_the_two_setup_commands():
    text = README.read_text(encoding="utf-8")
    assert "pip install -e . && uet run" in text
    assert "make test" in text
