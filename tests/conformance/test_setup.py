"""The well-known setup: validation that names the key, round trips, the serve command."""

from __future__ import annotations

import json

import pytest
from helpers import SERVE_HPC, uet

from uet.conformance.setup import WELL_KNOWN, DutSetup, SetupError, pattern
from uet.conformance.targets import DutSpec


def test_pattern_is_the_documented_formula():
    assert pattern(600, 1000) == bytes((i * 31 + 7) % 251 for i in range(1000, 1600))
    assert pattern(0) == b""


def test_round_trip_and_errors(tmp_path):
    assert DutSetup.from_dict(json.loads(WELL_KNOWN.to_json())) == WELL_KNOWN
    with pytest.raises(SetupError, match="unknown key 'rto'"):
        DutSetup.from_dict({"rto": 1})
    with pytest.raises(SetupError, match="profile: must be one of ai-base, ai-full, hpc"):
        DutSetup.from_dict({"profile": "hpcx"})
    with pytest.raises(SetupError, match="rma.perms"):
        data = WELL_KNOWN.to_dict()
        data["regions"][0]["perms"] = ["execute"]
        DutSetup.from_dict(data)
    with pytest.raises(SetupError, match="cc: must be one of"):
        WELL_KNOWN.with_(cc="bbr")
    with pytest.raises(SetupError, match="rto_us: must be > 0"):
        WELL_KNOWN.with_(rto_us=0)
    (tmp_path / "bad.json").write_text("[1]")
    with pytest.raises(SetupError, match="must be a JSON object"):
        DutSetup.load(tmp_path / "bad.json")


def test_dut_spec_parsing():
    assert DutSpec.parse("udp:127.0.0.2:4800") == DutSpec("127.0.0.2", 4800, None)
    assert DutSpec.parse("udp:[::1]@ai-base") == DutSpec("::1", 4793, "ai-base")
    assert str(DutSpec("::1", 4793, "hpc")) == "udp:[::1]:4793@hpc"
    # host names resolve (localhost from /etc/hosts); "a..b" fails before any DNS query
    assert DutSpec.parse("udp:localhost:4800") == DutSpec("127.0.0.1", 4800, None)
    for bad, msg in (("udp:a..b:1", "cannot resolve the host name"),
                     ("udp:[a]:1", "not an IPv6 address"), ("udp:1.2.3.4:0", "port must"),
                     ("1.2.3.4", "expected udp:")):
        with pytest.raises(ValueError, match=msg):
            DutSpec.parse(bad)


def test_serve_refuses_bad_setup_values(tmp_path):
    proc = uet("serve", "--set", "rto_us=-1", "--duration", "0")
    assert proc.returncode == 2 and "rto_us: must be > 0" in proc.stderr
    proc = uet("serve", "--listen", "127.0.0.1:99999", "--duration", "0")
    assert proc.returncode == 2 and "port must be in [1, 65535]" in proc.stderr
    out = tmp_path / "s.json"
    ip = SERVE_HPC.rsplit(".", 1)[0] + ".3"
    proc = uet("serve", "--listen", f"{ip}:4793", "--set", "rto_us=90000", "--profile",
               "ai-base", "--setup-out", str(out), "--duration", "0", "--json")
    assert proc.returncode == 0, proc.stderr
    s = DutSetup.load(out)
    assert (s.rto_us, s.profile) == (90000, "ai-base")
