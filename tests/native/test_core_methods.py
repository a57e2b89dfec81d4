"""The C cores' functions as methods (``uet/native/slots.h``: ``CoreMethod``): they bind
like Python functions, are called unbound by method calls (no bound method per call), take
keywords, carry the function's name and doc, and swap with the Python forms."""

from __future__ import annotations

import pytest

from uet.cms.sender import IMPLEMENTATION, REFERENCE, CmsSender
from uet.endpoint import cores

pytestmark = pytest.mark.skipif(IMPLEMENTATION != "native", reason="the C cores are off")


class Probe(CmsSender):  # a subclass: the C forms hand it to the Python references
    __slots__ = ()


def _sender() -> CmsSender:
    import random

    from uet.cms import CmsConfig, make_sender

    return make_sender(CmsConfig(algorithm="nscc", ev_count=4), random.Random(1))


def test_a_core_method_binds_like_a_function():
    s = _sender()
    m = CmsSender.__dict__["can_send"]
    assert type(m).__name__ == "core_method"
    assert m.__get__(None, CmsSender) is m  # class access: the descriptor itself
    bound = s.can_send
    assert bound.__self__ is s and bound.__func__ is m
    assert bound(5, nbytes=10, in_flight=0) is True
    assert CmsSender.can_send(s, 6, nbytes=10, in_flight=0) is True  # unbound, from the class
    assert s.now == 6
    assert m.__name__ == "can_send" and "CmsSender.can_send" in m.__doc__
    assert "can_send" in repr(m)


def test_method_calls_reach_the_c_form_and_the_python_alike():
    a, b = _sender(), _sender()
    got = [a.window_full(nbytes=1, in_flight=a.cwnd - 1), a.can_send(1, nbytes=10**6,
                                                                        in_flight=0)]
    with cores.python_forms():
        assert CmsSender.__dict__["can_send"] is REFERENCE["can_send"]
        want = [b.window_full(nbytes=1, in_flight=b.cwnd - 1), b.can_send(1, nbytes=10**6,
                                                                            in_flight=0)]
    assert got == want == [True, False]
    assert type(CmsSender.__dict__["can_send"]).__name__ == "core_method"
    with pytest.raises(TypeError):
        a.can_send()  # the Python's error: missing arguments


def test_subclasses_inherit_the_method():
    p = Probe.__new__(Probe)
    for k in CmsSender.__slots__:
        setattr(p, k, getattr(_sender(), k))
    assert p.can_send(1, nbytes=10, in_flight=0) is True
