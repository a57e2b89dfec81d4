"""The sockets of one UET end point on real UDP: a listening socket and one socket per EV.

UET over UDP carries the entropy value (EV) in the UDP source port (ref. 1.2), and a bound
socket fixes its source port. An end point sending on many EVs therefore keeps a pool: one
socket bound to ``(ip, ev)`` per EV in use, opened on first use. Past ``max_ev_sockets``
the least recently used one is closed (``ev_socket_recycled``), so the EV is never lost
for lack of room; an EV whose port cannot be bound (taken by another socket, 0,
privileged without the right; tried once) leaves from the listening socket instead:
the EV is then lost on the wire, and ``ev_fallback`` counts it.

The sockets are non-blocking stdlib sockets: :meth:`EvSocketPool.receive_nowait` and
:meth:`EvSocketPool.send_nowait` move one datagram without waiting (what the batched loop of
:class:`uet.runtime.udp.DatagramLoop` uses: it drains everything already queued in the
kernel before it runs any timer), :meth:`~EvSocketPool.receive` / :meth:`~EvSocketPool.send`
wait with Trio when the kernel has nothing / no room.

DSCP and ECN ride in the IP TOS byte (traffic class over IPv6): every datagram is sent
with an ``IP_TOS`` / ``IPV6_TCLASS`` control message and the listening socket reports the
received byte (``IP_RECVTOS`` / ``IPV6_RECVTCLASS``), with the helpers of
:mod:`uet.conformance.udp_io`. Live mode (:mod:`uet.runtime.udp`) and ``uet serve``
(:mod:`uet.runtime.responder`) both run on this pool.

UDP checksum: over IPv4 the sockets send a zero checksum (``SO_NO_CHECK``), as UET
requires on send (ref. 8: the reference provider zeroes it, citing UE 1.0.3 3.5.10.1) and
as the codec encodes; ``udp_checksum=True`` lets the kernel compute it. This also keeps
captures on ``lo`` clean: the kernel leaves loopback checksums partially computed
(checksum offload), which a checksum-verifying dissector flags. IPv6 always has one.
"""

from __future__ import annotations

import contextlib
import socket as _socket
from collections import Counter, OrderedDict
from typing import Any

import trio

from uet.conformance.udp_io import (
    ANCILLARY,
    RCVBUF,
    enable_tos,
    family_of,
    tos_cmsg,
    tos_from,
)
from uet.wire.constants import UET_UDP_PORT

__all__ = ["EvSocketPool"]

#: Linux ``SO_NO_CHECK`` (send IPv4 UDP without a checksum); missing from Python's socket.
SO_NO_CHECK = getattr(_socket, "SO_NO_CHECK", 11)


