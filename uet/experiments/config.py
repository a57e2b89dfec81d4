"""Experiment files: load TOML, apply ``--set`` overrides, validate against the schema.

``load_config(path=None, sets=())`` returns the validated experiment as plain data: the same
nested tables as the TOML file with every default filled in, sizes as integers, plus a
``source`` table (``file``, ``overrides``) saying where it came from. Anything wrong raises
:class:`ConfigError`, whose message names the key path (``impairments[0].loss``), where it
was set (``file.toml, line 12`` or ``--set traffic.size=abc``) and the allowed values.
tomllib reports no positions, so :func:`find_line` finds a key's line by scanning the text
for the key within its table.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import os
import re
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from uet.errors import ConfigError as UetConfigError
from uet.experiments.schema import (
    SECTIONS,
    TABLES,
    Key,
    Table,
    parse_size,
)
from uet.experiments.validated import host_count, resolve_path

PathT = tuple[str | int, ...]
DEFAULT_NAME = "default.toml"


class ConfigError(UetConfigError):
    """A bad experiment key or value: names the key path, where it was set, what is allowed."""

    def __init__(self, path: str, problem: str, *, where: str = "", allowed: str = "",
                 line: int | None = None) -> None:
        self.path = path
        self.problem = problem
        self.where = where
        self.allowed = allowed
        self.line = line
        msg = f"{where}: {path}: {problem}" if where else f"{path}: {problem}"
        if allowed:
            msg += f"; allowed: {allowed}"
        super().__init__(msg)


def format_path(path: PathT) -> str:
    """``("impairments", 0, "loss")`` -> ``"impairments[0].loss"``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + part
    return out or "<top>"


# ----------------------------------------------------------------------------- locating

def _strip_comment(line: str) -> str:
    quote = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
            elif ch == "\\" and quote == '"':
                continue
        elif ch in "\"'":
            quote = ch
        elif ch == "#":
            return line[:i]
    return line


def _key_parts(text: str) -> list[str]:
    return [p.strip().strip("\"'") for p in text.split(".")]


_HEADER_ARRAY = re.compile(r"\s*\[\[\s*([^\[\]]+?)\s*\]\]\s*$")
_HEADER = re.compile(r"\s*\[\s*([^\[\]]+?)\s*\]\s*$")
_ASSIGN = re.compile(r"\s*((?:[A-Za-z0-9_\-]+|\"[^\"]*\"|'[^']*')"
                     r"(?:\s*\.\s*(?:[A-Za-z0-9_\-]+|\"[^\"]*\"|'[^']*'))*)\s*=(.*)$")
_INLINE_KEY = re.compile(r"[{,]\s*([A-Za-z0-9_\-]+)\s*=")


def line_map(text: str) -> dict[PathT, int]:
    """Every table and key path of a TOML text -> its (first) line number, 1-based."""
    where: dict[PathT, int] = {}
    arrays: dict[PathT, int] = {}  # array-of-tables path -> index of its last element
    current: PathT = ()

    def resolve(parts: list[str]) -> PathT:
        out: list[str | int] = []
        for p in parts:
            out.append(p)
            if tuple(out) in arrays:
                out.append(arrays[tuple(out)])
        return tuple(out)

    for lineno, raw in enumerate(text.splitlines(), 1):
        line = _strip_comment(raw)
        m = _HEADER_ARRAY.match(line)
        if m:
            parts = _key_parts(m.group(1))
            base = resolve(parts[:-1]) + (parts[-1],)
            arrays[base] = arrays.get(base, -1) + 1
            current = base + (arrays[base],)
            where.setdefault(current, lineno)
            where.setdefault(base, lineno)
            continue
        m = _HEADER.match(line)
        if m:
            current = resolve(_key_parts(m.group(1)))
            where.setdefault(current, lineno)
            continue
        m = _ASSIGN.match(line)
        if m:
            key = current + tuple(_key_parts(m.group(1)))
            where.setdefault(key, lineno)
            value = m.group(2)
            if "{" in value:
                for km in _INLINE_KEY.finditer(value):
                    where.setdefault(key + (km.group(1),), lineno)
    return where


