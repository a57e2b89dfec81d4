"""The TSS cases over real loopback UDP against ``uet serve --tss well-known`` in another
process: every TSS case that can run over UDP passes, the cleartext cases are reported as
not run (a secured device refuses cleartext), and the device counted the refusals."""

from __future__ import annotations

import json

from helpers import _NET, PEER_NET, Server, uet

from uet.conformance.registry import catalogue

SERVE_TSS = f"127.89.{_NET}.3"


def test_tss_cases_over_udp_against_a_secured_uet_serve(tmp_path):
    server = Server(SERVE_TSS, "--tss", "well-known")
    try:
        proc = uet("conformance", "--dut", f"udp:{SERVE_TSS}:4793", "--tss", "-k", "TSS",
                   "--peer-net", PEER_NET, "--json", "r.json", cwd=tmp_path, timeout=300)
    finally:
        counters = server.stop()
    data = json.loads((tmp_path / "r.json").read_text())
    failed = [r for r in data["results"] if r["status"] not in ("pass", "not run")]
    assert proc.returncode == 0 and not failed, "\n".join(
        [f"{r['id']} {r['status']}: {r.get('why')}" for r in failed] + [proc.stderr[-2000:]])
    by_id = {r["id"]: r for r in data["results"]}
    tss = [c for c in catalogue() if c.tss]
    assert len(tss) >= 10
    for c in tss:
        r = by_id[c.id]
        assert r["status"] == ("pass" if c.udp_capable else "not run"), r
    assert sum(c.udp_capable for c in tss) >= 9
    assert counters["tss.rx_refused.auth_fail"] >= 3  # tampered payload, header, wrong key
    assert counters["tss.rx_refused.replay"] >= 5
    assert counters["tss.rx_refused.cleartext"] >= 1
    assert counters["tss.rx_refused.unknown_sdi"] >= 1
    assert counters["fep.rx_job_refused"] >= 1
