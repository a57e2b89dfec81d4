"""The target core's ``build_ack`` and ``respond`` (C) against their Python forms.

A target PDC is brought to a state with a gap (lost packets), then given requests
waiting for the SES, refused PSNs, stored responses (GTD) and an NSCC receiver holding a window
penalty and a restore flag; then every ACK a coalescer or the owed list may ask for (naming
the CACK, a PSN near it, PSNs too far for the 16-bit offset, with and without flags, with and
without a close requested) is built by the C form and, from the same state, by the Python:
the frames (fields and bytes) and everything the build changes (the PDC's ``cack_held``, the
receiver's restore flag, the counters) must be equal. Whole runs are compared frame by frame
in tests/pds/test_c_cores.py.
"""

from __future__ import annotations

import random

import pytest
from pds_harness import A_IP, B_IP, US, Host, Net, request, ses_std
from test_exactly_once import _endpoint

from uet.cms.api import CmsConfig
from uet.pds import PdsConfig, RequestDelivered, ack
from uet.pds import target as target_mod
from uet.pds.ack import ACK_M, ACK_RETX
from uet.wire.codec import encode_frame
from uet.wire.constants import DeliveryMode

pytestmark = pytest.mark.skipif(target_mod.IMPLEMENTATION != "native",
                                reason="the target core is off: nothing to compare")


def _target_pdc(seed: int):
    cms = CmsConfig(ev_selector="oblivious", algorithm="nscc", base_rtt_ps=10 * US,
                    mtu_payload=2048)
    pcfg = PdsConfig(ack_type="ack_cc")
    a = _endpoint(pcfg, A_IP, seed, cms)
    b = _endpoint(pcfg, B_IP, seed + 1, cms)
    net = Net([Host(a), Host(b)], seed=seed, loss=0.25)
    for i in range(40):
        a.submit(0, request(mode=DeliveryMode.RUD, payload=bytes(100), msg_ref=i,
                            ses=ses_std(msg_id=i)))
    net.run(until=5 * US)  # before any retransmission: the lost PSNs leave gaps
    (pdc,) = b.mgr.tgt_by_key.values()
    return pdc


def _state(pdc) -> tuple:
    return pdc.cack_held, pdc.receiver.restore, dict(pdc.ctx.counters)


def _restore(pdc, st: tuple) -> None:
    pdc.cack_held, pdc.receiver.restore = st[0], st[1]
    pdc.ctx.counters.clear()
    pdc.ctx.counters.update(st[2])


@pytest.mark.parametrize("seed", range(6))
def test_build_ack_matches_the_python_on_a_pdcs_states(seed):
    rng = random.Random(seed)
    pdc = _target_pdc(seed)
    tk = pdc.tracker
    assert tk.max_psn != tk.cack_psn  # a gap
    ref = ack.REFERENCE["build_ack"]
    assert ack.build_ack is not ref
    built = 0
    for step in range(60):
        # change the state between ACKs as a run would
        if step % 7 == 1:
            pdc.rejected.add((tk.cack_psn + rng.randrange(1, 70)) & 0xFFFFFFFF)
        if step % 11 == 2:
            pdc.gtd[(tk.cack_psn + rng.randrange(-3, 5)) & 0xFFFFFFFF] = None
        if step % 13 == 3:
            pdc.receiver.set_penalty(rng.randrange(128), restore=True)
        if step % 17 == 4:
            pdc.close_requested = not pdc.close_requested
        if step % 5 == 0:  # a request the SES has not answered yet
            pdc.pending[(tk.cack_psn + rng.randrange(-2, 30)) & 0xFFFFFFFF] = step
        if step % 19 == 5 and pdc.pending:
            pdc.pending.pop(next(iter(pdc.pending)))
        cack = tk.cack_psn
        ack_psn = rng.choice([None, cack, (cack + rng.randrange(-5, 60)) & 0xFFFFFFFF,
                              (cack + 40_000) & 0xFFFFFFFF, (cack - 40_000) & 0xFFFFFFFF])
        flags = rng.choice([0, ACK_M, ACK_RETX, ACK_M | ACK_RETX])
        ev = rng.randrange(1 << 16)
        now = 50 * US + step
        before = _state(pdc)
        c = ack.build_ack(pdc.ctx, pdc, now, ack_psn, flags, ev, None, b"")
        after_c = _state(pdc)
        _restore(pdc, before)
        py = ref(pdc.ctx, pdc, now, ack_psn, flags, ev, None, b"")
        assert c == py, step
        assert encode_frame(c) == encode_frame(py), step
        assert type(c.pds) is type(py.pds) and type(c.pds.cc_type) is type(py.pds.cc_type)
        assert after_c == _state(pdc), step
        built += 1
    assert built == 60 and pdc.rejected and pdc.gtd


