"""Target side of the SES: one delivered request packet -> checks, effects, a response.

:meth:`Target.handle` is called for every request packet the PDS delivers
(``RequestDelivered``) and returns a :class:`~uet.ses.messages.TargetReply` for
``respond(token, reply.response, reply.data)``. Per packet:

* a packet that fails a check gets a RESPONSE with the check's return code and changes
  nothing; for a multi-packet message only the first failing packet answers, later packets
  of the same message get no semantic response (``None``: the PDS sends the default one);
* a packet that completes a message gets the real RESPONSE (return code OK,
  ``modified_length``) or, for reads and fetching atomics, a response with data;
* any other packet gets ``None``.

Every packet of a message carries the job, PIDonFEP, resource index, generation, key and
the whole message's ``request_length``, and each packet is checked against the *whole*
message's range before anything is written: a bad message writes no byte at all.

Packets whose SES header is a response with data (read data in the return direction) are
handed to the co-located initiator.

Every table a peer can grow here has a limit, a timeout and a counter: messages in
reassembly (``ses.reassembly_max_messages``; abandoned after ``ses.reassembly_timeout_ms``
without a packet, ``reassembly_expired``, and at once when their PDC closes,
``reassembly_dropped_on_close``: a receive they were filling completes CANCELLED and their
first late packet is answered CANCELLED), the unexpected list
(``ses.unexpected_max_messages`` / ``_bytes``, ``unexpected_refused``; dropped after
``ses.unexpected_timeout_ms``, ``unexpected_expired``), receives reserved for deferred
restarts (bounded by the posted receives; released after ``ses.unexpected_timeout_ms``,
``reserved_expired``) and the finished-message history (``ses.completed_history``, FIFO).
:meth:`Target.expire` runs them (``SesEndpoint.handle_timer``).
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from uet.profiles import RUDI_OPCODES, ProfileError
from uet.ses import atomics, ieee
from uet.ses.deferrable import Reserved, TokenAllocator, join_token, split_token
from uet.ses.headers import Req, view
from uet.ses.matching import Receive, Unexpected
from uet.ses.memory import Perm, Resource, check_region
from uet.ses.messages import OutPacket, RecvCompleted, TargetAddr, TargetReply
from uet.ses.reassembly import MessageKey, MessageState, Reassembly
from uet.ses.segmentation import read_slice
from uet.wire.constants import (
    DeliveryMode,
    FepCap,
    NackCode,
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
    RendezvousExt,
    SesResponse,
    SesResponseData,
    SesResponseDataSmall,
)

if TYPE_CHECKING:
    from uet.ses.context import SesContext

_SENDS = frozenset({SesOpcode.SEND, SesOpcode.TAGGED_SEND, SesOpcode.DATAGRAM_SEND,
                    SesOpcode.DEFERRABLE_SEND, SesOpcode.DEFERRABLE_TSEND})
_TAGGED = frozenset({SesOpcode.TAGGED_SEND, SesOpcode.DEFERRABLE_TSEND,
                     SesOpcode.RENDEZVOUS_TSEND, SesOpcode.TSEND_ATOMIC,
                     SesOpcode.TSEND_FETCH_ATOMIC})
_DEFERRABLE = frozenset({SesOpcode.DEFERRABLE_SEND, SesOpcode.DEFERRABLE_TSEND})
_RESPONSE_HEADERS = (SesResponse, SesResponseData, SesResponseDataSmall)
_NONE = TargetReply()
# module aliases: looking a member up on an Enum class costs ~70 ns, and these run per packet
_OPCODES = SesOpcode._value2member_map_
_WRITE = SesOpcode.WRITE
_READ = SesOpcode.READ
_DATAGRAM_SEND = SesOpcode.DATAGRAM_SEND
_UUD = DeliveryMode.UUD
_RUDI = DeliveryMode.RUDI
_REQ_SMALL = NextHeader.REQ_SMALL
_OPT_NON_MATCHING = int(FepCap.OPT_NON_MATCHING)
_PERM_WRITE = int(Perm.WRITE)
_REL = int(SesFlag.REL)
_IE = int(SesFlag.IE)
_OK_RCS = (Rc.OK, Rc.NULL)
_DC = int(SesFlag.DC)
_RESPONSE = int(RspOpcode.RESPONSE)
_AMO_FP = {"NAN": Rc.AMO_FP_NAN, "OVERFLOW": Rc.AMO_FP_OVERFLOW,
           "UNDERFLOW": Rc.AMO_FP_UNDERFLOW, "INEXACT": Rc.AMO_FP_INEXACT}


class Target:
    """Handles delivered request packets against the end point's resources."""

    # slots for what the SES core (uet/native/ses_core.c) reads and writes per packet
    __slots__ = ("ep", "reassembly", "_conn", "_mode", "_now", "__dict__", "__weakref__")

    def __init__(self, ep: SesContext) -> None:
        self.ep = ep
        ses = ep.profile.ses
        self.reassembly = Reassembly(ses.reassembly_max_messages, ses.completed_history)
        self.counters: Counter = ep.counters
        self.unexpected_messages = 0
        self.unexpected_bytes = 0
        self._tokens = TokenAllocator()
        self._reserved: dict[int, Reserved] = {}
        self._unexpected_by_key: dict[MessageKey, Unexpected] = {}
        #: every listed unexpected entry, oldest first (their timeout)
        self._unexpected: dict[int, Unexpected] = {}
        self._next_recv = 1
        #: DC requests answer this long after NO_RESPONSE (ses.dc_latency_ns; 0: at once)
        self.dc_latency_ps = ses.dc_latency_ns * 1000
        self._conn = 0  # connection of the packet being handled (see handle())
        self._mode = DeliveryMode.RUD  # its delivery mode
        self._now = 0  # time of the packet being handled (timeouts count from it)

    # ------------------------------------------------------------------ receives

    def post_recv(self, job_id: int, pid_on_fep: int, resource_index: int,
                  buffer: bytearray | int, *, tag: int | None = None,
                  ignore: int = 0) -> Receive:
        """Post a receive (tagged when ``tag`` is given; ``ignore`` = wildcard bits).

        Matches the oldest matching unexpected message first; raises
        :class:`~uet.profiles.ProfileError` for tagging or wildcards the profile lacks.
        """
        profile = self.ep.profile
        if tag is not None and profile.tag_matching == "none":
            raise ProfileError("tagged receive", profile.name, "tagged.matching is none")
        if ignore and profile.tag_matching != "wildcard":
            raise ProfileError("wildcard receive (ignore bits)", profile.name,
                               f"tagged.matching is {profile.tag_matching}")
        res = self.ep.resources.get(job_id, pid_on_fep, resource_index)
        if res is None:
            raise ValueError(f"no resource {job_id}/{pid_on_fep}/{resource_index}: "
                             "register it first")
        buf = bytearray(buffer) if isinstance(buffer, int) else buffer
        recv = Receive(job_id, pid_on_fep, resource_index, buf, tag is not None, tag or 0,
                       ignore, self._next_recv)
        self._next_recv += 1
        msg = res.queue.take_unexpected(recv)
        if msg is None:
            res.queue.posted.append(recv)
            return recv
        self._uncharge(msg)
        recv.list = RspList.OVERFLOW
        recv.bind(msg.src, msg.initiator, msg.opcode, msg.request_length,
                  msg.match_bits if msg.tagged else None)
        recv.header_data = msg.header_data
        if msg.kind == "eager":
            recv.place(0, msg.data)
            if msg.complete:
                self._recv_done(recv, Rc.OK)
            else:
                msg.state.sink = recv
        elif msg.kind == "rendezvous":
            recv.place(0, msg.data)
            self._pull(recv, msg.src, msg.job_id, msg.ext, msg.request_length, msg.mode)
        else:  # deferred: ask the initiator to restart into this receive
            self._restart(res, recv, msg)
        return recv

    def cancel_recv(self, recv: Receive) -> bool:
        """Withdraw a posted receive not matched yet."""
        res = self.ep.resources.get(recv.job_id, recv.pid_on_fep, recv.resource_index)
        if res is not None and recv in res.queue.posted:
            res.queue.posted.remove(recv)
            self._recv_done(recv, Rc.CANCELLED)
            return True
        return False

    # ------------------------------------------------------------------ packets

    def handle(self, src: str, ses: Any, ext: Any, payload: bytes,
               mode: DeliveryMode = DeliveryMode.RUD, psn: int = 0,
               conn: int = 0, now: int = 0, refuse: int | None = None) -> TargetReply:
        """Process one delivered request packet; never raises on bad input.

        ``conn`` names the connection the packet came on (the target PDC ID; 0 without a
        PDC): message IDs are scoped to it, so an initiator that restarts on a new PDC and
        reuses message IDs is not taken for late copies of its old messages. ``now``: the
        time (ps) the packet is handled; the reassembly and unexpected timeouts count
        from it. ``refuse``: a return code the end point decided before any check (job
        isolation: BAD_JOB_ID): the message is answered with it once and nothing of it
        touches memory, receives or counters of the job it named."""
        self._conn = conn
        self._now = now
        self._mode = mode
        self.ep.now = now
        if isinstance(ses, _RESPONSE_HEADERS):
            if refuse is not None:
                self.counters["refused_return_data"] += 1
                return _NONE
            self.ep.initiator.on_return_data(src, ses, payload, now=now)
            return _NONE
        try:
            req = view(ses)
        except TypeError:
            self.counters["malformed"] += 1
            return _NONE
        if type(mode) is not DeliveryMode:
            mode = DeliveryMode(mode)
        if refuse is not None:
            reply = self._error(self._key(src, req), req, Rc(refuse))
        else:
            reply = self._dispatch(src, req, ext, bytes(payload), mode, psn)
        rsp = reply.response
        if rsp is not None and rsp.return_code not in _OK_RCS:
            self.counters[f"rc.{Rc(rsp.return_code).name}"] += 1
        if mode == _UUD:
            return _NONE  # UUD has no responses
        if req.flags & _DC and type(rsp) is SesResponse and rsp.opcode == _RESPONSE \
                and rsp.return_code == Rc.OK and self.dc_latency_ps \
                and (mode == DeliveryMode.RUD or mode == DeliveryMode.ROD):
            # delivery complete: the data is placed, but visible in host memory only after
            # dc_latency_ns; acknowledge at once with NO_RESPONSE, answer then
            self.counters["dc_deferred"] += 1
            early = SesResponse(opcode=RspOpcode.NO_RESPONSE, return_code=Rc.NULL,
                                message_id=rsp.message_id, ri_generation=rsp.ri_generation,
                                job_id=rsp.job_id)
            return TargetReply(early, later=reply, delay_ps=self.dc_latency_ps)
        return reply

    def _dispatch(self, src: str, req: Req, ext: Any, payload: bytes, mode: DeliveryMode,
                  psn: int) -> TargetReply:
        profile = self.ep.profile
        op = req.opcode
        if op not in _OPCODES or op not in profile.operations or mode not in profile.modes:
            return self._rsp(req, Rc.UNSUPPORTED_OP)
        if req.kind == _REQ_SMALL and not int(profile.fep_cap) & _OPT_NON_MATCHING:
            return self._rsp(req, Rc.UNSUPPORTED_OP)
        if (op == _DATAGRAM_SEND) != (mode == _UUD):
            return self._rsp(req, Rc.UNSUPPORTED_OP)
        if mode == _RUDI and op not in RUDI_OPCODES:
            return self._rsp(req, Rc.UNSUPPORTED_OP)
        if req.request_length > profile.ses.max_message_size:
            return self._error(self._key(src, req), req, Rc.TOO_LONG)
        if op == _WRITE:
            return self._write(src, req, payload, mode)
        if op == _READ:
            return self._read(src, req, mode, psn)
        if op in (SesOpcode.ATOMIC, SesOpcode.FETCHING_ATOMIC):
            return self._atomic(src, req, ext, payload, psn)
        if op in _SENDS:
            return self._send(src, req, payload, mode)
        if op in (SesOpcode.RENDEZVOUS_SEND, SesOpcode.RENDEZVOUS_TSEND):
            return self._rendezvous(src, req, ext, payload, mode)
        if op in (SesOpcode.TSEND_ATOMIC, SesOpcode.TSEND_FETCH_ATOMIC):
            return self._tagged_atomic(src, req, ext, payload, psn)
        if op == SesOpcode.DEFERRABLE_RTR:
            return self._rsp(req, self.ep.initiator.on_rtr(src, req))
        if op == SesOpcode.MSG_ERROR:
            return self._msg_error(src, req)
        res = self._resolve(req)  # NO_OP
        return self._rsp(req, res if isinstance(res, Rc) else Rc.OK)

    # ------------------------------------------------------------------ one-sided

    def _write(self, src: str, req: Req, payload: bytes, mode: DeliveryMode) -> TargetReply:
        admitted = self._admit(src, req)
        if isinstance(admitted, TargetReply):
            return admitted
        key, res = admitted
        moff = req.message_offset
        rlen = req.request_length
        end = moff + len(payload)
        if end > rlen or (key is None and end != rlen):
            return self._error(key, req, Rc.TOO_LONG)
        chk = check_region(res, req.memory_key, _PERM_WRITE, req.buffer_offset, rlen,
                           int(req.flags) & _REL != 0)  # req.relative, without the call
        if not isinstance(chk, tuple):
            return self._error(key, req, chk)
        mr, start = chk
        if mode == _RUDI and not mr.idempotent_safe:
            return self._error(key, req, Rc.OP_VIOLATION)
        reassembly = self.reassembly
        state = reassembly.active.get(key) if key is not None else None
        if state is None:
            if key is not None and reassembly.full():
                return self._nack()
            state = reassembly.start(key, rlen, self._now)
            if key is not None:
                self.ep.arm(self._now + self.ep.timeouts.reassembly_ps)
        intervals = state.intervals
        # _is_dup and state.complete(), inline: this runs for every packet of a WRITE
        if (intervals.contains(moff, end) if payload
                else state.packets > 0 and state.request_length == 0):
            return self._dup()
        intervals.add(moff, end)
        state.packets += 1
        state.last = self._now
        if mr.store:  # a scratch region checks and counts, it keeps nothing
            mr.buffer[start + moff:start + end] = payload
        if intervals.covered >= state.request_length:
            return self._finished(key, self._rsp(req, Rc.OK, rlen))
        return _NONE

    def _read(self, src: str, req: Req, mode: DeliveryMode, psn: int) -> TargetReply:
        res = self._resolve(req)
        if isinstance(res, Rc):
            return self._rsp(req, res)
        if req.ie:
            return self._rsp(req, Rc.INITIATOR_ERR)
        n = req.request_length
        chk = check_region(res, req.memory_key, Perm.READ, req.buffer_offset, n,
                           req.relative)
        if isinstance(chk, Rc):
            return self._rsp(req, chk)
        mr, start = chk
        if mode == DeliveryMode.RUDI and not mr.idempotent_safe:
            return self._rsp(req, Rc.OP_VIOLATION)
        mtu = self.ep.profile.ses.mtu_payload
        off = req.message_offset
        size = read_slice(off, n, mtu)
        if req.kind != NextHeader.REQ_STD and size != n:
            return self._rsp(req, Rc.TOO_LONG)  # an optimized READ is one packet of data
        data = bytes(mr.buffer[start + off:start + off + size])
        if mr.on_read is not None:
            mr.on_read(start + off, size)
        ack_path = (req.kind != NextHeader.REQ_STD or n <= self.ep.profile.ses.max_ack_data
                    or mode not in (DeliveryMode.RUD, DeliveryMode.ROD))
        if ack_path:
            return self._rsp_data(req, data, psn, off)
        # return direction: a request packet target -> initiator carrying RSP_DATA
        mid = req.message_id or 0  # a standard header: it has one
        hdr = SesResponseData(opcode=RspOpcode.RESPONSE_W_DATA, return_code=Rc.OK,
                              message_id=mid, job_id=req.job_id,
                              read_request_message_id=mid, payload_length=size,
                              modified_length=size, message_offset=off)
        self.ep.outq.append(OutPacket(src, mode, req.job_id, 0, hdr, None, data, None, True))
        self.counters["read_return_packets"] += 1
        return self._rsp(req, Rc.OK, n) if req.eom else _NONE

    def _atomic(self, src: str, req: Req, ext: Any, payload: bytes, psn: int) -> TargetReply:
        admitted = self._admit(src, req)
        if isinstance(admitted, TargetReply):
            return admitted
        key, res = admitted
        mr = res.regions.get(req.memory_key)
        if mr is None:
            return self._error(key, req, Rc.BAD_MKEY)
        if not mr.perms & Perm.ATOMIC:
            return self._error(key, req, Rc.PERM_VIOLATION)
        bad = self._atomic_check(req, ext, payload)
        if bad is not None:
            return self._error(key, req, bad)
        dt = ext.atomic_datatype
        size = atomics.DATATYPES[dt].size
        chk = check_region(res, req.memory_key, Perm.ATOMIC, req.buffer_offset, size,
                           req.relative)
        if isinstance(chk, Rc):
            return self._error(key, req, chk)
        mr, start = chk
        if (start + mr.base_va) % atomics.alignment(dt):
            return self._error(key, req, Rc.AMO_UNALIGNED)
        old = self._apply_atomic(ext, mr.buffer, start, payload)
        if isinstance(old, Rc):  # a floating-point exception the profile fails on
            return self._error(key, req, old)
        self.reassembly.finish(key)
        if req.opcode == SesOpcode.FETCHING_ATOMIC:
            return self._rsp_data(req, old, psn, 0)
        return self._rsp(req, Rc.OK, size)

    def _atomic_check(self, req: Req, ext: Any, payload: bytes) -> Rc | None:
        if not isinstance(ext, (AtomicExt, CasExt)):
            return Rc.AMO_UNSUPPORTED_OP
        profile = self.ep.profile
        if ext.atomic_opcode not in profile.atomic_opcodes:
            return Rc.AMO_UNSUPPORTED_OP
        if ext.atomic_datatype not in profile.atomic_datatypes:
            return Rc.AMO_UNSUPPORTED_DT
        bad = atomics.validate(ext.atomic_opcode, ext.atomic_datatype, req.request_length,
                               isinstance(ext, CasExt))
        if bad is not None:
            return bad
        want = 0 if isinstance(ext, CasExt) else req.request_length
        if len(payload) != want or not (req.som and req.eom):
            return Rc.AMO_UNSUPPORTED_SIZE
        return None

    def _apply_atomic(self, ext: Any, buffer: bytearray, start: int,
                      payload: bytes) -> bytes | Rc:
        """Apply the atomic and return the old value (big-endian), or the AMO_FP_* code of
        a floating-point exception the profile fails on (memory left unchanged)."""
        dt = ext.atomic_datatype
        size = atomics.DATATYPES[dt].size
        if isinstance(ext, CasExt):
            operand = atomics.from_cas_field(ext.swap_value, dt)
            compare = atomics.from_cas_field(ext.compare_value, dt)
        else:
            operand, compare = payload, None
        new, old, flags = atomics.apply_checked(ext.atomic_opcode, dt,
                                                bytes(buffer[start:start + size]), operand,
                                                compare)
        if flags:
            self.counters.update(f"amo_fp.{f.lower()}" for f in flags)
            trapped = ieee.first(flags, self.ep.profile.fp_exceptions)
            if trapped is not None:
                return _AMO_FP[trapped]
        buffer[start:start + size] = new
        return old

    # ------------------------------------------------------------------ two-sided

    def _send(self, src: str, req: Req, payload: bytes, mode: DeliveryMode) -> TargetReply:
        admitted = self._admit(src, req, check_ie=False)  # IE aborts a started message
        if isinstance(admitted, TargetReply):
            return admitted
        key, res = admitted
        end = req.message_offset + len(payload)
        if end > req.request_length or (key is None and end != req.request_length):
            return self._error(key, req, Rc.TOO_LONG)
        state = self.reassembly.get(key) if key is not None else None
        if state is None:
            if req.ie:
                return self._error(key, req, Rc.INITIATOR_ERR)
            if key is not None and self.reassembly.full():
                return self._nack()
            state = self.reassembly.start(key, req.request_length, self._now)
            if key is not None:
                self.ep.arm(self._now + self.ep.timeouts.reassembly_ps)
            early = self._match_send(src, req, res, state, mode)
            if early is not None:
                return early
        if self._is_dup(state, req, payload):
            return self._dup()
        if req.ie:  # the initiator could not read its buffer: abort the message
            self._abort(state, Rc.INITIATOR_ERR)
            return self._error(key, req, Rc.INITIATOR_ERR)
        state.intervals.add(req.message_offset, end)
        state.packets += 1
        state.last = self._now
        sink = state.sink
        sink.place(req.message_offset, payload)
        if req.header_data is not None:
            sink.header_data = req.header_data
        if not state.complete():
            return _NONE
        self.reassembly.finish(key)
        if isinstance(sink, Receive):
            self._recv_done(sink, Rc.OK)
            return self._rsp(req, Rc.OK, sink.length, sink.list)
        sink.complete = True
        sink.state = None
        return self._rsp(req, Rc.OK, req.request_length, RspList.OVERFLOW)

    def _match_send(self, src: str, req: Req, res: Resource, state: MessageState,
                    mode: DeliveryMode) -> TargetReply | None:
        """Give a new message its sink; a reply if it ends here (deferred, no room)."""
        op = req.opcode
        tagged = op in _TAGGED
        key = state.key
        if op in _DEFERRABLE:
            init_token, target_token = split_token(req.restart_token)
            if target_token:
                r = self._reserved.get(target_token)
                if (r is None or r.src != src or r.job_id != req.job_id
                        or r.initiator_token != init_token):
                    self.reassembly.finish(key)
                    return self._rsp(req, Rc.NO_MATCH)
                del self._reserved[target_token]
                self._tokens.release(target_token)
                r.recv.bind(src, req.initiator, op, req.request_length,
                            req.match_bits if tagged else None)
                state.sink = r.recv
                return None
        recv = res.queue.take_posted(tagged, req.match_bits)
        if recv is not None:
            recv.bind(src, req.initiator, op, req.request_length,
                      req.match_bits if tagged else None)
            state.sink = recv
            return None
        if op in _DEFERRABLE:
            if not self._room(0):
                self.reassembly.finish(key)
                return self._rsp(req, Rc.DROPPED)
            entry = Unexpected("deferred", src, req.job_id, req.initiator, op, tagged,
                               req.match_bits, req.request_length, init_token=init_token,
                               mode=mode, key=key)
            self._charge(res, entry)
            self.reassembly.finish(key)  # the rest of this attempt is dropped
            self.counters["deferred"] += 1
            return self._rsp(req, Rc.NO_MATCH)
        if not self._room(req.request_length):
            self.reassembly.finish(key)
            self.counters["unexpected_refused"] += 1
            return self._rsp(req, Rc.NO_MATCH)
        entry = Unexpected("eager", src, req.job_id, req.initiator, op, tagged, req.match_bits,
                           req.request_length, data=bytearray(req.request_length),
                           state=state, charged=req.request_length, mode=mode, key=key)
        self._charge(res, entry)
        state.sink = entry
        return None

    def _rendezvous(self, src: str, req: Req, ext: Any, payload: bytes,
                    mode: DeliveryMode) -> TargetReply:
        admitted = self._admit(src, req)
        if isinstance(admitted, TargetReply):
            return admitted
        key, res = admitted
        if (not isinstance(ext, RendezvousExt) or not (req.som and req.eom)
                or len(payload) != ext.eager_length or ext.eager_length > req.request_length):
            return self._error(key, req, Rc.UNSUPPORTED_SIZE)
        tagged = req.opcode in _TAGGED
        recv = res.queue.take_posted(tagged, req.match_bits)
        self.reassembly.finish(key)
        if recv is not None:
            recv.bind(src, req.initiator, req.opcode, req.request_length,
                      req.match_bits if tagged else None)
            recv.place(0, payload)
            recv.header_data = req.header_data
            self._pull(recv, src, req.job_id, ext, req.request_length, mode)
            return self._rsp(req, Rc.OK, len(payload))
        if not self._room(len(payload)):
            self.counters["unexpected_refused"] += 1
            return self._rsp(req, Rc.NO_MATCH)
        entry = Unexpected("rendezvous", src, req.job_id, req.initiator, req.opcode, tagged,
                           req.match_bits, req.request_length, data=bytearray(payload),
                           header_data=req.header_data, complete=True, ext=ext,
                           charged=len(payload), mode=mode, key=key)
        self._charge(res, entry)
        return self._rsp(req, Rc.OK, len(payload), RspList.OVERFLOW)

    def _tagged_atomic(self, src: str, req: Req, ext: Any, payload: bytes,
                       psn: int) -> TargetReply:
        admitted = self._admit(src, req)
        if isinstance(admitted, TargetReply):
            return admitted
        key, res = admitted
        bad = self._atomic_check(req, ext, payload)
        if bad is not None:
            return self._error(key, req, bad)
        recv = res.queue.find_posted(True, req.match_bits)
        if recv is None:
            return self._error(key, req, Rc.NO_MATCH)  # atomics are never buffered
        dt = ext.atomic_datatype
        size = atomics.DATATYPES[dt].size
        start = req.buffer_offset
        if start + size > len(recv.buffer):
            return self._error(key, req, Rc.BAD_ADDR)
        if start % atomics.alignment(dt):
            return self._error(key, req, Rc.AMO_UNALIGNED)
        old = self._apply_atomic(ext, recv.buffer, start, payload)
        if isinstance(old, Rc):  # a floating-point exception the profile fails on
            return self._error(key, req, old)
        res.queue.posted.remove(recv)
        self.reassembly.finish(key)
        recv.bind(src, req.initiator, req.opcode, size, req.match_bits)
        self._recv_done(recv, Rc.OK)
        if req.opcode == SesOpcode.TSEND_FETCH_ATOMIC:
            return self._rsp_data(req, old, psn, 0)
        return self._rsp(req, Rc.OK, size)

    def _msg_error(self, src: str, req: Req) -> TargetReply:
        key = self._key(src, req)
        state = self.reassembly.get(key) if key is not None else None
        entry = self._unexpected_by_key.get(key) if key is not None else None
        if entry is not None and entry.state is None:  # buffered, deferred or rendezvous
            entry.queue.unexpected.remove(entry)
            self._uncharge(entry)
            self.counters["msg_error_aborted"] += 1
        if state is not None:
            self._abort(state, Rc.CANCELLED)
            self.reassembly.finish(key)
            self.counters["msg_error_aborted"] += 1
        elif key is not None:
            self.reassembly.finish(key)  # late packets of that message are dropped
        return self._rsp(req, Rc.OK)

    # ------------------------------------------------------------------ rendezvous / RTR

    def _pull(self, recv: Receive, src: str, job_id: int, ext: RendezvousExt,
              request_length: int, mode: int) -> None:
        """Read the part of a rendezvous message after the eager bytes into ``recv``."""
        eager = ext.eager_length
        rest = request_length - eager
        if rest <= 0:
            self._recv_done(recv, Rc.OK)
            return
        mode = DeliveryMode(mode) if mode in (DeliveryMode.RUD, DeliveryMode.ROD) \
            else DeliveryMode.RUD
        tgt = TargetAddr(src, job_id, ext.pid_on_fep, ext.resource_index, ext.ri_generation)

        def on_data(offset: int, data: bytes) -> None:
            recv.place(eager + offset, data)

        def on_done(op: Any) -> None:
            self._recv_done(recv, op.return_code)

        self.counters["rendezvous_pulls"] += 1
        self.ep.initiator.internal_read(tgt, ext.read_memory_key, ext.read_offset, rest, mode,
                                        on_data, on_done)

    def _restart(self, res: Resource, recv: Receive, msg: Unexpected) -> None:
        """Reserve ``recv`` for a deferred send and ask its initiator to restart."""
        token = self._tokens.allocate()
        self._reserved[token] = Reserved(recv, msg.src, msg.job_id, msg.init_token,
                                         since=self._now)
        self.ep.arm(self._now + self.ep.timeouts.unexpected_ps)
        mode = DeliveryMode(msg.mode) if msg.mode in (DeliveryMode.RUD, DeliveryMode.ROD) \
            else DeliveryMode.RUD

        def on_done(op: Any) -> None:
            if op.return_code != Rc.OK and self._reserved.pop(token, None) is not None:
                self._tokens.release(token)  # the initiator is gone: repost the receive
                self._repost(recv)

        self.counters["rtr_sent"] += 1
        self.ep.initiator.internal_rtr(TargetAddr(msg.src, msg.job_id),
                                       join_token(msg.init_token, token), mode, on_done)

    # ------------------------------------------------------------------ timeouts

    def connection_closed(self, now: int, conn: int) -> None:
        """The target PDC ``conn`` closed (normally or in error): no packet of its messages
        in progress can follow, so they are abandoned at once (a receive they were
        filling completes CANCELLED; their slots are free again)."""
        for state in self.reassembly.take_conn(conn):
            self._abandon(state, "reassembly_dropped_on_close")

    def expire(self, now: int) -> int | None:
        """Abandon what outlived its timeout; the earliest remaining deadline, or None."""
        t = self.ep.timeouts
        nxt: int | None = None
        for state in self.reassembly.expired(now, t.reassembly_ps):
            self._abandon(state, "reassembly_expired")
        oldest = self.reassembly.oldest()
        if oldest is not None:
            nxt = oldest + t.reassembly_ps
        for entry in list(self._unexpected.values()):  # oldest first
            if now - entry.arrived < t.unexpected_ps:
                d = entry.arrived + t.unexpected_ps
                nxt = d if nxt is None or d < nxt else nxt
                break
            q = entry.queue
            if q is not None and entry in q.unexpected:
                q.unexpected.remove(entry)
            if entry.state is not None:  # an eager message still arriving
                self.reassembly.finish(entry.key, late_rc=Rc.CANCELLED)
            self._uncharge(entry)
            self.counters["unexpected_expired"] += 1
        for token, r in list(self._reserved.items()):
            if now - r.since < t.unexpected_ps:
                d = r.since + t.unexpected_ps
                nxt = d if nxt is None or d < nxt else nxt
                continue
            del self._reserved[token]
            self._tokens.release(token)
            self._repost(r.recv)
            self.counters["reserved_expired"] += 1
        return nxt

    def _abandon(self, state: MessageState, counter: str) -> None:
        """Give up on a message in progress: free its slot; its receive completes
        CANCELLED (a partly filled unexpected entry is dropped); its first late packet
        will be answered CANCELLED so the initiator's operation ends with a code."""
        self._abort(state, Rc.CANCELLED)
        self.reassembly.finish(state.key, late_rc=Rc.CANCELLED)
        self.counters[counter] += 1

    def _repost(self, recv: Receive) -> None:
        """A reserved receive goes back to the head of its posted list."""
        res = self.ep.resources.get(recv.job_id, recv.pid_on_fep, recv.resource_index)
        recv.src = recv.initiator = recv.opcode = recv.match_bits = None
        recv.list = RspList.EXPECTED
        if res is not None:
            res.queue.posted.insert(0, recv)

    # ------------------------------------------------------------------ helpers

    def _admit(self, src: str, req: Req, *, check_ie: bool = True
               ) -> tuple[MessageKey | None, Resource] | TargetReply:
        """The checks every message-carrying request passes first: a late copy of a
        finished message is a duplicate; the resource must resolve; an initiator error
        (IE) ends the message. Returns (reassembly key, resource) or the reply to send."""
        mid = req.message_id  # self._key(src, req), inline: per packet
        key = None if mid is None else (src, self._conn, req.initiator, req.job_id, mid)
        if key is not None and self.reassembly.finished(key):
            late = self.reassembly.late(key)
            if isinstance(late, int):  # the first late packet of an abandoned message
                self.counters["reassembly_late_packet"] += 1
                return self._rsp(req, late)
            if late is not None:  # RUDI: the final answer again (see _finished)
                self.counters["final_replayed"] += 1
                return late
            return self._dup()
        res = self.ep.resources.resolve(req.job_id, req.pid_on_fep, req.resource_index,
                                        req.ri_generation)  # self._resolve(req), inline
        if isinstance(res, Rc):
            return self._error(key, req, res)
        if check_ie and int(req.flags) & _IE:  # req.ie, without the call
            return self._error(key, req, Rc.INITIATOR_ERR)
        return key, res

    def _resolve(self, req: Req) -> Resource | Rc:
        return self.ep.resources.resolve(req.job_id, req.pid_on_fep, req.resource_index,
                                         req.ri_generation)

    def _key(self, src: str, req: Req) -> MessageKey | None:
        if req.message_id is None:
            return None
        return (src, self._conn, req.initiator, req.job_id, req.message_id)

    @staticmethod
    def _is_dup(state: MessageState, req: Req, payload: bytes) -> bool:
        if payload:
            return state.intervals.contains(req.message_offset,
                                            req.message_offset + len(payload))
        return state.packets > 0 and state.request_length == 0

    def _dup(self) -> TargetReply:
        self.counters["duplicates"] += 1
        return _NONE

    def _nack(self) -> TargetReply:
        self.counters["nack_no_ses_msg_avail"] += 1
        return TargetReply(nack=NackCode.NO_SES_MSG_AVAIL)

    def _error(self, key: MessageKey | None, req: Req, rc: Rc) -> TargetReply:
        """Answer a failed check once per message; later packets of it get no response."""
        if key is not None:
            if self.reassembly.finished(key):
                return _NONE
            state = self.reassembly.get(key)
            if state is not None:
                self._abort(state, rc)
            return self._finished(key, self._rsp(req, rc))
        return self._rsp(req, rc)

    def _write_done(self, key: MessageKey, ses: Any, rlen: int) -> TargetReply:
        """The WRITE packet that completes its message, taken by the C core
        (``uet.native._ses_core``): the message's response, as ``_write`` makes it."""
        return self._finished(key, self._rsp(view(ses), Rc.OK, rlen))

    def _finished(self, key: MessageKey | None, reply: TargetReply) -> TargetReply:
        """The message ends with ``reply``. Over RUDI the reply is kept with its key and
        given again to any late packet of the message: RUDI's response cache may have
        dropped the response to the packet that ended it (the initiator's retransmission is
        then delivered again), and without it the operation would never end. RUD / ROD
        need none of that: their PDS keeps the response until it is cleared."""
        self.reassembly.finish(key, late_rc=reply if self._mode == _RUDI else None)
        return reply

    def _abort(self, state: MessageState, rc: int) -> None:
        sink = state.sink
        state.sink = None
        if isinstance(sink, Receive) and not sink.done:
            self._recv_done(sink, rc)
        elif (isinstance(sink, Unexpected) and sink.queue is not None
              and sink in sink.queue.unexpected):
            sink.queue.unexpected.remove(sink)
            self._uncharge(sink)

    def _room(self, nbytes: int) -> bool:
        ses = self.ep.profile.ses
        return (self.unexpected_messages < ses.unexpected_max_messages
                and self.unexpected_bytes + nbytes <= ses.unexpected_max_bytes)

    def _charge(self, res: Resource, entry: Unexpected) -> None:
        res.queue.unexpected.append(entry)
        entry.queue = res.queue
        entry.arrived = self._now
        self._unexpected[id(entry)] = entry
        self.ep.arm(self._now + self.ep.timeouts.unexpected_ps)
        if entry.key is not None:
            self._unexpected_by_key[entry.key] = entry
        self.unexpected_messages += 1
        self.unexpected_bytes += entry.charged
        self.counters["unexpected"] += 1

    def _uncharge(self, entry: Unexpected) -> None:
        self._unexpected.pop(id(entry), None)
        if entry.key is not None and self._unexpected_by_key.get(entry.key) is entry:
            del self._unexpected_by_key[entry.key]
        self.unexpected_messages -= 1
        self.unexpected_bytes -= entry.charged

    def _recv_done(self, recv: Receive, rc: int) -> None:
        if recv.done:
            return
        recv.finish(rc)
        self.ep.events.append(RecvCompleted(recv))

    @staticmethod
    def _rsp(req: Req, rc: int, modified_length: int = 0,
             rsp_list: int = RspList.EXPECTED) -> TargetReply:
        return TargetReply(SesResponse(list=rsp_list, opcode=RspOpcode.RESPONSE, return_code=rc,
                                       message_id=req.message_id or 0,
                                       ri_generation=req.ri_generation, job_id=req.job_id,
                                       modified_length=modified_length))

    @staticmethod
    def _rsp_data(req: Req, data: bytes, psn: int, message_offset: int) -> TargetReply:
        hdr: SesResponseData | SesResponseDataSmall
        if req.kind == NextHeader.REQ_STD:
            mid = req.message_id or 0  # a standard header: it has one
            hdr = SesResponseData(opcode=RspOpcode.RESPONSE_W_DATA, return_code=Rc.OK,
                                  message_id=mid, job_id=req.job_id,
                                  read_request_message_id=mid,
                                  payload_length=len(data), modified_length=len(data),
                                  message_offset=message_offset)
        else:
            hdr = SesResponseDataSmall(opcode=RspOpcode.RESPONSE_W_DATA, return_code=Rc.OK,
                                       payload_length=len(data), job_id=req.job_id,
                                       original_request_psn=psn)
        return TargetReply(hdr, data)


#: the Python form of what the C core replaces (``uet.native._ses_core``): the reference its
#: tests hold it to, and what it calls for every packet but one that continues a WRITE
#: message in reassembly with every check passing
REFERENCE = {"handle": Target.handle}


def _use_c_core() -> str:
    """Put the C form of ``handle`` in Target's class (not under ``UET_PURE_PYTHON=1``, nor
    when the extension was not built); returns ``"native"`` or ``"python"``."""
    from uet.native._common import load_core

    core = load_core("_ses_core")
    if core is None:
        return "python"
    from uet.ses.reassembly import Intervals
    from uet.wire.records import SesStandard

    core.configure(Target, Intervals, MessageState, SesStandard,
                   {"rud": DeliveryMode.RUD, "rod": DeliveryMode.ROD, "none": _NONE,
                    "write": int(_WRITE), "som": int(SesFlag.SOM), "ie": _IE, "dc": _DC,
                    "rel": _REL, "perm_write": _PERM_WRITE},
                   REFERENCE["handle"])
    Target.handle = core.handle_method  # type: ignore[method-assign]
    return "native"


#: which form a WRITE packet is taken in: "native" (C) or "python"
IMPLEMENTATION = _use_c_core()