def find_line(text: str, path: PathT) -> int | None:
    """Line of ``path`` in ``text``, or of its nearest enclosing key/table; None if absent."""
    where = line_map(text)
    for n in range(len(path), 0, -1):
        if path[:n] in where:
            return where[path[:n]]
    return None


@dataclass
class Source:
    """Where the raw config came from: file name, its text, and ``--set``/``--sweep`` edits."""

    name: str
    text: str | None = None
    overrides: list[tuple[PathT, str]] = field(default_factory=list)

    def where(self, path: PathT) -> tuple[str, int | None]:
        """``("file, line N", N)`` or ``("--set ...", None)`` for an error at ``path``."""
        for opath, label in reversed(self.overrides):
            if path[:len(opath)] == opath:  # the override set this key or a parent
                return label, None
        exact = line_map(self.text).get(path) if self.text is not None else None
        if exact is None:
            for opath, label in reversed(self.overrides):
                if opath[:len(path)] == path:  # the override made this key what it is
                    return label, None
        if self.text is None:
            return self.name, None
        line = exact or find_line(self.text, path)
        return (f"{self.name}, line {line}" if line else self.name), line

    def overridden(self, path: PathT) -> bool:
        """True if a ``--set``/``--sweep`` set ``path`` (or a table holding it)."""
        return any(path[:len(opath)] == opath for opath, _ in self.overrides)

    def error(self, path: PathT, problem: str, allowed: str = "") -> ConfigError:
        where, line = self.where(path)
        return ConfigError(format_path(path), problem, where=where, allowed=allowed,
                           line=line)


# ----------------------------------------------------------------------------- --set

_PART = re.compile(r"([A-Za-z0-9_\-]+)((?:\[\d+\])*)")


def parse_key_path(text: str) -> PathT:
    """``"impairments[0].loss"`` or ``"impairments.0.loss"`` -> ``("impairments", 0, "loss")``."""
    out: list[str | int] = []
    for piece in text.strip().split("."):
        m = _PART.fullmatch(piece.strip())
        if not m:
            raise ConfigError(text, "not a key path", allowed="dotted keys such as "
                              "traffic.size or impairments[0].loss")
        name, idx = m.groups()
        out.append(int(name) if name.isdigit() else name)
        out.extend(int(i) for i in re.findall(r"\d+", idx))
    if not out or isinstance(out[0], int):
        raise ConfigError(text, "not a key path", allowed="dotted keys such as traffic.size")
    return tuple(out)


