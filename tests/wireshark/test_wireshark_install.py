"""``uet wireshark install|path`` and where the Lua file lives."""

from __future__ import annotations

from pathlib import Path

from uet.cli import main
from uet.commands import wireshark as cmd
from uet.wireshark import PLUGIN_NAME, plugin_path, plugin_text, plugin_version

ROOT = Path(__file__).resolve().parents[2]


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


def test_install_copies_into_the_given_folder(tmp_path, capsys):
    target = tmp_path / "deep" / "plugins"
    assert main(["wireshark", "install", "--dir", str(target)]) == 0
    out = capsys.readouterr().out
    installed = target / PLUGIN_NAME
    assert installed.read_bytes() == plugin_path().read_bytes()
    assert str(installed) in out
    assert f"-X lua_script:{installed}" in out
    assert "root" in out
    # installing again overwrites, and replaces a symlink instead of writing through it
    other = tmp_path / "other.lua"
    other.write_text("-- someone else's file\n")
    installed.unlink()
    installed.symlink_to(other)
    assert main(["wireshark", "install", "--dir", str(target)]) == 0
    assert not installed.is_symlink()
    assert other.read_text() == "-- someone else's file\n"
    assert installed.read_bytes() == plugin_path().read_bytes()


def test_install_defaults_to_the_personal_plugin_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setattr(cmd.sys, "platform", "linux")
    assert cmd.default_plugin_dir() == tmp_path / ".local" / "lib" / "wireshark" / "plugins"
    assert main(["wireshark", "install"]) == 0
    assert (tmp_path / ".local" / "lib" / "wireshark" / "plugins" / PLUGIN_NAME).is_file()


def test_install_reports_an_unwritable_folder(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert main(["wireshark", "install", "--dir", str(blocker / "plugins")]) == 1
    assert "cannot install" in capsys.readouterr().err


def test_no_action_prints_usage(capsys):
    assert main(["wireshark"]) == 2
    assert "install" in capsys.readouterr().err
