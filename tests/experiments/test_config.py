"""Experiment files: defaults, --set, errors with key path, line number and allowed values."""

from __future__ import annotations

from pathlib import Path

import pytest

from uet.experiments.config import (
    ConfigError,
    cms_config,
    find_line,
    host_count,
    load_config,
    parse_assignment,
    parse_config,
    parse_key_path,
    pds_config,
    validate,
)
from uet.experiments.schema import TABLES, parse_size

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "experiments").glob("*.toml"))

BAD_FILE = """\
[experiment]
name = "bad"
seed = 3

[topology]
kind = "fat_tree"
k = 4

[[impairments]]
class = "host"
loss = 0.01

[[impairments]]
match = "core0.p0"
loss = 1.5

[traffic]
pattern = "incast"
size = "2MB"
"""


def test_default_experiment_is_the_documented_one() -> None:
    cfg = load_config()
    assert cfg["topology"]["kind"] == "fat_tree" and cfg["topology"]["k"] == 4
    assert host_count(cfg["topology"]) == 16
    assert cfg["topology"]["rate_gbps"] == 100 and cfg["topology"]["delay_ns"] == 1000
    assert cfg["topology"]["trimming"] is True
    assert cfg["transport"]["profile"] == "ai-base" and cfg["transport"]["mode"] == "RUD"
    cms = cfg["transport"]["cms"]
    # "profile" resolves to AI Base's own choice (uet/profiles/ai-base.toml: mixed)
    assert (cms["ev_selector"], cms["ev_count"], cms["algorithm"]) == ("mixed", 128, "nscc")
    assert cfg["traffic"]["pattern"] == "permutation" and cfg["traffic"]["size"] == 1 << 20
    degraded, lossy = cfg["impairments"]
    assert degraded["match"] == ["core0.p0"] and degraded["direction"] == "down"
    assert degraded["rate_factor"] == degraded["queue_factor"] == 0.25
    assert lossy["match"] == ["core2.*"] and lossy["loss"] == 0.01
    assert cfg["capture"]["ifaces"] and cfg["capture"]["links"]
    assert cfg["source"]["file"].endswith("default.toml")
    built = cms_config(cfg)
    assert built.link_rate_bps == 100_000_000_000 and built.base_rtt_ps == 14_022_720
    assert built.trimming is True
    assert pds_config(cfg).mtu_payload > 0


def test_every_key_gets_its_default() -> None:
    cfg = parse_config("")
    for name in ("experiment", "topology", "transport", "traffic", "capture", "output"):
        table = TABLES[name]
        for key, spec in table.keys.items():
            if spec.when is None and spec.type not in ("table", "bool_or_table"):
                assert key in cfg[name], f"{name}.{key}"
    assert cfg["impairments"] == []
    # unset CMS choices follow the profile (AI Base by default)
    assert cfg["transport"]["cms"]["ev_selector"] == "mixed"
    assert cfg["transport"]["cms"]["algorithm"] == "nscc"
    hpc = parse_config("[transport]\nprofile = 'hpc'\n[transport.cms]\nalgorithm = 'rccc'\n")
    assert hpc["transport"]["cms"]["algorithm"] == "rccc"
    assert "leaves" not in cfg["topology"]  # applies to leaf_spine only


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_examples_validate_and_build_workloads(path: Path) -> None:
    from uet.experiments.traffic import build_workload

    cfg = load_config(path)
    wl = build_workload(cfg)
    assert wl.flows and wl.hosts == host_count(cfg["topology"])


def test_validation_is_idempotent() -> None:
    cfg = load_config(None, ["traffic.size=64KiB"])
    again = validate(cfg)
    assert again == cfg


def test_set_overrides_any_key() -> None:
    cfg = load_config(None, [
        "traffic.size=2MB", "traffic.pattern=incast", "traffic.dst=3",
        "impairments[0].loss=0.02", "impairments.1.class=agg_core",
        "transport.cms.ev_selector=fixed", "transport.pds.rto_ps=100000000",
        "topology.pfc=true", "capture.ifaces=[\"h1\", \"tor0.p2\"]",
        "experiment.name=42",
    ])
    assert cfg["traffic"]["size"] == 2_000_000 and cfg["traffic"]["dst"] == 3
    assert cfg["impairments"][0]["loss"] == 0.02
    assert cfg["impairments"][1]["class"] == "agg_core"
    assert cfg["transport"]["cms"]["ev_selector"] == "fixed"
    assert cfg["transport"]["pds"] == {"rto_ps": 100_000_000}
    assert cfg["topology"]["pfc"]["xoff"] == 60_000
    assert cfg["capture"]["ifaces"] == ["h1", "tor0.p2"]
    assert cfg["experiment"]["name"] == "42"  # a string key keeps the text
    assert "--set traffic.size=2MB" in cfg["source"]["overrides"]


