"""``uet decode -Y FILTER`` selects the frames tshark selects with the same display filter
(the dissector loaded), on the reference captures."""

from __future__ import annotations

import io
from contextlib import redirect_stdout
from pathlib import Path

import pytest
import tshark_json

from uet.cli import main

pytestmark = pytest.mark.tshark

CAPTURES = Path(__file__).resolve().parents[2] / "captures"
#: headers.pcapng's TSS samples carry cleartext after the TSS header and no ICV
PREFS = {"udp.try_heuristic_first": "TRUE", "uet.tss_icv": "FALSE", "uet.tss_cleartext": "TRUE"}

CASES = [  # one tshark run each (about 0.4 s): every operator and value kind once
    ("rud_loss", "uet.pds.flags.retx == 1 && uet.pds.type in {2, 3}"),
    ("rud_loss", "ip.src == 10.0.0.0/24 and not uet.pds.flags.syn == 1"),
    ("rud_loss", "uet.pds.sack_base > 0 || uet.pds.flags.ar"),
    ("trim_nack", "ip.dsfield.dscp in {12..14} && !(uet.pds.type == 10)"),
    ("pfc_pause", "macc.cbfc.pause_time.c0 > 0 or !uet"),
    ("uud", 'frame.interface_name == "h1" or udp.srcport >= 44258'),
    ("headers", "ipv6 || uet.pds.rudi.pkt_id == 77 || uet.tss"),
    ("headers", "uet.ses.std.opcode == 5 || (uet.pds.type == 11 && uet.pds.ctl_type <= 7)"),
    ("headers", "eth.src == 02:00:00:00:00:02 || uet.pds.ack.cc_type eq 1"),
]


def _ours(capture: Path, flt: str) -> list[int]:
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["decode", str(capture), "-Y", flt, "--tss-cleartext"]) == 0
    return [int(line.split()[0]) for line in out.getvalue().splitlines()]


@pytest.mark.parametrize("name,flt", CASES)
def test_decode_filter_agrees_with_tshark(name: str, flt: str) -> None:
    capture = CAPTURES / f"{name}.pcapng"
    theirs = tshark_json.run_tshark(capture, prefs=PREFS,
                                    extra=["-Y", flt, "-T", "fields", "-e", "frame.number"])
    want = [int(n) for n in theirs.split()]
    assert want, f"{flt} selects nothing in {name}: not a useful case"
    assert _ours(capture, flt) == want
