"""The catalogue against ``uet serve`` in other processes, over real loopback UDP."""

from __future__ import annotations

import json

from helpers import PEER_NET, SERVE_AI_BASE, SERVE_HPC, Server, uet

from uet.conformance.registry import catalogue
from uet.conformance.runner import run_case
from uet.conformance.targets import make_target


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
        elif not c.udp_capable:
            assert r["status"] == "not run" and r["why"] == c.limits(), r
        elif c.needs_config:  # no configured device in this run: test_configured_cases
            assert r["status"] == "not run" and "needs a device configured with" in r["why"]
            assert f"+{c.config_text()}" in r["why"], r
        else:
            assert r["status"] == "pass", r
    plain = sum(c.udp_capable and not c.needs_config and not c.tss for c in cases)
    assert plain >= 0.85 * len(cases)
    assert data["summary"]["pass"] == plain
    assert data["target"].startswith(f"udp:{SERVE_HPC}:4793")
    # both devices were used, and they saw real traffic
    assert c_hpc["udp.rx_datagrams"] > 500 and c_hpc["udp.tx_datagrams"] > 500
    assert c_base["udp.rx_datagrams"] > 5
    assert c_hpc["driver.rx_decode_errors"] > 100  # the malformed-input cases
    assert (tmp_path / "run.pcapng").stat().st_size > 100_000


def test_configured_cases_over_udp(tmp_path):
    """Every case that needs a configured end point (a smaller table, another start-PSN
    mode, a profile variant) runs over UDP against a `uet serve` started with exactly that
    configuration (--set pds_extra / profile_extra), named by its --dut spec
    (udp:HOST:PORT@profile+key=value): all pass, each against its own device."""
    groups: dict[tuple[str, str], list[str]] = {}
    for c in catalogue():
        if c.needs_config and c.udp_capable and not c.tss:  # TSS: test_udp_tss.py
            groups.setdefault((c.profile or "hpc", c.config_text()), []).append(c.id)
    assert len(groups) >= 10
    servers, duts = [], []
    try:
        for i, ((profile, _text), ids) in enumerate(sorted(groups.items())):
            case = next(c for c in catalogue() if c.id == ids[0])
            ip = f"{SERVE_HPC.rsplit('.', 1)[0]}.{10 + i}"
            servers.append(Server(ip, "--profile", profile, "--set",
                                  "pds_extra=" + json.dumps(case.config or {}), "--set",
                                  "profile_extra=" + json.dumps(case.profile_changes or {})))
            duts += ["--dut", f"udp:{ip}:4793@{profile}+{case.config_text()}"]
        ids = [i for group in groups.values() for i in group]
        proc = uet("conformance", *duts, "--peer-net", PEER_NET, "--json", "r.json",
                   "-k", " or ".join(ids), cwd=tmp_path, timeout=300)
    finally:
        for s in servers:
            s.stop()
    data = json.loads((tmp_path / "r.json").read_text())
    ran = {r["id"]: r for r in data["results"] if r["status"] != "not run"}
    assert set(ran) == set(ids), data["results"]
    bad = [(r["id"], r["status"], r.get("why")) for r in ran.values() if r["status"] != "pass"]
    assert proc.returncode == 0 and not bad, bad


def test_the_probe_gives_back_the_pdcs_it_opened():
    """Before the catalogue runs, the reachability probe opens a PDC at the device; it
    closes it again, so a device whose table holds one PDC serves the very next case (the
    NO_PDC_AVAIL case needs that one slot free; left to the device's idle timers, the
    probe's PDC held it for 300 ms, and on a loaded machine the case failed)."""
    ip = f"{SERVE_HPC.rsplit('.', 1)[0]}.9"
    server = Server(ip, "--set", 'pds_extra={"max_target_pdcs": 1}')
    try:
        target = make_target([f"udp:{ip}:4793+max_target_pdcs=1"], peer_net=PEER_NET)
        target.check_reachable()
        case = next(c for c in catalogue() if c.id == "PDS-EST-014")
        result = run_case(case, target)
    finally:
        counters = server.stop()
    assert result.status == "pass", result.why
    assert counters["pds.closed"] >= 2  # the probe's PDC, then the case's
    assert not counters.get("pds.closed_in_error") and not counters.get("pds.close_req_tx")
