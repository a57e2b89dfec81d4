"""ECMP: a seeded 64-bit mix hash over the IP/UDP 5-tuple.

The entropy value rides in the UDP source port (or the native-IP entropy header), so a
sender picks a path by picking an EV. The hash is splitmix64's finaliser folded over the
tuple words, seeded per switch: stable across runs and Python versions (never ``hash()``).
"""

from __future__ import annotations

M64 = (1 << 64) - 1


def mix64(x: int) -> int:
    """splitmix64 finaliser: a bijective 64-bit mix with full avalanche."""
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9 & M64
    x = (x ^ (x >> 27)) * 0x94D049BB133111EB & M64
    return x ^ (x >> 31)


def hash_tuple(seed: int, src: bytes, dst: bytes, proto: int, sport: int, dport: int) -> int:
    """64-bit hash of a 5-tuple (IPv4 or IPv6 addresses as bytes); ``seed`` is 64-bit.

    The addresses are folded 64 bits at a time through :func:`mix64`, then the protocol and
    ports: two mixes for IPv4, five for IPv6.
    """
    h = seed & M64
    x = int.from_bytes(src + dst, "big")
    while True:
        h = mix64(h ^ (x & M64))
        x >>= 64
        if not x:
            break
    return mix64(h ^ (proto << 32 | sport << 16 | dport))


def switch_seed(fabric_seed: int, name: str) -> int:
    """A per-switch hash seed derived from the fabric seed and the switch name."""
    h = mix64(fabric_seed & M64)
    for b in name.encode():
        h = mix64(h ^ b)
    return h


def pick(h: int, n: int) -> int:
    """Index in [0, n) from a 64-bit hash (multiply-shift, unbiased enough for n << 2**32)."""
    return ((h >> 32) * n) >> 32
