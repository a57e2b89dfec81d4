"""One module per ``uet`` subcommand: ``add_arguments(parser)`` and ``run(args) -> int``."""
