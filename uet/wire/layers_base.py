"""Common machinery of the UET scapy layers: the base class and the explicit error layer.

Every UET layer derives from :class:`UETLayer`. Instead of scapy's usual "guess or fall
back to Raw", a UET layer asks its ``uet_next`` rule which layer follows; the rule returns a
class, ``None`` (what follows is payload, kept as ``Raw``) or an :class:`Err` (the bytes do
not decode). An ``Err`` becomes a :class:`UETDecodeError` layer holding the undecoded bytes
and the reason, never a silent ``Raw``. The rules themselves live in ``uet.wire.layers``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from scapy.config import conf
from scapy.fields import Field, StrField
from scapy.packet import Packet


class Err(NamedTuple):
    """Why the bytes at some position cannot be decoded (kind = DecodeError subclass name)."""

    kind: str
    header: str
    reason: str


class _InfoField(Field):
    """A field that carries information but occupies no bytes on the wire."""

    def __init__(self, name: str, default: Any) -> None:
        super().__init__(name, default, fmt="B")

    def addfield(self, pkt: Packet, s: bytes, val: Any) -> bytes:
        return s

    def getfield(self, pkt: Packet, s: bytes) -> tuple[bytes, Any]:
        return s, self.default

    def i2len(self, pkt: Packet, x: Any) -> int:
        return 0

    def i2repr(self, pkt: Packet | None, x: Any) -> str:
        return repr(x)


class UETDecodeError(Packet):
    """Explicit "could not decode" layer: ``kind`` (the codec's exception class name),
    ``header``, ``offset`` (from the start of the UET data, i.e. after UDP or the entropy
    header), ``reason``, and the undecoded bytes in ``load``."""

    name = "UET decode error"
    # the fields scapy sets from fields_desc, declared for the type checker
    kind: str
    header: str
    offset: int
    reason: str
    fields_desc = [
        _InfoField("kind", ""),
        _InfoField("header", ""),
        _InfoField("offset", 0),
        _InfoField("reason", ""),
        StrField("load", b""),
    ]

    def post_dissection(self, pkt: Packet) -> None:
        # Reached through UET.dispatch_hook (no parent rule set the reason): diagnose here.
        if not self.reason and _TOP_RULE is not None:
            err = _TOP_RULE(bytes(self.load))
            if isinstance(err, Err):
                self.kind, self.header, self.reason = err
        super().post_dissection(pkt)

    def mysummary(self) -> str:
        return f"UET decode error: {self.header} at {self.offset}: {self.reason}"

    def as_exception(self):
        """The equivalent :class:`~uet.wire.errors.DecodeError`."""
        from uet.wire import errors

        cls = getattr(errors, self.kind, errors.DecodeError)
        if not (isinstance(cls, type) and issubclass(cls, errors.DecodeError)):
            cls = errors.DecodeError
        return cls(self.header, self.offset, self.reason)


class UETEmptyError(UETDecodeError):
    """:class:`UETDecodeError` for empty UET data (``UET(b"")``), where nothing is dissected."""

    fields_desc = [
        _InfoField("kind", "TruncatedHeader"),
        _InfoField("header", "pds"),
        _InfoField("offset", 0),
        _InfoField("reason", "PDS header needs at least 2 bytes, 0 left"),
        StrField("load", b""),
    ]


#: Rule for the very first UET layer (set by uet.wire.layers), used by UETDecodeError.
_TOP_RULE: Callable[[bytes], Any] | None = None


def set_top_rule(rule: Callable[[bytes], Any]) -> None:
    global _TOP_RULE
    _TOP_RULE = rule


NextRule = Callable[[Packet, bytes], "type[Packet] | Err | None"]


class UETLayer(Packet):
    """Base of all UET layers: rule-driven dissection of what follows."""

    #: ``rule(self, payload) -> class | Err | None``, installed by ``uet.wire.layers``.
    uet_next: NextRule | None = None

    def _uet_offset(self, s: bytes) -> int:
        """Offset of ``s`` (a suffix of the UET data) from the start of the UET data."""
        top: Packet = self
        under = self.underlayer
        while isinstance(under, UETLayer) and under.__class__.__name__ != "UETEntropy":
            top = under
            under = under.underlayer
        if top.__class__.__name__ == "UETEntropy":
            return len(top.original) - 4 - len(s)
        return len(top.original) - len(s)

    def do_dissect_payload(self, s: bytes) -> None:
        rule = self.__class__.uet_next
        if rule is None:
            super().do_dissect_payload(s)
            return
        try:
            nxt = rule(self, s)
        except Exception as exc:  # a rule bug must not crash dissection
            nxt = Err("DecodeError", "frame", f"internal layer error: {exc!r}")
        if nxt is None:
            if s:
                self.add_payload(conf.raw_layer(s, _internal=1, _underlayer=self))
            return
        if isinstance(nxt, Err):
            e = UETDecodeError(s, _internal=1, _underlayer=self) if s else UETDecodeError()
            e.kind, e.header, e.reason = nxt
            e.offset = self._uet_offset(s)
            self.add_payload(e)
            return
        p: Packet
        try:
            p = nxt(s, _internal=1, _underlayer=self)
        except Exception as exc:
            e = UETDecodeError(s, _internal=1, _underlayer=self)
            e.kind, e.header, e.reason = "DecodeError", "frame", f"dissector failed: {exc!r}"
            e.offset = self._uet_offset(s)
            p = e
        self.add_payload(p)

    def extract_padding(self, s: bytes) -> tuple[bytes, bytes | None]:
        return s, None
