"""Shared test configuration: deterministic hypothesis profile; the PDS liveness invariant
is checked after every call into every PDS end point the suite builds (uet.pds.invariants;
subprocesses such as ``uet serve`` inherit it)."""

import os

os.environ.setdefault("UET_CHECK_INVARIANTS", "1")

from hypothesis import HealthCheck, settings  # noqa: E402

settings.register_profile(
    "uet",
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("uet")
