"""The reference captures of ``captures/`` under real tshark with the bundled dissector:

* every ``uet.*`` field tshark shows equals ``uet decode --json`` for the same frame, frame by
  frame, in every capture (non-UET frames, the PFC pauses, are non-UET to both);
* valid captures raise no expert info of Warning or Error severity; the only lower ones are
  the Notes of trimmed packets (``uet.ses.short_payload``), and those only on trimmed frames;
* ``uet.trimmed`` marks exactly the frames with a trimmed DSCP (12 or 14);
* the broken copy ``broken_rud.pcapng`` raises exactly the expert infos
  ``tools/make_captures.py`` planted, on the frames it damaged;
* the display filter docs/wireshark.md suggests for each capture matches in it.

UDP heuristics run first (``udp.try_heuristic_first``), as docs/wireshark.md advises for
sprayed traffic: fabric EVs are random 16-bit source ports.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
from field_compare import compare, decode_json
from tshark_json import dissect, run_tshark
from wireshark_frames import SEVERITY

pytestmark = pytest.mark.tshark

ROOT = Path(__file__).resolve().parents[2]
CAPTURES = ROOT / "captures"
#: headers.pcapng's TSS samples carry cleartext after the TSS header and no ICV
PREFS = {"udp.try_heuristic_first": "TRUE", "uet.tss_icv": "FALSE", "uet.tss_cleartext": "TRUE"}
VALID = ["headers", "pdc_open_close", "rud_loss", "rod_reorder", "rudi", "uud", "trim_nack",
         "pfc_pause", "sample", "trimmed_ack", "ccx", "negotiation", "native_ip", "atomics_dc",
         "nack_codes"]
#: Expert infos a valid capture may carry (below Warning): trimmed packets' short payloads.
ALLOWED_NOTES = {"uet.ses.short_payload"}


def _tool():
    spec = importlib.util.spec_from_file_location("make_captures_for_tshark",
                                                  ROOT / "tools" / "make_captures.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def shown():
    """Each capture dissected once by tshark, and decoded once by uet decode --json."""
    out = {}
    for name in [*VALID, "broken_rud"]:
        path = CAPTURES / f"{name}.pcapng"
        out[name] = (dissect(path, prefs=PREFS), decode_json(path, 0))
    return out


def test_every_reference_capture_is_listed():
    # tss.pcapng is encrypted: tests/tss/test_tss_capture.py compares it with its key file
    assert sorted(p.stem for p in CAPTURES.glob("*.pcapng")) == sorted([*VALID, "broken_rud",
                                                                       "tss"])


@pytest.mark.parametrize("name", VALID)
def test_fields_equal_uet_decode(shown, name):
    dissected, decoded = shown[name]
    assert len(dissected) == len(decoded)
    problems = []
    compared = 0
    for i, (d, obj) in enumerate(zip(dissected, decoded, strict=True)):
        if "error" in obj:  # not UET (PFC pause frames): nothing of ours in tshark either
            assert "ethertype 0x8808" in obj["error"], f"{name} frame {i + 1}: {obj['error']}"
            assert not d.fields, f"{name} frame {i + 1}: tshark shows {sorted(d.fields)}"
            continue
        compared += 1
        problems += [f"{name} frame {i + 1}: {p}" for p in compare(d.fields, obj)]
    assert compared >= 4
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("name", VALID)
def test_valid_captures_have_no_warnings_or_errors(shown, name):
    dissected, _decoded = shown[name]
    for i, d in enumerate(dissected):
        for e in d.experts:
            where = f"{name} frame {i + 1}: {e.abbrev} {e.message!r}"
            assert e.severity < SEVERITY["warn"], where
            assert e.abbrev in ALLOWED_NOTES, where
            assert "uet.trimmed" in d.fields, f"{where} on a frame that is not trimmed"


@pytest.mark.parametrize("name", VALID)
def test_trimmed_flag_follows_the_dscp(shown, name):
    dissected, decoded = shown[name]
    trimmed = 0
    for i, (d, obj) in enumerate(zip(dissected, decoded, strict=True)):
        dscp = obj.get("ip.dsfield.dscp", obj.get("ipv6.tclass.dscp"))
        assert ("uet.trimmed" in d.fields) == (dscp in (12, 14)), f"{name} frame {i + 1}"
        trimmed += dscp in (12, 14)
    if name in ("trim_nack", "headers", "sample"):
        assert trimmed >= 1


def test_trimmed_packets_carry_notes(shown):
    """The trimmed requests of trim_nack (payload cut, SES payload length kept) each get the
    Note uet.ses.short_payload, the only expert info of that capture."""
    dissected, decoded = shown["trim_nack"]
    noted = [i for i, d in enumerate(dissected)
             if any(e.abbrev == "uet.ses.short_payload" for e in d.experts)]
    trimmed_non_som = [i for i, obj in enumerate(decoded)
                       if obj.get("ip.dsfield.dscp") == 14 and not obj.get("uet.ses.std.som")]
    assert noted == trimmed_non_som
    assert len(noted) >= 3


def test_broken_capture_raises_the_planted_expert_infos(shown):
    dissected, _ = shown["broken_rud"]
    _data, expectations = _tool().broken_rud_with_expectations()
    assert len(expectations) == 8
    want: dict[int, list[tuple[str, str, str]]] = {}
    for frame, abbrev, sev, regex in expectations:
        want.setdefault(frame, []).append((abbrev, sev, regex))
    problems = []
    for i, d in enumerate(dissected):
        n = i + 1
        got = [e for e in d.experts if e.severity >= SEVERITY["warn"]]
        exp = want.get(n, [])
        if sorted(e.abbrev for e in got) != sorted(a for a, _, _ in exp):
            problems.append(f"frame {n}: {[(e.abbrev, e.message) for e in got]} != {exp}")
            continue
        for abbrev, sev, regex in exp:
            if not any(e.abbrev == abbrev and e.severity == SEVERITY[sev]
                       and re.search(regex, e.message) for e in got):
                problems.append(f"frame {n}: no {abbrev} {sev} /{regex}/ in "
                                f"{[(e.abbrev, e.severity, e.message) for e in got]}")
    assert not problems, "\n".join(problems)


def test_pfc_pause_frames_are_wiresharks_pfc():
    """The fabric's 802.1Qbb frames are what Wireshark's MAC-control dissector calls
    class-based flow control: an XOFF (65535 quanta) then an XON (0) for class 0."""
    out = run_tshark(CAPTURES / "pfc_pause.pcapng", prefs=PREFS,
                     extra=["-Y", "macc", "-T", "fields", "-e", "macc.opcode", "-e",
                            "macc.cbfc.enbv", "-e", "macc.cbfc.pause_time.c0"])
    rows = [line.split("\t") for line in out.splitlines()]
    assert len(rows) >= 2
    assert all(r[0] == "0x0101" and r[1] == "0x0001" for r in rows)
    assert rows[0][2] == "65535" and rows[-1][2] == "0"


def _doc_filters() -> list[tuple[str, str]]:
    doc = (ROOT / "docs" / "wireshark.md").read_text()
    section = doc.split("## Reference captures", 1)[1].split("\n## ", 1)[0]
    out = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        m = re.fullmatch(r"`(\w+)\.pcapng`", cells[0]) if len(cells) >= 3 else None
        if m:
            flt = re.findall(r"`([^`]+)`", cells[-1])
            assert flt, line
            out.append((m.group(1), flt[0].replace("\\|", "|")))
    return out


def test_documented_filters_match_their_capture():
    filters = _doc_filters()
    assert sorted(name for name, _ in filters) == sorted([*VALID, "broken_rud"])
    for name, flt in filters:
        out = run_tshark(CAPTURES / f"{name}.pcapng", prefs=PREFS,
                         extra=["-Y", flt, "-T", "fields", "-e", "frame.number"])
        assert out.split(), f"{name}: filter {flt!r} matches nothing"
