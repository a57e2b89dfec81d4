"""``uet diff``: semantic diff of two captures (uet/capture/diff.py, uet/commands/diff.py).

Changes are injected into copies of the reference captures (one field of one packet
changed, one packet dropped, one added) and must be reported precisely and only them; two
runs of the same experiment through the real fabric with the same seed compare equal, and
with different seeds compare equal once normalized.
"""

from __future__ import annotations

import importlib.util
import io
import json
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import replace
from pathlib import Path

import pytest

from uet.capture.diff import diff_captures, index_capture
from uet.capture.pcapng import PcapngWriter, read_capture
from uet.cli import main
from uet.wire.codec import decode_frame, encode_frame

ROOT = Path(__file__).resolve().parents[2]
CAPTURES = ROOT / "captures"


def _tool():
    spec = importlib.util.spec_from_file_location("make_captures_for_diff",
                                                  ROOT / "tools" / "make_captures.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _write(path: Path, frames: list, snaplen: int = 0) -> Path:
    """Rewrite ``frames`` (CapturedFrame, or (CapturedFrame, new bytes)) to ``path``."""
    with PcapngWriter.open(path) as w:
        ids: dict[str, int] = {}
        for item in frames:
            cf, data = item if isinstance(item, tuple) else (item, item.data)
            if cf.if_name not in ids:
                ids[cf.if_name] = w.add_interface(cf.if_name, snaplen=snaplen)
            w.write_packet(ids[cf.if_name], cf.ts_ns, data)
    return path


def _uet(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        rc = main(argv)
    return rc, out.getvalue(), err.getvalue()


def _flip_ar(cf) -> bytes:
    frame = decode_frame(cf.data)
    assert encode_frame(frame) == cf.data  # the codec rewrites fabric frames byte for byte
    frame.pds = replace(frame.pds, flags=frame.pds.flags ^ 0x08)
    return encode_frame(frame)


def _injected(tmp_path: Path) -> tuple[Path, Path, list]:
    """rud_loss and a copy with frame 5's AR flag set, frame 7 dropped and a second copy of
    frame 21 (a retransmission) right after it."""
    src = CAPTURES / "rud_loss.pcapng"
    frames = list(read_capture(src))
    out: list = []
    for cf in frames:
        if cf.index == 5:
            out.append((cf, _flip_ar(cf)))
        elif cf.index == 7:
            continue
        else:
            out.append(cf)
        if cf.index == 21:
            out.append(cf)
    a = tmp_path / "rud_loss.pcapng"
    a.write_bytes(src.read_bytes())
    return a, _write(tmp_path / "changed.pcapng", out), frames


def test_identical_captures_are_the_same():
    for name in ("rud_loss", "headers", "pfc_pause", "rudi", "uud"):
        path = CAPTURES / f"{name}.pcapng"
        res = diff_captures(path, path, timestamps=True)
        assert res.same, name
        n = sum(1 for _ in read_capture(path))
        assert res.totals() == {"matched": n, "identical": n, "changed": 0, "missing": 0,
                                "added": 0, "moved": 0}


def test_injected_change_drop_and_add_are_reported_precisely(tmp_path):
    a, b, frames = _injected(tmp_path)
    res = diff_captures(a, b)
    assert not res.same
    assert res.totals() == {"matched": 30, "identical": 29, "changed": 1, "missing": 1,
                            "added": 1, "moved": 0}
    diffs = res.differences()
    assert [d.kind for d in diffs] == ["changed", "missing", "added"]
    changed, missing, added = diffs
    # the changed packet: frame 5 in both, exactly the AR flag and the flags byte
    assert (changed.a.frame, changed.b.frame) == (5, 5)
    old = decode_frame(frames[4].data).pds.flags
    assert changed.fields == {"uet.pds.flags": (old, old | 0x08),
                              "uet.pds.flags.ar": (False, True)}
    assert changed.key == index_capture(a)[0][4].key
    # the dropped packet: A's frame 7, nothing in B
    assert (missing.a.frame, missing.b) == (7, None)
    assert missing.key == index_capture(a)[0][6].key and missing.occurrence == 1
    # the added one: a second occurrence of frame 21's key, B's frame 21 (one frame dropped
    # before it, its copy right after it)
    assert (added.a, added.b.frame, added.occurrence) == (None, 21, 2)
    assert added.key == index_capture(a)[0][20].key
    assert added.b.fields == index_capture(a)[0][20].fields
    # and the other way round: the roles swap
    back = diff_captures(b, a).totals()
    assert (back["changed"], back["missing"], back["added"]) == (1, 1, 1)


def test_command_text_json_and_exit_status(tmp_path, monkeypatch):
    a, b, _ = _injected(tmp_path)
    monkeypatch.chdir(tmp_path)
    rc, out, err = _uet(["diff", a.name, b.name])
    assert rc == 1 and not err
    assert out.splitlines()[1] == ("30 packets matched (29 identical, 1 changed), 1 only in "
                                   "A (missing), 1 only in B (added)")
    assert "  changed A#5 B#5 RUD_REQ psn=" in out
    assert "      uet.pds.flags.ar: false -> true" in out
    assert "  missing A#7 " in out and "  added   B#21 " in out
    assert out.rstrip().endswith("differ")
    rc, out, _ = _uet(["diff", "--json", a.name, b.name])
    obj = json.loads(out)
    assert rc == 1 and obj["same"] is False and obj["mode"] == "exact"
    assert obj["counts"] == {"matched": 30, "identical": 29, "changed": 1, "missing": 1,
                             "added": 1, "moved": 0}
    (group,) = obj["groups"]
    kinds = [(d["kind"], d["a_frame"], d["b_frame"]) for d in group["differences"]]
    assert kinds == [("changed", 5, 5), ("missing", 7, None), ("added", None, 21)]
    assert group["differences"][0]["fields"]["uet.pds.flags.ar"] == [False, True]
    rc, out, _ = _uet(["diff", "--json", "--limit", "1", a.name, b.name])
    obj = json.loads(out)
    assert (obj["differences_listed"], obj["differences_total"]) == (1, 3)
    rc, out, _ = _uet(["diff", "--limit", "1", a.name, b.name])
    assert "... 2 more difference(s) (--limit 0 shows all)" in out
    rc, out, _ = _uet(["diff", a.name, a.name])
    assert rc == 0 and out.rstrip().endswith("same")


def test_ignore_and_iface_options(tmp_path):
    a, b, _ = _injected(tmp_path)
    res = diff_captures(a, b, ignore=["uet.pds.flags*"])
    t = res.totals()
    assert (t["changed"], t["identical"], t["missing"], t["added"]) == (0, 30, 1, 1)
    # uud has taps h0 (3 datagrams sent) and h1 (1 received): one interface at a time
    uud = CAPTURES / "uud.pcapng"
    assert diff_captures(uud, uud, ifaces=["h1"]).totals()["matched"] == 1
    assert diff_captures(uud, uud, ifaces=["h0"]).totals()["matched"] == 3


def test_errors_exit_2(tmp_path):
    good = CAPTURES / "uud.pcapng"
    rc, _, err = _uet(["diff", str(good), str(tmp_path / "nope.pcapng")])
    assert rc == 2 and "nope.pcapng" in err
    bad = tmp_path / "bad.pcapng"
    raw = bytearray(good.read_bytes())
    raw[-4:] = (999).to_bytes(4, "little")  # the last block's trailing length: corrupt
    bad.write_bytes(bytes(raw))
    rc, _, err = _uet(["diff", str(bad), str(good)])
    assert rc == 2 and "bad.pcapng" in err and "byte" in err and "trailing length" in err
    rc, _, err = _uet(["diff", "--context", "2", str(good), str(good)])
    assert rc == 2 and "--write" in err
    rc, _, err = _uet(["diff", "--limit", "-1", str(good), str(good)])
    assert rc == 2 and "--limit" in err
    with pytest.raises(ValueError, match="mode 'fuzzy'"):
        diff_captures(good, good, mode="fuzzy")


def test_retransmissions_match_occurrence_by_occurrence(tmp_path):
    """In trim_nack the receiver sees a trimmed request and later its retransmission: two
    occurrences of one key. Dropping the trimmed copy in B makes B's retransmission its
    first occurrence (compared with A's trimmed copy: flags, DSCP, payload differ) and
    leaves A's retransmission without a partner (missing, occurrence 2)."""
    src = CAPTURES / "trim_nack.pcapng"
    packets, _, _ = index_capture(src)
    seen: dict[tuple, list[int]] = {}
    for p in packets:
        seen.setdefault(p.key, []).append(p.frame)
    kinds = {p.key: p.kind for p in packets}
    retx = [frames for key, frames in seen.items() if kinds[key] == "req" and len(frames) > 1]
    assert retx, "trim_nack has no retransmitted request"
    first, second = retx[0][:2]
    frames = [cf for cf in read_capture(src) if cf.index != first]
    b = _write(tmp_path / "b.pcapng", frames)
    diffs = diff_captures(src, b).differences()
    assert [(d.kind, d.occurrence) for d in diffs] == [("changed", 1), ("missing", 2)]
    assert diffs[0].a.frame == first and diffs[0].b.frame == second - 1
    assert diffs[0].fields["uet.pds.flags.retx"] == (False, True)
    assert diffs[0].fields["ip.dsfield.dscp"] == (14, 10)
    assert diffs[1].a.frame == second


def test_pdc_ids_and_groups():
    """pdc_open_close has two PDCs between the same hosts; each is a group with its own
    packets, named by initiator PDC ID (exact) or rank (normalized)."""
    path = CAPTURES / "pdc_open_close.pcapng"
    packets, frames, ifaces = index_capture(path)
    groups = {p.group for p in packets}
    assert len(groups) == 2 and ifaces == ["h0"] and frames == len(packets)
    norm, _, _ = index_capture(path, normalize=True)
    assert sorted({p.group for p in norm}) == [("PDC", "10.0.0.2", "10.0.0.3", 1),
                                               ("PDC", "10.0.0.2", "10.0.0.3", 2)]
    # normalized PSNs count from the Start_PSN: the first request of each PDC is +0
    firsts = [p for p in norm if p.kind == "req" and p.fields["uet.pds.psn"] == 0]
    assert len(firsts) == 2 and all(p.fields["uet.pds.start_psn"] == 0 for p in firsts)
    assert all("uet.pds.spdcid" not in p.fields for p in norm)
    res = diff_captures(path, path)
    assert [g.label for g in res.groups] == [
        f"PDC 10.0.0.2 > 10.0.0.3 initiator PDC {packets[0].fields['uet.pds.spdcid']}",
        f"PDC 10.0.0.2 > 10.0.0.3 initiator PDC {packets[-1].fields['uet.pds.dpdcid']}"]


def test_pdc_id_reused_after_close_is_a_new_pdc(tmp_path):
    """The same initiator PDC ID with a new Start_PSN (a SYN) is another PDC."""
    src = list(read_capture(CAPTURES / "pdc_open_close.pcapng"))
    first = decode_frame(src[0].data).pds.spdcid
    rewritten = []
    for cf in src:
        f = decode_frame(cf.data)
        pds = f.pds
        if hasattr(pds, "spdcid") and f.src_ip == "10.0.0.2":
            f.pds = replace(pds, spdcid=first)
        elif hasattr(pds, "dpdcid") and f.src_ip == "10.0.0.3":
            f.pds = replace(pds, dpdcid=first)
        rewritten.append((cf, encode_frame(f)))
    path = _write(tmp_path / "reuse.pcapng", rewritten)
    packets, _, _ = index_capture(path)
    assert sorted({p.group for p in packets}) == [("PDC", "10.0.0.2", "10.0.0.3", first, 1),
                                                  ("PDC", "10.0.0.2", "10.0.0.3", first, 2)]
    assert diff_captures(path, path).same


def test_rudi_uud_and_pfc_keys(tmp_path):
    rudi, _, _ = index_capture(CAPTURES / "rudi.pcapng", normalize=True)
    reqs = [p for p in rudi if p.kind == "RUDI_REQ"]
    assert {p.key[5] for p in reqs} == {0, 1, 2, 3}  # packet IDs from the pair's first
    assert [p.fields["uet.pds.rudi.pkt_id"] for p in reqs][:4] == [0, 1, 2, 3]
    rsps = [p for p in rudi if p.kind == "RUDI_RESP"]
    assert {p.key[5] for p in rsps} == {0, 1, 2, 3}
    assert {p.group for p in rudi} == {("RUDI", "10.0.0.2", "10.0.0.3")}
    uud, _, _ = index_capture(CAPTURES / "uud.pcapng")
    assert {p.group for p in uud} == {("UUD", "10.0.0.2", "10.0.0.3")}
    # a PFC pause of a different length is a field change of the PFC frame
    src = list(read_capture(CAPTURES / "pfc_pause.pcapng"))
    pauses = [cf for cf in src if cf.data[12:14] == b"\x88\x08"]
    assert len(pauses) == 2
    xoff = pauses[0]
    data = bytearray(xoff.data)
    data[18:20] = (1000).to_bytes(2, "big")
    b = _write(tmp_path / "pfc.pcapng",
               [(cf, bytes(data)) if cf is xoff else cf for cf in src])
    (d,) = diff_captures(CAPTURES / "pfc_pause.pcapng", b).differences()
    assert d.kind == "changed" and d.a.frame == xoff.index
    assert d.fields == {"macc.cbfc.pause_time.c0": (65535, 1000)}
    assert d.what == "PFC class 0 pause 65535"


def test_timestamps_only_when_asked(tmp_path):
    src = list(read_capture(CAPTURES / "uud.pcapng"))
    shifted = [(replace(cf, ts_ns=cf.ts_ns + 500) if cf.index == 2 else cf, cf.data)
               for cf in src]
    b = _write(tmp_path / "late.pcapng", shifted)
    assert diff_captures(CAPTURES / "uud.pcapng", b).same
    (d,) = diff_captures(CAPTURES / "uud.pcapng", b, timestamps=True).differences()
    assert d.a.frame == 2 and list(d.fields) == ["frame.time_relative_ns"]
    a_t, b_t = d.fields["frame.time_relative_ns"]
    assert b_t - a_t == 500


def test_snapped_frames_decode_and_compare_headers(tmp_path):
    src = list(read_capture(CAPTURES / "rud_loss.pcapng"))
    a = _write(tmp_path / "a.pcapng", src, snaplen=128)
    b = _write(tmp_path / "b.pcapng", [(cf, _flip_ar(cf)) if cf.index == 3 else cf
                                       for cf in src], snaplen=128)
    packets, _, _ = index_capture(a)
    full, _, _ = index_capture(CAPTURES / "rud_loss.pcapng")
    assert [p.key for p in packets] == [p.key for p in full]
    assert packets[0].fields["frame.cap_len"] == 128
    assert packets[0].fields["uet.payload_len"] == full[0].fields["uet.payload_len"] > 4000
    (d,) = diff_captures(a, b).differences()
    assert d.a.frame == 3 and set(d.fields) == {"uet.pds.flags", "uet.pds.flags.ar"}


def test_ipv6_snapped_frames_decode(tmp_path):
    """IPv6 frames cut by a snap length after their headers decode (the UDP checksum over
    bytes not captured is not checked); cutting a header makes the frame undecodable."""
    src = [cf for cf in read_capture(CAPTURES / "headers.pcapng") if cf.data[12:14] ==
           b"\x86\xdd" and cf.data[20] == 17]
    assert src
    a = _write(tmp_path / "v6.pcapng", src, snaplen=120)
    packets, _, _ = index_capture(a)
    assert all("error" not in p.fields and "uet.pds.type" in p.fields for p in packets)
    assert any(p.fields.get("frame.cap_len") == 120 for p in packets)
    cut = _write(tmp_path / "v6cut.pcapng", src, snaplen=70)
    packets, _, _ = index_capture(cut)
    assert all("the capture kept 70 of" in p.fields["error"] for p in packets)


def _run_experiment(seed: int, path: Path) -> None:
    """A small experiment through the real fabric and FEP, tapped at the receiver: two
    senders write to one host through a switch with small queues (trimming, NACKs,
    retransmissions), then close their PDCs."""
    import trio

    from uet.endpoint.fep import SINK_INDEX, SINK_KEY, FabricEndpoint
    from uet.fabric.clock import MS
    from uet.runtime.fabric import Fabric

    async def main() -> None:
        topo = {"kind": "star", "hosts": 3, "queue_bytes": 8192}
        async with Fabric(topo, seed=seed,
                          endpoint_factory=FabricEndpoint.factory(sink_bytes=1 << 16)) as fab:
            fab.capture(path, ["h2", "sw0.p0"])
            ops = [fab.submit(s, lambda ep, now: ep.call(
                now, "write", ep.target(2, resource_index=SINK_INDEX), SINK_KEY, 0,
                bytes(16384))) for s in (0, 1)]
            assert await fab.wait_until(lambda: all(op.done for op in ops), 50 * MS)
            await fab.sleep(3 * MS)  # idle PDCs close after 1 ms

    trio.run(main)


def test_same_seed_runs_diff_clean(tmp_path):
    a, b = tmp_path / "run1.pcapng", tmp_path / "run2.pcapng"
    _run_experiment(21, a)
    _run_experiment(21, b)
    rc, out, _ = _uet(["diff", "--timestamps", str(a), str(b)])
    assert rc == 0, out
    packets, frames, ifaces = index_capture(a)
    assert frames > 20 and sorted(ifaces) == ["h2", "sw0.p0"]
    kinds = {p.kind for p in packets if p.group[0] == "PDC"}
    assert {"req", "ack", "nack", "cp"} <= kinds  # trimming NACKs and the closes happened


def test_different_seeds_need_normalize(tmp_path):
    a, b = tmp_path / "seed1.pcapng", tmp_path / "seed2.pcapng"
    _run_experiment(1, a)
    _run_experiment(2, b)
    rc, out, _ = _uet(["diff", str(a), str(b)])
    assert rc == 1 and "try --normalize" in out
    assert diff_captures(a, b).totals()["matched"] == 0
    res = diff_captures(a, b, mode="normalized")
    t = res.totals()
    # the same exchange: every packet has its counterpart; what differs is seeded (EVs
    # pick paths and so queue contents, trimming and ECMP: here one switch, no ECMP)
    assert t["matched"] >= 0.9 * max(len(index_capture(a)[0]), len(index_capture(b)[0]))
    assert t["identical"] >= 0.9 * t["matched"]
    assert [g.label for g in res.groups][:2] == ["PDC 10.0.0.2 > 10.0.0.4 #1",
                                                 "PDC 10.0.0.3 > 10.0.0.4 #1"]


def test_different_seeds_without_impairments_normalize_to_same(tmp_path):
    tool = _tool()
    a = tmp_path / "s11.pcapng"
    b = tmp_path / "s12.pcapng"
    from uet.endpoint.fep import FabricEndpoint

    async def body(fab):
        await tool._write(fab, 0, 1, 6 * tool.KIB)
        await tool._until_closed(fab, 0, 1)
        await tool._write(fab, 0, 1, 2 * tool.KIB)
        await tool._until_closed(fab, 0, 1, 2)

    for seed, path in ((11, a), (12, b)):
        path.write_bytes(tool._fabric_capture(
            tool.BACK_TO_BACK, seed, FabricEndpoint.factory(sink_bytes=1 << 16), body, ["h0"]))
    assert a.read_bytes() != b.read_bytes()
    assert not diff_captures(a, b).same
    res = diff_captures(a, b, mode="normalized", timestamps=True)
    assert res.same and res.totals()["matched"] == 14


# --------------------------------------------------------------------------- cut short


def test_a_capture_cut_short_is_compared_up_to_the_cut(tmp_path):
    """Issue 19 item 11: a truncated capture was an error ("bad block length 4228 at byte
    25880"); now the readable part is compared and a warning says the file is cut short."""
    src = CAPTURES / "rud_loss.pcapng"
    cut = tmp_path / "cut.pcapng"
    cut.write_bytes(src.read_bytes()[:25900])  # inside frame 11
    res = diff_captures(src, cut)
    t = res.totals()
    assert (t["matched"], t["identical"], t["missing"], t["added"]) == (10, 10, 21, 0)
    (warning,) = res.warnings
    assert warning.startswith(f"{cut}: the file is cut short: the packet block at byte "
                              "25880 needs 4228 bytes")
    assert warning.endswith("comparing the 10 frame(s) before the cut")
    rc, out, err = _uet(["diff", str(cut), str(cut)])
    assert rc == 0 and out.rstrip().endswith("same")
    assert err.count("uet diff: warning: ") == 2 and "cut short" in err
    assert out.splitlines()[2].startswith("warning: ")  # in the report too
    rc, out, err = _uet(["diff", "--json", str(src), str(cut)])
    obj = json.loads(out)
    assert rc == 1 and obj["warnings"] == [warning] and obj["b"]["frames"] == 10


# --------------------------------------------------------------------------- summary


def test_the_report_starts_with_a_summary_of_each_side(tmp_path):
    """Issue 19 item 18: two runs that differ a lot gave >2,000 field lines and no
    summary. The report now counts, per side, packets (per tap), PDCs, retransmissions,
    NACKs by code, trimmed packets, ECN marks and PFC frames, then the fields that differ
    most, before the details."""
    src = CAPTURES / "trim_nack.pcapng"
    frames = list(read_capture(src))
    # B: the run without its NACKs and with every retransmission's AR flag flipped
    kept = []
    for cf in frames:
        f = decode_frame(cf.data)
        if f.pds.__class__.__name__ == "PdsNack":
            continue
        if f.pds.__class__.__name__ == "PdsRequest" and f.pds.flags & 0x10:
            kept.append((cf, _flip_ar(cf)))
        else:
            kept.append(cf)
    b = _write(tmp_path / "b.pcapng", kept)
    res = diff_captures(src, b)
    sa, sb = res.a_summary, res.b_summary
    assert (sa.packets, sb.packets) == (len(frames), len(frames) - 6)
    assert (sa.retransmissions, sb.retransmissions) == (6, 6)
    assert (sa.nacks, sb.nacks) == ({"TRIMMED_LASTHOP": 6}, {})
    assert (sa.trims, sb.trims) == (6, 6) and (sa.pdcs, sb.pdcs) == (2, 2)
    assert res.field_counts() == [("uet.pds.flags", 6), ("uet.pds.flags.ar", 6)]
    rc, out, _ = _uet(["diff", str(src), str(b)])
    lines = out.splitlines()
    table = lines[lines.index("") + 1:]
    assert table[0].split() == ["A", "B"]
    rows = {ln[:18].strip(): ln[18:].split() for ln in table[1:12]}
    assert rows["packets"] == [str(len(frames)), str(len(frames) - 6), "-6"]
    assert rows["retransmissions"] == ["6", "6"]
    assert rows["NACKs"] == ["6", "0", "-6"] and rows["TRIMMED_LASTHOP"] == ["6", "0", "-6"]
    assert rows["trimmed packets"] == ["6", "6"] and rows["PDCs"] == ["2", "2"]
    assert rows["on h2"] == [str(len(frames)), str(len(frames) - 6), "-6"]
    top = lines.index("fields that differ most (packets, of 6 changed or moved):")
    assert lines[top + 1].split() == ["uet.pds.flags", "6"]
    assert lines.index("") < top < min(i for i, ln in enumerate(lines) if ln.startswith("PDC 1"))
    obj = json.loads(_uet(["diff", "--json", str(src), str(b)])[1])
    assert obj["a"]["summary"]["nacks_by_code"] == {"TRIMMED_LASTHOP": 6}
    assert obj["b"]["summary"]["retransmissions"] == 6
    assert obj["fields"] == {"uet.pds.flags": 6, "uet.pds.flags.ar": 6}


# --------------------------------------------------------------------------- moved


def _with_ev(cf, ev: int) -> bytes:
    frame = decode_frame(cf.data)
    frame.ev = ev
    return encode_frame(frame)


def _sprayed(tmp_path: Path):
    """Two captures of the same five requests, tapped at the sender (h0) and on two core
    links (core0, core1). In A every request goes through core0. In B: request 0 takes
    core1 (new EV), request 1 a path with no tap (new EV), request 2 is lost after h0 (same
    EV), request 3 is unchanged, request 4 is lost and resent with a new EV on no tap."""
    reqs = [cf for cf in read_capture(CAPTURES / "rud_loss.pcapng")
            if decode_frame(cf.data).pds.__class__.__name__ == "PdsRequest"][:5]
    t = 0
    a, b = [], []

    def put(out, cf, iface, ev):
        nonlocal t
        t += 100
        out.append((replace(cf, if_name=iface, ts_ns=t), _with_ev(cf, ev)))

    for n, cf in enumerate(reqs):
        ev = 1000 + n
        put(a, cf, "h0", ev)
        put(a, cf, "core0", ev)
        new = 2000 + n
        if n == 0:
            put(b, cf, "h0", new)
            put(b, cf, "core1", new)
        elif n == 1:
            put(b, cf, "h0", new)
        elif n == 2:
            put(b, cf, "h0", ev)
        elif n == 3:
            put(b, cf, "h0", ev)
            put(b, cf, "core0", ev)
        else:
            put(b, cf, "h0", ev)
            put(b, cf, "h0", new)
    return (_write(tmp_path / "a.pcapng", a), _write(tmp_path / "b.pcapng", b))


@pytest.mark.parametrize("mode", ["exact", "normalized"])
def test_sprayed_packets_that_moved_are_not_missing_or_added(tmp_path, mode):
    """Issue 19 item 18: a sprayed packet that took another path showed as "missing" on
    one tap and "added" on another. A packet the other capture saw on another tap (with
    the same number of transmissions) is "moved", with both EVs; a loss stays missing."""
    a, b = _sprayed(tmp_path)
    res = diff_captures(a, b, mode=mode)
    t = res.totals()
    assert (t["moved"], t["missing"], t["added"]) == (2, 2, 1)
    moved = [d for d in res.differences() if d.kind == "moved"]
    between, off = moved
    # request 0: A's core0 copy and B's core1 copy are one packet on two paths
    assert (between.a.iface, between.b.iface, between.ev) == ("core0", "core1", (1000, 2000))
    assert between.fields == {} and between.seen is None
    # request 1: B saw it only at h0, with another EV: it left through an untapped path
    assert (off.a.iface, off.b, off.ev) == ("core0", None, (1001, 2001))
    assert off.seen.iface == "h0" and off.seen.frame == 3
    # request 2 (same EV, not at core0) and request 4 (resent) are losses, not moves
    missing = [d.a.frame for d in res.differences() if d.kind == "missing"]
    assert missing == [6, 10]
    (added,) = [d for d in res.differences() if d.kind == "added"]
    assert (added.b.iface, added.occurrence, added.b.ev) == ("h0", 2, 2004)
    if mode == "exact":  # the h0 copies of requests 0 and 1 carry another source port
        assert t["changed"] == 2
    else:
        assert t["changed"] == 0
    rc, out, _ = _uet(["diff"] + (["--normalize"] if mode != "exact" else []) + [str(a),
                                                                                 str(b)])
    assert "2 moved to another path" in out.splitlines()[1]
    assert "  moved   A#2 on core0 -> B#2 on core1 (EV 1000 -> 2000) RUD_REQ" in out
    assert "  moved   A#4 on core0 -> B: no tap (EV 1001 -> 2001, B#3 on h0) RUD_REQ" in out
    obj = json.loads(_uet(["diff", "--json", str(a), str(b)])[1])
    jm = [d for g in obj["groups"] for d in g["differences"] if d["kind"] == "moved"]
    assert jm[0]["ifaces"] == ["core0", "core1"] and jm[0]["ev"] == [1000, 2000]
    assert jm[1]["seen"] == {"side": "B", "frame": 3, "iface": "h0"}
    # the other way round: the same moves, seen from B
    back = diff_captures(b, a, mode=mode).totals()
    assert (back["moved"], back["missing"], back["added"]) == (2, 1, 2)
