"""NEGOTIATION control packets (ctl_type 9): what two end points tell each other when a PDC
opens (ref 2.7).

The public sources define the control type (the reference provider's header, xdp2) but not
its contents: Wireshark's dissector does not list it and the reference provider never sends
it. Our choice (``pds.negotiation``, off by default; docs/pds.md, "NEGOTIATION"): the
initiator sends one NEGOTIATION CP, in its SYN form, when it opens a PDC, before its first
request; the target answers with one NEGOTIATION CP of its own (the reply bit set). Each
carries the sender's capabilities in the 32-bit CP payload:

====== ===========================================================================
bits   field
====== ===========================================================================
31-24  ``fep_cap``: the profile bits of the sender's UET address (ref 4.8)
23-16  ``mpr``: the sender's receive window MP_RANGE / 128 (as ACK_CC's ``mpr``)
15-8   the largest request payload the sender accepts, in 64-byte units
7-4    version (1)
3      the sender's receiver side sends CCX state (ACK_CCX / NACK_CCX)
2-1    reserved (0)
0      reply: 0 from the initiator, 1 the target's answer
====== ===========================================================================

Neither side waits for it: data flows at once (0-RTT) and a lost NEGOTIATION costs nothing
but the information. What is learnt: the initiator takes the target's MP_RANGE as its peer
window (the only place it learns it when ACKs are plain 12-byte ACKs, which carry no MPR)
and both ends record the peer's ``fep_cap`` for their SES's profile checks
(:class:`~uet.pds.events.PeerNegotiated`). Version 0 (an all-zero payload: a sender with
no format of its own) is ignored; a version other than 0 or 1 is answered NACK UNEXP_EVENT
(an unsupported feature, ref 2.6).
"""

from __future__ import annotations

from dataclasses import dataclass

VERSION = 1
REPLY = 0x01
CCX = 0x08
#: payload size unit of the max-payload field
PAYLOAD_UNIT = 64


@dataclass(frozen=True, slots=True)
class Capabilities:
    """The fields of one NEGOTIATION payload."""

    fep_cap: int
    mpr: int
    max_payload: int
    ccx: bool = False
    reply: bool = False
    version: int = VERSION

    @property
    def mp_range(self) -> int:
        """The sender's receive window in PSNs (MPR x 128)."""
        return self.mpr * 128


def encode(caps: Capabilities) -> int:
    """The 32-bit CP payload for ``caps`` (fields masked to their widths)."""
    return ((caps.fep_cap & 0xFF) << 24 | (caps.mpr & 0xFF) << 16
            | (min(caps.max_payload // PAYLOAD_UNIT, 0xFF) & 0xFF) << 8
            | (caps.version & 0xF) << 4 | (CCX if caps.ccx else 0)
            | (REPLY if caps.reply else 0))


def decode(payload: int) -> Capabilities:
    """The fields of a NEGOTIATION payload (any version: the caller checks it)."""
    return Capabilities(fep_cap=payload >> 24 & 0xFF, mpr=payload >> 16 & 0xFF,
                        max_payload=(payload >> 8 & 0xFF) * PAYLOAD_UNIT,
                        ccx=bool(payload & CCX), reply=bool(payload & REPLY),
                        version=payload >> 4 & 0xF)


__all__ = ["CCX", "Capabilities", "PAYLOAD_UNIT", "REPLY", "VERSION", "decode", "encode"]
