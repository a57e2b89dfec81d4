"""The pytest plugin as users meet it: their own cases with the uet_peer fixture."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from uet.capture.pcapng import read_capture

USER_TESTS = '''
import pytest
from uet.conformance import ANY_ACK, PdsNack, has_flags
from uet.wire.constants import NackCode, ReturnCode


@pytest.mark.uet_case("MY-001", ref="3.2", rule="an unknown DPDCID is NACKed INV_DPDCID")
def test_unknown_dpdcid(uet_peer):
    peer = uet_peer
    pdc = peer.pdc()
    pdc.ack_of(pdc.send(peer.ses.no_op()[0]))
    stray = peer.pdc()
    stray.dpdcid = pdc.dpdcid ^ 0x5A5A
    psn = stray.send(peer.ses.no_op()[0], syn=False)
    peer.expect(PdsNack, timeout_us=1000,
                fields={"nack_code": NackCode.INV_DPDCID, "nack_psn": psn})
    peer.expect_nothing(ANY_ACK, within_us=1000, fields={"ack_psn": psn})


@pytest.mark.uet_case("MY-002", ref="4.6", rule="a NO_OP is refused (wrong on purpose)")
def test_wrong_expectation(uet_peer):
    pdc = uet_peer.pdc()
    pdc.ack_of(pdc.send(uet_peer.ses.no_op()[0]),
               fields={"ses.return_code": ReturnCode.BAD_INDEX})


@pytest.mark.uet_case("MY-003", ref="5", rule="needs AI Base", profile="ai-base")
def test_ai_base(uet_peer):
    pdc = uet_peer.pdc()
    msg = uet_peer.ses.send("recv", b"x" * 8, tag=5)
    pdc.ack_of(pdc.send(msg[0]), fields={"ses.return_code": ReturnCode.UNSUPPORTED_OP})


@pytest.mark.uet_case("MY-004", ref="3.2", rule="needs a configured end point",
                      config={"max_target_pdcs": 1})
def test_configured(uet_peer, uet_target, uet_capture):
    assert uet_target.kind == "inprocess"
    uet_peer.pdc().send(uet_peer.ses.no_op()[0])
    assert uet_capture.records


def test_not_a_conformance_test():
    assert 1 + 1 == 2
'''


def _pytest(tmp_path, *args):
    (tmp_path / "test_mine.py").write_text(textwrap.dedent(USER_TESTS))
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                           "test_mine.py", *args], capture_output=True, text=True,
                          cwd=tmp_path, timeout=120)


def test_user_cases_with_the_plugin(tmp_path):
    proc = _pytest(tmp_path, "--uet-table", "--uet-report", "r.json", "-q")
    out = proc.stdout
    assert proc.returncode == 1, out
    assert "1 failed, 4 passed" in out
    assert "3 passed, 1 failed, 0 errors, 0 not run (4 cases)" in out
    assert "MY-002" in out and "ses.return_code=OK (expected BAD_INDEX)" in out
    cap = tmp_path / "conformance-captures" / "MY-002.pcapng"
    assert len(list(read_capture(cap))) == 2  # the NO_OP and its ACK
    assert "capture kept:" in out


def test_user_cases_deselected_when_the_target_cannot_run_them(tmp_path):
    """Against a device over UDP, the case needing a configured end point and the one
    needing an AI Base device are deselected and reported as not run, each saying which
    --dut would run it (no device is contacted for them)."""
    proc = _pytest(tmp_path, "--uet-table", "-q", "-k", "ai_base or configured",
                   "--uet-dut", "udp:127.0.0.1:4793@hpc", "--uet-report", "r.json")
    out = proc.stdout
    assert proc.returncode == 5, out  # nothing left to run
    assert "0 passed, 0 failed, 0 errors, 2 not run (2 cases)" in out
    why = {r["id"]: r["why"] for r in json.loads((tmp_path / "r.json").read_text())["results"]}
    assert why == {"MY-003": "needs a device with profile ai-base (add --dut "
                             "udp:HOST:PORT@ai-base)",
                   "MY-004": "needs a device configured with max_target_pdcs=1 (add "
                             "--dut udp:HOST:PORT+max_target_pdcs=1)"}


def test_plugin_import_is_light():
    """The plugin is loaded by every pytest run (entry point): it must not drag scapy in."""
    code = ("import sys, uet.conformance.plugin, uet.conformance; "
            "assert 'scapy' not in sys.modules, 'scapy imported'")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
