"""Captures of conformance runs: every stimulus and response as a pcapng frame.

The peer records each UDP payload it sends or receives with its time, addresses, EV and TOS
byte; :class:`CaseCapture` turns them into whole Ethernet / IPv4|IPv6 / UDP frames (UDP
source port = EV, destination port 4793, DSCP/ECN from the TOS byte, UDP checksum 0 over
IPv4) and writes them with :class:`uet.capture.pcapng.PcapngWriter`. Malformed payloads are
written as they were sent, so Wireshark shows exactly what the device under test got.
Timestamps are virtual nanoseconds (in-process runs) or wall-clock nanoseconds (UDP runs).
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass

from uet.capture.pcapng import PcapngWriter
from uet.wire.constants import UET_UDP_PORT

from .udp_io import family_of

PEER_MAC = bytes.fromhex("02c0ffee0001")
DUT_MAC = bytes.fromhex("02c0ffee0002")


@dataclass(frozen=True, slots=True)
class Record:
    """One captured datagram (``sent`` is True for the peer's stimuli)."""

    t_ns: int
    sent: bool
    src_ip: str
    dst_ip: str
    ev: int
    tos: int
    payload: bytes


def _csum(data: bytes) -> int:
    if len(data) & 1:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def udp_frame(src_ip: str, dst_ip: str, sport: int, dport: int, payload: bytes, tos: int = 0,
              src_mac: bytes = PEER_MAC, dst_mac: bytes = DUT_MAC) -> bytes:
    """A whole Ethernet / IP / UDP frame around ``payload`` (any bytes, even malformed)."""
    fam = family_of(src_ip)
    import socket

    src = socket.inet_pton(fam, src_ip)
    dst = socket.inet_pton(fam, dst_ip)
    ulen = 8 + len(payload)
    if fam == socket.AF_INET6:
        eth = dst_mac + src_mac + b"\x86\xdd"
        ip = struct.pack("!IHBB16s16s", 0x60000000 | (tos & 0xFF) << 20, ulen, 17, 64,
                         src, dst)
        pseudo = src + dst + struct.pack("!IxxxB", ulen, 17)
        udp = struct.pack("!HHHH", sport, dport, ulen, 0)
        c = _csum(pseudo + udp + payload) or 0xFFFF
        udp = struct.pack("!HHHH", sport, dport, ulen, c)
        return eth + ip + udp + payload
    eth = dst_mac + src_mac + b"\x08\x00"
    hdr = struct.pack("!BBHHHBBH4s4s", 0x45, tos & 0xFF, 20 + ulen, 0, 0x4000, 64, 17, 0,
                      src, dst)
    hdr = hdr[:10] + struct.pack("!H", _csum(hdr)) + hdr[12:]
    return eth + hdr + struct.pack("!HHHH", sport, dport, ulen, 0) + payload


class CaseCapture:
    """The datagrams of one conformance case (written only when asked)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.records: list[Record] = []
        self.path: str | None = None

    def add(self, t_ns: int, sent: bool, src_ip: str, dst_ip: str, ev: int, tos: int,
            payload: bytes) -> None:
        self.records.append(Record(t_ns, sent, src_ip, dst_ip, ev, tos, bytes(payload)))

    def frames(self) -> list[tuple[int, bytes]]:
        """``(t_ns, frame bytes)`` of every record, in order."""
        out = []
        for r in self.records:
            smac, dmac = (PEER_MAC, DUT_MAC) if r.sent else (DUT_MAC, PEER_MAC)
            out.append((r.t_ns, udp_frame(r.src_ip, r.dst_ip, r.ev, UET_UDP_PORT, r.payload,
                                          r.tos, smac, dmac)))
        return out

    def write(self, path: str | os.PathLike[str]) -> str:
        """Write the capture as pcapng (one interface named after the case)."""
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with PcapngWriter.open(path) as w:
            self.write_to(w)
        self.path = str(path)
        return self.path

    def write_to(self, writer: PcapngWriter) -> None:
        """Add this case as one interface of an open capture (a whole-run capture)."""
        if_id = writer.add_interface(self.name)
        for t_ns, data in self.frames():
            writer.write_packet(if_id, t_ns, data)
