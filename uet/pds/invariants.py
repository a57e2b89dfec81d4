"""The liveness invariant of a PDS end point, checked after every call when asked to.

Two promises (design principle 7), checked by :func:`check`:

1. **Nothing waits without a wake-up.** Every PDC (and the RUDI / UUD senders, the credit
   pacer) that has queued, unacknowledged or unanswered work has a packet to send (it is on
   the data or ACK ring) or an armed deadline. A PDC refused for transmit memory may wait
   on the memory account, as long as some bytes are held (their release wakes it). A
   lingering or PENDING PDC has its linger / reap deadline armed.
2. **Every operation ends in bounded time.** A PDC with work releases or fails a packet at
   least every :func:`progress_bound` picoseconds, a bound derived from the configured
   RTO, backoff and retry limit (with the credit wait ``max_rto_ps`` on top); a RUDI
   request ends within the same bound. Checked after ``handle_timer``, when the PDS had
   its chance to act (a driver that runs timers late is not the PDS's fault).

A violation raises :class:`LivenessError` naming the object and its state.

The check runs only when ``UET_CHECK_INVARIANTS=1`` is in the environment when an end point
is built (the test suite sets it, ``tests/conftest.py``): :func:`install` then wraps the
public methods of that :class:`~uet.pds.endpoint.PdsEndpoint` instance, so production
runs execute the unwrapped methods and pay nothing. Each call checks the objects it may
have touched (the PDC a frame, a submit or a response names; the timers that were due; the
senders at the head of the rings) and, every :data:`FULL_SCAN_EVERY` calls or whenever the
end point holds at most :data:`SMALL` objects, every object.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from uet.errors import LocalProtocolError
from uet.wire.constants import NackCode

#: the environment variable that turns the checks on (read when an end point is built)
ENV = "UET_CHECK_INVARIANTS"


def enabled() -> bool:
    """Whether end points built now get the check (``UET_CHECK_INVARIANTS=1``)."""
    return os.environ.get(ENV, "") not in ("", "0")

#: end points with at most this many objects are checked in full after every call
SMALL = 64
#: larger ones are checked in full every this many calls (touched objects every call)
FULL_SCAN_EVERY = 256


class LivenessError(LocalProtocolError):
    """A PDC (or sender) has work and neither a packet to send nor a deadline, or made no
    progress for longer than its configured timers and retry limit allow."""

    def __init__(self, where: str, obj: Any, why: str, now: int) -> None:
        self.obj = obj
        self.why = why
        self.now = now
        super().__init__(f"liveness violated after {where} at t={now} ps: {describe(obj)}: "
                         f"{why}")


def progress_bound(cfg: Any) -> int:
    """Picoseconds within which a PDC with work must release or fail a packet: twice the
    time one packet may spend retrying (RTO with backoff, up to ``max_retries``
    retransmissions, each RTO capped at ``max_rto_ps``; the adaptive RTO may grow to
    ``max_rto_ps``), plus ``max_rto_ps`` of credit wait (RCCC)."""
    return 2 * cfg.retry_span_ps() + cfg.max_rto_ps


def describe(obj: Any) -> str:
    """One line of the state that matters for liveness."""
    parts = [repr(obj)]
    for name in ("queue", "outstanding", "retx", "gtd", "pending"):
        v = getattr(obj, name, None)
        if v is not None and hasattr(v, "__len__"):
            parts.append(f"{name}={len(v)}")
    for name in ("_armed", "in_ring", "in_ack_ring", "next_psn", "max_cack", "peer_range",
                 "close_requested", "last_progress"):
        if hasattr(obj, name):
            parts.append(f"{name}={getattr(obj, name)!r}")
    rec = getattr(obj, "rec", None)
    if rec is not None:
        parts.append(f"rto_at={rec.rto_at} rack_at={rec.rack_at}")
    return " ".join(parts)


# ---------------------------------------------------------------------- per object

def _initiator(ep: Any, pdc: Any, now: int, timers: bool, bound: int) -> str | None:
    if pdc.freed:
        return None
    if pdc.lingering:
        return None if pdc._armed is not None else "lingering without its linger deadline"
    rec = pdc.rec
    work = bool(pdc.queue) or bool(rec.outstanding) or bool(rec.retx)
    if not work:
        return None
    mem = ep.ctx.tx_memory
    if pdc._armed is None and not pdc.in_ring and not (pdc in mem.waiters and mem.used):
        return "work queued or unacknowledged, but no packet to send and no deadline armed"
    if timers and now - pdc.last_progress > bound:
        return (f"no packet released or failed for {now - pdc.last_progress} ps "
                f"(bound {bound} ps)")
    return None


def _target(ep: Any, pdc: Any, now: int, timers: bool, bound: int) -> str | None:
    if pdc.freed:
        return None
    armed = pdc._armed is not None
    if pdc.state.name != "ESTABLISHED":  # PENDING, CLOSED, ERROR: reap / linger
        if not armed:
            return f"{pdc.state.name} without its deadline"
        if pdc.acks.pending and not pdc.in_ack_ring:
            return "an ACK owed but not on the ACK ring"
        return None
    acks = pdc.acks
    if acks.pending and not pdc.in_ack_ring:
        return "an ACK owed but not on the ACK ring"
    if acks.co.due is not None and not armed:
        return "receiver ACK timer set but no deadline armed"
    if pdc.gtd and pdc.cfg.clear_req_ps and (pdc.clear_req_at is None or not armed):
        return "stored responses but no CLEAR_REQ deadline"
    if pdc.close_requested and not armed:
        return "close requested but no Close_REQ_Time deadline"
    if pdc.cfg.target_idle_ps and not armed:
        return "established without its idle deadline"
    return None


def _rudi(ep: Any, rudi: Any, now: int, timers: bool, bound: int) -> str | None:
    if rudi.outstanding or rudi.retx:
        if rudi._armed is None and not rudi.in_ring:
            return "RUDI requests outstanding but no deadline armed"
        if timers and now - rudi.last_progress > bound:
            return (f"no RUDI request answered or failed for {now - rudi.last_progress} ps "
                    f"(bound {bound} ps)")
    elif rudi.queue:
        mem = ep.ctx.tx_memory
        if not rudi.in_ring and not (rudi in mem.waiters and mem.used):
            return "RUDI requests queued but not on the data ring"
    return None


def _uud(ep: Any, uud: Any, now: int, timers: bool, bound: int) -> str | None:
    if uud.queue and not uud.in_ring:
        return "UUD datagrams queued but not on the data ring"
    return None


def _pacer(ep: Any) -> str | None:
    sched = ep.credit_scheduler
    if sched is None:
        return None
    if sched.next_deadline() is not None and ep._credit_pacer._armed is None:
        return "the credit scheduler has work but its timer is not armed"
    return None


def check(ep: Any, now: int, *, timers: bool = False, where: str = "call",
          objects: Iterable[Any] | None = None) -> None:
    """Check the invariant on ``objects`` (None: every object of ``ep``); ``timers``:
    called right after ``handle_timer`` (the progress bound applies)."""
    bound = ep._progress_bound
    pool = ep.mgr.by_id.values() if objects is None else objects
    for obj in pool:
        role = getattr(obj, "role", None)
        if role == "initiator":
            why = _initiator(ep, obj, now, timers, bound)
        elif role == "target":
            why = _target(ep, obj, now, timers, bound)
        else:
            continue
        if why is not None:
            raise LivenessError(where, obj, why, now)
    if objects is None or ep._rudi_ini in objects:
        rudi = ep._rudi_ini
        if rudi is not None:
            why = _rudi(ep, rudi, now, timers, bound)
            if why is not None:
                raise LivenessError(where, rudi, why, now)
    uud = ep._uud
    if uud is not None:
        why = _uud(ep, uud, now, timers, bound)
        if why is not None:
            raise LivenessError(where, uud, why, now)
    why = _pacer(ep)
    if why is not None:
        raise LivenessError(where, ep._credit_pacer, why, now)


# ---------------------------------------------------------------------- installation

def install(ep: Any) -> None:
    """Wrap the public methods of ``ep`` (this instance only) with the check."""
    ep._progress_bound = progress_bound(ep.cfg)
    ep._checks = 0

    def touched_by_frame(frame: Any) -> list[Any]:
        mgr = ep.mgr
        pds = frame.pds
        out = []
        for pid in (getattr(pds, "dpdcid", None),):
            if pid:
                p = mgr.by_id.get(pid)
                if p is not None:
                    out.append(p)
        sp = getattr(pds, "spdcid", None)
        if sp is not None:
            p = mgr.tgt_by_key.get((frame.src_ip, frame.dst_ip, sp))
            if p is not None:
                out.append(p)
        return out

    def after(name: str, now: int, objs: list[Any], timers: bool = False) -> None:
        ep._checks += 1
        full = len(ep.mgr.by_id) <= SMALL or ep._checks % FULL_SCAN_EVERY == 0
        if full:
            check(ep, now, timers=timers, where=name)
        else:
            # objects a call touched may have been freed or replaced: check what is left
            check(ep, now, timers=timers, where=name,
                  objects=[o for o in objs if o is not None] + [ep._rudi_ini])

    submit, receive, respond, reject = ep.submit, ep.receive, ep.respond, ep.reject
    poll, handle = ep.poll_transmit, ep.handle_timer

    def checked_submit(now: int, request: Any) -> None:
        submit(now, request)
        key = (request.mode, request.job_id, ep.local_ip, request.dst_ip, request.tc)
        after("submit", now, [ep.mgr.ini_by_key.get(key)])

    def checked_receive(now: int, frame: Any) -> None:
        receive(now, frame)
        after("receive", now, touched_by_frame(frame))

    def checked_respond(now: int, token: int, response: Any, data: bytes = b"") -> bool:
        entry = ep._tokens.get(token)
        out = respond(now, token, response, data)
        after("respond", now, [getattr(entry, "pdc", None)])
        return out

    def checked_reject(now: int, token: int, code: int = NackCode.NO_SES_MSG_AVAIL) -> bool:
        entry = ep._tokens.get(token)
        out = reject(now, token, code)
        after("reject", now, [getattr(entry, "pdc", None)])
        return out

    def checked_poll(now: int, control: bool) -> Any:
        ring = ep.ack_ring if control else ep.ring
        head = list(ring)[:4]
        out = poll(now, control)
        after("poll_transmit", now, head)
        return out

    def checked_handle(now: int) -> None:
        due = _due(ep.ctx.heap, now)
        handle(now)
        after("handle_timer", now, due, timers=True)

    ep.submit = checked_submit
    ep.receive = checked_receive
    ep.respond = checked_respond
    ep.reject = checked_reject
    ep.poll_transmit = checked_poll
    ep.handle_timer = checked_handle


__all__ = ["ENV", "LivenessError", "enabled", "check", "install", "progress_bound"]


def _due(heap: list[tuple[int, int, Any]], now: int) -> list[Any]:
    """Objects of the heap entries due at ``now``: the subtree of the heap whose keys are
    <= now (O(due), not O(heap))."""
    out = []
    stack = [0] if heap and heap[0][0] <= now else []
    n = len(heap)
    while stack:
        i = stack.pop()
        out.append(heap[i][2])
        for c in (2 * i + 1, 2 * i + 2):
            if c < n and heap[c][0] <= now:
                stack.append(c)
    return out
