"""The ``uet`` command: a thin layer over the Python API.

Each subcommand lives in its own module under ``uet.commands`` and exposes
``add_arguments(parser)`` and ``run(args) -> int``. Modules are imported only when their
subcommand runs, so ``uet decode`` does not pay for matplotlib or trio.

What every command gets from :func:`main`, so that no command has to remember it:

* a closed output pipe (``uet profiles --json | head``) ends the command quietly (exit
  status 141, as for a program killed by SIGPIPE), never with a BrokenPipeError traceback;
* one of the project's own errors escaping a command (a bad configuration, capture or
  setup: the ``*Error`` classes defined in ``uet.*``) is printed as one line, ``uet CMD:
  message``, with exit status 2; ``UET_TRACEBACK=1`` shows the traceback instead. Python's
  own exceptions (a bug) keep their traceback;
* Ctrl-C ends the command with exit status 130 and no traceback;
* called as the process's command (``argv`` None: the ``uet`` script, ``python -m uet``),
  the objects left when the command ends are frozen out of the garbage collector
  (``gc.freeze``): the process exits next, and the interpreter's last full collection
  would traverse (and free, object by object) a run's whole fabric first, 0.3-0.4 s after
  a 128-host run. Files are closed by their owners, never left to that collection.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
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


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``uet`` parser. ``command``: only that subcommand's module is imported and
    adds its options (the others keep their help line); None: every subcommand's."""
    parser = argparse.ArgumentParser(prog="uet", description="Ultra Ethernet Transport emulator")
    from uet import __version__

    parser.add_argument("--version", action="version", version=f"uet {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module, help_text) in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(_module=module)
        if command is not None and name != command:
            continue
        mod = _load(module)
        if mod is not None:
            mod.add_arguments(p)
    return parser


def command_of(argv: list[str]) -> str | None:
    """The subcommand ``argv`` names: its first argument that is not an option (``uet``'s
    own options take no value); None when there is none or it is no subcommand."""
    for arg in argv:
        if not arg.startswith("-"):
            return arg if arg in SUBCOMMANDS else None
    return None


def _load(module: str):
    try:
        return importlib.import_module(f"uet.commands.{module}")
    except ModuleNotFoundError as exc:
        if exc.name == f"uet.commands.{module}":
            return None
        raise


#: exit status of a command whose output pipe was closed (128 + SIGPIPE)
EXIT_PIPE = 141
#: exit status after Ctrl-C (128 + SIGINT)
EXIT_INTERRUPT = 130


def is_user_error(exc: BaseException) -> bool:
    """True for the project's own errors (a class of ``uet.*`` in the exception's MRO),
    which describe bad input; assertion failures and local protocol errors (an illegal
    state transition, a liveness violation: bugs, never a user's mistake) are internal
    and keep their traceback."""
    from uet.errors import LocalProtocolError

    if isinstance(exc, (AssertionError, LocalProtocolError)):
        return False
    return any(cls.__module__.split(".")[0] == "uet" for cls in type(exc).__mro__)


def _silence_stdout() -> None:
    """Point stdout at /dev/null: the reader is gone, and Python's last flush at exit
    must not raise again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # stdout without a descriptor
        pass


def main(argv: list[str] | None = None) -> int:
    command = "uet"
    try:
        parser = build_parser(command_of(sys.argv[1:] if argv is None else argv))
        args = parser.parse_args(argv)
        if not getattr(args, "_module", None):
            parser.print_help()
            return 2
        command = f"uet {args.command}"
        mod = _load(args._module)
        if mod is None:
            print(f"{command}: not available in this build", file=sys.stderr)
            return 2
        code = int(mod.run(args) or 0)
        sys.stdout.flush()  # a closed pipe shows here, not in Python's exit handler
        return code
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_PIPE
    except KeyboardInterrupt:
        print(f"{command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPT
    except Exception as exc:
        if not is_user_error(exc) or os.environ.get("UET_TRACEBACK"):
            raise
        text = " ".join(str(exc).split()) or type(exc).__name__
        print(f"{command}: {text}", file=sys.stderr)
        return 2
    finally:
        if argv is None:  # the process's own command line: it exits next
            gc.freeze()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
