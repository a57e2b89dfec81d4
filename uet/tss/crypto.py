"""The cryptographic primitives of TSS (ref. 7.2), from ``cryptography`` (OpenSSL).

* AES-GCM-256 (:func:`aead`): 32-byte key, 12-byte IV, 16-byte tag appended;
* AES-CMAC (:func:`cmac`) with a 256-bit key;
* the key derivation (:func:`kdf`): NIST SP 800-108 in counter mode with AES-CMAC as the
  PRF, as the UEC reference provider's ``kdf_ctr_cmac_aes`` does it: an 8-bit counter
  before the fixed input, fixed input = label || 0x00 || context || [L]_32 (L in bits,
  big-endian), 44 bytes of output = a 32-byte key followed by a 12-byte IV mask.

Nothing here is hand-written crypto: the block cipher, GCM, CMAC and the counter-mode KDF
are the library's. ``tests/tss/test_kat.py`` holds them to the NIST vectors and the KDF to
an independent implementation built from the AES block alone.
"""

from __future__ import annotations

from functools import lru_cache

from cryptography.hazmat.primitives.ciphers import algorithms
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.cmac import CMAC
from cryptography.hazmat.primitives.kdf.kbkdf import KBKDFCMAC, CounterLocation, Mode

KEY_LEN = 32  #: AES-256
IV_LEN = 12
TAG_LEN = 16
KDF_LEN = 44  #: derived key (32) + IV mask (12)

#: KDF labels of the reference provider (``uet_sec_sd.c``): cluster mode derives per-source
#: keys with "U1", server mode per-client keys with "U2" (pre-1.0 drafts used "UE1"/"UE2")
LABEL_CLUSTER = b"U1"
LABEL_SERVER = b"U2"
#: our label for the keys of later AN generations (rotation): the reference provider draws
#: them from a compiled-in pool; a real deployment gets them from its SDME (docs/tss.md)
LABEL_GENERATION = b"UG"


def aead(key: bytes) -> AESGCM:
    """An AES-GCM-256 context for ``key`` (32 bytes). ``encrypt(iv, data, aad)`` returns the
    ciphertext with the 16-byte tag appended; ``decrypt`` raises
    ``cryptography.exceptions.InvalidTag`` when the tag does not verify."""
    if len(key) != KEY_LEN:
        raise ValueError(f"an AES-GCM-256 key is {KEY_LEN} bytes, got {len(key)}")
    return AESGCM(key)


def cmac(key: bytes, data: bytes) -> bytes:
    """AES-CMAC of ``data`` (16 bytes)."""
    c = CMAC(algorithms.AES(key))
    c.update(data)
    return c.finalize()


@lru_cache(maxsize=4096)
def kdf(key: bytes, label: bytes, context: bytes, length: int = KDF_LEN) -> bytes:
    """SP 800-108 counter-mode KDF with AES-CMAC (8-bit counter first; label || 0x00 ||
    context || [length*8]_32): ``length`` bytes derived from ``key``."""
    return KBKDFCMAC(algorithm=algorithms.AES, mode=Mode.CounterMode, length=length, rlen=1,
                     llen=4, location=CounterLocation.BeforeFixed, label=label,
                     context=context, fixed=None).derive(key)


__all__ = ["IV_LEN", "KDF_LEN", "KEY_LEN", "LABEL_CLUSTER", "LABEL_GENERATION",
           "LABEL_SERVER", "TAG_LEN", "aead", "cmac", "kdf"]
