"""`uet bench --json`: one object with the four sections; the emulation section measures
the real end point and the fabric's traffic end point side by side."""

from __future__ import annotations

import json

import pytest

from uet.cli import main as uet_main


def test_bench_json_has_every_section(capsys: pytest.CaptureFixture[str]) -> None:
    assert uet_main(["bench", "--json", "--quick"]) == 0
    doc = json.loads(capsys.readouterr().out)  # exactly one JSON object on stdout
    assert set(doc) == {"codec", "native", "pds", "emulation"}
    emu = doc["emulation"]
    assert emu["endpoint"] == "uet.endpoint.fep.FabricEndpoint"
    assert emu["traffic_endpoint"] == "uet.bench.traffic_endpoint.TrafficEndpoint"
    assert emu["packet_hops"] > 16 * 64 * 2 and emu["traffic_packet_hops"] > 16 * 64 * 2
    assert emu["fep_over_traffic"] == pytest.approx(
        emu["packet_hops_per_s"] / emu["traffic_packet_hops_per_s"])
    assert emu["meets_target"] == (emu["packet_hops_per_s"] >= 50_000)
    assert 1.0 < emu["fct_tail_over_ideal"] < 3.0
    for name in ("codec", "native", "pds"):
        assert doc[name], name
