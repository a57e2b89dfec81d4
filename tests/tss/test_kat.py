"""Known-answer tests of the TSS primitives.

* AES-GCM-256: test cases 13-16 of McGrew and Viega, "The Galois/Counter Mode of Operation
  (GCM)" (the vectors of NIST's GCM specification, SP 800-38D's reference document).
* AES-CMAC with a 256-bit key: NIST SP 800-38B, Appendix D.3, Examples 9-12 (also RFC 4493's
  message set).
* The KDF (SP 800-108 counter mode, AES-CMAC PRF, 8-bit counter, label || 0x00 || context ||
  [L]_32, 44 bytes): vectors derived by ``independent.py`` (CMAC and the counter loop written
  from the standards over the bare AES block; that CMAC is itself checked against the NIST
  examples below). docs/tss.md lists the same vectors.
"""

from __future__ import annotations

import pytest

from tests.tss.independent import cmac as independent_cmac
from tests.tss.independent import kdf_counter_cmac
from uet.tss import crypto

K256 = "feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308"
IV96 = "cafebabefacedbaddecaf888"
P64 = ("d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a72"
       "1c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b391aafd255")
C64 = ("522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa"
       "8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662898015ad")
GCM_CASES = [  # (case, key, iv, plaintext, aad, ciphertext, tag)
    (13, "00" * 32, "00" * 12, "", "", "", "530f8afbc74536b9a963b4f1c4cb738b"),
    (14, "00" * 32, "00" * 12, "00" * 16, "", "cea7403d4d606b6e074ec5d3baf39d18",
     "d0d1c8a799996bf0265b98b5d48ab919"),
    (15, K256, IV96, P64, "", C64, "b094dac5d93471bdec1a502270e3cc6c"),
    (16, K256, IV96, P64[:120], "feedfacedeadbeeffeedfacedeadbeefabaddad2", C64[:120],
     "76fc6ece0f4e1768cddf8853bb2d551b"),
]


@pytest.mark.parametrize("case,key,iv,pt,aad,ct,tag", GCM_CASES, ids=lambda v: str(v))
def test_gcm_vectors(case, key, iv, pt, aad, ct, tag):
    g = crypto.aead(bytes.fromhex(key))
    out = g.encrypt(bytes.fromhex(iv), bytes.fromhex(pt), bytes.fromhex(aad) or None)
    assert out.hex() == ct + tag
    assert g.decrypt(bytes.fromhex(iv), out, bytes.fromhex(aad) or None).hex() == pt


def test_gcm_refuses_a_flipped_bit():
    from cryptography.exceptions import InvalidTag

    g = crypto.aead(bytes.fromhex(K256))
    out = bytearray(g.encrypt(bytes.fromhex(IV96), bytes.fromhex(P64), b"hdr"))
    out[5] ^= 1
    with pytest.raises(InvalidTag):
        g.decrypt(bytes.fromhex(IV96), bytes(out), b"hdr")


CMAC_KEY = bytes.fromhex("603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4")
CMAC_MSG = bytes.fromhex("6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e51"
                         "30c81c46a35ce411e5fbc1191a0a52eff69f2445df4f9b17ad2b417be66c3710")
CMAC_CASES = [(0, "028962f61b7bf89efc6b551f4667d983"), (16, "28a7023f452e8f82bd4bf28d8c37c35c"),
              (40, "aaf3d8f1de5640c232f5b169b9c911e6"), (64, "e1992190549f6ed5696a2c056c315410")]


@pytest.mark.parametrize("mlen,tag", CMAC_CASES)
def test_cmac_vectors(mlen, tag):
    assert crypto.cmac(CMAC_KEY, CMAC_MSG[:mlen]).hex() == tag
    assert independent_cmac(CMAC_KEY, CMAC_MSG[:mlen]).hex() == tag


KDF_KEY = bytes(range(32))
KDF_CASES = [  # (label, context, 44-byte output): cluster IPv4, with epoch and rekey,
    # server IPv4, cluster IPv6 (the 26-byte context), our generation label
    ("U1", "0000" "00000000" "0a000001",
     "2a39ba7aca40f7fbb19ac7a940dbda1366b8f076fe4d106c42f7957781b92b027755555a3bdd376f9356014b"),
    ("U1", "0003" "00000002" "0a000001",
     "77122c238937d880ce3f062caae73461ed03bb7920737d2f1158bf9b9c53a6e6e353457880bab1715e5a02f8"),
    ("U2", "0000" "00000000" "0a000002",
     "63f4fa5cb0622cff466e3d611915a090b99cde9d408215f98f292f40d353e4fdb208603d525696ec5e9ccb29"),
    ("U1", "00000000" "0001" "00000000" "fd000000000000000000000000000001",
     "9019a31b5e11a7a4da79c30e8b85190658aeca0a31cb37f13436b249d2c2c12d16f98e77b24bef20cbefe6ea"),
    ("UG", "0000000000000001",
     "de1087ce91098af13a92b28cb45e74a105be2a4a37140d38c0dfa26463450504271bd5baae906bb41798ae7f"),
]


@pytest.mark.parametrize("label,context,out", KDF_CASES)
def test_kdf_vectors(label, context, out):
    got = crypto.kdf(KDF_KEY, label.encode(), bytes.fromhex(context))
    assert got.hex() == out
    assert kdf_counter_cmac(KDF_KEY, label.encode(), bytes.fromhex(context), 44).hex() == out


def test_kdf_matches_independent_on_random_inputs():
    import random

    rng = random.Random(14)
    for _ in range(40):
        key = rng.randbytes(32)
        label = rng.choice([b"U1", b"U2", b"UG", b"x" * rng.randrange(0, 9)])
        ctx = rng.randbytes(rng.randrange(0, 40))
        n = rng.choice([16, 32, 44, 48, 64])
        assert crypto.kdf(key, label, ctx, n) == kdf_counter_cmac(key, label, ctx, n)


def test_kdf_output_depends_on_every_input():
    base = crypto.kdf(KDF_KEY, b"U1", bytes(10))
    assert crypto.kdf(KDF_KEY, b"U2", bytes(10)) != base
    assert crypto.kdf(KDF_KEY, b"U1", bytes(9) + b"\1") != base
    assert crypto.kdf(bytes(32), b"U1", bytes(10)) != base
    # L (the output length in bits) is part of the fixed input: 32 bytes are not a prefix
    assert crypto.kdf(KDF_KEY, b"U1", bytes(10), 32) != base[:32]
