"""The annotated diff capture: both captures of a :class:`~uet.capture.diff.DiffResult` in
one pcapng, every differing packet marked with a packet comment, to open in Wireshark.

Layout of the file (``uet diff A B --write DIFF.pcapng``):

* one interface per side and per original interface, named ``A:h0``, ``B:h0``,
  ``A:tor0.p2`` ... (``A:if0`` when the original has no name), with the original link type
  and an ``if_description`` naming the side and the file;
* the packets of both captures with their own timestamps, merged in time order (A first
  when two are equal), the way ``mergecap`` merges;
* on each differing packet one comment (pcapng ``opt_comment``; Wireshark's
  ``frame.comment``) in a fixed form, :data:`COMMENT_PREFIX` then what differs, then
  `` | `` and where its counterpart is::

      uet-diff: only in A | A#7
      uet-diff: only in B | B#21 occurrence 2
      uet-diff: uet.pds.flags 0x4 -> 0xc; uet.pds.flags.ar 0 -> 1 | A#5 B#5 frame 10
      uet-diff: moved to another path (EV 812 -> 3301) | A#7 B#9 frame 15

  ``A#n`` / ``B#n`` are frame numbers in the original captures, ``frame n`` the
  counterpart's frame number in this file (when it is in the file), ``occurrence n`` the
  key's occurrence when it is not the first. Values are written as display filters take
  them (booleans 0/1, flags in hex, ``-`` for a field absent on one side). A changed pair
  carries the same comment on both packets; a moved packet names its EVs in A and B (the
  counterpart of a packet that moved off the taps is the other capture's copy on another
  tap). The Lua dissector turns the comment into the ``uet.diff`` tree.

``keep="all"`` writes every packet; ``keep="diff"`` only the differing ones plus
``context`` packets before and after each, counted in its own capture's order.
"""

from __future__ import annotations

import heapq
import os
from collections.abc import Iterator
from dataclasses import dataclass

from uet.capture.diff import Difference, DiffResult, Value
from uet.capture.pcapng import CapturedFrame, CaptureTruncated, PcapngWriter, read_capture

__all__ = ["COMMENT_PREFIX", "KEEP", "DiffCaptureStats", "diff_comments",
           "write_diff_capture"]

#: Every diff comment starts with this (filter: ``frame.comment contains "uet-diff"``).
COMMENT_PREFIX = "uet-diff: "
#: What ``write_diff_capture`` keeps: every packet, or the differing ones with context.
KEEP = ("all", "diff")
_MAX_VALUE = 48  # longer values (whole frames as hex) are cut in comments


@dataclass(slots=True)
class DiffCaptureStats:
    """What :func:`write_diff_capture` wrote."""

    frames_a: int = 0
    frames_b: int = 0
    marked_a: int = 0
    marked_b: int = 0
    interfaces: tuple[str, ...] = ()

    @property
    def frames(self) -> int:
        return self.frames_a + self.frames_b


def _value(name: str, v: Value) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, int):
        return hex(v) if ("flags" in name or "bitmap" in name) else str(v)
    text = str(v).replace(";", ",").replace("|", "/").replace("\n", " ")
    if len(text) > _MAX_VALUE:
        text = f"{text[:_MAX_VALUE - 16]}...({len(text)} chars)"
    return text or '""'


def _what(d: Difference) -> str:
    changes = "; ".join(f"{k} {_value(k, a)} -> {_value(k, b)}" for k, (a, b) in d.fields.items())
    if d.kind == "missing":
        return "only in A"
    if d.kind == "added":
        return "only in B"
    if d.kind == "moved":
        ev_a, ev_b = d.ev or (None, None)
        text = f"moved to another path (EV {_value('', ev_a)} -> {_value('', ev_b)})"
        return f"{text}; {changes}" if changes else text
    return changes


Mark = tuple[str, tuple[str, int] | None, str]