def parse_value(text: str) -> Any:
    """A TOML literal (``3``, ``0.1``, ``true``, ``[1, 2]``, ``"x"``) or else the raw string."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def parse_assignment(expr: str) -> tuple[PathT, Any]:
    """``"traffic.size=2MiB"`` -> ``(("traffic", "size"), "2MiB")``."""
    key, sep, value = expr.partition("=")
    if not sep:
        raise ConfigError(expr, "expected key.path=value", where=f"--set {expr}")
    path = parse_key_path(key)
    parsed = parse_value(value.strip())
    spec = key_spec(path)
    if spec is not None and spec.type in ("str", "enum") and not isinstance(parsed, str):
        parsed = value.strip()
    return path, parsed


def key_spec(path: PathT) -> Key | None:
    """The schema entry of a key path (None if the path names no known key)."""
    names = [p for p in path if isinstance(p, str)]
    for split in range(len(names) - 1, 0, -1):
        table = TABLES.get(".".join(names[:split]))
        if table is not None and split == len(names) - 1:
            return table.keys.get(names[-1])
    return None


def apply_override(raw: dict[str, Any], path: PathT, value: Any, label: str) -> None:
    """Set ``path`` in the raw (parsed TOML) document, creating tables on the way."""
    node: Any = raw
    for i, part in enumerate(path[:-1]):
        nxt = path[i + 1]
        if isinstance(part, int):
            if not isinstance(node, list) or part > len(node):
                raise ConfigError(format_path(path), f"no element {part} in "
                                  f"{format_path(path[:i])}", where=label)
            if part == len(node):
                node.append({})
            node = node[part]
            continue
        if not isinstance(node, dict):
            raise ConfigError(format_path(path), f"{format_path(path[:i])} is not a table",
                              where=label)
        if part not in node:
            node[part] = [] if isinstance(nxt, int) else {}
        node = node[part]
    last = path[-1]
    if isinstance(last, int):
        if not isinstance(node, list) or last > len(node):
            raise ConfigError(format_path(path), "no such list element", where=label)
        if last == len(node):
            node.append(value)
        else:
            node[last] = value
    elif isinstance(node, dict):
        node[last] = value
    else:
        raise ConfigError(format_path(path), f"{format_path(path[:-1])} is not a table",
                          where=label)


# ----------------------------------------------------------------------------- loading

def default_path() -> Path:
    """The built-in default experiment (package data)."""
    return Path(str(resources.files("uet.experiments").joinpath(DEFAULT_NAME)))


def read_raw(path: str | Path | None = None) -> tuple[dict[str, Any], Source]:
    """Parse an experiment file (None: the built-in default) without validating it."""
    p = default_path() if path is None else Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(str(p), f"cannot read: {exc.strerror}") from None
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(str(p), f"not valid TOML: {exc}") from None
    return raw, Source(str(p), text)


def load_config(path: str | Path | None = None, sets: Sequence[str] = ()) -> dict[str, Any]:
    """Read, override (``--set key.path=value`` strings) and validate an experiment."""
    raw, source = read_raw(path)
    for expr in sets:
        key, value = parse_assignment(expr)
        label = f"--set {expr}"
        apply_override(raw, key, value, label)
        source.overrides.append((key, label))
    return validate(raw, source)


def parse_config(text: str, name: str = "<string>", sets: Sequence[str] = ()
                 ) -> dict[str, Any]:
    """Like :func:`load_config` for TOML text (relative paths resolve from the cwd)."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(name, f"not valid TOML: {exc}") from None
    source = Source(name, text)
    for expr in sets:
        key, value = parse_assignment(expr)
        label = f"--set {expr}"
        apply_override(raw, key, value, label)
        source.overrides.append((key, label))
    return validate(raw, source)


# ----------------------------------------------------------------------------- validation

def validate(raw: dict[str, Any], source: Source | None = None) -> dict[str, Any]:
    """Check every key and value; return the config with defaults filled in."""
    src = source or Source("<config>")
    out: dict[str, Any] = {}
    for name in raw:
        if name not in SECTIONS and name != "source":
            raise src.error((name,), "unknown section",
                            allowed=", ".join(f"[{s}]" for s in SECTIONS))
    for name in SECTIONS:
        table = TABLES[name]
        value = raw.get(name)
        if table.optional and value is None:
            continue
        if table.array:
            items = [] if value is None else value
            if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
                raise src.error((name,), "must be an array of tables",
                                allowed=f"[[{name}]] tables")
            out[name] = [_check_table(table, item, (name, i), src)
                         for i, item in enumerate(items)]
        else:
            out[name] = _check_table(table, {} if value is None else value, (name,), src)
    _resolve_paths(out, src)
    prior = raw.get("source") if isinstance(raw.get("source"), dict) else {}
    out["source"] = {
        "file": prior.get("file", src.name),
        "overrides": list(prior.get("overrides", []))
        + [label for _, label in src.overrides],
    }
    _cross_check(out, src)
    return out


#: keys an experiment file cannot have although a Python API has them: why, and where
#: to go instead (the one-line error says both)
NOT_IN_FILES: dict[PathT, tuple[str, str]] = {
    ("topology", "external"): (
        "external hosts (another process as a host) are not in experiment files: uet run "
        "starts every flow from its own end points and audits it at the receiving one",
        "the Python API: uet.runtime.live.LiveFabric(topology, externals={host: "
        "'udp:IP:PORT'}) (docs/fabric.md, External hosts)"),
}


