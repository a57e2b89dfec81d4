"""The Wireshark Lua dissector shipped with uet.

The canonical file is ``uet/wireshark/uet.lua`` (package data, so it is installed with the
package); ``tools/wireshark/uet.lua`` in a source checkout is a symbolic link to it.
``uet wireshark install`` copies it into Wireshark's personal plugin folder.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

#: File name of the plugin.
PLUGIN_NAME = "uet.lua"


def plugin_path() -> Path:
    """Path of the bundled ``uet.lua`` (works in a source checkout and when installed)."""
    return Path(str(resources.files(__name__).joinpath(PLUGIN_NAME)))


def plugin_text() -> str:
    """Text of the bundled ``uet.lua``."""
    return resources.files(__name__).joinpath(PLUGIN_NAME).read_text(encoding="utf-8")


def plugin_version() -> str:
    """``PLUGIN_VERSION`` declared in the Lua file."""
    for line in plugin_text().splitlines():
        if line.startswith("local PLUGIN_VERSION"):
            return line.split("=", 1)[1].strip().strip('"')
    return "unknown"
