"""Typed results and errors of SES operations (what the Trio API raises and returns)."""

from __future__ import annotations

from dataclasses import dataclass

from uet.errors import UetError
from uet.profiles import ProfileError
from uet.wire.constants import ReturnCode, RspList

__all__ = ["OperationResult", "ProfileError", "SesError", "rc_name"]


def rc_name(code: int) -> str:
    try:
        return ReturnCode(code).name
    except ValueError:
        return f"{code:#x}"


class SesError(UetError):
    """An operation completed with a return code other than OK (or failed in the PDS).

    ``return_code`` is the SES return code (``ReturnCode``); ``reason`` the PDS failure
    reason when the PDS gave up on the message (``return_code`` is then UNDELIVERABLE).
    """

    def __init__(self, return_code: int, message: str = "", reason: str | None = None) -> None:
        self.return_code = return_code
        self.reason = reason
        text = rc_name(return_code)
        if message:
            text = f"{message}: {text}"
        if reason:
            text = f"{text} ({reason})"
        super().__init__(text)


@dataclass(frozen=True, slots=True)
class OperationResult:
    """What a completed operation gives back.

    ``data``: read data (READ), the fetched value's big-endian bytes (fetching atomics),
    else empty. ``value``: the fetched value decoded per the atomic datatype, else None.
    ``modified_length``: bytes the target reports it placed or used.
    ``list``: EXPECTED (matched a posted receive) or OVERFLOW (went to the unexpected list).
    """

    return_code: int = ReturnCode.OK
    modified_length: int = 0
    data: bytes = b""
    value: object = None
    list: int = RspList.EXPECTED