def _check_table(table: Table, data: Any, path: PathT, src: Source) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise src.error(path, "must be a table", allowed=f"keys of [{table.name}]")
    extra_fields = _open_fields(table.open) if table.open else {}
    for name in data:
        if path + (name,) in NOT_IN_FILES:
            why, instead = NOT_IN_FILES[path + (name,)]
            raise src.error(path + (name,), why, allowed=instead)
        if name not in table.keys and name not in extra_fields:
            allowed = ", ".join(list(table.keys) + sorted(extra_fields))
            raise src.error(path + (name,), f"unknown key in [{table.name}]",
                            allowed=allowed)
    out: dict[str, Any] = {}
    for name, key in table.keys.items():
        applies = True
        if key.when is not None:
            sib, values = key.when
            applies = out.get(sib) in values
        if name in data and data[name] is not None:
            if not applies:
                sib, values = key.when  # type: ignore[misc]
                if src.overridden(path + (sib,)) and not src.overridden(path + (name,)):
                    continue  # --set/--sweep changed kind/pattern: drop the file's key
                raise src.error(path + (name,),
                                f"applies only when {table.name}.{sib} is "
                                f"{' or '.join(values)} (it is {out.get(sib)!r})")
            out[name] = _check_value(key, data[name], path + (name,), src)
        elif applies:
            out[name] = _default(key, path + (name,), src)
    for name in extra_fields:
        if name in data:
            out[name] = copy.deepcopy(data[name])
    return out


def _default(key: Key, path: PathT, src: Source) -> Any:
    if key.type == "table" and key.default is not None:
        return _check_table(TABLES[key.table or ""], dict(key.default), path, src)
    return copy.deepcopy(key.default)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _in_range(key: Key, v: float) -> bool:
    return (key.lo is None or v >= key.lo) and (key.hi is None or v <= key.hi)


def _check_value(key: Key, v: Any, path: PathT, src: Source) -> Any:
    def bad(problem: str = "") -> ConfigError:
        return src.error(path, problem or f"bad value {v!r}", allowed=key.allowed())

    t = key.type
    if t == "int":
        if not _is_int(v) or not _in_range(key, v):
            raise bad()
        if key.power_of_two and v & (v - 1):
            raise bad()
        return v
    if t == "float":
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) \
                or not _in_range(key, v):
            raise bad()
        return float(v)
    if t == "bool":
        if not isinstance(v, bool):
            raise bad()
        return v
    if t == "str":
        if not isinstance(v, str) or (key.pattern and not re.fullmatch(key.pattern, v)):
            raise bad()
        return v
    if t == "enum":
        if v not in key.choices:
            raise bad()
        return v
    if t == "size":
        try:
            n = parse_size(v)
        except ValueError:
            raise bad() from None
        if not _in_range(key, n):
            raise bad()
        return n
    if t == "int_list":
        if not isinstance(v, list):
            raise bad()
        for i, item in enumerate(v):
            if not _is_int(item) or not _in_range(key, item):
                raise src.error(path + (i,), f"bad value {item!r}", allowed=key.allowed())
        return list(v)
    if t == "str_list":
        if not isinstance(v, list):
            raise bad()
        for i, item in enumerate(v):
            if not isinstance(item, str) or (key.pattern
                                             and not re.fullmatch(key.pattern, item)):
                raise src.error(path + (i,), f"bad value {item!r}", allowed=key.allowed())
        return list(v)
    if t == "pairs":
        if not isinstance(v, list):
            raise bad()
        for i, item in enumerate(v):
            if not (isinstance(item, list) and len(item) == 2
                    and all(_is_int(x) and x >= 0 for x in item)):
                raise src.error(path + (i,), f"bad pair {item!r}", allowed=key.allowed())
        return [list(p) for p in v]
    if t == "intervals":
        if not isinstance(v, list):
            raise bad()
        out = []
        for i, item in enumerate(v):
            ok = (isinstance(item, list) and len(item) in (1, 2)
                  and all(_is_int(x) and x >= 0 for x in item)
                  and (len(item) == 1 or item[1] > item[0]))
            if not ok:
                raise src.error(path + (i,), f"bad interval {item!r}",
                                allowed=key.allowed() + " with t_up_ps > t_down_ps")
            out.append(list(item))
        return out
    if t == "globs":
        items = [v] if isinstance(v, str) else v
        if not isinstance(items, list) or not items or not all(
                isinstance(x, str) and x for x in items):
            raise bad()
        return list(items)
    if t == "tss":
        return _check_tss(v, path, src)
    if t == "table":
        return _check_table(TABLES[key.table or ""], v, path, src)
    if t == "weights":
        if not isinstance(v, dict):
            raise bad()
        out_w: dict[str, float] = {}
        for name, w in v.items():
            if name not in key.choices:
                raise src.error(path + (name,), f"unknown operation {name!r}",
                                allowed=", ".join(key.choices))
            if isinstance(w, bool) or not isinstance(w, int | float) or not math.isfinite(w) \
                    or w < 0:
                raise src.error(path + (name,), f"bad weight {w!r}",
                                allowed="a number >= 0")
            out_w[name] = float(w)
        if out_w and not any(out_w.values()):
            raise src.error(path, "every weight is 0", allowed="at least one weight > 0")
        return out_w
    if t == "bool_or_table":
        if isinstance(v, bool):
            return _check_table(TABLES[key.table or ""], {}, path, src) if v else False
        if isinstance(v, dict):
            return _check_table(TABLES[key.table or ""], v, path, src)
        raise bad()
    raise AssertionError(t)  # pragma: no cover


