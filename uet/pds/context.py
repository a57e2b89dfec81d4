"""What the end point hands every PDC: a narrow :class:`PdcContext`.

PDCs (``initiator.py``, ``target.py``), their loss recovery and the RUDI / UUD senders
never import or reach into :class:`~uet.pds.endpoint.PdsEndpoint`; everything they need
from the end point is here, and only here:

* send: :meth:`PdcContext.send_cp` (a control packet), :meth:`~PdcContext.nack` /
  :meth:`~PdcContext.nack_to`, :meth:`~PdcContext.send_frame` (a RUDI response);
* schedule: :meth:`~PdcContext.arm` (a deadline), :meth:`~PdcContext.want_ack` (an ACK to
  build at the next control poll), :meth:`~PdcContext.wake` (data to send at the next data
  poll);
* report: :attr:`~PdcContext.emit` (an event for the SES), :attr:`~PdcContext.counters`,
  :meth:`~PdcContext.log`;
* account: :attr:`~PdcContext.tx_memory`, :attr:`~PdcContext.rx_memory`
  (:class:`MemoryAccount`), response tokens (:meth:`~PdcContext.new_token`);
* life cycle: :meth:`~PdcContext.opened`, :meth:`~PdcContext.closed`,
  :meth:`~PdcContext.free`, :meth:`~PdcContext.unmap`, and the credit hook
  :meth:`~PdcContext.credit_changed` the end point injects.

The end point owns one context and drives the queues it fills (control frames, the ACK
ring, the data ring, the timer heap) from its public ``poll_transmit`` / ``next_deadline``
/ ``handle_timer``. Timer entries are objects with an ``_armed`` deadline and an
``on_timer(now) -> next deadline | None`` method: PDCs, the RUDI initiator, the credit
pacer.
"""

from __future__ import annotations

import heapq
import itertools
from collections import Counter, deque
from collections.abc import Callable
from typing import Any, Protocol

from uet.pds import negotiation
from uet.pds.config import PdsConfig
from uet.pds.events import PdcClosed, PdcOpened, PdsEvent
from uet.pds.manager import TARGET, PdcBase, PdcManager
from uet.pds.retransmit import nack_name
from uet.wire.constants import CtlType, NackFlag, PdsType
from uet.wire.records import Frame, PdsControl, PdsNack, TssHeader

_CTL_NAMES = {int(c): c.name for c in CtlType}
_RETX = 0x10
_LEARNED_MAX = 65536


def tss_marker(sdi: int | None) -> TssHeader | None:
    """What a frame to be sealed in secure domain ``sdi`` carries in ``Frame.tss`` (the
    TSS sublayer fills in AN, epoch and TSC); None for a cleartext frame."""
    return None if sdi is None else TssHeader(sdi=sdi)


def frame_sdi(frame: Frame) -> int | None:
    """The secure domain a received frame was authenticated in (None: cleartext)."""
    tss = frame.tss
    return None if tss is None else tss.sdi


class Timed(Protocol):
    """A timer entry: ``_armed`` is its deadline (None: none), ``on_timer`` runs it and
    returns the next one."""

    _armed: int | None

    def on_timer(self, now: int) -> int | None: ...


class Sender(Protocol):
    """Something with data to send (initiator PDC, RUDI and UUD senders)."""

    in_ring: bool

    def poll_data(self, now: int) -> Frame | None: ...

    def has_data_work(self) -> bool: ...


class MemoryAccount:
    """Bytes one end point holds for its peers, against a limit (``max_tx_memory_bytes``
    or ``max_rx_memory_bytes``). Senders refused for memory wait on the account and are
    woken (``on_release``) when bytes are released."""

    __slots__ = ("name", "limit", "used", "waiters", "on_release")

    def __init__(self, name: str, limit: int) -> None:
        self.name = name
        self.limit = limit
        self.used = 0
        self.waiters: set[Any] = set()
        self.on_release: Callable[[set[Any]], None] | None = None

    def fits(self, nbytes: int) -> bool:
        """Would ``nbytes`` more stay within the limit? (An empty account always takes
        one item, so a single item larger than the limit still moves.)"""
        return self.used + nbytes <= self.limit or not self.used

    def full(self) -> bool:
        return self.used >= self.limit

    def wait(self, sender: Any) -> None:
        """``sender`` was refused: wake it when bytes are released."""
        self.waiters.add(sender)

    def release(self, nbytes: int) -> None:
        self.used -= nbytes
        if self.waiters:
            self.wake_waiters()

    def wake_waiters(self) -> None:
        waiters = self.waiters
        if waiters and self.on_release is not None:
            self.waiters = set()
            self.on_release(waiters)

    def forget(self, sender: Any) -> None:
        self.waiters.discard(sender)


