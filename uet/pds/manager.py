"""The PDC manager of one end point: PDC tables, 16-bit PDC IDs, limits and lingering.

Initiator PDCs are found by {delivery mode, job, local address, remote address, traffic
class}; target PDCs by {source address, destination address, initiator SPDCID} (ref. 3.1).
Both kinds share one PDC-ID space (an arriving packet's DPDCID names the PDC directly).
IDs are 16-bit with 0 reserved, drawn from the end point's seeded rng, and an ID stays
taken while its closed PDC lingers (MSL), so a late packet never reaches a new PDC.
"""

from __future__ import annotations

import random
from collections import deque
from enum import Enum, IntEnum
from typing import Any, ClassVar, Generic, Protocol, TypeVar, cast

from uet.pds.config import PdsConfig
from uet.pds.states import LINGERING, PdcStateError

INITIATOR = "initiator"
TARGET = "target"


class PdcBase:
    """What every PDC has: identity, its role's state machine, timer bookkeeping.

    ``ctx`` is the :class:`~uet.pds.context.PdcContext` the end point hands it: the only
    way a PDC reaches the end point. ``state`` changes only through :meth:`transition`
    (the role's table in :mod:`uet.pds.states`)."""

    __slots__ = ("ctx", "pdc_id", "role", "state", "peer_ip", "mode", "key", "_armed",
                 "linger_until", "sdi", "job")

    #: the role's transition table (set by the subclass)
    TRANSITIONS: ClassVar[dict[tuple[Any, Any], Any]] = {}
    #: the role's FREED state (set by the subclass)
    FREED: ClassVar[Any] = None
    start_psn: int  # both roles have one (a slot of the subclass)

    def __init__(self, ctx: Any, pdc_id: int, role: str, peer_ip: str, mode: Any, key: tuple,
                 state: IntEnum) -> None:
        self.ctx = ctx
        self.pdc_id = pdc_id
        self.role = role
        self.peer_ip = peer_ip
        self.mode = mode
        self.key = key
        self.state: Any = state
        self._armed: int | None = None
        self.linger_until = 0
        #: the secure domain (TSS SDI) of a secured PDC: every frame it sends is sealed in
        #: it and only frames authenticated in it are taken (None: cleartext PDC)
        self.sdi: int | None = None
        #: the job the PDC carries (initiator: its key's job; target: set by the end point
        #: from the first request, or the domain's job): a request naming another is refused
        self.job: int | None = None

    def transition(self, event: Enum) -> Any:
        """Apply ``event`` to the state machine; :class:`PdcStateError` if the role's table
        has no such transition from the current state."""
        new = self.TRANSITIONS.get((self.state, event))
        if new is None:
            raise PdcStateError(self, event)
        self.state = new
        return new

    @property
    def lingering(self) -> bool:
        """Closed (normally or in error) and keeping its ID for MSL."""
        return self.state in LINGERING

    @property
    def freed(self) -> bool:
        return self.state is self.FREED

    def free_event(self) -> Enum:
        """The event that frees this PDC in its current state (the subclass knows)."""
        raise NotImplementedError

    def free_now(self) -> None:
        """Forgotten by the manager (linger over, limit, a PENDING PDC reaped, a new
        incarnation of the key): FREED, through the role's table."""
        if self.state is not self.FREED:
            self.transition(self.free_event())
        self._armed = None

    def __repr__(self) -> str:
        return (f"<{type(self).__name__} id={self.pdc_id} {self.state.name} peer={self.peer_ip} "
                f"mode={getattr(self.mode, 'name', self.mode)}>")


#: the initiator and target PDC classes a manager holds (``uet.pds.initiator`` and
#: ``uet.pds.target`` build on this module, so it names them only as type parameters)
InitiatorT = TypeVar("InitiatorT", bound=PdcBase)
TargetT = TypeVar("TargetT", bound=PdcBase)


class Reclaimable(Protocol):
    """What the reclaim scan reads of a target PDC (``uet.pds.target.TargetPdc``)."""

    peer_ip: str
    last_rx: int
    tracker: Any  # its received_count orders the candidates

    def idle_for_reclaim(self) -> bool: ...


