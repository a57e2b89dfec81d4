"""The huge-page region for frames and pymalloc arenas (uet.native.huge_heap, huge_heap.c).

The region wraps the process's raw allocator for good, so every test that installs it runs
in a fresh interpreter; what it checks is printed back as JSON.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from uet.native import huge_heap

ROOT = Path(__file__).resolve().parents[2]
OFFERED = sys.platform == "linux" and huge_heap.thp_mode() in ("always", "madvise")
BUILT = huge_heap._core() is not None
#: pymalloc makes the objects (not PYTHONMALLOC=malloc, as under benchmarks/native_asan.sh):
#: only then are there arenas to serve
PYMALLOC = os.environ.get("PYTHONMALLOC", "") not in ("malloc", "malloc_debug")
#: under AddressSanitizer (benchmarks/native_asan.sh), whose shadow memory cannot be mapped
#: within a small address-space limit
ASAN = "libasan" in os.environ.get("LD_PRELOAD", "")


def _py(code: str, **env: str) -> dict:
    e = {k: v for k, v in os.environ.items() if k not in ("UET_HUGE_HEAP", "UET_PURE_PYTHON")}
    e.update(env)
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                         text=True, env=e, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_thp_mode_reads_the_bracketed_word(tmp_path: Path) -> None:
    f = tmp_path / "enabled"
    f.write_text("always [madvise] never\n")
    assert huge_heap.thp_mode(f) == "madvise"
    f.write_text("[never]\n")
    assert huge_heap.thp_mode(f) == "never"
    assert huge_heap.thp_mode(tmp_path / "missing") is None


def test_the_extension_is_built() -> None:
    # the wheel and the editable install build it (setup.py); pure mode never loads it
    assert BUILT


def test_blocks_by_size_reuse_and_the_kernel_advice() -> None:
    r = _py("""
        import json
        from uet.native import huge_heap as h
        on = h.enable(64 << 20)
        core = h._core()
        frame = bytes(4150)             # a data frame's size: from the region
        small = bytes(1000)             # below the region's sizes
        big = bytes(9000)               # above the region's sizes
        edge = [bytes(n - 33) for n in (2048, 2049, 8192, 8193)]  # bytes objects: 33 B more
        s0 = h.stats()
        keep = [bytes([i % 251]) * 4150 for i in range(2000)]
        s1 = h.stats()
        ok = all(b == bytes([i % 251]) * 4150 for i, b in enumerate(keep))
        del keep
        s2 = h.stats()
        again = [bytes(4150) for _ in range(2000)]
        s3 = h.stats()
        print(json.dumps({"on": on, "frame": core.owns(frame), "small": core.owns(small),
                          "big": core.owns(big), "edge": [core.owns(b) for b in edge],
                          "ok": ok, "s0": s0, "s1": s1, "s2": s2, "s3": s3,
                          "again": h.enable()}))
    """)
    if not OFFERED:
        assert r["on"] is False and r["s0"]["installed"] is False
        return
    assert r["on"] and r["again"] and r["s0"]["installed"]
    assert r["s0"]["huge_pages_advised"] and r["s0"]["reserved_bytes"] == 64 << 20
    assert r["frame"] and not r["small"] and not r["big"]
    assert r["edge"] == [False, True, True, False]
    assert r["ok"]
    s0, s1, s2, s3 = r["s0"], r["s1"], r["s2"], r["s3"]
    assert s1["allocs"] - s0["allocs"] >= 2000
    assert s1["in_use_bytes"] - s0["in_use_bytes"] >= 2000 * 4160
    assert s2["frees"] - s1["frees"] >= 2000
    assert s2["in_use_bytes"] <= s0["in_use_bytes"] + 4224 * 4  # what was freed is free
    # the second 2,000 frames reuse the first ones' blocks: the region grows no more
    assert s3["region_bytes"] == s1["region_bytes"]
    assert s3["peak_in_use_bytes"] >= s1["in_use_bytes"]


def test_the_raw_domain_serves_the_frames_and_the_object_domain_only_without_pymalloc(
) -> None:
    """With pymalloc, objects of more than 512 bytes reach the raw allocator, which the
    region wraps: the object allocator is left alone (no call in front of each small
    object). Under PYTHONMALLOC=malloc objects never reach the raw domain, so the object
    domain is wrapped as well; frames land in the region either way."""
    code = """
        import json
        from uet.native import huge_heap as h
        on = h.enable(64 << 20)
        frame = bytes(4150)
        lst = list(range(700))          # a list's items (5.6 KB) come from PyMem_Malloc
        print(json.dumps({"on": on, "frame": h._core().owns(frame),
                          "stats": h.stats()}))
    """
    for malloc, wraps in (("pymalloc", False), ("malloc", True)):
        r = _py(code, PYTHONMALLOC=malloc)
        if not OFFERED:
            assert r["on"] is False
            continue
        assert r["on"] and r["frame"], malloc
        assert r["stats"]["object_domain"] is wraps, malloc


def test_raw_blocks_from_threads_without_the_gil() -> None:
    """The raw domain is called without the GIL: eight threads allocating, filling,
    checking and freeing region-sized blocks at once (through ctypes, which lets the GIL
    go) lose nothing and share no block."""
    r = _py("""
        import ctypes, json, threading
        from uet.native import huge_heap as h
        on = h.enable(64 << 20)
        lib = ctypes.CDLL(None)            # calls release the GIL
        lib.PyMem_RawMalloc.restype = ctypes.c_void_p
        lib.PyMem_RawMalloc.argtypes = [ctypes.c_size_t]
        lib.PyMem_RawFree.argtypes = [ctypes.c_void_p]
        lib.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
        core = h._core()
        s0 = h.stats()
        bad = []
        def work(k):
            held = []
            for i in range(4000):
                n = 2100 + (i * 37 + k * 101) % 6000
                p = lib.PyMem_RawMalloc(n)
                lib.memset(p, k, n)
                held.append((p, n))
                if len(held) > 16:
                    q, m = held.pop(0)
                    if ctypes.string_at(q, m) != bytes([k]) * m:
                        bad.append(k)
                    lib.PyMem_RawFree(q)
            for q, m in held:
                if ctypes.string_at(q, m) != bytes([k]) * m:
                    bad.append(k)
                lib.PyMem_RawFree(q)
        ts = [threading.Thread(target=work, args=(k,)) for k in range(1, 9)]
        for t in ts: t.start()
        for t in ts: t.join()
        s1 = h.stats()
        print(json.dumps({"on": on, "bad": bad, "s0": s0, "s1": s1}))
    """)
    assert r["bad"] == []
    if OFFERED:
        s0, s1 = r["s0"], r["s1"]
        # (the checks' bytes objects are region-sized too: 32,000 more of each)
        assert s1["allocs"] - s0["allocs"] == s1["frees"] - s0["frees"] >= 32_000
        assert s1["in_use_bytes"] == s0["in_use_bytes"]


def test_pymalloc_arenas_come_from_the_region_and_are_reused() -> None:
    """After enable(), small objects live in arenas carved from the region's second half;
    an arena pymalloc gives back is kept and handed out again, so building the same
    objects twice grows the half once; objects made before keep their arenas."""
    r = _py("""
        import json
        from uet.native import huge_heap as h
        before = [(i, str(i)) for i in range(1000)]
        on = h.enable(256 << 20)
        core = h._core()
        s0 = h.stats()
        first = [(i, str(i)) for i in range(300_000)]   # ~30 MB of small objects
        ok1 = all(t == (i, str(i)) for i, t in enumerate(first))
        s1 = h.stats()
        mine = sum(core.in_arenas(t) for t in first)
        old = sum(core.in_arenas(t) for t in before)
        del first
        s2 = h.stats()
        second = [(i, str(i)) for i in range(300_000)]
        ok2 = all(t == (i, str(i)) for i, t in enumerate(second))
        s3 = h.stats()
        print(json.dumps({"on": on, "ok": ok1 and ok2, "mine": mine, "old": old,
                          "s0": s0, "s1": s1, "s2": s2, "s3": s3}))
    """)
    assert r["ok"]
    if not OFFERED:
        assert r["on"] is False
        return
    s0, s1, s2, s3 = r["s0"], r["s1"], r["s2"], r["s3"]
    if not PYMALLOC:  # malloc makes every object: pymalloc asks for no arena
        assert r["mine"] == 0 and s3["arena_allocs"] == 0
        return
    # (a few land in arenas pymalloc had already started)
    assert r["mine"] >= 270_000 and r["old"] < 100  # new objects in the region's arenas
    assert s1["arena_size"] >= 256 << 10  # pymalloc's ARENA_SIZE (1 MiB since 3.10)
    grown = s1["arena_region_bytes"] - s0["arena_region_bytes"]
    assert grown >= 16 * s1["arena_size"]
    assert s2["arena_frees"] - s1["arena_frees"] >= 10 and s2["arenas_free"] >= 10
    assert s2["arenas_live"] + s2["arenas_free"] == s2["arena_region_bytes"] // s2["arena_size"]
    # the second build reuses the freed arenas: the half grows by a few arenas at most
    assert s3["arena_region_bytes"] - s2["arena_region_bytes"] <= 4 * s1["arena_size"]
    assert s3["arena_fallbacks"] == 0


def test_a_full_region_falls_back_and_nothing_is_lost() -> None:
    """An 8 MiB region overflows (4 MiB of blocks, 4 MiB of arenas): later blocks and
    arenas come from the allocators before, and every
    block keeps its bytes through seeded mixes of sizes, frees and resizes (bytearrays
    resize through realloc, across classes and into and out of the region's sizes), while
    the region is full and after its blocks are freed."""
    r = _py("""
        import json, random
        from uet.native import huge_heap as h
        on = h.enable(8 << 20)
        rnd = random.Random(7)
        hold = [bytes([i % 7]) * 4150 for i in range(2500)]  # > 4 MiB of 4,224-byte blocks
        pairs = [(i, -i) for i in range(1000, 201000)]  # > 4 MiB of arenas
        live = {}
        bad = 0
        for step in range(60000):
            if step == 30000:  # the region's blocks come free for the rest
                bad += sum(b != bytes([i % 7]) * 4150 for i, b in enumerate(hold))
                hold = None
            k = rnd.randrange(3000)
            if k in live and rnd.random() < 0.5:
                b, v = live.pop(k)
                bad += b != bytes([v]) * len(b)
            elif k in live:
                b, v = live[k]
                n = rnd.choice((rnd.randrange(1, 600), rnd.randrange(500, 17000),
                                rnd.randrange(16000, 40000)))
                if n > len(b):
                    b.extend(bytes([v]) * (n - len(b)))
                else:
                    del b[n:]
                bad += b != bytes([v]) * len(b)
            else:
                v = rnd.randrange(256)
                live[k] = (bytearray([v]) * rnd.randrange(1, 20000), v)
        bad += sum(b != bytes([v]) * len(b) for b, v in live.values())
        bad += sum(p != (i, -i) for i, p in enumerate(pairs, 1000))
        s = h.stats()
        live.clear()
        t = h.stats()
        print(json.dumps({"on": on, "bad": bad, "s": s, "t": t}))
    """)
    assert r["bad"] == 0
    if not OFFERED:
        assert r["on"] is False
        return
    s, t = r["s"], r["t"]
    assert s["full"] > 0 and s["fallbacks"] > 0  # the region filled up
    assert s["region_bytes"] <= s["reserved_bytes"] // 2 and s["reserved_bytes"] == 8 << 20
    # so did the arenas' 4 MiB half: pymalloc's later arenas came from the allocator before
    assert s["arena_fallbacks"] > 0 or not PYMALLOC
    assert s["arena_region_bytes"] <= s["reserved_bytes"] // 2
    assert t["in_use_bytes"] < s["in_use_bytes"]
    assert t["frees"] > s["frees"]


def test_off_by_environment_and_in_pure_mode() -> None:
    code = """
        import json
        from uet.native import huge_heap as h
        print(json.dumps({"on": h.enable(), "stats": h.stats()}))
    """
    for env in ({"UET_HUGE_HEAP": "0"}, {"UET_HUGE_HEAP": "off"}, {"UET_PURE_PYTHON": "1"}):
        r = _py(code, **env)
        assert r["on"] is False and r["stats"]["installed"] is False, env


def test_a_run_is_the_same_with_and_without_the_region(tmp_path: Path) -> None:
    """uet run turns the region on where huge pages are offered; outputs do not change."""
    stats = {}
    for setting in ("1", "0"):
        out = tmp_path / setting
        r = _py(f"""
            import json
            from uet.cli import main
            rc = main(["run", "--no-progress", "--set", "traffic.size=256KiB",
                       "--set", "output.plots=false", "--out", {str(out)!r}])
            from uet.native import huge_heap as h
            print(json.dumps({{"rc": rc, "stats": h.stats()}}))
        """, UET_HUGE_HEAP=setting)
        assert r["rc"] == 0
        stats[setting] = r["stats"]
    if OFFERED:
        st = stats["1"]
        assert st["installed"] and st["allocs"] > 1000 and st["peak_in_use_bytes"] > 1 << 20
        assert (st["arena_allocs"] > 0 and st["arena_region_bytes"] > 0) or not PYMALLOC
    else:
        assert stats["1"]["installed"] is False
    assert stats["0"]["installed"] is False
    for name in ("capture.pcapng", "timeseries.json"):
        assert (tmp_path / "1" / name).read_bytes() == (tmp_path / "0" / name).read_bytes()


@pytest.mark.skipif(ASAN, reason="AddressSanitizer's shadow memory needs more address space")
def test_a_smaller_region_where_the_address_space_is_limited() -> None:
    """Where the machine's memory cannot be reserved as address space (here: an address
    space limit of 4 GiB; elsewhere vm.overcommit_memory=2), a quarter is tried, and so on."""
    r = _py("""
        import json, os, resource
        resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
        from uet.native import huge_heap as h
        on = h.enable()
        frame = bytes(4150)
        s = h.stats()
        print(json.dumps({"on": on, "stats": s, "owns": h._core().owns(frame),
                          "ram": os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")}))
    """)
    if not OFFERED:
        assert r["on"] is False
        return
    assert r["on"] and r["owns"]
    assert 64 << 20 <= r["stats"]["reserved_bytes"] < min(r["ram"], 4 << 30)
