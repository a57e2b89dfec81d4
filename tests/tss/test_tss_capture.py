"""The reference capture tss.pcapng and its published key file: ``uet decode --keys`` and
the Lua dissector (real tshark, preference uet.tss_keys) decrypt and authenticate every
frame, agree field by field, show nothing but headers without the key, and flag a wrong
key as an authentication failure."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from uet.cli import main

ROOT = Path(__file__).resolve().parents[2]
CAPTURE = ROOT / "captures" / "tss.pcapng"
KEYS = ROOT / "captures" / "tss.keys"


def _decode(*args: str) -> list[dict]:
    buf = io.StringIO()
    with redirect_stdout(buf):
        assert main(["decode", str(CAPTURE), "--json", *args]) == 0
    return [json.loads(line) for line in buf.getvalue().splitlines()]


def test_uet_decode_with_and_without_the_key():
    plain = _decode("--keys", str(KEYS))
    assert len(plain) == 18 and all(o["uet.tss.decrypted"] is True for o in plain)
    types = [o["uet.pds.type"] for o in plain]
    assert types.count(2) == 4 and types.count(11) == 5  # RUD requests; 3 CLEAR + 2 CLOSE
    epsn = [o for o in plain if o.get("uet.pds.flags.epsn")]
    assert len(epsn) == 2  # each PDC's closing ACK
    second_start = [o["uet.pds.psn"] for o in plain if o.get("uet.pds.flags.syn")][-1]
    assert second_start == epsn[0]["uet.pds.ack.epsn"]  # EXPECTED_0RTT_START
    bare = _decode()
    assert all("uet.pds.type" not in o and o["uet.tss.sdi"] == 0x101
               and len(o["uet.tss.encrypted"]) > 32 for o in bare)


def test_uet_decode_rejects_a_bad_key_file(tmp_path, capsys):
    bad = tmp_path / "bad.keys"
    bad.write_text("257 cluster 1234 job=1\n", encoding="utf-8")
    assert main(["decode", str(CAPTURE), "--keys", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "key" in err and err.count("\n") == 1


@pytest.mark.tshark
def test_dissector_decrypts_and_agrees_with_uet_decode(tmp_path):
    from tests.wireshark.field_compare import compare
    from tests.wireshark.tshark_json import dissect

    shown = dissect(CAPTURE, prefs={"uet.tss_keys": str(KEYS)})
    decoded = _decode("--keys", str(KEYS))
    assert len(shown) == len(decoded) == 18
    problems = []
    for i, (d, obj) in enumerate(zip(shown, decoded, strict=True)):
        assert d.fields["uet.tss.decrypted"] == ["1"], i
        assert not d.experts, (i, d.experts)
        problems += [f"frame {i + 1}: {p}" for p in compare(d.fields, obj)]
    assert not problems, "\n".join(problems[:20])
    wrong = tmp_path / "wrong.keys"
    wrong.write_text(KEYS.read_text().replace("7565", "0000"), encoding="utf-8")
    bad = dissect(CAPTURE, prefs={"uet.tss_keys": str(wrong)})
    assert all(d.fields["uet.tss.decrypted"] == ["0"] for d in bad)
    assert all(any(e.abbrev == "uet.tss.auth_failed" or "authentication" in e.message
                   for e in d.experts) for d in bad)
    none = dissect(CAPTURE)
    assert all("uet.pds.type" not in d.fields and "uet.tss.encrypted" in d.fields
               for d in none)
