"""The catalogue against ``uet serve`` in other processes, over real loopback UDP."""

from __future__ import annotations

import json

from helpers import PEER_NET, SERVE_AI_BASE, SERVE_HPC, Server, uet

from uet.conformance.registry import catalogue


def test_catalogue_over_udp_against_uet_serve(tmp_path):
    """Two responders (HPC and AI Base, for the profile-gating cases) in their own
    processes; every case that can run over UDP passes; the others are reported as not run
    with their reason; the responders shut down cleanly on SIGTERM with their counters."""
    hpc = Server(SERVE_HPC, "--setup-out", str(tmp_path / "setup.json"))
    base = Server(SERVE_AI_BASE, "--profile", "ai-base")
    try:
        assert hpc.setup["profile"] == "hpc" and base.setup["profile"] == "ai-base"
        proc = uet("conformance", "--dut", f"udp:{SERVE_HPC}:4793",
                   "--dut", f"udp:{SERVE_AI_BASE}:4793@ai-base", "--setup",
                   str(tmp_path / "setup.json"), "--peer-net", PEER_NET, "--json", "r.json",
                   "--junit", "j.xml", "--capture", "run.pcapng", cwd=tmp_path, timeout=300)
        # a second run against the same (long-running) devices: a new peer opens new PDCs
        # and numbers its messages from the start again, which must not look like late
        # copies of the first run's messages
        again = uet("conformance", "--dut", f"udp:{SERVE_HPC}:4793",
                    "--dut", f"udp:{SERVE_AI_BASE}:4793@ai-base", "--setup",
                    str(tmp_path / "setup.json"), "--peer-net", PEER_NET, "--json", "r2.json",
                    cwd=tmp_path, timeout=300)
    finally:
        c_hpc = hpc.stop()
        c_base = base.stop()
    second = json.loads((tmp_path / "r2.json").read_text())
    assert again.returncode == 0, [(r["id"], r["why"]) for r in second["results"]
                                   if r["status"] not in ("pass", "not run")]
    data = json.loads((tmp_path / "r.json").read_text())
    failed = [r for r in data["results"] if r["status"] not in ("pass", "not run")]
    assert proc.returncode == 0 and not failed, "\n".join(
        [f"{r['id']} {r['status']}: {r.get('why')}" for r in failed] + [proc.stderr[-2000:]])
    by_id = {r["id"]: r for r in data["results"]}
    cases = catalogue()
    assert set(by_id) == {c.id for c in cases}
    for c in cases:
        r = by_id[c.id]
        if c.udp_capable and c.tss:  # these devices are not secured (test_udp_tss.py)
            assert r["status"] == "not run" and "well-known secure domain" in r["why"], r
        elif c.udp_capable:
            assert r["status"] == "pass", r
        else:
            assert r["status"] == "not run" and r["why"] == c.limits(), r
    udp_capable = sum(c.udp_capable and not c.tss for c in cases)
    assert udp_capable >= 0.9 * len(cases)
    assert data["summary"]["pass"] == udp_capable
    assert data["target"].startswith(f"udp:{SERVE_HPC}:4793")
    # both devices were used, and they saw real traffic
    assert c_hpc["udp.rx_datagrams"] > 500 and c_hpc["udp.tx_datagrams"] > 500
    assert c_base["udp.rx_datagrams"] > 5
    assert c_hpc["driver.rx_decode_errors"] > 100  # the malformed-input cases
    assert (tmp_path / "run.pcapng").stat().st_size > 100_000
