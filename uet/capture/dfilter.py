"""Display filters over flat field dictionaries: the subset of Wireshark's filter language
that ``uet decode -Y`` needs.

A filter is compiled once (:func:`compile_filter`) and then tested against the fields of
each frame (``uet.*``, ``ip.*``, ``frame.*`` ... as ``uet decode --json`` prints them)::

    f = compile_filter('uet.pds.flags.retx == 1 && frame.interface_name == "h0"')
    f({"uet.pds.flags.retx": True, "frame.interface_name": "h0"})  # True

Grammar, as in Wireshark:

* ``FIELD`` alone: the field (or any field under it: ``uet``, ``ip``, ``macc``,
  ``uet.ses``) is present;
* ``FIELD OP VALUE`` with ``==``/``eq``, ``!=``/``ne``, ``<``/``lt``, ``<=``/``le``,
  ``>``/``gt``, ``>=``/``ge``, ``contains`` and ``matches``/``~`` (a regular expression);
* ``FIELD in {V1 V2 LO..HI}`` (commas allowed between members);
* ``!``/``not``, ``&&``/``and``, ``||``/``or`` (``or`` binds weakest), parentheses.

Values: numbers (decimal, ``0x`` hex, ``0o``/``0b``, a fraction), ``true``/``false``
(``1``/``0`` work for booleans too), quoted strings, bare words (addresses: ``10.0.0.2``,
``10.0.0.0/8`` as a subnet, MACs). A comparison with a field that is absent is false, as in
Wireshark (so ``!=`` needs the field to be present); a field with several values (packet
comments) matches when any value does. Field names are checked when the filter is compiled:
an unknown name is an error, not a filter that silently matches nothing.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from uet.errors import LocalError

__all__ = ["FilterError", "compile_filter"]


class FilterError(LocalError, ValueError):
    """The filter text is not valid (the message says where and why)."""


Predicate = Callable[[Mapping[str, Any]], bool]

_TOKEN = re.compile(r"""
    \s*(?:
      (?P<str>"(?:[^"\\]|\\.)*")
    | (?P<op>==|!=|<=|>=|&&|\|\||\.\.|[<>!(){},~])
    | (?P<word>[A-Za-z0-9_.:/+\-]+)
    )""", re.VERBOSE)

_WORD_OPS = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">=",
             "and": "&&", "or": "||", "not": "!", "contains": "contains",
             "matches": "~", "in": "in"}
_COMPARE = ("==", "!=", "<", "<=", ">", ">=", "contains", "~")
_FIELD = re.compile(r"[A-Za-z_][A-Za-z0-9_\-]*(?:\.[A-Za-z0-9_\-]+)*\Z")


@dataclass(slots=True)
class _Tok:
    kind: str  # "str", "op", "word", "end"
    text: str
    pos: int


def _tokens(text: str) -> list[_Tok]:
    out: list[_Tok] = []
    pos = 0
    n = len(text)
    while pos < n:
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            where = len(text[:pos]) + (len(text[pos:]) - len(text[pos:].lstrip()))
            raise FilterError(f"unexpected {text[where]!r} at character {where + 1}")
        kind = m.lastgroup or "word"
        value = m.group(kind)
        start = m.start(kind)
        if kind == "word" and value.lower() in _WORD_OPS:
            kind, value = "op", _WORD_OPS[value.lower()]
        out.append(_Tok(kind, value, start))
        pos = m.end()
    out.append(_Tok("end", "", n))
    return out


@dataclass(slots=True, frozen=True)
class _Literal:
    text: str
    quoted: bool


def _number(text: str) -> int | float | None:
    try:
        return int(text, 0)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return None


def _coerce(field: str, value: Any, lit: _Literal) -> Any:
    """The literal as the type of the field's value; FilterError when it cannot be."""
    if isinstance(value, bool):
        t = lit.text.lower()
        if t in ("1", "true"):
            return True
        if t in ("0", "false"):
            return False
        raise FilterError(f"{field} is a boolean: {lit.text!r} is not 0, 1, true or false")
    if isinstance(value, int | float):
        num = None if lit.quoted else _number(lit.text)
        if num is None:
            raise FilterError(f"{field} is a number: {lit.text!r} is not")
        return num
    return lit.text


def _compare(field: str, op: str, value: Any, lit: _Literal) -> bool:
    if op == "contains":
        return lit.text in str(value)
    if op == "~":
        try:
            return re.search(lit.text, str(value)) is not None
        except re.error as exc:
            raise FilterError(f"bad regular expression {lit.text!r}: {exc}") from None
    if isinstance(value, str) and not lit.quoted and "/" in lit.text and op in ("==", "!="):
        try:
            inside = ipaddress.ip_address(value) in ipaddress.ip_network(lit.text, strict=False)
        except ValueError:
            inside = value == lit.text
        return inside if op == "==" else not inside
    want = _coerce(field, value, lit)
    if isinstance(value, str) and isinstance(want, str) and op in ("==", "!="):
        same = value.lower() == want.lower() if ":" in want else value == want
        return same if op == "==" else not same
    try:
        if op == "==":
            return value == want
        if op == "!=":
            return value != want
        if op == "<":
            return value < want
        if op == "<=":
            return value <= want
        if op == ">":
            return value > want
        return value >= want
    except TypeError:
        raise FilterError(f"{field} cannot be compared with {lit.text!r} by {op}") from None


