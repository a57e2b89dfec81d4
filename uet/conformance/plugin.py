"""pytest plugin: conformance cases as pytest tests, for the catalogue and for your own.

Installed with the package (``pytest11`` entry point ``uet``); it does nothing until a test
asks for one of its fixtures:

* ``uet_peer`` — a :class:`~uet.conformance.peer.Peer` connected to the end point under
  test, fresh for each test (its own addresses, seeded random generator, capture);
* ``uet_target`` — the target (session-wide): the built-in end point in process (default,
  a new instance per test, virtual clock) or ``--uet-dut udp:HOST:PORT[@profile]``;
* ``uet_capture`` — the test's :class:`~uet.conformance.capture.CaseCapture`; a failing test
  keeps it as ``<--uet-capture-dir>/<test>.pcapng`` (named in the report).

Mark a test ``@pytest.mark.uet_case("MY-001", ref="3.2", rule="...", profile=None,
config=None, caps=())`` to give it an ID and a rule in the report table and to declare what
it needs (a test the target cannot run is deselected and listed as not run, with the
reason). ``uet conformance`` runs :mod:`uet.conformance.suite` (the catalogue) through this
plugin and prints the table (``--uet-table``).
"""

from __future__ import annotations

import os
import zlib
from typing import Any

import pytest

_KEY_RESULTS = "uet_results"


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("uet", "UET conformance (uet.conformance)")
    g.addoption("--uet-dut", action="append", default=[], metavar="SPEC",
                help="end point under test: inprocess (default) or udp:HOST:PORT[@profile] "
                     "(repeat for devices of several profiles)")
    g.addoption("--uet-setup", default=None, metavar="FILE",
                help="setup of the device under test (JSON, uet serve --setup-out)")
    g.addoption("--uet-peer", action="append", default=[], metavar="IP",
                help="peer source addresses (default: a fresh pair per test from "
                     "127.0.92.0/22 when the device is on loopback)")
    g.addoption("--uet-peer-net", default="127.0.92.0/22", metavar="CIDR",
                help="network of the per-test peer addresses (default 127.0.92.0/22)")
    g.addoption("--uet-tss", action="store_true",
                help="the devices serve the well-known secure domain: only TSS cases run")
    g.addoption("--uet-grace-ms", type=float, default=500.0,
                help="UDP: wall-clock grace added to positive expectations (default 500)")
    g.addoption("--uet-quiet-ms", type=float, default=40.0,
                help="UDP: shortest wait of an expect_nothing (default 40)")
    g.addoption("--uet-capture-dir", default="conformance-captures", metavar="DIR",
                help="where failing tests keep their pcapng capture")
    g.addoption("--uet-keep-captures", action="store_true",
                help="keep the capture of every test, not only failing ones")
    g.addoption("--uet-capture", default=None, metavar="FILE",
                help="also write one pcapng of the whole run (one interface per test)")
    g.addoption("--uet-table", action="store_true",
                help="print the conformance table (ID, rule, result, why) at the end")
    g.addoption("--uet-report", default=None, metavar="FILE",
                help="write the results as JSON")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "uet_case(id, ref='', rule='', profile=None, config=None, caps=()): a "
        "UET conformance case (report ID and rule, what the end point must offer)")
    config.stash.setdefault(_Stash.key, _Stash())


class _Stash:
    key: pytest.StashKey[_Stash] = pytest.StashKey()

    def __init__(self) -> None:
        self.target: Any = None
        self.results: list[Any] = []
        self.not_run: list[Any] = []
        self.run_writer: Any = None


def _stash(config: pytest.Config) -> _Stash:
    return config.stash[_Stash.key]


# ---------------------------------------------------------------------------- target


def _make_target(config: pytest.Config) -> Any:
    st = _stash(config)
    if st.target is None:
        from .setup import WELL_KNOWN, DutSetup
        from .targets import make_target

        opt = config.getoption
        setup = DutSetup.load(opt("--uet-setup")) if opt("--uet-setup") else WELL_KNOWN
        extra = {"tss": True} if opt("--uet-tss") else {}
        st.target = make_target(opt("--uet-dut"), setup, peer_ips=opt("--uet-peer") or None,
                                peer_net=opt("--uet-peer-net"),
                                grace_ms=opt("--uet-grace-ms"),
                                quiet_ms=opt("--uet-quiet-ms"), **extra)
    return st.target


