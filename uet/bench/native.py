"""``uet bench --section native``: the C extension vs the pure-Python fallback, side by side.

* ``ratio``: native / pure-Python throughput on the per-packet work of a PDC pair, each
  implementation through its best API: per data packet the Internet checksum of its 4 KiB
  payload and ``on_packet`` on the receive tracker; per ACK (every 4 packets, the PDS default
  of 16 KiB) ``ack_state()`` on the receive tracker and ``apply_ack`` of that ACK on an
  ack-side tracker. PSNs wrap at 2**32, 5% of packets swap places with their successor,
  window 128 (the default MP_RANGE).
* ``ratio_checksum``, ``ratio_tracker``: the checksum and the tracker parts alone;
  ``ratio_target_side``: the mix without ``apply_ack`` (the emulator's initiator keeps its
  per-packet state in Python and does not call it); ``ratio_tracker_elementary``: the same
  tracker work through single-purpose calls (``mark``, ``base``, ``ooo_count``,
  ``cack_psn``, ``sack_bitmap``, ``mark_cumulative``, ``mark_bitmap``).
* ``<impl>_tracker_ns_per_packet[_elementary]``: tracker nanoseconds per data packet;
  ``mix_ns_per_packet_*``: the whole mix per packet, and ``..._native_for_target`` what the
  native side may spend for ``ratio`` >= 20 (``ratio_target``); ``..._native_direct_calls``
  and ``ratio_direct_calls``: the native mix with the Python wrappers taken out (direct cffi
  calls on pre-checked arguments, C results not turned into Python objects), a diagnostic of
  what the wrappers cost.
* ``native_ns_cffi_call``: one direct cffi call with one integer argument (a tracker key ORed
  with a PSN, no wrapper), the floor for the native per-packet tracker operations;
  ``native_ns_cffi_call_two_args``: the same with a tracker pointer and a PSN (two arguments
  go through an argument tuple: what a checksum call with a buffer and its length pays).
* ``codec_udp_csum_*``: ``encode_frame`` + ``decode_frame`` of an IPv6 4 KiB data frame (UDP
  checksum mandatory) with the codec's native sums vs its pure-Python ones.
* ``crc32c_gbps`` etc.: CRC-32C and checksum throughput on 64 KiB buffers;
  ``checksum_path`` is the one's-complement sum's code path in use (``avx2``, ``sse2``,
  ``portable``), ``ones_sum_<path>_gbps`` each path forced.
* ``<impl>_ns_<op>``: nanoseconds per call of single operations (details).

The mix is timed in chunks of 256 packets, each the best of several runs with the two
implementations alternating; other measurements are the best of a few repetitions.
"""

from __future__ import annotations

import dataclasses
import random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import ModuleType

import uet.native as native

NAME = "native"

_PACKET = 4096
_WINDOW = 128
_M32 = 0xFFFFFFFF


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
    start = _M32 - n // 2  # the run crosses 2**32
    psns = [(start + i) & _M32 for i in range(n)]
    for i in range(0, n - 1):
        if rng.random() < 0.05:
            psns[i], psns[i + 1] = psns[i + 1], psns[i]
    data = [payloads[i % 16] for i in range(n)]
    return data, psns, start


def _groups(data: list[bytes], psns: list[int]) -> list[tuple]:
    """(payload, psn) x 4 per ACK, flattened: the loops below unpack them without indexing."""
    n = len(psns) - len(psns) % 4
    return [
        (data[i], psns[i], data[i + 1], psns[i + 1], data[i + 2], psns[i + 2], data[i + 3],
         psns[i + 3])
        for i in range(0, n, 4)
    ]


def _mix(mod: ModuleType, groups: list[tuple], start: int, checksums: bool,
         ack_side: bool) -> Callable[[], None]:
    """The per-packet work through the combined API (one tracker call per packet / ACK)."""

    def run() -> None:
        checksum = mod.internet_checksum if checksums else _nothing
        rx = mod.PsnTracker(start, _WINDOW)
        tx = mod.PsnTracker(start, _WINDOW)
        on_packet, ack_state = rx.on_packet, rx.ack_state
        apply_ack = tx.apply_ack if ack_side else _nothing3
        for p0, s0, p1, s1, p2, s2, p3, s3 in groups:
            checksum(p0)
            on_packet(s0)
            checksum(p1)
            on_packet(s1)
            checksum(p2)
            on_packet(s2)
            checksum(p3)
            on_packet(s3)
            cack, bitmap = ack_state()
            apply_ack(cack, (cack + 1) & _M32, bitmap)

    return run


