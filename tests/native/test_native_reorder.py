"""ReorderBuffer: explicit cases for both implementations (random runs: test_native_stateful)."""

from __future__ import annotations

import gc
import weakref
from types import ModuleType

import pytest

from uet.native import InsertResult

M32 = 0xFFFFFFFF
OK, DUP, FULL, STALE, OOR = (
    InsertResult.OK,
    InsertResult.DUPLICATE,
    InsertResult.FULL,
    InsertResult.STALE,
    InsertResult.OUT_OF_RANGE,
)


class Obj:
    def __init__(self, name: str) -> None:
        self.name = name


def test_in_order_item_released_immediately(impl: ModuleType) -> None:
    r = impl.ReorderBuffer(4, 1000, 7)
    assert r.insert(7, "a", 10) == OK
    assert (r.items, r.bytes) == (1, 10)
    assert r.pop_ready() == ["a"]
    assert (r.items, r.bytes, r.next_psn) == (0, 0, 8)
    assert r.pop_ready() == []


def test_gap_fill_releases_run(impl: ModuleType) -> None:
    r = impl.ReorderBuffer(10, 10_000, M32 - 1)  # the run wraps at 2**32
    for psn, item in ((1, "d"), (0, "c"), (M32, "b"), (3, "f")):
        assert r.insert(psn, item, 100) == OK
    assert r.pop_ready() == []
    assert (r.items, r.bytes, r.next_psn) == (4, 400, M32 - 1)
    assert r.insert(M32 - 1, "a", 1) == OK
    assert r.pop_ready() == ["a", "b", "c", "d"]
    assert (r.items, r.bytes, r.next_psn) == (1, 100, 2)
    assert 3 in r and 2 not in r and "x" not in r
    assert r.insert(2, "e", 5) == OK
    assert r.pop_ready() == ["e", "f"]
    assert (r.items, r.bytes, r.next_psn) == (0, 0, 4)


def test_statuses(impl: ModuleType) -> None:
    r = impl.ReorderBuffer(2, 300, 100, max_distance=50)
    assert r.insert(99, "old", 1) == STALE
    assert r.insert((100 - 2**31) & M32, "old", 1) == STALE
    assert r.insert(150, "far", 1) == OOR
    assert r.insert(149, "edge", 100) == OK
    assert r.insert(149, "again", 1) == DUP
    assert r.insert(101, "b", 201) == FULL  # bytes
    assert r.insert(101, "b", 200) == OK
    assert r.insert(102, "c", 0) == FULL  # items
    assert (r.items, r.bytes) == (2, 300)
    # the in-order item is always accepted, so a full buffer can drain
    assert r.insert(100, "a", 5000) == OK
    assert (r.items, r.bytes) == (3, 5300)
    assert r.pop_ready() == ["a", "b"]
    assert (r.items, r.bytes, r.next_psn) == (1, 100, 102)
    assert r.insert(102, "c", 0) == OK


def test_zero_limits(impl: ModuleType) -> None:
    r = impl.ReorderBuffer(1, 0, 0, max_distance=1)
    assert r.insert(1, "x", 0) == OOR
    assert r.insert(0, "x", 10) == OK
    assert r.insert(0, "y", 10) == DUP
    assert r.pop_ready() == ["x"]


def test_bad_arguments(impl: ModuleType) -> None:
    with pytest.raises(ValueError, match="max_items"):
        impl.ReorderBuffer(0, 10, 0)
    with pytest.raises(ValueError, match="max_items"):
        impl.ReorderBuffer(-1, 10, 0)
    with pytest.raises(ValueError, match="max_bytes"):
        impl.ReorderBuffer(1, -1, 0)
    with pytest.raises(ValueError, match="max_distance"):
        impl.ReorderBuffer(1, 10, 0, max_distance=(1 << 20) + 1)
    with pytest.raises(ValueError, match="next_psn"):
        impl.ReorderBuffer(1, 10, 1 << 32)
    r = impl.ReorderBuffer(4, 100, 0)
    with pytest.raises(ValueError, match="psn"):
        r.insert(-1, "x", 1)
    with pytest.raises(ValueError, match="nbytes"):
        r.insert(1, "x", -1)
    with pytest.raises(ValueError, match="nbytes"):
        r.insert(1, "x", 1 << 32)
    with pytest.raises(TypeError):
        r.insert(1.0, "x", 1)
    with pytest.raises(ValueError, match="next_psn"):
        r.reset(-5)
    assert (r.items, r.bytes, r.next_psn) == (0, 0, 0)
    assert r.insert(1, "x", 1) == OK  # still usable


def test_reset(impl: ModuleType) -> None:
    r = impl.ReorderBuffer(8, 1000, 0)
    for psn in (2, 3, 5):
        r.insert(psn, psn, 10)
    assert r.reset(M32) == 3
    assert (r.items, r.bytes, r.next_psn) == (0, 0, M32)
    assert r.insert(0, "b", 1) == OK
    assert r.insert(M32, "a", 1) == OK
    assert r.pop_ready() == ["a", "b"]


def test_items_kept_alive_then_freed(impl: ModuleType) -> None:
    r = impl.ReorderBuffer(100, 10**6, 0)
    refs = []
    for psn in range(1, 40):
        obj = Obj(f"p{psn}")
        refs.append(weakref.ref(obj))
        assert r.insert(psn, obj, 1) == OK
    rejected = Obj("dup")
    rej_ref = weakref.ref(rejected)
    assert r.insert(5, rejected, 1) == DUP
    del obj, rejected
    gc.collect()
    assert rej_ref() is None
    assert all(ref() is not None for ref in refs)  # held by the buffer only
    first = Obj("p0")
    r.insert(0, first, 1)
    del first
    out = r.pop_ready()
    assert [o.name for o in out] == [f"p{i}" for i in range(40)]
    del out
    gc.collect()
    assert all(ref() is None for ref in refs)
    # reset and garbage collection of the buffer drop what it holds
    kept = [Obj("k1"), Obj("k2")]
    kept_refs = [weakref.ref(o) for o in kept]
    r.insert(50, kept[0], 1)
    r.insert(51, kept[1], 1)
    del kept
    assert r.reset(0) == 2
    assert all(ref() is None for ref in kept_refs)
    last = Obj("last")
    last_ref = weakref.ref(last)
    r.insert(9, last, 1)
    del last, r
    gc.collect()
    assert last_ref() is None


def test_large_distance_growth(impl: ModuleType) -> None:
    r = impl.ReorderBuffer(10_000, 10**9, 5, max_distance=1 << 20)
    psns = [5 + (1 << 20) - 1, 5 + 70_000, 5 + 1000, 6, 5 + 17]
    for psn in psns:
        assert r.insert(psn, psn, 1) == OK
    assert r.insert(5 + (1 << 20), "x", 1) == OOR
    assert r.insert(5, 5, 1) == OK
    assert r.pop_ready() == [5, 6]
    for psn in range(7, 5 + 1000):
        if psn != 5 + 17:
            assert r.insert(psn, psn, 1) == OK
    assert r.pop_ready() == list(range(7, 5 + 1001))
    assert r.items == 2 and r.next_psn == 5 + 1001


def test_many_cycles_reuse_slots(impl: ModuleType) -> None:
    r = impl.ReorderBuffer(64, 64 * 1500, 0, max_distance=128)
    psn = 0
    released = []
    for _ in range(200):
        block = list(range(psn, psn + 32))
        for p in reversed(block):
            assert r.insert(p & M32, p, 1500) == OK
        released += r.pop_ready()
        psn += 32
    assert released == list(range(psn))
    assert (r.items, r.bytes) == (0, 0)
