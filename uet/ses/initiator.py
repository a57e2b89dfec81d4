"""Initiator side of the SES: operations -> request packets, responses -> completions.

Every public method checks the local profile and, when known, the peer's (``fep_cap``, set
with :meth:`Initiator.set_peer_cap`) and raises :class:`~uet.profiles.ProfileError` at once
if either refuses. Otherwise it returns an :class:`Operation` and queues its packets on the
end point (``SesEndpoint.poll_transmit``). The driver feeds back the PDS events with
:meth:`Initiator.on_response` and :meth:`Initiator.on_failed`; read data sent in the return
direction arrives through ``Target.handle``.

Every operation ends: the PDS fails a message it cannot deliver (``on_failed``), and what
waits on the peer beyond the PDS has a timeout (:meth:`Initiator.expire`): read data that
stops arriving (``ses.reassembly_timeout_ms``: the target's return-direction PDC may have
failed), a rendezvous exposure the target never reads and a deferred send never asked to
restart (``ses.unexpected_timeout_ms``); each fails UNDELIVERABLE with the reason, counted
``op_timeout.<what>``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from uet.profiles import RUDI_OPCODES
from uet.ses import atomics
from uet.ses.deferrable import TokenAllocator, join_token, split_token
from uet.ses.errors import OperationResult, SesError
from uet.ses.headers import Req, choose_header, single_header
from uet.ses.memory import Perm
from uet.ses.messages import OpCompleted, OutMessage, OutPacket, PacketRef, TargetAddr
from uet.ses.reassembly import Intervals
from uet.ses.rendezvous import RENDEZVOUS_KEY_BASE, Exposure
from uet.ses.segmentation import Segmenter
from uet.wire.constants import (
    AtomicOpcode,
    DeliveryMode,
    NextHeader,
    RspList,
    RspOpcode,
    SesFlag,
    SesOpcode,
)
from uet.wire.constants import ReturnCode as Rc
from uet.wire.records import (
    AtomicExt,
    CasExt,
    ExtHeader,
    RendezvousExt,
    SesResponse,
    SesResponseData,
    SesResponseDataSmall,
    SesStandard,
)

if TYPE_CHECKING:
    from uet.ses.context import SesContext


class OpState(StrEnum):
    PENDING = "pending"
    DEFERRED = "deferred"  # deferrable send waiting for the target's ready-to-restart
    DONE = "done"
    FAILED = "failed"


_FINAL = (OpState.DONE, OpState.FAILED)


@dataclass(eq=False)
class Operation:
    """One initiator operation and its completion state.

    ``data``: the read buffer (READ) or the fetched value's big-endian bytes (fetching
    atomics). ``value``: the fetched value decoded per the datatype. ``return_code``: None
    while pending. Use :meth:`result` to get an :class:`OperationResult` or the
    :class:`SesError`.
    """

    op_id: int
    opcode: SesOpcode
    target: TargetAddr
    mode: DeliveryMode
    length: int
    tc: int = 0
    state: OpState = OpState.PENDING
    return_code: int | None = None
    modified_length: int = 0
    rsp_list: int = RspList.EXPECTED
    data: bytearray = field(default_factory=bytearray)
    value: Any = None
    reason: str | None = None
    attempt: int = 0
    packets: int = 0
    internal: bool = False
    atomic: tuple[int, int] | None = None
    message_ids: list[int] = field(default_factory=list)
    # private progress state
    _ok: bool = False
    _got_data: bool = False
    _read: Intervals | None = None
    _exposure: Exposure | None = None
    _init_token: int = 0
    _target_token: int = 0
    _rebuild: Callable[[], None] | None = None
    _on_data: Callable[[int, bytes], None] | None = None
    _on_done: Callable[[Operation], None] | None = None
    _last: int = 0  # latest sign of life from the peer while it waits (ps)
    _waits: str = ""  # what it waits for beyond the PDS: "data", "rendezvous", "deferred"

    @property
    def done(self) -> bool:
        return self.state in _FINAL  # a module tuple: checked after every frame

    def result(self) -> OperationResult:
        """The result of a completed operation; raises :class:`SesError` if it failed."""
        if self.state == OpState.FAILED:
            raise SesError(self.return_code or Rc.UNDELIVERABLE, self.opcode.name, self.reason)
        if self.state != OpState.DONE:
            raise RuntimeError(f"{self.opcode.name} operation {self.op_id} is still "
                               f"{self.state.value}")
        return OperationResult(Rc.OK, self.modified_length, bytes(self.data), self.value,
                               self.rsp_list)


_FETCHING = frozenset({SesOpcode.FETCHING_ATOMIC, SesOpcode.TSEND_FETCH_ATOMIC})


class Initiator:
    """Builds request packets for operations and completes them from responses."""

    def __init__(self, ep: SesContext) -> None:
        self.ep = ep
        self.ops: dict[int, Operation] = {}
        self.peer_caps: dict[str, int] = {}
        self._next_op = 1
        self._next_mid: dict[int, int] = {}
        self._by_mid: dict[tuple[int, int], Operation] = {}
        self._tokens = TokenAllocator()
        self._deferred: dict[tuple[int, int], Operation] = {}
        self._next_key = 0
        #: operations waiting on the peer beyond the PDS (their timeouts: expire())
        self._waiting: dict[int, Operation] = {}

    # ------------------------------------------------------------------ public API

    def set_peer_cap(self, dst: str, fep_cap: int) -> None:
        """Record the ``fep_cap`` a peer advertises (from its UET address)."""
        self.peer_caps[dst] = int(fep_cap)

    def send(self, tgt: TargetAddr, data: bytes, *, header_data: int | None = None,
             mode: DeliveryMode | None = None, tc: int = 0, dc: bool = False) -> Operation:
        """SEND: untagged two-sided message."""
        return self._two_sided(SesOpcode.SEND, tgt, data, 0, header_data, mode, tc, dc)

    def tagged_send(self, tgt: TargetAddr, data: bytes, match_bits: int, *,
                    header_data: int | None = None, mode: DeliveryMode | None = None,
                    tc: int = 0, dc: bool = False) -> Operation:
        """TAGGED_SEND: matched against tagged receives by ``match_bits``."""
        return self._two_sided(SesOpcode.TAGGED_SEND, tgt, data, match_bits, header_data, mode,
                               tc, dc)

    def deferrable_send(self, tgt: TargetAddr, data: bytes, *, match_bits: int | None = None,
                        header_data: int | None = None, mode: DeliveryMode | None = None,
                        tc: int = 0, dc: bool = False) -> Operation:
        """DEFERRABLE_SEND (or DEFERRABLE_TSEND with ``match_bits``)."""
        opcode = (SesOpcode.DEFERRABLE_SEND if match_bits is None
                  else SesOpcode.DEFERRABLE_TSEND)
        mode = self._check(opcode, tgt, mode)
        self._check_size(opcode, len(data))
        op = self._new_op(opcode, tgt, mode, len(data), tc)
        op._init_token = self._tokens.allocate()
        self._deferred[(tgt.job_id, op._init_token)] = op

        def build() -> None:
            self._emit(op, opcode, payload=data, request_length=len(data),
                       memory_key=match_bits or 0, header_data=header_data,
                       buffer_offset=join_token(op._init_token, op._target_token), dc=dc,
                       optimized=False)

        op._rebuild = build
        build()
        return op

    def rendezvous_send(self, tgt: TargetAddr, data: bytes, *, match_bits: int | None = None,
                        header_data: int | None = None, mode: DeliveryMode | None = None,
                        tc: int = 0, dc: bool = False) -> Operation:
        """RENDEZVOUS_SEND (or RENDEZVOUS_TSEND with ``match_bits``): eager part + target read."""
        opcode = (SesOpcode.RENDEZVOUS_SEND if match_bits is None
                  else SesOpcode.RENDEZVOUS_TSEND)
        mode = self._check(opcode, tgt, mode)
        self._check_size(opcode, len(data))
        eager = min(len(data), self.ep.profile.ses.rendezvous_eager_bytes)
        op = self._new_op(opcode, tgt, mode, len(data), tc)
        rest = bytes(data[eager:])
        ep = self.ep
        res = ep.resources.register(tgt.job_id, ep.pid_on_fep, ep.rendezvous_index)
        key = self._alloc_key()
        exp = Exposure(tgt.job_id, ep.pid_on_fep, ep.rendezvous_index, key, len(rest))
        if rest:
            mr = ep.resources.add_region(tgt.job_id, ep.pid_on_fep, ep.rendezvous_index, key,
                                         bytearray(rest), Perm.READ)

            def served(offset: int, length: int) -> None:
                exp.served.add(offset, offset + length)
                op._last = self.ep.now
                self._progress(op)

            mr.on_read = served
        op._exposure = exp
        ext = RendezvousExt(eager_length=eager, ri_generation=res.generation,
                            pid_on_fep=ep.pid_on_fep, resource_index=ep.rendezvous_index,
                            read_offset=0, read_memory_key=key)
        self._emit(op, opcode, payload=bytes(data[:eager]), request_length=len(data),
                   memory_key=match_bits or 0, header_data=header_data, ext=ext, dc=dc,
                   optimized=False)
        return op

    def datagram_send(self, tgt: TargetAddr, data: bytes, *, header_data: int | None = None,
                      tc: int = 0) -> Operation:
        """DATAGRAM_SEND over UUD: one packet, no response; done once queued."""
        opcode = SesOpcode.DATAGRAM_SEND
        self._check(opcode, tgt, DeliveryMode.UUD)
        if len(data) > self.ep.profile.ses.mtu_payload:
            raise SesError(Rc.TOO_LONG, f"DATAGRAM_SEND of {len(data)} bytes exceeds one packet "
                           f"(ses.mtu_payload {self.ep.profile.ses.mtu_payload})")
        op = self._new_op(opcode, tgt, DeliveryMode.UUD, len(data), tc)
        self._emit(op, opcode, payload=data, request_length=len(data), header_data=header_data)
        self._complete(op)
        return op

    def write(self, tgt: TargetAddr, memory_key: int, offset: int, data: bytes, *,
              header_data: int | None = None, mode: DeliveryMode | None = None, tc: int = 0,
              dc: bool = False, absolute: bool = False) -> Operation:
        """WRITE ``data`` at ``offset`` of the region ``memory_key``."""
        opcode = SesOpcode.WRITE
        mode = self._check(opcode, tgt, mode)
        self._check_size(opcode, len(data))
        op = self._new_op(opcode, tgt, mode, len(data), tc)
        self._emit(op, opcode, payload=data, request_length=len(data), memory_key=memory_key,
                   buffer_offset=offset, header_data=header_data, dc=dc, absolute=absolute)
        return op

    def read(self, tgt: TargetAddr, memory_key: int, offset: int, length: int, *,
             mode: DeliveryMode | None = None, tc: int = 0, absolute: bool = False) -> Operation:
        """READ ``length`` bytes; the data lands in ``op.data``."""
        return self._read(tgt, memory_key, offset, length, mode, tc, absolute)

    def atomic(self, tgt: TargetAddr, memory_key: int, offset: int, opcode: AtomicOpcode,
               datatype: int, operand: Any = None, *, compare: Any = None, mask: Any = None,
               fetch: bool = False, mode: DeliveryMode | None = None, tc: int = 0,
               absolute: bool = False) -> Operation:
        """ATOMIC / FETCHING_ATOMIC on one element at ``offset``.

        ``operand``: the value (or swap value for CSWAP/MSWAP), a Python number or raw
        big-endian bytes; ``compare``: CSWAP compare value; ``mask``: MSWAP mask.
        """
        sesop = SesOpcode.FETCHING_ATOMIC if fetch else SesOpcode.ATOMIC
        mode = self._check(sesop, tgt, mode, atomic=(opcode, datatype))
        payload, ext, rlen = self._atomic_operands(opcode, datatype, operand, compare, mask)
        op = self._new_op(sesop, tgt, mode, rlen, tc)
        op.atomic = (int(opcode), int(datatype))
        self._emit(op, sesop, payload=payload, request_length=rlen, memory_key=memory_key,
                   buffer_offset=offset, ext=ext, absolute=absolute)
        return op

    def tagged_atomic(self, tgt: TargetAddr, match_bits: int, opcode: AtomicOpcode,
                      datatype: int, operand: Any = None, *, compare: Any = None,
                      mask: Any = None, fetch: bool = False, offset: int = 0,
                      mode: DeliveryMode | None = None, tc: int = 0) -> Operation:
        """TSEND_ATOMIC / TSEND_FETCH_ATOMIC: the atomic applies to a matched tagged receive's
        buffer at ``offset``."""
        sesop = SesOpcode.TSEND_FETCH_ATOMIC if fetch else SesOpcode.TSEND_ATOMIC
        mode = self._check(sesop, tgt, mode, atomic=(opcode, datatype))
        payload, ext, rlen = self._atomic_operands(opcode, datatype, operand, compare, mask)
        op = self._new_op(sesop, tgt, mode, rlen, tc)
        op.atomic = (int(opcode), int(datatype))
        self._emit(op, sesop, payload=payload, request_length=rlen, memory_key=match_bits,
                   buffer_offset=offset, ext=ext)
        return op

    def no_op(self, tgt: TargetAddr, *, mode: DeliveryMode | None = None,
              tc: int = 0) -> Operation:
        """NO_OP: a request the target only acknowledges."""
        mode = self._check(SesOpcode.NO_OP, tgt, mode)
        op = self._new_op(SesOpcode.NO_OP, tgt, mode, 0, tc)
        self._emit(op, SesOpcode.NO_OP, payload=b"", request_length=0, optimized=False)
        return op

    def msg_error(self, victim: Operation) -> Operation:
        """MSG_ERROR: abandon an in-progress message; the target drops what it has of it and
        the abandoned operation fails with CANCELLED."""
        mode = self._check(SesOpcode.MSG_ERROR, victim.target, victim.mode)
        op = self._new_op(SesOpcode.MSG_ERROR, victim.target, mode, 0, victim.tc)
        op.internal = True
        if victim.message_ids:
            base = self._base(op, SesOpcode.MSG_ERROR, request_length=0)
            base.message_id = victim.message_ids[-1]
            base.flags |= SesFlag.SOM | SesFlag.EOM
            self._queue(op, [(base, b"")], None)
        else:
            self._complete(op)
        if not victim.done:
            self._fail(victim, Rc.CANCELLED, "abandoned with MSG_ERROR")
        return op

    # ------------------------------------------------------------------ PDS events

    def on_response(self, ref: PacketRef, ses: Any, payload: bytes = b"", *,
                    now: int = 0) -> None:
        """A response (from an ACK or a RUDI response) to one of our request packets."""
        self.ep.now = now
        op = self.ops.get(ref.op_id) if isinstance(ref, PacketRef) else None
        if op is None or op.done or ref.attempt != op.attempt:
            return
        if isinstance(ses, SesResponse):
            if ses.opcode in (RspOpcode.DEFAULT_RESPONSE, RspOpcode.NO_RESPONSE):
                return
            if ses.return_code != Rc.OK:
                self._error(op, ses.return_code)
                return
            op._ok = True
            op.modified_length = ses.modified_length
            op.rsp_list = ses.list
            self._progress(op)
            if not op.done:  # acknowledged: what is left comes from the peer, not the PDS
                self._wait(op, now, "data" if op.opcode == SesOpcode.READ else "rendezvous")
        elif isinstance(ses, (SesResponseData, SesResponseDataSmall)):
            if ses.return_code != Rc.OK:
                self._error(op, ses.return_code)
                return
            offset = ses.message_offset if isinstance(ses, SesResponseData) else 0
            self._data(op, offset, payload)

    def on_failed(self, ref: PacketRef, reason: str, *, now: int = 0) -> None:
        """The PDS gave up on a packet (``MessageFailed``): the operation fails UNDELIVERABLE.

        A multi-packet RUD/ROD message is then abandoned at the target with MSG_ERROR (RUDI
        cannot carry MSG_ERROR: a partial idempotent write needs no undoing).
        """
        self.ep.now = now
        op = self.ops.get(ref.op_id) if isinstance(ref, PacketRef) else None
        if op is None or op.done or ref.attempt != op.attempt:
            return
        self._fail(op, Rc.UNDELIVERABLE, reason)
        if (op.packets > 1 and op.message_ids and not op.internal
                and op.mode in (DeliveryMode.RUD, DeliveryMode.ROD)
                and SesOpcode.MSG_ERROR in self.ep.profile.operations):
            self.msg_error(op)

    def on_return_data(self, src: str, ses: Any, payload: bytes, *, now: int = 0) -> bool:
        """Read data the target sent in the return direction (an RSP_DATA in a request).

        Matched by (job, read_request_message_id); returns whether it matched an operation.
        """
        if not isinstance(ses, SesResponseData):
            self.ep.counters["return_data_unmatched"] += 1
            return False
        op = self._by_mid.get((ses.job_id, ses.read_request_message_id))
        if op is None or op.done or op.target.dst != src or op.opcode != SesOpcode.READ:
            self.ep.counters["return_data_unmatched"] += 1
            return False
        if ses.return_code != Rc.OK:
            self._error(op, ses.return_code)
        else:
            self._data(op, ses.message_offset, payload)
        return True

    def on_rtr(self, src: str, req: Req) -> int:
        """A DEFERRABLE_RTR from a target: restart the deferred send it names."""
        init_token, target_token = split_token(req.memory_key)
        op = self._deferred.get((req.job_id, init_token))
        if op is None or op.done or op.target.dst != src:
            return Rc.NO_MATCH
        if op._target_token == target_token:
            return Rc.OK  # duplicate RTR: already restarted
        op._target_token = target_token
        op.attempt += 1
        op.state = OpState.PENDING
        self._waiting.pop(op.op_id, None)  # the restart travels through the PDS
        op._ok = False
        self.ep.counters["deferrable_restarts"] += 1
        assert op._rebuild is not None  # every deferrable send has one
        op._rebuild()
        return Rc.OK

    # ------------------------------------------------------------------ timeouts

    def _wait(self, op: Operation, now: int, what: str) -> None:
        """``op`` now waits on the peer beyond the PDS (read data, a rendezvous pull, a
        restart request): its timeout starts."""
        op._waits = what
        op._last = now
        self._waiting[op.op_id] = op
        t = self.ep.timeouts
        self.ep.arm(now + (t.reassembly_ps if what == "data" else t.unexpected_ps))

    def expire(self, now: int) -> int | None:
        """Fail the waiting operations whose peer fell silent; the next deadline or None."""
        t = self.ep.timeouts
        nxt: int | None = None
        for op in list(self._waiting.values()):
            if op.done:
                self._waiting.pop(op.op_id, None)
                continue
            limit = t.reassembly_ps if op._waits == "data" else t.unexpected_ps
            if now - op._last < limit:
                d = op._last + limit
                nxt = d if nxt is None or d < nxt else nxt
                continue
            self.ep.counters[f"op_timeout.{op._waits}"] += 1
            name = {"data": "ses.reassembly_timeout_ms",
                    "rendezvous": "ses.unexpected_timeout_ms",
                    "deferred": "ses.unexpected_timeout_ms"}[op._waits]
            what = {"data": "read data stopped arriving",
                    "rendezvous": "the target never read the rendezvous data",
                    "deferred": "the target never asked for the deferred send"}[op._waits]
            self._fail(op, Rc.UNDELIVERABLE, f"{what} ({name} = {limit // 10**9})")
        return nxt

    # ------------------------------------------------------------------ used by the target

    def internal_read(self, tgt: TargetAddr, memory_key: int, offset: int, length: int,
                      mode: DeliveryMode, on_data: Callable[[int, bytes], None],
                      on_done: Callable[[Operation], None]) -> Operation:
        """A READ the target side issues (rendezvous pull); data goes to ``on_data``."""
        op = self._read(tgt, memory_key, offset, length, mode, 0, False, internal=True,
                        keep=False)
        op._on_data = on_data
        op._on_done = on_done
        return op

    def internal_rtr(self, tgt: TargetAddr, token: int, mode: DeliveryMode,
                     on_done: Callable[[Operation], None]) -> Operation:
        """A DEFERRABLE_RTR the target side sends to a deferred initiator."""
        op = self._new_op(SesOpcode.DEFERRABLE_RTR, tgt, mode, 0, 0)
        op.internal = True
        op._on_done = on_done
        self._emit(op, SesOpcode.DEFERRABLE_RTR, payload=b"", request_length=0,
                   memory_key=token, optimized=False, absolute=True)
        return op

    # ------------------------------------------------------------------ internals

    def _two_sided(self, opcode: SesOpcode, tgt: TargetAddr, data: bytes, match_bits: int,
                   header_data: int | None, mode: DeliveryMode | None, tc: int,
                   dc: bool) -> Operation:
        mode = self._check(opcode, tgt, mode)
        self._check_size(opcode, len(data))
        op = self._new_op(opcode, tgt, mode, len(data), tc)
        self._emit(op, opcode, payload=data, request_length=len(data), memory_key=match_bits,
                   header_data=header_data, dc=dc)
        return op

    def _read(self, tgt: TargetAddr, memory_key: int, offset: int, length: int,
              mode: DeliveryMode | None, tc: int, absolute: bool, *, internal: bool = False,
              keep: bool = True) -> Operation:
        opcode = SesOpcode.READ
        mode = self._check(opcode, tgt, mode, peer=not internal)
        self._check_size(opcode, length)
        op = self._new_op(opcode, tgt, mode, length, tc)
        op.internal = internal
        op._read = Intervals()
        if keep:
            op.data = bytearray(length)
        # optimized headers only when the data comes back in the ACK
        opt = length <= self.ep.profile.ses.max_ack_data
        self._emit(op, opcode, payload=b"", request_length=length, memory_key=memory_key,
                   buffer_offset=offset, absolute=absolute, optimized=opt, read=True)
        return op

    def _check(self, opcode: SesOpcode, tgt: TargetAddr, mode: DeliveryMode | None, *,
               atomic: tuple[int, int] | None = None, peer: bool = True) -> DeliveryMode:
        profile = self.ep.profile
        if mode is None:
            mode = DeliveryMode.UUD if opcode == SesOpcode.DATAGRAM_SEND else profile.default_mode
        mode = DeliveryMode(mode)
        if opcode == SesOpcode.DATAGRAM_SEND and mode != DeliveryMode.UUD:
            raise ValueError("DATAGRAM_SEND travels over UUD only")
        if mode == DeliveryMode.UUD and opcode != SesOpcode.DATAGRAM_SEND:
            raise ValueError(f"{opcode.name} cannot travel over UUD (DATAGRAM_SEND only)")
        if mode == DeliveryMode.RUDI and opcode not in RUDI_OPCODES:
            raise ValueError(f"{opcode.name} is not idempotent: RUDI carries "
                             f"{', '.join(sorted(o.name for o in RUDI_OPCODES))} only")
        profile.check_operation(opcode, mode=mode, atomic=atomic,
                                peer_cap=self.peer_caps.get(tgt.dst) if peer else None)
        return mode

    def _check_size(self, opcode: SesOpcode, length: int) -> None:
        limit = self.ep.profile.ses.max_message_size
        if length > limit:
            raise SesError(Rc.TOO_LONG, f"{opcode.name} of {length} bytes exceeds "
                           f"ses.max_message_size ({limit})")

    def _atomic_operands(self, opcode: int, datatype: int, operand: Any, compare: Any,
                         mask: Any) -> tuple[bytes, ExtHeader, int]:
        info = atomics.datatype_info(datatype)

        def enc(value: Any) -> bytes:
            if isinstance(value, (bytes, bytearray)):
                return bytes(value)
            if info is None:
                raise ValueError(f"datatype {datatype:#x}: give the operand as raw bytes")
            return atomics.encode(datatype, 0 if value is None else value)

        if opcode in atomics.CAS_OPS:
            if info is not None and info.size > 16:
                raise SesError(Rc.AMO_UNSUPPORTED_SIZE,
                               f"{AtomicOpcode(opcode).name} of a {info.size}-byte datatype: "
                               "the compare and swap fields hold 16 bytes")
            ext = CasExt(atomic_opcode=opcode, atomic_datatype=datatype,
                         compare_value=atomics.to_cas_field(enc(compare)),
                         swap_value=atomics.to_cas_field(enc(operand)))
            return b"", ext, atomics.CAS_REQUEST_LENGTH
        payload = enc(operand)
        if opcode == AtomicOpcode.MSWAP:
            payload += enc(mask)
        return payload, AtomicExt(atomic_opcode=opcode, atomic_datatype=datatype), len(payload)

    def _new_op(self, opcode: SesOpcode, tgt: TargetAddr, mode: DeliveryMode, length: int,
                tc: int) -> Operation:
        op = Operation(self._next_op, opcode, tgt, mode, length, tc)
        self._next_op += 1
        self.ops[op.op_id] = op
        return op

    def _alloc_key(self) -> int:
        self._next_key += 1
        return RENDEZVOUS_KEY_BASE + self._next_key

    def _alloc_mid(self, op: Operation) -> int:
        job = op.target.job_id
        nxt = self._next_mid.get(job, 0)
        for _ in range(1 << 16):
            mid, nxt = nxt, (nxt + 1) & 0xFFFF
            if (job, mid) not in self._by_mid:
                self._next_mid[job] = nxt
                self._by_mid[(job, mid)] = op
                op.message_ids.append(mid)
                return mid
        raise SesError(Rc.DROPPED, f"no free message ID for job {job}")

    def _base(self, op: Operation, opcode: SesOpcode, *, request_length: int,
              memory_key: int = 0, buffer_offset: int = 0, header_data: int | None = None,
              dc: bool = False, absolute: bool = False) -> SesStandard:
        tgt = op.target
        flags = 0 if absolute else SesFlag.REL
        if dc:
            flags |= SesFlag.DC
        if header_data is not None:
            flags |= SesFlag.HD
        return SesStandard(opcode=opcode, flags=flags, ri_generation=tgt.ri_generation,
                           job_id=tgt.job_id, pid_on_fep=tgt.pid_on_fep,
                           resource_index=tgt.resource_index, buffer_offset=buffer_offset,
                           initiator=self.ep.initiator_id, memory_key=memory_key,
                           header_data=header_data or 0, request_length=request_length)

    def _emit(self, op: Operation, opcode: SesOpcode, *, payload: bytes, request_length: int,
              memory_key: int = 0, buffer_offset: int = 0, header_data: int | None = None,
              ext: ExtHeader | None = None, dc: bool = False, absolute: bool = False,
              optimized: bool = True, read: bool = False) -> None:
        profile = self.ep.profile
        mtu = profile.ses.mtu_payload
        base = self._base(op, opcode, request_length=request_length, memory_key=memory_key,
                          buffer_offset=buffer_offset, header_data=header_data, dc=dc,
                          absolute=absolute)
        length = request_length if read else None
        single = (request_length if read else len(payload)) <= mtu
        kind = choose_header(opcode, single_packet=single,
                             request_length=request_length, memory_key=memory_key,
                             header_data=header_data, buffer_offset=buffer_offset,
                             optimized=optimized and profile.ses.optimized_headers,
                             own_cap=profile.fep_cap, peer_cap=self.peer_caps.get(op.target.dst))
        if kind == NextHeader.REQ_STD:
            base.message_id = self._alloc_mid(op)
            parts = Segmenter(base, payload, mtu, length=length)
            if not single:
                # the packets are made as the PDS takes them (OutMessage)
                op.packets = parts.count
                t = op.target
                self.ep.outq.append(OutMessage(t.dst, op.mode, t.job_id, op.tc, ext, op.op_id,
                                               op.attempt, parts))
                return
            self._queue(op, [parts.part(0)], ext)
        else:
            hdr, chunk = Segmenter(base, payload, mtu, length=length).part(0)
            self._queue(op, [(single_header(kind, hdr), chunk)], ext)

    def _queue(self, op: Operation, parts: list, ext: ExtHeader | None) -> None:
        op.packets = len(parts)
        last = len(parts) - 1
        for i, (hdr, chunk) in enumerate(parts):
            self.ep.outq.append(OutPacket(op.target.dst, op.mode, op.target.job_id, op.tc, hdr,
                                          ext, chunk, PacketRef(op.op_id, op.attempt, i),
                                          i == last))

    def _data(self, op: Operation, offset: int, payload: bytes) -> None:
        op._got_data = True
        op._last = self.ep.now
        if op.opcode == SesOpcode.READ:
            end = offset + len(payload)
            if end > op.length:
                self._fail(op, Rc.TOO_LONG, "read data beyond the requested length")
                return
            assert op._read is not None  # every READ has its intervals
            if op._read.add(offset, end) or not payload:
                if op._on_data is not None:
                    op._on_data(offset, payload)
                else:
                    op.data[offset:end] = payload
        elif op.opcode in _FETCHING:
            op.data = bytearray(payload)
            assert op.atomic is not None  # a fetching atomic knows its datatype
            dt = op.atomic[1]
            if atomics.datatype_info(dt) is not None and payload:
                op.value = atomics.decode(dt, payload)
            op._ok = True
            op.modified_length = len(payload)
        self._progress(op)

    def _progress(self, op: Operation) -> None:
        if op.done:
            return
        if op.opcode == SesOpcode.READ:
            assert op._read is not None
            if op._read.covered >= op.length and (op.length or op._ok or op._got_data):
                op.modified_length = op.length
                self._complete(op)
        elif op.opcode in (SesOpcode.RENDEZVOUS_SEND, SesOpcode.RENDEZVOUS_TSEND):
            assert op._exposure is not None  # every rendezvous send exposes its rest
            if op._ok and op._exposure.all_served():
                op.modified_length = op.length
                self._complete(op)
        elif op._ok:
            self._complete(op)

    def _error(self, op: Operation, rc: int) -> None:
        if (op.opcode in (SesOpcode.DEFERRABLE_SEND, SesOpcode.DEFERRABLE_TSEND)
                and rc == Rc.NO_MATCH and op._target_token == 0):
            op.state = OpState.DEFERRED
            self.ep.counters["deferrable_deferred"] += 1
            self._wait(op, self.ep.now, "deferred")
            return
        self._fail(op, rc)

    def _complete(self, op: Operation) -> None:
        op.state = OpState.DONE
        op.return_code = Rc.OK
        self._finish(op)

    def _fail(self, op: Operation, rc: int, reason: str | None = None) -> None:
        op.state = OpState.FAILED
        op.return_code = rc
        op.reason = reason
        self._finish(op)

    def _finish(self, op: Operation) -> None:
        self._waiting.pop(op.op_id, None)
        for mid in op.message_ids:
            if self._by_mid.get((op.target.job_id, mid)) is op:
                del self._by_mid[(op.target.job_id, mid)]
        if op._exposure is not None:
            e = op._exposure
            self.ep.resources.remove_region(e.job_id, e.pid_on_fep, e.resource_index, e.key)
        if op._init_token:
            self._deferred.pop((op.target.job_id, op._init_token), None)
            self._tokens.release(op._init_token)
        self.ops.pop(op.op_id, None)
        if op._on_done is not None:
            op._on_done(op)
        if not op.internal:
            self.ep.events.append(OpCompleted(op))
