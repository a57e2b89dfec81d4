"""(a) Every ``uet.*`` field tshark shows with the Lua dissector equals ``uet decode --json``
for the same frame, and the other way round, except the documented exceptions (listed in
field_compare.py and docs/wireshark.md, "Cross-check with uet decode --json")."""

from __future__ import annotations

import importlib.util
import tempfile
from pathlib import Path

import pytest
from field_compare import compare, decode_json
from hypothesis import HealthCheck, given, settings
from tshark_json import dissect
from wireshark_frames import write_capture

from uet.wire.codec import encode_frame

pytestmark = pytest.mark.tshark


def test_tshark_fields_equal_uet_decode_json(valid_capture, valid):
    cases, path = valid_capture
    _, shown = valid
    decoded = {tl: decode_json(path, tl) for tl in sorted({c.trailer_len for c in cases})}
    problems = []
    compared = 0
    for i, (case, d) in enumerate(zip(cases, shown, strict=True)):
        obj = decoded[case.trailer_len][i]
        assert obj["frame"] == i + 1
        assert "error" not in obj, f"{case.name}: {obj['error']}"
        compared += len([k for k in obj if k.startswith("uet.")])
        problems += [f"{case.name}: {p}" for p in compare(d.fields, obj)]
    assert compared > 1000
    assert not problems, "\n".join(problems)


ROOT = Path(__file__).resolve().parents[2]


def _cross_check(path, prefs: dict[str, str] | None = None) -> tuple[int, list[str]]:
    """Dissect ``path`` once with tshark and once with uet decode --json (no trailer);
    return the number of frames compared and the differences."""
    shown = dissect(path, prefs=prefs)
    decoded = decode_json(path, 0)
    assert len(decoded) == len(shown)
    problems = []
    for i, (d, obj) in enumerate(zip(shown, decoded, strict=True)):
        assert "error" not in obj, f"frame {i + 1}: {obj['error']}"
        problems += [f"frame {i + 1}: {p}" for p in compare(d.fields, obj)]
    return len(shown), problems


def _wire_strategies():
    """The wire package's hypothesis strategies (tests/wire/wire_strategies.py)."""
    spec = importlib.util.spec_from_file_location(
        "wire_strategies_for_wireshark", ROOT / "tests" / "wire" / "wire_strategies.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_random_frames_agree_with_uet_decode():
    """300 random frames over every field range (the wire tests' hypothesis strategy,
    derandomized), in one capture and one tshark run (preferences: no ICV, no CRC, so
    trailers are payload, as for uet decode without --trailer-len; UDP heuristics first, as
    random EVs include ports of other protocols)."""
    frames = []

    @settings(max_examples=300, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(_wire_strategies().full_frame())
    def collect(frame):
        frames.append(frame)

    collect()
    assert len(frames) >= 250
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "random.pcapng"
        write_capture(path, [encode_frame(f) for f in frames])
        n, problems = _cross_check(path, prefs={"uet.tss_icv": "FALSE",
                                                "uet.tss_cleartext": "TRUE",
                                                "udp.try_heuristic_first": "TRUE"})
    assert n == len(frames)
    assert not problems, "\n".join(problems[:40])
