"""``uet decode`` (text and --json), the Wireshark-style field mapping, the sample capture."""

from __future__ import annotations

import importlib.util
import io
import json
from pathlib import Path

from hypothesis import given, settings
from wire_strategies import full_frame

from uet.capture.pcapng import PcapngWriter
from uet.cli import main
from uet.wire.codec import encode_frame
from uet.wire.constants import CtlType, NackCode, NextHeader, PdsType, SesOpcode
from uet.wire.fields import LOWER_FIELDS, OUR_FIELDS, WS_FIELDS, all_field_names, frame_fields
from uet.wire.records import (
    CasExt,
    Frame,
    PdsAck,
    PdsAckCc,
    PdsControl,
    PdsNack,
    PdsRequest,
    SesMedium,
    SesSmall,
    SesStandard,
)

ROOT = Path(__file__).resolve().parents[2]

# FT_BOOLEAN fields of Wireshark's dissector (packet-uet.c at 2e69f352, as listed in
# tests/wireshark/wireshark-uet-fields.tsv)
WS_BOOLEANS = {
    "uet.tss.sp", "uet.pds.flags.m", "uet.pds.flags.retx", "uet.pds.flags.ar",
    "uet.pds.flags.p", "uet.pds.flags.nt", "uet.pds.flags.syn", "uet.pds.pdc_mode_use_rsv",
    "uet.pds.ack.cc_state.rc", "uet.ses.std.dc", "uet.ses.std.ie", "uet.ses.std.rel",
    "uet.ses.std.hd", "uet.ses.std.eom", "uet.ses.std.som", "uet.ses.small_req.flags.dc",
    "uet.ses.small_req.flags.ie", "uet.ses.small_req.flags.rel", "uet.ses.small_req.eom",
    "uet.ses.small_req.som", "uet.ses.med_req.flags.dc", "uet.ses.med_req.flags.ie",
    "uet.ses.med_req.flags.rel", "uet.ses.med_req.flags.hd", "uet.ses.med_req.eom",
    "uet.ses.med_req.som",
}
TEXT_FIELDS = {"eth.src", "eth.dst", "ip.src", "ip.dst", "ipv6.src", "ipv6.dst",
               "uet.pds.ack.cc_state", "uet.pds.ack.ccx_state", "uet.pds.ack.cc_state.reserved",
               "uet.ses.comp_swap_ext_hdr.comp_value", "uet.ses.comp_swap_ext_hdr.swap_value",
               "uet.trailer"}


@settings(max_examples=200)
@given(full_frame())
def test_field_names_and_value_types(f: Frame) -> None:
    fields = frame_fields(f)
    assert set(fields) <= all_field_names()
    for name, value in fields.items():
        if name in WS_BOOLEANS or name in ("uet.pds.flags.isrod", "uet.pds.flags.epsn"):
            assert isinstance(value, bool), name
        elif name in TEXT_FIELDS:
            assert isinstance(value, str), name
        else:
            assert isinstance(value, int) and not isinstance(value, bool), name
    assert fields["uet.pds.type"] == int(f.pds.type)
    assert fields["uet.pds.flags"] == f.pds.flags


def test_field_sets_are_disjoint() -> None:
    assert not WS_FIELDS & set(OUR_FIELDS)
    assert not WS_FIELDS & LOWER_FIELDS
    assert all(n.startswith("uet.") for n in OUR_FIELDS)


