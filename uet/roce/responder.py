"""The responder side of an RC queue pair: the expected PSN, placement of WRITE data and
SEND data, ACK coalescing and the NAKs (PSN sequence error, RNR, invalid request, remote
access error).

Sans-IO: :meth:`Responder.on_request` takes a decoded request frame and returns what to
answer (a list of ``(kind, psn, syndrome_value)`` with kind ``ack``, ``nak`` or ``rnr``),
placing its data through a narrow context: memory regions by R_Key, the QP's receive
queue, and a delivery hook.

In order (PSN = expected PSN): the packet is checked (opcode sequence, R_Key and bounds,
full-MTU first/middle packets, the DMA length at the last one, a receive buffer for a
SEND), executed exactly once and acknowledged: at once when it asks (AckReq) and otherwise
every ``ack_coalesce`` packets. Earlier PSN: a duplicate, never executed again, answered
by an ACK of the expected PSN - 1 under the same coalescing. Later PSN: go-back-N drops it
and sends one NAK "PSN sequence error" for the expected PSN until that arrives (IBTA
9.7.5.1.2); IRN keeps it (up to ``irn_window`` PSNs ahead) and NAKs each hole once.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from enum import Enum
from typing import Any

from uet.roce.config import RoceConfig
from uet.roce.constants import (
    FIRST_OPCODES,
    LAST_OPCODES,
    MIDDLE_OPCODES,
    MSN_MASK,
    ONLY_OPCODES,
    PSN_MASK,
    SEND_OPCODES,
    WRITE_OPCODES,
    NakCode,
)
from uet.roce.records import RoceFrame, psn_diff
from uet.roce.states import transition

_FIRST = frozenset(int(o) for o in FIRST_OPCODES)
_MIDDLE = frozenset(int(o) for o in MIDDLE_OPCODES)
_LAST = frozenset(int(o) for o in LAST_OPCODES)
_ONLY = frozenset(int(o) for o in ONLY_OPCODES)
_SEND = frozenset(int(o) for o in SEND_OPCODES)
_WRITE = frozenset(int(o) for o in WRITE_OPCODES)

Answer = tuple[str, int, int]  # (ack | nak | rnr, psn, syndrome value / NAK code)


class RespState(Enum):
    """Responder states: accepting, a PSN sequence NAK outstanding, an RNR NAK
    outstanding, error (after a fatal NAK)."""

    READY = "ready"
    NAK_SEQ = "nak_seq"
    RNR = "rnr"
    ERROR = "error"


RESP_TRANSITIONS: dict[RespState, frozenset[RespState]] = {
    RespState.READY: frozenset({RespState.NAK_SEQ, RespState.RNR, RespState.ERROR}),
    RespState.NAK_SEQ: frozenset({RespState.READY, RespState.RNR, RespState.ERROR}),
    RespState.RNR: frozenset({RespState.READY, RespState.ERROR}),
    RespState.ERROR: frozenset(),
}


class AutoBuffer(bytearray):
    """A receive buffer as large as the SEND that lands in it (an application that always
    has a big enough buffer posted: ``RoceConfig.auto_post_recv``)."""


class ResponderContext:
    """What a responder may touch: ``mr(rkey) -> bytearray | None`` (a registered memory
    region), ``take_recv() -> bytearray | None`` (the next posted receive buffer of this
    QP), and ``delivered(kind, psn, offset, nbytes, last, frame)`` called once per packet
    executed (kind ``write`` or ``send``; offset: the VA or the receive-buffer offset)."""

    __slots__ = ("mr", "take_recv", "delivered")

    def __init__(self, mr: Callable[[int], Any], take_recv: Callable[[], Any],
                 delivered: Callable[..., None]) -> None:
        self.mr = mr
        self.take_recv = take_recv
        self.delivered = delivered


class Responder:
    """See the module docstring. ``stats`` is the end point's counter (shared)."""

    __slots__ = ("cfg", "mtu", "epsn", "msn", "state", "ctx", "kind", "buf", "va",
                 "written", "dma_len", "since_ack", "ooo", "nak_psn", "stats", "rnr_timer")

    def __init__(self, cfg: RoceConfig, start_psn: int, ctx: ResponderContext,
                 stats: Counter[str]) -> None:
        self.cfg = cfg
        self.mtu = cfg.mtu
        self.epsn = start_psn
        self.msn = 0
        self.state = RespState.READY
        self.ctx = ctx
        self.kind: str | None = None  # message in progress: "write" / "send" / None
        self.buf: Any = None
        self.va = 0  # next byte of the message (VA for WRITE, buffer offset for SEND)
        self.written = 0
        self.dma_len = 0
        self.since_ack = 0
        self.ooo: dict[int, RoceFrame] = {}  # IRN: PSN -> frame held for in-order execution
        self.nak_psn: int | None = None  # IRN: the hole last NAKed
        self.stats = stats
        self.rnr_timer = cfg.min_rnr_timer

    def _go(self, state: RespState) -> None:
        self.state = transition(RESP_TRANSITIONS, self.state, state, "responder")

    def _ack(self, out: list[Answer]) -> None:
        self.since_ack = 0
        out.append(("ack", (self.epsn - 1) & PSN_MASK, self.msn))

    def on_request(self, now: int, f: RoceFrame) -> list[Answer]:
        """One request packet for this QP; returns the answers to send."""
        st = self.stats
        out: list[Answer] = []
        if self.state is RespState.ERROR:
            st["rx_in_error"] += 1
            return out
        psn = f.bth.psn
        d = psn_diff(psn, self.epsn)
        if d < 0:
            st["rx_duplicate"] += 1
            self.since_ack += 1
            if f.bth.ackreq or self.since_ack >= self.cfg.ack_coalesce:
                self._ack(out)
            return out
        if d > 0:
            st["rx_out_of_sequence"] += 1
            if self.cfg.irn:
                if d < self.cfg.irn_window and self.state is not RespState.RNR:
                    if psn in self.ooo:
                        st["rx_duplicate"] += 1
                    else:
                        self.ooo[psn] = f
                    if self.nak_psn != self.epsn:
                        self.nak_psn = self.epsn
                        out.append(("nak", self.epsn, int(NakCode.PSN_SEQUENCE_ERROR)))
                        st["nak_tx.PSN_SEQUENCE_ERROR"] += 1
                else:
                    st["rx_beyond_window"] += 1
            elif self.state is RespState.READY:
                self._go(RespState.NAK_SEQ)
                out.append(("nak", self.epsn, int(NakCode.PSN_SEQUENCE_ERROR)))
                st["nak_tx.PSN_SEQUENCE_ERROR"] += 1
            return out
        if not self._execute(now, f, out):
            return out
        ooo = self.ooo
        drained = False
        while ooo and self.state is RespState.READY:
            nxt = ooo.pop(self.epsn, None)
            if nxt is None:
                break
            drained = True
            if not self._execute(now, nxt, out):
                return out
        if ooo and self.state is RespState.READY and self.nak_psn != self.epsn:
            self.nak_psn = self.epsn  # IRN: the next hole, known because later PSNs are held
            out.append(("nak", self.epsn, int(NakCode.PSN_SEQUENCE_ERROR)))
            st["nak_tx.PSN_SEQUENCE_ERROR"] += 1
        elif drained and self.since_ack:
            self._ack(out)
        return out

    def _fatal(self, out: list[Answer], code: NakCode) -> bool:
        out.append(("nak", self.epsn, int(code)))
        self.stats[f"nak_tx.{code.name}"] += 1
        self.ooo.clear()
        self._go(RespState.ERROR)
        return False

    def _execute(self, now: int, f: RoceFrame, out: list[Answer]) -> bool:
        """Check and execute the expected packet; False if it was refused (NAKed)."""
        op = f.bth.opcode
        n = len(f.payload)
        starts = op in _FIRST or op in _ONLY
        ends = op in _LAST or op in _ONLY
        kind = "write" if op in _WRITE else "send" if op in _SEND else None
        if kind is None:
            return self._fatal(out, NakCode.INVALID_REQUEST)
        if starts:
            if self.kind is not None:  # a new message before the last one ended
                return self._fatal(out, NakCode.INVALID_REQUEST)
            if kind == "write":
                r = f.reth
                mr = self.ctx.mr(r.rkey) if r is not None else None
                if mr is None or r.va + r.dma_len > len(mr):
                    return self._fatal(out, NakCode.REMOTE_ACCESS_ERROR)
                self.buf, self.va, self.dma_len = mr, r.va, r.dma_len
            else:
                buf = self.ctx.take_recv()
                if buf is None:
                    self.stats["nak_tx.RNR"] += 1
                    self._go(RespState.RNR)
                    out.append(("rnr", self.epsn, self.rnr_timer))
                    return False
                self.buf, self.va, self.dma_len = buf, 0, -1
            self.written = 0
        elif self.kind != kind or not (op in _MIDDLE or op in _LAST):
            return self._fatal(out, NakCode.INVALID_REQUEST)
        if not ends and n != self.mtu:  # first and middle packets carry a full MTU
            return self._fatal(out, NakCode.INVALID_REQUEST)
        if kind == "send" and isinstance(self.buf, AutoBuffer) and self.va + n > len(self.buf):
            self.buf.extend(bytes(self.va + n - len(self.buf)))
        if self.va + n > len(self.buf) or (kind == "write" and self.written + n > self.dma_len):
            return self._fatal(out, NakCode.INVALID_REQUEST if kind == "send"
                               else NakCode.REMOTE_ACCESS_ERROR)
        if ends and kind == "write" and self.written + n != self.dma_len:
            return self._fatal(out, NakCode.INVALID_REQUEST)
        if n:
            self.buf[self.va:self.va + n] = f.payload
        self.ctx.delivered(kind, f.bth.psn, self.va, n, ends, f)
        self.va += n
        self.written += n
        self.kind = None if ends else kind
        if ends:
            self.msn = (self.msn + 1) & MSN_MASK
            self.buf = None
        self.epsn = (self.epsn + 1) & PSN_MASK
        self.stats["rx_executed"] += 1
        if self.state is not RespState.READY:
            self._go(RespState.READY)
        self.since_ack += 1
        if f.bth.ackreq or self.since_ack >= self.cfg.ack_coalesce:
            self._ack(out)
        return True
