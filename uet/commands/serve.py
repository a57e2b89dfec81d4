"""``uet serve``: run the built-in end point on a real UDP socket as a responder.

The end point gets the conformance suite's well-known setup (a job, memory regions with
known keys and contents, receives kept posted, short timers: docs/conformance.md), printed
at start, so that ``uet conformance --dut udp:HOST:PORT`` (or another implementation's test
tool) has something to hit.
"""

from __future__ import annotations

import argparse
import json
import sys

from uet.fabric.eventlog import LOG_LEVELS


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--listen", default="127.0.0.1:4793", metavar="HOST:PORT",
                   help="address to serve on (default 127.0.0.1:4793; the UET port is 4793: "
                        "answers go to that port of the sender's address)")
    p.add_argument("--profile", default=None,
                   help="profile of the end point (ai-base, ai-full, hpc; default: the "
                        "setup's, hpc)")
    p.add_argument("--setup", default=None, metavar="FILE",
                   help="setup file (JSON, as written by --setup-out) instead of the "
                        "well-known setup")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="change one setup value, e.g. --set rto_us=50000 (repeatable)")
    p.add_argument("--setup-out", default=None, metavar="FILE",
                   help="write the setup in effect as JSON (for uet conformance --setup)")
    p.add_argument("--duration", type=float, default=None, metavar="S",
                   help="stop after S seconds (default: run until interrupted)")
    p.add_argument("--json", action="store_true",
                   help="print the setup and the final counters as JSON")
    p.add_argument("--tss", default=None, metavar="KEYFILE",
                   help="transport security: serve the setup's job in the secure domains of "
                        "this key file (docs/tss.md), or 'well-known' for the conformance "
                        "suite's published domain (uet conformance --tss); cleartext and "
                        "frames without the key are refused and counted (tss.rx_refused.*)")
    p.add_argument("--log-level", choices=LOG_LEVELS, default="off",
                   help="print the end point's structured event log on stderr: error (PDCs "
                        "closed in error), warning (+ NACKs, retransmissions), info (+ PDCs "
                        "opening and closing), debug (everything); default off")


def _setup(args: argparse.Namespace):
    """The setup in effect: the well-known one or ``--setup FILE``, then ``--profile``,
    then each ``--set`` (an error names the option that brought the bad value)."""
    from uet.conformance.setup import WELL_KNOWN, DutSetup, SetupError

    setup = DutSetup.load(args.setup) if args.setup else WELL_KNOWN
    if args.profile:
        setup = DutSetup.from_dict({**setup.to_dict(), "profile": args.profile},
                                   f"--profile {args.profile}")
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise SetupError(f"--set {item}: expected KEY=VALUE, e.g. --set rto_us=50000")
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError:
            parsed = value
        setup = DutSetup.from_dict({**setup.to_dict(), key.strip(): parsed}, f"--set {item}")
    return setup


def _event_log(level: str):
    """The end point's ``log(now, kind, **fields)`` hook for ``--log-level`` (None: off)."""
    if level == "off":
        return None
    from uet.fabric.eventlog import EventLog, level_filter

    log = EventLog()
    log.subscribe(level_filter(level, lambda line: print(line, file=sys.stderr, flush=True)))
    return log.emit


def run(args: argparse.Namespace) -> int:
    from uet.conformance.setup import SetupError
    from uet.conformance.udp_io import parse_hostport
    from uet.runtime import run as run_async
    from uet.runtime.responder import serve
    from uet.tss.config import TssConfig, TssConfigError
    from uet.wire.constants import UET_UDP_PORT

    try:
        host, port = parse_hostport(args.listen, UET_UDP_PORT)
        setup = _setup(args)
        tss = None
        if args.tss == "well-known":
            from uet.conformance.setup import conformance_tss

            tss = TssConfig.from_dict(conformance_tss(setup))
        elif args.tss:
            tss = TssConfig.from_dict({"key_file": args.tss})
            if setup.job_id not in {d.job for d in tss.domains}:
                raise TssConfigError(f"--tss {args.tss}: no secure domain carries the "
                                     f"setup's job {setup.job_id} (jobs in the file: "
                                     f"{', '.join(str(d.job) for d in tss.domains)})")
    except (SetupError, ValueError) as exc:
        print(f"uet serve: {exc}", file=sys.stderr)
        return 2
    if args.setup_out:
        with open(args.setup_out, "w", encoding="utf-8") as fh:
            fh.write(setup.to_json() + "\n")
    if args.json:
        print(json.dumps({"listen": f"{host}:{port}", "setup": setup.to_dict()}), flush=True)
    else:
        print(f"uet serve: built-in end point on udp:{host}:{port}\n{setup.describe()}",
              flush=True)
    try:
        stats = run_async(serve, setup, host, port, args.duration,
                         lambda line: print(line, flush=True), _event_log(args.log_level), tss)
    except OSError as exc:
        print(f"uet serve: cannot serve on {host}:{port}: {exc.strerror or exc}",
              file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    if args.json:
        print(json.dumps({"counters": stats}), flush=True)
    else:
        keys = ("udp.rx_datagrams", "udp.tx_datagrams", "driver.rx_decode_errors",
                "pds.opened", "pds.closed", "pds.closed_in_error")
        if tss is not None:
            keys += ("tss.rx_ok", "tss.tx_ok") + tuple(
                k for k in sorted(stats) if k.startswith("tss.rx_refused."))
        print("uet serve: " + ", ".join(f"{k}={stats.get(k, 0)}" for k in keys), flush=True)
    return 0
