"""The operation API of one fabric host, under Trio: ``await fab.ep(0).write(1, ...)``.

A :class:`Host` is a façade bound to host ``index`` of a :class:`~uet.runtime.fabric.Fabric`
whose end points are :class:`uet.endpoint.fep.FabricEndpoint`. Every operation is started at once,
at the current fabric time, through ``fab.submit`` (so profile checks raise
:class:`~uet.profiles.ProfileError` at the call, before anything is sent) and returns a
handle you ``await``:

* :class:`PendingOp` for initiator operations: ``await`` gives an
  :class:`~uet.ses.errors.OperationResult` or raises :class:`~uet.ses.errors.SesError`
  carrying the return code;
* :class:`PendingRecv` for posted receives: ``await`` gives a :class:`RecvResult`.

Waiting uses ``fab.wait_until`` in fabric time; a ``timeout_ps`` that expires raises
:class:`OperationTimeout` (the operation keeps running; wait again or abandon it).
Destinations are a host index, an IP address or another :class:`Host`.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from uet.errors import RemoteError
from uet.ses.errors import OperationResult, SesError
from uet.ses.matching import Receive
from uet.ses.memory import MemoryRegion, Perm
from uet.ses.messages import TargetAddr
from uet.wire.constants import (
    AtomicDatatype,
    AtomicOpcode,
    DeliveryMode,
    RspList,
    SesOpcode,
    enum_member,
)
from uet.wire.constants import ReturnCode as Rc

if TYPE_CHECKING:
    from uet.endpoint.fep import FabricEndpoint
    from uet.ses.initiator import Operation

__all__ = ["Host", "HostFabric", "OperationTimeout", "PendingOp", "PendingRecv", "RecvResult",
           "Region"]


class HostFabric(Protocol):
    """What a :class:`Host` needs of its fabric (``uet.runtime.fabric.Fabric``, a live
    fabric, or ``uet.runtime.udp``'s one-host stand-in): the fabric module sits above this
    one and is never imported here."""

    net: Any

    @property
    def now(self) -> int: ...

    def endpoint(self, index: int) -> Any: ...

    def host_index(self, ip: str | None) -> int | None: ...

    def host_ip(self, host: Any) -> str: ...

    def submit(self, host: int, fn: Callable[[Any, int], Any]) -> Any: ...

    async def wait_until(self, pred: Callable[[], bool],
                         timeout_ps: int | None = None) -> bool: ...


class OperationTimeout(RemoteError, TimeoutError):
    """An operation or receive did not complete within its ``timeout_ps`` of fabric time."""

    def __init__(self, what: str, host: str, timeout_ps: int, now_ps: int) -> None:
        self.what = what
        self.host = host
        self.timeout_ps = timeout_ps
        self.now_ps = now_ps
        super().__init__(f"{what} on {host} not complete after {timeout_ps} ps of fabric time "
                         f"(now {now_ps} ps); it is still pending")


@dataclass(frozen=True, slots=True)
class RecvResult:
    """A completed receive.

    ``data``: the bytes placed (the first ``length`` bytes of the buffer; after a tagged
    atomic, the whole buffer it worked on); ``request_length``:
    what the sender sent (more than ``length`` when ``truncated``); ``tag``: the sender's
    match bits (tagged receives); ``src`` / ``src_host``: the sender's IP and host index;
    ``unexpected``: the message waited in the unexpected list (arrived before the receive
    was posted); ``opcode``: how it was sent (SEND, TAGGED_SEND, RENDEZVOUS_SEND ...).
    """

    data: bytes = field(repr=False)
    length: int
    request_length: int
    truncated: bool
    tag: int | None
    src: str | None
    src_host: int | None
    header_data: int | None
    unexpected: bool
    opcode: SesOpcode | None


_TAGGED_ATOMICS = frozenset({SesOpcode.TSEND_ATOMIC, SesOpcode.TSEND_FETCH_ATOMIC})


class _Pending:
    """What the two handles share: waiting in fabric time, ``await`` support."""

    def __init__(self, host: Host, what: str, timeout_ps: int | None) -> None:
        self.host = host
        self.what = what
        self.timeout_ps = timeout_ps

    @property
    def done(self) -> bool:  # pragma: no cover - overridden
        raise NotImplementedError

    def result(self, check: bool = True) -> Any:  # pragma: no cover - overridden
        raise NotImplementedError

    async def wait(self, timeout_ps: int | None = None, *, check: bool = True) -> Any:
        """Wait until complete (at most ``timeout_ps`` of fabric time, default the handle's)
        and return :meth:`result`."""
        timeout = self.timeout_ps if timeout_ps is None else timeout_ps
        fab = self.host.fab
        if not await fab.wait_until(lambda: self.done, timeout):
            raise OperationTimeout(self.what, self.host.name, timeout, fab.now)
        return self.result(check)

    def __await__(self) -> Generator[Any, None, Any]:
        return self.wait().__await__()


class PendingOp(_Pending):
    """An initiator operation in flight; ``await`` it for its :class:`OperationResult`.

    ``op`` is the SES :class:`~uet.ses.initiator.Operation` (``state``, ``return_code``).
    """

    def __init__(self, host: Host, op: Operation, timeout_ps: int | None) -> None:
        super().__init__(host, f"{op.opcode.name} #{op.op_id}", timeout_ps)
        self.op = op

    @property
    def done(self) -> bool:
        return self.op.done

    @property
    def deferred(self) -> bool:
        """A deferrable send the target parked until a receive is posted."""
        return self.op.state == "deferred"

    def result(self, check: bool = True) -> OperationResult:
        """The result; a failed operation raises :class:`SesError` unless ``check=False``
        (then the result carries the return code)."""
        op = self.op
        if check or not op.done or op.return_code == Rc.OK:
            return op.result()
        return OperationResult(op.return_code, op.modified_length, bytes(op.data), op.value,
                               op.rsp_list)

    def abandon(self) -> None:
        """Give up on an operation in flight: MSG_ERROR to the target (it drops what it
        holds of the message) and the operation fails CANCELLED."""
        if not self.op.done:
            self.host._submit(lambda fep, now: fep.call(now, "msg_error", self.op))

    def __repr__(self) -> str:
        return f"<PendingOp {self.what} {self.op.state} on {self.host.name}>"


class PendingRecv(_Pending):
    """A posted receive; ``await`` it for its :class:`RecvResult`."""

    def __init__(self, host: Host, recv: Receive, timeout_ps: int | None) -> None:
        kind = "tagged receive" if recv.tagged else "receive"
        super().__init__(host, f"{kind} #{recv.recv_id}", timeout_ps)
        self.recv = recv

    @property
    def done(self) -> bool:
        return self.recv.done

    @property
    def buffer(self) -> bytearray:
        return self.recv.buffer

    def result(self, check: bool = True) -> RecvResult:
        """The received message; a failed receive (e.g. CANCELLED) raises :class:`SesError`
        unless ``check=False``."""
        r = self.recv
        if not r.done:
            raise RuntimeError(f"{self.what} on {self.host.name} is still pending")
        if check and r.return_code != Rc.OK:
            raise SesError(r.return_code, self.what)
        opcode = SesOpcode(r.opcode) if r.opcode is not None else None
        # a tagged atomic worked somewhere in the buffer: give all of it
        data = r.buffer if opcode in _TAGGED_ATOMICS else r.buffer[:r.length]
        return RecvResult(bytes(data), r.length, r.request_length, r.truncated,
                          r.match_bits, r.src, self.host.fab.host_index(r.src),
                          r.header_data, r.list == RspList.OVERFLOW, opcode)

    def cancel(self) -> bool:
        """Withdraw the receive if nothing matched it yet (it completes CANCELLED)."""
        return self.host._submit(lambda fep, now: fep.cancel_recv(now, self.recv))

    def __repr__(self) -> str:
        state = "done" if self.recv.done else "posted"
        return f"<PendingRecv {self.what} {state} on {self.host.name}>"


class Region:
    """Memory registered on a host: ``buffer`` under ``key`` at resource ``index``."""

    def __init__(self, host: Host, job_id: int, pid_on_fep: int, index: int,
                 mr: MemoryRegion) -> None:
        self.host = host
        self.job_id = job_id
        self.pid_on_fep = pid_on_fep
        self.index = index
        self.mr = mr

    @property
    def key(self) -> int:
        return self.mr.key

    @property
    def buffer(self) -> bytearray:
        return self.mr.buffer

    def deregister(self) -> None:
        """Remove the region: later requests naming its key get BAD_MKEY."""
        self.host.fep.ses.resources.remove_region(self.job_id, self.pid_on_fep, self.index,
                                                  self.mr.key)

    def __repr__(self) -> str:
        return (f"<Region key={self.key:#x} index={self.index} {len(self.buffer)} B "
                f"on {self.host.name}>")


class Host:
    """One fabric host's UET operations (a :class:`uet.endpoint.fep.FabricEndpoint` underneath).

    Common keyword arguments of the operations: ``index`` (the target's resource index,
    default 0), ``job`` (default: this end point's job), ``pid`` (the target's PIDonFEP,
    default 0), ``generation`` (the resource index generation the request names),
    ``mode`` (``"RUD"``, ``"ROD"``, ``"RUDI"``; default: the end point's mode), ``tc``
    (traffic class), ``timeout_ps`` (default :attr:`timeout_ps`, None = no limit).
    """

    def __init__(self, fab: HostFabric, index: int) -> None:
        self.fab = fab
        self.index = index
        ctx = fab.net.hosts[index]
        self.name = ctx.name
        self.ip = ctx.ip
        #: default timeout of this host's operations and receives (fabric ps; None: none)
        self.timeout_ps: int | None = None

    # ------------------------------------------------------------------ plumbing

    @property
    def fep(self) -> FabricEndpoint:
        """The sans-IO end point (SES + PDS + CMS) this host runs."""
        ep = self.fab.endpoint(self.index)
        if not hasattr(ep, "ses"):
            raise TypeError(f"{self.name} runs {type(ep).__name__}, not a uet.endpoint.fep."
                            "FabricEndpoint: build the fabric with Fabric(..., profile=...) "
                            "or endpoint_factory=FabricEndpoint.factory(...)")
        return ep

    @property
    def profile(self) -> Any:
        return self.fep.profile

    @property
    def job(self) -> int:
        """The job ID this end point uses by default."""
        return self.fep.job_id

    @property
    def stats(self) -> dict[str, int]:
        return self.fep.stats

    def _submit(self, fn: Callable[[Any, int], Any]) -> Any:
        self.fep  # noqa: B018 - a clear TypeError before anything runs
        return self.fab.submit(self.index, fn)

    def _target(self, dst: Any, index: int, job: int | None, pid: int,
                generation: int) -> TargetAddr:
        return TargetAddr(self.fab.host_ip(dst), self.job if job is None else job, pid, index,
                          generation)

    def _mode(self, mode: Any) -> DeliveryMode:
        if mode is None:
            return self.fep.mode
        return enum_member(DeliveryMode, mode, "mode")

    def _start(self, method: str, timeout_ps: int | None, *args: Any,
               **kwargs: Any) -> PendingOp:
        op = self._submit(lambda fep, now: fep.call(now, method, *args, **kwargs))
        return PendingOp(self, op, self.timeout_ps if timeout_ps is None else timeout_ps)

    # ------------------------------------------------------------------ memory

    def register(self, buf: bytearray | memoryview, *, key: int, index: int = 0,
                 perms: Perm | str = Perm.ALL, job: int | None = None, base_va: int = 0,
                 idempotent_safe: bool = False) -> Region:
        """Expose ``buf`` to remote WRITE/READ/atomics under memory ``key`` at resource
        ``index``. ``perms``: a :class:`Perm` or letters ``"r"``, ``"w"``, ``"a"``;
        ``base_va``: virtual address of byte 0 (absolute addressing); ``idempotent_safe``:
        allow RUDI requests."""
        if not _writable(buf):
            raise TypeError(f"register: buffer must be a bytearray or a writable memoryview, "
                            f"not {type(buf).__name__}")
        fep = self.fep
        job_id = self.job if job is None else job
        mr = fep.ses.resources.add_region(job_id, fep.ses.pid_on_fep, index, key, buf,
                                          _perms(perms), base_va=base_va,
                                          idempotent_safe=idempotent_safe)
        return Region(self, job_id, fep.ses.pid_on_fep, index, mr)

    def open_index(self, index: int, *, job: int | None = None) -> int:
        """Create resource ``index`` (a receive queue, and a place for regions) so that
        sends reaching it before any receive is posted wait in its unexpected list instead
        of failing BAD_INDEX. Index 0 always exists. Returns its generation."""
        fep = self.fep
        return fep.ses.resources.register(self.job if job is None else job,
                                          fep.ses.pid_on_fep, index).generation

    def bump_generation(self, index: int = 0, *, job: int | None = None) -> int:
        """Invalidate resource ``index``: requests naming the old generation get
        BAD_GENERATION. Returns the new generation."""
        fep = self.fep
        return fep.ses.resources.bump_generation(self.job if job is None else job,
                                                 fep.ses.pid_on_fep, index)

    def generation(self, index: int = 0, *, job: int | None = None) -> int:
        """Current generation of resource ``index`` (what initiators must name)."""
        fep = self.fep
        res = fep.ses.resources.get(self.job if job is None else job, fep.ses.pid_on_fep,
                                    index)
        if res is None:
            raise KeyError(f"{self.name}: no resource index {index}")
        return res.generation

    def set_enabled(self, index: int, enabled: bool, *, job: int | None = None) -> None:
        """Disable (requests get DISABLED) or re-enable resource ``index``."""
        fep = self.fep
        fep.ses.resources.register(self.job if job is None else job, fep.ses.pid_on_fep,
                                   index).enabled = enabled

    # ------------------------------------------------------------------ receives

    def post_recv(self, buf: bytearray | memoryview | int, *, tag: int | None = None,
                  ignore: int = 0, index: int = 0, job: int | None = None,
                  timeout_ps: int | None = None) -> PendingRecv:
        """Post a receive into ``buf`` (or a new buffer of ``buf`` bytes) at resource
        ``index``; tagged when ``tag`` is given, ``ignore`` = wildcard bits (HPC).

        An unexpected message that already arrived and matches completes it at once.
        """
        if not isinstance(buf, int) and not _writable(buf):
            raise TypeError(f"post_recv: buffer must be a bytearray, a writable memoryview "
                            f"or a size, not {type(buf).__name__}")
        recv = self._submit(lambda fep, now: fep.post_recv(now, buf, tag=tag, ignore=ignore,
                                                           resource_index=index,
                                                           job_id=job, register=True))
        return PendingRecv(self, recv, self.timeout_ps if timeout_ps is None else timeout_ps)

    # ------------------------------------------------------------------ two-sided

    def send(self, dst: Any, data: bytes, *, tag: int | None = None,
             rendezvous: bool = False, deferrable: bool = False, index: int = 0,
             job: int | None = None, pid: int = 0, generation: int = 0,
             header_data: int | None = None, mode: Any = None, tc: int | None = None,
             dc: bool = False, timeout_ps: int | None = None) -> PendingOp:
        """SEND ``data`` to a receive at ``dst`` (TAGGED_SEND with ``tag``).

        ``rendezvous=True``: the eager part travels now and the target READs the rest when a
        receive matches; ``deferrable=True``: without a posted receive the target parks the
        send and asks for a restart once one is posted. Completes when the target placed the
        message (in a receive, or in its unexpected list: ``result.list``).
        """
        if rendezvous and deferrable:
            raise ValueError("send: rendezvous and deferrable exclude each other")
        tgt = self._target(dst, index, job, pid, generation)
        kw = dict(header_data=header_data, mode=self._mode(mode),
                  tc=self.fep.tc if tc is None else tc, dc=dc)
        payload = bytes(data)
        if rendezvous:
            return self._start("rendezvous_send", timeout_ps, tgt, payload, match_bits=tag,
                               **kw)
        if deferrable:
            return self._start("deferrable_send", timeout_ps, tgt, payload, match_bits=tag,
                               **kw)
        if tag is not None:
            return self._start("tagged_send", timeout_ps, tgt, payload, tag, **kw)
        return self._start("send", timeout_ps, tgt, payload, **kw)

    def datagram(self, dst: Any, data: bytes, *, index: int = 0, job: int | None = None,
                 pid: int = 0, generation: int = 0, header_data: int | None = None,
                 tc: int | None = None) -> PendingOp:
        """DATAGRAM_SEND over UUD: one packet, unreliable, no response; the handle is done at
        once (the datagram may still be lost)."""
        tgt = self._target(dst, index, job, pid, generation)
        return self._start("datagram_send", None, tgt, bytes(data), header_data=header_data,
                           tc=self.fep.tc if tc is None else tc)

    # ------------------------------------------------------------------ one-sided

    def write(self, dst: Any, key: int, offset: int, data: bytes, *, index: int = 0,
              job: int | None = None, pid: int = 0, generation: int = 0,
              header_data: int | None = None, mode: Any = None, tc: int | None = None,
              dc: bool = False, absolute: bool = False,
              timeout_ps: int | None = None) -> PendingOp:
        """RMA WRITE of ``data`` at ``offset`` of region ``key`` (a virtual address when
        ``absolute``)."""
        tgt = self._target(dst, index, job, pid, generation)
        return self._start("write", timeout_ps, tgt, key, offset, bytes(data),
                           header_data=header_data, mode=self._mode(mode),
                           tc=self.fep.tc if tc is None else tc, dc=dc, absolute=absolute)

    def read(self, dst: Any, key: int, offset: int, length: int, *, index: int = 0,
             job: int | None = None, pid: int = 0, generation: int = 0, mode: Any = None,
             tc: int | None = None, absolute: bool = False,
             timeout_ps: int | None = None) -> PendingOp:
        """RMA READ of ``length`` bytes; the result's ``data`` holds them."""
        tgt = self._target(dst, index, job, pid, generation)
        return self._start("read", timeout_ps, tgt, key, offset, length,
                           mode=self._mode(mode), tc=self.fep.tc if tc is None else tc,
                           absolute=absolute)

    def atomic(self, dst: Any, key: int, offset: int, opcode: AtomicOpcode | str,
               datatype: AtomicDatatype | str, operand: Any = None, *, compare: Any = None,
               mask: Any = None, fetch: bool = False, index: int = 0, job: int | None = None,
               pid: int = 0, generation: int = 0, mode: Any = None, tc: int | None = None,
               absolute: bool = False, timeout_ps: int | None = None) -> PendingOp:
        """One atomic on the element at ``offset`` of region ``key``.

        ``opcode``/``datatype``: enums or names (``"SUM"``, ``"UINT64"``). ``operand``: a
        Python number (complex for complex types) or raw big-endian bytes; ``compare`` for
        CSWAP*, ``mask`` for MSWAP. ``fetch=True`` returns the old value (``result.value``,
        ``result.data``)."""
        tgt = self._target(dst, index, job, pid, generation)
        return self._start("atomic", timeout_ps, tgt, key, offset,
                           enum_member(AtomicOpcode, opcode, "opcode"),
                           enum_member(AtomicDatatype, datatype, "datatype"), operand,
                           compare=compare, mask=mask, fetch=fetch, mode=self._mode(mode),
                           tc=self.fep.tc if tc is None else tc, absolute=absolute)

    def tagged_atomic(self, dst: Any, tag: int, opcode: AtomicOpcode | str,
                      datatype: AtomicDatatype | str, operand: Any = None, *,
                      compare: Any = None, mask: Any = None, fetch: bool = False,
                      offset: int = 0, index: int = 0, job: int | None = None, pid: int = 0,
                      generation: int = 0, mode: Any = None, tc: int | None = None,
                      timeout_ps: int | None = None) -> PendingOp:
        """TSEND_ATOMIC / TSEND_FETCH_ATOMIC: the atomic applies at ``offset`` of the buffer
        of the posted tagged receive it matches (NO_MATCH if none is posted)."""
        tgt = self._target(dst, index, job, pid, generation)
        return self._start("tagged_atomic", timeout_ps, tgt, tag,
                           enum_member(AtomicOpcode, opcode, "opcode"),
                           enum_member(AtomicDatatype, datatype, "datatype"), operand,
                           compare=compare, mask=mask, fetch=fetch, offset=offset,
                           mode=self._mode(mode), tc=self.fep.tc if tc is None else tc)

    def no_op(self, dst: Any, *, index: int = 0, job: int | None = None, pid: int = 0,
              generation: int = 0, mode: Any = None,
              timeout_ps: int | None = None) -> PendingOp:
        """NO_OP: a request the target only checks (job, PID, index) and acknowledges."""
        tgt = self._target(dst, index, job, pid, generation)
        return self._start("no_op", timeout_ps, tgt, mode=self._mode(mode))

    def __repr__(self) -> str:
        return f"<Host {self.index} {self.name} {self.ip}>"


# ---------------------------------------------------------------------- helpers


def _perms(perms: Perm | str) -> Perm:
    if isinstance(perms, str):
        letters = {"r": Perm.READ, "w": Perm.WRITE, "a": Perm.ATOMIC}
        out = Perm(0)
        for ch in perms.lower():
            if ch not in letters:
                raise ValueError(f"perms={perms!r}: use the letters r (READ), w (WRITE), "
                                 "a (ATOMIC)")
            out |= letters[ch]
        return out
    return Perm(perms)


def _writable(buf: Any) -> bool:
    if isinstance(buf, bytearray):
        return True
    return isinstance(buf, memoryview) and not buf.readonly
