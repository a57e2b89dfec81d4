"""The Lua dissector under real tshark: field registrations, values on valid frames of every
header kind, PDC grouping, expert infos on broken frames, CRC and native-IP preferences.

These tests need tshark (CI installs it) and fail, never skip, without it. Each capture is
dissected by one tshark run shared by the tests (session fixtures), to keep the module fast.
"""

from __future__ import annotations

import csv
import re
import subprocess
from pathlib import Path

import pytest
import tshark_json
from tshark_json import dissect, tshark_binary
from wireshark_frames import (
    SEVERITY,
    Broken,
    crc_cases,
    write_capture,
)

from uet.wire.records import PdsAck, PdsAckCc, PdsControl, PdsRequest
from uet.wireshark import plugin_path

pytestmark = pytest.mark.tshark

HERE = Path(__file__).parent

#: Fields registered differently from Wireshark's dissector on purpose (docs/wireshark.md,
#: "Differences"): name -> (type, base, mask) we register.
REGISTRATION_DIFFERENCES = {
    # CP flag 0x20 is isROD (ref. 9.1): the reserved value is computed as flags & 0x43
    "uet.pds.flags.rsvd_ctl": ("FT_UINT8", "BASE_HEX", "0x0"),
    # ACK flag 0x40 is the optional EPSN flag on plain ACKs: flags & 0x01 (ACK) or 0x41
    "uet.pds.flags.rsvd_ack": ("FT_UINT8", "BASE_HEX", "0x0"),
    # rendezvous second word is ri_generation 8 / pid_on_fep 12 / resource_index 12
    "uet.ses.rendv_ext_hdr.read_pid_on_fep": ("FT_UINT32", "BASE_DEC", "0xfff000"),
}
#: Labels changed on purpose (the field is the read memory key in our layout).
LABEL_DIFFERENCES = {"uet.ses.rendv_ext_hdr.read_match_bits": "Read Memory Key"}


def num(text: str) -> int:
    return int(text, 0)


# --------------------------------------------------------------------------- registrations


def test_field_registrations_match_wireshark():
    """All 169 names of Wireshark's own UET dissector, with its types, bases and masks,
    except the documented differences."""
    proc = subprocess.run([tshark_binary(), "-G", "fields", "-X", f"lua_script:{plugin_path()}"],
                          capture_output=True, text=True, timeout=60)
    ours = {}
    for line in proc.stdout.splitlines():
        parts = line.split("\t")
        if parts[0] == "F" and len(parts) >= 7 and parts[4] == "uet":
            ours[parts[2]] = (parts[1], parts[3], parts[5], parts[6])
    with open(HERE / "wireshark-uet-fields.tsv", newline="") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    assert len(rows) == 169
    problems = []
    for row in rows:
        name = row["abbrev"]
        if name not in ours:
            problems.append(f"{name}: not registered")
            continue
        label, ftype, fbase, mask = ours[name]
        want = REGISTRATION_DIFFERENCES.get(name, (row["type"], row["base"], row["bitmask"]))
        if (ftype, fbase, mask) != want:
            problems.append(f"{name}: {(ftype, fbase, mask)} != {want}")
        if label != LABEL_DIFFERENCES.get(name, row["name"]):
            problems.append(f"{name}: label {label!r} != {row['name']!r}")
    assert not problems, "\n".join(problems)


# --------------------------------------------------------------------------- valid frames


def test_valid_frames_have_no_expert_info(valid):
    cases, shown = valid
    assert len(shown) == len(cases)
    for case, d in zip(cases, shown, strict=True):
        assert "uet.pds.type" in d.fields, f"{case.name}: no PDS shown"
        assert not d.experts, f"{case.name}: {[(e.abbrev, e.message) for e in d.experts]}"
        assert d.info and "Unknown" not in d.info, f"{case.name}: info {d.info!r}"


