"""The catalogue itself, and the whole of it against the built-in end point in process."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections import Counter

from helpers import uet

from uet.capture.pcapng import read_capture
from uet.conformance.registry import AREAS, catalogue
from uet.conformance.runner import run_cases
from uet.conformance.targets import InProcessTarget


def test_catalogue_shape():
    """At least 80 cases, unique IDs, every case with a reference and a rule, every area of
    the issue covered by several cases."""
    cases = catalogue()
    assert len(cases) >= 80
    ids = [c.id for c in cases]
    assert len(set(ids)) == len(ids)
    for c in cases:
        assert c.ref and c.ref[0].isdigit(), c
        assert len(c.rule) > 30 and c.rule[0].isupper(), c
    per_area = Counter(c.area for c in cases)
    assert set(per_area) == {a for a, _ in AREAS}
    assert min(per_area.values()) >= 8, per_area
    prefixes = {c.id.rsplit("-", 1)[0] for c in cases}
    for needed in ("PDS-EST", "PDS-WIN", "PDS-ACK", "PDS-NAK", "PDS-RNK", "PDS-RTX",
                   "PDS-CLR", "PDS-CP", "PDS-CLS", "PDS-DUP", "PDS-ORD", "PDS-RUDI",
                   "PDS-UUD", "SES-OP", "SES-RC", "PROF", "MAL"):
        assert needed in prefixes, needed


def test_whole_catalogue_passes_in_process():
    """Every case passes against the built-in end point (virtual clock, one per case)."""
    results = run_cases(catalogue(), InProcessTarget())
    bad = [f"{r.id}: {r.status}: {r.why}" for r in results if r.status != "pass"]
    assert not bad, "\n".join(bad)
    assert len(results) == len(catalogue())


def test_in_process_runs_are_identical(tmp_path):
    """Same case, same seed: byte-identical captures (virtual time, seeded peer)."""
    cases = [c for c in catalogue() if c.id in ("PDS-EST-019", "PDS-RTX-002", "SES-OP-004")]
    a, b = tmp_path / "a", tmp_path / "b"
    run_cases(cases, InProcessTarget(), capture_dir=a, keep_all=True)
    run_cases(cases, InProcessTarget(), capture_dir=b, keep_all=True)
    for c in cases:
        da = (a / f"{c.id}.pcapng").read_bytes()
        assert da == (b / f"{c.id}.pcapng").read_bytes()
        assert len(list(read_capture(a / f"{c.id}.pcapng"))) >= 4


def test_cli_runs_the_catalogue_with_junit_and_json(tmp_path):
    """``uet conformance`` (pytest underneath): table, JUnit XML, JSON, all passing."""
    proc = uet("conformance", "--junit", "j.xml", "--json", "r.json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    n = len(catalogue())
    assert f"{n} passed, 0 failed, 0 errors, 0 not run ({n} cases)" in proc.stdout
    assert "PDS-EST-001" in proc.stdout and "UET conformance: in-process" in proc.stdout
    suite = ET.parse(tmp_path / "j.xml").getroot().find("testsuite")
    assert int(suite.get("tests")) == n and suite.get("failures") == "0"
    props = {p.get("name"): p.get("value")
             for p in suite.find("testcase").find("properties")}
    assert props["uet_id"] == "PDS-EST-001" and props["uet_ref"] == "3.2"
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["summary"] == {"pass": n, "fail": 0, "error": 0, "not run": 0}
    assert not (tmp_path / "conformance-captures").exists()  # nothing failed


def test_cli_selection_and_listing(tmp_path):
    proc = uet("conformance", "-k", "PDS-CLS-00 and not PDS-CLS-001", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert "8 passed, 0 failed, 0 errors, 0 not run (8 cases)" in proc.stdout
    proc = uet("conformance", "-k", "NO-SUCH-CASE", cwd=tmp_path)
    assert proc.returncode == 5 and "no case selected" in proc.stderr
    proc = uet("conformance", "--list")
    assert proc.returncode == 0
    lines = proc.stdout.splitlines()
    assert len(lines) == len(catalogue()) and lines[0].startswith("PDS-EST-001")
    assert any("over UDP against a device configured with max_target_pdcs=1" in x
               for x in lines)


def test_cli_refuses_bad_options(tmp_path):
    proc = uet("conformance", "--dut", "tcp:1.2.3.4:5")
    assert proc.returncode == 2 and "expected udp:HOST:PORT" in proc.stderr
    proc = uet("conformance", "--dut", "udp:127.0.0.1:4793@nosuch")
    assert proc.returncode == 2 and "nosuch" in proc.stderr
    bad = tmp_path / "s.json"
    bad.write_text('{"profile": "hpc", "rto": 5}')
    proc = uet("conformance", "--setup", str(bad))
    assert proc.returncode == 2 and "unknown key 'rto'" in proc.stderr
