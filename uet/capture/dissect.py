"""One captured frame as flat, Wireshark-named fields: what ``uet decode`` prints and what
``uet diff`` compares.

A UET frame (over UDP or native IP) is decoded with :func:`uet.wire.codec.decode_headers`
(so frames a snap length cut keep their headers) and named by
:func:`uet.wire.fields.frame_fields`. An Ethernet MAC control frame (ethertype 0x8808) is a
PFC (802.1Qbb, opcode 0x0101) or PAUSE (802.3x, opcode 0x0001) frame, named as Wireshark's
``macc`` dissector names it. A RoCEv2 frame (UDP 4791: the RoCE baseline's) gets the
``infiniband.*`` names of Wireshark's InfiniBand dissector (:mod:`uet.roce.fields`).
Anything else is an error text plus its ethertype.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from uet.capture.pcapng import LINKTYPE_ETHERNET, CapturedFrame
from uet.tss.header import header_len, unpack_header
from uet.tss.sublayer import frame_is_secured
from uet.wire.codec import FrameHeaders, decode_headers, split_frame
from uet.wire.constants import UET_DEFAULT_IP_PROTO, UET_UDP_PORT
from uet.wire.errors import DecodeError
from uet.wire.fields import frame_fields
from uet.wire.records import Frame, PdsUud

__all__ = ["Dissected", "Value", "dissect", "mac_control", "mac", "FRAME_FIELDS",
           "MAC_CONTROL_FIELDS", "known_fields"]

Value = int | bool | str | None

#: Per-frame metadata, named as Wireshark names it (``uet decode --json`` prints them).
FRAME_FIELDS: frozenset[str] = frozenset({
    "frame.number", "frame.interface_id", "frame.interface_name", "frame.time_ns",
    "frame.time_relative", "frame.time_delta", "frame.len", "frame.cap_len",
    "frame.comment"})
#: Fields of PFC and PAUSE frames (Wireshark's ``macc`` dissector) and of other frames.
MAC_CONTROL_FIELDS: frozenset[str] = frozenset(
    {"eth.type", "macc.opcode", "macc.pause_time", "macc.cbfc.enbv"}
    | {f"macc.cbfc.pause_time.c{c}" for c in range(8)})

ETHERTYPE_MAC_CONTROL = 0x8808
OPCODE_PAUSE = 0x0001
OPCODE_PFC = 0x0101


@dataclass(slots=True)
class Dissected:
    """What one frame is: ``kind`` ``"uet"`` (``headers`` decoded), ``"pfc"``, ``"pause"``,
    ``"roce"`` or ``"other"`` (``error`` says why it is not UET); ``fields`` by Wireshark
    name."""

    kind: str
    fields: dict[str, Value]
    headers: FrameHeaders | None = None
    error: str | None = None
    summary: str = ""  # for PFC and PAUSE frames

    @property
    def truncated(self) -> bool:
        return self.headers is not None and self.headers.truncated


def known_fields() -> frozenset[str]:
    """Every field name a decoded frame can carry (for checking display filters)."""
    from uet.roce.fields import ROCE_FIELDS
    from uet.wire.fields import all_field_names

    return (all_field_names() | FRAME_FIELDS | MAC_CONTROL_FIELDS | ROCE_FIELDS
            | {"frame", "error", "truncated"})


def mac(b: bytes) -> str:
    """``aa:bb:cc:dd:ee:ff``, as Wireshark prints a MAC address."""
    return ":".join(f"{x:02x}" for x in b)


def mac_control(data: bytes) -> tuple[str, dict[str, Value], str] | None:
    """A PFC or PAUSE frame as (kind, fields, summary); None for anything else."""
    if len(data) < 18 or int.from_bytes(data[12:14], "big") != ETHERTYPE_MAC_CONTROL:
        return None
    opcode = int.from_bytes(data[14:16], "big")
    base: dict[str, Value] = {"eth.dst": mac(data[0:6]), "eth.src": mac(data[6:12]),
                              "eth.type": ETHERTYPE_MAC_CONTROL, "macc.opcode": opcode}
    if opcode == OPCODE_PFC and len(data) >= 34:
        vector = int.from_bytes(data[16:18], "big")
        base["macc.cbfc.enbv"] = vector
        quanta = {}
        for c in range(8):
            q = int.from_bytes(data[18 + 2 * c:20 + 2 * c], "big")
            base[f"macc.cbfc.pause_time.c{c}"] = q
            if vector >> c & 1:
                quanta[c] = q
        what = "PFC " + ", ".join(f"class {c} {'XON' if q == 0 else f'pause {q}'}"
                                  for c, q in quanta.items())
        return "pfc", base, what
    if opcode == OPCODE_PAUSE:
        q = int.from_bytes(data[16:18], "big")
        base["macc.pause_time"] = q
        return "pause", base, "PAUSE " + ("XON" if q == 0 else f"pause {q}")
    return None


def _roce(data: bytes) -> Dissected | None:
    """A RoCEv2 frame (UDP 4791) as ``kind`` ``"roce"`` with ``infiniband.*`` fields, or
    None if it is not one that decodes (then it is reported as any other frame)."""
    from uet.roce.codec import decode_frame, is_roce
    from uet.roce.fields import roce_fields, roce_summary

    if not is_roce(data):
        return None
    try:
        f = decode_frame(data, check_icrc=False)
    except DecodeError:
        return None
    return Dissected("roce", roce_fields(f), summary=roce_summary(f))


def _secured(cf: CapturedFrame, keys: Any) -> Dissected | None:
    """A TSS frame: decrypted with ``keys``, or shown as encrypted (None: not UET)."""
    data = cf.data
    try:
        env, off, end = split_frame(data, udp_port=None)
    except DecodeError:
        return None
    hdr = unpack_header(memoryview(data)[off:end])
    if hdr is None:
        return None
    if keys is not None and hdr.sdi in keys and cf.orig_len <= len(data):
        try:
            frame = keys.open_frame(data)
        except DecodeError:
            frame = None
        if frame is not None:
            fields = dict(frame_fields(frame))
            fields["uet.tss.decrypted"] = True
            n = len(data)
            return Dissected("uet", fields, headers=FrameHeaders(frame, n, n,
                                                                 len(frame.payload)))
    shell = Frame(PdsUud(), src_mac=env.src_mac, dst_mac=env.dst_mac, src_ip=env.src_ip,
                  dst_ip=env.dst_ip, ev=env.ev, dscp=env.dscp, ecn=env.ecn, ttl=env.ttl,
                  ip_id=env.ip_id, udp_dport=env.udp_dport, udp_checksum=env.udp_checksum,
                  encap=env.encap, ip_proto=env.ip_proto, tss=hdr)
    fields = {k: v for k, v in frame_fields(shell).items() if not k.startswith("uet.pds.")
              and k != "uet.payload_len"}
    if env.encap != "udp":
        fields["uet.pds.entropy"] = env.ev
        fields["uet.pds.entropy.rsvd"] = 0
    if keys is not None and hdr.sdi in keys:
        fields["uet.tss.decrypted"] = False
    fields["uet.tss.encrypted"] = bytes(data[off + header_len(hdr):end]).hex()
    why = "authentication failed" if keys is not None and hdr.sdi in keys else \
        f"encrypted, no key for SDI {hdr.sdi}"
    return Dissected("tss", fields, summary=why)


def dissect(cf: CapturedFrame, *, trailer_len: int = 0, udp_port: int = UET_UDP_PORT,
            ip_proto: int = UET_DEFAULT_IP_PROTO, keys: Any = None,
            tss_cleartext: bool = False) -> Dissected:
    """Decode one captured frame (never raises for what the frame holds).

    A frame with a TSS header is decrypted with ``keys`` (:class:`uet.tss.reader.
    CaptureKeys`: ``uet.tss.decrypted`` true, the ICV as ``uet.trailer``); without a key
    for its SDI it shows its envelope and TSS header and ``uet.tss.encrypted`` (the
    encrypted bytes' length), unless ``tss_cleartext`` (synthetic samples whose PDS
    header follows the TSS header in the clear)."""
    data = cf.data
    if cf.linktype != LINKTYPE_ETHERNET:
        return Dissected("other", {}, error=f"unsupported link type {cf.linktype} "
                                            "(only Ethernet is decoded)")
    if not tss_cleartext and frame_is_secured(data, udp_port=udp_port, ip_proto=ip_proto):
        secured = _secured(cf, keys)
        if secured is not None:
            return secured
    try:
        got = decode_headers(data, cf.orig_len, trailer_len, udp_port=udp_port,
                             ip_proto=ip_proto)
    except DecodeError as exc:
        roce = _roce(data)
        if roce is not None:
            return roce
        ctl = mac_control(data)
        if ctl is not None:
            kind, fields, what = ctl
            return Dissected(kind, fields, summary=what)
        fields: dict[str, Value] = {}
        if len(data) >= 14:
            fields["eth.type"] = int.from_bytes(data[12:14], "big")
        return Dissected("other", fields, error=str(exc))
    fields = dict(frame_fields(got.frame))
    if got.truncated:
        fields["uet.payload_len"] = got.payload_len
    return Dissected("uet", fields, headers=got)