def _check_tss(v: Any, path: PathT, src: Source) -> dict[str, Any]:
    """``transport.tss``: checked by the TSS's own configuration (its message names the
    key); a relative ``key_file`` is resolved like the other paths."""
    from uet.tss.config import TssConfig, TssConfigError

    if not isinstance(v, dict):
        raise src.error(path, f"bad value {v!r}", allowed=TABLES["transport"].keys[
            "tss"].allowed())
    out = copy.deepcopy(v)
    kf = out.get("key_file")
    if isinstance(kf, str) and kf and not Path(kf).expanduser().is_absolute():
        here = Path(src.name)
        file_dir = here.parent if src.text is not None and here.is_file() else None
        base = Path.cwd() if src.overridden(path + ("key_file",)) or file_dir is None \
            else file_dir
        out["key_file"] = os.path.abspath(base / Path(kf).expanduser())

    def fix(d: Any) -> Any:  # ssi = "auto": per host, checked here with a stand-in
        return {**d, "ssi": 1} if isinstance(d, dict) and d.get("ssi") == "auto" else d

    probe = fix(dict(out))
    if isinstance(probe.get("domains"), list):
        probe["domains"] = [fix(x) for x in probe["domains"]]
    try:
        TssConfig.from_dict(probe)
    except TssConfigError as exc:
        raise src.error(path, str(exc)) from None
    return out


def _open_fields(kind: str) -> dict[str, Any]:
    """Field names of the dataclass behind an open table (CmsConfig / PdsConfig)."""
    if kind == "cms":
        from uet.cms.api import CmsConfig

        skip = {"ev_selector", "ev_count", "algorithm", "extra"}
        return {f.name: f.type for f in dataclasses.fields(CmsConfig) if f.name not in skip}
    if kind == "pds":
        from uet.pds.config import PdsConfig

        return {f.name: f.type for f in dataclasses.fields(PdsConfig)}
    if kind == "roce":
        from uet.roce.config import RoceConfig

        return {f.name: f.type for f in dataclasses.fields(RoceConfig)}
    raise AssertionError(kind)  # pragma: no cover


# ----------------------------------------------------------------------------- cross checks

#: keys holding a file path: resolved once, at validation, to an absolute path
PATH_KEYS: tuple[PathT, ...] = (("transport", "profile"), ("traffic", "file"))


def _resolve_paths(cfg: dict[str, Any], src: Source) -> None:
    """Make the relative paths of :data:`PATH_KEYS` absolute: a path written in the
    experiment file is relative to that file's folder; one given with ``--set`` or
    ``--sweep`` (or in a config that is no file) is relative to the working directory.
    A built-in profile name stays a name."""
    from uet.profiles import BUILTIN_PROFILES

    here = Path(src.name)
    file_dir = here.parent if src.text is not None and here.is_file() else None
    for path in PATH_KEYS:
        table = cfg.get(path[0]) or {}
        value = table.get(path[1])
        if not isinstance(value, str) or not value:
            continue
        if path == ("transport", "profile") and value in BUILTIN_PROFILES:
            continue
        p = Path(value).expanduser()
        if p.is_absolute():
            continue
        base = Path.cwd() if src.overridden(path) or file_dir is None else file_dir
        table[path[1]] = os.path.abspath(base / p)


