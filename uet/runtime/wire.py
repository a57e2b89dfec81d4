"""The cables of the live fabric: whole Ethernet frames on real sockets.

Two backends carry one end of an emulated link each:

* :class:`UdpWire` (default, any user): the frame travels in VXLAN (RFC 7348) over UDP
  port 4789 between two loopback addresses, one per interface. Why VXLAN: it is the
  standard way to carry whole Ethernet frames in UDP, Wireshark and tshark decode it on
  port 4789 with no option (``eth / ip / udp 4793 / UET`` inside, and the project's
  dissector on top), and loopback UDP needs no privilege. The VNI is the link's number
  (``vxlan.vni`` filters one cable), and the outer UDP checksum is 0 (RFC 7348 5: SHOULD
  be zero).
* :class:`PacketWire` (root): the frame is sent as is on one end of a veth pair inside a
  network namespace the fabric creates (:class:`Netns`), with an ``AF_PACKET`` socket:
  real Ethernet frames, PFC pause frames (MAC control 0x8808) included, visible to
  ``tcpdump -i`` on the veth.

On both, a frame carries its FCS like on a cable: CRC-32 of the frame, 4 bytes little
endian at the end (what Wireshark's ``eth.check_fcs`` verifies). The receiving port
recomputes it and drops a mismatch as ``drop.fcs``: so a corrupting channel
(``impairments.corrupt``) works across the wire, the bad bits are on the wire, and the
check is the one a real receiver does.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import struct
import subprocess
import zlib
from collections import deque
from collections.abc import Iterator
from typing import Any

from uet.errors import LocalError

VXLAN_PORT = 4789
#: the VXLAN flags byte with the I bit (a valid VNI follows)
VXLAN_I = 0x08
#: Linux socket options missing from Python's socket module
SO_NO_CHECK = getattr(socket, "SO_NO_CHECK", 11)
SO_RCVBUFFORCE = getattr(socket, "SO_RCVBUFFORCE", 33)
SO_SNDBUFFORCE = getattr(socket, "SO_SNDBUFFORCE", 32)
SO_RXQ_OVFL = getattr(socket, "SO_RXQ_OVFL", 40)
ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_IGNORE_OUTGOING = 23
#: kernel buffer per wire socket: a few hundred full frames of backlog
BUFFER = 4 << 20
MAX_FRAME = 65536

_FCS = struct.Struct("<I")


class LiveError(LocalError, RuntimeError):
    """What the live fabric cannot do here (one line: what and why): no root for veth, a
    loopback address already taken. Defined here, with no Trio import, so that
    command-line code can catch it cheaply."""


def with_fcs(frame: bytes, fcs: int | None = None) -> bytes:
    """``frame`` followed by its FCS (or the given one: a corrupted frame keeps the good
    frame's, so the receiver finds the mismatch)."""
    return frame + _FCS.pack(zlib.crc32(frame) if fcs is None else fcs)


def check_fcs(data: bytes) -> tuple[bytes, bool]:
    """Split a received frame into ``(frame, fcs_ok)``."""
    frame = data[:-4]
    return frame, len(data) >= 4 and _FCS.unpack_from(data, len(data) - 4)[0] == \
        zlib.crc32(frame)


def vxlan_header(vni: int) -> bytes:
    """The 8-byte VXLAN header: flags (I), 24 reserved bits, VNI, 8 reserved bits."""
    if not 0 <= vni < 1 << 24:
        raise ValueError(f"VXLAN VNI {vni}: must be 0..16777215")
    return struct.pack("!B3xI", VXLAN_I, vni << 8)


def _buffers(sock: socket.socket) -> None:
    for force, plain in ((SO_RCVBUFFORCE, socket.SO_RCVBUF), (SO_SNDBUFFORCE,
                                                              socket.SO_SNDBUF)):
        try:
            sock.setsockopt(socket.SOL_SOCKET, force, BUFFER)
        except OSError:  # not root: as much as net.core.*mem_max allows
            sock.setsockopt(socket.SOL_SOCKET, plain, BUFFER)
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, SO_RXQ_OVFL, 1)


