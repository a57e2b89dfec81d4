"""``uet decode CAPTURE [--json] [-Y FILTER] [-i IFACE] [-t relative|absolute|delta]``:
per-frame decode of a pcap/pcapng capture.

Text mode prints one line per frame: frame number, time (seconds; ``-t``), capture
interface (``-`` when the file names none), then the summary. ``--json`` prints one JSON
object per frame (JSON lines): ``"frame"`` (1-based), the ``frame.*`` metadata
(``frame.number``, ``frame.interface_id``, ``frame.interface_name``, ``frame.time_ns``
(the capture timestamp in integer nanoseconds), ``frame.time_relative`` and
``frame.time_delta`` (seconds since the first / the previous frame of the file),
``frame.len``, ``frame.cap_len``, ``frame.comment`` (a list, when the frame has packet
comments)), then the fields of :func:`uet.wire.fields.frame_fields` under their
Wireshark-style names. PFC and PAUSE frames get Wireshark's ``macc.*`` fields. Any other
frame that does not decode gets an ``"error"`` key (text mode: ``ERROR ...``) and decoding
goes on with the next frame.

``-Y FILTER`` keeps the frames a display filter selects (:mod:`uet.capture.dfilter`:
Wireshark's syntax over the JSON names, e.g. ``uet.pds.flags.retx == 1 &&
frame.interface_name == "h0"``); ``-i NAME`` (repeatable) keeps one interface's frames.

Frames a snap length cut (the capture's original length is larger than what it holds)
are decoded as far as their headers go (:func:`uet.wire.codec.decode_headers`): JSON adds
``"truncated": true`` (``frame.len`` is the length on the wire, ``frame.cap_len`` what was
captured), ``uet.payload_len`` is the payload length on the wire; text mode appends
``[truncated N of M bytes]`` (N captured of M). Only a cut header is an error.

A file cut short (it ends inside a block) is decoded up to the cut, then ``uet decode``
says so on stderr and exits 1; exit 2 for a bad filter.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from typing import Any, TextIO

from uet.capture.dfilter import FilterError, compile_filter
from uet.capture.dissect import Dissected, dissect, known_fields
from uet.capture.pcapng import CapturedFrame, CaptureError, read_capture
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
    p.add_argument("-Y", "--filter", default=None, metavar="FILTER",
                   help="only frames matching this display filter, Wireshark syntax over "
                        "the --json field names (e.g. 'uet.pds.flags.retx == 1 && "
                        "frame.interface_name == \"h0\"')")
    p.add_argument("-i", "--iface", action="append", default=[], metavar="NAME",
                   help="only frames of this capture interface (e.g. h0); repeatable")
    p.add_argument("--keys", default=None, metavar="FILE",
                   help="TSS key file (docs/tss.md): frames of its secure domains are "
                        "authenticated and decrypted (uet.tss.decrypted); without a key a "
                        "TSS frame shows its headers and uet.tss.encrypted")
    p.add_argument("--tss-cleartext", action="store_true",
                   help="decode what follows a TSS header as cleartext (synthetic header "
                        "samples; the dissector preference uet.tss_cleartext)")
    p.add_argument("-t", "--time", choices=TIME_FORMATS, default="relative",
                   help="time column: seconds since the first frame (relative, default), "
                        "the capture's timestamps (absolute), or since the previous frame "
                        "printed (delta)")


#: Time columns of the text output.
TIME_FORMATS = ("relative", "absolute", "delta")


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


def _seconds(ns: int) -> str:
    sign = "-" if ns < 0 else ""
    ns = abs(ns)
    return f"{sign}{ns // 1_000_000_000}.{ns % 1_000_000_000:09d}"


def frame_record(cf: CapturedFrame, d: Dissected, t0: int, prev: int) -> dict[str, Any]:
    """The JSON object of one frame: ``frame``, the ``frame.*`` metadata, then the decoded
    fields (or ``error``)."""
    obj: dict[str, Any] = {"frame": cf.index, "frame.number": cf.index,
                           "frame.interface_id": cf.if_id,
                           "frame.interface_name": cf.if_name,
                           "frame.time_ns": cf.ts_ns,
                           "frame.time_relative": (cf.ts_ns - t0) / 1e9,
                           "frame.time_delta": (cf.ts_ns - prev) / 1e9,
                           "frame.len": cf.orig_len, "frame.cap_len": len(cf.data)}
    if cf.comments:
        obj["frame.comment"] = list(cf.comments)
    obj.update(d.fields)
    if d.kind == "other":
        obj["error"] = d.error
    if cf.orig_len > len(cf.data):
        obj["truncated"] = True
    return obj


def decode_capture(path: str, out: TextIO, *, as_json: bool = False, trailer_len: int = 0,
                   udp_port: int = UET_UDP_PORT, ip_proto: int = UET_DEFAULT_IP_PROTO,
                   display_filter: str | None = None, ifaces: Iterable[str] = (),
                   time_format: str = "relative", keys: Any = None,
                   tss_cleartext: bool = False) -> int:
    """Decode every frame of ``path`` to ``out``; return the number of frames that failed.

    ``display_filter`` (:mod:`uet.capture.dfilter`) and ``ifaces`` (interface names) keep
    only some frames; ``time_format`` is the text time column: ``relative`` (seconds since
    the first frame), ``absolute`` (the capture's timestamps) or ``delta`` (since the
    previous frame printed). Raises :class:`FilterError` for a bad filter (before reading),
    :class:`CaptureError` if the file itself is corrupt (frames before the damage have been
    printed; :class:`CaptureTruncated` when it was cut short).
    """
    if time_format not in TIME_FORMATS:
        raise ValueError(f"time format {time_format!r}: allowed {', '.join(TIME_FORMATS)}")
    keep = compile_filter(display_filter, known_fields()) if display_filter else None
    only = set(ifaces)
    failed = 0
    t0: int | None = None
    prev = prev_shown = 0
    for cf in read_capture(path):
        if t0 is None:
            t0 = prev = prev_shown = cf.ts_ns
        if only and cf.if_name not in only:
            prev = cf.ts_ns
            continue
        d = dissect(cf, trailer_len=trailer_len, udp_port=udp_port, ip_proto=ip_proto,
                    keys=keys, tss_cleartext=tss_cleartext)
        obj = frame_record(cf, d, t0, prev) if (as_json or keep) else None
        prev = cf.ts_ns
        if keep is not None and not keep(obj):  # type: ignore[arg-type]
            continue
        if d.kind == "other":
            failed += 1
        if as_json:
            out.write(json.dumps(obj) + "\n")
            continue
        cut = cf.orig_len > len(cf.data)
        tail = f" [truncated {len(cf.data)} of {cf.orig_len} bytes]" if cut else ""
        if cf.comments:
            tail += "".join(f" [comment: {c}]" for c in cf.comments)
        ts = {"relative": cf.ts_ns - t0, "absolute": cf.ts_ns,
              "delta": cf.ts_ns - prev_shown}[time_format]
        prev_shown = cf.ts_ns
        head = f"{cf.index} {_seconds(ts)} {cf.if_name or '-'}"
        if d.headers is not None:
            got = d.headers
            line = summary(cf.index, got.frame, got.payload_len if cut else None)
            out.write(head + line[len(str(cf.index)):] + tail + "\n")
        elif d.kind == "roce":  # the summary names the IP addresses, as a UET line does
            out.write(f"{head} {d.summary}{tail}\n")
        elif d.kind == "tss":
            f = d.fields
            src = f.get("ip.src", f.get("ipv6.src"))
            dst = f.get("ip.dst", f.get("ipv6.dst"))
            ev = f.get("udp.srcport", f.get("uet.pds.entropy"))
            out.write(f"{head} {src} -> {dst} ev={ev} TSS sdi={f['uet.tss.sdi']} "
                      f"an={f['uet.tss.an']} epoch={f['uet.tss.epoch']} tsc="
                      f"{f['uet.tss.tsc'] & 0xFFFFFFFFFFFF} {d.summary}{tail}\n")
        elif d.kind != "other":
            out.write(f"{head} {d.fields['eth.src']} -> {d.fields['eth.dst']} {d.summary}"
                      f"{tail}\n")
        else:
            out.write(f"{head} ERROR {d.error}{tail}\n")
    return failed


def run(args: argparse.Namespace) -> int:
    keys = None
    if args.keys:
        from uet.tss.config import TssConfigError, load_key_file
        from uet.tss.reader import CaptureKeys

        try:
            keys = CaptureKeys(load_key_file(args.keys))
        except TssConfigError as exc:
            print(f"uet decode: --keys: {exc}", file=sys.stderr)
            return 2
    try:
        decode_capture(args.capture, sys.stdout, as_json=args.json,
                       trailer_len=args.trailer_len, udp_port=args.udp_port,
                       ip_proto=args.ip_proto, display_filter=args.filter,
                       ifaces=args.iface, time_format=args.time, keys=keys,
                       tss_cleartext=args.tss_cleartext)
        sys.stdout.flush()
    except BrokenPipeError:  # `uet decode x | head`: stop quietly
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except FilterError as exc:
        print(f"uet decode: -Y: {exc}", file=sys.stderr)
        return 2
    except (CaptureError, OSError) as exc:
        sys.stdout.flush()
        print(f"uet decode: {args.capture}: {exc}", file=sys.stderr)
        return 1
    return 0
