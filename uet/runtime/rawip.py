"""Native-IP UET on real sockets: one raw IP socket per end point (ref 1.3).

UET directly over IP puts a 4-byte entropy header (the EV, 2 reserved bytes) right after
the IP header, under an IP protocol number of its own (253, RFC 3692's experimental one, by
default). Live mode sends it from a raw socket (``socket(AF_INET, SOCK_RAW, proto)``, or
``AF_INET6``) bound to the end point's address, so the kernel delivers it only the packets
of that protocol addressed to it: the kernel builds the IP header, the DSCP/ECN byte rides
in an ``IP_TOS`` / ``IPV6_TCLASS`` control message, as for UDP. A received IPv4 packet
comes with its IP header (its TOS byte is read there); an IPv6 one without (its traffic
class comes in ``IPV6_TCLASS``).

:class:`RawIpPool` has the interface of :class:`uet.runtime.sockets.EvSocketPool` the
datagram loop uses (``open``, ``close``, ``rx_socket``, ``receive_nowait``,
``send_nowait``, ``send``); ``receive_nowait`` returns the bytes after the entropy header
and the EV as the "source port", so the rest of live mode is the same code.

What it needs: raw sockets, i.e. root or ``CAP_NET_RAW`` (``open`` raises
:class:`RawIpUnavailable`, a clear one-line error, otherwise). Raw sockets see every packet
of the protocol to the bound address, including other programs' tests on the same
loopback address: bind per-process addresses (127.x.y.z), as the tests do.
"""

from __future__ import annotations

import socket as _socket
from collections import Counter
from typing import Any

import trio

from uet.conformance.udp_io import ANCILLARY, RCVBUF, enable_tos, family_of, tos_cmsg, tos_from
from uet.errors import LocalError
from uet.wire.constants import ENTROPY_HDR_LEN, UET_DEFAULT_IP_PROTO

__all__ = ["RawIpPool", "RawIpUnavailable"]


class RawIpUnavailable(LocalError, OSError):
    """Raw IP sockets cannot be opened here (not root, no CAP_NET_RAW)."""


class RawIpPool:
    """One raw IP socket of protocol ``ip_proto`` bound to ``ip`` (see the module)."""

    def __init__(self, ip: str, ip_proto: int = UET_DEFAULT_IP_PROTO, *,
                 counters: Counter[str] | None = None) -> None:
        self.ip = ip
        self.ip_proto = ip_proto
        self.family = family_of(ip)
        self.counters: Counter[str] = counters if counters is not None else Counter()
        self._sock: Any = None

    def open(self) -> None:
        try:
            sock = _socket.socket(self.family, _socket.SOCK_RAW, self.ip_proto)
        except PermissionError:
            raise RawIpUnavailable(
                f"native-ip live mode needs raw IP sockets (root or CAP_NET_RAW) to send IP "
                f"protocol {self.ip_proto}; use encap udp otherwise") from None
        try:
            sock.setblocking(False)
            sock.setsockopt(_socket.SOL_SOCKET, _socket.SO_RCVBUF, RCVBUF)
            if self.family == _socket.AF_INET6:
                enable_tos(sock, self.family)
            sock.bind((self.ip, 0))
        except OSError:
            sock.close()
            raise
        self._sock = sock

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    @property
    def rx_socket(self) -> Any:
        return self._sock

    @property
    def ev_ports(self) -> list[int]:
        return []  # one socket carries every EV (in its entropy header)

    def receive_nowait(self) -> tuple[bytes, str, int, int] | None:
        """The next packet: ``(bytes after the entropy header, src_ip, EV, tos)``, or
        None when nothing is queued (malformed packets are counted and skipped)."""
        sock = self._sock
        while True:
            try:
                data, anc, _flags, addr = sock.recvmsg(65536, ANCILLARY)
            except (BlockingIOError, InterruptedError):
                return None
            self.counters["rx_datagrams"] += 1
            if self.family == _socket.AF_INET:
                ihl = (data[0] & 0x0F) * 4 if data else 0
                if len(data) < ihl + ENTROPY_HDR_LEN or data[9] != self.ip_proto:
                    self.counters["rx_malformed"] += 1
                    continue
                tos = data[1]
                body = data[ihl:]
            else:
                tos = tos_from(anc)
                body = data
                if len(body) < ENTROPY_HDR_LEN:
                    self.counters["rx_malformed"] += 1
                    continue
            ev = body[0] << 8 | body[1]
            return bytes(body[ENTROPY_HDR_LEN:]), addr[0], ev, tos

    async def receive(self) -> tuple[bytes, str, int, int]:
        while True:
            got = self.receive_nowait()
            if got is not None:
                await trio.lowlevel.checkpoint()
                return got
            await trio.lowlevel.wait_readable(self._sock)

    def send_nowait(self, payload: bytes, dst_ip: str, ev: int, tos: int = 0) -> bool | None:
        """Send the entropy header (``ev``) + ``payload`` to ``dst_ip``: True, False
        (``tx_error``) if the kernel refused it, None if there is no room now."""
        head = bytes(((ev >> 8) & 0xFF, ev & 0xFF, 0, 0))
        try:
            self._sock.sendmsg([head, payload], tos_cmsg(self.family, tos), 0, (dst_ip, 0))
        except (BlockingIOError, InterruptedError):
            return None
        except OSError:
            self.counters["tx_error"] += 1
            return False
        self.counters["tx_datagrams"] += 1
        self.counters["tx_bytes"] += len(payload) + ENTROPY_HDR_LEN
        return True

    async def send(self, payload: bytes, dst_ip: str, ev: int, tos: int = 0) -> bool:
        while True:
            sent = self.send_nowait(payload, dst_ip, ev, tos)
            if sent is not None:
                return sent
            await trio.lowlevel.wait_writable(self._sock)
