"""Fast path for per-packet work: checksums, CRC-32C, PSN tracking, the ROD reorder buffer.

Two implementations of one API:

* ``uet.native.fast``: the cffi C extension ``uet.native._uet_native`` built by
  ``pip install`` (``None`` if it was not built);
* ``uet.native.pure``: pure Python, identical results.

The names exported here come from ``fast`` when it is built, else from ``pure`` (with one
``RuntimeWarning``). ``UET_PURE_PYTHON=1`` (any value but empty or ``0``) forces ``pure``
without a warning; ``fast`` stays importable for side-by-side tests. ``IMPLEMENTATION`` says
which one is in use: ``"native"`` or ``"python"``. See ``docs/native.md``.
"""

from __future__ import annotations

import importlib
import os
import warnings
from types import ModuleType

from uet.native import pure
from uet.native._common import InsertResult, MarkResult, PsnWindowError

fast: ModuleType | None
try:
    fast = importlib.import_module("uet.native.fast")
except ImportError as exc:  # the C extension was not built
    fast = None
    FAST_IMPORT_ERROR: str | None = str(exc)
else:
    FAST_IMPORT_ERROR = None

FORCED_PURE = os.environ.get("UET_PURE_PYTHON", "").strip() not in ("", "0")

if fast is not None and not FORCED_PURE:
    _impl: ModuleType = fast
else:
    _impl = pure
    if fast is None and not FORCED_PURE:
        warnings.warn(
            "uet.native: the C extension is not built "
            f"({FAST_IMPORT_ERROR}); using the pure-Python fallback "
            "(reinstall with `pip install -e .` to build it)",
            RuntimeWarning,
            stacklevel=2,
        )

IMPLEMENTATION: str = _impl.IMPLEMENTATION

internet_checksum = _impl.internet_checksum
ones_sum = _impl.ones_sum
ipv4_header_checksum = _impl.ipv4_header_checksum
udp_checksum_ipv4 = _impl.udp_checksum_ipv4
udp_checksum_ipv6 = _impl.udp_checksum_ipv6
checksum_adjust = _impl.checksum_adjust
checksum_impl = _impl.checksum_impl
crc32c = _impl.crc32c
crc32c_impl = _impl.crc32c_impl
PsnTracker = _impl.PsnTracker
ReorderBuffer = _impl.ReorderBuffer

__all__ = [
    "FAST_IMPORT_ERROR",
    "FORCED_PURE",
    "IMPLEMENTATION",
    "InsertResult",
    "MarkResult",
    "PsnTracker",
    "PsnWindowError",
    "ReorderBuffer",
    "checksum_adjust",
    "checksum_impl",
    "crc32c",
    "crc32c_impl",
    "fast",
    "internet_checksum",
    "ipv4_header_checksum",
    "ones_sum",
    "pure",
    "udp_checksum_ipv4",
    "udp_checksum_ipv6",
]
