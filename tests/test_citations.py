"""Nothing in the repository points at notes that are not in it.

Docs, code comments and tests cite the specification's sections or public sources (the UEC
reference provider, Wireshark's packet-uet.c, xdp2, htsim), through the topic index of
docs/references.md ("ref N.M"); a file outside the repository is not a source a reader can
open. The forbidden names are spelled in pieces so that this file does not match itself.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN = ("shared" + "/reference", "shared" + "/design", "uet-wire" + "-format.md",
             "htsim-" + "anchors.md", "reference" + "/wireshark-uet-fields")
SKIP_DIRS = {".git", "build", "dist", "runs", "__pycache__", ".hypothesis", ".pytest_cache",
             ".ruff_cache", "conformance-captures"}


def _tracked() -> list[Path]:
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                             check=True).stdout
        return [ROOT / name for name in out.decode().split("\0") if name]
    except (OSError, subprocess.CalledProcessError):  # not a git checkout: every file
        return [p for p in ROOT.rglob("*") if p.is_file()
                and not SKIP_DIRS & set(p.relative_to(ROOT).parts)]


def test_no_file_cites_notes_outside_the_repository():
    files = _tracked()
    assert any(p.name == "README.md" for p in files)
    hits = []
    for path in files:
        try:
            text = path.read_bytes().decode("utf-8")
        except (UnicodeDecodeError, FileNotFoundError):
            continue  # binary (captures, images) or deleted in the work tree
        for lineno, line in enumerate(text.splitlines(), 1):
            hits += [f"{path.relative_to(ROOT)}:{lineno}: {name}" for name in FORBIDDEN
                     if name in line]
    assert not hits, "cite docs/references.md or the public source instead:\n" + "\n".join(
        hits)


def test_the_topic_index_covers_every_cited_topic():
    """Every "ref N.M" cited by the conformance catalogue is a row of docs/references.md."""
    from uet.conformance.registry import catalogue

    index = (ROOT / "docs" / "references.md").read_text(encoding="utf-8")
    rows = {line.split("|")[1].strip() for line in index.splitlines()
            if line.startswith("| ") and line.count("|") >= 5}
    topics = {part.strip() for row in rows for part in row.split(",")}
    cited = {part.strip() for c in catalogue() for part in c.ref.split(",") if part.strip()}
    assert len(cited) > 25
    missing = sorted(r for r in cited if r not in topics)
    assert not missing, missing
