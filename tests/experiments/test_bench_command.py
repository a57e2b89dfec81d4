"""`uet bench --json`: one object with the five sections; the emulation section measures
the real end point and the fabric's traffic end point side by side."""

from __future__ import annotations

import json

import pytest

from uet.bench.report import RATIO, ordered, section_table, unit_of
from uet.cli import main as uet_main


def test_bench_json_has_every_section(capsys: pytest.CaptureFixture[str]) -> None:
    assert uet_main(["bench", "--json", "--quick"]) == 0
    doc = json.loads(capsys.readouterr().out)  # exactly one JSON object on stdout
    assert set(doc) == {"codec", "native", "pds", "emulation", "tss"}
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
    # TSS: seal + open costs more than the plain encode + decode, in both modes
    for key in ("data_direct_over_plain", "data_cluster_over_plain",
                "ack_cc_direct_over_plain"):
        assert doc["tss"][key] > 1.0, (key, doc["tss"])
    # the terminal table of the same numbers: every number has a unit, ratios come first
    for name, section in doc.items():
        rows = ordered(section)
        assert sorted(k for k, _, _ in rows) == sorted(section)
        units = [u for _, _, u in rows]
        first_other = next(i for i, u in enumerate(units) if u != RATIO)
        assert all(u != RATIO for u in units[first_other:]), name
        for key, value in section.items():
            if isinstance(value, int | float) and not isinstance(value, bool):
                assert unit_of(key, value), (name, key)
        assert section_table(name, section).row_count == len(section)


def test_bench_prints_a_table_with_units(capsys: pytest.CaptureFixture[str]) -> None:
    assert uet_main(["bench", "--quick", "--section", "codec"]) == 0
    out = capsys.readouterr().out
    lines = [ln for ln in out.splitlines() if "│" in ln]
    assert "ratio" in lines[0] and RATIO in lines[0]  # the side-by-side ratio leads
    assert any("packets/s" in ln for ln in lines) and any(" B " in ln for ln in lines)
    assert "codec: the fast codec against scapy" in out


def test_units_from_key_names() -> None:
    cases = {("data_ratio", 170.0): RATIO, ("fep_over_traffic", 0.5): RATIO,
             ("native_ns_cffi_call", 24.0): "ns", ("initiator_us_per_packet", 5.0): "µs",
             ("crc32c_gbps", 10.0): "Gb/s", ("data_fast_pps", 1e5): "packets/s",
             ("packet_hops_per_s", 9e4): "hops/s", ("ops_per_s", 1e5): "ops/s",
             ("peak_memory_mb", 92.0): "MB", ("message_bytes", 262144): "B",
             ("wall_s", 0.1): "s", ("events_per_hop", 1.7): "per hop",
             ("packet_hops", 11083): "hops", ("meets_target", True): "",
             ("crc32c_path", "sse4.2"): ""}
    for (key, value), unit in cases.items():
        assert unit_of(key, value) == unit, key