def _elementary(mod: ModuleType, groups: list[tuple], start: int) -> Callable[[], None]:
    """The same tracker work through single-purpose calls (what the PDS did before)."""

    def run() -> None:
        rx = mod.PsnTracker(start, _WINDOW)
        tx = mod.PsnTracker(start, _WINDOW)
        mark, sack = rx.mark, rx.sack_bitmap
        cumulative, bitmap_mark = tx.mark_cumulative, tx.mark_bitmap
        for _p0, s0, _p1, s1, _p2, s2, _p3, s3 in groups:
            for psn in (s0, s1, s2, s3):
                base = rx.base
                mark(psn)
                _ = (psn == base, rx.ooo_count)
            cack = rx.cack_psn
            base = (cack + 1) & _M32
            bitmap = sack(base)
            cumulative(cack)
            bitmap_mark(base, bitmap)

    return run


def _direct(fast: ModuleType, groups: list[tuple], start: int) -> Callable[[], None]:
    """The native mix with the Python wrappers taken out: the same C work through direct cffi
    calls on pre-checked arguments, results left as C returns them (a diagnostic: what the
    calls and the C code cost, without argument checks, result objects and wrapper frames)."""
    lib = fast.lib

    def run() -> None:
        rx = fast.PsnTracker(start, _WINDOW)
        tx = fast.PsnTracker(start, _WINDOW)
        tx._outbuf()
        rk, tk, view = rx._k, tx._k, tx._view
        checksum, on_packet = lib.uetn_internet_checksum, lib.uetn_tk_on_packet
        cack_of, bitmap_of = lib.uetn_tk_cack, lib.uetn_tk_ack_bitmap
        cumulative, apply_ack = lib.uetn_tk_mark_cumulative, lib.uetn_tk_apply_ack
        for p0, s0, p1, s1, p2, s2, p3, s3 in groups:
            checksum(p0, _PACKET, 0)
            on_packet(rk | s0)
            checksum(p1, _PACKET, 0)
            on_packet(rk | s1)
            checksum(p2, _PACKET, 0)
            on_packet(rk | s2)
            checksum(p3, _PACKET, 0)
            on_packet(rk | s3)
            cack, bitmap = cack_of(rk), bitmap_of(rk)
            base = (cack + 1) & _M32
            n = apply_ack(tk | cack, base, bitmap) if bitmap else cumulative(tk | cack)
            if n > 0:
                view[:n].tolist()

    return run


def _chunk_funcs(mod: ModuleType, part: list[tuple], base: int,
                 payloads: list[bytes]) -> dict[str, Callable[[], None]]:
    """The timed variants of one chunk of the workload, for one implementation."""
    return {
        "mix": _mix(mod, part, base, True, True),
        "target_side": _mix(mod, part, base, True, False),
        "checksum": _checksums(mod, payloads),
        "tracker": _mix(mod, part, base, False, True),
        "tracker_target": _mix(mod, part, base, False, False),
        "elementary": _elementary(mod, part, base),
    }


def _nothing(_payload: bytes) -> None:
    return None


def _nothing3(_a: int, _b: int, _c: int) -> None:
    return None


def _checksums(mod: ModuleType, data: list[bytes]) -> Callable[[], None]:
    def run() -> None:
        checksum = mod.internet_checksum
        for payload in data:
            checksum(payload)

    return run


