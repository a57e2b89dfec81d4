"""An independent AES-CMAC and SP 800-108 counter-mode KDF, built from the AES block alone.

Used only by the tests, to derive the KDF vectors without the code under test: the block
cipher is AES-ECB of ``cryptography``; CMAC (NIST SP 800-38B: subkeys K1/K2 by doubling
in GF(2^128), the last block XORed with K1, or padded with 10* and XORed with K2) and the
counter-mode loop (SP 800-108 section 5.1: K(i) = PRF(K, [i]_8 || Label || 0x00 ||
Context || [L]_32)) are written out here from the standards' text.
"""

from __future__ import annotations

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

_RB = 0x87
_MASK = (1 << 128) - 1


def aes_block(key: bytes, block: bytes) -> bytes:
    enc = Cipher(algorithms.AES(key), modes.ECB()).encryptor()
    return enc.update(block) + enc.finalize()


def _double(block: bytes) -> bytes:
    v = int.from_bytes(block, "big")
    out = (v << 1) & _MASK
    if v >> 127:
        out ^= _RB
    return out.to_bytes(16, "big")


def _xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b, strict=True))


def cmac(key: bytes, msg: bytes) -> bytes:
    l_val = aes_block(key, bytes(16))
    k1 = _double(l_val)
    k2 = _double(k1)
    n = max(1, -(-len(msg) // 16))
    complete = len(msg) > 0 and len(msg) % 16 == 0
    last = msg[16 * (n - 1):]
    last = _xor(last, k1) if complete else _xor(last + b"\x80" + bytes(15 - len(last)), k2)
    x = bytes(16)
    for i in range(n - 1):
        x = aes_block(key, _xor(x, msg[16 * i:16 * i + 16]))
    return aes_block(key, _xor(x, last))


def kdf_counter_cmac(key: bytes, label: bytes, context: bytes, length: int) -> bytes:
    fixed = label + b"\x00" + context + (8 * length).to_bytes(4, "big")
    out = b""
    i = 1
    while len(out) < length:
        out += cmac(key, bytes([i]) + fixed)
        i += 1
    return out[:length]
