"""The edge of the fabric for a host outside it: plain UET-over-UDP datagrams in and out.

A topology host marked ``external = "udp:IP:PORT"`` (live fabric only) runs no end point of
ours: its NIC's :class:`ExternalEndpoint` turns every frame the fabric delivers to it into
a datagram for the real process at ``(IP, PORT)`` (the UDP payload: UET; the frame's
source IP and source port, i.e. the EV, and its TOS byte: DSCP and ECN, CE marks
included), and every datagram that process sends to a fabric host back into a whole
Ethernet frame that the NIC transmits into the fabric like any host's, so the external
implementation meets the fabric's queues, loss, trimming and ECN. Sans-IO: the runtime
(``uet.runtime.live``) owns the sockets and calls :meth:`inject` / drains :attr:`outbox`.
"""

from __future__ import annotations

import ipaddress
import struct
from collections import Counter, deque
from collections.abc import Callable
from typing import Any

from uet.fabric.endpoint import HostContext
from uet.fabric.port import ET_IPV4, mac_bytes
from uet.wire.constants import UET_UDP_PORT

#: frames waiting to enter the fabric at an external host's NIC (beyond: dropped, counted)
MAX_QUEUED = 4096
_IP = struct.Struct("!BBHHHBBH4s4s")
_UDP = struct.Struct("!HHHH")


def parse_external(text: str) -> tuple[str, int]:
    """``"udp:IP:PORT"`` -> ``(IP, PORT)`` (IPv4); ValueError naming the form otherwise."""
    kind, _, rest = str(text).partition(":")
    ip, _, port = rest.rpartition(":")
    try:
        if kind != "udp":
            raise ValueError
        addr = ipaddress.IPv4Address(ip)
        p = int(port)
        if not 0 < p < 65536:
            raise ValueError
    except ValueError:
        raise ValueError(f"external = {text!r}: expected \"udp:IP:PORT\" with an IPv4 "
                         "address and a port 1..65535 (e.g. \"udp:127.0.0.9:4793\")") from None
    return str(addr), p


def _checksum(hdr: bytes) -> int:
    s = sum(struct.unpack("!10H", hdr))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


class ExternalEndpoint:
    """The ``FrameEndpoint`` of an external host's NIC (see the module docstring)."""

    def __init__(self, ctx: HostContext, address: tuple[str, int]) -> None:
        self.ctx = ctx
        self.ip = ctx.ip
        self.address = address
        self.mac = mac_bytes(ctx.mac)
        qos = ctx.qos
        self.control_dscps = {qos.dscp_control, qos.dscp_trimmed, qos.dscp_trimmed_lasthop}
        self.control_q: deque[bytes] = deque()
        self.data_q: deque[bytes] = deque()
        #: ``(payload, src_ip, src_port, tos)`` to send to the external process
        self.outbox: deque[tuple[bytes, str, int, int]] = deque()
        #: called after something was put in ``outbox`` (the runtime wakes its sender)
        self.on_outbox: Callable[[], None] | None = None
        self.stats: Counter[str] = Counter()

    # ------------------------------------------------------------ fabric -> external

    def receive(self, now: int, data: bytes) -> None:
        """A frame for the external host: its UDP payload goes out as a datagram."""
        if len(data) < 42 or data[12:14] != ET_IPV4 or data[23] != 17:
            self.stats["drop.not_udp_ipv4"] += 1
            return
        ihl = (data[14] & 0x0F) * 4
        udp = 14 + ihl
        ulen = struct.unpack_from("!H", data, udp + 4)[0]
        src_ip = str(ipaddress.IPv4Address(data[26:30]))
        sport = struct.unpack_from("!H", data, udp)[0]
        self.outbox.append((bytes(data[udp + 8:udp + ulen]), src_ip, sport, data[15]))
        self.stats["to_external"] += 1
        if self.on_outbox is not None:
            self.on_outbox()

    # ------------------------------------------------------------ external -> fabric

    def inject(self, payload: bytes, dst_ip: str, sport: int, tos: int,
               src_ip: str | None = None) -> bool:
        """A datagram the external process sent to fabric host ``dst_ip``: queue it as a
        frame (control class for the control and trimmed DSCPs); False if dropped."""
        if src_ip is not None and src_ip != self.ip:
            self.stats["foreign_source"] += 1  # sent from another address: ours is used
        q = self.control_q if tos >> 2 in self.control_dscps else self.data_q
        if len(q) >= MAX_QUEUED:
            self.stats["drop.edge_queue_full"] += 1
            return False
        total = 28 + len(payload)
        hdr = _IP.pack(0x45, tos, total, 0, 0x4000, 64, 17, 0,
                       ipaddress.IPv4Address(self.ip).packed,
                       ipaddress.IPv4Address(dst_ip).packed)
        hdr = hdr[:10] + struct.pack("!H", _checksum(hdr)) + hdr[12:]
        eth = mac_bytes(self.ctx.mac_of(dst_ip)) + self.mac + ET_IPV4
        q.append(eth + hdr + _UDP.pack(sport, UET_UDP_PORT, 8 + len(payload), 0) + payload)
        self.stats["from_external"] += 1
        return True

    # ------------------------------------------------------------ FrameEndpoint

    def pop_control(self, now: int) -> bytes | None:
        return self.control_q.popleft() if self.control_q else None

    def pop_data(self, now: int) -> bytes | None:
        return self.data_q.popleft() if self.data_q else None

    def next_deadline(self) -> int | None:
        return None

    def handle_timer(self, now: int) -> None:
        pass

    def __repr__(self) -> str:
        return f"ExternalEndpoint({self.ip} -> udp:{self.address[0]}:{self.address[1]})"


def external_factory(inner: Callable[[HostContext], Any],
                     externals: dict[int, tuple[str, int]]) -> Callable[[HostContext], Any]:
    """An ``endpoint_factory``: :class:`ExternalEndpoint` for the hosts in ``externals``,
    ``inner(ctx)`` for the others."""
    def factory(ctx: HostContext) -> Any:
        addr = externals.get(ctx.index)
        return inner(ctx) if addr is None else ExternalEndpoint(ctx, addr)

    return factory
