"""``python -m uet ...``: the ``uet`` command without the console script on PATH."""

import sys

from uet.cli import main

sys.exit(main())
