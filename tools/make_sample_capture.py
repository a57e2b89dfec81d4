#!/usr/bin/env python3
"""Write ``captures/sample.pcapng``: a tiny deterministic capture of UET frames.

A short RUD exchange (SYN data, ACK_CC with a response, a trimmed packet and its NACK, a
close), plus one frame of each other kind: ROD with a medium header, RUDI request and
response, UUD datagram, a fetching atomic, a compare-and-swap, a rendezvous send, a read
response, IPv6, native IP, and a TSS-protected control packet. Running it twice gives the
same bytes (``tests/wire/test_decode_command.py`` checks the file is up to date;
``python tools/make_captures.py`` rewrites it with the other reference captures).

Usage: python tools/make_sample_capture.py [OUTPUT]
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

from uet.capture.pcapng import PcapngWriter
from uet.fabric.qos import DSCP_TRIMMED
from uet.wire.codec import encode_frame, trim_frame
from uet.wire.constants import (
    DSCP_DEFAULT_CONTROL,
    AtomicDatatype,
    AtomicOpcode,
    CtlType,
    NackCode,
    NextHeader,
    PdsType,
    ReturnCode,
    RspOpcode,
    SesOpcode,
)
from uet.wire.records import (
    AtomicExt,
    CasExt,
    Frame,
    PdsAck,
    PdsAckCc,
    PdsControl,
    PdsNack,
    PdsRequest,
    PdsRudi,
    PdsUud,
    RendezvousExt,
    SesMedium,
    SesResponse,
    SesResponseData,
    SesSmall,
    SesStandard,
    TssHeader,
)

A, B = "10.0.0.1", "10.0.0.2"
MAC_A, MAC_B = "02:00:00:00:00:01", "02:00:00:00:00:02"
JOB = 42
START = 0x10000


def _fwd(**kw) -> dict:
    return dict(src_ip=A, dst_ip=B, src_mac=MAC_A, dst_mac=MAC_B, **kw)


def _back(**kw) -> dict:
    return dict(src_ip=B, dst_ip=A, src_mac=MAC_B, dst_mac=MAC_A, dscp=DSCP_DEFAULT_CONTROL,
                **kw)


def sample_frames() -> list[bytes]:
    """The frames of the sample capture, in order."""
    data = bytes(range(256)) * 4
    frames: list[Frame] = [
        # 1: first packet of a new PDC (SYN, AR), SOM|EOM SEND of 1 KiB
        Frame(pds=PdsRequest(PdsType.RUD_REQ, NextHeader.REQ_STD, 0x0C, -1, START, 7,
                             psn_offset=0),
              ses=SesStandard(SesOpcode.SEND, 0, 0x03, message_id=1, job_id=JOB,
                              pid_on_fep=3, resource_index=1, initiator=0x0A000001,
                              request_length=len(data)),
              payload=data, **_fwd(ev=1234)),
        # 2: its ACK_CC with an SES response and NSCC state
        Frame(pds=PdsAckCc(PdsType.ACK_CC, NextHeader.RSP, 0, 0, START, 9, 7, 0, 0, 1, 0,
                           0x1, service_time=12, rcvd_bytes=len(data) + 84),
              ses=SesResponse(0, RspOpcode.RESPONSE, 0, ReturnCode.OK, 1, 0, JOB, len(data)),
              **_back(ev=1234)),
        # 3: a WRITE, first of two packets (SOM); 4: second packet (EOM, message offset)
        Frame(pds=PdsRequest(PdsType.RUD_REQ, NextHeader.REQ_STD, 0, -1, START + 1, 7, 9),
              ses=SesStandard(SesOpcode.WRITE, 0, 0x01, message_id=2, job_id=JOB,
                              buffer_offset=0x100000, memory_key=0xC0FFEE,
                              request_length=2 * len(data)),
              payload=data, **_fwd(ev=4321)),
        Frame(pds=PdsRequest(PdsType.RUD_REQ, NextHeader.REQ_STD, 0x08, -2, START + 2, 7, 9),
              ses=SesStandard(SesOpcode.WRITE, 0, 0x02, message_id=2, job_id=JOB,
                              buffer_offset=0x100000, memory_key=0xC0FFEE,
                              payload_length=len(data), message_offset=len(data),
                              request_length=2 * len(data)),
              payload=data, **_fwd(ev=999)),
        # 6: NACK for the trimmed packet (frame 5 is frame 4 trimmed by a switch, below)
        Frame(pds=PdsNack(PdsType.NACK, NextHeader.NONE, 0, NackCode.TRIMMED, 0, START + 2,
                          9, 7, 0), **_back(ev=999)),
        # 7: selective ACK after the retransmission, clear requested
        Frame(pds=PdsAckCc(PdsType.ACK_CC, NextHeader.NONE, 0x02, 0, START + 2, 9, 7, 0, 0,
                           1, -2, 0x7, rcvd_bytes=3 * len(data)), **_back(ev=999)),
        # 8: CLEAR and 9: CLOSE control packets
        Frame(pds=PdsControl(CtlType.CLEAR, 0, 0, 0, 7, 9, payload=START + 2),
              **_fwd(ev=0x4242, dscp=DSCP_DEFAULT_CONTROL)),
        Frame(pds=PdsControl(CtlType.CLOSE, 0x08, 0, START + 3, 7, 9),
              **_fwd(ev=0x4242, dscp=DSCP_DEFAULT_CONTROL)),
        # 10: ROD request with a medium (single-packet) tagged send carrying header data
        Frame(pds=PdsRequest(PdsType.ROD_REQ, NextHeader.REQ_MEDIUM, 0x0C, 0, 500, 11),
              ses=SesMedium(SesOpcode.TAGGED_SEND, 0, 0x07, 16, 0, JOB, 3, 2,
                            0x1122334455667788, 0x0A000001, 0xABCDEF),
              payload=b"tagged message!!", **_fwd(ev=77)),
        # 11: RUDI request (small header WRITE) and 12: its RUDI response
        Frame(pds=PdsRudi(PdsType.RUDI_REQ, NextHeader.REQ_SMALL, 0, 0xBEEF),
              ses=SesSmall(SesOpcode.WRITE, 0, 0x03, 8, 0, JOB, 3, 4, 0x2000),
              payload=b"8 bytes!", **_fwd(ev=5)),
        Frame(pds=PdsRudi(PdsType.RUDI_RESP, NextHeader.RSP, 0, 0xBEEF),
              ses=SesResponse(0, RspOpcode.RESPONSE, 0, ReturnCode.OK, 0, 0, JOB, 8),
              **_back(ev=5)),
        # 13: UUD datagram
        Frame(pds=PdsUud(NextHeader.REQ_SMALL, 0),
              ses=SesSmall(SesOpcode.DATAGRAM_SEND, 0, 0x03, 5, 0, JOB, 3, 0, 0),
              payload=b"hello", **_fwd(ev=6)),
        # 14: fetching atomic SUM on a uint64, operand 5 in the payload
        Frame(pds=PdsRequest(PdsType.RUD_REQ, NextHeader.REQ_STD, 0x08, -1, START + 3, 7, 9),
              ses=SesStandard(SesOpcode.FETCHING_ATOMIC, 0, 0x03, message_id=3, job_id=JOB,
                              buffer_offset=0x40, memory_key=0xC0FFEE, request_length=8),
              ext=AtomicExt(AtomicOpcode.SUM, AtomicDatatype.UINT64, 0x01),
              payload=(5).to_bytes(8, "big"), **_fwd(ev=1)),
        # 15: compare-and-swap after a small header
        Frame(pds=PdsRequest(PdsType.RUD_REQ, NextHeader.REQ_SMALL, 0x08, -1, START + 4, 7, 9),
              ses=SesSmall(SesOpcode.ATOMIC, 0, 0x03, 32, 0, JOB, 3, 0, 0x48),
              ext=CasExt(AtomicOpcode.CSWAP, AtomicDatatype.UINT64, 0, 1, 2), **_fwd(ev=2)),
        # 16: rendezvous send with its 24-byte extension
        Frame(pds=PdsRequest(PdsType.RUD_REQ, NextHeader.REQ_STD, 0x08, -1, START + 5, 7, 9),
              ses=SesStandard(SesOpcode.RENDEZVOUS_SEND, 0, 0x03, message_id=4, job_id=JOB,
                              request_length=1 << 20),
              ext=RendezvousExt(256, 0, 3, 9, 0, 0x5EED), payload=data[:256], **_fwd(ev=3)),
        # 17: ACK carrying read-response data
        Frame(pds=PdsAck(NextHeader.RSP_DATA, 0x20, 0, START + 5, 9, 7),
              ses=SesResponseData(0, RspOpcode.RESPONSE_W_DATA, 0, ReturnCode.OK, 5, JOB, 5,
                                  64, 64, 0), payload=data[:64], **_back(ev=3)),
        # 18: the same exchange over IPv6 (UDP checksum mandatory)
        Frame(pds=PdsRequest(PdsType.RUD_REQ, NextHeader.REQ_STD, 0x0C, 0, 9000, 1),
              ses=SesStandard(SesOpcode.SEND, 0, 0x03, message_id=1, job_id=JOB,
                              request_length=4),
              payload=b"v6!!", src_ip="fd00::1", dst_ip="fd00::2", src_mac=MAC_A,
              dst_mac=MAC_B, ev=2024, udp_checksum=True),
        # 19: native IP (protocol 253) with the entropy header
        Frame(pds=PdsRequest(PdsType.RUD_REQ, NextHeader.REQ_SMALL, 0x08, -1, START + 6, 7, 9),
              ses=SesSmall(SesOpcode.WRITE, 0, 0x03, 4, 0, JOB, 3, 4, 0),
              payload=b"ip!!", encap="ip", **_fwd(ev=0x0F0F)),
        # 20: a TSS header (with SSI) in front of a NOOP control packet
        Frame(pds=PdsControl(CtlType.NOOP, 0, 0, 0, 7, 9),
              tss=TssHeader(True, 0, 0x000123, 0x0A000001, 1, 77),
              **_fwd(ev=0x4242, dscp=DSCP_DEFAULT_CONTROL)),
    ]
    wires = [encode_frame(f) for f in frames]
    # frame 5: frame 4 after a switch trimmed it (payload cut, re-marked with the fabric's
    # trimmed code point, so the dissector's uet.trimmed flags it)
    wires.insert(4, trim_frame(wires[3], dscp=DSCP_TRIMMED))
    return wires


def write_sample(fileobj) -> None:
    w = PcapngWriter(fileobj)
    if_id = w.add_interface("uet-sample")
    for i, wire in enumerate(sample_frames()):
        w.write_packet(if_id, 1_000 * i, wire)


def sample_bytes() -> bytes:
    buf = io.BytesIO()
    write_sample(buf)
    return buf.getvalue()


def main(argv: list[str]) -> int:
    default = Path(__file__).resolve().parents[1] / "captures" / "sample.pcapng"
    out = Path(argv[1]) if len(argv) > 1 else default
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(sample_bytes())
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
