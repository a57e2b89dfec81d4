"""The address book of a fabric's end points, shared instead of copied per host.

Every end point of a fabric knows every peer's IP, MAC and ``fep_cap`` (a fabric has no
ARP and a UET address carries the capabilities). One copy per host is O(hosts) per host,
O(hosts^2) in all: ~170 MB at 1,024 hosts and ~13 GB at 8,192. :func:`book` builds the
tables once per fabric (the ``HostContext.peers`` map every host shares);
:class:`PeerCaps` gives each end point its own view of the shared capabilities in which
it may still record, change or forget a peer (``set_peer_cap``, ``del``) for itself alone.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

_GONE = object()


class PeerCaps(dict):
    """``fep_cap`` by peer IP: the shared table, minus ``own`` (no entry for the end
    point itself), overlaid by this end point's own changes (stored in the dict itself)."""

    __slots__ = ("_shared", "_own", "_forgotten")

    def __init__(self, shared: Mapping[str, int], own: str) -> None:
        super().__init__()
        self._shared = shared
        self._own = own
        self._forgotten: set[str] = set()

    def _base(self, key: Any) -> Any:
        if key == self._own or key in self._forgotten:
            return _GONE
        return self._shared.get(key, _GONE)

    def get(self, key: Any, default: Any = None) -> Any:
        v = dict.get(self, key, _GONE)
        if v is _GONE:
            v = self._base(key)
        return default if v is _GONE else v

    def __missing__(self, key: Any) -> Any:
        v = self._base(key)
        if v is _GONE:
            raise KeyError(key)
        return v

    def __contains__(self, key: object) -> bool:
        return dict.__contains__(self, key) or self._base(key) is not _GONE

    def __setitem__(self, key: str, value: int) -> None:
        self._forgotten.discard(key)
        dict.__setitem__(self, key, value)

    def __delitem__(self, key: str) -> None:
        if key not in self:
            raise KeyError(key)
        if dict.__contains__(self, key):
            dict.__delitem__(self, key)
        self._forgotten.add(key)

    def __len__(self) -> int:
        return len(self.keys())

    def __iter__(self) -> Any:
        return iter(self.keys())

    def keys(self) -> Any:  # type: ignore[override]
        out = dict.fromkeys(k for k in self._shared if self._base(k) is not _GONE)
        out.update(dict.fromkeys(dict.keys(self)))
        return out.keys()

    def items(self) -> Any:  # type: ignore[override]
        return [(k, self[k]) for k in self.keys()]

    def values(self) -> Any:  # type: ignore[override]
        return [self[k] for k in self.keys()]


class AddressBook:
    """The tables every end point of one fabric reads: ``macs`` (IP -> MAC), ``ips``
    (host index -> IP) and ``caps`` (IP -> fep_cap); read-only once built."""

    __slots__ = ("macs", "ips", "caps")

    def __init__(self, peers: Mapping[int, tuple[str, str]],
                 cap_of: Callable[[int], int]) -> None:
        self.macs = {ip: mac for ip, mac in peers.values()}
        self.ips = {i: ip for i, (ip, _) in peers.items()}
        self.caps = {ip: int(cap_of(i)) for i, (ip, _) in peers.items()}


def book(cache: dict[int, Any], peers: Mapping[int, tuple[str, str]],
         cap_of: Callable[[int], int]) -> AddressBook:
    """The :class:`AddressBook` of ``peers`` (built once per peers map, kept in ``cache``)."""
    key = id(peers)
    hit = cache.get(key)
    if hit is None or hit[0] is not peers:
        hit = cache[key] = (peers, AddressBook(peers, cap_of))
    return hit[1]
