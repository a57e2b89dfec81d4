"""How the test peer reaches the end point under test: in process, or over real UDP.

Both transports move UDP payloads (the UET part) with their addresses, EV (UDP source port)
and TOS byte, so the peer, the captures and the cases do not care which one runs:

* :class:`InProcessTransport` drives a :class:`~uet.conformance.driver.FepDriver` with a
  deterministic virtual clock. Time advances only when the peer waits: the end point's
  timers fire at their ``next_deadline`` as the clock passes them, so a 150 ms timer costs
  nothing and every run is identical.
* :class:`UdpTransport` talks to ``HOST:PORT`` over real sockets under the real clock: it
  receives on ``(peer_ip, port)`` (a UET end point answers to the UET port of the sender's
  address) and sends from one socket bound to ``(peer_ip, ev)`` per EV.
"""

from __future__ import annotations

import socket
import time
from collections import deque

from .driver import Datagram, FepDriver
from .udp_io import ANCILLARY, RCVBUF, enable_tos, family_of, tos_cmsg, tos_from

PS_PER_US = 1_000_000


class InProcessTransport:
    """The built-in end point in this process, under a virtual clock (picoseconds)."""

    virtual = True

    def __init__(self, driver: FepDriver) -> None:
        self.driver = driver
        self.now_ps = 0
        self._out: deque[Datagram] = deque()

    @property
    def dut_ip(self) -> str:
        return self.driver.ip

    def send(self, payload: bytes, src_ip: str, ev: int, tos: int) -> int:
        now = self.now_ps
        self.driver.datagram_in(now, payload, src_ip, ev, tos)
        self._collect(now)
        return now

    def _collect(self, now: int) -> None:
        self._out.extend(self.driver.datagrams_out(now))

    def next(self, deadline_ps: int) -> Datagram | None:
        """The next datagram the end point sends at or before ``deadline_ps`` (advancing
        the clock to its time), or None with the clock at ``deadline_ps``."""
        driver = self.driver
        while not self._out:
            d = driver.next_deadline()
            if d is None or d > deadline_ps:
                self.now_ps = max(self.now_ps, deadline_ps)
                return None
            self.now_ps = max(self.now_ps, d)
            driver.handle_timer(self.now_ps)
            self._collect(self.now_ps)
        return self._out.popleft()

    def close(self) -> None:
        self._out.clear()


class UdpTransport:
    """A device under test at ``(dut_ip, port)``, reached from ``peer_ips`` (the first is
    the main address; others serve cases that need a second source address)."""

    virtual = False

    def __init__(self, dut_ip: str, port: int, peer_ips: list[str]) -> None:
        self.dut_ip = dut_ip
        self.port = port
        self.family = family_of(dut_ip)
        self.peer_ips = list(peer_ips)
        self._t0 = time.monotonic_ns()
        self._rx: list[socket.socket] = []
        self._tx: dict[tuple[str, int], socket.socket] = {}
        self._pending: deque[Datagram] = deque()
        try:
            for ip in self.peer_ips:
                s = socket.socket(self.family, socket.SOCK_DGRAM)
                self._rx.append(s)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RCVBUF)
                enable_tos(s, self.family)
                s.bind((ip, port))
                s.setblocking(False)
        except OSError:
            self.close()
            raise

    @property
    def now_ps(self) -> int:
        return (time.monotonic_ns() - self._t0) * 1000

    def _sock(self, ip: str, ev: int) -> socket.socket:
        key = (ip, ev)
        s = self._tx.get(key)
        if s is not None:
            return s
        if ev == self.port and ip in self.peer_ips:
            return self._rx[self.peer_ips.index(ip)]
        s = socket.socket(self.family, socket.SOCK_DGRAM)
        try:
            s.bind((ip, ev))
        except OSError as exc:
            s.close()
            raise OSError(f"cannot send with EV {ev} from {ip}: UDP port {ev} is not "
                          f"bindable ({exc.strerror})") from None
        self._tx[key] = s
        return s

    def send(self, payload: bytes, src_ip: str, ev: int, tos: int) -> int:
        self._drain()
        s = self._sock(src_ip, ev)
        t = self.now_ps
        s.sendmsg([payload], tos_cmsg(self.family, tos), 0, (self.dut_ip, self.port))
        return t

    def _drain(self) -> None:
        """Move every datagram already queued in the kernel to ``_pending``."""
        for i, s in enumerate(self._rx):
            while True:
                try:
                    data, anc, _flags, addr = s.recvmsg(65536, ANCILLARY)
                except (BlockingIOError, InterruptedError):
                    break
                except ConnectionRefusedError:
                    continue
                self._pending.append(Datagram(self.now_ps, addr[0], self.peer_ips[i],
                                              addr[1], tos_from(anc), data))

    def next(self, deadline_ps: int) -> Datagram | None:
        import select

        while True:
            self._drain()
            if self._pending:
                return self._pending.popleft()
            left = deadline_ps - self.now_ps
            if left <= 0:
                return None
            select.select(self._rx, [], [], left / 1e12)

    def close(self) -> None:
        for s in (*self._rx, *self._tx.values()):
            s.close()
        self._rx = []
        self._tx = {}