class Wire:
    """One end of a cable: ``send(frame)`` and ``recv_ready()`` (frames waiting now).

    Counters: ``tx``, ``rx``, ``tx_error`` (the kernel refused a frame: it is lost, as a
    frame a full transmit ring would drop), ``rx_bad`` (not a frame of this cable),
    ``kernel_drops`` (frames the kernel dropped for a full receive buffer, from
    ``SO_RXQ_OVFL``: the process fell behind).
    """

    sock: socket.socket
    #: what goes on the socket before each frame (the VXLAN header; nothing on a veth)
    hdr = b""

    def __init__(self) -> None:
        #: ``(emulated time, length)`` of each frame sent, read by the far end's node
        self.stamps: deque[tuple[int, int]] = deque()
        #: the wire at the other end of the cable
        self.peer: Wire | None = None
        self.tx = 0
        self.rx = 0
        self.tx_error = 0
        self.rx_bad = 0
        self.kernel_drops = 0

    def _open(self, sock: socket.socket, setup: Any) -> None:
        """Big buffers, ``setup()`` (options, bind), non-blocking; closed on failure."""
        try:
            _buffers(sock)
            setup()
        except OSError:
            sock.close()
            raise
        sock.setblocking(False)
        self.sock = sock
        self._anc = socket.CMSG_SPACE(4)

    def send(self, frame: bytes) -> bool:
        """Put ``frame`` on the wire; False (counted in ``tx_error``) if the kernel refused
        it."""
        try:
            self.sock.send(self.hdr + frame)
        except OSError:
            self.tx_error += 1
            return False
        self.tx += 1
        return True

    def fileno(self) -> int:
        return self.sock.fileno()

    def close(self) -> None:
        self.sock.close()

    def _overflow(self, anc: list[tuple[int, int, bytes]]) -> None:
        for level, kind, data in anc:
            if level == socket.SOL_SOCKET and kind == SO_RXQ_OVFL and len(data) >= 4:
                self.kernel_drops = struct.unpack_from("=I", data)[0]

    def counters(self) -> dict[str, int]:
        return {"tx": self.tx, "rx": self.rx, "tx_error": self.tx_error,
                "rx_bad": self.rx_bad, "kernel_drops": self.kernel_drops}


class UdpWire(Wire):
    """A cable end on loopback: UDP ``(ip, 4789)`` connected to the far end's address,
    frames in VXLAN with ``vni``."""

    kind = "udp"

    def __init__(self, ip: str, peer_ip: str, vni: int, port: int = VXLAN_PORT) -> None:
        super().__init__()
        self.ip, self.peer_ip, self.vni, self.port = ip, peer_ip, vni, port
        self.hdr = vxlan_header(vni)
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)

        def setup() -> None:
            sock.setsockopt(socket.SOL_SOCKET, SO_NO_CHECK, 1)
            sock.bind((ip, port))
            sock.connect((peer_ip, port))

        self._open(sock, setup)

    def recv_ready(self) -> Iterator[bytes]:
        """Frames (with FCS) waiting in the socket now, VXLAN header checked and removed."""
        sock, hdr = self.sock, self.hdr
        while True:
            try:
                data, anc, _flags, _addr = sock.recvmsg(MAX_FRAME, self._anc)
            except (BlockingIOError, InterruptedError):
                return
            except ConnectionRefusedError:  # the far end's socket is gone (shutting down)
                continue
            if anc:
                self._overflow(anc)
            if data[:8] != hdr:
                self.rx_bad += 1
                continue
            self.rx += 1
            yield data[8:]


