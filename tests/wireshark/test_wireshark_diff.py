"""``uet diff A B --write DIFF.pcapng`` under the real tshark (issue 21): one file with both
captures, comments on exactly the packets ``uet diff --json`` lists, the ``uet.diff`` tree
of the dissector, and the ``uet`` profile's coloring rules.

Every tshark run here uses a HOME of its own (tshark_json.tshark_env), so neither the
plugin nor the profile of the real user is read or written.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import replace
from pathlib import Path

import pytest
import tshark_json
from tshark_json import tshark_binary, tshark_env

from uet.capture.pcapng import PcapngWriter, read_capture
from uet.cli import main
from uet.wire.codec import decode_frame, encode_frame

pytestmark = pytest.mark.tshark

CAPTURES = Path(__file__).resolve().parents[2] / "captures"
PREFS = {"udp.try_heuristic_first": "TRUE"}
COMMENTED = 'frame.comment contains "uet-diff"'


def _uet(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        rc = main(argv)
    return rc, out.getvalue(), err.getvalue()


def _write(path: Path, frames: list) -> Path:
    with PcapngWriter.open(path) as w:
        ids: dict[str, int] = {}
        for item in frames:
            cf, data = item if isinstance(item, tuple) else (item, item.data)
            if cf.if_name not in ids:
                ids[cf.if_name] = w.add_interface(cf.if_name)
            w.write_packet(ids[cf.if_name], cf.ts_ns, data)
    return path


def _recode(cf, **changes) -> bytes:
    frame = decode_frame(cf.data)
    for name, value in changes.items():
        if name == "flags":
            frame.pds = replace(frame.pds, flags=frame.pds.flags ^ value)
        else:
            setattr(frame, name, value)
    return encode_frame(frame)


@pytest.fixture(scope="module")
def pair(tmp_path_factory) -> tuple[Path, Path]:
    """rud_loss (tapped at h1) and a copy where frame 5's AR flag is set, frame 7 is
    dropped, frame 21 appears twice and frame 9, a request, was seen by another tap
    (core0) with another EV instead of h1: it took another path."""
    d = tmp_path_factory.mktemp("diffpair")
    src = list(read_capture(CAPTURES / "rud_loss.pcapng"))
    a = _write(d / "a.pcapng", src)
    out: list = []
    for cf in src:
        if cf.index == 5:
            out.append((cf, _recode(cf, flags=0x08)))
        elif cf.index == 7:
            continue
        elif cf.index == 9:
            out.append((replace(cf, if_name="core0"),
                        _recode(cf, ev=decode_frame(cf.data).ev ^ 7)))
        else:
            out.append(cf)
        if cf.index == 21:
            out.append(cf)
    return a, _write(d / "b.pcapng", out)


def _fields(capture: Path, flt: str | None, *names: str, home: Path | None = None,
            extra: list[str] | None = None) -> list[list[str]]:
    args = (["-Y", flt] if flt else []) + ["-T", "fields", "-E", "separator=/t"]
    for n in names:
        args += ["-e", n]
    text = tshark_json.run_tshark(capture, prefs=PREFS, extra=args + (extra or []),
                                  home=home)
    return [line.split("\t") for line in text.splitlines()]


def _listed(obj: dict) -> set[tuple[str, int]]:
    """(side, frame) of every packet the JSON report lists as differing."""
    out = set()
    for g in obj["groups"]:
        for d in g["differences"]:
            if d["a_frame"] is not None:
                out.add(("A", d["a_frame"]))
            if d["b_frame"] is not None:
                out.add(("B", d["b_frame"]))
    return out


def test_merged_capture_marks_exactly_what_uet_diff_lists(pair, tmp_path):
    a, b = pair
    merged = tmp_path / "diff.pcapng"
    rc, out, _ = _uet(["diff", "--json", str(a), str(b), "--write", str(merged)])
    obj = json.loads(out)
    assert rc == 1 and obj["counts"]["moved"] == 1
    listed = _listed(obj)
    assert len(listed) == 6  # changed (A and B), missing, added, moved (A and B)
    # opens without warnings: nothing on stderr, no expert info above Comment
    rows = _fields(merged, None, "frame.interface_name", "uet.diff.a_frame",
                   "uet.diff.b_frame", "uet.diff.side")
    assert len(rows) == 31 + 31
    assert not _fields(merged, "_ws.expert.severity >= warning", "frame.number")
    # one interface per side and original interface
    assert {r[0] for r in rows} == {"A:h1", "B:h1", "B:core0"}
    # the comment filter (and the pkt_comment protocol of tshark 4.0) selects exactly the
    # listed packets; uet.diff.side / a_frame / b_frame say which
    for flt in (COMMENTED, "pkt_comment", "uet.diff"):
        got = set()
        for iface, fa, fb, side in _fields(merged, flt, "frame.interface_name",
                                           "uet.diff.a_frame", "uet.diff.b_frame",
                                           "uet.diff.side"):
            assert side == iface[0]
            got.add((side, int(fa if side == "A" else fb)))
        assert got == listed, flt
    # the kinds
    kinds: dict[str, set] = {}
    for iface, kind, fa, fb in _fields(merged, "uet.diff", "frame.interface_name",
                                       "uet.diff.kind", "uet.diff.a_frame",
                                       "uet.diff.b_frame"):
        kinds.setdefault(kind, set()).add((iface[0], int(fa if iface[0] == "A" else fb)))
    assert kinds["only_in_a"] == {("A", 7)}
    assert kinds["only_in_b"] == {("B", 21)}
    assert kinds["changed"] == {("A", 5), ("B", 5)}
    assert {side for side, _ in kinds["moved"]} == {"A", "B"}
    assert _fields(merged, 'frame.comment contains "only in A"', "frame.interface_name") == [
        ["A:h1"]]


def test_diff_tree_fields(pair, tmp_path):
    a, b = pair
    merged = tmp_path / "diff.pcapng"
    assert _uet(["diff", str(a), str(b), "--write", str(merged)])[0] == 1
    rows = _fields(merged, 'uet.diff.kind == "changed"', "frame.number",
                   "frame.interface_name", "uet.diff.peer", "uet.diff.field",
                   "uet.diff.value_a", "uet.diff.value_b", "uet.pds.flags.ar")
    assert len(rows) == 2
    (na, ia, peer_a, fields, va, vb, ar_a), (nb, ib, peer_b, _, _, _, ar_b) = sorted(
        rows, key=lambda r: r[1])
    assert (ia, ib) == ("A:h1", "B:h1")
    assert (peer_a, peer_b) == (nb, na)  # each names the other's frame in this file
    assert fields == "uet.pds.flags,uet.pds.flags.ar"
    old = decode_frame(next(cf for cf in read_capture(a) if cf.index == 5).data).pds.flags
    assert va == f"{hex(old)},0" and vb == f"{hex(old | 8)},1"
    assert (ar_a, ar_b) == ("0", "1")  # and the packets themselves say so
    (moved_a, moved_b) = sorted(_fields(merged, 'uet.diff.kind == "moved"',
                                        "frame.interface_name", "uet.diff.ev_a",
                                        "uet.diff.ev_b", "udp.srcport"))
    assert moved_a[0] == "A:h1" and moved_b[0] == "B:core0"
    assert moved_a[1] == moved_b[1] == moved_a[3]  # EV in A: the A packet's source port
    assert moved_a[2] == moved_b[2] == moved_b[3] != moved_a[3]
    # the Info column says it too
    info = tshark_json.run_tshark(merged, prefs=PREFS, extra=[
        "-Y", 'uet.diff.kind == "only_in_a"', "-T", "fields", "-e", "_ws.col.Info"])
    assert info.startswith("[only in A] RUD_REQ")


def test_timestamps_and_packets_are_kept(pair, tmp_path):
    a, b = pair
    merged = tmp_path / "diff.pcapng"
    _uet(["diff", str(a), str(b), "--write", str(merged)])
    got = {"A": [], "B": []}
    for cf in read_capture(merged):
        got[cf.if_name[0]].append((cf.ts_ns, cf.data))
    assert got["A"] == [(cf.ts_ns, cf.data) for cf in read_capture(a)]
    assert sorted(got["B"]) == sorted((cf.ts_ns, cf.data) for cf in read_capture(b))
    stamps = [cf.ts_ns for cf in read_capture(merged)]
    assert stamps == sorted(stamps)  # merged in time order
    rows = _fields(merged, None, "frame.time_epoch")
    assert [int(r[0].replace(".", "")) for r in rows] == stamps  # tshark reads the same ns


def test_identical_captures_give_no_mark(tmp_path):
    src = CAPTURES / "trim_nack.pcapng"
    merged = tmp_path / "same.pcapng"
    rc, _, err = _uet(["diff", str(src), str(src), "--write", str(merged)])
    assert rc == 0 and "0 marked" in err
    n = sum(1 for _ in read_capture(src))
    assert len(_fields(merged, None, "frame.number")) == 2 * n
    assert not _fields(merged, COMMENTED, "frame.number")
    assert not _fields(merged, "uet.diff", "frame.number")
    assert b"uet-diff" not in merged.read_bytes()
    rc, _, err = _uet(["diff", str(src), str(src), "--write", str(merged), "--keep", "diff"])
    assert rc == 0 and sum(1 for _ in read_capture(merged)) == 0


def test_keep_only_differences_with_context(pair, tmp_path):
    a, b = pair
    only = tmp_path / "only.pcapng"
    ctx = tmp_path / "ctx.pcapng"
    _uet(["diff", str(a), str(b), "--write", str(only), "--keep", "diff"])
    _uet(["diff", str(a), str(b), "--write", str(ctx), "--context", "1"])
    marked = [cf for cf in read_capture(only) if cf.comments]
    assert len(marked) == sum(1 for _ in read_capture(only)) == 6
    # one packet of context on each side of each mark, in its own capture
    a_frames = {int(cf.comments[0].split(" | ")[1].split()[0][2:])
                for cf in read_capture(only) if cf.if_name.startswith("A:")}
    want_a = {n + k for n in a_frames for k in (-1, 0, 1)} & set(range(1, 32))
    kept_a = [cf for cf in read_capture(ctx) if cf.if_name.startswith("A:")]
    assert len(kept_a) == len(want_a)
    # counterparts point at frames of the smaller file
    rows = _fields(only, 'uet.diff.kind == "changed"', "frame.number", "uet.diff.peer")
    assert sorted(int(r[1]) for r in rows) == sorted(int(r[0]) for r in rows)
    rc, _, err = _uet(["diff", str(a), str(b), "--write", str(ctx), "--keep", "all",
                       "--context", "2"])
    assert rc == 2 and "--context" in err


# --------------------------------------------------------------------------- the profile


@pytest.fixture(scope="module")
def profile_home(tmp_path_factory) -> Path:
    """A HOME where ``uet wireshark install`` put the plugin and the profile."""
    home = tmp_path_factory.mktemp("profile-home")
    env = tshark_env(home)
    proc = subprocess.run([sys.executable, "-m", "uet.cli", "wireshark", "install"], env=env,
                          capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parents[2])
    assert proc.returncode == 0, proc.stderr
    assert (home / ".config" / "wireshark" / "profiles" / "uet" / "colorfilters").is_file()
    return home


def _colors(capture: Path, home: Path) -> list[tuple[int, str]]:
    """(frame, coloring rule) per frame with the profile ``uet`` (the installed plugin,
    no -X); fails on any warning (a rule that does not compile is one)."""
    proc = subprocess.run([tshark_binary(), "-n", "-C", "uet", "--color", "-r", str(capture),
                           "-T", "fields", "-e", "frame.number", "-e",
                           "frame.coloring_rule.name"],
                          capture_output=True, text=True, timeout=120, env=tshark_env(home))
    err = "\n".join(ln for ln in proc.stderr.splitlines() if "Running as user" not in ln)
    assert proc.returncode == 0 and not err, err
    out = []
    for line in proc.stdout.splitlines():
        num, _, rule = line.partition("\t")
        out.append((int(num), rule))
    return out


def test_profile_coloring_rules_parse_and_color(profile_home, pair, tmp_path):
    def by_rule(capture: Path) -> dict[str, int]:
        counts: dict[str, int] = {}
        for _, rule in _colors(capture, profile_home):
            counts[rule] = counts.get(rule, 0) + 1
        return counts

    trim = by_rule(CAPTURES / "trim_nack.pcapng")
    assert trim["UET NACK trimmed"] == 6 and trim["UET trimmed"] == 6
    assert trim["UET retransmission"] == 6
    pfc = by_rule(CAPTURES / "pfc_pause.pcapng")
    assert pfc["PFC pause (XOFF)"] == 1 and pfc["PFC or PAUSE resume (XON)"] == 1
    assert by_rule(CAPTURES / "rod_reorder.pcapng")["UET NACK loss or order"] == 1
    assert by_rule(CAPTURES / "broken_rud.pcapng")["UET malformed"] >= 3
    a, b = pair
    merged = tmp_path / "diff.pcapng"
    _uet(["diff", str(a), str(b), "--write", str(merged)])
    marks = by_rule(merged)
    assert marks["UET diff: only in A"] == 1 and marks["UET diff: only in B"] == 1
    assert marks["UET diff: changed"] == 2
    assert marks["UET diff: moved to another path"] == 2
    # the profile's columns show the capture interface (A:h1 / B:h1) and the diff kind
    proc = subprocess.run([tshark_binary(), "-n", "-C", "uet", "-r", str(merged), "-Y",
                           'uet.diff.kind == "only_in_a"'], capture_output=True, text=True,
                          timeout=60, env=tshark_env(profile_home))
    assert " A:h1 " in proc.stdout and "only_in_a" in proc.stdout


def test_colors_command_prints_the_rules(capsys):
    assert main(["wireshark", "colors"]) == 0
    text = capsys.readouterr().out
    lines = [ln for ln in text.splitlines() if ln.startswith("@")]
    assert len(lines) >= 15 and lines[0].startswith('@UET diff: only in A@uet.diff.kind == ')
    assert all(ln.count("@") == 3 and ln.endswith("]") and ln.count("[") == 2
               for ln in lines)
