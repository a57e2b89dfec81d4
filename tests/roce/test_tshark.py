"""Stock tshark (no plugin of ours) decodes a RoCEv2 capture of a real emulated run as
InfiniBand on UDP 4791: every frame, no malformed frame, no expert warning, the same
opcode / QP / PSN / AETH fields as our decoder, and the ICRC our codec computed.

tshark 4.0.17 shows the ICRC (``infiniband.invariant.crc``, the four bytes read in
network order) but does not verify it; the test checks that the value it shows is the one
scapy's algorithm gives for the frame (``uet.roce.codec.icrc``)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from uet.capture.pcapng import read_capture
from uet.experiments.config import parse_config
from uet.experiments.runner import run_experiment
from uet.roce import codec
from uet.roce.constants import AethType, Opcode

EXPERIMENT = """
[experiment]
name = "roce-capture"
seed = 3
[topology]
kind = "star"
hosts = 3
ecn_kmin = 10000
ecn_kmax = 60000
[[impairments]]
match = "h2"
direction = "down"
loss = 0.01
[transport]
stack = "roce"
[transport.roce]
qps_per_flow = 2
timeout = 4
[traffic]
pattern = "incast"
size = "300KB"
dst = 2
[capture]
ifaces = ["h0", "h2"]
[output]
plots = false
timeseries = false
progress = false
"""


@pytest.fixture(scope="module")
def capture(tmp_path_factory) -> tuple[Path, list[bytes]]:
    out = tmp_path_factory.mktemp("roce-capture")
    res = run_experiment(parse_config(EXPERIMENT), out)
    assert res["run"]["completed"]
    s = res["summary"]
    assert s["retransmissions"] > 0 and s["nacks"] > 0 and s["cnps"] > 0
    path = out / res["files"]["capture"]
    frames = [f.data for f in read_capture(path)]
    return path, frames


def _tshark(path: Path) -> list[dict]:
    exe = shutil.which("tshark")
    if not exe:
        pytest.fail("tshark is not installed (apt-get install tshark; .ci/run does this)",
                    pytrace=False)
    proc = subprocess.run([exe, "-n", "-r", str(path), "-T", "json", "--no-duplicate-keys"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _num(text: str) -> int:
    """A number as tshark's JSON prints it (hex with 0x, else decimal)."""
    return int(text, 16) if text.startswith("0x") else int(text)


def _flat(node, out):
    if isinstance(node, dict):
        for k, v in node.items():
            if isinstance(v, dict | list):
                _flat(v, out)
            if not isinstance(v, dict):
                out.setdefault(k, []).extend(v if isinstance(v, list) else [v])
    elif isinstance(node, list):
        for item in node:
            _flat(item, out)
    return out


def test_stock_tshark_decodes_every_frame_as_infiniband(capture):
    path, frames = capture
    pkts = _tshark(path)
    assert len(pkts) == len(frames) > 100
    opcodes = set()
    naks = 0
    for pkt, raw in zip(pkts, frames, strict=True):
        layers = pkt["_source"]["layers"]
        protos = layers["frame"]["frame.protocols"].split(":")
        assert protos[:5] == ["eth", "ethertype", "ip", "udp", "infiniband"], protos
        assert "_ws.malformed" not in layers and "_ws.expert" not in json.dumps(layers)
        f = codec.decode_frame(raw)
        fields = _flat(layers["infiniband"], {})
        op = f.bth.opcode
        opcodes.add(op)
        assert _num(fields["infiniband.bth.opcode"][0]) == op
        assert _num(fields["infiniband.bth.destqp"][0]) == f.bth.dqpn
        if op == Opcode.CNP:
            continue  # tshark 4.0 shows a CNP's body as vendor-specific data
        assert _num(fields["infiniband.bth.psn"][0]) == f.bth.psn
        assert _num(fields["infiniband.invariant.crc"][0]) == f.icrc == codec.icrc(raw)
        if f.reth is not None:
            assert _num(fields["infiniband.reth.dmalen"][0]) == f.reth.dma_len
            assert _num(fields["infiniband.reth.r_key"][0]) == f.reth.rkey
        if f.aeth is not None:
            assert _num(fields["infiniband.aeth.syndrome"][0]) == f.aeth.syndrome
            assert _num(fields["infiniband.aeth.msn"][0]) == f.aeth.msn
            naks += f.aeth.syndrome >> 5 == AethType.NAK
    assert {Opcode.WRITE_FIRST, Opcode.WRITE_MIDDLE, Opcode.WRITE_LAST, Opcode.ACKNOWLEDGE,
            Opcode.CNP} <= opcodes
    assert naks > 0


