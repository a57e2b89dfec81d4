"""Display filters over field dictionaries (uet/capture/dfilter.py)."""

from __future__ import annotations

import pytest

from uet.capture.dfilter import FilterError, compile_filter

F = {"uet.pds.psn": 1005, "uet.pds.flags.retx": True, "uet.pds.flags.syn": False,
     "ip.src": "10.0.0.2", "eth.src": "02:00:0a:00:00:02", "frame.interface_name": "h0",
     "frame.time_relative": 1.5e-06, "frame.comment": ["uet-diff: only in A | A#7", "x"],
     "uet.pds.nack.code": 0x0D}
KNOWN = set(F) | {"uet.pds.type", "ipv6.src"}


@pytest.mark.parametrize("text,want", [
    ("uet.pds.psn == 1005", True), ("uet.pds.psn eq 0x3ed", True),
    ("uet.pds.psn != 1005", False), ("uet.pds.psn > 1000 && uet.pds.psn < 2000", True),
    ("uet.pds.psn >= 1005 and uet.pds.psn le 1005", True),
    ("uet.pds.flags.retx == 1", True), ("uet.pds.flags.retx", True),
    ("uet.pds.flags.retx == false", False), ("uet.pds.flags.syn == 0", True),
    ("uet.pds.flags.syn", True),  # present (Wireshark: a field test, not its value)
    ("uet.pds.type", False), ("uet.pds.type == 2", False), ("uet.pds.type != 2", False),
    ("!uet.pds.type", True), ("not uet.pds.type == 2", True),
    ("uet", True), ("uet.pds", True), ("ipv6", False), ("ip", True),
    ("ip.src == 10.0.0.2", True), ('ip.src == "10.0.0.2"', True),
    ("ip.src == 10.0.0.0/24", True), ("ip.src != 10.0.1.0/24", True),
    ("ip.src == 10.0.1.0/24", False), ("eth.src == 02:00:0A:00:00:02", True),
    ('frame.interface_name == "h0"', True), ('frame.interface_name == "h1"', False),
    ('frame.comment contains "only in A"', True), ('frame.comment == "x"', True),
    ('frame.comment matches "^uet-diff: only in [AB]"', True),
    ('frame.comment ~ "moved"', False),
    ("frame.time_relative < 2e-6", True),
    ("uet.pds.nack.code in {1, 2, 0x0d}", True), ("uet.pds.nack.code in {1 2}", False),
    ("uet.pds.nack.code in {10..20}", True), ("uet.pds.nack.code in {1 .. 12}", False),
    ("uet.pds.psn == 1 || uet.pds.psn == 1005 && ip.src == 10.0.0.9", False),
    ("(uet.pds.psn == 1 || uet.pds.psn == 1005) && !(ip.src == 10.0.0.9)", True),
])
def test_filters(text: str, want: bool) -> None:
    assert compile_filter(text, KNOWN)(F) is want


@pytest.mark.parametrize("text,error", [
    ("", "empty filter"),
    ("uet.pds.psn ==", "expected a value at character 15"),
    ("uet.pds.psn == 1 &&", "expected a field name"),
    ("(uet.pds.psn == 1", "expected ')'"),
    ("uet.pds.psn == 1 uet", "expected '&&', '||' or the end at character 18"),
    ("uet.pds.pns == 1", "unknown field 'uet.pds.pns'"),
    ("uet.pds.nack.code in 1", "expected '{'"),
    ("uet.pds.nack.code in {}", "at least one value"),
    ('frame.comment matches "("', "bad regular expression"),
    ("uet.pds.psn == 1 @", "unexpected '@' at character 18"),
])
def test_errors_say_where(text: str, error: str) -> None:
    with pytest.raises(FilterError, match=error.replace("(", r"\(").replace(")", r"\)")):
        compile_filter(text, KNOWN)


def test_type_errors_are_reported_when_a_frame_is_tested() -> None:
    f = compile_filter("uet.pds.psn == abc", KNOWN)
    with pytest.raises(FilterError, match="uet.pds.psn is a number: 'abc' is not"):
        f(F)
    assert f({}) is False  # no such field in this frame: nothing to compare
    with pytest.raises(FilterError, match="is a boolean"):
        compile_filter("uet.pds.flags.retx == 2", KNOWN)(F)


def test_without_known_names_any_field_goes() -> None:
    assert compile_filter("anything.at.all")({"anything.at.all.x": 1}) is True
    assert compile_filter("anything == 3")({"anything": 3}) is True
