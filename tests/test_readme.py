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


def test_readme_counts_the_catalogue_as_it_is():
    """The README's rule count follows the catalogue (it said 233, then 245, while the
    catalogue grew)."""
    from uet.conformance.registry import catalogue

    said = re.search(r"`uet conformance` \((\d+) protocol rules", README.read_text("utf-8"))
    assert said is not None
    assert int(said.group(1)) == len(catalogue())
