"""The end point's per-packet work in C, and the Python it replaces, in one place.

Each C core (``uet.native._recovery_core``, ``_sender_core``, ``_target_core`` for the
PDS, ``_fep_core`` for the end point's frame interface, ``_ses_core`` for the SES target's
WRITE packets, ``_cms_core`` for the sender's congestion control per ACK; docs/native.md)
takes over a few methods of one class at import, unless ``UET_PURE_PYTHON=1`` or the
extension was not built. The module that owns the class keeps the Python form of those
methods in its ``REFERENCE`` dict: the C core calls it for every case it does not handle,
the tests hold the two to the same results, and :func:`python_forms` puts the Python back
for a while (side-by-side benchmarks, differential tests in one process).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from uet.cms import nscc, sender
from uet.endpoint import fep
from uet.pds import ack, initiator, recovery, target
from uet.pds import endpoint as pds_endpoint
from uet.ses import target as ses_target

#: (class (or module, for a function), its module's REFERENCE, the module whose
#: IMPLEMENTATION says which form runs) for every core
_CORES: list[tuple[Any, dict[str, Any], Any]] = [
    (recovery.LossRecovery, recovery.REFERENCE, recovery),
    (initiator.InitiatorPdc, initiator.REFERENCE, initiator),
    (target.TargetPdc, target.REFERENCE, target),
    (ack, ack.REFERENCE, target),  # build_ack, a module function (the target core's)
    (ack.AckScheduler, ack.SCHEDULER_REFERENCE, pds_endpoint),
    (pds_endpoint.PdsEndpoint, pds_endpoint.REFERENCE, pds_endpoint),
    (fep.FabricEndpoint, fep.REFERENCE, fep),
    (fep.DeliveryAudit, fep.AUDIT_REFERENCE, fep),
    (ses_target.Target, ses_target.REFERENCE, ses_target),
    (sender.CmsSender, sender.REFERENCE, sender),
    (nscc.Nscc, sender.NSCC_REFERENCE, sender),  # Nscc.on_ack (the CMS core's)
]


def implementations() -> dict[str, str]:
    """Which form each core runs in: ``{"uet.pds.recovery": "native", ...}``."""
    return {mod.__name__: mod.IMPLEMENTATION for _, _, mod in _CORES}


@contextmanager
def python_forms() -> Iterator[None]:
    """Run the Python form of every core inside the block (the C forms come back after)."""
    saved = [(cls, {name: cls.__dict__[name] for name in ref}) for cls, ref, _ in _CORES]
    try:
        for cls, ref, _ in _CORES:
            for name, fn in ref.items():
                setattr(cls, name, fn)
        yield
    finally:
        for cls, methods in saved:
            for name, fn in methods.items():
                setattr(cls, name, fn)


__all__ = ["implementations", "python_forms"]
