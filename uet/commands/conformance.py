"""``uet conformance``: run the conformance catalogue (and your own cases) through pytest.

By default against the built-in end point in this process (virtual clock); with ``--dut
udp:HOST:PORT`` against any implementation listening there (``uet serve`` for ours). Prints
the table (ID, rule, pass/fail, why); ``--junit FILE`` writes JUnit XML, ``-k EXPR`` selects
cases (``-k PDS-EST``, ``-k "SES-RC and not SES-RC-001"``). Failing cases keep a pcapng
capture under ``--capture-dir``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="*", metavar="TESTS",
                   help="extra test files or directories with your own cases (pytest "
                        "tests using the uet_peer fixture), run with the catalogue")
    p.add_argument("--dut", action="append", default=[], metavar="SPEC",
                   help="end point under test: inprocess (default) or udp:HOST:PORT"
                        "[@profile]; repeat to give devices of other profiles (e.g. "
                        "udp:127.0.0.3:4793@ai-base for the AI Base gating cases)")
    p.add_argument("--setup", default=None, metavar="FILE",
                   help="the device's setup (JSON, from uet serve --setup-out)")
    p.add_argument("-k", dest="keyword", default=None, metavar="EXPR",
                   help="select cases by ID or name (pytest -k expression)")
    p.add_argument("--junit", default=None, metavar="FILE", help="write JUnit XML")
    p.add_argument("--json", default=None, metavar="FILE", help="write the results as JSON")
    p.add_argument("--capture-dir", default="conformance-captures", metavar="DIR",
                   help="where failing cases keep their pcapng (default conformance-captures)")
    p.add_argument("--keep-captures", action="store_true",
                   help="keep the capture of every case")
    p.add_argument("--capture", default=None, metavar="FILE",
                   help="one pcapng of the whole run (an interface per case)")
    p.add_argument("--peer", action="append", default=[], metavar="IP",
                   help="UDP: source addresses of the test peer (default: a fresh pair of "
                        "127.0.92.0/22 per case)")
    p.add_argument("--peer-net", default="127.0.92.0/22", metavar="CIDR",
                   help="UDP: the network the per-case peer addresses come from (default "
                        "127.0.92.0/22)")
    p.add_argument("--grace-ms", type=float, default=500.0,
                   help="UDP: wall-clock grace for expected packets (default 500)")
    p.add_argument("--quiet-ms", type=float, default=40.0,
                   help="UDP: shortest wait when a packet must not come (default 40)")
    p.add_argument("--tss", action="store_true",
                   help="the devices serve the well-known secure domain (uet serve --tss "
                        "well-known): run the TSS cases, and only them")
    p.add_argument("--probe-timeout", type=float, default=3.0, metavar="S",
                   help="UDP: before the catalogue, check that every device answers a "
                        "request within S seconds (default 3; 0: no check)")
    p.add_argument("--no-catalogue", action="store_true",
                   help="run only the TESTS given, not the catalogue")
    p.add_argument("-x", "--exitfirst", action="store_true", help="stop at the first failure")
    p.add_argument("-v", "--verbose", action="store_true", help="pytest's verbose output")
    p.add_argument("--list", action="store_true", help="list the catalogue and exit")
    p.add_argument("--docs", nargs="?", const="-", default=None, metavar="FILE",
                   help="print the generated parts of docs/conformance.md (the setup and "
                        "the catalogue table), or regenerate them in FILE, and exit")


def _list() -> int:
    from uet.conformance.registry import catalogue

    for c in catalogue():
        limits = c.limits()
        extra = f"  [{limits}]" if limits else ""
        if c.profile:
            extra += f"  [profile {c.profile}]"
        print(f"{c.id:<13} ref {c.ref:<9} {c.rule}{extra}")
    return 0


def pytest_args(args: argparse.Namespace, ini: str) -> list[str]:
    """The pytest command line for these options."""
    import uet.conformance.suite as suite

    out = ["-c", ini, "--rootdir", os.getcwd(), "-p", "uet.conformance.plugin",
           "-p", "no:cacheprovider", "--uet-table", "-q", "--no-header", "-rN",
           "--tb=no" if not args.verbose else "--tb=short", "-W", "ignore::DeprecationWarning"]
    if args.verbose:
        out.append("-v")
    for d in args.dut:
        out += ["--uet-dut", d]
    for ip in args.peer:
        out += ["--uet-peer", ip]
    if args.setup:
        out += ["--uet-setup", args.setup]
    if args.tss:
        out.append("--uet-tss")
    out += ["--uet-peer-net", args.peer_net, "--uet-capture-dir", args.capture_dir,
            "--uet-grace-ms", str(args.grace_ms), "--uet-quiet-ms", str(args.quiet_ms)]
    if args.keep_captures:
        out.append("--uet-keep-captures")
    if args.capture:
        out += ["--uet-capture", args.capture]
    if args.json:
        out += ["--uet-report", args.json]
    if args.junit:
        out += [f"--junitxml={args.junit}", "-o", "junit_family=xunit2",
                "-o", "junit_logging=no"]
    if args.keyword:
        out += ["-k", args.keyword]
    if args.exitfirst:
        out.append("-x")
    if not args.no_catalogue:
        out.append(suite.__file__)
    out += args.paths
    return out


def run(args: argparse.Namespace) -> int:
    if args.list:
        return _list()
    if args.docs:
        from uet.conformance.report import docs_setup, docs_table, update_doc

        if args.docs == "-":
            print(docs_setup() + "\n\n" + docs_table())
            return 0
        with open(args.docs, encoding="utf-8") as fh:
            text = fh.read()
        try:
            new = update_doc(text)
        except ValueError:
            print(f"uet conformance: {args.docs} lacks the generated-section markers",
                  file=sys.stderr)
            return 2
        with open(args.docs, "w", encoding="utf-8") as fh:
            fh.write(new)
        return 0
    if args.no_catalogue and not args.paths:
        print("uet conformance: --no-catalogue needs TESTS to run", file=sys.stderr)
        return 2
    try:
        from uet.conformance.setup import DutSetup, SetupError
        from uet.conformance.targets import UdpTarget, make_target

        setup = DutSetup.load(args.setup) if args.setup else None
        target = make_target(args.dut, *([setup] if setup else []),
                             peer_ips=args.peer or None, peer_net=args.peer_net,
                             **({"tss": True} if args.tss else {}))
        if isinstance(target, UdpTarget) and args.probe_timeout > 0 and not args.tss:
            target.check_reachable(args.probe_timeout)
    except (ValueError, SetupError, OSError) as exc:
        print(f"uet conformance: {exc}", file=sys.stderr)
        return 2
    import pytest

    # only this plugin: the user's other pytest plugins and ini files do not apply
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    with tempfile.TemporaryDirectory(prefix="uet-conformance-") as tmp:
        ini = os.path.join(tmp, "pytest.ini")
        with open(ini, "w", encoding="utf-8") as fh:
            fh.write("[pytest]\n")
        code = pytest.main(pytest_args(args, ini))
    if int(code) == 5:  # nothing collected: e.g. -k matched no case
        print("uet conformance: no case selected", file=sys.stderr)
    return int(code)
