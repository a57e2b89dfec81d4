"""``uet wireshark install|path`` and where the Lua file lives."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tshark_json import tshark_binary, tshark_env

from uet.cli import main
from uet.commands import wireshark as cmd
from uet.wireshark import PLUGIN_NAME, plugin_path, plugin_text, plugin_version

ROOT = Path(__file__).resolve().parents[2]
CAPTURES = ROOT / "captures"


def test_tools_copy_is_a_link_to_the_package_copy():
    tools = ROOT / "tools" / "wireshark" / "uet.lua"
    assert tools.is_symlink(), "tools/wireshark/uet.lua must be a symlink to the package copy"
    assert tools.resolve() == (ROOT / "uet" / "wireshark" / "uet.lua").resolve()
    assert tools.read_bytes() == plugin_path().read_bytes()


def test_plugin_is_package_data():
    assert plugin_path().name == PLUGIN_NAME
    assert plugin_path().is_file()
    assert "Proto(" in plugin_text()
    assert plugin_version().count(".") == 2


def test_path_prints_the_bundled_file(capsys):
    assert main(["wireshark", "path"]) == 0
    assert capsys.readouterr().out.strip() == str(plugin_path())


def _tshark_count(capture: Path, flt: str, *, script: Path | None = None,
                 home: Path) -> tuple[int, str]:
    """Frames tshark selects with ``flt`` (HOME = ``home``), and its stderr."""
    cmd = [tshark_binary(), "-n"]
    if script is not None:
        cmd += ["-X", f"lua_script:{script}"]
    cmd += ["-r", str(capture), "-Y", flt, "-T", "fields", "-e", "frame.number"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                          env=tshark_env(home))
    assert proc.returncode == 0, proc.stderr
    err = "\n".join(ln for ln in proc.stderr.splitlines() if "Running as user" not in ln)
    return len(proc.stdout.split()), err


def test_install_copies_into_the_given_folder(tmp_path, capsys):
    target = tmp_path / "deep" / "plugins"
    assert main(["wireshark", "install", "--dir", str(target), "--no-profile"]) == 0
    out = capsys.readouterr().out
    installed = target / PLUGIN_NAME
    assert installed.read_bytes() == plugin_path().read_bytes()
    assert str(installed) in out
    # a folder Wireshark does not read: tshark -G plugins says so, and the command too
    assert "tshark does not load" in out and f"-X lua_script:{installed}" in out
    # installing again overwrites, and replaces a symlink instead of writing through it
    other = tmp_path / "other.lua"
    other.write_text("-- someone else's file\n")
    installed.unlink()
    installed.symlink_to(other)
    assert main(["wireshark", "install", "--dir", str(target), "--no-profile"]) == 0
    assert not installed.is_symlink()
    assert other.read_text() == "-- someone else's file\n"
    assert installed.read_bytes() == plugin_path().read_bytes()


def test_install_defaults_to_the_personal_plugin_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setattr(cmd.sys, "platform", "linux")
    assert cmd.default_plugin_dir() == tmp_path / ".local" / "lib" / "wireshark" / "plugins"
    assert main(["wireshark", "install"]) == 0
    assert (tmp_path / ".local" / "lib" / "wireshark" / "plugins" / PLUGIN_NAME).is_file()
    prof = tmp_path / ".config" / "wireshark" / "profiles" / "uet"
    assert (prof / "colorfilters").is_file() and (prof / "preferences").is_file()


def test_config_dir_follows_wireshark(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setattr(cmd.sys, "platform", "linux")
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.delenv("WIRESHARK_CONFIG_DIR", raising=False)
    assert cmd.default_config_dir() == tmp_path / ".config" / "wireshark"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert cmd.default_config_dir() == tmp_path / "xdg" / "wireshark"
    assert cmd.wireshark_folders().config == tmp_path / "xdg" / "wireshark"  # tshark agrees
    monkeypatch.setenv("WIRESHARK_CONFIG_DIR", str(tmp_path / "wcd"))
    assert cmd.default_config_dir() == tmp_path / "wcd"
    assert cmd.wireshark_folders().config == tmp_path / "wcd"


def test_install_reports_an_unwritable_folder(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert main(["wireshark", "install", "--dir", str(blocker / "plugins")]) == 1
    assert "cannot install" in capsys.readouterr().err


def test_no_action_prints_usage(capsys):
    assert main(["wireshark"]) == 2
    assert "install" in capsys.readouterr().err


# --------------------------------------------------------------------------- loaded twice


def test_installed_copy_and_lua_script_keep_one_uet_protocol(tmp_path, monkeypatch, capsys):
    """Issue 19 item 13: as root, tshark 4.0 loads the installed copy; the documented
    ``-X lua_script:$(uet wireshark path)`` then loaded a second copy registered as
    ``uetlua`` and ``uet.pds.flags.retx == 1`` on rud_loss matched 0 frames instead of 12.
    Now install says whether tshark loads the copy, and a second copy changes nothing."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    assert main(["wireshark", "install"]) == 0
    out = capsys.readouterr().out
    installed = home / ".local" / "lib" / "wireshark" / "plugins" / PLUGIN_NAME
    assert installed.is_file()
    assert "tshark loads it at start-up (tshark -G plugins lists it)" in out
    assert "will not be loaded automatically" not in out
    rud = CAPTURES / "rud_loss.pcapng"
    flt = "uet.pds.flags.retx == 1"
    assert _tshark_count(rud, flt, home=home) == (12, "")  # the installed copy alone
    assert _tshark_count(rud, flt, script=plugin_path(), home=home) == (12, "")  # both
    assert _tshark_count(rud, flt, script=installed, home=home) == (12, "")  # same file
    protocols = subprocess.run([tshark_binary(), "-G", "protocols", "-X",
                                f"lua_script:{plugin_path()}"], capture_output=True,
                               text=True, timeout=60, env=tshark_env(home)).stdout
    names = [line.split("\t")[2] for line in protocols.splitlines() if "\t" in line]
    assert names.count("uet") == 1 and "uetlua" not in names and "uet.diff" in names
    # no installed copy: -X lua_script is how it loads
    empty = tmp_path / "empty"
    empty.mkdir()
    assert _tshark_count(rud, flt, script=plugin_path(), home=empty) == (12, "")
    # an installed copy that differs from the one given with -X (a stale install): the
    # first stays, and tshark says so in one clear line
    installed.write_text(installed.read_text() + "-- an older copy\n")
    n, err = _tshark_count(rud, flt, script=plugin_path(), home=home)
    assert n == 12
    (line,) = err.splitlines()
    assert f"uet.lua: {plugin_path()} was not loaded: another copy of the UET dissector" in line
    assert str(installed) in line and "stays in use" in line
