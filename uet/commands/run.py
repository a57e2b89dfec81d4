"""``uet run [EXPERIMENT.toml] [--set key=value] [--sweep key=v1,v2] [--jobs N] [--out DIR]``.

The command line lives in :mod:`uet.experiments.command`, the work in
:func:`uet.experiments.runner.run_experiment` (docs/experiments.md).
"""

from uet.experiments.command import add_arguments, run

__all__ = ["add_arguments", "run"]
