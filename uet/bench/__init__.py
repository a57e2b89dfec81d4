"""``uet bench``: speed ratios measured side by side in one run.

Each section is a module in this package exposing ``NAME`` and
``run(quick: bool) -> dict``; the dict is printed as a table and, with ``--json``, emitted
under its name in one JSON object. Sections: codec, native, pds, emulation, tss.
"""

SECTIONS = ("codec", "native", "pds", "emulation", "tss")