def test_valid_frames_derived_values(valid):
    """Clear PSN, ACK PSN, start PSN, SACK base and SACKed PSNs as the records compute them."""
    cases, shown = valid
    for case, d in zip(cases, shown, strict=True):
        pds = case.frame.pds
        assert num(d.one("uet.pds.type")) == pds.type, case.name
        if isinstance(pds, PdsRequest):
            assert num(d.one("uet.pds.psn")) == pds.psn
            assert num(d.one("uet.pds.clear_psn")) == pds.clear_psn, case.name
            if pds.syn:
                assert num(d.one("uet.pds.start_psn")) == pds.start_psn, case.name
                assert num(d.one("uet.pds.psn_offset")) == pds.psn_offset
                assert "uet.pds.dpdcid" not in d.fields
            else:
                assert num(d.one("uet.pds.dpdcid")) == pds.dpdcid
                assert "uet.pds.start_psn" not in d.fields
        if isinstance(pds, PdsAck | PdsAckCc):
            assert num(d.one("uet.pds.cack_psn")) == pds.cack_psn
            if pds.probe:  # bytes 2-3 are the probe's opaque value
                assert num(d.one("uet.pds.ack.probe_opaque")) == pds.ack_psn_offset & 0xFFFF
            else:
                assert num(d.one("uet.pds.ack_psn")) == pds.ack_psn, case.name
        if isinstance(pds, PdsAckCc):
            assert num(d.one("uet.pds.sack_base")) == pds.sack_base, case.name
            got = [num(v) for v in d.fields.get("uet.pds.sack_psn", [])]
            assert got == pds.sacked_psns(), case.name
        if isinstance(pds, PdsControl) and pds.syn:
            assert num(d.one("uet.pds.start_psn")) == pds.start_psn, case.name
        assert ("uet.trimmed" in d.fields) == (case.frame.dscp in (12, 14)), case.name
        if case.frame.encap == "ip":
            assert num(d.one("uet.pds.entropy")) == case.frame.ev
            assert "uet.udp_checksum.status" not in d.fields
        elif case.frame.udp_checksum or case.frame.ipv6:
            assert d.one("uet.udp_checksum.status") == "1", case.name  # good
        else:
            assert d.one("uet.udp_checksum.status") == "3", case.name  # not present


def _by_name(valid):
    cases, shown = valid
    return {c.name: (c, d) for c, d in zip(cases, shown, strict=True)}