class PacketWire(Wire):
    """A cable end on a veth interface: an ``AF_PACKET`` socket bound to ``ifname``
    (opened inside ``netns``), frames as they are (FCS included)."""

    kind = "veth"

    def __init__(self, ifname: str, netns: Netns) -> None:
        super().__init__()
        self.ifname = ifname
        with netns.entered():
            sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))

        def setup() -> None:
            sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
            sock.bind((ifname, 0))

        self._open(sock, setup)

    def recv_ready(self) -> Iterator[bytes]:
        sock = self.sock
        while True:
            try:
                data, anc, _flags, addr = sock.recvmsg(MAX_FRAME, self._anc)
            except (BlockingIOError, InterruptedError):
                return
            if anc:
                self._overflow(anc)
            if addr[2] == socket.PACKET_OUTGOING:  # kernels without IGNORE_OUTGOING
                continue
            self.rx += 1
            yield data


CLONE_NEWNET = 0x40000000


def _setns(fd: int) -> None:
    """setns(2) into a network namespace (``os.setns`` exists only from Python 3.12)."""
    fn = getattr(os, "setns", None)
    if fn is not None:
        fn(fd, CLONE_NEWNET)
        return
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


class Netns:
    """A network namespace of veth pairs, created on ``open`` and deleted on ``close``.

    ``name`` must be unique on the machine (the live fabric derives it from its pid and a
    counter). IPv6 is off in it so the kernel sends nothing of its own on the veths
    (router solicitations, DAD), and the MTU fits a full UET frame plus FCS.
    """

    MTU = 9000

    def __init__(self, name: str) -> None:
        self.name = name
        self.fd: int | None = None
        self.pairs: list[tuple[str, str]] = []

    @staticmethod
    def available() -> str | None:
        """None if this process can create namespaces and veths, else why not."""
        if os.geteuid() != 0:
            return "the veth backend needs root (network namespaces and AF_PACKET sockets)"
        try:
            subprocess.run(["ip", "-V"], capture_output=True, check=True)
        except (OSError, subprocess.CalledProcessError):
            return "the veth backend needs the ip command (iproute2)"
        return None

    def _ip(self, *args: str, batch: str | None = None) -> None:
        cmd = ["ip", *args] if batch is None else ["ip", "-n", self.name, "-batch", "-"]
        r = subprocess.run(cmd, input=batch, capture_output=True, text=True)
        if r.returncode:
            raise OSError(errno.EIO, f"{' '.join(cmd)}: {r.stderr.strip()}")

    def open(self, pairs: list[tuple[str, str]]) -> None:
        """Create the namespace and the veth pairs ``[(end_a, end_b), ...]``, all up."""
        why = self.available()
        if why is not None:
            raise OSError(errno.EPERM, why)
        self._ip("netns", "add", self.name)
        try:
            with open(f"/run/netns/{self.name}") as f:
                self.fd = os.dup(f.fileno())
            with self.entered():
                for key in ("all", "default"):
                    with open(f"/proc/sys/net/ipv6/conf/{key}/disable_ipv6", "w") as f:
                        f.write("1")
            lines = []
            for a, b in pairs:
                lines.append(f"link add {a} mtu {self.MTU} type veth peer name {b} mtu "
                             f"{self.MTU}")
            for a, b in pairs:
                lines += [f"link set {a} up", f"link set {b} up"]
            if lines:
                self._ip(batch="\n".join(lines) + "\n")
            self.pairs = list(pairs)
        except BaseException:
            self.close()
            raise

    @contextlib.contextmanager
    def entered(self) -> Iterator[None]:
        """Run the block with this thread in the namespace (sockets opened there stay)."""
        assert self.fd is not None, "namespace not open"
        with open("/proc/self/ns/net") as here:
            back = os.dup(here.fileno())
        try:
            _setns(self.fd)
            yield
        finally:
            _setns(back)
            os.close(back)

    def close(self) -> None:
        """Delete the namespace (its veths go with it)."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        subprocess.run(["ip", "netns", "delete", self.name], capture_output=True)


def describe(wire: Any) -> str:
    """``udp 127.x.y.z:4789 -> ...`` or ``veth NAME`` (for reports)."""
    if isinstance(wire, UdpWire):
        return f"udp {wire.ip}:{wire.port} -> {wire.peer_ip}:{wire.port} vni {wire.vni}"
    return f"veth {wire.ifname}"
