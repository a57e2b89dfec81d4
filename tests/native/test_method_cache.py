"""The C cores' method calls by name (uet/native/method_cache.h): the function found for a
class is kept while the class is unchanged, and every case where the instance or a custom
lookup could answer differently takes the interpreter's own method call."""

from __future__ import annotations

import sys
from collections import deque

import pytest

from uet.native._common import load_core

core = load_core("_event_core")
pytestmark = pytest.mark.skipif(core is None or not hasattr(core, "call_method"),
                                reason="the C event core is not built")


def name(s: str) -> str:
    return sys.intern(s)


class Slotted:
    __slots__ = ("x",)

    def __init__(self, x: int) -> None:
        self.x = x

    def m(self, a: int, b: int = 0) -> tuple:
        return ("base", self.x, a, b)


def test_slotted_class_is_cached_and_called_with_the_instance() -> None:
    o = Slotted(7)
    assert core.call_method(o, name("m"), 1, 2) == ("base", 7, 1, 2)
    assert core.method_cached(Slotted, name("m"))
    assert core.call_method(o, name("m"), 3) == ("base", 7, 3, 0)


def test_a_changed_class_is_looked_up_again() -> None:
    class C:
        __slots__ = ()

        def m(self) -> str:
            return "old"

    o = C()
    assert core.call_method(o, name("m")) == "old"
    assert core.method_cached(C, name("m"))
    C.m = lambda self: "new"  # type: ignore[method-assign]
    assert not core.method_cached(C, name("m"))  # the class's version tag moved on
    assert core.call_method(o, name("m")) == "new"
    del C.m
    with pytest.raises(AttributeError):
        core.call_method(o, name("m"))


def test_a_base_class_changed_reaches_its_subclasses() -> None:
    class Base:
        __slots__ = ()

        def m(self) -> str:
            return "base"

    class Sub(Base):
        __slots__ = ()

    o = Sub()
    assert core.call_method(o, name("m")) == "base"
    Base.m = lambda self: "patched"  # type: ignore[method-assign]
    assert core.call_method(o, name("m")) == "patched"


def test_subclass_override_and_base_are_kept_apart() -> None:
    class Sub(Slotted):
        __slots__ = ()

        def m(self, a: int, b: int = 0) -> tuple:
            return ("sub", self.x, a, b)

    assert core.call_method(Sub(1), name("m"), 5) == ("sub", 1, 5, 0)
    assert core.call_method(Slotted(1), name("m"), 5) == ("base", 1, 5, 0)
    assert core.call_method(Sub(2), name("m"), 6) == ("sub", 2, 6, 0)


def test_an_instance_attribute_wins_over_the_class() -> None:
    class WithDict:
        def m(self) -> str:
            return "class"

    o = WithDict()
    assert core.call_method(o, name("m")) == "class"
    assert not core.method_cached(WithDict, name("m"))  # an instance dict: never cached
    o.m = lambda: "instance"  # type: ignore[method-assign]
    assert core.call_method(o, name("m")) == "instance"


def test_descriptors_other_than_methods_keep_their_meaning() -> None:
    class D:
        __slots__ = ()

        @staticmethod
        def s(a: int) -> int:
            return a + 1

        @classmethod
        def c(cls, a: int) -> tuple:
            return (cls.__name__, a)

        @property
        def p(self):  # noqa: ANN201 - a callable held by a property
            return lambda a: a * 2

    o = D()
    assert core.call_method(o, name("s"), 1) == 2
    assert core.call_method(o, name("c"), 1) == ("D", 1)
    assert core.call_method(o, name("p"), 4) == 8
    for n in ("s", "c", "p"):
        assert not core.method_cached(D, name(n))


def test_a_custom_getattr_is_honoured() -> None:
    class G:
        __slots__ = ()

        def __getattribute__(self, n: str):  # noqa: ANN204
            if n == "m":
                return lambda: "hooked"
            return object.__getattribute__(self, n)

        def m(self) -> str:
            return "plain"

    assert core.call_method(G(), name("m")) == "hooked"
    assert not core.method_cached(G, name("m"))


def test_builtin_types() -> None:
    d: deque[int] = deque()
    core.call_method(d, name("append"), 3)
    core.call_method(d, name("append"), 4)
    assert core.call_method(d, name("popleft")) == 3
    assert core.method_cached(deque, name("popleft"))
    macs = {"a": 1}
    assert core.call_method(macs, name("get"), "a", 0) == 1
    assert core.call_method(macs, name("get"), "b", 0) == 0


def test_a_method_that_deletes_itself_mid_call() -> None:
    class Once:
        __slots__ = ()

        def m(self) -> str:
            del Once.m  # the function must outlive its own call
            return "done"

    o = Once()
    assert core.call_method(o, name("m")) == "done"
    with pytest.raises(AttributeError):
        core.call_method(o, name("m"))


def test_many_classes_share_the_table() -> None:
    # more (class, name) pairs than the table has entries: evictions stay correct
    def returning(i: int):  # noqa: ANN202
        return lambda self: i

    classes = [type(f"K{i}", (), {"__slots__": (), "m": returning(i)}) for i in range(600)]
    for _ in range(2):
        for i, cls in enumerate(classes):
            assert core.call_method(cls(), name("m")) == i


def test_errors_pass_through() -> None:
    class E:
        __slots__ = ()

        def m(self) -> None:
            raise KeyError("inside")

    with pytest.raises(KeyError, match="inside"):
        core.call_method(E(), name("m"))
    with pytest.raises(TypeError):
        core.call_method(E(), name("m"), 1)  # too many arguments
    with pytest.raises(AttributeError):
        core.call_method(E(), name("missing"))