def _cross_check(cfg: dict[str, Any], src: Source) -> None:
    topo = cfg["topology"]
    if topo["kind"] == "fat_tree" and topo["k"] % 2:
        raise src.error(("topology", "k"), f"bad value {topo['k']}",
                        allowed="an even integer in [2, 64]")
    if topo["ecn_kmin"] > topo["ecn_kmax"]:
        raise src.error(("topology", "ecn_kmin"), f"{topo['ecn_kmin']} > ecn_kmax "
                        f"{topo['ecn_kmax']}", allowed="ecn_kmin <= ecn_kmax")
    if isinstance(topo["pfc"], dict) and topo["pfc"]["xon"] > topo["pfc"]["xoff"]:
        raise src.error(("topology", "pfc", "xon"), "xon > xoff", allowed="xon <= xoff")
    for i, imp in enumerate(cfg["impairments"]):
        if imp["match"] is None and imp["class"] is None:
            raise src.error(("impairments", i), "selects no links",
                            allowed="a match pattern, a class, or both")
        if imp["rate_gbps"] is not None and imp["rate_factor"] is not None:
            raise src.error(("impairments", i, "rate_factor"),
                            "give rate_gbps or rate_factor, not both")
    _check_transport(cfg, src)
    _check_traffic(cfg, src)
    _check_victims(cfg, src)
    n = host_count(topo)
    for i, name in enumerate(cfg["capture"]["ifaces"]):
        if name.startswith("h") and int(name[1:]) >= n:
            raise src.error(("capture", "ifaces", i), f"no host {name}",
                            allowed=f"h0..h{n - 1}")


def _check_transport(cfg: dict[str, Any], src: Source) -> None:
    from uet.profiles import BUILTIN_PROFILES, ProfileConfigError, load_profile

    tr = cfg["transport"]
    name = tr["profile"]
    target = name if name in BUILTIN_PROFILES else str(resolve_path(cfg, name))
    try:
        profile = load_profile(target)
    except ProfileConfigError as exc:
        raise src.error(("transport", "profile"), str(exc),
                        allowed=", ".join(BUILTIN_PROFILES) + " or a profile file") from None
    modes = sorted(m.name for m in profile.modes)
    if tr["mode"] not in modes:
        raise src.error(("transport", "mode"), f"{tr['mode']} is not allowed by profile "
                        f"{profile.name}", allowed=", ".join(modes))
    if tr.get("encap") == "native-ip" and tr.get("ip_proto") in (6, 17):
        raise src.error(("transport", "ip_proto"), f"{tr['ip_proto']} is "
                        f"{'TCP' if tr['ip_proto'] == 6 else 'UDP'}",
                        allowed="an IP protocol number in [0, 255] other than 6 and 17 "
                        "(253 by default: RFC 3692 experimental)")
    if tr["mode"] == "UUD":
        raise src.error(("transport", "mode"), "UUD carries only single-packet datagrams "
                        "(DATAGRAM_SEND); experiment messages are RMA WRITEs",
                        allowed=", ".join(m for m in modes if m != "UUD"))
    # "profile" stands for the profile's own choice; resolve it here so that the run, its
    # results.json and every later step see the concrete value.
    if tr["cms"]["ev_selector"] == "profile":
        tr["cms"]["ev_selector"] = profile.cc_ev_selector
    if tr["cms"]["algorithm"] == "profile":
        tr["cms"]["algorithm"] = profile.cc_default
    algo = tr["cms"]["algorithm"]
    if algo != "none":
        missing = [a for a in algo.split("+") if a not in profile.cc_algorithms]
        if missing:
            raise src.error(("transport", "cms", "algorithm"), f"{algo} is not allowed by "
                            f"profile {profile.name}",
                            allowed="none, " + ", ".join(profile.cc_algorithms))
    cms_config(cfg, src)
    pds_config(cfg, src)
    roce_config(cfg, src)


_FIELD_IN_MSG = re.compile(r"^(?:cms|pds)\.(\w+)")


