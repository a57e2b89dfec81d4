"""The catalogue: conformance cases with an ID, the reference section, and the rule.

A case is a function ``fn(peer)`` registered with :func:`case`::

    @case("PDS-EST-003", "3.2", "a non-SYN request naming an unknown DPDCID is answered "
          "NACK INV_DPDCID and not executed")
    def unknown_dpdcid(peer): ...

Requirements a case may declare (they decide where it can run, docs/conformance.md):

* ``profile``: the device must speak this profile (profile gating cases);
* ``config``: extra PDS settings (a table size, a start-PSN mode) or ``profile_changes``:
  a variant of the profile; the built-in end point is configured per case in process;
  over UDP the case runs against a device started with that configuration and named so
  (``--dut udp:HOST:PORT+key=value``), and is not run when there is none;
* ``virtual``: the rule is about time at a resolution wall-clock UDP cannot show.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: the modules of the catalogue, in report order
AREAS: tuple[tuple[str, str], ...] = (
    ("establishment", "PDC establishment and SYN rules (ref 3.1, 3.2)"),
    ("window", "PSN windows and wraparound (ref 3.4, 3.5)"),
    ("acks", "ACK and SACK contents, coalescing, the ACK timer (ref 2.3, 2.4, 3.6)"),
    ("nacks", "NACK codes the end point generates (ref 2.6)"),
    ("reactions", "reactions to received NACKs, retransmission (ref 2.6, 3.8)"),
    ("clear", "clear and guaranteed delivery (ref 3.7)"),
    ("control", "control packets (ref 2.7)"),
    ("close", "close and close request (ref 3.9)"),
    ("delivery", "duplicates, RUD vs ROD ordering, RUDI, UUD (ref 3.5, 3.10)"),
    ("ses_ops", "SES operations and their responses (ref 4)"),
    ("ses_codes", "SES return codes, job / key / index protection (ref 4.6)"),
    ("profiles", "profile gating (ref 5, docs/profiles.md)"),
    ("malformed", "malformed and unexpected packets (ref 2, 4, 9.1)"),
    ("tss", "transport security, secured PDCs and job isolation (ref 7, 3.2; docs/tss.md)"),
)


@dataclass(frozen=True)
class Case:
    """One conformance case."""

    id: str
    ref: str
    rule: str
    fn: Callable[[Any], None] = field(compare=False, repr=False)
    area: str = ""
    profile: str | None = None
    config: dict[str, Any] | None = None
    profile_changes: dict[str, Any] | None = None
    virtual: bool = False
    note: str = ""
    caps: tuple[str, ...] = ()
    #: a TSS case: the device serves the well-known secure domain (True), or a variant of
    #: it (a dict of domain keys: in process only)
    tss: bool | dict[str, Any] = False

    @property
    def needs_config(self) -> bool:
        return bool(self.config or self.profile_changes or isinstance(self.tss, dict))

    @property
    def extras(self) -> dict[str, Any]:
        """The configuration the device needs beyond the well-known setup: PdsConfig
        fields (``config``) and dotted profile keys (``profile_changes``)."""
        return {**(self.config or {}), **(self.profile_changes or {})}

    @property
    def udp_capable(self) -> bool:
        """Runs over UDP (against a device configured with :attr:`extras`, if any; a TSS
        case that configures its end point runs in process only: ``uet serve --tss``
        serves the well-known domain as it is)."""
        return not self.virtual and not (self.tss and self.needs_config)

    def config_text(self) -> str:
        """The extras as ``key=value`` items (JSON values), as a ``--dut`` spec writes
        them after ``+``."""
        return "+".join(f"{k}={json.dumps(v, separators=(',', ':'))}"
                        for k, v in self.extras.items())

    def limits(self) -> str:
        """Where the case cannot run, in words ("" when it runs everywhere)."""
        if self.virtual:
            return "in process only: needs virtual time"
        if self.tss and self.needs_config:
            tss = self.tss if isinstance(self.tss, dict) else {}
            what = ", ".join(f"{k}={v}" for k, v in {**self.extras, **{
                f"tss.{k}": v for k, v in tss.items()}}.items())
            return f"in process only: needs a configured end point ({what})"
        if self.needs_config:
            return (f"in process, and over UDP against a device configured with "
                    f"{self.config_text()}")
        return ""


def profile_caps(profile: Any) -> set[str]:
    """Capabilities a profile gives the cases: ``rudi``, ``uud``, ``tagging``,
    ``rendezvous``, ``deferrable``, ``tsend_atomic``, ``opt_non_matching``,
    ``float_atomics`` (SUM on FLOAT and DOUBLE), ``long_double`` (SUM on LONG_DOUBLE)."""
    from uet.wire.constants import DeliveryMode, FepCap, SesOpcode

    out = set()
    if DeliveryMode.RUDI in profile.modes:
        out.add("rudi")
    if DeliveryMode.UUD in profile.modes:
        out.add("uud")
    if profile.tag_matching != "none":
        out.add("tagging")
    ops = profile.operations
    if SesOpcode.RENDEZVOUS_SEND in ops:
        out.add("rendezvous")
    if SesOpcode.DEFERRABLE_SEND in ops:
        out.add("deferrable")
    if SesOpcode.TSEND_ATOMIC in ops:
        out.add("tsend_atomic")
    if profile.fep_cap & FepCap.OPT_NON_MATCHING:
        out.add("opt_non_matching")
    from uet.wire.constants import AtomicDatatype, AtomicOpcode

    dts = profile.atomic_datatypes
    if AtomicOpcode.SUM in profile.atomic_opcodes and {AtomicDatatype.FLOAT,
                                                       AtomicDatatype.DOUBLE} <= dts:
        out.add("float_atomics")
    if AtomicDatatype.LONG_DOUBLE in dts and AtomicOpcode.SUM in profile.atomic_opcodes:
        out.add("long_double")
    return out


_REGISTRY: dict[str, Case] = {}
_current_area = [""]


def case(case_id: str, ref: str, rule: str, *, profile: str | None = None,
         config: dict[str, Any] | None = None, profile_changes: dict[str, Any] | None = None,
         virtual: bool = False, note: str = "", caps: tuple[str, ...] = (),
         tss: bool | dict[str, Any] = False) -> Callable:
    """Register ``fn(peer)`` as the catalogue case ``case_id``. ``caps`` are capabilities
    the device's profile must have (:func:`profile_caps`); ``tss``: a case of a secured
    device (the well-known secure domain, or a variant of it)."""

    def register(fn: Callable[[Any], None]) -> Callable[[Any], None]:
        if case_id in _REGISTRY:
            raise ValueError(f"duplicate conformance case ID {case_id}")
        _REGISTRY[case_id] = Case(case_id, ref, " ".join(rule.split()), fn,
                                  area=_current_area[0] or fn.__module__.rsplit(".", 1)[-1],
                                  profile=profile, config=config,
                                  profile_changes=profile_changes, virtual=virtual, note=note,
                                  caps=tuple(caps), tss=tss)
        return fn

    return register


def catalogue() -> list[Case]:
    """Every case, in area order then registration order."""
    for area, _title in AREAS:
        importlib.import_module(f"uet.conformance.cases.{area}")
    order = {area: i for i, (area, _t) in enumerate(AREAS)}
    cases = list(_REGISTRY.values())
    return sorted(cases, key=lambda c: order.get(c.area, len(order)))


def get(case_id: str) -> Case:
    """The case with this ID (KeyError naming close IDs otherwise)."""
    cases = {c.id: c for c in catalogue()}
    try:
        return cases[case_id]
    except KeyError:
        prefix = case_id.rsplit("-", 1)[0]
        near = [c for c in cases if c.startswith(prefix)][:8]
        raise KeyError(f"no conformance case {case_id!r}"
                       + (f"; cases of {prefix}: {', '.join(near)}" if near else "")) from None