def test_derived_values_like_wireshark() -> None:
    # clear PSN = PSN + signed offset, modulo 2**32
    req = Frame(pds=PdsRequest(PdsType.RUD_REQ, NextHeader.REQ_STD, 0x0C, -5, 2, 1,
                               use_rsv_pdc=True, psn_offset=0x123), ses=SesStandard(flags=1))
    f = frame_fields(req)
    assert f["uet.pds.clear_psn"] == 2**32 - 3
    assert (f["uet.pds.psn_offset"], f["uet.pds.start_psn"]) == (0x123, 2**32 - 0x121)
    assert f["uet.pds.pdc_mode"] == 0x81 and f["uet.pds.pdc_mode_use_rsv"] is True
    assert "uet.pds.dpdcid" not in f
    # ACK_CC: signed SACK offset (WS shows it unsigned) and our SACK base
    ack = Frame(pds=PdsAckCc(PdsType.ACK_CC, NextHeader.NONE, 0x04, -1, 10, 1, 2, 0, 0, 3, -4,
                             0xF0, service_time=5, restore_cwnd=True, rcv_cwnd_pend=3,
                             rcvd_bytes=7, ooo_count=2))
    f = frame_fields(ack)
    assert (f["uet.pds.ack_psn"], f["uet.pds.flags.req"]) == (9, 2)
    assert (f["uet.pds.ack.sack_offset"], f["uet.pds.sack_base"]) == (-4, 6)
    assert f["uet.pds.ack.cc_state"] == "0005830000070002"
    assert (f["uet.pds.ack.cc_state.rc"], f["uet.pds.ack.cc_state.rcv_cwnd_pend"]) == (True, 3)
    # ACK_CCX: CC state (bytes 24-31) decoded as for ACK_CC, then the 8-byte CCX state
    ccx = frame_fields(Frame(pds=PdsAckCc(PdsType.ACK_CCX, NextHeader.NONE, 0, 0, 1, 2, 3, 1,
                                          credit=0x10203, ooo_count=4,
                                          ccx_state=bytes(range(8)))))
    assert ccx["uet.pds.ack.cc_state"] == "0102030000000004"
    assert ccx["uet.pds.ack.cc_state.credit"] == 0x10203
    assert ccx["uet.pds.ack.ccx_state"] == "0001020304050607"
    # plain ACK: 0x40 is EPSN (ours), not reserved; ACK_CC: reserved
    epsn = frame_fields(Frame(pds=PdsAck(flags=0x41, epsn=5)))
    assert (epsn["uet.pds.flags.epsn"], epsn["uet.pds.ack.epsn"]) == (True, 5)
    assert epsn["uet.pds.flags.rsvd_ack"] == 0x01
    assert frame_fields(Frame(pds=PdsAck()))["uet.pds.flags.epsn"] is False
    assert frame_fields(Frame(pds=PdsAckCc(flags=0x40)))["uet.pds.flags.rsvd_ack"] == 0x40
    # NACK payload under Wireshark's label
    nack = frame_fields(Frame(pds=PdsNack(PdsType.NACK, flags=0x08, nack_code=NackCode.TRIMMED,
                                          payload=99)))
    assert (nack["uet.pds.nack.max_recv_psn_plus_1"], nack["uet.pds.flags.nt"]) == (99, True)
    # CP: ctl_type instead of nh, isROD is ours, reserved mask without 0x20
    cp = frame_fields(Frame(pds=PdsControl(CtlType.PROBE, 0x21, 0xABCD, 3, 4, 5, payload=6)))
    assert "uet.pds.nh" not in cp and cp["uet.pds.ctl_type"] == 6
    assert (cp["uet.pds.flags.isrod"], cp["uet.pds.flags.rsvd_ctl"]) == (True, 1)
    assert cp["uet.pds.ctrl_probe_opaque"] == 0xABCD


def test_ses_field_choices() -> None:
    # medium header: header data (HD) vs buffer offset; opcode under uet.ses.std.opcode
    med = frame_fields(Frame(pds=PdsRequest(next_hdr=2),
                             ses=SesMedium(SesOpcode.TAGGED_SEND, 1, 0x07, 16, buffer_offset=9)))
    assert (med["uet.ses.std.opcode"], med["uet.ses.med_req.header_data"]) == (9, 9)
    assert med["uet.ses.med_req.flags"] == 0x47 and "uet.ses.med_req.buffer_offset" not in med
    # deferrable send: restart token in bytes 12-19; RTR: in bytes 24-31
    d = frame_fields(Frame(pds=PdsRequest(), ses=SesStandard(SesOpcode.DEFERRABLE_SEND,
                                                             buffer_offset=1, memory_key=2)))
    assert (d["uet.ses.std.restart_token"], d["uet.ses.std.mem_key_match_bits"]) == (1, 2)
    r = frame_fields(Frame(pds=PdsRequest(), ses=SesStandard(SesOpcode.DEFERRABLE_RTR,
                                                             buffer_offset=1, memory_key=2)))
    assert (r["uet.ses.std.buffer_offset"], r["uet.ses.std.restart_token"]) == (1, 2)
    # SOM clear: payload length and message offset instead of header data
    n = frame_fields(Frame(pds=PdsRequest(), ses=SesStandard(flags=2, payload_length=5,
                                                             message_offset=6)))
    assert (n["uet.ses.std.payload_length"], n["uet.ses.std.message_offset"]) == (5, 6)
    assert "uet.ses.std.header_data" not in n
    # CAS values as 16 bytes of hex (FT_BYTES, as in WS)
    c = frame_fields(Frame(pds=PdsRequest(next_hdr=1), ses=SesSmall(3, flags=3),
                           ext=CasExt(0x0D, 7, 0, 2**127, 1)))
    assert c["uet.ses.comp_swap_ext_hdr.comp_value"] == "80" + "00" * 15
    assert c["uet.ses.comp_swap_ext_hdr.swap_value"] == "00" * 15 + "01"
    assert c["uet.ses.small_req.flags.rsvd"] == 0


