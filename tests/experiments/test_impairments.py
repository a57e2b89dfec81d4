"""[[impairments]] selections expanded over the links of a fabric."""

from __future__ import annotations

import pytest

from uet.experiments.config import ConfigError, fabric_topology, load_config, parse_config
from uet.experiments.impairments import link_class, plan, select


def _fat_tree():
    from uet.fabric.network import Network
    from uet.fabric.topology import build

    cfg = load_config(None, ["impairments=[]"])
    return build(Network(seed=1), fabric_topology(cfg))


def test_classes_of_the_fat_tree_links() -> None:
    net = _fat_tree()
    counts: dict[str, int] = {}
    for link in net.links:
        for c in link_class(link.a, link.b):
            counts[c] = counts.get(c, 0) + 1
    assert counts == {"all": 48, "host": 16, "switch": 32, "tor_agg": 16, "agg_core": 16}


def test_plan_for_the_default_experiment() -> None:
    net = _fat_tree()
    cfg = load_config()
    out = plan(cfg, net.links)
    # core0 -> agg0 at a quarter of its rate, its queue scaled alike (htsim's -failed 1)
    assert out[0] == {"at": "agg0.p2", "direction": "rx",
                      "cfg": {"rate_bps": 25_000_000_000, "queue_factor": 0.25}}
    # 1% loss both ways on the four links of core2 (port 2 of the second agg of each pod)
    assert out[1:] == [{"at": f"agg{a}.p2", "direction": d, "cfg": {"loss": 0.01}}
                       for a in (1, 3, 5, 7) for d in ("tx", "rx")]
    for item in out:  # the fabric accepts it
        net.impair(item["at"], item["cfg"], item["direction"])


def test_selection_direction_merge_and_rates() -> None:
    links = [("h0", "tor0.p0"), ("tor0.p2", "agg0.p0"), ("core0.p0", "agg0.p2")]
    text = """
[[impairments]]
class = "switch"
direction = "up"
loss = 0.01
[[impairments]]
match = "agg0.*"
class = "agg_core"
rate_factor = 0.25
down = [[1000, 2000], [5000]]
[[impairments]]
match = ["h0"]
gilbert = { p_gb = 0.1, p_bg = 0.5 }
jitter_ps = 7
seed = 0
"""
    cfg = parse_config(text)
    assert select(cfg["impairments"][1], links) == [("agg0.p2", "core0.p0")]  # lower end first
    out = {(p["at"], p["direction"]): p["cfg"] for p in plan(cfg, links)}
    assert out[("tor0.p2", "tx")] == {"loss": 0.01}
    assert ("tor0.p2", "rx") not in out
    assert out[("agg0.p2", "tx")] == {"loss": 0.01, "rate_bps": 25_000_000_000,
                                      "down": [[1000, 2000], [5000, None]]}
    assert out[("agg0.p2", "rx")] == {"rate_bps": 25_000_000_000,
                                      "down": [[1000, 2000], [5000, None]]}
    assert out[("h0", "tx")] == {"jitter_ps": 7, "seed": 0, "gilbert": {
        "p_gb": 0.1, "p_bg": 0.5, "loss_good": 0.0, "loss_bad": 1.0}}
    half = plan(cfg, links, rates={"agg0.p2<->core0.p0": 40e9})
    assert {p["cfg"].get("rate_bps") for p in half if p["at"] == "agg0.p2"} == {10e9}


def test_a_selection_matching_nothing_names_its_line(tmp_path) -> None:
    exp = tmp_path / "e.toml"
    exp.write_text("[experiment]\nseed = 1\n\n[[impairments]]\nmatch = 'spine*'\nloss = 0.1\n")
    cfg = load_config(exp)
    with pytest.raises(ConfigError) as info:
        plan(cfg, [("h0", "tor0.p0")])
    assert info.value.path == "impairments[0].match" and info.value.line == 5
    assert "h0<->tor0.p0" in info.value.allowed
