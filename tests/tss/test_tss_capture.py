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


def test_only_uet_frames_are_taken_for_tss():
    """A frame is treated as secured only when its TSS-looking byte follows the UDP header
    of the UET port (or the entropy header of the UET IP protocol): a DNS datagram whose
    first payload byte happens to be 0x08 is decoded as what it is."""
    from uet.tss.sublayer import frame_is_secured

    def v4(proto: int, l4: bytes) -> bytes:
        ip = bytes([0x45, 0, 0, 20 + len(l4), 0, 0, 0, 0, 64, proto, 0, 0,
                    127, 0, 0, 1, 127, 0, 0, 2])
        return bytes(12) + b"\x08\x00" + ip + l4

    tss = b"\x08" + bytes(15)
    udp = lambda dport: (1234).to_bytes(2, "big") + dport.to_bytes(2, "big") + bytes(4)  # noqa: E731
    assert frame_is_secured(v4(17, udp(4793) + tss), udp_port=4793)
    assert not frame_is_secured(v4(17, udp(53) + tss), udp_port=4793)
    assert frame_is_secured(v4(17, udp(53) + tss))  # no port given: any UDP port
    assert frame_is_secured(v4(253, bytes(4) + tss), ip_proto=253)
    assert not frame_is_secured(v4(6, bytes(4) + tss), ip_proto=253)
    assert not frame_is_secured(v4(17, udp(4793) + b"\x10" + bytes(15)), udp_port=4793)
