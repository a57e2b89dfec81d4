"""Congestion management: EV selection (fixed, oblivious, bitmap, REPS), NSCC, RCCC."""

from uet.cms.api import (
    AckFeedback,
    CmsConfig,
    CmsConfigError,
    CreditReceiver,
    CreditSender,
    NackFeedback,
    NullReceiverCongestion,
    NullSenderCongestion,
    ReceiverCongestion,
    SenderCongestion,
)
from uet.cms.factory import make_credit_scheduler, make_receiver, make_sender, validate_config
from uet.cms.rccc import CreditGrant, CreditScheduler

__all__ = [
    "AckFeedback",
    "CmsConfig",
    "CmsConfigError",
    "CreditGrant",
    "CreditReceiver",
    "CreditSender",
    "CreditScheduler",
    "NackFeedback",
    "NullReceiverCongestion",
    "NullSenderCongestion",
    "ReceiverCongestion",
    "SenderCongestion",
    "make_credit_scheduler",
    "make_receiver",
    "make_sender",
    "validate_config",
]
