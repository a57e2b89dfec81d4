"""Obviously-correct (slow) models of PsnTracker and ReorderBuffer for the native tests."""

from __future__ import annotations

from uet.native import InsertResult, MarkResult, PsnWindowError
from uet.wire.records import psn_add, psn_diff

M32 = 0xFFFFFFFF


class ModelTracker:
    """Set-based PSN tracker written straight from the contract in docs/architecture.md."""

    def __init__(self, start_psn: int, window: int) -> None:
        self.window = window
        self.reset(start_psn)

    def reset(self, start_psn: int) -> None:
        self.base = start_psn
        self.got: set[int] = set()  # received PSNs at or after base
        self.max_psn = psn_add(start_psn, -1)
        self.ooo_count = 0
        self.received_count = 0

    @property
    def cack_psn(self) -> int:
        return psn_add(self.base, -1)

    def _offset(self, psn: int) -> int:
        return psn_diff(psn, self.base)

    def _take(self, psn: int) -> None:
        self.got.add(psn)
        self.received_count += 1
        if psn_diff(psn, self.max_psn) > 0:
            self.max_psn = psn

    def _advance(self) -> None:
        while self.base in self.got:
            self.got.remove(self.base)
            self.base = psn_add(self.base, 1)

    def mark(self, psn: int) -> MarkResult:
        off = self._offset(psn)
        if off < 0:
            return MarkResult.STALE
        if off >= self.window:
            return MarkResult.OUT_OF_WINDOW
        if psn in self.got:
            return MarkResult.DUPLICATE
        self._take(psn)
        if off:
            self.ooo_count += 1
        self._advance()
        return MarkResult.NEW

    def is_received(self, psn: int) -> bool:
        off = self._offset(psn)
        return off < 0 or (off < self.window and psn in self.got)

    def sack_bitmap(self, base: int) -> int:
        return sum(1 << i for i in range(64) if self.is_received(psn_add(base, i)))

    def count_received_in(self, start: int, n: int) -> int:
        return sum(self.is_received(psn_add(start, i)) for i in range(n))

    def missing(self, limit: int = 64, end: int | None = None) -> list[int]:
        end = self.max_psn if end is None else end
        span = min(psn_diff(end, self.base) + 1, self.window)
        out = []
        for i in range(span):
            if len(out) >= limit:
                break
            if psn_add(self.base, i) not in self.got:
                out.append(psn_add(self.base, i))
        return out

    def mark_cumulative(self, psn: int) -> list[int]:
        off = self._offset(psn)
        if off < 0:
            return []
        if off >= self.window:
            raise PsnWindowError(psn)
        new = [psn_add(self.base, i) for i in range(off + 1)]
        new = [p for p in new if p not in self.got]
        for p in new:
            self._take(p)
        if psn_diff(psn, self.max_psn) > 0:
            self.max_psn = psn
        self._advance()
        return new

    def mark_bitmap(self, base: int, bitmap: int) -> list[int]:
        new = []
        for i in range(64):
            psn = psn_add(base, i)
            if bitmap >> i & 1 and 0 <= self._offset(psn) < self.window and psn not in self.got:
                self._take(psn)
                new.append(psn)
        self._advance()
        return new

    # combined operations, defined by the elementary ones
    def on_packet(self, psn: int) -> tuple[MarkResult, bool, int]:
        in_order = psn == self.base
        result = self.mark(psn)
        return result, in_order and result == MarkResult.NEW, self.ooo_count

    def classify(self, psn: int) -> MarkResult:
        off = self._offset(psn)
        if off < 0:
            return MarkResult.STALE
        if off >= self.window:
            return MarkResult.OUT_OF_WINDOW
        return MarkResult.DUPLICATE if psn in self.got else MarkResult.NEW

    def ack_state(self, base: int | None = None) -> tuple[int, int]:
        return self.cack_psn, self.sack_bitmap(psn_add(self.cack_psn, 1) if base is None else base)

    def apply_ack(self, cack: int, sack_base: int, bitmap: int) -> list[int]:
        return self.mark_cumulative(cack) + self.mark_bitmap(sack_base, bitmap)

    def mark_many(self, psns: list[int]) -> int:
        return [self.mark(p) for p in psns].count(MarkResult.NEW)


class ModelReorder:
    """Dict-based ROD reorder buffer written straight from the contract."""

    def __init__(self, max_items: int, max_bytes: int, next_psn: int, max_distance: int) -> None:
        self.max_items, self.max_bytes, self.max_distance = max_items, max_bytes, max_distance
        self.next_psn = next_psn
        self.held: dict[int, tuple[object, int]] = {}

    @property
    def items(self) -> int:
        return len(self.held)

    @property
    def bytes(self) -> int:
        return sum(n for _, n in self.held.values())

    def insert(self, psn: int, item: object, nbytes: int) -> InsertResult:
        off = psn_diff(psn, self.next_psn)
        if off < 0:
            return InsertResult.STALE
        if off >= self.max_distance:
            return InsertResult.OUT_OF_RANGE
        if psn in self.held:
            return InsertResult.DUPLICATE
        if off > 0 and (self.items + 1 > self.max_items or self.bytes + nbytes > self.max_bytes):
            return InsertResult.FULL
        self.held[psn] = (item, nbytes)
        return InsertResult.OK

    def pop_ready(self) -> list:
        out = []
        while self.next_psn in self.held:
            out.append(self.held.pop(self.next_psn)[0])
            self.next_psn = psn_add(self.next_psn, 1)
        return out

    def reset(self, next_psn: int) -> int:
        dropped = len(self.held)
        self.held.clear()
        self.next_psn = next_psn
        return dropped
