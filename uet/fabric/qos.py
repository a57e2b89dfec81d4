"""Traffic classes and DSCP code points used by NICs and switches.

Data rides a low-priority class, ACK/NACK/control and trimmed headers a higher one
(reference 6.5). Which DSCP marks a trimmable packet, and which DSCPs a switch writes into
a trimmed one (a distinct one when trimmed at the last hop, so the receiver can NACK
``TRIMMED_LASTHOP``), are configuration (reference 6.3): these are the defaults.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from uet.wire.constants import DSCP_DEFAULT_CONTROL

TC_DATA = 0
TC_CONTROL = 1

#: Default DSCP of trimmable data (AF11), of a trimmed packet (AF12) and of one trimmed by
#: the switch port facing the receiving host (AF13).
DSCP_TRIMMABLE = 10
DSCP_TRIMMED = 12
DSCP_TRIMMED_LASTHOP = 14


#: TOS byte -> class tables made so far, by (tc_of_dscp items, default_tc)
_TOS_TABLES: dict[tuple[tuple[tuple[int, int], ...], int], tuple[int, ...]] = {}


@dataclass
class QosConfig:
    """DSCP -> traffic class map, class priorities and trimming code points.

    ``tc_of_dscp`` maps the DSCPs it names; every other DSCP is in ``default_tc``.
    ``priority`` lists classes from highest to lowest (strict priority).
    PFC priorities are the traffic-class numbers (0..7).
    """

    dscp_data: int = DSCP_TRIMMABLE
    dscp_control: int = DSCP_DEFAULT_CONTROL
    dscp_trimmable: int = DSCP_TRIMMABLE
    dscp_trimmed: int = DSCP_TRIMMED
    dscp_trimmed_lasthop: int = DSCP_TRIMMED_LASTHOP
    default_tc: int = TC_DATA
    tc_of_dscp: dict[int, int] = field(default_factory=dict)
    priority: tuple[int, ...] = (TC_CONTROL, TC_DATA)
    data_tc: int = TC_DATA
    control_tc: int = TC_CONTROL

    def __post_init__(self) -> None:
        for name in ("dscp_data", "dscp_control", "dscp_trimmable", "dscp_trimmed",
                     "dscp_trimmed_lasthop"):
            v = getattr(self, name)
            if not 0 <= v < 64:
                raise ValueError(f"qos.{name}={v}: a DSCP is 0..63")
        defaults = {self.dscp_control: self.control_tc, self.dscp_trimmed: self.control_tc,
                    self.dscp_trimmed_lasthop: self.control_tc}
        defaults.update(self.tc_of_dscp)
        self.tc_of_dscp = defaults
        for tc in (*self.tc_of_dscp.values(), *self.priority, self.default_tc):
            if not 0 <= tc < 8:
                raise ValueError(f"qos: traffic class {tc} not in 0..7")
        missing = (set(self.tc_of_dscp.values()) | {self.default_tc}) - set(self.priority)
        if missing:
            raise ValueError(f"qos.priority {self.priority} lacks classes {sorted(missing)}")

    def dscp_table(self) -> list[int]:
        """64-entry list: traffic class of each DSCP."""
        return [self.tc_of_dscp.get(d, self.default_tc) for d in range(64)]

    def tos_table(self) -> list[int]:
        """256-entry list indexed by the whole IPv4 TOS byte (DSCP << 2 | ECN); a new list
        at every call (every NIC and switch keeps one: made once per class map)."""
        key = (tuple(self.tc_of_dscp.items()), self.default_tc)
        made = _TOS_TABLES.get(key)
        if made is None:
            t = self.dscp_table()
            made = _TOS_TABLES[key] = tuple(t[b >> 2] for b in range(256))
        return list(made)

    @classmethod
    def from_dict(cls, d: dict) -> QosConfig:
        """Build from a TOML-style dict; unknown keys fail naming the allowed ones."""
        allowed = set(cls.__dataclass_fields__)
        bad = set(d) - allowed
        if bad:
            raise ValueError(f"qos: unknown keys {sorted(bad)}; allowed: {sorted(allowed)}")
        kw = dict(d)
        if "tc_of_dscp" in kw:
            kw["tc_of_dscp"] = {int(k): int(v) for k, v in kw["tc_of_dscp"].items()}
        if "priority" in kw:
            kw["priority"] = tuple(kw["priority"])
        return cls(**kw)
