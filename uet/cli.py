"""The ``uet`` command: a thin layer over the Python API.

Each subcommand lives in its own module under ``uet.commands`` and exposes
``add_arguments(parser)`` and ``run(args) -> int``. Modules are imported only when their
subcommand runs, so ``uet decode`` does not pay for matplotlib or trio.
"""

from __future__ import annotations

import argparse
import importlib
import sys

#: subcommand -> (module under uet.commands, one-line help)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "run": ("run", "run an experiment (the built-in default when no file is given)"),
    "compare": ("compare", "results of runs side by side: metrics, ratios, FCT CDFs"),
    "decode": ("decode", "decode a pcap/pcapng capture, one line or JSON object per frame"),
    "diff": ("diff", "semantic diff of two captures (per PDC, per PSN, per field)"),
    "versus": ("versus", "one experiment with UET and with the RoCEv2 baseline, side by side"),
    "conformance": ("conformance", "run the conformance catalogue against an end point"),
    "serve": ("serve", "run a UET end point on a real UDP socket as a responder"),
    "bench": ("bench", "speed ratios measured side by side in one run"),
    "profiles": ("profiles", "the profiles and what each allows"),
    "wireshark": ("wireshark", "install the Wireshark Lua dissector"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="uet", description="Ultra Ethernet Transport emulator")
    from uet import __version__

    parser.add_argument("--version", action="version", version=f"uet {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module, help_text) in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(_module=module)
        mod = _load(module)
        if mod is not None:
            mod.add_arguments(p)
    return parser


def _load(module: str):
    try:
        return importlib.import_module(f"uet.commands.{module}")
    except ModuleNotFoundError as exc:
        if exc.name == f"uet.commands.{module}":
            return None
        raise


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_module", None):
        parser.print_help()
        return 2
    mod = _load(args._module)
    if mod is None:
        print(f"uet {args.command}: not available in this build", file=sys.stderr)
        return 2
    return int(mod.run(args) or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
