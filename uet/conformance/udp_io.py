"""Socket details shared by the responder and the UDP test peer.

UET over UDP carries the EV in the UDP source port (ref. 1.2), so a sender keeps one socket
bound per EV it uses; DSCP and ECN ride in the IP TOS byte, which plain ``sendto`` /
``recvfrom`` neither set per datagram nor report. These helpers send with an ``IP_TOS``
(``IPV6_TCLASS``) control message and receive with ``IP_RECVTOS`` (``IPV6_RECVTCLASS``), so
trimmed-packet and ECN cases work over real sockets too.
"""

from __future__ import annotations

import socket

#: ``setsockopt`` constants missing from some Python builds (Linux values).
IP_RECVTOS = getattr(socket, "IP_RECVTOS", 13)
IPV6_RECVTCLASS = getattr(socket, "IPV6_RECVTCLASS", 66)
IPV6_TCLASS = getattr(socket, "IPV6_TCLASS", 67)
ANCILLARY = socket.CMSG_SPACE(4)
RCVBUF = 8 << 20


def family_of(ip: str) -> int:
    return socket.AF_INET6 if ":" in ip else socket.AF_INET


def enable_tos(sock: socket.socket, family: int) -> None:
    """Ask the kernel to report the TOS / traffic class of every received datagram."""
    if family == socket.AF_INET6:
        sock.setsockopt(socket.IPPROTO_IPV6, IPV6_RECVTCLASS, 1)
    else:
        sock.setsockopt(socket.IPPROTO_IP, IP_RECVTOS, 1)


def tos_cmsg(family: int, tos: int) -> list[tuple[int, int, bytes]]:
    """The control message that sets this datagram's TOS / traffic class."""
    if family == socket.AF_INET6:
        return [(socket.IPPROTO_IPV6, IPV6_TCLASS, int(tos).to_bytes(4, "little"))]
    return [(socket.IPPROTO_IP, socket.IP_TOS, bytes([tos & 0xFF]))]


def tos_from(ancdata: list[tuple[int, int, bytes]]) -> int:
    """TOS byte from ``recvmsg`` ancillary data (0 when absent)."""
    for level, kind, data in ancdata:
        if (level == socket.IPPROTO_IP and kind == socket.IP_TOS and data) or (
                level == socket.IPPROTO_IPV6 and kind == IPV6_TCLASS and data):
            return int.from_bytes(data[:4], "little") & 0xFF if len(data) >= 4 else data[0]
    return 0


def parse_hostport(text: str, default_port: int) -> tuple[str, int]:
    """``HOST:PORT``, ``HOST``, ``[V6]:PORT`` or ``[V6]`` -> (host, port); ValueError naming
    the text otherwise."""
    text = text.strip()
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
        if rest and not rest.startswith(":"):
            raise ValueError(f"{text!r}: expected [IPV6]:PORT")
    elif text.count(":") == 1:
        host, port = text.split(":")
    elif ":" in text:
        host, port = text, ""
    else:
        host, port = text, ""
    try:
        socket.inet_pton(family_of(host), host)
    except OSError:
        raise ValueError(f"{text!r}: {host!r} is not an IP address") from None
    if port == "":
        return host, default_port
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{text!r}: port must be in [1, 65535]")
    return host, int(port)