def _case_of(item: pytest.Item) -> Any:
    """The Case a test item runs: the catalogue parameter, its marker, or a default."""
    callspec = getattr(item, "callspec", None)
    if callspec is not None and "uet_case" in callspec.params:
        return callspec.params["uet_case"]
    mark = item.get_closest_marker("uet_case")
    if mark is None and not ({"uet_peer", "uet_capture"} & set(getattr(item, "fixturenames",
                                                                         ()))):
        return None
    from .registry import Case

    kw = dict(mark.kwargs) if mark is not None else {}
    case_id = mark.args[0] if mark is not None and mark.args else kw.pop("id", item.name)
    return Case(case_id, kw.get("ref", ""), kw.get("rule", item.name), lambda peer: None,
                area="user", profile=kw.get("profile"), config=kw.get("config"),
                profile_changes=kw.get("profile_changes"), virtual=kw.get("virtual", False),
                caps=tuple(kw.get("caps", ())))


def _index_of(item: pytest.Item, case: Any) -> int:
    from .registry import catalogue

    for i, c in enumerate(catalogue()):
        if c.id == case.id:
            return i
    return 200 + zlib.crc32(item.nodeid.encode()) % 50


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config,
                                  items: list[pytest.Item]) -> None:
    keep, drop = [], []
    for item in items:
        case = _case_of(item)
        if case is None:
            keep.append(item)
            continue
        reason = _make_target(config).unavailable(case)
        if reason:
            drop.append(item)
            _stash(config).not_run.append((case, reason))
        else:
            keep.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


# ---------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="session")
def uet_target(pytestconfig: pytest.Config) -> Any:
    """The end point under test (see the module docstring)."""
    return _make_target(pytestconfig)


@pytest.fixture
def uet_capture(request: pytest.FixtureRequest) -> Any:
    """The capture of this test (kept on failure)."""
    from .capture import CaseCapture

    case = _case_of(request.node)
    cap = CaseCapture(case.id if case is not None else request.node.name)
    request.node._uet_capture = cap
    return cap


@pytest.fixture
def uet_peer(request: pytest.FixtureRequest, uet_target: Any, uet_capture: Any) -> Any:
    """A scripted peer connected to the end point under test."""
    case = _case_of(request.node)
    with uet_target.peer(case, _index_of(request.node, case), uet_capture) as peer:
        yield peer


# ---------------------------------------------------------------------------- reporting


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Any:
    outcome = yield
    rep = outcome.get_result()
    case = _case_of(item)
    if case is None:
        return
    if rep.when == "call" or (rep.when == "setup" and rep.failed):
        cap = getattr(item, "_uet_capture", None)
        path = None
        config = item.config
        if cap is not None and cap.records and (rep.failed or
                                                config.getoption("--uet-keep-captures")):
            safe = case.id.replace("/", "_").replace(":", "_")
            path = cap.write(os.path.join(config.getoption("--uet-capture-dir"),
                                          f"{safe}.pcapng"))
            rep.sections.append(("uet capture", f"capture kept: {path}"))
        st = _stash(config)
        if cap is not None and config.getoption("--uet-capture"):
            if st.run_writer is None:
                from uet.capture.pcapng import PcapngWriter

                st.run_writer = PcapngWriter.open(config.getoption("--uet-capture"))
            cap.write_to(st.run_writer)
        item.user_properties.extend([("uet_id", case.id), ("uet_ref", case.ref),
                                     ("uet_rule", case.rule)])
        if path:
            item.user_properties.append(("uet_capture", path))
        st.results.append(_result(case, rep, call, path))


def _result(case: Any, rep: pytest.TestReport, call: pytest.CallInfo, path: str | None) -> Any:
    from .runner import ERROR, FAIL, PASS, Result

    if rep.passed:
        return Result(case.id, case.ref, case.rule, PASS, "", path, rep.duration)
    exc = call.excinfo.value if call.excinfo is not None else None
    status = FAIL if isinstance(exc, AssertionError) and rep.when == "call" else ERROR
    why = str(exc) if exc is not None else str(rep.longrepr)
    if status == ERROR and exc is not None:
        why = f"{type(exc).__name__}: {exc}"
    return Result(case.id, case.ref, case.rule, status, why, path, rep.duration)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int,
                            config: pytest.Config) -> None:
    st = _stash(config)
    if st.run_writer is not None:
        st.run_writer.close()
        terminalreporter.write_line(f"uet: run capture {config.getoption('--uet-capture')}")
    from .runner import NOT_RUN, Result

    results = list(st.results) + [Result(c.id, c.ref, c.rule, NOT_RUN, why)
                                  for c, why in st.not_run]
    if config.getoption("--uet-report"):
        from .report import write_json

        write_json(config.getoption("--uet-report"), results, _describe(st.target))
    if config.getoption("--uet-table") and results:
        from .report import render_table

        render_table(results, _describe(st.target), terminalreporter.write)


def _describe(target: Any) -> str:
    return target.describe() if target is not None else "no target"


__all__ = ["uet_capture", "uet_peer", "uet_target"]
