"""Secure-domain rules, one frame at a time: each refusal has its reason counter
(ref. 7.2; docs/tss.md, "What each refusal means")."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from tests.tss.conftest import KEY, A, B, C, frame, sublayer
from uet.tss import TssConfig, TssConfigError, TssSublayer
from uet.tss.header import HDR_LEN, unpack_header
from uet.wire.codec import split_frame


def refused(sub: TssSublayer) -> dict[str, int]:
    return {k.split(".", 1)[1]: v for k, v in sub.counters.items() if k.startswith("rx_refused")}


def test_round_trip_and_layout_matches_an_independent_decryption(pair):
    a, b = pair
    data = a.seal_frame(0, frame(payload=b"x" * 100))
    env, off, end = split_frame(data)
    uet = data[off:end]
    hdr = unpack_header(uet)
    assert (hdr.sdi, hdr.an, hdr.epoch, hdr.tsc, hdr.sp) == (1, 0, 0, 0, False)
    # AAD = src || dst || EV(2) || 0x0000 || TSS header; IV = src IPv4 || epoch:TSC
    aad = bytes([10, 0, 0, 1, 10, 0, 0, 2, 0x12, 0x34, 0, 0]) + uet[:HDR_LEN]
    iv = bytes([10, 0, 0, 1]) + bytes(8)
    plain = AESGCM(KEY).decrypt(iv, uet[HDR_LEN:], aad)
    assert plain.endswith(b"x" * 100) and plain[0] >> 3 == 2  # a RUD request follows
    got = b.open_frame(0, data)
    assert got.payload == b"x" * 100 and got.pds.psn == 1000 and got.tss.sdi == 1
    assert b.counters["rx_ok"] == 1 and not refused(b)


def _flip(data: bytes, at: int) -> bytes:
    out = bytearray(data)
    out[at] ^= 0x01
    return bytes(out)


@pytest.mark.parametrize("where", ["ip_src", "ip_dst", "udp_sport", "tss_epoch", "tss_tsc",
                                   "tss_an", "pds_header", "payload", "tag"])
def test_tampering_is_refused(pair, where):
    a, b = pair
    data = a.seal_frame(0, frame())
    off = split_frame(data)[1]
    at = {"ip_src": 29, "ip_dst": 33, "udp_sport": 35, "tss_epoch": off + 4,
          "tss_tsc": off + 11, "tss_an": off, "pds_header": off + HDR_LEN + 5,
          "payload": len(data) - 20, "tag": len(data) - 1}[where]
    bad = _flip(data, at)
    if where.startswith("ip"):  # keep the IPv4 header checksum right: the attacker can
        bad = bytearray(bad)
        bad[24:26] = b"\0\0"
        from uet.wire.codec import _ipv4_header_checksum  # noqa: PLC2701

        bad[24:26] = _ipv4_header_checksum(bytes(bad[14:34])).to_bytes(2, "big")
        bad = bytes(bad)
    if where == "tss_an":
        bad = bytearray(data)
        bad[off] ^= 0x01  # the AN bit (mask 0x01000000 of the first word)
        bad = bytes(bad)
    got = b.open_frame(0, bad)
    assert got is None
    assert refused(b) == {"auth_fail": 1}
    assert b.open_frame(0, data) is not None  # the genuine frame still passes


def test_wrong_key_and_wrong_sdi():
    a = sublayer(A)
    wrong = sublayer(B, key=bytes(32))
    assert wrong.open_frame(0, a.seal_frame(0, frame())) is None
    assert refused(wrong) == {"auth_fail": 1}
    other_sdi = sublayer(B, sdi=2)
    assert other_sdi.open_frame(0, a.seal_frame(0, frame())) is None
    assert refused(other_sdi) == {"unknown_sdi": 1}
    # two domains with the same key: a frame of SDI 1 relabelled SDI 2 fails the tag (the
    # SDI is authenticated as part of the TSS header)
    two = TssSublayer(TssConfig.from_dict({"domains": [
        {"mode": "direct", "sdi": 1, "key": KEY.hex(), "job": 1},
        {"mode": "direct", "sdi": 2, "key": KEY.hex(), "job": 2}]}), B)
    data = bytearray(a.seal_frame(0, frame()))
    off = split_frame(bytes(data))[1]
    data[off + 3] ^= 0x03  # SDI 1 -> 2
    assert two.open_frame(0, bytes(data)) is None
    assert refused(two) == {"auth_fail": 1}


def test_replay_in_window_below_window_and_reused_tsc():
    a = sublayer(A)
    b = sublayer(B, replay_window=64)
    first = a.seal_frame(0, frame())
    assert b.open_frame(0, first) is not None
    assert b.open_frame(0, first) is None  # in the window, seen
    later = [a.seal_frame(0, frame(psn=1001 + i)) for i in range(100)]
    for data in later[50:]:
        if data is not later[60]:
            assert b.open_frame(0, data) is not None
    # reordered (TSC 61 arrives after TSC 100), still inside the 64-counter window: once
    assert b.open_frame(0, later[60]) is not None
    assert b.open_frame(0, later[60]) is None
    assert b.open_frame(0, first) is None  # below the window
    assert refused(b) == {"replay": 2, "replay_stale": 1}
    # a broken sender repeating a TSC with other contents: refused as a replay
    a.domains[1].tsc = 60
    assert b.open_frame(0, a.seal_frame(0, frame(payload=b"another!"))) is None
    assert refused(b)["replay"] == 3


def test_retransmission_gets_a_fresh_tsc(pair):
    a, b = pair
    f = frame()
    one = a.seal_frame(0, f)
    f.tss.sdi = 1
    two = a.seal_frame(0, f)  # the same record sent again (a retransmission)
    t1 = unpack_header(one[split_frame(one)[1]:])
    t2 = unpack_header(two[split_frame(two)[1]:])
    assert t2.tsc == t1.tsc + 1
    assert b.open_frame(0, one) is not None and b.open_frame(0, two) is not None


def test_replay_after_restart_is_refused_by_the_join_epoch():
    a = sublayer(A, epoch=4)
    b = sublayer(B, epoch=4)
    old = a.seal_frame(0, frame())
    assert b.open_frame(0, old) is not None
    # B restarts: it rejoins the domain, which moves to epoch 5 (the SDME); its replay
    # state is gone, but nothing from before its join is accepted
    b = sublayer(B, epoch=5)
    assert b.open_frame(0, old) is None
    assert refused(b) == {"epoch_before_join": 1}
    a.domains[1].advance_epoch(5)
    assert b.open_frame(0, a.seal_frame(0, frame())) is not None
    # A restarting at a later epoch may start its TSC at 0 again: a new epoch, a new IV
    a2 = sublayer(A, epoch=6)
    assert b.open_frame(0, a2.seal_frame(0, frame())) is not None


def test_epoch_expiry():
    a = sublayer(A, epoch=10)
    b = sublayer(B, epoch=10, max_epoch_lifetime=16)
    f16 = a.seal_frame(0, frame())
    f17 = a.seal_frame(0, frame())
    b.domains[1].advance_epoch(26)
    assert b.open_frame(0, f16) is not None  # 16 epochs old: still accepted
    b.domains[1].advance_epoch(27)
    assert b.open_frame(0, f17) is None
    assert refused(b) == {"epoch_expired": 1}


def test_authentication_failure_threshold_disables_the_domain():
    a = sublayer(A)
    b = sublayer(B, auth_fail_threshold=5)
    forger = sublayer(C, key=bytes(32))
    for _ in range(6):
        assert b.open_frame(0, forger.seal_frame(0, frame(src=C))) is None
    assert b.domains[1].disabled and b.counters["domain_disabled"] == 1
    good = a.seal_frame(0, frame())
    assert b.open_frame(0, good) is None
    assert refused(b) == {"auth_fail": 6, "disabled": 1}
    b.domains[1].enable()
    assert b.open_frame(0, good) is not None


def test_tsc_limit_stops_sending():
    a = sublayer(A, tsc_limit=3)
    sent = [a.seal_frame(0, frame()) for _ in range(5)]
    assert [s is not None for s in sent] == [True, True, True, True, False]
    assert a.counters["tx_refused.tsc_exhausted"] == 1
    assert a.seal_frame(0, frame()) is None  # latched: never wraps to TSC 0


def test_an_rotation_under_traffic_make_before_break():
    # explicit rotation (the SDME's key change): the sender moves to generation 1 (AN 1,
    # TSC from 0); the receiver takes both while the old key is still in flight
    a = sublayer(A, rotation_guard_ps=1000, rotation_ps=10**9)
    b = sublayer(B, rotation_guard_ps=1000, rotation_ps=10**9)
    old = [a.seal_frame(0, frame(psn=i)) for i in range(3)]
    a.domains[1].rotate(10)
    new = [a.seal_frame(10, frame(psn=10 + i)) for i in range(3)]
    hdrs = [unpack_header(x[split_frame(x)[1]:]) for x in new]
    assert [(h.an, h.tsc) for h in hdrs] == [(1, 0), (1, 1), (1, 2)]
    assert b.open_frame(20, new[0]) is not None  # peer ahead: the next key
    assert b.open_frame(30, old[0]) is not None  # within the guard: the previous key
    assert b.open_frame(2000, old[1]) is None  # after the guard: AN 0 means generation 2
    assert b.open_frame(2000, new[1]) is not None
    assert refused(b) == {"auth_fail": 1}


def test_rotation_by_the_shared_clock():
    period = 1_000_000
    a = sublayer(A, rotation_ps=period)
    b = sublayer(B, rotation_ps=period)
    seen = []
    for t in range(0, 5 * period, period // 4):
        data = a.seal_frame(t, frame(psn=t))
        h = unpack_header(data[split_frame(data)[1]:])
        seen.append((h.an, h.tsc))
        assert b.open_frame(t + 10, data) is not None
    assert seen[:5] == [(0, 0), (0, 1), (0, 2), (0, 3), (1, 0)]
    assert a.domains[1].tx_gen == 4 and a.counters["rotations"] == 4


def test_implicit_rekey_boundary():
    a = sublayer(A, mode="cluster", rekey_mask=0xFF00)
    b = sublayer(B, mode="cluster", rekey_mask=0xFF00)
    dom = a.domains[1]
    k255 = dom.packet_key(0, 0, 255, bytes([10, 0, 0, 1]))
    k256 = dom.packet_key(0, 0, 256, bytes([10, 0, 0, 1]))
    k511 = dom.packet_key(0, 0, 511, bytes([10, 0, 0, 1]))
    assert k255[1] != k256[1] and k256 == k511  # a new key every 256 frames
    dom.tsc = 254
    for _ in range(4):  # TSC 254, 255 | 256, 257
        assert b.open_frame(0, a.seal_frame(0, frame())) is not None
    # a frame whose TSC was changed across the boundary is refused (and TSC is in the AAD)
    dom.tsc = 511
    data = bytearray(a.seal_frame(0, frame()))
    off = split_frame(bytes(data))[1]
    data[off + 11] = 0x00  # TSC 511 -> 512: another rekey value
    data[off + 10] = 0x02
    assert b.open_frame(0, bytes(data)) is None and refused(b) == {"auth_fail": 1}


def test_cluster_keys_differ_per_source_and_ssi_is_checked():
    a = sublayer(A, mode="cluster", ssi=11)
    c = sublayer(C, mode="cluster", ssi=12)
    b = sublayer(B, mode="cluster", ssi=13)
    fa, fc = a.seal_frame(0, frame()), c.seal_frame(0, frame(src=C))
    assert b.open_frame(0, fa) is not None and b.open_frame(0, fc) is not None
    assert a.domains[1].packet_key(0, 0, 0, (11).to_bytes(4, "big"))[1] != \
        c.domains[1].packet_key(0, 0, 0, (12).to_bytes(4, "big"))[1]
    no_ssi = sublayer(B, mode="cluster")
    assert no_ssi.open_frame(0, fa) is None and refused(no_ssi) == {"ssi_mismatch": 1}


def test_server_mode_clients_cannot_forge_each_other():
    master = KEY
    server = sublayer(B, mode="server", role="server", key=master)
    c1 = sublayer(A, mode="server", role="client", key=master)  # derives its own key
    c3 = sublayer(C, mode="server", role="client", key=master)
    assert server.open_frame(0, c1.seal_frame(0, frame())) is not None
    back = server.seal_frame(0, frame(src=B, dst=A))
    assert c1.open_frame(0, back) is not None
    assert c3.open_frame(0, back) is None  # another client cannot read it
    # client 3 spoofing client 1's address: its key is not client 1's
    c3.domains[1].tsc = 100  # (a TSC the server has not seen from 10.0.0.1 yet)
    spoof = c3.seal_frame(0, frame(src=A))
    assert server.open_frame(0, spoof) is None and refused(server) == {"auth_fail": 1}
    # a client handed only its derived key (44 bytes: key || IV mask, as the server's SDME
    # would give it) talks the same as one that derived it from the domain key
    from uet.tss import crypto

    derived = crypto.kdf(master, b"U2", bytes(6) + bytes([10, 0, 0, 1]))
    handed = sublayer(A, mode="server", role="client", key=derived)
    handed.domains[1].tsc = 200
    assert server.open_frame(0, handed.seal_frame(0, frame())) is not None
    assert handed.open_frame(0, server.seal_frame(0, frame(src=B, dst=A))) is not None


def test_ipv6_direct_needs_an_ssi_and_works_with_one():
    with pytest.raises(TssConfigError, match="ssi"):
        sublayer("fd00::1")
    a = sublayer("fd00::1", ssi=1)
    b = sublayer("fd00::2", ssi=2)
    assert b.open_frame(0, a.seal_frame(0, frame(src="fd00::1", dst="fd00::2"))) is not None
    ca = sublayer("fd00::1", mode="cluster")
    cb = sublayer("fd00::2", mode="cluster")
    assert cb.open_frame(0, ca.seal_frame(0, frame(src="fd00::1", dst="fd00::2"))) is not None


def test_native_ip_encapsulation_authenticates_the_entropy_header(pair):
    a, b = pair
    data = a.seal_frame(0, frame(encap="ip"))
    bad = bytearray(data)
    bad[34] ^= 0x40  # the EV in the entropy header
    assert b.open_frame(0, bytes(bad)) is None and refused(b) == {"auth_fail": 1}
    assert b.open_frame(0, data).encap == "ip"


def test_trimmed_frames_are_refused_without_counting_as_forgeries():
    a = sublayer(A)
    b = TssSublayer(TssConfig.from_dict({"mode": "direct", "sdi": 1, "key": KEY.hex(),
                                         "job": 1, "auth_fail_threshold": 1}), B,
                    trimmed_dscps=(12, 14))
    for _ in range(5):
        assert b.open_frame(0, a.seal_frame(0, frame(dscp=12))) is None
    assert refused(b) == {"trimmed": 5} and not b.domains[1].disabled
