"""Factory, configuration validation and the api.py contract (Null objects included)."""

import random

import pytest

from uet.cms import (
    AckFeedback,
    CmsConfig,
    NackFeedback,
    NullReceiverCongestion,
    NullSenderCongestion,
    make_credit_scheduler,
    make_receiver,
    make_sender,
    validate_config,
)
from uet.cms.ev_selection import BitmapEv, FixedEv, MixedEv, ObliviousEv, RepsEv
from uet.cms.rccc import CreditScheduler, RcccReceiver
from uet.cms.receiver import NsccReceiver
from uet.wire.constants import CcType, NackCode
from uet.wire.records import PdsAckCc


@pytest.mark.parametrize(
    ("key", "value", "words"),
    [
        ("ev_selector", "ecmp", "fixed, oblivious, bitmap, reps, mixed"),
        ("algorithm", "dcqcn", "none, nscc, rccc, nscc+rccc"),
        ("ev_count", 100, "power of two"),
        ("link_rate_bps", 0, "positive"),
        ("base_rtt_ps", -1, "positive"),
        ("max_window_bytes", 0, "None or a positive"),
        ("credit_rate", 1.5, "(0, 1]"),
        ("max_window_bytes", 100, "at least mtu_payload"),
    ],
)
def test_bad_config_names_key_and_allowed_values(key, value, words):
    cfg = CmsConfig(**{key: value})
    for call in (
        validate_config,
        lambda c: make_sender(c, random.Random(1)),
        make_receiver,
        make_credit_scheduler,
    ):
        with pytest.raises(ValueError) as err:
            call(cfg)
        assert f"cms.{key}" in str(err.value) and words in str(err.value)
        assert repr(value) in str(err.value)


@pytest.mark.parametrize(
    ("name", "cls"),
    [("fixed", FixedEv), ("oblivious", ObliviousEv), ("bitmap", BitmapEv), ("reps", RepsEv),
     ("mixed", MixedEv)],
)
def test_selector_choice(name, cls):
    cc = make_sender(CmsConfig(ev_selector=name), random.Random(1))
    assert isinstance(cc.selector, cls)
    assert isinstance(
        make_sender(CmsConfig(ev_selector=name), random.Random(1), ordered=True).selector, FixedEv
    )


@pytest.mark.parametrize(
    ("algorithm", "nscc", "credit", "receiver", "cc_type"),
    [
        ("none", False, False, NullReceiverCongestion, CcType.NSCC),
        ("nscc", True, False, NsccReceiver, CcType.NSCC),
        ("rccc", False, True, RcccReceiver, CcType.CREDIT),
        ("nscc+rccc", True, True, RcccReceiver, CcType.CREDIT),
    ],
)
def test_algorithm_choice(algorithm, nscc, credit, receiver, cc_type):
    cfg = CmsConfig(algorithm=algorithm)
    cc = make_sender(cfg, random.Random(1))
    assert (cc.nscc is not None) == nscc and (cc.credit is not None) == credit
    assert cc.credit_based == credit and (cc.rccc is cc) == credit
    rx = make_receiver(cfg, make_credit_scheduler(cfg), key=("10.0.0.1", 5))
    assert isinstance(rx, receiver) and rx.cc_type == cc_type
    ack = PdsAckCc()
    rx.on_data(0, nbytes=4096, ecn_ce=False, credit_target=0, in_order=True)
    rx.fill_ack_cc(0, ack=ack)
    assert ack.cc_type == cc_type


def test_none_algorithm_uses_a_fixed_window():
    cc = make_sender(CmsConfig(max_window_bytes=8192), random.Random(1))
    assert cc.can_send(0, nbytes=4096, in_flight=4096)
    assert not cc.can_send(0, nbytes=4096, in_flight=4097)
    assert cc.can_send(0, nbytes=9000, in_flight=0)  # an idle PDC may always send one packet
    assert cc.cwnd == 8192 and cc.rccc is None  # no credit interface


def test_factory_is_deterministic_per_rng_seed():
    cfg = CmsConfig(ev_selector="oblivious")
    a = make_sender(cfg, random.Random(42))
    b = make_sender(cfg, random.Random(42))
    assert [a.choose_ev(0) for _ in range(300)] == [b.choose_ev(0) for _ in range(300)]


def test_nscc_receiver_state_fields():
    rx = make_receiver(CmsConfig(algorithm="nscc"))
    rx.on_data(0, nbytes=4096, ecn_ce=True, credit_target=0, in_order=True)
    rx.on_data(0, nbytes=4096, ecn_ce=False, credit_target=0, in_order=False)
    rx.on_data(0, nbytes=0xFFFFFF, ecn_ce=False, credit_target=0, in_order=True, ooo_count=9)
    rx.set_penalty(100, restore=True)
    ack = PdsAckCc()
    rx.fill_ack_cc(0, ack=ack)
    assert ack.rcvd_bytes == (8192 + 0xFFFFFF) & 0xFFFFFF
    assert ack.ooo_count == 9 and ack.rcv_cwnd_pend == 100 and ack.restore_cwnd
    rx.fill_ack_cc(0, ack=ack)
    assert not ack.restore_cwnd  # one-shot
    with pytest.raises(ValueError, match="rcv_cwnd_pend"):
        rx.set_penalty(128)


def test_null_objects_follow_the_extended_contract():
    cc = NullSenderCongestion(ev=0x1_0005, window_bytes=8192)
    assert cc.choose_ev(0) == 5 and cc.rccc is None
    assert cc.can_send(0, nbytes=4096, in_flight=0, retx=True)
    assert cc.can_send(0, nbytes=4096, in_flight=0)
    cc.on_ack(
        0,
        fb=AckFeedback(
            ev=5,
            ecn_echo=False,
            newly_acked_bytes=1,
            newly_acked_packets=1,
            rtt_sample=None,
            in_flight_bytes=0,
        ),
    )
    cc.on_nack(0, fb=NackFeedback(ev=5, code=NackCode.TRIMMED, nbytes=1))
    assert cc.max_window == cc.cwnd == 8192
    rx = NullReceiverCongestion()
    rx.on_data(0, nbytes=10, ecn_ce=False, credit_target=0, in_order=False)
    rx.on_data(0, nbytes=10, ecn_ce=False, credit_target=0, in_order=True, ooo_count=3)
    rx.close()
    assert rx.ooo_count == 3 and rx.rccc is None


def test_scheduler_type():
    assert isinstance(make_credit_scheduler(CmsConfig(algorithm="rccc")), CreditScheduler)