class EvSocketPool:
    """Listening socket on ``(ip, port)`` plus one sending socket per EV.

    ``open()`` binds the listening socket (``OSError`` if the address is not usable);
    ``receive()`` returns ``(payload, src_ip, src_port, tos)`` (``receive_nowait()``: the
    same, or None when nothing is queued); ``send(payload, dst_ip, ev, tos)`` sends from the
    socket bound to ``(ip, ev)`` to ``(dst_ip, port)`` (``send_nowait``: True, False when
    the kernel refused it, None when it has no room now).
    Counters (``counters``, shared with the caller if given): ``rx_datagrams``,
    ``tx_datagrams``, ``tx_bytes``, ``tx_error``, ``ev_fallback``, ``ev_socket_recycled``.
    ``udp_checksum``: compute IPv4 UDP checksums (default: send 0, as UET asks).
    """

    def __init__(self, ip: str, port: int = UET_UDP_PORT, *, max_ev_sockets: int = 256,
                 counters: Counter[str] | None = None, udp_checksum: bool = False) -> None:
        if max_ev_sockets < 0:
            raise ValueError(f"max_ev_sockets: must be >= 0, got {max_ev_sockets}")
        self.ip = ip
        self.port = port
        self.family = family_of(ip)
        self.max_ev_sockets = max_ev_sockets
        self.udp_checksum = udp_checksum
        self.counters: Counter[str] = counters if counters is not None else Counter()
        self._rx: Any = None
        self._ev_socks: OrderedDict[int, Any] = OrderedDict()
        self._bad_evs: set[int] = set()

    # ------------------------------------------------------------------ lifecycle

    def open(self) -> None:
        """Bind the listening socket (and ask for the TOS byte of received datagrams)."""
        raw = self._socket()
        try:
            raw.setsockopt(_socket.SOL_SOCKET, _socket.SO_RCVBUF, RCVBUF)
            enable_tos(raw, self.family)
            raw.bind((self.ip, self.port))
        except OSError:
            raw.close()
            raise
        self._rx = raw

    def close(self) -> None:
        """Close every socket (the pool can be opened again)."""
        if self._rx is not None:
            self._rx.close()
            self._rx = None
        for s in self._ev_socks.values():
            s.close()
        self._ev_socks.clear()

    @property
    def ev_ports(self) -> list[int]:
        """EVs that currently have a bound socket (least recently used first)."""
        return list(self._ev_socks)

    # ------------------------------------------------------------------ I/O

    @property
    def rx_socket(self) -> Any:
        """The listening socket (to wait for readability on)."""
        return self._rx

    def receive_nowait(self) -> tuple[bytes, str, int, int] | None:
        """The next datagram already queued: ``(payload, src_ip, src_port, tos)``, or
        None."""
        try:
            data, anc, _flags, addr = self._rx.recvmsg(65536, ANCILLARY)
        except (BlockingIOError, InterruptedError):
            return None
        self.counters["rx_datagrams"] += 1
        return data, addr[0], addr[1], tos_from(anc)

    async def receive(self) -> tuple[bytes, str, int, int]:
        """Next datagram on the listening socket: ``(payload, src_ip, src_port, tos)``."""
        while True:
            got = self.receive_nowait()
            if got is not None:
                await trio.lowlevel.checkpoint()
                return got
            await trio.lowlevel.wait_readable(self._rx)

    def send_nowait(self, payload: bytes, dst_ip: str, ev: int, tos: int = 0) -> bool | None:
        """Send one datagram from source port ``ev`` with this TOS without waiting: True,
        False (counted as ``tx_error``) if the kernel refused it, None if the socket has no
        room now (send again when it is writable)."""
        sock = self.socket_for(ev)
        try:
            sock.sendmsg([payload], tos_cmsg(self.family, tos), 0, (dst_ip, self.port))
        except (BlockingIOError, InterruptedError):
            return None
        except OSError:
            self.counters["tx_error"] += 1
            return False
        self.counters["tx_datagrams"] += 1
        self.counters["tx_bytes"] += len(payload)
        return True

    async def send(self, payload: bytes, dst_ip: str, ev: int, tos: int = 0) -> bool:
        """Send one datagram from source port ``ev`` with this TOS; False (counted as
        ``tx_error``) if the kernel refused it."""
        while True:
            sent = self.send_nowait(payload, dst_ip, ev, tos)
            if sent is not None:
                return sent
            await trio.lowlevel.wait_writable(self.socket_for(ev))

    def socket_for(self, ev: int) -> Any:
        """The socket whose source port is ``ev`` (opened on first use), or the listening
        socket when that port cannot be had."""
        socks = self._ev_socks
        s = socks.get(ev)
        if s is not None:
            socks.move_to_end(ev)
            return s
        if ev == self.port:  # the listening socket has that source port already
            return self._rx
        if ev in self._bad_evs or not 0 < ev < 65536 or not self.max_ev_sockets:
            self.counters["ev_fallback"] += 1
            return self._rx
        raw = self._socket()
        try:
            raw.bind((self.ip, ev))
        except OSError:
            raw.close()
            self._bad_evs.add(ev)
            self.counters["ev_fallback"] += 1
            return self._rx
        if len(socks) >= self.max_ev_sockets:  # the least recently used EV gives way
            _old, old_sock = socks.popitem(last=False)
            old_sock.close()
            self.counters["ev_socket_recycled"] += 1
        socks[ev] = raw
        return raw

    def _socket(self) -> _socket.socket:
        raw = _socket.socket(self.family, _socket.SOCK_DGRAM)
        raw.setblocking(False)
        if self.family == _socket.AF_INET and not self.udp_checksum:
            # not Linux: the kernel computes it, which is valid UDP too
            with contextlib.suppress(OSError):
                raw.setsockopt(_socket.SOL_SOCKET, SO_NO_CHECK, 1)
        return raw