def test_parse_assignment_and_paths() -> None:
    assert parse_key_path("impairments[2].gilbert.p_gb") == ("impairments", 2, "gilbert", "p_gb")
    assert parse_key_path("impairments.2.loss") == ("impairments", 2, "loss")
    assert parse_assignment("traffic.hosts=[1, 2]") == (("traffic", "hosts"), [1, 2])
    assert parse_assignment("traffic.pattern=incast") == (("traffic", "pattern"), "incast")
    assert parse_assignment("topology.ecn=false") == (("topology", "ecn"), False)
    for bad in ("", "a..b", "3.x", "a b"):
        with pytest.raises(ConfigError):
            parse_key_path(bad)
    with pytest.raises(ConfigError, match="expected key.path=value"):
        parse_assignment("traffic.size")


def _error(text: str, sets: tuple[str, ...] = ()) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        parse_config(text, "exp.toml", sets)
    return info.value


def test_bad_value_names_path_line_and_allowed() -> None:
    err = _error(BAD_FILE)
    assert err.path == "impairments[1].loss" and err.line == 15
    assert "exp.toml, line 15" in str(err)
    assert "a number in [0, 1]" in err.allowed and "1.5" in str(err)


def test_unknown_key_is_refused_with_allowed_keys() -> None:
    text = BAD_FILE.replace("loss = 1.5", "loss = 0.5")
    err = _error(text.replace('size = "2MB"', 'size = "2MB"\nsizes = 3'))
    assert err.path == "traffic.sizes" and err.line == 20
    assert "unknown key" in str(err) and "pattern, size" in err.allowed


def test_unknown_section_and_inapplicable_key() -> None:
    err = _error("[topolgy]\nkind = 'star'\n")
    assert err.path == "topolgy" and err.line == 1 and "[topology]" in err.allowed
    err = _error("[topology]\nkind = 'star'\nk = 4\n")
    assert err.path == "topology.k" and err.line == 3
    assert "only when topology.kind is fat_tree" in str(err)
    # a --set/--sweep that changes the kind drops the file's keys of the old kind ...
    cfg = parse_config("[topology]\nk = 4\n", sets=["topology.kind=star"])
    assert "k" not in cfg["topology"] and cfg["topology"]["hosts"] == 4
    # ... but not keys set on the command line too
    err = _error("", ("topology.kind=star", "topology.k=4"))
    assert err.where == "--set topology.k=4"


def test_enum_and_size_errors_list_allowed_values() -> None:
    err = _error("[transport.cms]\nev_selector = 'spray'\n")
    assert err.path == "transport.cms.ev_selector" and err.line == 2
    assert err.allowed == "one of fixed, oblivious, bitmap, reps, mixed, profile"
    err = _error("[traffic]\nsize = '12 parsecs'\n")
    assert err.path == "traffic.size" and "1MiB" in err.allowed
    err = _error("[transport.cms]\nev_count = 100\n")
    assert "power of two" in err.allowed


def test_lines_found_in_inline_and_nested_tables() -> None:
    text = ("[topology]\nkind = 'fat_tree'\npfc = { xoff = 100, xon = 200 }\n"
            "[[impairments]]\nclass = 'host'\n[[impairments]]\nclass = 'switch'\n"
            "[impairments.gilbert]\np_gb = 2.0\n")
    err = _error(text)
    assert err.path == "impairments[1].gilbert.p_gb" and err.line == 9
    err = _error(text.replace("p_gb = 2.0", "p_gb = 0.2"))
    assert err.path == "topology.pfc.xon" and err.line == 3
    assert find_line(text, ("impairments", 1, "class")) == 7
    assert find_line(text, ("impairments", 0)) == 4
    assert find_line("# [traffic]\nx = 1 # [y]\n[traffic]\n size = 1\n", ("traffic", "size")) == 4


def test_set_errors_name_the_override() -> None:
    err = _error("", ("traffic.sizee=5",))
    assert err.path == "traffic.sizee" and err.where == "--set traffic.sizee=5"
    assert "unknown key" in str(err) and "size" in err.allowed
    err = _error("", ("impairments[3].loss=0.1",))
    assert "no element 3" in str(err)
    err = _error("", ("experiment.seed.x=1",))
    assert err.path == "experiment.seed" and err.where == "--set experiment.seed.x=1"
    err = _error("[experiment]\nseed = 3\n", ("experiment.seed.x=1",))
    assert "is not a table" in str(err)
    err = _error("[traffic]\nsize = 100\n", ("traffic.size=-5",))
    assert err.where.startswith("--set") and err.line is None