def _per_op(mod: ModuleType, n: int, repeat: int, psns: list[int], start: int) -> dict[str, float]:
    rng = random.Random(2)
    buf4k = rng.randbytes(_PACKET)
    udp = rng.randbytes(1480)
    src, dst = bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])
    hdr = bytes([0x45]) + rng.randbytes(19)
    tracker = mod.PsnTracker(start, _WINDOW)
    for psn in psns[:64]:
        tracker.mark(psn)
    probe = psns[70]
    ack_side = mod.PsnTracker(start, _WINDOW)
    cack, bitmap = tracker.ack_state()
    ops: dict[str, Callable[[], object]] = {
        "internet_checksum_4k": lambda: mod.internet_checksum(buf4k),
        "ipv4_header_checksum": lambda: mod.ipv4_header_checksum(hdr),
        "udp_checksum_ipv4_1480": lambda: mod.udp_checksum_ipv4(src, dst, udp),
        "checksum_adjust": lambda: mod.checksum_adjust(0x1234, 0x4011, 0x3F11),
        "tracker_mark_duplicate": lambda: tracker.mark(probe),
        "tracker_on_packet_duplicate": lambda: tracker.on_packet(probe),
        "tracker_classify": lambda: tracker.classify(probe),
        "tracker_sack_bitmap": lambda: tracker.sack_bitmap(probe),
        "tracker_ack_state": lambda: tracker.ack_state(),
        "tracker_is_received": lambda: tracker.is_received(probe),
        "tracker_apply_ack_repeat": lambda: ack_side.apply_ack(cack, (cack + 1) & _M32, bitmap),
    }
    out = {}
    for name, op in ops.items():

        def loop(op: Callable[[], object] = op) -> None:
            for _ in range(n):
                op()

        out[name] = _best_ns(loop, repeat) / n

    def stream() -> None:  # a tracker fed the whole stream, per mark
        mark = mod.PsnTracker(start, _WINDOW).mark
        for psn in psns:
            mark(psn)

    out["tracker_mark_stream"] = _best_ns(stream, repeat) / len(psns)

    def stream_on_packet() -> None:
        on_packet = mod.PsnTracker(start, _WINDOW).on_packet
        for psn in psns:
            on_packet(psn)

    out["tracker_on_packet_stream"] = _best_ns(stream_on_packet, repeat) / len(psns)

    def bulk() -> None:  # the same stream in one mark_many call
        mod.PsnTracker(start, _WINDOW).mark_many(psns)

    out["tracker_mark_many_per_psn"] = _best_ns(bulk, repeat) / len(psns)

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


def _cffi_floor(fast: ModuleType, n: int, repeat: int) -> tuple[float, float]:
    """ns per direct cffi call (no Python wrapper): the one-integer call the tracker methods
    use (key | PSN), and a two-argument call (tracker pointer, PSN) for comparison."""
    tracker = fast.PsnTracker(0, _WINDOW)
    by_key, key = fast.lib.uetn_tk_classify, tracker._k | 5
    by_ptr, ptr = fast.lib.uetn_tracker_classify, tracker._t

    def one() -> None:
        for _ in range(n):
            by_key(key)

    def two() -> None:
        for _ in range(n):
            by_ptr(ptr, 5)

    return _best_ns(one, repeat) / n, _best_ns(two, repeat) / n


@contextmanager
def _codec_sums(ones_sum: Callable | None, adjust: Callable) -> Iterator[None]:
    """Run the codec with the given checksum helpers (its import-time choice restored)."""
    from uet.wire import codec

    saved = codec._ONES_SUM, codec._adjust
    codec._ONES_SUM, codec._adjust = ones_sum, adjust
    try:
        yield
    finally:
        codec._ONES_SUM, codec._adjust = saved


def _codec(fast: ModuleType, quick: bool, repeat: int) -> dict[str, float]:
    """encode + decode of a UDP-checksummed IPv6 4 KiB frame, native vs pure sums."""
    from uet.bench.codec import _frames
    from uet.wire import codec

    frame = dataclasses.replace(_frames()["data"], src_ip="fd00::1", dst_ip="fd00::2",
                                udp_checksum=True)
    n = 500 if quick else 3000

    def loop() -> None:
        for _ in range(n):
            codec.decode_frame(codec.encode_frame(frame))

    best = {"native": float("inf"), "python": float("inf")}
    for _ in range(repeat):
        with _codec_sums(fast.ones_sum, fast.checksum_adjust):
            best["native"] = min(best["native"], _best_ns(loop, 1))
        with _codec_sums(None, codec._adjust_py):
            best["python"] = min(best["python"], _best_ns(loop, 1))
    return {
        "codec_udp_csum_pps_native": n / best["native"] * 1e9,
        "codec_udp_csum_pps_python": n / best["python"] * 1e9,
        "ratio_codec_udp_csum": best["python"] / best["native"],
    }