class PdcContext:
    """The end point's services for its PDCs (see the module docstring)."""

    __slots__ = ("cfg", "local_ip", "rng", "counters", "events", "emit", "tx_memory",
                 "rx_memory", "mgr", "ctrl", "ack_ring", "ring", "heap", "_heap_seq",
                 "_tokens", "_next_token", "log_hook", "credit_changed", "fep_cap",
                 "secure_floor", "secure_learned", "report_acked")

    def __init__(self, cfg: PdsConfig, local_ip: str, mgr: PdcManager[Any, Any], rng: Any,
                 log: Callable[..., None] | None = None) -> None:
        self.cfg = cfg
        self.local_ip = local_ip
        self.rng = rng
        self.mgr = mgr
        self.counters: Counter[str] = Counter()
        self.events: deque[PdsEvent] = deque()
        #: queue an event for the SES / reports (``events.append``)
        self.emit: Callable[[PdsEvent], None] = self.events.append
        #: emit a PacketAcked per released request packet (a driver that ignores them,
        #: like the FEP, turns them off: one event object per packet less)
        self.report_acked = True
        self.tx_memory = MemoryAccount("tx", cfg.max_tx_memory_bytes)
        self.rx_memory = MemoryAccount("rx", cfg.max_rx_memory_bytes)
        self.tx_memory.on_release = self._wake_all
        self.ctrl: deque[Frame] = deque()  # ready control frames (NACK, CP, RUDI_RESP)
        self.ack_ring: deque[Any] = deque()  # target PDCs with an ACK to build
        self.ring: deque[Any] = deque()  # senders with data work (round robin)
        self.heap: list[tuple[int, int, Any]] = []
        self._heap_seq = itertools.count()
        self._tokens: dict[int, Any] = {}
        self._next_token = 1
        self.log_hook = log
        #: a receiver CC call may have produced credit (injected by the end point)
        self.credit_changed: Callable[[int, Any], None] = _no_credit
        #: secured PDCs (ref. 3.2, EXPECTED_0RTT_START): the target's Expected-PSN floor
        #: per SDI, and what each target's closing ACK told us, per (SDI, target address)
        self.secure_floor: dict[int, int] = {}
        self.secure_learned: dict[tuple[int, str], int] = {}
        #: the ``fep_cap`` bits of this end point's UET address (NEGOTIATION)
        self.fep_cap = 0

    # ------------------------------------------------------------------ sending
    def send_frame(self, frame: Frame) -> None:
        """Queue a ready control-class frame (a RUDI response)."""
        self.ctrl.append(frame)

    def send_cp(self, now: int, cp: PdsControl, dst_ip: str, sdi: int | None = None) -> None:
        """Queue a control packet (control EV, control DSCP), sealed in ``sdi`` if given."""
        cfg = self.cfg
        self.ctrl.append(Frame(pds=cp, src_ip=self.local_ip, dst_ip=dst_ip,
                               ev=cfg.control_ev, dscp=cfg.dscp_control,
                               tss=tss_marker(sdi)))
        self.counters["cp_tx." + _CTL_NAMES.get(cp.ctl_type, str(cp.ctl_type))] += 1

    def nack(self, now: int, frame: Frame, code: int, psn: int, spdcid: int, dpdcid: int,
             payload: int = 0, why: str = "", nt: bool = False, ccx: Any = None) -> None:
        """Queue a NACK answering ``frame`` (EV echoed, M/RETX copied, ref. 2.6), in the
        secure domain ``frame`` came in."""
        flags = (0x20 if frame.ecn == 3 else 0) | (frame.pds.flags & _RETX)
        self.nack_to(now, frame.src_ip, frame.ev, flags, code, psn, spdcid, dpdcid, payload,
                     why, nt, ccx, frame_sdi(frame))

    def nack_to(self, now: int, dst_ip: str, ev: int, flags: int, code: int, psn: int,
                spdcid: int, dpdcid: int, payload: int = 0, why: str = "",
                nt: bool = False, ccx: Any = None, sdi: int | None = None) -> None:
        """Queue a NACK to ``dst_ip`` (``flags``: M / RETX of the packet it answers).
        ``ccx``: the receiver's CCX state source (``nack_state(now)``): the NACK goes as a
        NACK_CCX carrying it (ref 2.6)."""
        flags &= 0x30
        if nt:
            flags |= NackFlag.NT
        nack = PdsNack(flags=flags, nack_code=code, nack_psn=psn, spdcid=spdcid,
                       dpdcid=dpdcid, payload=payload)
        if ccx is not None:
            nack.type = PdsType.NACK_CCX
            nack.nccx_type, nack.nccx_state1, nack.nccx_state2 = ccx.nack_state(now)
            self.counters["nack_ccx_tx"] += 1
        self.ctrl.append(Frame(pds=nack, src_ip=self.local_ip, dst_ip=dst_ip, ev=ev,
                               dscp=self.cfg.dscp_control, tss=tss_marker(sdi)))
        name = nack_name(code)
        self.counters["nack_tx." + name] += 1
        self.log(now, "nack_tx", code=name, why=why, psn=psn, peer=dst_ip,
                 **({"ccx": True} if ccx is not None else {}))

    def negotiation_payload(self, *, reply: bool, ccx: bool) -> int:
        """Our capabilities as a NEGOTIATION payload (:mod:`uet.pds.negotiation`)."""
        cfg = self.cfg
        return negotiation.encode(negotiation.Capabilities(
            self.fep_cap, cfg.mp_range // 128, cfg.mtu_payload, ccx=ccx, reply=reply))

    # ------------------------------------------------------------------ secured PDCs
    def learn_start(self, sdi: int, peer: str, epsn: int) -> None:
        """A target's closing ACK told us its Expected PSN for ``sdi``: the Start_PSN our
        next secured PDC to it uses (kept if later than what we knew; bounded table)."""
        key = (sdi, peer)
        old = self.secure_learned.get(key)
        if old is not None and ((epsn - old) & 0xFFFFFFFF) >= 0x80000000:
            return
        if old is None and len(self.secure_learned) >= _LEARNED_MAX:
            self.secure_learned.pop(next(iter(self.secure_learned)))
        self.secure_learned[key] = epsn & 0xFFFFFFFF

    # ------------------------------------------------------------------ scheduling
    def arm(self, obj: Any, t: int) -> None:
        """Make sure ``obj.on_timer`` runs at ``t`` or earlier."""
        armed = obj._armed
        if armed is None or t < armed:
            obj._armed = t
            heapq.heappush(self.heap, (t, next(self._heap_seq), obj))

    def want_ack(self, pdc: Any) -> None:
        """``pdc`` has an ACK to build at the next control poll."""
        if not pdc.in_ack_ring:
            pdc.in_ack_ring = True
            self.ack_ring.append(pdc)

    def wake(self, sender: Any) -> None:
        """``sender`` has data to send at the next data poll."""
        if not sender.in_ring:
            sender.in_ring = True
            self.ring.append(sender)

    def _wake_all(self, senders: set[Any]) -> None:
        for sender in senders:
            if sender.has_data_work():
                self.wake(sender)

    # ------------------------------------------------------------------ reporting
    def log(self, now: int, kind: str, **fields: Any) -> None:
        if self.log_hook is not None:
            self.log_hook(now, kind, **fields)

    def new_token(self, entry: Any) -> int:
        """A ``respond`` token for a delivered request (``entry.pdc`` answers it)."""
        token = self._next_token
        self._next_token = token + 1
        self._tokens[token] = entry
        return token

    def take_token(self, token: int) -> Any:
        return self._tokens.pop(token, None)

    def drop_token(self, token: int) -> None:
        self._tokens.pop(token, None)

    @property
    def open_tokens(self) -> int:
        return len(self._tokens)

    # ------------------------------------------------------------------ life cycle
    def opened(self, now: int, pdc: PdcBase) -> None:
        """``pdc`` is open (initiator: created; target: established)."""
        self.emit(PdcOpened(pdc.pdc_id, pdc.role, pdc.peer_ip, pdc.mode))
        self.counters["opened"] += 1
        self.counters["opened." + pdc.role] += 1
        self.log(now, "pdc_open", pdc_id=pdc.pdc_id, role=pdc.role, peer=pdc.peer_ip,
                 mode=pdc.mode.name, start_psn=pdc.start_psn)

    def closed(self, now: int, pdc: PdcBase, error: bool, reason: str) -> None:
        """``pdc`` just entered CLOSED or ERROR: report it and start its linger."""
        self.emit(PdcClosed(pdc.pdc_id, error, pdc.role, reason))
        self.counters["closed_in_error" if error else "closed"] += 1
        self.log(now, "pdc_close", pdc_id=pdc.pdc_id, role=pdc.role, peer=pdc.peer_ip,
                 error=error, reason=reason)
        self.tx_memory.forget(pdc)
        # a target closed in error never had the initiator's CLOSE: the initiator may still
        # retransmit its first packets with SYN, so the target remembers it until it cannot
        linger = self.cfg.error_linger_ps() if error and pdc.role == TARGET else self.cfg.msl_ps
        for old in self.mgr.start_linger(pdc, now + linger):
            old.free_now()
        self.arm(pdc, pdc.linger_until)

    def free(self, pdc: PdcBase) -> None:
        """Forget ``pdc`` (its ID becomes reusable); it stops answering timers."""
        self.mgr.free(pdc)
        pdc._armed = None

    def linger_over(self, pdc: PdcBase) -> None:
        """``pdc``'s MSL ended: forget it and drop it from the lingering set."""
        self.mgr.drop_lingering(pdc)
        pdc._armed = None

    def unmap(self, pdc: PdcBase) -> None:
        """New requests no longer join ``pdc`` (it is closing)."""
        self.mgr.unmap_initiator(pdc)


def _no_credit(now: int, pdc: Any) -> None:
    return None


__all__ = ["MemoryAccount", "PdcContext", "Sender", "Timed", "frame_sdi", "tss_marker"]
