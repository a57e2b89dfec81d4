"""Errors raised by the UET decoders (and encoder).

Every problem a decoder finds in its input is reported as a :class:`DecodeError` subclass
that names the header it was decoding, the byte offset (from the start of the buffer handed
to the decoder) where the problem sits, and a human-readable reason. Nothing else escapes
the decoders, whatever the input, so callers (a FEP, a switch, ``uet decode``) can catch one
exception type, count it and move on.
"""

from __future__ import annotations

from uet.errors import LocalError, RemoteError


class DecodeError(RemoteError):
    """A frame or UET header could not be decoded.

    ``header`` is a short header name (``"ethernet"``, ``"ipv4"``, ``"ipv6"``, ``"udp"``,
    ``"entropy"``, ``"tss"``, ``"pds"``, ``"ses"``, ``"ext"``, ``"trailer"``, ``"frame"``),
    ``offset`` the byte offset of the offending header or field, ``reason`` what is wrong.
    """

    def __init__(self, header: str, offset: int, reason: str) -> None:
        self.header = header
        self.offset = offset
        self.reason = reason
        super().__init__(f"{header} at byte {offset}: {reason}")

    def __reduce__(self):  # keep pickling (multiprocessing sweeps) working
        return (self.__class__, (self.header, self.offset, self.reason))


class TruncatedHeader(DecodeError):
    """The buffer ends before the header does."""


class UnknownType(DecodeError):
    """A type / next-header / ethertype / protocol value this decoder does not know."""


class InconsistentHeader(DecodeError):
    """Fields that contradict each other (e.g. a response opcode that does not fit the
    PDS next-header value, or a TSS header after a TSS header)."""


class BadLength(DecodeError):
    """A length field disagrees with the buffer (IP total length, UDP length, trailer)."""


class BadChecksum(DecodeError):
    """The IPv4 header checksum or a non-zero UDP checksum is wrong."""


class Unsupported(DecodeError):
    """Valid on the wire but outside what the emulator handles (IP options, fragments,
    IPv6 extension headers)."""


class EncodeError(LocalError, ValueError):
    """A record holds a value that does not fit its wire field."""