def _write_capture(path: Path) -> None:
    good1 = encode_frame(Frame(pds=PdsRequest(flags=0x0C, psn=100, spdcid=3, psn_offset=0),
                               ses=SesStandard(SesOpcode.SEND, flags=3, request_length=4),
                               payload=b"abcd", ev=1234))
    good2 = encode_frame(Frame(pds=PdsNack(PdsType.NACK, nack_code=NackCode.TRIMMED,
                                           nack_psn=100), src_ip="10.0.0.2",
                               dst_ip="10.0.0.1", ev=1234))
    corrupt = bytearray(good1)
    corrupt[24] ^= 0xFF  # IPv4 header checksum
    with PcapngWriter.open(path) as w:
        i = w.add_interface("tap0")
        for k, data in enumerate([good1, bytes(corrupt), good2]):
            w.write_packet(i, k * 1000, data)


def test_decode_text(tmp_path, capsys) -> None:
    path = tmp_path / "c.pcapng"
    _write_capture(path)
    assert main(["decode", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3
    # frame number, seconds since the first frame, capture interface, then the summary
    assert lines[0].startswith(
        "1 0.000000000 tap0 10.0.0.1 -> 10.0.0.2 ev=1234 RUD_REQ psn=100 AR|SYN")
    assert "std SEND" in lines[0] and lines[0].endswith("len=4")
    assert lines[1].startswith("2 0.000001000 tap0 ERROR ipv4 at byte 24: ")
    assert "checksum" in lines[1]
    assert lines[2].startswith(
        "3 0.000002000 tap0 10.0.0.2 -> 10.0.0.1 ev=1234 NACK TRIMMED psn=100")


def test_decode_json(tmp_path, capsys) -> None:
    path = tmp_path / "c.pcapng"
    _write_capture(path)
    assert main(["decode", "--json", str(path)]) == 0
    objs = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [o["frame"] for o in objs] == [1, 2, 3]
    first = objs[0]
    assert first["uet.pds.type"] == 2 and first["uet.pds.nh"] == 3
    assert first["uet.pds.flags"] == 0x0C and first["uet.pds.flags.syn"] is True
    assert first["uet.pds.psn"] == 100 and first["uet.pds.start_psn"] == 100
    assert first["uet.ses.std.opcode"] == 5 and first["udp.srcport"] == 1234
    assert (first["ip.src"], first["ip.dsfield.dscp"]) == ("10.0.0.1", 0)
    meta = {"frame", "frame.number", "frame.interface_id", "frame.interface_name",
            "frame.time_ns", "frame.time_relative", "frame.time_delta", "frame.len",
            "frame.cap_len"}
    assert set(objs[1]) == meta | {"error", "eth.type"} and "checksum" in objs[1]["error"]
    assert objs[2]["uet.pds.nack.code"] == 1
    assert [(o["frame.number"], o["frame.interface_name"], o["frame.time_ns"],
             o["frame.time_relative"], o["frame.time_delta"]) for o in objs] == [
        (1, "tap0", 0, 0.0, 0.0), (2, "tap0", 1000, 1e-06, 1e-06),
        (3, "tap0", 2000, 2e-06, 1e-06)]


def test_decode_corrupt_file(tmp_path, capsys) -> None:
    path = tmp_path / "bad.pcapng"
    path.write_bytes(b"not a capture at all")
    assert main(["decode", str(path)]) == 1
    assert "not a pcap" in capsys.readouterr().err


def _sample_module():
    spec = importlib.util.spec_from_file_location("make_sample_capture",
                                                  ROOT / "tools" / "make_sample_capture.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_sample_capture_is_up_to_date_and_decodes(capsys) -> None:
    mod = _sample_module()
    sample = ROOT / "captures" / "sample.pcapng"
    assert sample.read_bytes() == mod.sample_bytes(), \
        "captures/sample.pcapng is stale: run python tools/make_sample_capture.py"
    buf = io.BytesIO()
    mod.write_sample(buf)
    assert buf.getvalue() == mod.sample_bytes()  # deterministic
    # the sample's TSS frame is a header sample: cleartext after its TSS header
    assert main(["decode", "--json", "--tss-cleartext", str(sample)]) == 0
    objs = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(objs) == 20 and not any("error" in o for o in objs)
    kinds = {o["uet.pds.type"] for o in objs}
    assert kinds >= {2, 3, 4, 5, 6, 7, 8, 10, 11}
    assert objs[4]["uet.payload_len"] == 0 and objs[4]["ip.dsfield.dscp"] == 12  # trimmed


# ---------------------------------------------------------------- frames cut by a snap length


def _snapped_frames() -> list[bytes]:
    write = Frame(pds=PdsRequest(flags=0x0C, psn=7, spdcid=3),
                  ses=SesStandard(SesOpcode.WRITE, flags=3, request_length=4096, job_id=5),
                  payload=bytes(range(256)) * 16, ev=4321)
    write6 = Frame(pds=PdsRequest(psn=8, spdcid=3, dpdcid=9),
                   ses=SesStandard(SesOpcode.WRITE, flags=2, payload_length=4096,
                                   message_offset=4096, request_length=8192),
                   payload=bytes(4096), src_ip="fd00::1", dst_ip="fd00::2", ev=99,
                   udp_checksum=True)
    ack = Frame(pds=PdsAck(cack_psn=7, spdcid=9, dpdcid=3), src_ip="10.0.0.2",
                dst_ip="10.0.0.1", dscp=46)
    cas = Frame(pds=PdsRequest(psn=9, spdcid=3, dpdcid=9),
                ses=SesStandard(SesOpcode.ATOMIC, flags=3, request_length=8),
                ext=CasExt(0x0D, 7, 0, 5, 6), payload=bytes(8))
    return [encode_frame(f) for f in (write, write6, ack, cas)]


def _write_snapped(path: Path, frames: list[bytes], snaplen: int) -> None:
    with PcapngWriter.open(path) as w:
        i = w.add_interface("tap0", snaplen=snaplen)
        for k, data in enumerate(frames):
            w.write_packet(i, k * 1000, data)


def test_decode_snapped_capture_json(tmp_path, capsys) -> None:
    """A 128-byte snap length: headers decode, the frame says it is truncated and how long
    it was; only the compare-and-swap frame, whose extension header is cut, is an error."""
    frames = _snapped_frames()
    whole, cut = tmp_path / "whole.pcapng", tmp_path / "cut.pcapng"
    _write_snapped(whole, frames, 0)
    _write_snapped(cut, frames, 128)
    assert main(["decode", "--json", str(whole)]) == 0
    full = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert main(["decode", "--json", str(cut)]) == 0
    objs = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert not any("error" in o or "truncated" in o for o in full)
    w, w6, ack, cas = objs
    for got, ref, wire in ((w, full[0], frames[0]), (w6, full[1], frames[1])):
        assert got.pop("truncated") is True
        assert (got.pop("frame.len"), got.pop("frame.cap_len")) == (len(wire), 128)
        assert (ref.pop("frame.len"), ref.pop("frame.cap_len")) == (len(wire), len(wire))
        assert got == ref  # every header field, and the payload length on the wire
    assert w["uet.payload_len"] == 4096 and w["uet.ses.std.opcode"] == SesOpcode.WRITE
    assert w6["ipv6.src"] == "fd00::1" and w6["uet.ses.std.message_offset"] == 4096
    assert ack == full[2]  # shorter than the snap length: untouched
    assert ack["frame.len"] == ack["frame.cap_len"] < 128
    assert cas["truncated"] is True and cas["frame.len"] == len(frames[3])
    assert cas["error"].startswith("ext at byte 98: compare-and-swap extension header")
    assert "the capture kept 128 of 142 bytes" in cas["error"]


def test_decode_snapped_capture_text(tmp_path, capsys) -> None:
    frames = _snapped_frames()
    path = tmp_path / "cut.pcapng"
    _write_snapped(path, frames, 128)
    assert main(["decode", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(
        "1 0.000000000 tap0 10.0.0.1 -> 10.0.0.2 ev=4321 RUD_REQ psn=7 AR|SYN")
    assert lines[0].endswith(f"len=4096 [truncated 128 of {len(frames[0])} bytes]")
    assert lines[1].endswith(f"len=4096 [truncated 128 of {len(frames[1])} bytes]")
    assert "truncated" not in lines[2] and " ACK " in lines[2]
    assert lines[3].startswith("4 0.000003000 tap0 ERROR ext at byte 98") and lines[3].endswith(
        "[truncated 128 of 142 bytes]")
    # a cut header is an error at every layer, naming it
    _write_snapped(path, frames[:1], 40)
    assert main(["decode", str(path)]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith(
        "1 0.000000000 tap0 ERROR udp at byte 34: UDP header needs 8 bytes, 6 captured")
    _write_snapped(path, frames[:1], 50)
    assert main(["decode", str(path)]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith("1 0.000000000 tap0 ERROR pds at byte 42") and "kept 50 of" in line
    _write_snapped(path, frames[:1], 60)
    assert main(["decode", str(path)]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith(
        "1 0.000000000 tap0 ERROR ses at byte 54: SES REQ_STD header needs 44 bytes")


def test_decode_headers_checks_lengths_against_the_wire() -> None:
    """Lengths are checked against the original length: a frame whose IP length exceeds
    even that is still an error; a checksum over captured bytes is still checked."""
    from uet.wire.codec import decode_frame, decode_headers
    from uet.wire.errors import BadChecksum, BadLength

    data = _snapped_frames()[0]
    got = decode_headers(data[:128], len(data))
    assert got.truncated and (got.wire_len, got.cap_len, got.payload_len) == (
        len(data), 128, 4096)
    assert got.frame.payload == data[98:128]  # headers end at 14 + 20 + 8 + 12 + 44
    assert got.frame.pds == decode_frame(data).pds and got.frame.ses == decode_frame(data).ses
    same = decode_headers(data, len(data))
    assert not same.truncated and same.frame == decode_frame(data)
    try:
        decode_headers(data[:128], len(data) - 1)
    except BadLength as exc:
        assert exc.header == "ipv4"
    else:
        raise AssertionError("IP total length beyond the wire length was accepted")
    bad = bytearray(data[:128])
    bad[24] ^= 0xFF
    try:
        decode_headers(bytes(bad), len(data))
    except BadChecksum as exc:
        assert exc.header == "ipv4"
    else:
        raise AssertionError("a bad IPv4 header checksum was accepted")


async def test_decode_fabric_capture_with_snaplen(tmp_path, capsys) -> None:
    """A real fabric run tapped with a 128-byte snap length (what experiments used to
    capture): every frame decodes, the data frames are marked truncated."""
    from uet.endpoint.fep import FabricEndpoint
    from uet.fabric.clock import MS
    from uet.runtime.fabric import Fabric

    path = tmp_path / "run.pcapng"
    async with Fabric({"kind": "star", "hosts": 2}, seed=3,
                      endpoint_factory=FabricEndpoint.factory(sink_bytes=1 << 16)) as fab:
        fab.capture(path, ["h1"], snaplen=128)
        msg = await fab.send(0, 1, 65536, timeout_ps=50 * MS)
        assert msg.done
    assert main(["decode", "--json", str(path)]) == 0
    objs = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert objs and not any("error" in o for o in objs)
    data = [o for o in objs if o.get("uet.ses.std.opcode") == SesOpcode.WRITE]
    assert len(data) == 16
    assert all(o["truncated"] and o["frame.cap_len"] == 128 and o["uet.payload_len"] == 4096
               for o in data)
    assert sum(o["uet.payload_len"] for o in data) == 65536


# ---------------------------------------------------------------- time, interface, filter


def _decode(argv: list[str]) -> tuple[int, list[str], str]:
    out, err = io.StringIO(), io.StringIO()
    from contextlib import redirect_stderr, redirect_stdout

    with redirect_stdout(out), redirect_stderr(err):
        rc = main(["decode", *argv])
    return rc, out.getvalue().splitlines(), err.getvalue()


def test_two_taps_copies_are_told_apart_by_time_and_interface() -> None:
    """Issue 19 item 17: uud.pcapng holds the datagram the sender's tap (h0) saw at 0 ns
    and the receiver's tap (h1) saw 1007 ns later; the lines said nothing to tell them
    apart. Now each line carries the time and the interface, and -Y / -i select."""
    uud = str(ROOT / "captures" / "uud.pcapng")
    rc, lines, _ = _decode([uud])
    assert rc == 0 and len(lines) == 4
    first, copy = lines[0], lines[3]
    assert first.startswith("1 0.000000000 h0 10.0.0.2 -> 10.0.0.3 ev=44256 UUD_REQ")
    assert copy.startswith("4 0.000001007 h1 10.0.0.2 -> 10.0.0.3 ev=44256 UUD_REQ")
    assert first.split(" ", 3)[3] == copy.split(" ", 3)[3]  # the same packet otherwise
    rc, lines, _ = _decode([uud, "-Y", 'frame.interface_name == "h1"'])
    assert [ln.split()[0] for ln in lines] == ["4"]
    rc, lines, _ = _decode([uud, "-i", "h0"])
    assert [ln.split()[0] for ln in lines] == ["1", "2", "3"]
    # delta: since the previous frame printed (7 ns apart at h0)
    rc, lines, _ = _decode([uud, "-i", "h0", "-t", "delta"])
    assert [ln.split()[1] for ln in lines] == ["0.000000000", "0.000000007", "0.000000007"]
    rc, lines, _ = _decode([uud, "-t", "absolute", "-Y", "frame.time_ns > 1000"])
    assert [ln.split()[:3] for ln in lines] == [["4", "0.000001007", "h1"]]
    rc, lines, _ = _decode(["--json", uud, "-Y", "udp.srcport == 44256"])
    objs = [json.loads(ln) for ln in lines]
    assert [(o["frame"], o["frame.interface_name"], o["frame.time_ns"]) for o in objs] == [
        (1, "h0", 0), (4, "h1", 1007)]


def test_bad_filters_are_one_line_errors() -> None:
    uud = str(ROOT / "captures" / "uud.pcapng")
    for flt, text in (("uet.pds.pns == 1", "unknown field 'uet.pds.pns'"),
                      ("uet.pds.psn ==", "expected a value at character 15"),
                      ("(uet", "expected ')'"),
                      ("udp.srcport == abc", "udp.srcport is a number: 'abc' is not")):
        rc, lines, err = _decode([uud, "-Y", flt])
        assert rc == 2 and not lines, flt
        assert err.startswith("uet decode: -Y: ") and text in err and err.count("\n") == 1


def test_pfc_frames_decode_with_wireshark_names() -> None:
    rc, lines, _ = _decode([str(ROOT / "captures" / "pfc_pause.pcapng"), "-Y", "macc"])
    assert rc == 0
    assert [ln.split(" ", 3)[3] for ln in lines] == [
        "02:ff:00:00:00:00 -> 01:80:c2:00:00:01 PFC class 0 pause 65535",
        "02:ff:00:00:00:00 -> 01:80:c2:00:00:01 PFC class 0 XON"]
    rc, lines, _ = _decode(["--json", str(ROOT / "captures" / "pfc_pause.pcapng"), "-Y",
                            "macc.opcode == 0x0101"])
    xoff = json.loads(lines[0])
    assert (xoff["macc.cbfc.enbv"], xoff["macc.cbfc.pause_time.c0"]) == (1, 65535)
    assert "error" not in xoff


def test_a_capture_cut_short_is_decoded_up_to_the_cut(tmp_path) -> None:
    """Issue 19 item 11: the frames before the cut are printed, then one line says the
    file is cut short (exit 1)."""
    src = (ROOT / "captures" / "rud_loss.pcapng").read_bytes()
    cut = tmp_path / "cut.pcapng"
    cut.write_bytes(src[:25900])
    rc, lines, err = _decode([str(cut)])
    assert rc == 1 and len(lines) == 10
    assert err.count("\n") == 1 and "cut short" in err
    assert "the packet block at byte 25880 needs 4228 bytes but only 20 remain" in err
    assert "the 10 packet(s) before it are complete" in err
