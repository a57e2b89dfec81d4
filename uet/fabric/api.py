"""Compatibility alias: the Trio fabric API moved to :mod:`uet.runtime.fabric`.

``from uet.fabric.api import Fabric`` keeps working for existing scripts; new code imports
``uet.runtime`` (this is the one module under ``uet.fabric`` allowed to name it, see
``tests/test_architecture.py``).
"""

from uet.runtime.fabric import Fabric, FabricStalled  # noqa: F401

__all__ = ["Fabric", "FabricStalled"]
