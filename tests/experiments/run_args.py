"""``uet run``'s command line parsed as the CLI does, for tests that call
:func:`uet.experiments.command.run` directly (with a stand-in runner or console)."""

from __future__ import annotations

import argparse

from uet.experiments import command


def run_args(*argv: str) -> argparse.Namespace:
    """``uet run ARGV...`` as the namespace :func:`command.run` takes."""
    parser = argparse.ArgumentParser(prog="uet run")
    command.add_arguments(parser)
    return parser.parse_args(list(argv))