def test_layouts_where_wireshark_differs(valid):
    """Our layouts (reference 9.1) where Wireshark's own dissector reads other bytes."""
    f = _by_name(valid)
    # NSCC state: restore_cwnd / rcv_cwnd_pend in byte 2 of the state (WS: byte 0)
    c, d = f["ack_cc_nscc"]
    assert d.one("uet.pds.ack.cc_state.service_time") == "500"
    assert d.one("uet.pds.ack.cc_state.rc") == "1"
    assert d.one("uet.pds.ack.cc_state.rcv_cwnd_pend") == "5"
    assert d.one("uet.pds.ack.cc_state.rcvd_bytes") == "1234"
    assert d.one("uet.pds.ack.cc_state.ooo_count") == "7"
    assert d.one("uet.pds.flags.m") == "1"
    # SACK offset is signed: base = CACK - 4
    assert num(d.one("uet.pds.ack.sack_offset")) == 0xFFFC
    assert num(d.one("uet.pds.sack_base")) == 995
    # credit state and a SACK bitmap with bit 63 (base + 63) and bit 0
    c, d = f["ack_cc_credit_rsp_small"]
    assert num(d.one("uet.pds.ack.cc_state.credit")) == 0xABCDEF
    assert [num(v) for v in d.fields["uet.pds.sack_psn"]] == [0, 63]
    assert num(d.one("uet.ses.rsp.original_request_psn")) == 4242
    # medium header: no one-byte slip
    c, d = f["rud_medium_hd"]
    assert num(d.one("uet.ses.med_req.job_id")) == 77
    assert num(d.one("uet.ses.med_req.header_data")) == 0x98
    assert num(d.one("uet.ses.med_req.initiator")) == 0x1234
    assert num(d.one("uet.ses.med_req.mem_key_match_bits")) == 0xABCDEF
    # atomic extension after the small and medium headers, and for TSEND_ATOMIC (0x0D)
    c, d = f["rud_small_fetch_atomic"]
    assert d.one("uet.ses.atomic_op_ext_hdr.atomic_opcode") == "2"
    c, d = f["rud_medium_cas"]
    assert d.one("uet.ses.comp_swap_ext_hdr.atomic_opcode") == "18"
    assert d.one("uet.ses.comp_swap_ext_hdr.comp_value").replace(":", "") == "80" + "00" * 15
    c, d = f["rod_cc_tsend_atomic_cas"]
    assert d.one("uet.ses.comp_swap_ext_hdr.swap_value").replace(":", "") == \
        f"{0x1234567890ABCDEF1122:032x}"
    # rendezvous second word 8/12/12
    c, d = f["rud_rendezvous_tsend"]
    assert d.one("uet.ses.rendv_ext_hdr.read_ri_generation") == "255"
    assert num(d.one("uet.ses.rendv_ext_hdr.read_pid_on_fep")) == 0xFFF
    assert num(d.one("uet.ses.rendv_ext_hdr.read_resource_index")) == 1
    # CP: isROD flag, SYN form, probe opaque
    c, d = f["cp_6"]
    assert d.one("uet.pds.flags.isrod") == "1"
    assert d.one("uet.pds.flags.rsvd_ctl") == "0x00"
    assert num(d.one("uet.pds.ctrl_probe_opaque")) == 0xBEEF
    c, d = f["cp_0"]
    assert num(d.one("uet.pds.start_psn")) == 1000 - 1
    # ACK: EPSN, probe
    c, d = f["ack_epsn"]
    assert d.one("uet.pds.flags.epsn") == "1"
    assert num(d.one("uet.pds.ack.epsn")) == 0x10000
    assert num(d.one("uet.pds.flags.req")) == 2
    c, d = f["ack_probe"]
    assert num(d.one("uet.pds.ack.probe_opaque")) == 0xBEEF
    assert "uet.pds.ctrl_probe_opaque" not in d.fields
    # ACK_CCX: 8-byte CCX state after the 8-byte CC state
    c, d = f["ack_ccx_rsp_data"]
    assert d.one("uet.pds.ack.ccx_state") == "01:02:03:04:05:06:07:08"
    assert d.one("uet.pds.ack.cc_state.ooo_count") == "1"
    # NACK_CCX state
    c, d = f["nack_ccx_rsp"]
    assert d.one("uet.pds.nack.nccx_type") == "3"
    assert num(d.one("uet.pds.nack.nccx_state1")) == 0xF01010101010101
    assert num(d.one("uet.pds.nack.nccx_state2")) == 0x8000000000000001
    assert num(d.one("uet.ses.rsp.opcode")) == 0
    # TSS epoch / 48-bit TSC
    c, d = f["ip6_tss_ssi"]
    assert num(d.one("uet.tss.ssi")) == 0x11223344
    assert num(d.one("uet.tss.tsc")) == 0xFFFF << 48 | (1 << 48) - 1
    assert num(d.one("uet.tss.epoch")) == 0xFFFF
    assert num(d.one("uet.payload_len")) == 0
    assert d.one("uet.tss.icv").replace(":", "") == bytes(range(0xA0, 0xB0)).hex()