def run(quick: bool) -> dict:
    """Measure; see the module docstring for the keys."""
    result: dict[str, object] = {"implementation": native.IMPLEMENTATION}
    fast = native.fast
    if fast is None:
        result["error"] = f"C extension not built: {native.FAST_IMPORT_ERROR}"
        return result
    pure = native.pure
    n = 2048 if quick else 8192
    repeat = 3 if quick else 7
    data, psns, start = _workload(n)
    groups = _groups(data, psns)
    packets = len(groups) * 4

    # Chunks of 64 ACKs (256 packets), each timed `repeat` times per implementation with the
    # two alternating, keeping each chunk's best: robust against other load on the machine.
    chunk = 64
    kinds = ("mix", "target_side", "checksum", "tracker", "tracker_target", "elementary")
    times: dict[str, dict[str, float]] = {k: {"python": 0.0, "native": 0.0} for k in kinds}
    direct = 0.0
    for first in range(0, len(groups), chunk):
        part = groups[first:first + chunk]
        base = (start + 4 * first) & _M32
        payloads = [p for g in part for p in g[0::2]]
        funcs = {mod.IMPLEMENTATION: _chunk_funcs(mod, part, base, payloads)
                 for mod in (pure, fast)}
        for name in kinds:
            best = {"python": float("inf"), "native": float("inf")}
            for _ in range(repeat):  # alternate the two implementations
                for key in best:
                    best[key] = min(best[key], _best_ns(funcs[key][name], 1))
            for key in best:
                times[name][key] += best[key]
        run_direct = _direct(fast, part, base)
        direct += min(_best_ns(run_direct, 1) for _ in range(repeat))

    def ratio(kind: str) -> float:
        return times[kind]["python"] / times[kind]["native"]

    result["ratio"] = ratio("mix")
    result["ratio_target"] = 20.0
    result["ratio_checksum"] = ratio("checksum")
    result["ratio_tracker"] = ratio("tracker")
    result["ratio_target_side"] = ratio("target_side")
    result["ratio_tracker_target_side"] = ratio("tracker_target")
    result["ratio_tracker_elementary"] = ratio("elementary")
    result["mix_packets_per_s_native"] = packets / times["mix"]["native"] * 1e9
    result["mix_packets_per_s_python"] = packets / times["mix"]["python"] * 1e9
    # the gap to the target: what native may spend per packet for ratio >= 20, and spends
    result["mix_ns_per_packet_python"] = times["mix"]["python"] / packets
    result["mix_ns_per_packet_native"] = times["mix"]["native"] / packets
    result["mix_ns_per_packet_native_for_target"] = times["mix"]["python"] / packets / 20.0
    result["mix_ns_per_packet_native_direct_calls"] = direct / packets
    result["ratio_direct_calls"] = times["mix"]["python"] / direct
    for key in ("native", "python"):
        result[f"{key}_tracker_ns_per_packet"] = times["tracker"][key] / packets
        result[f"{key}_tracker_ns_per_packet_elementary"] = times["elementary"][key] / packets
        result[f"{key}_checksum_ns_per_packet"] = times["checksum"][key] / packets

    per_n = 5000 if quick else 20000
    result["native_ns_cffi_call"], result["native_ns_cffi_call_two_args"] = _cffi_floor(
        fast, per_n, repeat
    )
    result.update(_codec(fast, quick, repeat))

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
    result["checksum_path"] = fast.checksum_impl()
    for path in ("portable", "sse2", "avx2"):
        result[f"ones_sum_{path}_gbps"] = gbps(getattr(fast, f"ones_sum_{path}"), loops)
    result["ones_sum_python_gbps"] = gbps(pure.ones_sum, max(1, loops // 20))

    for mod in (pure, fast):
        for name, value in _per_op(mod, per_n, repeat, psns, start).items():
            result[f"{mod.IMPLEMENTATION}_ns_{name}"] = value
    return result