def _values(fields: Mapping[str, Any], name: str) -> list[Any]:
    v = fields.get(name)
    if v is None:
        return []
    return list(v) if isinstance(v, list | tuple) else [v]


class _Parser:
    def __init__(self, text: str, known: Callable[[str], bool] | None) -> None:
        self.text = text
        self.toks = _tokens(text)
        self.i = 0
        self.known = known

    def peek(self) -> _Tok:
        return self.toks[self.i]

    def take(self) -> _Tok:
        tok = self.toks[self.i]
        self.i += 1
        return tok

    def fail(self, tok: _Tok, want: str) -> FilterError:
        got = "the end of the filter" if tok.kind == "end" else repr(tok.text)
        return FilterError(f"expected {want} at character {tok.pos + 1}, found {got}")

    def parse(self) -> Predicate:
        if self.peek().kind == "end":
            raise FilterError("empty filter")
        pred = self.or_()
        if self.peek().kind != "end":
            raise self.fail(self.peek(), "'&&', '||' or the end")
        return pred

    def or_(self) -> Predicate:
        parts = [self.and_()]
        while self.peek().kind == "op" and self.peek().text == "||":
            self.take()
            parts.append(self.and_())
        if len(parts) == 1:
            return parts[0]
        return lambda f: any(p(f) for p in parts)

    def and_(self) -> Predicate:
        parts = [self.not_()]
        while self.peek().kind == "op" and self.peek().text == "&&":
            self.take()
            parts.append(self.not_())
        if len(parts) == 1:
            return parts[0]
        return lambda f: all(p(f) for p in parts)

    def not_(self) -> Predicate:
        if self.peek().kind == "op" and self.peek().text == "!":
            self.take()
            inner = self.not_()
            return lambda f: not inner(f)
        return self.primary()

    def literal(self) -> _Literal:
        tok = self.take()
        if tok.kind == "str":
            body = tok.text[1:-1]
            return _Literal(re.sub(r"\\(.)", r"\1", body), True)
        if tok.kind == "word":
            return _Literal(tok.text, False)
        raise self.fail(tok, "a value")

    def primary(self) -> Predicate:
        tok = self.take()
        if tok.kind == "op" and tok.text == "(":
            inner = self.or_()
            close = self.take()
            if close.kind != "op" or close.text != ")":
                raise self.fail(close, "')'")
            return inner
        if tok.kind != "word" or not _FIELD.match(tok.text):
            raise self.fail(tok, "a field name, '!' or '('")
        name = tok.text
        if self.known is not None and not self.known(name):
            raise FilterError(f"unknown field {name!r} (character {tok.pos + 1}); "
                              "uet decode --json shows the fields of each frame")
        nxt = self.peek()
        if nxt.kind == "op" and nxt.text in _COMPARE:
            op = self.take().text
            lit = self.literal()
            if op == "~":
                try:
                    re.compile(lit.text)
                except re.error as exc:
                    raise FilterError(f"bad regular expression {lit.text!r}: {exc}") from None
            return lambda f: any(_compare(name, op, v, lit) for v in _values(f, name))
        if nxt.kind == "op" and nxt.text == "in":
            self.take()
            members = self.members()
            return lambda f: any(_member(name, v, members) for v in _values(f, name))
        prefix = name + "."
        return lambda f: (f.get(name) is not None
                          or any(k.startswith(prefix) for k in f))

    def members(self) -> list[tuple[_Literal, _Literal | None]]:
        tok = self.take()
        if tok.kind != "op" or tok.text != "{":
            raise self.fail(tok, "'{'")
        out: list[tuple[_Literal, _Literal | None]] = []
        while True:
            nxt = self.peek()
            if nxt.kind == "op" and nxt.text == "}":
                self.take()
                break
            if nxt.kind == "op" and nxt.text == ",":
                self.take()
                continue
            lo = self.literal()
            hi = None
            if self.peek().kind == "op" and self.peek().text == "..":
                self.take()
                hi = self.literal()
            elif not lo.quoted and ".." in lo.text and lo.text.count("..") == 1:
                a, b = lo.text.split("..")
                lo, hi = _Literal(a, False), _Literal(b, False)
            out.append((lo, hi))
        if not out:
            raise self.fail(tok, "at least one value between '{' and '}'")
        return out


def _member(name: str, value: Any, members: list[tuple[_Literal, _Literal | None]]) -> bool:
    for lo, hi in members:
        if hi is None:
            if _compare(name, "==", value, lo):
                return True
        elif _compare(name, ">=", value, lo) and _compare(name, "<=", value, hi):
            return True
    return False


def compile_filter(text: str, known: Iterable[str] | Callable[[str], bool] | None = None
                   ) -> Predicate:
    """Compile ``text``; the result takes a field dictionary and says whether it matches.

    ``known``: the field names that exist (or a function saying whether one does); a name
    outside them, and not a prefix of one, is a :class:`FilterError`. A value of the wrong
    type for its field is reported when a frame is tested (:class:`FilterError` again).
    """
    check: Callable[[str], bool] | None
    if known is None or callable(known):
        check = known  # type: ignore[assignment]
    else:
        names = frozenset(known)
        prefixes = frozenset(p for n in names for p in _prefixes(n))
        check = lambda n: n in names or n in prefixes  # noqa: E731
    return _Parser(text, check).parse()


def _prefixes(name: str) -> Iterable[str]:
    parts = name.split(".")
    for i in range(1, len(parts)):
        yield ".".join(parts[:i])