def diff_comments(result: DiffResult) -> dict[tuple[str, int], Mark]:
    """(side, frame) -> (comment up to its references, the counterpart (side, frame) or
    None, the occurrence suffix), for every differing packet of ``result``; the merged
    frame number of the counterpart goes between the last two."""
    out: dict[tuple[str, int], Mark] = {}
    for d in result.differences():
        a, b = d.a, d.b
        if d.kind == "moved" and d.seen is not None:
            if a is None:
                a = d.seen
            else:
                b = d.seen
        refs = " ".join(f"{side}#{p.frame}" for side, p in (("A", a), ("B", b)) if p)
        tail = f" occurrence {d.occurrence}" if d.occurrence > 1 else ""
        text = f"{COMMENT_PREFIX}{_what(d)} | {refs}"
        if d.a is not None:
            out[("A", d.a.frame)] = (text, ("B", b.frame) if b else None, tail)
        if d.b is not None:
            out[("B", d.b.frame)] = (text, ("A", a.frame) if a else None, tail)
    return out


def _frames(path: str, ifaces: set[str] | None) -> list[CapturedFrame]:
    """The frames of ``path`` up to a cut (the diff already warned about it)."""
    out = []
    try:
        for cf in read_capture(path):
            if ifaces is None or cf.if_name in ifaces:
                out.append(cf)
    except CaptureTruncated:
        pass
    return out


def _kept(frames: list[CapturedFrame], marked: set[int], context: int) -> list[CapturedFrame]:
    keep = [False] * len(frames)
    for pos, cf in enumerate(frames):
        if cf.index in marked:
            for k in range(max(0, pos - context), min(len(frames), pos + context + 1)):
                keep[k] = True
    return [cf for cf, k in zip(frames, keep, strict=True) if k]


def _merge(a: list[CapturedFrame], b: list[CapturedFrame]
           ) -> Iterator[tuple[str, CapturedFrame]]:
    tagged_a = ((cf.ts_ns, 0, n, "A", cf) for n, cf in enumerate(a))
    tagged_b = ((cf.ts_ns, 1, n, "B", cf) for n, cf in enumerate(b))
    for _ts, _side, _n, side, cf in heapq.merge(tagged_a, tagged_b):
        yield side, cf


def write_diff_capture(result: DiffResult, path: str | os.PathLike[str], *,
                       keep: str = "all", context: int = 0) -> DiffCaptureStats:
    """Write the annotated merged capture of ``result`` to ``path`` (module docstring).

    ``keep``: ``"all"`` or ``"diff"``; ``context``: with ``"diff"``, packets kept before
    and after each differing one in its own capture.
    """
    if keep not in KEEP:
        raise ValueError(f"keep {keep!r}: allowed {', '.join(KEEP)}")
    if context < 0:
        raise ValueError("context must be >= 0")
    comments = diff_comments(result)
    only = set(result.ifaces_compared) if result.ifaces_compared else None
    frames = {"A": _frames(result.a_path, only), "B": _frames(result.b_path, only)}
    if keep == "diff":
        for side in ("A", "B"):
            marked = {n for s, n in comments if s == side}
            frames[side] = _kept(frames[side], marked, context)
    merged = list(_merge(frames["A"], frames["B"]))
    number = {(side, cf.index): n for n, (side, cf) in enumerate(merged, 1)}
    stats = DiffCaptureStats()
    paths = {"A": result.a_path, "B": result.b_path}
    with PcapngWriter.open(path) as w:
        ids: dict[tuple[str, int, str, int], int] = {}
        for side, cf in merged:
            iface = (side, cf.if_id, cf.if_name, cf.linktype)
            if iface not in ids:
                name = f"{side}:{cf.if_name or f'if{cf.if_id}'}"
                ids[iface] = w.add_interface(
                    name, cf.linktype,
                    description=f"{side} {paths[side]} {cf.if_name or f'if{cf.if_id}'}")
            notes = list(cf.comments)
            mark = comments.get((side, cf.index))
            if mark is not None:
                text, other, tail = mark
                where = number.get(other) if other else None
                notes.append(text + (f" frame {where}" if where else "") + tail)
                if side == "A":
                    stats.marked_a += 1
                else:
                    stats.marked_b += 1
            w.write_packet(ids[iface], cf.ts_ns, cf.data, cf.orig_len, notes)
            if side == "A":
                stats.frames_a += 1
            else:
                stats.frames_b += 1
        stats.interfaces = tuple(w.interfaces)
    return stats
