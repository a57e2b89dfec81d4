"""``uet wireshark install [--dir DIR] [--config-dir DIR]``, ``uet wireshark path`` and
``uet wireshark colors``.

``install`` copies the bundled Lua dissector (``uet/wireshark/uet.lua``) into Wireshark's
personal Lua plugin folder and writes the configuration profile ``uet`` (coloring rules,
columns, preferences: :mod:`uet.wireshark.profile`) into its personal configuration
folder. Where those folders are is asked of ``tshark -G folders`` when tshark is installed
(it honours ``WIRESHARK_CONFIG_DIR`` and ``XDG_CONFIG_HOME``), else derived the same way.
Then ``tshark -G plugins`` says whether the installed copy is loaded at start-up, and the
command says so instead of guessing (Wireshark 4.0 loads personal plugins as root too;
setuid builds and older releases do not). ``path`` prints where the bundled file is, for
``wireshark -X lua_script:PATH``; ``colors`` prints the coloring rules.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from uet.wireshark import PLUGIN_NAME, plugin_path, plugin_version
from uet.wireshark.profile import (
    PROFILE_NAME,
    colorfilters_text,
    global_colorfilters,
    preferences_text,
)

#: First line of the profile files we write: a file without it was edited in Wireshark
#: (which writes its own header) and is left alone.
_OURS = ("# UET coloring rules", "# Profile \"uet\", written by uet wireshark install")


def default_plugin_dir() -> Path:
    """Wireshark's personal (per-user) Lua plugin folder on this platform."""
    if sys.platform.startswith("win"):
        appdata = os.environ.get("APPDATA")
        base = Path(appdata) if appdata else Path.home() / "AppData" / "Roaming"
        return base / "Wireshark" / "plugins"
    return Path.home() / ".local" / "lib" / "wireshark" / "plugins"


def default_config_dir() -> Path:
    """Wireshark's personal configuration folder, found as Wireshark finds it."""
    env = os.environ.get("WIRESHARK_CONFIG_DIR")
    if env:
        return Path(env)
    if sys.platform.startswith("win"):
        appdata = os.environ.get("APPDATA")
        base = Path(appdata) if appdata else Path.home() / "AppData" / "Roaming"
        return base / "Wireshark"
    xdg = os.environ.get("XDG_CONFIG_HOME")
    if xdg:
        return Path(xdg) / "wireshark"
    legacy = Path.home() / ".wireshark"
    modern = Path.home() / ".config" / "wireshark"
    return legacy if legacy.is_dir() and not modern.exists() else modern


@dataclass(slots=True)
class Folders:
    """Wireshark's folders: ``tshark`` the binary that told us (None: derived here)."""

    lua_plugins: Path
    config: Path
    global_config: Path | None
    tshark: str | None


def _run_tshark(tshark: str, *args: str) -> str | None:
    try:
        proc = subprocess.run([tshark, *args], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout if proc.returncode == 0 else None


def wireshark_folders() -> Folders:
    """The folders of the tshark on PATH (``tshark -G folders``), or the defaults."""
    tshark = shutil.which("tshark")
    found: dict[str, str] = {}
    if tshark:
        out = _run_tshark(tshark, "-G", "folders") or ""
        for line in out.splitlines():
            key, sep, value = line.partition(":")
            if sep:
                found.setdefault(key.strip(), value.strip())
    lua = found.get("Personal Lua Plugins")
    conf = found.get("Personal configuration")
    glob = found.get("Global configuration")
    return Folders(Path(lua) if lua else default_plugin_dir(),
                   Path(conf) if conf else default_config_dir(),
                   Path(glob) if glob else None, tshark if found else None)


def loaded_plugins(tshark: str) -> list[Path] | None:
    """The Lua plugin files ``tshark -G plugins`` lists (None: tshark did not answer)."""
    out = _run_tshark(tshark, "-G", "plugins")
    if out is None:
        return None
    paths = []
    for line in out.splitlines():
        parts = line.split("\t")
        if len(parts) >= 4 and parts[2].strip() == "lua script":
            paths.append(Path(parts[3].strip()))
    return paths


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="wireshark_command", metavar="ACTION")
    inst = sub.add_parser("install", help="install uet.lua and the 'uet' profile",
                          description="Copy the bundled uet.lua into Wireshark's personal "
                          "Lua plugin folder and write the configuration profile 'uet' "
                          "(coloring rules, columns, preferences) into its personal "
                          "configuration folder (both created if missing); then say "
                          "whether tshark loads the installed copy at start-up.")
    inst.add_argument("--dir", type=Path, default=None, metavar="DIR",
                      help="plugin folder to install into (default: the personal Lua plugin "
                           f"folder tshark -G folders names, else {default_plugin_dir()})")
    inst.add_argument("--config-dir", type=Path, default=None, metavar="DIR",
                      help="Wireshark configuration folder that receives profiles/uet "
                           "(default: the personal configuration folder)")
    inst.add_argument("--no-profile", action="store_true",
                      help="install the plugin only, not the 'uet' profile")
    sub.add_parser("path", help="print the path of the bundled uet.lua",
                   description="Print the path of the bundled uet.lua.")
    col = sub.add_parser("colors", help="print the UET coloring rules (colorfilters format)",
                         description="Print the coloring rules of the 'uet' profile in "
                         "Wireshark's colorfilters format (View > Coloring Rules > Import).")
    col.add_argument("--with-defaults", action="store_true",
                     help="append the Wireshark installation's default rules, as the "
                          "profile has them")