def test_every_enumeration_is_named(valid):
    """The Info column names types, control types, NACK codes and SES opcodes."""
    f = _by_name(valid)
    expect = {
        "rud_syn_std_som_hd": ["RUD_REQ", "SEND", "SYN"],
        "rod_cc_tsend_atomic_cas": ["ROD_CC_REQ", "TSEND_ATOMIC", "CSWAP"],
        "nack_trimmed": ["NACK TRIMMED"],
        "nack_ccx_rsp": ["NACK_CCX NEW_START_PSN", "DEFAULT_RESPONSE"],
        "cp_9": ["CP NEGOTIATION"],
        "cp_5": ["CP CLOSE_REQ"],
        "ack_rsp": ["ACK", "RESPONSE rc=OK"],
        "uud_datagram": ["UUD_REQ", "DATAGRAM_SEND"],
        "ip4_tss": ["TSS", "RUD_REQ"],
        "rud_trimmed": ["[TRIMMED] RUD_REQ"],
    }
    for name, words in expect.items():
        info = f[name][1].info
        for w in words:
            assert w in info, f"{name}: {w!r} not in {info!r}"


def test_pdc_grouping(valid):
    """uet.pdc is one index per {initiator IP, target IP, initiator PDC ID}, the same in
    both directions, SYN packets included."""
    cases, shown = valid
    pdcs: dict[tuple, set[str]] = {}
    for case, d in zip(cases, shown, strict=True):
        fr, pds = case.frame, case.frame.pds
        if "uet.pdc" not in d.fields:
            assert pds.type in (4, 5, 6) or (pds.type == 10 and pds.flags & 0x08), case.name
            continue
        dir_ = d.one("uet.pdc.dir")
        ini = d.one("uet.pdc.initiator_pdcid")
        if dir_ == "0":
            key = (fr.src_ip, fr.dst_ip, pds.spdcid)
        else:
            key = (fr.dst_ip, fr.src_ip, pds.dpdcid)
        assert int(ini) == key[2], case.name
        pdcs.setdefault(key, set()).add(d.one("uet.pdc"))
    for key, indexes in pdcs.items():
        assert len(indexes) == 1, f"PDC {key} has indexes {indexes}"
    all_indexes = [next(iter(v)) for v in pdcs.values()]
    assert len(set(all_indexes)) == len(all_indexes)
    main = ("10.0.0.1", "10.0.0.2", 5)
    assert len([c for c, d in zip(cases, shown, strict=True)
                if d.fields.get("uet.pdc") == list(pdcs[main])]) > 30


# --------------------------------------------------------------------------- broken frames


def _check_experts(case: Broken, d: tshark_json.Dissected) -> list[str]:
    problems = []
    for abbrev, sev, pattern in case.expect:
        hits = [e for e in d.experts if e.abbrev == abbrev]
        if not hits:
            problems.append(f"{case.name}: no {abbrev} in "
                            f"{[(e.abbrev, e.message) for e in d.experts]}")
            continue
        if not any(e.severity == SEVERITY[sev] and re.search(pattern, e.message)
                   for e in hits):
            problems.append(f"{case.name}: {abbrev} {[(e.severity, e.message) for e in hits]} "
                            f"does not match {sev} /{pattern}/")
    want = {a for a, s, _ in case.expect if SEVERITY[s] >= SEVERITY["warn"]}
    got = {e.abbrev for e in d.experts if e.severity >= SEVERITY["warn"]}
    if got != want:
        problems.append(f"{case.name}: warnings/errors {sorted(got)} != expected {sorted(want)}")
    return problems


def test_broken_frames_raise_expected_expert_info(broken):
    cases, shown = broken
    assert len(shown) == len(cases)
    problems = []
    for case, d in zip(cases, shown, strict=True):
        problems += _check_experts(case, d)
    assert not problems, "\n".join(problems)


def test_crc_trailer_and_native_protocol_preferences(tmp_path):
    """With uet.crc_trailer on, good CRCs verify and bad ones raise uet.crc32c.bad; native
    frames use the configured IP protocol (200 here)."""
    cases = crc_cases()
    path = tmp_path / "crc.pcapng"
    write_capture(path, [c.data for c in cases])
    shown = dissect(path, prefs={"uet.crc_trailer": "TRUE", "uet.ip_proto": "200"})
    problems = []
    for case, d in zip(cases, shown, strict=True):
        assert "uet.pds.type" in d.fields, f"{case.name}: not dissected as UET"
        assert d.one("uet.crc32c.status") == ("0" if case.name.endswith("bad") else "1")
        assert num(d.one("uet.ses.std.request_length")) == 4096
        problems += _check_experts(case, d)
    assert not problems, "\n".join(problems)