def cms_config(cfg: dict[str, Any], src: Source | None = None) -> Any:
    """The :class:`uet.cms.api.CmsConfig` of a validated experiment.

    ``link_rate_bps`` and ``base_rtt_ps`` come from the topology (host link rate and the
    unloaded RTT of the longest path) and ``trimming`` from ``topology.trimming`` unless
    ``[transport.cms]`` sets them.
    """
    from uet.cms.api import CmsConfig
    from uet.cms.factory import validate_config
    from uet.experiments.ideal import TopologyModel

    src = src or source_of(cfg)
    fields = dict(cfg["transport"]["cms"])
    model = TopologyModel.from_config(cfg["topology"])
    fields.setdefault("link_rate_bps", round(model.host_rate_bps))
    fields.setdefault("base_rtt_ps", model.base_rtt_ps())
    fields.setdefault("trimming", cfg["topology"]["trimming"])
    try:
        return validate_config(CmsConfig(**fields))
    except (TypeError, ValueError) as exc:
        key = _FIELD_IN_MSG.match(str(exc))
        path = ("transport", "cms") + ((key.group(1),) if key else ())
        raise src.error(path, str(exc)) from None


def pds_config(cfg: dict[str, Any], src: Source | None = None) -> Any:
    """The :class:`uet.pds.config.PdsConfig` of a validated experiment."""
    from uet.pds.config import PdsConfig

    src = src or source_of(cfg)
    try:
        return PdsConfig(**cfg["transport"]["pds"])
    except (TypeError, ValueError) as exc:
        key = _FIELD_IN_MSG.match(str(exc))
        path = ("transport", "pds") + ((key.group(1),) if key else ())
        raise src.error(path, str(exc)) from None


def roce_config(cfg: dict[str, Any], src: Source | None = None) -> Any:
    """The :class:`uet.roce.config.RoceConfig` of a validated experiment."""
    from uet.roce.config import RoceConfig, RoceConfigError

    src = src or source_of(cfg)
    try:
        return RoceConfig.from_dict(cfg["transport"]["roce"])
    except (RoceConfigError, TypeError) as exc:
        m = re.match(r"^roce\.([\w.]+)", str(exc))
        path = ("transport", "roce") + (tuple(m.group(1).split(".")) if m else ())
        raise src.error(path, str(exc)) from None


def _check_traffic(cfg: dict[str, Any], src: Source) -> None:
    from uet.experiments import ops
    from uet.experiments.traffic import participants

    ops.check(cfg, src)
    tr = cfg["traffic"]
    n = host_count(cfg["topology"])
    pattern = tr["pattern"]
    if pattern == "cm_file":
        _check_cm_file(cfg, src, n)
        return
    for i, h in enumerate(tr["hosts"]):
        if h >= n:
            raise src.error(("traffic", "hosts", i), f"no host {h}", allowed=f"0..{n - 1}")
    if len(set(tr["hosts"])) != len(tr["hosts"]):
        raise src.error(("traffic", "hosts"), "repeated hosts", allowed="distinct hosts")
    hosts = participants(tr, n)
    if len(hosts) < 2:
        raise src.error(("traffic", "hosts"), "fewer than 2 participating hosts",
                        allowed="at least 2 hosts")
    for key in ("src", "dst"):
        if key in tr and tr[key] != -1 and tr[key] not in hosts:
            raise src.error(("traffic", key), f"host {tr[key]} does not take part",
                            allowed=_hosts_text(hosts))
    if pattern == "single" and _resolve_dst(tr, hosts) == tr["src"]:
        raise src.error(("traffic", "dst"), "src and dst are the same host",
                        allowed="a host other than src")
    if pattern in ("incast", "outcast") and tr["degree"] > len(hosts) - 1:
        raise src.error(("traffic", "degree"), f"{tr['degree']} > {len(hosts) - 1} other "
                        "hosts", allowed=f"0..{len(hosts) - 1}")
    if pattern in ("allreduce_ring", "allreduce_halving_doubling") and tr["size"] < len(hosts):
        raise src.error(("traffic", "size"), f"{tr['size']} B is smaller than the "
                        f"{len(hosts)} chunks of a {len(hosts)}-rank {pattern}",
                        allowed=f"at least {len(hosts)} bytes (one per rank)")
    butterfly = pattern in ("allreduce_butterfly", "allreduce_halving_doubling")
    if butterfly and len(hosts) & (len(hosts) - 1):
        raise src.error(("traffic", "hosts"), f"{len(hosts)} ranks",
                        allowed=f"a power-of-two number of hosts for {pattern}")
    if pattern == "permutation" and tr["pairs"]:
        srcs = [p[0] for p in tr["pairs"]]
        dsts = [p[1] for p in tr["pairs"]]
        for i, (s, d) in enumerate(tr["pairs"]):
            if s >= n or d >= n or s == d:
                raise src.error(("traffic", "pairs", i), f"bad pair [{s}, {d}]",
                                allowed=f"two different hosts in 0..{n - 1}")
        if len(set(srcs)) != len(srcs) or len(set(dsts)) != len(dsts):
            raise src.error(("traffic", "pairs"), "not a permutation",
                            allowed="every host sends at most once and receives at most once")


