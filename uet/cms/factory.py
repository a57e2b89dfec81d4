"""Build the per-PDC congestion objects from a :class:`CmsConfig` (sans-IO).

* ``make_sender(config, rng, *, ordered=False)``: EV selector + algorithm. ``ordered=True``
  (ROD PDCs) forces a fixed EV whatever ``ev_selector`` says, so packets of one PDC keep
  one path and arrive in order.
* ``make_credit_scheduler(config)``: one per receiving end point (RCCC).
* ``make_receiver(config, scheduler=None, *, key=None)``: the receiver side of one PDC;
  under RCCC pass the end point's scheduler (a private one is made otherwise, which loses
  incast sharing) and the key by which :meth:`CreditScheduler.poll_grants` names the PDC.
"""

from __future__ import annotations

import random
from typing import Any

from uet.cms.api import (
    CmsConfig,
    CmsConfigError,
    NullReceiverCongestion,
    ReceiverCongestion,
    SenderCongestion,
)
from uet.cms.ccx import CCX_MODES, TelemetryReceiver, TelemetrySender
from uet.cms.ev_selection import SELECTORS, EvSelector, FixedEv, make_ev_selector
from uet.cms.nscc import Nscc, NsccParams, max_window_bytes
from uet.cms.rccc import CreditScheduler, RcccReceiver, SenderCredit
from uet.cms.receiver import NsccReceiver
from uet.cms.sender import CmsSender

ALGORITHMS = ("none", "nscc", "rccc", "nscc+rccc")


def _bad(key: str, value: Any, allowed: str) -> CmsConfigError:
    return CmsConfigError(f"cms.{key}: must be {allowed}, got {value!r}")


def validate_config(config: CmsConfig) -> CmsConfig:
    """Fail fast on a bad setting, naming the key and the allowed values."""
    if config.ev_selector not in SELECTORS:
        raise _bad("ev_selector", config.ev_selector, "one of " + ", ".join(SELECTORS))
    if config.algorithm not in ALGORITHMS:
        raise _bad("algorithm", config.algorithm, "one of " + ", ".join(ALGORITHMS))
    if config.ccx not in CCX_MODES:
        raise _bad("ccx", config.ccx, "one of " + ", ".join(CCX_MODES))
    n = config.ev_count
    if not isinstance(n, int) or n < 1 or n > 0x10000 or n & (n - 1):
        raise _bad("ev_count", n, "a power of two in [1, 65536]")
    for key in (
        "link_rate_bps",
        "base_rtt_ps",
        "mtu_payload",
        "credit_unit_bytes",
        "reps_buffer_size",
    ):
        value = getattr(config, key)
        if not isinstance(value, int) or value <= 0:
            raise _bad(key, value, "a positive integer")
    if config.pkt_overhead_bytes < 0:
        raise _bad("pkt_overhead_bytes", config.pkt_overhead_bytes, "an integer >= 0")
    for key in (
        "max_window_bytes",
        "target_qdelay_ps",
        "initial_window_bytes",
        "credit_per_pull_bytes",
    ):
        value = getattr(config, key)
        if value is not None and (not isinstance(value, int) or value <= 0):
            raise _bad(key, value, "None or a positive integer")
    if not 0 < config.credit_rate <= 1.0:
        raise _bad("credit_rate", config.credit_rate, "a fraction in (0, 1]")
    if not 0 <= config.qa_gate <= 16:
        raise _bad("qa_gate", config.qa_gate, "an integer in [0, 16]")
    if max_window_bytes(config) < config.mtu_payload:
        raise _bad("max_window_bytes", config.max_window_bytes, "at least mtu_payload")
    return config


def make_sender(
    config: CmsConfig, rng: random.Random, *, ordered: bool = False
) -> SenderCongestion:
    """The sender side of one PDC. ``ordered``: a ROD PDC, which gets a fixed EV."""
    validate_config(config)
    selector: EvSelector
    if ordered:
        selector = FixedEv(rng)
    else:
        selector = make_ev_selector(
            config.ev_selector,
            rng,
            config.ev_count,
            trimming=config.trimming,
            reps_buffer_size=config.reps_buffer_size,
            reps_freeze_ps=config.reps_freeze_ps,
            reps_explore=config.reps_explore,
        )
    algo = config.algorithm
    credit = SenderCredit(config) if "rccc" in algo else None
    nscc = None
    if "nscc" in algo:
        nscc = Nscc(NsccParams.from_config(config), receiver_credit=credit is not None)
    window = config.max_window_bytes if config.max_window_bytes is not None else 1 << 30
    ccx = None
    if config.ccx == "telemetry":
        params = NsccParams.from_config(config)
        ccx = TelemetrySender(mtu=config.mtu_payload, max_window=max_window_bytes(config),
                              base_rtt_ps=config.base_rtt_ps,
                              target_qdelay_ps=params.target_qdelay)
    return CmsSender(config, selector, nscc=nscc, credit=credit, window_bytes=window, ccx=ccx)


def make_credit_scheduler(config: CmsConfig) -> CreditScheduler:
    """The RCCC credit pacer of one receiving end point (share it among its PDCs)."""
    validate_config(config)
    return CreditScheduler(config)


def make_receiver(
    config: CmsConfig, scheduler: CreditScheduler | None = None, *, key: Any = None
) -> ReceiverCongestion:
    """The receiver side of one PDC (cc_type 1 under RCCC, NSCC state otherwise; with
    ``ccx = "telemetry"`` its ``ccx`` attribute makes the PDS send ACK_CCX / NACK_CCX)."""
    validate_config(config)
    receiver: Any
    if "rccc" in config.algorithm:
        if scheduler is None:
            scheduler = CreditScheduler(config)
        receiver = RcccReceiver(config, scheduler, key)
    elif config.algorithm == "nscc":
        receiver = NsccReceiver()
    else:
        receiver = NullReceiverCongestion()
    if config.ccx == "telemetry":
        receiver.ccx = TelemetryReceiver()
    return receiver