def _copy_plugin(target_dir: Path) -> Path:
    target_dir.mkdir(parents=True, exist_ok=True)
    dest = target_dir / PLUGIN_NAME
    if dest.is_symlink():
        dest.unlink()  # never write through a link into someone else's file
    shutil.copyfile(plugin_path(), dest)
    return dest


def _write_ours(path: Path, text: str) -> bool:
    """Write ``text`` unless ``path`` exists and was written by someone else."""
    if path.is_symlink():
        path.unlink()
    elif path.exists():
        try:
            first = path.read_text(encoding="utf-8", errors="replace").split("\n", 1)[0]
        except OSError:
            first = ""
        if not first.startswith(_OURS):
            return False
    path.write_text(text, encoding="utf-8")
    return True


def install_profile(config_dir: Path, global_dir: Path | None) -> tuple[Path, list[str]]:
    """Write profiles/uet under ``config_dir``; return its folder and the files kept as
    the user edited them."""
    prof = config_dir / "profiles" / PROFILE_NAME
    prof.mkdir(parents=True, exist_ok=True)
    kept = []
    if not _write_ours(prof / "colorfilters",
                       colorfilters_text(global_colorfilters(global_dir))):
        kept.append("colorfilters")
    if not _write_ours(prof / "preferences", preferences_text()):
        kept.append("preferences")
    return prof, kept


def _same(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return a == b


def _install(args: argparse.Namespace) -> int:
    src = plugin_path()
    if not src.is_file():
        print(f"uet wireshark: bundled plugin not found at {src}", file=sys.stderr)
        return 1
    folders = wireshark_folders()
    target = args.dir if args.dir is not None else folders.lua_plugins
    try:
        dest = _copy_plugin(target)
    except OSError as exc:
        print(f"uet wireshark: cannot install into {target}: {exc}", file=sys.stderr)
        return 1
    print(f"Installed the UET dissector {plugin_version()} to {dest}")
    if not args.no_profile:
        config = args.config_dir if args.config_dir is not None else folders.config
        try:
            prof, kept = install_profile(config, folders.global_config)
        except OSError as exc:
            print(f"uet wireshark: cannot write the profile into {config}: {exc}",
                  file=sys.stderr)
            return 1
        print(f"Wrote the Wireshark profile '{PROFILE_NAME}' (coloring rules, columns, "
              f"udp.try_heuristic_first) to {prof}")
        for name in kept:
            print(f"  kept {prof / name}: edited in Wireshark (uet wireshark colors prints "
                  "ours)")
        print(f"  use it: Wireshark's status bar > Profile > {PROFILE_NAME}, or "
              f"tshark -C {PROFILE_NAME}")
    plugins = loaded_plugins(folders.tshark) if folders.tshark else None
    if plugins is None:
        print("tshark was not found (or did not answer), so whether Wireshark loads the "
              "installed copy at start-up was not checked: see tshark -G plugins. If it is "
              "not listed, load it by hand:")
        print(f"  wireshark -X lua_script:{dest}")
    elif any(_same(p, dest) for p in plugins):
        print("tshark loads it at start-up (tshark -G plugins lists it): open captures with "
              "plain 'wireshark FILE' or 'tshark -r FILE'. Do not add -X lua_script: a "
              "second copy is ignored.")
    else:
        print(f"tshark does not load {dest} at start-up (tshark -G plugins does not list "
              "it: another plugin folder, or a Wireshark that skips personal plugins). Load "
              "it by hand:")
        print(f"  wireshark -X lua_script:{dest}")
        print(f"  tshark -X lua_script:{dest} -r CAPTURE.pcapng")
    return 0


def run(args: argparse.Namespace) -> int:
    action = getattr(args, "wireshark_command", None)
    if action == "path":
        print(plugin_path())
        return 0
    if action == "install":
        return _install(args)
    if action == "colors":
        defaults = None
        if args.with_defaults:
            defaults = global_colorfilters(wireshark_folders().global_config)
        sys.stdout.write(colorfilters_text(defaults))
        return 0
    print("usage: uet wireshark {install [--dir DIR] [--config-dir DIR] | path | colors}",
          file=sys.stderr)
    return 2
