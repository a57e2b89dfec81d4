"""Profile files: loading, validation messages, the superset relation, and ``uet profiles``."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from uet.cli import main
from uet.profiles import (
    BUILTIN_PROFILES,
    SCHEMA,
    ProfileConfigError,
    builtin_profile,
    builtin_profiles,
    load_profile,
    peer_profiles,
    profiles_dir,
)
from uet.wire.constants import DeliveryMode, FepCap, SesOpcode


def test_builtin_profiles_load_with_their_bits():
    profiles = builtin_profiles()
    assert list(profiles) == ["ai-base", "ai-full", "hpc"]
    assert profiles["ai-base"].fep_cap & FepCap.AI_BASE
    assert profiles["ai-full"].fep_cap & FepCap.AI_FULL
    assert profiles["hpc"].fep_cap & FepCap.HPC
    for p in profiles.values():
        assert set(p.values) >= {k for k, spec in SCHEMA.items() if spec.required}


def test_ai_full_is_a_superset_of_ai_base():
    base, full = builtin_profile("ai-base"), builtin_profile("ai-full")
    assert base.modes <= full.modes
    assert base.operations < full.operations
    assert base.atomic_opcodes < full.atomic_opcodes
    assert base.atomic_datatypes < full.atomic_datatypes
    assert set(base.cc_algorithms) <= set(full.cc_algorithms)
    added = full.operations - base.operations
    assert {SesOpcode.DEFERRABLE_SEND, SesOpcode.TAGGED_SEND, SesOpcode.RENDEZVOUS_SEND} <= added
    assert full.tag_matching == "exact" and base.tag_matching == "none"
    assert full.fep_cap & FepCap.AI_BASE  # an AI Full end point also speaks AI Base


def test_hpc_has_mpi_features():
    hpc = builtin_profile("hpc")
    assert DeliveryMode.RUDI in hpc.modes
    assert hpc.tag_matching == "wildcard"
    assert {SesOpcode.RENDEZVOUS_SEND, SesOpcode.RENDEZVOUS_TSEND} <= hpc.operations


def test_peer_profiles_from_bits():
    assert [p.name for p in peer_profiles(FepCap.HPC)] == ["hpc"]
    assert [p.name for p in peer_profiles(builtin_profile("ai-full").fep_cap)] == [
        "ai-base", "ai-full"]
    assert peer_profiles(FepCap.OPT_NON_MATCHING) == []


def _write(tmp_path, text, name="user.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def _base_text():
    return (profiles_dir() / "ai-base.toml").read_text()


def test_user_profile_from_path_and_extends(tmp_path):
    path = _write(tmp_path, '[profile]\nname = "mine"\nextends = "ai-full"\n'
                  '[ses]\nmtu_payload = 8192\nrendezvous_eager_bytes = 8192\n')
    p = load_profile(path)
    assert p.name == "mine" and p.ses.mtu_payload == 8192
    assert p.operations == builtin_profile("ai-full").operations
    assert p.source == str(path)
    full = _write(tmp_path, _base_text().replace('name = "ai-base"', 'name = "copy"'), "c.toml")
    assert load_profile(full).operations == builtin_profile("ai-base").operations


BAD = [
    ("unknown key", ("[ses]", "[ses]\nmtu = 4096"), "ses.mtu", "ses.mtu_payload"),
    ("unknown section", ("[pds]", "[crypto]\nx = 1\n[pds]"), "[crypto]", "allowed sections"),
    ("bad int", ("mtu_payload = 4096", "mtu_payload = 99999"), "ses.mtu_payload", "256..16383"),
    ("int as string", ("mtu_payload = 4096", 'mtu_payload = "4096"'), "ses.mtu_payload",
     "integer"),
    ("bool as int", ("trimming = true", "trimming = 1"), "cms.trimming", "true or false"),
    ("bad mode", ('modes = ["RUD", "ROD"]', 'modes = ["RUD", "FAST"]'), "delivery.modes",
     "RUD, ROD, RUDI, UUD"),
    ("bad matching", ('matching = "none"', 'matching = "fuzzy"'), "tagged.matching",
     "none, exact, wildcard"),
    ("bad opcode", ('"MSG_ERROR"]', '"MSG_ERROR", "TELEPORT"]'), "operations.allowed",
     "TAGGED_SEND"),
    ("bad atomic", ('"CSWAP"]', '"CSWAP", "FMA"]'), "atomics.opcodes", "MSWAP"),
    ("bad datatype", ('"FP16"]', '"FP16", "FP8"]'), "atomics.datatypes", "BF16"),
    ("bad cc", ('algorithms = ["nscc"]', 'algorithms = ["cubic"]'), "cms.algorithms",
     "nscc, rccc"),
    ("repeated", ('modes = ["RUD", "ROD"]', 'modes = ["RUD", "RUD"]'), "delivery.modes",
     "repeated"),
    ("missing key", ("max_pdcs = 4096\n", ""), "pds.max_pdcs", "missing"),
    ("default mode not allowed", ('default_mode = "RUD"', 'default_mode = "UUD"'),
     "delivery.default_mode", "delivery.modes"),
    ("tagging without matching", ('"MSG_ERROR"]', '"MSG_ERROR", "TAGGED_SEND"]'),
     "tagged.matching", "exact or wildcard"),
    ("datagram without UUD", ('"MSG_ERROR"]', '"MSG_ERROR", "DATAGRAM_SEND"]'),
     "operations.allowed", "UUD"),
    ("cc default not allowed", ('default = "nscc"', 'default = "rccc"'), "cms.default",
     "cms.algorithms"),
    ("bad name", ('name = "ai-base"', 'name = "AI Base!"'), "profile.name", "lower-case"),
    ("no profile bit", ('fep_cap = ["AI_BASE", "OPT_NON_MATCHING"]',
                        'fep_cap = ["OPT_NON_MATCHING"]'), "profile.fep_cap", "AI_BASE"),
]


@pytest.mark.parametrize("case,edit,key,hint", BAD, ids=[b[0] for b in BAD])
def test_bad_profile_is_refused_naming_the_key(tmp_path, case, edit, key, hint):
    old, new = edit
    text = _base_text()
    assert old in text, case
    path = _write(tmp_path, text.replace(old, new, 1))
    with pytest.raises(ProfileConfigError) as exc:
        load_profile(path)
    msg = str(exc.value)
    assert str(path) in msg and key in msg and hint in msg, msg


def test_bad_toml_and_missing_files(tmp_path):
    with pytest.raises(ProfileConfigError, match="not valid TOML"):
        load_profile(_write(tmp_path, "[ses\n"))
    with pytest.raises(ProfileConfigError, match="ai-base, ai-full, hpc"):
        load_profile(tmp_path / "nope.toml")
    with pytest.raises(ProfileConfigError, match="profile.extends.*ai-base"):
        load_profile(_write(tmp_path, '[profile]\nname = "x"\nextends = "gpu"\n'))


def test_uet_profiles_json(capsys):
    assert main(["profiles", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert list(data) == list(BUILTIN_PROFILES)
    assert data["hpc"]["tagged.matching"] == "wildcard"
    assert "TAGGED_SEND" not in data["ai-base"]["operations.allowed"]
    assert data["ai-full"]["profile.fep_cap_bits"] == int(builtin_profile("ai-full").fep_cap)
    assert data["ai-base"]["pds.rto_min_us"] == 100


def test_uet_profiles_table_and_user_file(capsys, tmp_path):
    assert main(["profiles"]) == 0
    out = capsys.readouterr().out
    for word in ("AI Base", "AI Full", "HPC", "op TAGGED_SEND", "pds.mp_range", "wildcard"):
        assert word in out
    path = _write(tmp_path, '[profile]\nname = "mine"\nextends = "hpc"\n')
    assert main(["profiles", "--json", "--profile", str(path), "--profile", "ai-base"]) == 0
    assert list(json.loads(capsys.readouterr().out)) == ["mine", "ai-base"]
    bad = _write(tmp_path, "[profile]\nname = 3\n", "bad.toml")
    assert main(["profiles", "--profile", str(bad)]) == 2
    assert "profile.name" in capsys.readouterr().err


def test_uet_profiles_console_script():
    out = subprocess.run([sys.executable, "-m", "uet.cli", "profiles", "--json"],
                         capture_output=True, text=True, check=True).stdout
    assert set(json.loads(out)) == {"ai-base", "ai-full", "hpc"}