def test_build_ack_leaves_other_acks_to_the_python():
    pdc = _target_pdc(3)
    ref = ack.REFERENCE["build_ack"]
    before = _state(pdc)
    # a probe answer, an explicit SACK base, read data, keywords: the Python builds them
    for args, kw in [((5, 7, 0), {"probe": 9}), ((None, 0, 1), {"sack_base": pdc.tracker.base}),
                     ((None, 0, 2), {"probe": None, "sack_base": None})]:
        _restore(pdc, before)
        c = ack.build_ack(pdc.ctx, pdc, 0, *args, None, b"", **kw)
        _restore(pdc, before)
        assert c == ref(pdc.ctx, pdc, 0, *args, None, b"", **kw)
    _restore(pdc, before)
    c = ack.build_ack(pdc.ctx, pdc, 0, None, 0, 3, None, b"data")
    _restore(pdc, before)
    assert c == ref(pdc.ctx, pdc, 0, None, 0, 3, None, b"data") and c.payload == b"data"
    with pytest.raises(TypeError):
        ack.build_ack(pdc.ctx, pdc)


def _held_then_answered() -> dict:
    """Requests delivered but not answered yet hold the CACK below them; the ACK polled
    then reports the held CACK (``cack_held``); the answers release it (a new ACK), a
    token answered twice or whose packet was settled answers False."""
    pcfg = PdsConfig(ack_type="ack_cc", ack_every_bytes=1)
    a = _endpoint(pcfg, A_IP, 1, None)
    b = _endpoint(pcfg, B_IP, 2, None)
    for i in range(4):
        a.submit(0, request(payload=bytes(100), msg_ref=i, ses=ses_std(msg_id=i)))
    t = 1 * US
    while (f := a.poll_transmit(0, False)) is not None:
        b.receive(t, f)
    acks = []
    while (f := b.poll_transmit(t, True)) is not None:
        acks.append(encode_frame(f))
    (pdc,) = b.mgr.tgt_by_key.values()
    held = pdc.cack_held
    events = []

    def next_delivered():
        while (ev := b.next_event()) is not None:
            if type(ev) is RequestDelivered:
                return ev
        return None

    events.append(next_delivered())  # the others stay unread (unsettled) for now
    answers = [b.respond(t, events[0].token, None)]
    released = []  # the first answer releases the held CACK: an ACK at once
    while (f := b.poll_transmit(t, True)) is not None:
        released.append(encode_frame(f))
    while (ev := next_delivered()) is not None:
        events.append(ev)
    answers.append(b.respond(t, events[1].token, None))
    answers.append(b.respond(t, events[0].token, None))  # again: late
    pdc.pending.pop(events[2].psn)  # settled elsewhere: its token answers False
    answers.append(b.respond(t, events[2].token, None))
    while (f := b.poll_transmit(2 * US, True)) is not None:
        acks.append(encode_frame(f))
    return {"held": held, "answers": answers, "acks": acks, "released": released,
            "seen": list(b._seen),
            "counters": dict(b.counters), "cack_held": pdc.cack_held}


def test_respond_releases_a_held_cack_as_the_python():
    from uet.endpoint import cores

    c = _held_then_answered()
    with cores.python_forms():
        py = _held_then_answered()
    assert c == py
    assert c["held"] is True and c["answers"] == [True, True, False, False]
    assert len(c["acks"]) >= 2 and c["seen"] == [] and c["counters"]["late_response"] == 1
    assert len(c["released"]) == 1
