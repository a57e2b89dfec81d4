"""Definitions shared by the pure-Python and the C-backed implementations of ``uet.native``.

Both implementations return these very enum classes and raise these exceptions, so results
compare equal (and are the same objects) whichever implementation produced them.
"""

from __future__ import annotations

import importlib
import os
from enum import IntEnum
from types import ModuleType

from uet.errors import LocalError

#: What the checksum and CRC functions accept: any contiguous bytes-like object.
BytesLike = bytes | bytearray | memoryview

PSN_MASK = 0xFFFFFFFF
U64_MASK = 0xFFFFFFFFFFFFFFFF

#: Allowed PsnTracker window sizes (MP_RANGE, in PSNs), inclusive.
MIN_WINDOW = 128
MAX_WINDOW = 65536

#: Default and largest PSN distance a ReorderBuffer accepts ahead of ``next_psn``.
DEFAULT_MAX_DISTANCE = 65536
MAX_DISTANCE = 1 << 20

#: Largest ``n`` accepted by ``PsnTracker.count_received_in``.
MAX_COUNT_SPAN = 65536


class MarkResult(IntEnum):
    """Outcome of ``PsnTracker.mark``."""

    NEW = 0  #: first arrival inside the window; now marked received
    DUPLICATE = 1  #: inside the window and already received
    STALE = 2  #: before the window base: received earlier and shifted out
    OUT_OF_WINDOW = 3  #: at or beyond ``base + window``; not marked


class InsertResult(IntEnum):
    """Outcome of ``ReorderBuffer.insert``."""

    OK = 0  #: stored (or ready: the item is ``next_psn``)
    DUPLICATE = 1  #: an item with this PSN is already held; not stored
    FULL = 2  #: storing it would exceed ``max_items`` or ``max_bytes``; not stored
    STALE = 3  #: the PSN is before ``next_psn`` (already released); not stored
    OUT_OF_RANGE = 4  #: the PSN is ``max_distance`` or more ahead of ``next_psn``; not stored


class PsnWindowError(LocalError, ValueError):
    """A bulk operation named a PSN at or beyond the tracker's window."""


# Tuples indexed by the C status codes: cheaper than calling the enum constructor.
MARK_RESULTS = tuple(MarkResult)
INSERT_RESULTS = tuple(InsertResult)


def check_u32(value: int, name: str) -> int:
    """Return ``value`` if it is an int in [0, 2**32), else raise ``ValueError``/``TypeError``."""
    if not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if not 0 <= value <= PSN_MASK:
        raise ValueError(f"{name} must be in [0, 2**32 - 1], got {value}")
    return value


def check_window(window: int) -> int:
    """Validate a PsnTracker window size."""
    if not isinstance(window, int):
        raise TypeError(f"window must be an int, not {type(window).__name__}")
    if not MIN_WINDOW <= window <= MAX_WINDOW:
        raise ValueError(
            f"window must be in [{MIN_WINDOW}, {MAX_WINDOW}] PSNs (MP_RANGE), got {window}"
        )
    return window


def check_nonneg(value: int, name: str, limit: int) -> int:
    """Validate an int in [0, limit]."""
    if not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if not 0 <= value <= limit:
        raise ValueError(f"{name} must be in [0, {limit}], got {value}")
    return value


def window_error(psn: int, base: int, window: int) -> PsnWindowError:
    """The exception raised by ``mark_cumulative`` for a PSN beyond the window."""
    return PsnWindowError(
        f"PSN {psn} is at or beyond the window end (base {base} + window {window})"
    )


def field_defaults(cls: type) -> tuple:
    """Every field's default of a slots dataclass, in order (None for a field without
    one): what a C core fills a new record's slots with before setting its own."""
    import dataclasses

    assert not hasattr(cls, "__post_init__")  # the core fills the slots itself
    return tuple(None if f.default is dataclasses.MISSING else f.default
                 for f in dataclasses.fields(cls))


def load_core(name: str) -> ModuleType | None:
    """The C core extension ``uet.native.<name>`` (an end point's per-packet work,
    ``uet.endpoint.cores``), or None under ``UET_PURE_PYTHON=1`` or when it was not built:
    the caller then keeps its Python methods."""
    if os.environ.get("UET_PURE_PYTHON", "").strip() not in ("", "0"):
        return None
    try:
        return importlib.import_module(f"uet.native.{name}")
    except ImportError:
        return None
