"""IEEE 802.1Qbb priority flow control: pause frames and per-class thresholds.

A PFC frame is an Ethernet MAC control frame: destination 01:80:C2:00:00:01, ethertype
0x8808, opcode 0x0101, a class-enable vector (bit i = priority i) and eight 16-bit pause
times in quanta of 512 bit times, padded to the 60-byte minimum (the FCS is not carried).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from uet.fabric.clock import S

PFC_DST_MAC = bytes.fromhex("0180c2000001")
ETHERTYPE_MAC_CONTROL = 0x8808
OPCODE_PFC = 0x0101
PFC_FRAME_LEN = 60
ET_MAC_CONTROL = ETHERTYPE_MAC_CONTROL.to_bytes(2, "big")
QUANTUM_BITS = 512


def encode_pause(src_mac: bytes, times: dict[int, int]) -> bytes:
    """A PFC frame pausing each priority in ``times`` for that many quanta (0 = resume)."""
    vector = 0
    quanta = [0] * 8
    for prio, q in times.items():
        if not 0 <= prio < 8 or not 0 <= q <= 0xFFFF:
            raise ValueError(f"pause: priority {prio} / quanta {q} out of range")
        vector |= 1 << prio
        quanta[prio] = q
    body = PFC_DST_MAC + src_mac + ET_MAC_CONTROL + OPCODE_PFC.to_bytes(2, "big")
    body += vector.to_bytes(2, "big") + b"".join(q.to_bytes(2, "big") for q in quanta)
    return body + bytes(PFC_FRAME_LEN - len(body))


def decode_pause(data: bytes) -> dict[int, int] | None:
    """``{priority: quanta}`` of a PFC frame, or None if ``data`` is not one."""
    if len(data) < 34 or data[12:14] != ET_MAC_CONTROL:
        return None
    if int.from_bytes(data[14:16], "big") != OPCODE_PFC:
        return None
    vector = int.from_bytes(data[16:18], "big")
    return {p: int.from_bytes(data[18 + 2 * p:20 + 2 * p], "big")
            for p in range(8) if vector >> p & 1}


def quanta_ps(quanta: int, rate_bps: int) -> int:
    """Pause duration of ``quanta`` at ``rate_bps``, in picoseconds."""
    return quanta * QUANTUM_BITS * S // rate_bps


@dataclass
class PfcConfig:
    """Lossless classes and per-ingress-port thresholds (bytes buffered per class).

    A switch sends XOFF (pause ``quanta``) upstream when the bytes that came in on a port in a
    lossless class and still sit in the switch exceed ``xoff``, refreshes it while above
    ``xon``, and sends XON (quanta 0) when they fall to ``xon``. ``headroom`` is what may
    still arrive after XOFF (in-flight bytes); only beyond ``xoff + headroom`` is a frame
    dropped (``drop.pfc_headroom``), which a correct headroom never allows. ``headroom=None``
    sizes it per link: 2 x (rate x delay) + 2 x MTU + a pause frame.
    """

    classes: frozenset[int] = field(default_factory=lambda: frozenset({0}))
    xoff: int = 60_000
    xon: int = 30_000
    headroom: int | None = None
    quanta: int = 0xFFFF
    mtu: int = 9216

    def __post_init__(self) -> None:
        self.classes = frozenset(self.classes)
        if self.xon > self.xoff:
            raise ValueError(f"pfc.xon={self.xon} must be <= pfc.xoff={self.xoff}")
        if not 1 <= self.quanta <= 0xFFFF:
            raise ValueError(f"pfc.quanta={self.quanta}: allowed 1..65535")

    def headroom_for(self, rate_bps: int, delay_ps: int) -> int:
        """Headroom (bytes) for a link of this rate and one-way delay."""
        if self.headroom is not None:
            return self.headroom
        return 2 * (rate_bps * delay_ps // (8 * S)) + 2 * self.mtu + PFC_FRAME_LEN

    @classmethod
    def from_dict(cls, d: dict) -> PfcConfig:
        allowed = set(cls.__dataclass_fields__)
        bad = set(d) - allowed
        if bad:
            raise ValueError(f"pfc: unknown keys {sorted(bad)}; allowed: {sorted(allowed)}")
        kw = dict(d)
        if "classes" in kw:
            kw["classes"] = frozenset(int(c) for c in kw["classes"])
        return cls(**kw)
