"""``uet bench --section native``: the C extension vs the pure-Python fallback, side by side.

* ``ratio``: native / pure-Python throughput on a per-packet mix: the Internet checksum of a
  4 KiB payload, then ``PsnTracker.mark`` of the packet's PSN (5% of packets swapped with
  their successor, window 128, PSNs wrapping at 2**32) and ``sack_bitmap`` from that PSN (a
  per-packet ACK). ``ratio_checksum`` and ``ratio_tracker`` split it.
* ``crc32c_gbps``: native CRC-32C throughput on 64 KiB buffers (``crc32c_path`` says which
  code path), plus the portable slicing-by-8 path and the pure-Python one for reference.
* ``<impl>_ns_<op>``: nanoseconds per call of single operations.

Each measurement is the best of a few repetitions; the two implementations alternate.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from types import ModuleType

import uet.native as native

NAME = "native"

_PACKET = 4096


def _best_ns(func: Callable[[], object], repeat: int) -> float:
    """Best wall time of ``func()`` over ``repeat`` runs, in ns."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter_ns()
        func()
        best = min(best, time.perf_counter_ns() - t0)
    return best


def _workload(n: int, seed: int = 1) -> tuple[list[bytes], list[int], int]:
    rng = random.Random(seed)
    payloads = [rng.randbytes(_PACKET) for _ in range(16)]
    start = 0xFFFFFFFF - n // 2  # the run crosses 2**32
    psns = [(start + i) & 0xFFFFFFFF for i in range(n)]
    for i in range(0, n - 1):
        if rng.random() < 0.05:
            psns[i], psns[i + 1] = psns[i + 1], psns[i]
    data = [payloads[i % 16] for i in range(n)]
    return data, psns, start


def _mix(mod: ModuleType, data: list[bytes], psns: list[int], start: int) -> Callable[[], None]:
    def run() -> None:
        checksum = mod.internet_checksum
        tracker = mod.PsnTracker(start, 128)
        mark, sack = tracker.mark, tracker.sack_bitmap
        for payload, psn in zip(data, psns, strict=True):
            checksum(payload)
            mark(psn)
            sack(psn)

    return run


def _checksums(mod: ModuleType, data: list[bytes]) -> Callable[[], None]:
    def run() -> None:
        checksum = mod.internet_checksum
        for payload in data:
            checksum(payload)

    return run


def _tracker(mod: ModuleType, psns: list[int], start: int) -> Callable[[], None]:
    def run() -> None:
        tracker = mod.PsnTracker(start, 128)
        mark, sack = tracker.mark, tracker.sack_bitmap
        for psn in psns:
            mark(psn)
            sack(psn)

    return run


def _per_op(mod: ModuleType, n: int, repeat: int, psns: list[int], start: int) -> dict[str, float]:
    rng = random.Random(2)
    buf4k = rng.randbytes(_PACKET)
    udp = rng.randbytes(1480)
    src, dst = bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])
    hdr = bytes([0x45]) + rng.randbytes(19)
    tracker = mod.PsnTracker(start, 128)
    for psn in psns[:64]:
        tracker.mark(psn)
    probe = psns[70]
    ops: dict[str, Callable[[], object]] = {
        "internet_checksum_4k": lambda: mod.internet_checksum(buf4k),
        "ipv4_header_checksum": lambda: mod.ipv4_header_checksum(hdr),
        "udp_checksum_ipv4_1480": lambda: mod.udp_checksum_ipv4(src, dst, udp),
        "checksum_adjust": lambda: mod.checksum_adjust(0x1234, 0x4011, 0x3F11),
        "tracker_mark_duplicate": lambda: tracker.mark(probe),
        "tracker_sack_bitmap": lambda: tracker.sack_bitmap(probe),
        "tracker_is_received": lambda: tracker.is_received(probe),
    }
    out = {}
    for name, op in ops.items():

        def loop(op: Callable[[], object] = op) -> None:
            for _ in range(n):
                op()

        out[name] = _best_ns(loop, repeat) / n

    def stream() -> None:  # a tracker fed the whole stream, per mark
        mark = mod.PsnTracker(start, 128).mark
        for psn in psns:
            mark(psn)

    out["tracker_mark_stream"] = _best_ns(stream, repeat) / len(psns)
    # ROD: a reordered stream through the reorder buffer, per packet (insert + pop_ready)

    def rod() -> None:
        rb = mod.ReorderBuffer(256, 1 << 30, start)
        insert, pop = rb.insert, rb.pop_ready
        for psn in psns:
            insert(psn, psn, _PACKET)
            pop()

    out["reorder_insert_pop"] = _best_ns(rod, repeat) / len(psns)
    # per-operation crc32c on 4 KiB, fewer iterations in Python
    crc_n = n if mod.IMPLEMENTATION == "native" else max(5, n // 200)

    def crc() -> None:
        for _ in range(crc_n):
            mod.crc32c(buf4k)

    out["crc32c_4k"] = _best_ns(crc, repeat) / crc_n
    return out


def run(quick: bool) -> dict:
    """Measure; see the module docstring for the keys."""
    result: dict[str, object] = {"implementation": native.IMPLEMENTATION}
    fast = native.fast
    if fast is None:
        result["error"] = f"C extension not built: {native.FAST_IMPORT_ERROR}"
        return result
    pure = native.pure
    n = 2000 if quick else 10000
    repeat = 3 if quick else 5
    data, psns, start = _workload(n)

    times: dict[str, dict[str, float]] = {"mix": {}, "checksum": {}, "tracker": {}}
    for _ in range(repeat):  # alternate the two implementations
        for mod in (pure, fast):
            key = mod.IMPLEMENTATION
            for name, func in (
                ("mix", _mix(mod, data, psns, start)),
                ("checksum", _checksums(mod, data)),
                ("tracker", _tracker(mod, psns, start)),
            ):
                t = _best_ns(func, 1)
                times[name][key] = min(times[name].get(key, float("inf")), t)
    result["ratio"] = times["mix"]["python"] / times["mix"]["native"]
    result["ratio_checksum"] = times["checksum"]["python"] / times["checksum"]["native"]
    result["ratio_tracker"] = times["tracker"]["python"] / times["tracker"]["native"]
    result["mix_packets_per_s_native"] = n / times["mix"]["native"] * 1e9
    result["mix_packets_per_s_python"] = n / times["mix"]["python"] * 1e9

    big = random.Random(3).randbytes(64 * 1024)
    loops = 200 if quick else 1000

    def gbps(func: Callable[[bytes], int], count: int) -> float:
        def body() -> None:
            for _ in range(count):
                func(big)

        return count * len(big) / _best_ns(body, repeat)  # bytes per ns == GB/s

    result["crc32c_gbps"] = gbps(fast.crc32c, loops)
    result["crc32c_path"] = fast.crc32c_impl()
    result["crc32c_slicing8_gbps"] = gbps(fast.crc32c_slicing8, max(1, loops // 4))
    result["crc32c_python_gbps"] = gbps(pure.crc32c, 1)
    result["internet_checksum_gbps"] = gbps(fast.internet_checksum, loops)

    per_n = 5000 if quick else 20000
    for mod in (pure, fast):
        for name, value in _per_op(mod, per_n, repeat, psns, start).items():
            result[f"{mod.IMPLEMENTATION}_ns_{name}"] = value
    return result
