"""``uet diff A B``: semantic diff of two captures (per PDC, per PSN, per field).

Packets are matched by key (PDC and PSN, RUDI packet ID, ...; occurrences of a key in
order), not by position, and compared field by field with the ``uet.*`` names of
``uet decode --json``. See :mod:`uet.capture.diff` and docs/wireshark.md, "Diffing two runs".

Exit status: 0 the captures are the same, 1 they differ, 2 error (unreadable capture, bad
arguments).
"""

from __future__ import annotations

import argparse
import json
import sys

from uet.capture.diff import diff_captures
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
    p.add_argument("--udp-port", type=int, default=UET_UDP_PORT,
                   help=f"UET UDP destination port (default {UET_UDP_PORT})")
    p.add_argument("--ip-proto", type=int, default=UET_DEFAULT_IP_PROTO,
                   help=f"IP protocol of native-IP UET (default {UET_DEFAULT_IP_PROTO})")


def run(args: argparse.Namespace) -> int:
    if args.limit is not None and args.limit < 0:
        print("uet diff: --limit must be >= 0", file=sys.stderr)
        return 2
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