def test_cross_checks() -> None:
    err = _error("[transport.cms]\nalgorithm = 'rccc'\n")
    assert err.path == "transport.cms.algorithm" and err.allowed == "none, nscc"
    err = _error("[transport]\nmode = 'UUD'\n")
    assert err.path == "transport.mode" and "RUD" in err.allowed
    err = _error("[transport]\nprofile = 'no-such-profile'\n")
    assert err.path == "transport.profile" and "ai-base" in err.allowed
    err = _error("[transport.cms]\nmax_window_bytes = 10\n")
    assert err.path == "transport.cms.max_window_bytes"
    err = _error("[transport.cms]\nno_such_field = 1\n")
    assert err.path == "transport.cms.no_such_field" and "max_window_bytes" in err.allowed
    err = _error("[transport.pds]\nmp_range = 100\n")
    assert err.path == "transport.pds.mp_range" and err.line == 2
    err = _error("[traffic]\npattern = 'allreduce_butterfly'\nhosts = [0, 1, 2]\n")
    assert err.path == "traffic.hosts" and "power-of-two" in err.allowed
    for pattern in ("allreduce_ring", "allreduce_halving_doubling"):
        err = _error(f"[traffic]\npattern = '{pattern}'\nhosts = [0, 1, 2, 3]\nsize = 3\n")
        assert err.path == "traffic.size" and err.allowed == "at least 4 bytes (one per rank)"
    err = _error("[traffic]\npattern = 'permutation'\npairs = [[0, 1], [2, 1]]\n")
    assert "not a permutation" in str(err)
    err = _error("[traffic]\npattern = 'single'\nsrc = 3\ndst = 3\n")
    assert err.path == "traffic.dst"
    err = _error("[traffic]\nhosts = [0, 99]\n")
    assert err.path == "traffic.hosts[1]" and err.allowed == "0..15"
    err = _error("[topology]\necn_kmin = 200000\n")
    assert err.path == "topology.ecn_kmin"
    err = _error("[[impairments]]\nloss = 0.1\n")
    assert err.path == "impairments[0]" and err.line == 1
    err = _error("[capture]\nifaces = ['h16']\n")
    assert err.path == "capture.ifaces[0]" and err.allowed == "h0..h15"
    err = _error("[traffic]\npattern = 'cm_file'\nfile = 'missing.cm'\n")
    assert err.path == "traffic.file" and "cannot read" in str(err)


def test_cm_file_resolves_relative_to_the_experiment(tmp_path: Path) -> None:
    (tmp_path / "w.cm").write_text("Nodes 40\nConnections 1\n0->1 start 0 size 10\n")
    exp = tmp_path / "e.toml"
    exp.write_text("[traffic]\npattern = 'cm_file'\nfile = 'w.cm'\n")
    with pytest.raises(ConfigError, match="Nodes 40") as info:
        load_config(exp)
    assert info.value.line == 3
    (tmp_path / "w.cm").write_text("Nodes 4\nConnections 1\n0->1 start 0 size 10\n")
    # resolved once, at validation (a sweep worker or a later step need no cwd)
    assert load_config(exp)["traffic"]["file"] == str(tmp_path / "w.cm")


def test_sizes() -> None:
    assert parse_size("2MB") == 2_000_000
    assert parse_size("1MiB") == 1 << 20
    assert parse_size("64 KiB") == 65536
    assert parse_size("1.5KiB") == 1536
    assert parse_size(4096) == 4096
    for bad in ("1.3B", "lots", True, 1.5):
        with pytest.raises(ValueError):
            parse_size(bad)


def test_fabric_topology_builds_the_fabric() -> None:
    from uet.experiments.config import fabric_topology
    from uet.fabric.network import Network
    from uet.fabric.topology import build

    for sets in ([], ["topology.kind=leaf_spine", "topology.oversubscription=2.0",
                      "topology.pfc=true"], ["topology.kind=star", "topology.hosts=3"]):
        cfg = load_config(None, sets + ["capture.links=[]", "impairments=[]"])
        net = build(Network(seed=1), fabric_topology(cfg))
        assert len(net.nics) == host_count(cfg["topology"])