class PdcManager(Generic[InitiatorT, TargetT]):
    """PDC tables and resource accounting of one end point (``PdcManager[InitiatorPdc,
    TargetPdc]`` in :class:`~uet.pds.endpoint.PdsEndpoint`)."""

    __slots__ = ("cfg", "rng", "by_id", "ini_by_key", "tgt_by_key", "lingering",
                 "n_initiator", "n_target", "per_source", "n_bitmaps", "n_ccc", "reclaiming")

    def __init__(self, cfg: PdsConfig, rng: random.Random) -> None:
        self.cfg = cfg
        self.rng = rng
        self.by_id: dict[int, InitiatorT | TargetT] = {}
        self.ini_by_key: dict[tuple, InitiatorT] = {}
        self.tgt_by_key: dict[tuple, TargetT] = {}
        self.lingering: deque[PdcBase] = deque()
        self.n_initiator = 0  # open (not lingering) initiator PDCs
        self.n_target = 0  # open (including PENDING) target PDCs
        self.per_source: dict[str, int] = {}  # open target PDCs per source address
        self.n_bitmaps = 0  # PSN-tracking bitmaps held (established target PDCs)
        self.n_ccc = 0  # congestion-control contexts held (PDCs opened by CC packets)
        self.reclaiming = 0  # idle target PDCs asked to close to make room (CLOSE_REQ)

    # ------------------------------------------------------------------ IDs and limits
    def can_open(self, role: str) -> bool:
        if role == INITIATOR:
            return self.n_initiator < self.cfg.max_initiator_pdcs
        return self.n_target < self.cfg.max_target_pdcs

    def source_full(self, src: str) -> bool:
        """``src`` already holds ``max_target_pdcs_per_source`` open target PDCs."""
        limit = self.cfg.max_target_pdcs_per_source
        return bool(limit) and self.per_source.get(src, 0) >= limit

    def bitmap_free(self) -> bool:
        limit = self.cfg.max_rx_bitmaps
        return not limit or self.n_bitmaps < limit

    def ccc_free(self) -> bool:
        limit = self.cfg.max_cc_contexts
        return not limit or self.n_ccc < limit

    def take_bitmap(self, pdc: Any) -> bool:
        """Give an established target PDC its PSN-tracking bitmap (``max_rx_bitmaps``);
        False when every bitmap is taken."""
        if pdc.holds_bitmap:
            return True
        limit = self.cfg.max_rx_bitmaps
        if limit and self.n_bitmaps >= limit:
            return False
        pdc.holds_bitmap = True
        self.n_bitmaps += 1
        return True

    def take_ccc(self, pdc: Any) -> bool:
        """Give a target PDC opened by a congestion-controlled packet its CC context
        (``max_cc_contexts``); False when every context is taken."""
        limit = self.cfg.max_cc_contexts
        if limit and self.n_ccc >= limit:
            return False
        pdc.holds_ccc = True
        self.n_ccc += 1
        return True

    def release_resources(self, pdc: Any) -> None:
        """A target PDC closed (or was reaped): its bitmap and CC context are free."""
        if pdc.holds_bitmap:
            pdc.holds_bitmap = False
            self.n_bitmaps -= 1
        if pdc.holds_ccc:
            pdc.holds_ccc = False
            self.n_ccc -= 1
        if pdc.reclaim:
            pdc.reclaim = False
            self.reclaiming -= 1

    def reclaim_candidate(self, src: str | None) -> Any:
        """The idle target PDC (nothing pending at the SES or owed, no close
        asked yet) that received the fewest packets, the one heard from least recently
        among those, of source ``src`` when given: the one to ask to close when a new PDC
        finds the table full. Fewest packets first, so that a burst of SYNs (one packet
        each) cannot push out an established peer that merely went quiet. None when a
        reclaim is already under way or nothing is idle (one scan per reclaim, so a SYN
        flood against a full table costs one scan per Close_REQ_Time, not one per SYN)."""
        if self.reclaiming:
            return None
        best = None
        best_key: tuple[int, int] = (0, 0)
        for pdc in cast("list[Reclaimable]", list(self.tgt_by_key.values())):
            if src is not None and pdc.peer_ip != src:
                continue
            if not pdc.idle_for_reclaim():
                continue
            key = (pdc.tracker.received_count, pdc.last_rx)
            if best is None or key < best_key:
                best, best_key = pdc, key
        return best

    def _target_gone(self, pdc: PdcBase) -> None:
        n = self.per_source.get(pdc.peer_ip, 0) - 1
        if n > 0:
            self.per_source[pdc.peer_ip] = n
        else:
            self.per_source.pop(pdc.peer_ip, None)

    def alloc_id(self) -> int | None:
        """A free PDC ID (1..65535) chosen by the rng, or None if every ID is taken."""
        by_id = self.by_id
        if len(by_id) >= 65535:
            return None
        for _ in range(16):
            pid = self.rng.randrange(1, 65536)
            if pid not in by_id:
                return pid
        start = self.rng.randrange(1, 65536)
        for i in range(65535):
            pid = (start - 1 + i) % 65535 + 1
            if pid not in by_id:
                return pid
        return None  # pragma: no cover - guarded by the length check

    def register_initiator(self, pdc: InitiatorT) -> None:
        self.by_id[pdc.pdc_id] = pdc
        self.ini_by_key[pdc.key] = pdc
        self.n_initiator += 1

    def register_target(self, pdc: TargetT) -> None:
        self.by_id[pdc.pdc_id] = pdc
        self.tgt_by_key[pdc.key] = pdc
        self.n_target += 1
        self.per_source[pdc.peer_ip] = self.per_source.get(pdc.peer_ip, 0) + 1

    def unmap_initiator(self, pdc: PdcBase) -> None:
        """Stop new requests from joining ``pdc`` (it is closing)."""
        if self.ini_by_key.get(pdc.key) is pdc:
            del self.ini_by_key[pdc.key]

    # ------------------------------------------------------------------ closing
    def start_linger(self, pdc: PdcBase, until: int) -> list[PdcBase]:
        """Move ``pdc`` (now CLOSED or ERROR) to the lingering set; returns PDCs freed early
        to respect ``max_lingering_pdcs`` (counted by the caller)."""
        if pdc.role == INITIATOR:
            self.n_initiator -= 1
            self.unmap_initiator(pdc)
        else:
            self.n_target -= 1
            self._target_gone(pdc)
        pdc.linger_until = until
        self.lingering.append(pdc)
        evicted = []
        while len(self.lingering) > self.cfg.max_lingering_pdcs:
            old = self.lingering.popleft()
            if not old.freed:
                self.free(old)
                evicted.append(old)
        return evicted

    def free(self, pdc: PdcBase) -> None:
        """Forget ``pdc`` entirely; its ID becomes reusable."""
        if pdc.freed:
            return
        was_lingering = pdc.lingering
        pdc.free_now()
        if self.by_id.get(pdc.pdc_id) is pdc:
            del self.by_id[pdc.pdc_id]
        if pdc.role == INITIATOR:
            self.unmap_initiator(pdc)
        elif self.tgt_by_key.get(pdc.key) is pdc:
            del self.tgt_by_key[pdc.key]
        if not was_lingering:  # freed without lingering (e.g. a reaped PENDING PDC)
            if pdc.role == INITIATOR:
                self.n_initiator -= 1
            else:
                self.n_target -= 1
                self._target_gone(pdc)

    def drop_lingering(self, pdc: PdcBase) -> None:
        """Free a lingering PDC whose MSL expired."""
        self.free(pdc)
        # the deque entry is skipped lazily (freed flag) or removed here when it is first
        while self.lingering and self.lingering[0].freed:
            self.lingering.popleft()

    # ------------------------------------------------------------------ introspection
    def open_pdcs(self, role: str | None = None) -> list[PdcBase]:
        return [p for p in self.by_id.values()
                if not p.lingering and (role is None or p.role == role)]
