"""The reference captures of ``captures/``: regenerating them gives the committed bytes, and
each still shows its topic (docs/wireshark.md, "Reference captures").

When a change to the PDS, CMS, SES or fabric alters the packets, the first test fails: run
``python tools/make_captures.py``, check the topic tests still pass, commit the captures.
"""

from __future__ import annotations

import importlib.util
import io
from collections import Counter
from pathlib import Path

import pytest

from uet.capture.pcapng import read_capture
from uet.wire.codec import decode_frame
from uet.wire.constants import CtlType, NackCode, PdsType, RspOpcode
from uet.wire.errors import DecodeError
from uet.wire.records import (
    AtomicExt,
    CasExt,
    PdsAck,
    PdsAckCc,
    PdsRequest,
    RendezvousExt,
    SesMedium,
    SesResponse,
    SesResponseData,
    SesResponseDataSmall,
    SesSmall,
    SesStandard,
)

ROOT = Path(__file__).resolve().parents[2]
CAPTURES = ROOT / "captures"


def _load_tool():
    spec = importlib.util.spec_from_file_location("make_captures",
                                                  ROOT / "tools" / "make_captures.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


TOOL = _load_tool()


@pytest.fixture(scope="module")
def regenerated() -> dict[str, bytes]:
    return {name: fn() for name, fn in TOOL.ALL.items()}


def _file(name: str):
    """A capture's file (``tss.keys``, the key file of tss.pcapng, keeps its name)."""
    return CAPTURES / (name if "." in name else f"{name}.pcapng")


def test_regenerating_gives_the_committed_bytes(regenerated):
    stale = [name for name, data in regenerated.items() if _file(name).read_bytes() != data]
    assert not stale, (f"captures {stale} differ from what the code produces now: run "
                       "python tools/make_captures.py and commit captures/")
    again = TOOL.ALL["rud_loss"]()
    assert again == regenerated["rud_loss"]  # deterministic within one process too


def test_check_mode(tmp_path, capsys):
    assert TOOL.main(["--check", "uud", "rudi"]) == 0
    (tmp_path / "uud.pcapng").write_bytes(b"stale")
    assert TOOL.main(["--check", "--out", str(tmp_path), "uud"]) == 1
    assert "run python tools/make_captures.py" in capsys.readouterr().err
    assert TOOL.main(["--out", str(tmp_path), "uud"]) == 0
    assert (tmp_path / "uud.pcapng").read_bytes() == (CAPTURES / "uud.pcapng").read_bytes()
    with pytest.raises(SystemExit):
        TOOL.main(["nonsense"])


def _frames(name: str) -> list:
    return list(read_capture(CAPTURES / f"{name}.pcapng"))


def _decoded(name: str) -> list:
    return [decode_frame(cf.data) for cf in _frames(name)]


def test_captures_are_small():
    for name in TOOL.ALL:
        if "." in name:
            continue
        path = CAPTURES / f"{name}.pcapng"
        n = sum(1 for _ in read_capture(path))
        assert 4 <= n <= 300, (name, n)
        assert path.stat().st_size < 100_000, name


def test_headers_has_every_header_type():
    fr = _decoded("headers")
    assert {int(f.pds.type) for f in fr} == set(range(2, 15))
    assert {f.pds.ctl_type for f in fr if f.pds.type == PdsType.CP} == set(range(10))
    ses = {type(f.ses) for f in fr}
    assert ses >= {SesStandard, SesMedium, SesSmall, SesResponse, SesResponseData,
                   SesResponseDataSmall}
    assert {bool(f.ses.flags & 1) for f in fr if type(f.ses) is SesStandard} == {True, False}
    assert {type(f.ext) for f in fr} >= {AtomicExt, CasExt, RendezvousExt}
    assert any(type(f.ses) is SesResponseData and isinstance(f.pds, PdsRequest) for f in fr)
    assert {f.tss.sp for f in fr if f.tss} == {True, False}
    assert {(f.encap, f.ipv6) for f in fr} == {("udp", False), ("udp", True), ("ip", False),
                                               ("ip", True)}
    assert any(f.dscp == 14 for f in fr)
    assert any(f.pds.type == PdsType.NACK and f.pds.flags & 0x08 for f in fr)  # RUDI NACK
    assert any(f.pds.type == PdsType.ACK and f.pds.flags & 0x40 for f in fr)  # EPSN
    assert any(f.pds.type == PdsType.ACK and f.pds.flags & 0x08 for f in fr)  # probe answer
    assert {f.pds.cc_type for f in fr if isinstance(f.pds, PdsAckCc)} == {0, 1}


def test_pdc_open_close():
    fr = _decoded("pdc_open_close")
    starts = {f.pds.start_psn for f in fr if isinstance(f.pds, PdsRequest) and f.pds.syn}
    assert len(starts) == 2
    closes = [f.pds.psn for f in fr if f.pds.type == PdsType.CP
              and f.pds.ctl_type == CtlType.CLOSE]
    assert len(closes) == 2
    acked = {f.pds.ack_psn for f in fr if isinstance(f.pds, PdsAckCc | PdsAck)}
    assert set(closes) <= acked
    # the close ACKs are plain 12-byte ACKs: a closed PDC has no congestion state to send
    close_acks = [f.pds for f in fr if isinstance(f.pds, PdsAck) and f.pds.ack_psn in closes]
    assert len(close_acks) == 2
    assert sum(1 for f in fr if f.pds.type == PdsType.CP
               and f.pds.ctl_type == CtlType.CLEAR) == 2
    assert len({f.pds.spdcid for f in fr if isinstance(f.pds, PdsRequest)}) == 2


def test_rud_loss():
    fr = _decoded("rud_loss")
    reqs = [f.pds for f in fr if isinstance(f.pds, PdsRequest)]
    assert all(p.type == PdsType.RUD_REQ for p in reqs)
    assert any(p.flags & 0x10 for p in reqs)  # retransmissions
    psns = [p.psn for p in reqs]
    assert psns != sorted(psns)  # the gaps filled later
    holes = [f.pds.sack_bitmap for f in fr if isinstance(f.pds, PdsAckCc)
             and f.pds.sack_bitmap & (f.pds.sack_bitmap + 1)]  # not of the form 2**k - 1
    assert holes
    assert any(f.pds.type == PdsType.CP and f.pds.ctl_type == CtlType.ACK_REQ for f in fr)
    assert any(f.pds.type == PdsType.CP and f.pds.ctl_type == CtlType.CLOSE for f in fr)


def test_rod_reorder():
    fr = _decoded("rod_reorder")
    reqs = [f.pds for f in fr if isinstance(f.pds, PdsRequest)]
    assert reqs and all(p.type == PdsType.ROD_REQ for p in reqs)
    ooo = [f.pds.nack_psn for f in fr if f.pds.type == PdsType.NACK
           and f.pds.nack_code == NackCode.ROD_OOO]
    assert ooo
    assert all(any(p.psn == psn and p.flags & 0x10 for p in reqs) for psn in ooo)
    psns = [p.psn for p in reqs]
    assert psns != sorted(psns)
    assert any(f.pds.sack_bitmap and f.pds.ack_psn != f.pds.cack_psn for f in fr
               if isinstance(f.pds, PdsAckCc))


def test_rudi():
    fr = _decoded("rudi")
    assert {f.pds.type for f in fr} == {PdsType.RUDI_REQ, PdsType.RUDI_RESP}
    reqs = Counter(f.pds.pkt_id for f in fr if f.pds.type == PdsType.RUDI_REQ)
    rsps = Counter(f.pds.pkt_id for f in fr if f.pds.type == PdsType.RUDI_RESP)
    assert len(reqs) == 4 and set(rsps) == set(reqs)
    assert any(n > 1 for n in reqs.values())  # retransmitted after a loss
    assert all(f.ses.return_code == 1 for f in fr if f.pds.type == PdsType.RUDI_RESP)


def test_uud():
    frames = _frames("uud")
    fr = [decode_frame(cf.data) for cf in frames]
    assert {f.pds.type for f in fr} == {PdsType.UUD_REQ}
    sent = [cf for cf in frames if cf.if_name == "h0"]
    got = [cf for cf in frames if cf.if_name == "h1"]
    assert len(sent) == 3 and 1 <= len(got) < 3


def test_trim_nack():
    fr = _decoded("trim_nack")
    trimmed = [f for f in fr if isinstance(f.pds, PdsRequest) and f.dscp == 14]
    assert len(trimmed) >= 3 and all(not f.payload for f in trimmed)
    nacks = {(f.dst_ip, f.pds.nack_psn) for f in fr if f.pds.type == PdsType.NACK
             and f.pds.nack_code == NackCode.TRIMMED_LASTHOP}
    assert nacks == {(f.src_ip, f.pds.psn) for f in trimmed}
    for f in trimmed:
        assert any(isinstance(g.pds, PdsRequest) and g.src_ip == f.src_ip
                   and g.pds.psn == f.pds.psn and g.pds.flags & 0x10 and g.payload
                   for g in fr)
    assert len({f.src_ip for f in trimmed}) == 2


def test_pfc_pause():
    frames = _frames("pfc_pause")
    pauses = []
    for cf in frames:
        try:
            f = decode_frame(cf.data)
        except DecodeError:
            assert cf.data[12:16] == b"\x88\x08\x01\x01"
            pauses.append(int.from_bytes(cf.data[18:20], "big"))
            continue
        assert not f.pds.flags & 0x10 and f.pds.type != PdsType.NACK  # nothing lost
    assert pauses == [65535, 0]


def test_broken_rud_is_rud_loss_damaged():
    data, expectations = TOOL.broken_rud_with_expectations()
    good = _frames("rud_loss")
    bad = list(read_capture(io.BytesIO(data)))
    assert len(good) == len(bad)
    damaged = {i + 1 for i, (g, b) in enumerate(zip(good, bad, strict=True))
               if g.data != b.data}
    assert damaged == {frame for frame, *_ in expectations}
    assert len(damaged) == 8


def test_trimmed_ack():
    fr = _decoded("trimmed_ack")
    data_acks = [f for f in fr if isinstance(f.pds, PdsAckCc) and f.ses is not None
                 and f.ses.opcode == RspOpcode.RESPONSE_W_DATA]
    assert data_acks and {f.dscp for f in data_acks} <= {10, 14}  # the data class, or trimmed
    trimmed = [f for f in data_acks if f.dscp == 14]
    assert trimmed and all(not f.payload for f in trimmed)
    nacks = [f.pds for f in fr if f.pds.type == PdsType.NACK
             and f.pds.nack_code == NackCode.TRIMMED_ACK]
    rud = [n for n in nacks if not n.flags & 0x08]
    assert {n.nack_psn for n in rud} == {f.pds.ack_psn for f in trimmed}
    # every trimmed ACK comes again, whole, RETX set
    for f in trimmed:
        assert any(g.pds.ack_psn == f.pds.ack_psn and g.payload and g.pds.flags & 0x10
                   for g in data_acks)
    rudi = [n for n in nacks if n.flags & 0x08]  # NT: RUDI, by pkt_id, no PDC IDs
    assert rudi and all(n.spdcid == 0 and n.dpdcid == 0 for n in rudi)
    trimmed_resps = [f for f in fr if f.pds.type == PdsType.RUDI_RESP and f.dscp == 14]
    assert {n.nack_psn for n in rudi} == {f.pds.pkt_id for f in trimmed_resps}


def test_ccx():
    fr = _decoded("ccx")
    from uet.cms.ccx import parse_ack_state
    acks = [f.pds for f in fr if f.pds.type in (PdsType.ACK, PdsType.ACK_CC, PdsType.ACK_CCX)
            and f.src_ip == "10.0.0.5"]
    ccx = [a for a in acks if a.type == PdsType.ACK_CCX]
    assert ccx and all(a.type == PdsType.ACK_CCX for a in acks if isinstance(a, PdsAckCc))
    states = [parse_ack_state(a.ccx_state) for a in ccx]
    assert all(s is not None for s in states) and sum(s[3] for s in states) > 0
    nccx = [f.pds for f in fr if f.pds.type == PdsType.NACK_CCX]
    assert nccx and all(n.nccx_type == 1 and n.nack_code == NackCode.TRIMMED_LASTHOP
                        for n in nccx)
    assert not [f for f in fr if f.pds.type == PdsType.NACK]  # every NACK carries CCX


def test_negotiation():
    fr = _decoded("negotiation")
    from uet.pds import negotiation as neg
    cps = [f.pds for f in fr if f.pds.type == PdsType.CP]
    nego = [c for c in cps if c.ctl_type == CtlType.NEGOTIATION]
    assert len(nego) == 2
    mine, theirs = (neg.decode(c.payload) for c in nego)
    assert nego[0].syn and not mine.reply and theirs.reply and not nego[1].syn
    first_req = next(i for i, f in enumerate(fr) if isinstance(f.pds, PdsRequest))
    assert fr.index(next(f for f in fr if f.pds is nego[0])) < first_req
    assert len([c for c in cps if c.ctl_type == CtlType.NOOP]) >= 3
    assert not [c for c in cps if c.ctl_type in (CtlType.CLOSE_REQ, CtlType.CLOSE)]
    assert len({f.pds.spdcid for f in fr if isinstance(f.pds, PdsRequest)}) == 1


def test_native_ip():
    fr = _decoded("native_ip")
    assert all(f.encap == "ip" and f.ip_proto == 253 for f in fr)
    evs = {f.ev for f in fr if isinstance(f.pds, PdsRequest)}
    assert len(evs) > 2  # sprayed by the entropy value
    assert any(type(f.pds) is PdsAck for f in fr)  # the close ACK


def test_atomics_dc():
    fr = _decoded("atomics_dc")
    from uet.wire.constants import AtomicDatatype, ReturnCode
    ld = [f for f in fr if isinstance(f.ext, AtomicExt)
          and f.ext.atomic_datatype == AtomicDatatype.LONG_DOUBLE]
    # 2^100 in binary128: exponent 100 + 16383 = 0x4063, fraction 0; 1.0: 0x3fff
    assert len(ld) == 1 and ld[0].payload == bytes.fromhex("4063" + "00" * 14)
    fetched = [f for f in fr if type(f.ses) in (SesResponseData, SesResponseDataSmall)]
    assert len(fetched) == 1 and fetched[0].payload == bytes.fromhex("3fff" + "00" * 14)
    codes = [f.ses.return_code for f in fr if type(f.ses) is SesResponse]
    assert ReturnCode.AMO_FP_OVERFLOW in codes
    rsp = [(f.pds.ack_psn, f.ses.opcode) for f in fr if type(f.ses) is SesResponse]
    dc = [p for p, op in rsp if op == RspOpcode.NO_RESPONSE]
    assert len(dc) == 1 and (dc[0], RspOpcode.RESPONSE) in rsp
    assert rsp.index((dc[0], RspOpcode.NO_RESPONSE)) < rsp.index((dc[0], RspOpcode.RESPONSE))


def test_nack_codes_shows_every_detectable_code():
    codes = {f.pds.nack_code for f in _decoded("nack_codes") if f.pds.type == PdsType.NACK}
    want = set(range(0x01, 0x1B)) - {0x0C}
    assert want <= codes, sorted(want - codes)
    names = {cf.if_name for cf in _frames("nack_codes")}
    assert all(n.startswith(("PDS-", "SES-")) for n in names)
