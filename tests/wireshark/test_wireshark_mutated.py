"""The dissector under random input: thousands of frames from the reference captures with
their UET bytes mutated, cut or replaced (IP and UDP lengths kept consistent, so tshark
hands every frame to our dissector). Wireshark must show each as UET, with expert info
where it is broken, and the Lua code must never fail ("Lua Error" in the tree)."""

from __future__ import annotations

import random
from pathlib import Path

from tshark_json import run_tshark

from uet.capture.pcapng import PcapngWriter, read_capture

ROOT = Path(__file__).resolve().parents[2]


def _mutated(seed: int, n: int) -> list[bytes]:
    rng = random.Random(seed)
    frames = [f.data for p in sorted((ROOT / "captures").glob("*.pcapng"))
              for f in read_capture(p) if f.linktype == 1 and len(f.data) > 62]
    out = []
    for _ in range(n):
        d = bytearray(rng.choice(frames))
        v4 = d[12:14] == b"\x08\x00"
        start = 42 if v4 else 62  # first UET byte (after Ethernet / IP / UDP)
        r = rng.random()
        if r < 0.5:
            for _ in range(rng.randint(1, 6)):
                d[rng.randrange(start, len(d))] = rng.randrange(256)
        elif r < 0.8:
            d = d[:rng.randrange(start, len(d) + 1)]
        else:
            d = d[:start] + bytearray(rng.randbytes(rng.randrange(0, 80)))
        if v4:
            d[16:18] = (len(d) - 14).to_bytes(2, "big")
            d[38:40] = (len(d) - 34).to_bytes(2, "big")
        else:
            d[18:20] = (len(d) - 54).to_bytes(2, "big")
            d[58:60] = (len(d) - 54).to_bytes(2, "big")
        out.append(bytes(d))
    return out


def test_dissector_never_fails_on_mutated_frames(tmp_path: Path) -> None:
    frames = _mutated(seed=4, n=3000)
    path = tmp_path / "mutated.pcapng"
    with PcapngWriter.open(path) as w:
        iface = w.add_interface("fuzz")
        for i, data in enumerate(frames):
            w.write_packet(iface, i * 1000, data)
    tree = run_tshark(path, extra=["-V"])
    assert "Lua Error" not in tree and "Dissector bug" not in tree
    summary = run_tshark(path)
    protocols = [line.split()[5] for line in summary.splitlines() if len(line.split()) > 5]
    assert len(protocols) == len(frames)
    assert protocols.count("UET") >= 0.95 * len(frames)
    assert tree.count("Expert Info") > 1000  # the broken ones are flagged, not silent
