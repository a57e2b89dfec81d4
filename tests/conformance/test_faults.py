"""Deliberately broken end points make exactly the cases of the broken rule fail, with a
message that states the rule and what was seen, and a capture that tshark reads."""

from __future__ import annotations

import subprocess

import faults
import pytest
from helpers import uet

from uet.capture.pcapng import read_capture
from uet.conformance.registry import catalogue
from uet.conformance.runner import run_cases
from uet.conformance.targets import InProcessTarget
from uet.wire.codec import decode_frame
from uet.wireshark import plugin_path

#: fault -> (the cases it must break, words every failure message must contain)
EXPECTED = {
    faults.NoSackEndpoint: ({"PDS-ACK-006", "PDS-ORD-003"}, ["SACK", "sack=0x0"]),
    faults.AnyJobEndpoint: ({"SES-RC-001", "SES-RC-020"},
                            ["BAD_JOB_ID", "ses.return_code=OK (expected BAD_JOB_ID)"]),
    faults.NoInvDpdcidEndpoint: ({"PDS-EST-003", "PDS-NAK-012", "PDS-CP-004", "PDS-CLS-004",
                                  "PDS-EST-008", "PDS-EST-021", "PDS-EST-022"},
                                 ["INV_DPDCID", "nothing matching arrived"]),
    faults.FixedEvEndpoint: ({"PDS-ACK-002", "PDS-NAK-012", "PDS-RUDI-006"},
                             ["EV", "ev=16962 (0x4242) (expected"]),
}


@pytest.mark.parametrize("fault", list(EXPECTED), ids=lambda f: f.__name__)
def test_fault_breaks_exactly_its_cases(fault, tmp_path):
    broken, words = EXPECTED[fault]
    results = run_cases(catalogue(), InProcessTarget(endpoint_factory=fault),
                        capture_dir=tmp_path)
    failed = {r.id for r in results if r.status != "pass"}
    assert failed == broken
    by_id = {c.id: c for c in catalogue()}
    for r in results:
        if r.status == "pass":
            assert r.capture is None
            continue
        assert r.status == "fail"
        case = by_id[r.id]
        assert r.why.startswith(f"{r.id} [ref {case.ref}] {case.rule}: "), r.why
        assert any(w in r.why for w in words), r.why
        frames = list(read_capture(r.capture))
        assert frames and all(decode_frame(f.data, udp_port=None) for f in frames)


def test_failing_capture_opens_in_tshark(tmp_path):
    """The capture a failing case keeps is real pcapng with real UDP/UET frames."""
    results = run_cases([c for c in catalogue() if c.id == "PDS-ACK-002"],
                        InProcessTarget(endpoint_factory=faults.FixedEvEndpoint),
                        capture_dir=tmp_path)
    path = results[0].capture
    n = len(list(read_capture(path)))
    proc = subprocess.run(["tshark", "-n", "-X", f"lua_script:{plugin_path()}",
                           "-o", "udp.try_heuristic_first:TRUE", "-r", path,
                           "-T", "fields", "-e", "udp.srcport", "-e", "udp.dstport",
                           "-e", "uet.pds.type"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    rows = [line.split("\t") for line in proc.stdout.splitlines()]
    assert len(rows) == n
    assert all(r[1] == "4793" and r[2] for r in rows), rows
    assert any(r[0] == "16962" for r in rows)  # the broken ACK's EV, as the case saw it


def test_cli_keeps_the_capture_of_a_failing_case(tmp_path):
    """Over UDP against a device announced with the wrong profile: RUDI cases fail, keep a
    capture named in the table, exit status 1."""
    from helpers import PEER_NET, SERVE_AI_BASE, Server

    srv = Server(SERVE_AI_BASE, "--profile", "ai-base")
    try:
        proc = uet("conformance", "--dut", f"udp:{SERVE_AI_BASE}:4793@hpc", "--peer-net",
                   PEER_NET, "-k", "PDS-RUDI-004", "--grace-ms", "100", cwd=tmp_path)
    finally:
        srv.stop()
    assert proc.returncode == 1, proc.stdout[-2000:]
    assert "0 passed, 1 failed" in proc.stdout
    cap = tmp_path / "conformance-captures" / "PDS-RUDI-004.pcapng"
    assert cap.exists() and "capture:" in proc.stdout
    assert "UNSUPPORTED_OP" in proc.stdout  # what the AI Base device answered instead
