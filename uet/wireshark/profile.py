"""The Wireshark configuration profile ``uet``: coloring rules, preferences and columns.

``uet wireshark install`` writes it into ``<personal configuration>/profiles/uet/``
(choose it in Wireshark's status bar, or ``tshark -C uet``); ``uet wireshark colors``
prints the coloring rules alone, in Wireshark's ``colorfilters`` format, for users who keep
their own profiles (*View > Coloring Rules > Import*).

Rules are tried in order and the first that matches colors the packet, so the most specific
come first: the marks of ``uet diff --write`` captures, malformed UET, NACKs by code
(grouped as the reference provider's ``uet_pds_nack_action()`` treats them: codes that
close the PDC, trims, loss and ordering, resource shortage, a new Start_PSN), trimmed
packets, retransmissions, PFC and PAUSE frames, ECN, then any UET packet. The rules of the
Wireshark installation (its global ``colorfilters``) follow ours, so other protocols keep
their usual colors.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["ColorRule", "COLOR_RULES", "COLUMNS", "PROFILE_NAME", "colorfilters_text",
           "preferences_text", "global_colorfilters"]

#: Name of the profile (``tshark -C uet``).
PROFILE_NAME = "uet"


@dataclass(frozen=True, slots=True)
class ColorRule:
    """A coloring rule: its name, display filter, background and foreground (#rrggbb)."""

    name: str
    filter: str
    background: str
    foreground: str = "#000000"

    def line(self) -> str:
        """The rule in Wireshark's ``colorfilters`` syntax (16-bit color components)."""
        return f"@{self.name}@{self.filter}@{_rgb16(self.background)}{_rgb16(self.foreground)}"


def _rgb16(color: str) -> str:
    r, g, b = (int(color[i:i + 2], 16) * 257 for i in (1, 3, 5))
    return f"[{r},{g},{b}]"


_XOFF = " || ".join(f"macc.cbfc.pause_time.c{c} > 0" for c in range(8))

COLOR_RULES: tuple[ColorRule, ...] = (
    # diff marks (uet diff --write): they only exist in diff captures
    ColorRule("UET diff: only in A", 'uet.diff.kind == "only_in_a"', "#ffb8b8"),
    ColorRule("UET diff: only in B", 'uet.diff.kind == "only_in_b"', "#b8ecb8"),
    ColorRule("UET diff: moved to another path", 'uet.diff.kind == "moved"', "#c4d8ff"),
    ColorRule("UET diff: changed", 'uet.diff.kind == "changed"', "#fff0a0"),
    # malformed UET
    ColorRule("UET malformed", "uet && _ws.expert.severity >= error", "#121212", "#ff6060"),
    # NACKs by code
    ColorRule("UET NACK closing or fatal",
              "uet.pds.nack.code in {0x0e, 0x0f, 0x10, 0x11, 0x13, 0x15, 0x16, 0x19, 0xff}",
              "#a00000", "#ffffff"),
    ColorRule("UET NACK trimmed", "uet.pds.nack.code in {0x01, 0x02, 0x03}", "#ffd0a0"),
    ColorRule("UET NACK loss or order",
              "uet.pds.nack.code in {0x0b, 0x0d, 0x12, 0x1a}", "#ffa860"),
    ColorRule("UET NACK no resource",
              "uet.pds.nack.code in {0x04..0x0a, 0x14, 0x18}", "#e8c850"),
    ColorRule("UET NACK new start PSN", "uet.pds.nack.code == 0x17", "#e0c8ff"),
    ColorRule("UET NACK other", "uet.pds.type in {10, 12}", "#ff9090"),
    # trimmed packets, retransmissions
    ColorRule("UET trimmed", "uet.trimmed", "#c8a0f0"),
    ColorRule("UET retransmission",
              "uet.pds.flags.retx == 1 && uet.pds.type in {2, 3, 4, 11, 13, 14}",
              "#2c2c2c", "#ffc850"),
    # lossless fabric
    ColorRule("PFC pause (XOFF)", f"macc.opcode == 0x0101 && ({_XOFF})", "#4040b0", "#ffffff"),
    ColorRule("PAUSE (XOFF)", "macc.opcode == 0x0001 && macc.pause_time > 0", "#4040b0",
              "#ffffff"),
    ColorRule("PFC or PAUSE resume (XON)", "macc.opcode in {0x0001, 0x0101}", "#b0b0ff"),
    # congestion
    ColorRule("UET ECN (CE mark or echo)",
              "uet && (ip.dsfield.ecn == 3 || ipv6.tclass.ecn == 3 || uet.pds.flags.m == 1)",
              "#fff4c8"),
    ColorRule("UET", "uet", "#e4f0fc"),
)

#: Columns of the profile: the capture interface (A:h0 / B:h0 in diff captures), the PDC
#: and the diff mark next to Wireshark's usual ones.
COLUMNS: tuple[tuple[str, str], ...] = (
    ("No.", "%m"), ("Time", "%t"), ("Interface", "%Cus:frame.interface_name:0:R"),
    ("Source", "%s"), ("Destination", "%d"), ("Protocol", "%p"), ("Length", "%L"),
    ("PDC", "%Cus:uet.pdc:0:R"), ("Diff", "%Cus:uet.diff.kind:0:R"), ("Info", "%i"),
)


def colorfilters_text(defaults: str | None = None) -> str:
    """The profile's ``colorfilters`` file: our rules, then ``defaults`` (the text of a
    Wireshark ``colorfilters`` file, comments dropped) when given."""
    lines = ["# UET coloring rules (uet wireshark colors); first match wins."]
    lines += [r.line() for r in COLOR_RULES]
    if defaults:
        lines.append("# Wireshark's default rules")
        lines += [ln for ln in defaults.splitlines() if ln.strip() and not ln.startswith("#")]
    return "\n".join(lines) + "\n"


def preferences_text() -> str:
    """The profile's ``preferences`` file: UET's UDP heuristic first (sprayed EVs are any
    source port) and the columns."""
    cols = ", ".join(f'"{title}", "{fmt}"' for title, fmt in COLUMNS)
    return ("# Profile \"uet\", written by uet wireshark install.\n"
            "# Sprayed UET uses every UDP source port: let the UET heuristic run first.\n"
            "udp.try_heuristic_first: TRUE\n"
            f"gui.column.format: {cols}\n")


def global_colorfilters(global_dir: Path | None) -> str | None:
    """The default coloring rules of the Wireshark installation whose global configuration
    folder is ``global_dir`` (``tshark -G folders``), if found."""
    for base in ([global_dir] if global_dir else []) + [Path("/usr/share/wireshark")]:
        try:
            return (base / "colorfilters").read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
    return None
