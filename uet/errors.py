"""The one error root of ``uet``, split by whose fault it is.

Every exception a ``uet`` package raises on purpose derives from :class:`UetError`, so a
script can catch everything the emulator reports with one ``except``. Below it, two
branches say where the fault lies (h11 draws the same line between ``LocalProtocolError``
and ``RemoteProtocolError``):

* :class:`LocalError`: this side did something wrong: a bad configuration value
  (:class:`ConfigError`, which names the key and the allowed values), a call the API does
  not allow, an operation the profile refuses, or a state machine driven into a transition
  its table does not have (:class:`LocalProtocolError`: a bug, never a peer's doing);
* :class:`RemoteError`: what came from outside is wrong: a peer's packet that breaks the
  protocol (:class:`RemoteProtocolError`), bytes that do not decode, a corrupt capture or
  results file, a device under test that fails a conformance case.

:class:`uet.ses.errors.SesError` is the third kind and sits directly under the root: the
*outcome* of an operation, carrying the SES return code (the peer refused it, or the
transport could not deliver it), not a fault of either side's code.

Package errors keep their names and their historical bases (``ValueError``,
``RuntimeError`` ...), so ``except ValueError`` in existing callers still works:
``uet.pds.PdsConfigError``, ``uet.cms.CmsConfigError``, ``uet.profiles.ProfileConfigError``,
``uet.experiments.config.ConfigError``, ``uet.conformance.setup.SetupError`` are all
:class:`ConfigError`; ``uet.wire.errors.DecodeError`` and ``uet.capture.pcapng.CaptureError``
are :class:`RemoteError`. ``docs/architecture.md`` ("Errors") has the whole tree.
"""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "LocalError",
    "LocalProtocolError",
    "RemoteError",
    "RemoteProtocolError",
    "UetError",
]


class UetError(Exception):
    """Root of every error ``uet`` raises on purpose."""


class LocalError(UetError):
    """This side is at fault: configuration, API use, or its own state machine."""


class RemoteError(UetError):
    """What came from outside is at fault: a peer's packets, a file handed in, a device
    under test."""


class ConfigError(LocalError, ValueError):
    """A bad configuration value; the message names the key and the allowed values."""


class LocalProtocolError(LocalError):
    """A protocol state machine was driven into an event its transition table does not
    allow in its current state (a bug in the caller or in ``uet``, never a peer's doing:
    a peer's bad packet is answered on the wire and counted, not raised)."""


class RemoteProtocolError(RemoteError):
    """A peer broke the protocol in a way the caller must hear about."""
