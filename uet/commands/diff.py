"""``uet diff A B [--write DIFF.pcapng]``: semantic diff of two captures (per PDC, per PSN,
per field), summary first.

Packets are matched by key (PDC and PSN, RUDI packet ID, ...; occurrences of a key in
order), not by position, and compared field by field with the ``uet.*`` names of
``uet decode --json``. ``--write`` also writes both captures into one pcapng whose differing
packets carry comments (:mod:`uet.capture.diffcap`), to open in Wireshark. See
:mod:`uet.capture.diff` and docs/wireshark.md, "Diffing two runs".

A capture cut short is compared up to the cut, with a warning on stderr. Exit status: 0 the
captures are the same, 1 they differ, 2 error (unreadable capture, bad arguments).
"""

from __future__ import annotations

import argparse
import json
import sys

from uet.capture.diff import diff_captures
from uet.capture.diffcap import KEEP, write_diff_capture
from uet.capture.pcapng import CaptureError
from uet.wire.constants import UET_DEFAULT_IP_PROTO, UET_UDP_PORT

DEFAULT_LIMIT = 20


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("a", metavar="A", help="reference capture (pcap or pcapng)")
    p.add_argument("b", metavar="B", help="capture compared with A")
    p.add_argument("--normalize", action="store_true",
                   help="runs with different seeds: name PDCs by their rank between two "
                        "hosts and PSNs by their offset from the Start_PSN; do not compare "
                        "PDC IDs and EVs")
    p.add_argument("--timestamps", action="store_true",
                   help="also compare frame times (ns since each capture's first frame)")
    p.add_argument("--ignore", action="append", default=[], metavar="FIELD",
                   help="leave a field out of the comparison (shell patterns allowed, "
                        "e.g. 'uet.ses.*'); repeatable")
    p.add_argument("--iface", action="append", default=[], metavar="NAME",
                   help="only frames of this capture interface (e.g. h0); repeatable")
    p.add_argument("--limit", type=int, default=None, metavar="N",
                   help=f"differences listed (text: default {DEFAULT_LIMIT}, 0 = all; "
                        "JSON: all unless given)")
    p.add_argument("--json", action="store_true", help="one JSON object for machines")
    p.add_argument("--write", metavar="DIFF.pcapng", default=None,
                   help="also write both captures into one pcapng (interfaces A:h0, B:h0, "
                        "...), every differing packet carrying a 'uet-diff: ...' comment")
    p.add_argument("--keep", choices=KEEP, default=None,
                   help="with --write: every packet (all, the default) or only the "
                        "differing ones (diff)")
    p.add_argument("--context", type=int, default=None, metavar="N",
                   help="with --write: keep only the differing packets and N packets "
                        "before and after each (in its own capture); implies --keep diff")
    p.add_argument("--udp-port", type=int, default=UET_UDP_PORT,
                   help=f"UET UDP destination port (default {UET_UDP_PORT})")
    p.add_argument("--ip-proto", type=int, default=UET_DEFAULT_IP_PROTO,
                   help=f"IP protocol of native-IP UET (default {UET_DEFAULT_IP_PROTO})")


def _write_options(args: argparse.Namespace) -> tuple[str, int] | str:
    """(keep, context) for --write, or the error text."""
    if args.context is not None and args.context < 0:
        return "--context must be >= 0"
    if args.write is None:
        if args.keep is not None or args.context is not None:
            return "--keep and --context go with --write DIFF.pcapng"
        return "all", 0
    if args.keep == "all" and args.context is not None:
        return "--context keeps only the differing packets: it does not go with --keep all"
    keep = args.keep or ("diff" if args.context is not None else "all")
    return keep, args.context or 0


def run(args: argparse.Namespace) -> int:
    if args.limit is not None and args.limit < 0:
        print("uet diff: --limit must be >= 0", file=sys.stderr)
        return 2
    opts = _write_options(args)
    if isinstance(opts, str):
        print(f"uet diff: {opts}", file=sys.stderr)
        return 2
    keep, context = opts
    try:
        result = diff_captures(args.a, args.b,
                               mode="normalized" if args.normalize else "exact",
                               timestamps=args.timestamps, ignore=args.ignore,
                               udp_port=args.udp_port, ip_proto=args.ip_proto,
                               ifaces=args.iface or None)
    except (CaptureError, OSError) as exc:
        name = getattr(exc, "filename", None)
        print(f"uet diff: {name + ': ' if name else ''}{exc}", file=sys.stderr)
        return 2
    unknown = [i for i in args.iface if i not in result.a_ifaces and i not in result.b_ifaces]
    if unknown:  # a typo must not read as "0 packets matched ... same"
        seen = list(dict.fromkeys(result.a_ifaces + result.b_ifaces))
        print(f"uet diff: --iface {', '.join(unknown)}: no such interface in either capture "
              f"(interfaces: {', '.join(seen) or 'none'})", file=sys.stderr)
        return 2
    for warning in result.warnings:
        print(f"uet diff: warning: {warning}", file=sys.stderr)
    if args.write is not None:
        try:
            stats = write_diff_capture(result, args.write, keep=keep, context=context)
        except OSError as exc:
            print(f"uet diff: cannot write {args.write}: {exc.strerror or exc}",
                  file=sys.stderr)
            return 2
        print(f"uet diff: wrote {args.write}: {stats.frames} packets ({stats.frames_a} of A, "
              f"{stats.frames_b} of B), {stats.marked_a + stats.marked_b} marked "
              "'uet-diff'; in Wireshark: frame.comment contains \"uet-diff\"",
              file=sys.stderr)
    try:
        if args.json:
            limit = args.limit if args.limit else None
            json.dump(result.to_json(limit), sys.stdout)
            sys.stdout.write("\n")
        else:
            limit = DEFAULT_LIMIT if args.limit is None else args.limit
            print(result.render(limit))
        sys.stdout.flush()
    except BrokenPipeError:  # `uet diff a b | head`
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0 if result.same else 1
