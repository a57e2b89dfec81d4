"""One error root: every error class a ``uet`` package raises on purpose derives from
``uet.errors.UetError``, on the local or the remote branch (docs/architecture.md, "Errors"),
and keeps its historical base so existing ``except ValueError`` callers still work."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import uet
from uet.cms.api import CmsConfigError
from uet.errors import (
    ConfigError,
    LocalError,
    LocalProtocolError,
    RemoteError,
    RemoteProtocolError,
    UetError,
)

#: (module, class, branch, historical base kept)
TREE = [
    ("uet.wire.errors", "DecodeError", RemoteError, Exception),
    ("uet.wire.errors", "TruncatedHeader", RemoteError, Exception),
    ("uet.wire.errors", "EncodeError", LocalError, ValueError),
    ("uet.pds.config", "PdsConfigError", ConfigError, ValueError),
    ("uet.pds.endpoint", "PdcLimitError", LocalError, RuntimeError),
    ("uet.cms.api", "CmsConfigError", ConfigError, ValueError),
    ("uet.profiles", "ProfileConfigError", ConfigError, ValueError),
    ("uet.profiles", "ProfileError", LocalError, Exception),
    ("uet.ses.errors", "SesError", UetError, Exception),
    ("uet.experiments.config", "ConfigError", ConfigError, ValueError),
    ("uet.experiments.htsim_cm", "CmFormatError", ConfigError, ValueError),
    ("uet.experiments.workload", "WorkloadError", ConfigError, ValueError),
    ("uet.experiments.results", "ResultsError", RemoteError, ValueError),
    ("uet.experiments.collectives", "CollectiveError", LocalError, AssertionError),
    ("uet.capture.pcapng", "CaptureError", RemoteError, Exception),
    ("uet.conformance.setup", "SetupError", ConfigError, ValueError),
    ("uet.conformance.peer", "ConformanceFailure", RemoteError, AssertionError),
    ("uet.native", "PsnWindowError", LocalError, ValueError),
    ("uet.runtime.fabric", "FabricStalled", LocalError, RuntimeError),
    ("uet.runtime.host", "OperationTimeout", RemoteError, TimeoutError),
    ("uet.capture.dfilter", "FilterError", LocalError, ValueError),
    ("uet.experiments.compare", "CompareError", LocalError, ValueError),
    ("uet.experiments.executor", "ExecutorError", ConfigError, ValueError),
    ("uet.experiments.export", "ExportError", ConfigError, ValueError),
    ("uet.roce.config", "RoceConfigError", ConfigError, ValueError),
    ("uet.roce.requester", "QueueFull", LocalError, Exception),
]


@pytest.mark.parametrize(("module", "name", "branch", "base"), TREE)
def test_each_package_error_is_on_its_branch_and_keeps_its_base(module, name, branch, base):
    cls = getattr(importlib.import_module(module), name)
    assert issubclass(cls, UetError) and issubclass(cls, branch) and issubclass(cls, base)


def test_the_two_branches_are_disjoint_and_config_errors_are_local():
    assert not issubclass(LocalError, RemoteError) and not issubclass(RemoteError, LocalError)
    assert issubclass(ConfigError, LocalError) and issubclass(ConfigError, ValueError)
    assert issubclass(LocalProtocolError, LocalError)
    assert issubclass(RemoteProtocolError, RemoteError)


def test_every_exception_class_in_the_package_is_under_the_root():
    """No package defines an exception outside the tree (scapy layer classes named
    *Error are packets, not exceptions)."""
    outside = []
    for info in pkgutil.walk_packages(uet.__path__, "uet."):
        if info.name in ("uet.__main__", "uet.native.build_native"):
            continue  # runs the CLI / the cffi build on import
        try:
            mod = importlib.import_module(info.name)
        except Exception:  # pragma: no cover - a module that needs an optional dependency
            continue
        for obj in vars(mod).values():
            if (inspect.isclass(obj) and issubclass(obj, BaseException)
                    and obj.__module__ == info.name and not issubclass(obj, UetError)):
                outside.append(f"{info.name}.{obj.__name__}")
    assert not outside, outside


def test_a_bad_cms_value_is_a_config_error_naming_the_key():
    from uet.cms.api import CmsConfig
    from uet.cms.factory import validate_config

    with pytest.raises(CmsConfigError, match=r"^cms\.ev_count: must be a power of two"):
        validate_config(CmsConfig(ev_count=3))


def test_the_cli_shows_user_errors_in_one_line_and_keeps_tracebacks_for_bugs():
    from uet.cli import is_user_error
    from uet.pds import PdsConfigError
    from uet.pds.invariants import LivenessError

    assert is_user_error(PdsConfigError("pds.rto_ps: must be > 0, got 0"))
    assert not is_user_error(LivenessError("call", object(), "why", 0))
    assert not is_user_error(LocalProtocolError("an illegal transition"))
