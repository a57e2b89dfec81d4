"""The emulation bench section runs the htsim permutation and reports its figures."""

from __future__ import annotations

from uet.bench import emulation


def test_measure_small_permutation() -> None:
    r = emulation.measure(64 * 1024)
    assert r["packet_hops"] > 16 * 16 * 2  # >= 16 packets per flow over >= 2 hops
    assert r["packet_hops_per_s"] > 0 and r["events_per_hop"] < 3
    assert 1.0 < r["fct_tail_over_ideal"] < 3.0
    assert r["endpoint"] == "uet.bench.traffic_endpoint.TrafficEndpoint"
    again = emulation.measure(64 * 1024)
    assert again["packet_hops"] == r["packet_hops"] and again["fct_tail_us"] == r["fct_tail_us"]


def test_endpoint_is_selectable(monkeypatch) -> None:
    monkeypatch.setenv("UET_BENCH_ENDPOINT", "uet.bench.traffic_endpoint:factory")
    ep = emulation._endpoint_from_env()
    assert callable(ep)
    r = emulation.measure(32 * 1024, endpoint=ep)
    assert r["packet_hops"] > 0


def test_ideal() -> None:
    # htsim: 2 MB = 490 x 4150 B (their MSS 4086, last packet full): 162.7 us + 6 us
    # + 5 x 0.332 us = 170.3 us; we count the last packet at its real size (-0.15 us)
    assert abs(emulation.ideal_fct_ps(2_000_000, mss=4086, header=64) / 1e6 - 170.3) < 0.2