def test_documented_display_filters_compile(valid, tmp_path):
    """Every filter of the table in docs/wireshark.md is valid on this tshark (one run: the
    filters are OR-ed together)."""
    doc = (HERE.parents[1] / "docs" / "wireshark.md").read_text()
    section = doc.split("## Useful display filters", 1)[1].split("\n## ", 1)[0]
    filters = []
    for line in section.splitlines():
        cells = line.split(" | ")
        if line.startswith("| ") and len(cells) >= 2 and "`" in cells[1]:
            filters += [f.replace("\\|", "|") for f in re.findall(r"`([^`]+)`", cells[1])]
    assert len(filters) > 25
    cases, _ = valid
    path = tmp_path / "one.pcapng"
    write_capture(path, [cases[0].data()])
    combined = " || ".join(f"({f})" for f in filters)
    out = tshark_json.run_tshark(path, extra=["-Y", combined, "-T", "fields", "-e", "uet.pdc"])
    assert out.strip() == "1"


def test_mutated_frames_never_raise_lua_errors(valid, broken, tmp_path):
    """Random byte changes and cuts in the UET part of valid and broken frames: the
    dissector reports them with expert infos, never with a Lua error (one tshark run)."""
    import random

    rng = random.Random(20250601)
    base = [c.data() for c in valid[0]] + [b.data for b in broken[0]]
    frames = []
    for _ in range(1500):
        data = bytearray(rng.choice(base))
        v4 = data[12:14] == b"\x08\x00"
        proto = data[23] if v4 else data[20]
        start = (34 if v4 else 54) + (8 if proto == 17 else 4)
        for _ in range(rng.randint(1, 6)):
            if len(data) > start:
                data[rng.randrange(start, len(data))] = rng.randrange(256)
        if rng.random() < 0.3:
            data = data[:rng.randrange(start, len(data) + 1)]
        frames.append(bytes(data))
    path = tmp_path / "mutated.pcapng"
    write_capture(path, frames)
    # (a mutation that makes the first byte a TSS type must still be dissected: as
    # cleartext here, the path these frames exercise)
    out = tshark_json.run_tshark(path, prefs={"uet.crc_trailer": "TRUE",
                                              "uet.tss_cleartext": "TRUE"},
                                 extra=["-T", "fields", "-e", "frame.number", "-e", "uet.pds",
                                        "-e", "_ws.expert.message", "-E", "occurrence=a"])
    lines = out.splitlines()
    assert len(lines) == len(frames)
    assert not [line for line in lines if "Lua Error" in line]
    assert sum(1 for line in lines if line.split("\t")[1]) > len(frames) * 0.9


def test_low_port_evs_need_heuristics_first(valid_capture, tmp_path):
    """A UET packet whose EV (UDP source port) is a registered port below 4793 goes to that
    port's dissector (Wireshark tries the lower port first) unless UDP tries heuristic
    sub-dissectors first, where uet's heuristic claims every packet to the UET port."""
    from dataclasses import replace

    from uet.wire.codec import encode_frame

    cases, _ = valid_capture
    frames = [encode_frame(replace(cases[0].frame, ev=ev)) for ev in (53, 123, 4792, 60000)]
    path = tmp_path / "evs.pcapng"
    write_capture(path, frames)
    default = tshark_json.run_tshark(path, extra=["-T", "fields", "-e", "frame.protocols"])
    assert [":uet" in line for line in default.splitlines()] == [False, False, True, True]
    heur = tshark_json.run_tshark(path, prefs={"udp.try_heuristic_first": "TRUE"},
                                  extra=["-T", "fields", "-e", "frame.protocols"])
    assert all(line.endswith(":uet:data") for line in heur.splitlines())