def _check_victims(cfg: dict[str, Any], src: Source) -> None:
    victims = cfg["traffic"]["victims"]
    if not victims:
        return
    from uet.experiments.traffic import build_workload

    ids = {f.id for f in build_workload(cfg).flows}
    for i, v in enumerate(victims):
        if v not in ids:
            raise src.error(("traffic", "victims", i), f"no flow {v} in the workload",
                            allowed=f"flow ids {min(ids)}..{max(ids)}" if ids else "none")


def _resolve_dst(tr: dict[str, Any], hosts: list[int]) -> int:
    return hosts[-1] if tr["dst"] == -1 else tr["dst"]


def _hosts_text(hosts: list[int]) -> str:
    if hosts == list(range(hosts[0], hosts[-1] + 1)):
        return f"{hosts[0]}..{hosts[-1]}"
    return ", ".join(map(str, hosts))


def _check_cm_file(cfg: dict[str, Any], src: Source, n: int) -> None:
    from uet.experiments.htsim_cm import CmFormatError, load_cm

    rel = cfg["traffic"]["file"]
    if not rel:
        raise src.error(("traffic", "file"), "missing", allowed="a connection-matrix file")
    path = resolve_path(cfg, rel)
    try:
        cm = load_cm(path)
    except OSError as exc:
        raise src.error(("traffic", "file"), f"cannot read {path}: {exc.strerror}") from None
    except CmFormatError as exc:
        raise src.error(("traffic", "file"), str(exc)) from None
    if cm.nodes > n:
        raise src.error(("traffic", "file"), f"{path.name} has Nodes {cm.nodes} but the "
                        f"topology has {n} hosts", allowed=f"Nodes <= {n}")


def source_of(cfg: dict[str, Any]) -> Source:
    """A :class:`Source` for errors found after validation (runner, impairment plan)."""
    info = cfg.get("source", {})
    name = info.get("file", "<config>")
    text = None
    p = Path(name)
    if p.is_file():
        try:
            text = p.read_text(encoding="utf-8")
        except OSError:
            text = None
    src = Source(name, text)
    for label in info.get("overrides", []):
        expr = label.split(" ", 1)[1] if " " in label else label
        try:
            src.overrides.append((parse_key_path(expr.partition("=")[0]), label))
        except ConfigError:
            continue
    return src


def error_at(cfg: dict[str, Any], path: PathT, problem: str, allowed: str = ""
             ) -> ConfigError:
    """A :class:`ConfigError` for ``path`` of a validated config, located in its source."""
    return source_of(cfg).error(path, problem, allowed)


def iter_keys(cfg: dict[str, Any]) -> Iterable[tuple[str, Any]]:
    """``("traffic.size", 1048576)`` for every scalar/list key of a config (reports)."""
    def walk(prefix: str, node: Any) -> Iterable[tuple[str, Any]]:
        if isinstance(node, dict):
            for k, v in node.items():
                yield from walk(f"{prefix}.{k}" if prefix else k, v)
        else:
            yield prefix, node

    for section in SECTIONS:
        yield from walk(section, cfg.get(section))


def fabric_topology(cfg: dict[str, Any]) -> dict[str, Any]:
    """The parameter dict for :func:`uet.fabric.topology.build` (impairments applied apart,
    see :func:`uet.experiments.impairments.plan`)."""
    out = {k: v for k, v in cfg["topology"].items() if v is not None}
    if isinstance(out.get("pfc"), dict):
        pfc = {k: v for k, v in out["pfc"].items() if v is not None}
        out["pfc"] = pfc
    return out
