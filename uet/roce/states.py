"""The one check every RoCE state machine (requester, responder, DCQCN reaction point)
makes on a state change: the new state must be listed in its transition table."""

from __future__ import annotations

from collections.abc import Mapping, Set
from enum import Enum
from typing import TypeVar

S = TypeVar("S", bound=Enum)


def transition(table: Mapping[S, Set[S]], current: S, new: S, role: str) -> S:
    """``new`` if the change ``current -> new`` is allowed (staying put always is);
    an AssertionError naming ``role`` otherwise (a bug, not bad input)."""
    if new is not current and new not in table[current]:
        raise AssertionError(f"{role} {current.name} -> {new.name}")
    return new