def test_a_broken_icrc_shows_as_a_different_value(capture, tmp_path):
    """tshark does not flag a wrong ICRC; it shows the bytes, which differ from ours."""
    from uet.capture.pcapng import PcapngWriter

    _path, frames = capture
    raw = bytearray(next(f for f in frames if len(f) > 1000))
    raw[-1] ^= 0x5A
    p = tmp_path / "bad.pcapng"
    with PcapngWriter.open(p) as w:
        w.write_packet(w.add_interface("eth0"), 1_000_000_000, bytes(raw))
    (pkt,) = _tshark(p)
    fields = _flat(pkt["_source"]["layers"]["infiniband"], {})
    assert _num(fields["infiniband.invariant.crc"][0]) != codec.icrc(bytes(raw))
    assert not codec.icrc_valid(bytes(raw))


def test_every_opcode_over_ipv4_and_ipv6(tmp_path):
    """One frame per opcode the codec builds, over IPv4 and IPv6: all InfiniBand to
    tshark, none malformed, its PSN and ICRC the ones we encoded."""
    from roce_strategies import OPCODES

    from uet.capture.pcapng import PcapngWriter
    from uet.roce.constants import AETH_OPCODES, IMM_OPCODES, PAYLOAD_OPCODES, RETH_OPCODES
    from uet.roce.records import Aeth, Bth, Reth, RoceFrame

    frames = []
    for v6 in (False, True):
        for op in OPCODES:
            payload = bytes(range(37)) if op in PAYLOAD_OPCODES else b""
            f = RoceFrame(Bth(op, dqpn=0x1234, psn=0xABCDE, ackreq=True), payload=payload,
                          reth=Reth(0x1000, 0x77, 37) if op in RETH_OPCODES else None,
                          imm=0xCAFE if op in IMM_OPCODES else None,
                          aeth=Aeth(0x1F, 9) if op in AETH_OPCODES else None,
                          src_ip="fd00::1" if v6 else "10.0.0.1",
                          dst_ip="fd00::2" if v6 else "10.0.0.2", udp_checksum=v6)
            frames.append((f, codec.encode_frame(f)))
    p = tmp_path / "opcodes.pcapng"
    with PcapngWriter.open(p) as w:
        iface = w.add_interface("eth0")
        for i, (_f, raw) in enumerate(frames):
            w.write_packet(iface, 1_000_000_000 + i * 1000, raw)
    pkts = _tshark(p)
    assert len(pkts) == len(frames)
    for pkt, (f, raw) in zip(pkts, frames, strict=True):
        layers = pkt["_source"]["layers"]
        ip = "ipv6" if ":" in f.src_ip else "ip"
        assert layers["frame"]["frame.protocols"].startswith(f"eth:ethertype:{ip}:udp:"
                                                             "infiniband"), f.bth.opcode
        assert "_ws.malformed" not in layers and "_ws.expert" not in json.dumps(layers)
        fields = _flat(layers["infiniband"], {})
        assert _num(fields["infiniband.bth.opcode"][0]) == f.bth.opcode
        if f.bth.opcode != Opcode.CNP:
            assert _num(fields["infiniband.bth.psn"][0]) == 0xABCDE
            assert _num(fields["infiniband.invariant.crc"][0]) == codec.icrc(raw)


FILTERS = ["infiniband.bth.opcode == 17", "infiniband.aeth.syndrome.opcode == 3",
           "infiniband.bth.opcode == 0x81", "infiniband.reth.dmalen > 100000",
           "infiniband.bth.a == 1", "ip.dsfield.ecn == 3",
           "infiniband.bth.destqp == 0x100 && infiniband.bth.psn > 1000"]


def test_uet_decode_names_roce_fields_as_tshark_and_filters_the_same(capture):
    """``uet decode`` shows RoCE frames with tshark's infiniband.* names and values, and
    its -Y selects exactly the frames tshark's -Y does."""
    import io

    from uet.commands.decode import decode_capture

    path, frames = capture
    out = io.StringIO()
    assert decode_capture(str(path), out, as_json=True) == 0
    ours = [json.loads(line) for line in out.getvalue().splitlines()]
    theirs = _tshark(path)
    assert len(ours) == len(theirs) == len(frames)
    for o, t in zip(ours, theirs, strict=True):
        fields = _flat(t["_source"]["layers"]["infiniband"], {})
        for name in ("infiniband.bth.opcode", "infiniband.bth.destqp", "infiniband.bth.psn",
                     "infiniband.aeth.msn", "infiniband.reth.dmalen"):
            if name in fields:
                assert o[name] == _num(fields[name][0]), name
        assert o["infiniband.invariant.crc.valid"] is True
    text = io.StringIO()
    decode_capture(str(path), text)
    assert "RoCEv2 WRITE_FIRST" in text.getvalue() and " ERROR " not in text.getvalue()
    exe = shutil.which("tshark")
    for flt in FILTERS:
        got = io.StringIO()
        decode_capture(str(path), got, display_filter=flt)
        mine = [int(line.split()[0]) for line in got.getvalue().splitlines()]
        proc = subprocess.run([exe, "-n", "-r", str(path), "-Y", flt, "-T", "fields", "-e",
                               "frame.number"], capture_output=True, text=True, timeout=120)
        assert mine == [int(x) for x in proc.stdout.split()], flt
        assert mine or flt.startswith("infiniband.bth.a")
