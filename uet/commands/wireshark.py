"""``uet wireshark install [--dir DIR]`` and ``uet wireshark path``.

``install`` copies the bundled Lua dissector (``uet/wireshark/uet.lua``) into Wireshark's
personal plugin folder, where Wireshark and tshark load it at start-up; ``path`` prints
where the bundled file is, for ``wireshark -X lua_script:PATH``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

from uet.wireshark import PLUGIN_NAME, plugin_path, plugin_version


def default_plugin_dir() -> Path:
    """Wireshark's personal (per-user) plugin folder on this platform."""
    if sys.platform.startswith("win"):
        appdata = os.environ.get("APPDATA")
        base = Path(appdata) if appdata else Path.home() / "AppData" / "Roaming"
        return base / "Wireshark" / "plugins"
    return Path.home() / ".local" / "lib" / "wireshark" / "plugins"


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="wireshark_command", metavar="ACTION")
    inst = sub.add_parser("install", help="copy uet.lua into the personal plugin folder",
                          description="Copy the bundled uet.lua into Wireshark's personal "
                          "plugin folder (created if missing).")
    inst.add_argument("--dir", type=Path, default=None, metavar="DIR",
                      help=f"plugin folder to install into (default: {default_plugin_dir()})")
    sub.add_parser("path", help="print the path of the bundled uet.lua",
                   description="Print the path of the bundled uet.lua.")


def _is_root() -> bool:
    geteuid = getattr(os, "geteuid", None)
    return bool(geteuid and geteuid() == 0)


def _install(target_dir: Path) -> int:
    src = plugin_path()
    if not src.is_file():
        print(f"uet wireshark: bundled plugin not found at {src}", file=sys.stderr)
        return 1
    try:
        target_dir.mkdir(parents=True, exist_ok=True)
        dest = target_dir / PLUGIN_NAME
        if dest.is_symlink():
            dest.unlink()  # never write through a link into someone else's file
        shutil.copyfile(src, dest)
    except OSError as exc:
        print(f"uet wireshark: cannot install into {target_dir}: {exc}", file=sys.stderr)
        return 1
    print(f"Installed the UET dissector {plugin_version()} to {dest}")
    print("Wireshark and tshark load it at start-up; check with: tshark -G plugins | grep uet")
    print("To load it by hand instead (any folder, any user):")
    print(f"  wireshark -X lua_script:{dest}")
    print(f"  tshark -X lua_script:{dest} -r CAPTURE.pcapng")
    print("Note: Wireshark run as root skips personal plugin folders; as root (or in CI) "
          "use -X lua_script:PATH.")
    if _is_root():
        print("You are root now: the installed copy will not be loaded automatically.")
    return 0


def run(args: argparse.Namespace) -> int:
    action = getattr(args, "wireshark_command", None)
    if action == "path":
        print(plugin_path())
        return 0
    if action == "install":
        return _install(args.dir if args.dir is not None else default_plugin_dir())
    print("usage: uet wireshark {install [--dir DIR] | path}", file=sys.stderr)
    return 2
