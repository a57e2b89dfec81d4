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


def resolve_host(host: str) -> str:
    """An IP address for ``host``: an address literal as it is, a host name resolved
    (``localhost`` -> 127.0.0.1; IPv4 first when the name has both, as the peer's default
    addresses are IPv4; write ``[::1]`` or an IPv6 literal for IPv6). ValueError naming
    the host if it does not resolve."""
    try:
        socket.inet_pton(family_of(host), host)
        return host
    except OSError:
        pass
    if not host or ":" in host:
        raise ValueError(f"{host!r} is not an IP address or a host name")
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_DGRAM)
    except (socket.gaierror, UnicodeError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise ValueError(f"{host!r}: cannot resolve the host name ({reason})") from None
    addrs = [str(info[4][0]) for info in infos]
    if not addrs:
        raise ValueError(f"{host!r}: the host name has no address")
    v4 = [a for a in addrs if ":" not in a]
    return (v4 or addrs)[0]


def parse_hostport(text: str, default_port: int) -> tuple[str, int]:
    """``HOST:PORT``, ``HOST``, ``[V6]:PORT`` or ``[V6]`` -> (IP address, port); HOST may
    be a name (:func:`resolve_host`). ValueError naming the text otherwise."""
    text = text.strip()
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
        if rest and not rest.startswith(":"):
            raise ValueError(f"{text!r}: expected [IPV6]:PORT")
        try:
            socket.inet_pton(socket.AF_INET6, host)
        except OSError:
            raise ValueError(f"{text!r}: {host!r} is not an IPv6 address") from None
    elif text.count(":") == 1:
        host, port = text.split(":")
    else:
        host, port = text, ""
    try:
        host = resolve_host(host)
    except ValueError as exc:
        raise ValueError(f"{text!r}: {exc}") from None
    if port == "":
        return host, default_port
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{text!r}: port must be in [1, 65535]")
    return host, int(port)
