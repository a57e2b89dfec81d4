"""``uet decode CAPTURE [--json]``: per-frame decode of a pcap/pcapng capture.

Text mode prints one summary line per frame; ``--json`` prints one JSON object per frame
(JSON lines) with ``"frame"`` (1-based) and the fields of :func:`uet.wire.fields.frame_fields`
under their Wireshark-style names. A frame that does not decode gets an ``"error"`` key
(text mode: ``ERROR ...``) and decoding goes on with the next frame.

Frames a snap length cut (the capture's original length is larger than what it holds)
are decoded as far as their headers go (:func:`uet.wire.codec.decode_headers`): JSON adds
``"truncated": true``, ``"frame.len"`` (on the wire) and ``"frame.cap_len"`` (captured),
``uet.payload_len`` is the payload length on the wire; text mode appends ``[truncated N of
M bytes]`` (N captured of M). Only a cut header is an error.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TextIO

from uet.capture.pcapng import LINKTYPE_ETHERNET, CaptureError, read_capture
from uet.wire.codec import decode_headers
from uet.wire.constants import (
    UET_DEFAULT_IP_PROTO,
    UET_UDP_PORT,
    AckReq,
    CcType,
    CtlType,
    NackCode,
    PdsType,
    ReturnCode,
    RspOpcode,
    SesOpcode,
)
from uet.wire.errors import DecodeError
from uet.wire.fields import frame_fields
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
    RendezvousExt,
    SesMedium,
    SesSmall,
    SesStandard,
    psn_add,
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("capture", help="pcap or pcapng file")
    p.add_argument("--json", action="store_true",
                   help="one JSON object per frame with Wireshark-style uet.* field names")
    p.add_argument("--trailer-len", type=int, default=0, metavar="N",
                   help="bytes of trailer (CRC/ICV) at the end of each UET packet (default 0)")
    p.add_argument("--udp-port", type=int, default=UET_UDP_PORT,
                   help=f"UET UDP destination port (default {UET_UDP_PORT})")
    p.add_argument("--ip-proto", type=int, default=UET_DEFAULT_IP_PROTO,
                   help=f"IP protocol of native-IP UET (default {UET_DEFAULT_IP_PROTO})")


def _name(enum: type, value: int) -> str:
    try:
        return enum(value).name
    except ValueError:
        return str(value)


def _flag_text(flags: int, names: dict[int, str]) -> str:
    return "|".join(n for bit, n in names.items() if flags & bit) or "-"


_REQ_FLAGS = {0x10: "RETX", 0x08: "AR", 0x04: "SYN"}
_ACK_FLAGS = {0x40: "EPSN", 0x20: "M", 0x10: "RETX", 0x08: "P"}
_NACK_FLAGS = {0x20: "M", 0x10: "RETX", 0x08: "NT"}
_CP_FLAGS = {0x20: "ISROD", 0x10: "RETX", 0x08: "AR", 0x04: "SYN"}
_RUDI_FLAGS = {0x20: "M", 0x10: "RETX"}
_SES_FLAGS = {0x20: "DC", 0x10: "IE", 0x08: "REL", 0x04: "HD", 0x02: "EOM", 0x01: "SOM"}


def summary(index: int, frame: Frame, payload_len: int | None = None) -> str:
    """One human-readable line for a decoded frame (``payload_len``: the length on the
    wire when the capture holds less of the payload)."""
    h = frame.pds
    parts = [str(index), frame.src_ip, "->", frame.dst_ip, f"ev={frame.ev}"]
    if frame.tss is not None:
        parts.append(f"TSS sdi={frame.tss.sdi}")
    parts.append(_name(PdsType, int(h.type)))
    cls = h.__class__
    if cls is PdsRequest:
        parts += [f"psn={h.psn}", _flag_text(h.flags, _REQ_FLAGS), f"spdcid={h.spdcid}"]
        if h.flags & 0x04:
            parts.append(f"start_psn={psn_add(h.psn, -h.psn_offset)}")
        else:
            parts.append(f"dpdcid={h.dpdcid}")
        parts.append(f"clear_psn={h.clear_psn}")
    elif cls is PdsAck or cls is PdsAckCc:
        parts += [f"cack={h.cack_psn}", f"ack_psn={h.ack_psn}",
                  _flag_text(h.flags, _ACK_FLAGS), f"spdcid={h.spdcid}", f"dpdcid={h.dpdcid}"]
        req = h.flags >> 1 & 3
        if req:
            parts.append(f"req={_name(AckReq, req)}")
        if cls is PdsAckCc:
            parts += [f"cc={_name(CcType, h.cc_type)}", f"mpr={h.mpr}",
                      f"sack_base={h.sack_base}", f"sack=0x{h.sack_bitmap:016x}"]
    elif cls is PdsNack:
        parts += [_name(NackCode, h.nack_code), f"psn={h.nack_psn}",
                  _flag_text(h.flags, _NACK_FLAGS), f"spdcid={h.spdcid}", f"dpdcid={h.dpdcid}"]
    elif cls is PdsControl:
        parts += [_name(CtlType, h.ctl_type), f"psn={h.psn}", _flag_text(h.flags, _CP_FLAGS),
                  f"spdcid={h.spdcid}", f"payload={h.payload}"]
    elif cls is PdsRudi:
        parts += [f"pkt_id={h.pkt_id}", _flag_text(h.flags, _RUDI_FLAGS)]
    ses = frame.ses
    if ses is not None:
        if isinstance(ses, SesStandard | SesMedium | SesSmall):
            kind = {SesStandard: "std", SesMedium: "medium", SesSmall: "small"}[ses.__class__]
            parts += [kind, _name(SesOpcode, ses.opcode), _flag_text(ses.flags, _SES_FLAGS),
                      f"job={ses.job_id}"]
            if isinstance(ses, SesStandard):
                parts.append(f"msg={ses.message_id}")
                if not ses.flags & 0x01:
                    parts.append(f"offset={ses.message_offset}")
            parts.append(f"req_len={ses.request_length}")
        else:
            parts += ["rsp", _name(RspOpcode, ses.opcode),
                      f"rc={_name(ReturnCode, ses.return_code)}"]
    ext = frame.ext
    if isinstance(ext, AtomicExt | CasExt):
        parts.append(f"amo={ext.atomic_opcode}/{ext.atomic_datatype}")
    elif isinstance(ext, RendezvousExt):
        parts.append(f"rndv eager={ext.eager_length}")
    parts.append(f"len={len(frame.payload) if payload_len is None else payload_len}")
    return " ".join(parts)


def decode_capture(path: str, out: TextIO, *, as_json: bool = False, trailer_len: int = 0,
                   udp_port: int = UET_UDP_PORT, ip_proto: int = UET_DEFAULT_IP_PROTO) -> int:
    """Decode every frame of ``path`` to ``out``; return the number of frames that failed.

    Raises :class:`CaptureError` if the file itself is corrupt (frames before the damage
    have been printed).
    """
    failed = 0
    for cf in read_capture(path):
        err: str | None = None
        got = None
        cut = cf.orig_len > len(cf.data)
        if cf.linktype != LINKTYPE_ETHERNET:
            err = f"unsupported link type {cf.linktype} (only Ethernet is decoded)"
        else:
            try:
                got = decode_headers(cf.data, cf.orig_len, trailer_len, udp_port=udp_port,
                                     ip_proto=ip_proto)
            except DecodeError as exc:
                err = str(exc)
        if err is not None:
            failed += 1
        if as_json:
            obj: dict = {"frame": cf.index}
            if got is not None:
                obj.update(frame_fields(got.frame))
                if cut:
                    obj["uet.payload_len"] = got.payload_len
            else:
                obj["error"] = err
            if cut:
                obj.update({"truncated": True, "frame.len": cf.orig_len,
                            "frame.cap_len": len(cf.data)})
            out.write(json.dumps(obj) + "\n")
        else:
            tail = f" [truncated {len(cf.data)} of {cf.orig_len} bytes]" if cut else ""
            if got is not None:
                out.write(summary(cf.index, got.frame, got.payload_len if cut else None)
                          + tail + "\n")
            else:
                out.write(f"{cf.index} ERROR {err}{tail}\n")
    return failed


def run(args: argparse.Namespace) -> int:
    try:
        decode_capture(args.capture, sys.stdout, as_json=args.json,
                       trailer_len=args.trailer_len, udp_port=args.udp_port,
                       ip_proto=args.ip_proto)
        sys.stdout.flush()
    except BrokenPipeError:  # `uet decode x | head`: stop quietly
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (CaptureError, OSError) as exc:
        print(f"uet decode: {args.capture}: {exc}", file=sys.stderr)
        return 1
    return 0
