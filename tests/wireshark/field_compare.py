"""Field-by-field comparison of what tshark shows (``tshark_json.dissect``) with
``uet decode --json`` for the same frame, except the documented exceptions
(docs/wireshark.md, "Cross-check with uet decode --json")."""

from __future__ import annotations

import io
import json
import re
from contextlib import redirect_stdout

from uet.cli import main

#: Shown by the dissector only: header items (byte strings of a whole header), what needs
#: the whole capture or the dissector's preferences, and the SACKed-PSN list.
DISSECTOR_ONLY = {
    "uet.pds", "uet.ses", "uet.tss", "uet.pds.ack.prlg", "uet.ses.atomic_op_ext_hdr",
    "uet.ses.comp_swap_ext_hdr", "uet.ses.rendv_ext_hdr",
    "uet.pdc", "uet.pdc.dir", "uet.pdc.initiator_pdcid", "uet.pdc.first_frame",
    "uet.udp_checksum.status", "uet.udp_checksum.calculated",
    "uet.crc32c", "uet.crc32c.calculated", "uet.crc32c.status", "uet.trimmed",
    "uet.pds.sack_psn",
}
#: Reserved fields the records do not keep (the codec writes zero): the dissector shows
#: them (Wireshark names them), ``uet decode`` does not. They must read 0 here.
RESERVED = re.compile(r"[._](rsv\d*|rsvd|reserved\d*)$")
#: Same 16 bits: FT_UINT16 in Wireshark (unsigned), the signed offset in uet decode.
UNSIGNED16 = {"uet.pds.ack.sack_offset"}
#: The trailer: uet decode calls it uet.trailer, the dissector names what it is.
TRAILER_ALIASES = ("uet.tss.icv", "uet.crc32c")


def decode_json(path, trailer_len: int) -> list[dict]:
    buf = io.StringIO()
    with redirect_stdout(buf):
        # the synthetic samples put cleartext after their TSS headers (the dissector's
        # preference uet.tss_cleartext)
        rc = main(["decode", str(path), "--json", "--trailer-len", str(trailer_len),
                   "--tss-cleartext"])
    assert rc == 0
    return [json.loads(line) for line in buf.getvalue().splitlines()]


def _tshark(value: str):
    """tshark text -> int, or lowercase hex (no separators) for byte strings."""
    if re.fullmatch(r"[0-9a-f]{2}(:[0-9a-f]{2})+", value):
        return value.replace(":", "")
    if value.startswith("0x"):
        return int(value, 16)
    if re.fullmatch(r"-?\d+", value):
        return int(value)
    return value


def _json(value):
    """uet decode value -> int (booleans as 0/1), or the string (hex for byte strings)."""
    return int(value) if isinstance(value, bool | int) else value


def _same(shown: str, decoded) -> bool:
    """One tshark value equals one uet decode value: byte strings (hex in uet decode) as
    text, everything else as numbers."""
    if isinstance(decoded, str) and re.fullmatch(r"[0-9a-f]*", decoded):
        return shown.replace(":", "") == decoded
    return _tshark(shown) == _json(decoded)


def _zero(shown: str) -> bool:
    """A reserved field reads zero (number or byte string)."""
    return re.fullmatch(r"(0x)?[0:]+", shown) is not None


def compare(shown: dict[str, list[str]], decoded: dict) -> list[str]:
    """Differences between one frame's tshark fields and its uet decode JSON object."""
    problems = []
    ours = {k: v for k, v in decoded.items() if k.startswith("uet.")}
    for key in sorted(set(shown) | set(ours)):
        tv = shown.get(key)
        if key in DISSECTOR_ONLY or key in TRAILER_ALIASES:
            if key in ours:
                problems.append(f"{key}: expected only in tshark, uet decode has it")
            continue
        if key == "uet.trailer":
            alias = [shown[a][0] for a in TRAILER_ALIASES if a in shown]
            if not alias or not _same(alias[0], ours[key]):
                problems.append(f"uet.trailer {ours[key]} != tshark {alias}")
            continue
        if tv is None:
            problems.append(f"{key}: uet decode {ours[key]!r}, not shown by tshark")
            continue
        if len(tv) != 1:
            problems.append(f"{key}: tshark shows it {len(tv)} times: {tv}")
            continue
        if key not in ours:
            if RESERVED.search(key) and _zero(tv[0]):
                continue
            problems.append(f"{key}: tshark {tv[0]!r}, not in uet decode")
            continue
        if key in UNSIGNED16:
            if _tshark(tv[0]) != ours[key] & 0xFFFF:
                problems.append(f"{key}: tshark {tv[0]!r} != uet decode {ours[key]!r}")
            continue
        if not _same(tv[0], ours[key]):
            problems.append(f"{key}: tshark {tv[0]!r} != uet decode {ours[key]!r}")
    return problems
