"""One secure domain at one end point: keys, TSC, rotation, epochs, replay, limits.

:class:`SecureDomain` seals the UET bytes of outgoing frames (:meth:`~SecureDomain.seal`)
and opens incoming ones (:meth:`~SecureDomain.open`), sans-IO: ``now`` (picoseconds) is
passed in. What it enforces (ref. 7.2, docs/tss.md):

* **Key modes.** DIRECT: the domain key is the packet key. CLUSTER: a per-source key and
  IV mask derived (KDF label "U1") from the domain key, the epoch, the implicit-rekey value
  and the sender's SSI or address. SERVER: the server derives each client's key (label
  "U2", the client's SSI or address, no rekey); a client holds only its own derived key
  (44 bytes, or derived at start from the domain key as the reference provider does).
* **TSC**: 48 bits, one counter per domain and key generation, incremented for every frame
  sealed (a retransmission is a new frame: a new TSC); at ``tsc_limit`` the domain stops
  sending ("invoke fatal"), never wraps.
* **AN rotation**: two key slots chosen by the AN bit; a rotation (every ``rotation_ps`` of
  the shared clock, or :meth:`rotate`) moves to the next key generation and restarts the TSC.
  Receivers take the current key for the current AN and, for the other AN, the previous
  key within ``guard_ps`` of the rotation, else the next one (make-before-break).
* **Implicit rekey** (cluster mode): ``(TSC & rekey_mask) >> shift`` enters the KDF
  context, so a new key every 2^shift frames.
* **Epochs**: a frame whose epoch is older than the domain's by more than
  ``max_epoch_lifetime`` is refused (``epoch_expired``), and so is one from before this end
  point (re)joined the domain (``epoch_before_join``).
* **Replay**: a window per (sender, key generation) over epoch:TSC (``replay``,
  ``replay_stale``); checked before and updated only after the tag verified.
* **Authentication-failure threshold**: after more than ``auth_fail_threshold`` frames
  failed their tag the domain drops everything it receives (``disabled``) until
  :meth:`enable`.

Every refusal raises :class:`TssRefused` with a reason; the sublayer counts and logs it.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Callable
from typing import Any

from cryptography.exceptions import InvalidTag

from uet.errors import RemoteError
from uet.tss import crypto
from uet.tss.config import DomainConfig, TssConfigError
from uet.tss.header import aad, header_len, ip_bytes, iv, pack_header
from uet.tss.replay import Replay, ReplayWindow
from uet.wire.records import TssHeader

_KEY_CACHE = 1024


class TssRefused(RemoteError):
    """A frame the TSS will not open (or, for a local limit such as the TSC's, seal);
    ``reason`` is the counter name. The sublayer catches it: it never reaches a user."""

    def __init__(self, reason: str, detail: str = "") -> None:
        self.reason = reason
        self.detail = detail
        super().__init__(f"{reason}: {detail}" if detail else reason)


def _shift(mask: int) -> int:
    return (mask & -mask).bit_length() - 1 if mask else 0


class SecureDomain:
    """The state of one SDI at one end point (module docstring)."""

    def __init__(self, cfg: DomainConfig, local_ip: str,
                 counters: Counter[str] | None = None,
                 log: Callable[..., None] | None = None) -> None:
        self.cfg = cfg
        self.sdi = cfg.sdi
        self.local_ip = local_ip
        self.v6 = ":" in local_ip
        if self.v6 and cfg.mode in ("direct", "server") and not cfg.use_ssi:
            raise TssConfigError(
                f"tss.domains[{cfg.sdi}].ssi: IPv6 in {cfg.mode} mode needs an SSI (the IV "
                "would be the SDI for every sender under one key)")
        self.counters: Counter[str] = counters if counters is not None else Counter()
        self.log_hook = log
        self.epoch = cfg.epoch
        self.join_epoch = cfg.epoch
        self.tx_gen = 0
        self.rx_gen = 0
        self.rx_gen_since = 0
        self.tsc = 0  # next TSC to send under tx_gen
        self.disabled = False
        self.tx_dead = False  # the TSC reached its limit under the current key
        self.auth_failures = 0
        self.rekey_shift = _shift(cfg.rekey_mask)
        self.windows: OrderedDict[tuple[bytes, int], ReplayWindow] = OrderedDict()
        self._keys: OrderedDict[tuple, tuple[Any, bytes | None]] = OrderedDict()
        self._gen_keys: dict[int, bytes] = {}
        self.clients: dict[str, int] = dict(cfg.clients)  # server: client address -> SSI
        self.own_ssi4 = (cfg.ssi or 0).to_bytes(4, "big")

    # ------------------------------------------------------------------ keys
    def generation_key(self, gen: int) -> bytes:
        """The domain key of AN generation ``gen`` (0: the configured key)."""
        key = self._gen_keys.get(gen)
        if key is None:
            base = self.cfg.key
            if gen == 0:
                key = base
            elif len(base) != crypto.KEY_LEN:
                raise TssRefused("no_key", f"generation {gen} of a derived client key")
            else:
                key = crypto.kdf(base, crypto.LABEL_GENERATION, gen.to_bytes(8, "big"),
                                 crypto.KEY_LEN)
            if len(self._gen_keys) > 8:
                self._gen_keys.pop(min(self._gen_keys))
            self._gen_keys[gen] = key
        return key

    def _context(self, epoch: int, rekey: int, ident: bytes) -> bytes:
        if len(ident) == 16:  # the large (IPv6) context
            return b"\0\0\0\0" + epoch.to_bytes(2, "big") + rekey.to_bytes(4, "big") + ident
        return epoch.to_bytes(2, "big") + rekey.to_bytes(4, "big") + ident

    def packet_key(self, gen: int, epoch: int, tsc: int, ident: bytes) -> tuple[Any, bytes | None]:
        """(AES-GCM context, IV mask or None) for one frame. ``ident``: the identity the
        mode derives from (cluster: the sender's SSI or address; server: the client's)."""
        cfg = self.cfg
        mode = cfg.mode
        rekey = (tsc & cfg.rekey_mask) >> self.rekey_shift if cfg.rekey_mask else 0
        ck = (gen, epoch, rekey, ident) if mode != "direct" else (gen,)
        hit = self._keys.get(ck)
        if hit is not None:
            self._keys.move_to_end(ck)
            return hit
        base = self.generation_key(gen)
        out: tuple[Any, bytes | None]
        if mode == "direct":
            out = (crypto.aead(base), None)
        elif mode == "cluster":
            d = crypto.kdf(base, crypto.LABEL_CLUSTER, self._context(epoch, rekey, ident))
            out = (crypto.aead(d[:32]), d[32:])
        elif cfg.role == "client" and len(base) == crypto.KDF_LEN:
            out = (crypto.aead(base[:32]), base[32:])  # handed a derived key: used as is
        else:
            d = crypto.kdf(base, crypto.LABEL_SERVER, self._context(epoch, 0, ident))
            out = (crypto.aead(d[:32]), d[32:])
        self._keys[ck] = out
        if len(self._keys) > _KEY_CACHE:
            self._keys.popitem(last=False)
        return out

    def _kdf_ident(self, src_ip: str, dst_ip: str, ssi: int | None, tx: bool) -> bytes:
        """The identity the KDF context names for a frame src -> dst."""
        cfg = self.cfg
        if cfg.mode == "cluster":
            if ":" in src_ip:
                return ip_bytes(src_ip)
            return (ssi or 0).to_bytes(4, "big") if cfg.use_ssi else ip_bytes(src_ip)
        if cfg.mode == "server":
            if cfg.role == "client":
                me = self.local_ip
                if ":" in me:
                    return ip_bytes(me)
                return self.own_ssi4 if cfg.use_ssi else ip_bytes(me)
            client = dst_ip if tx else src_ip
            if ":" in client:
                return ip_bytes(client)
            if not cfg.use_ssi:
                return ip_bytes(client)
            cssi = self.clients.get(client) if tx else ssi
            if cssi is None:
                raise TssRefused("unknown_client", f"no SSI known for client {client}")
            return cssi.to_bytes(4, "big")
        return b""

    def _iv_ident(self, src_ip: str, ssi: int | None) -> bytes:
        if self.cfg.use_ssi:
            return (ssi or 0).to_bytes(4, "big")
        if ":" in src_ip:
            return self.sdi.to_bytes(4, "big")
        return ip_bytes(src_ip)

    # ------------------------------------------------------------------ rotation, epochs
    def _follow_clock(self, now: int) -> None:
        period = self.cfg.rotation_ps
        if period:
            gen = now // period
            if gen > self.tx_gen:
                self._set_tx_gen(gen, gen * period)

    def _set_tx_gen(self, gen: int, since: int) -> None:
        self.tx_gen = gen
        self.tsc = 0
        self.tx_dead = False
        if gen > self.rx_gen:
            self.rx_gen = gen
            self.rx_gen_since = since
        self.counters["rotations"] += 1
        self._log(since, "tss_rotate", generation=gen, an=gen & 1)

    def rotate(self, now: int) -> int:
        """Move to the next key generation (the SDME's key change); returns it."""
        self._set_tx_gen(self.tx_gen + 1, now)
        return self.tx_gen

    def advance_epoch(self, epoch: int) -> None:
        """The domain moved to ``epoch`` (a member left or rejoined: the SDME's doing)."""
        self.epoch = epoch & 0xFFFF

    def enable(self) -> None:
        """Accept frames again after the authentication-failure threshold disabled the
        domain (an operator's or SDME's decision)."""
        self.disabled = False
        self.auth_failures = 0

    def _rx_generation(self, an: int, now: int) -> int:
        g = self.rx_gen
        if g & 1 == an:
            return g
        if g > 0 and now - self.rx_gen_since < self.cfg.guard_ps:
            return g - 1
        return g + 1

    # ------------------------------------------------------------------ seal / open
    def stamp(self, now: int) -> TssHeader:
        """The header of the next frame sent: current AN and epoch, a fresh TSC (a
        retransmission is stamped again: never the TSC of its earlier copy)."""
        cfg = self.cfg
        self._follow_clock(now)
        if self.tx_dead:
            raise TssRefused("tsc_exhausted", f"SDI {self.sdi}: TSC limit reached")
        tsc = self.tsc
        if tsc > cfg.tsc_limit:
            self.tx_dead = True
            self._log(now, "tss_tsc_exhausted", sdi=self.sdi, generation=self.tx_gen)
            raise TssRefused("tsc_exhausted", f"SDI {self.sdi}: TSC limit reached")
        self.tsc = tsc + 1
        return TssHeader(cfg.use_ssi, self.tx_gen & 1, self.sdi, cfg.ssi or 0, self.epoch,
                         tsc)

    def encrypt(self, hdr: TssHeader, raw: bytes, plain: bytes | memoryview, src_ip: str,
                dst_ip: str, ev: int, encap: str = "udp") -> bytes:
        """Ciphertext || tag of ``plain`` under the header ``hdr`` (packed: ``raw``) that
        :meth:`stamp` gave."""
        cfg = self.cfg
        key, mask = self.packet_key(self.tx_gen, hdr.epoch, hdr.tsc,
                                    self._kdf_ident(src_ip, dst_ip, cfg.ssi, True))
        nonce = iv(self._iv_ident(src_ip, cfg.ssi), hdr.epoch, hdr.tsc, mask)
        return key.encrypt(nonce, bytes(plain), aad(encap, src_ip, dst_ip, ev, raw))

    def seal(self, now: int, plain: bytes, src_ip: str, dst_ip: str, ev: int,
             encap: str = "udp") -> tuple[TssHeader, bytes]:
        """Encrypt ``plain`` (the PDS header and everything after it) for one frame; returns
        the header and the UET bytes (header || ciphertext || tag)."""
        hdr = self.stamp(now)
        raw = pack_header(hdr)
        return hdr, raw + self.encrypt(hdr, raw, plain, src_ip, dst_ip, ev, encap)

    def open(self, now: int, hdr: TssHeader, data: bytes | bytearray | memoryview,
             src_ip: str,
             dst_ip: str, ev: int, encap: str = "udp",
             entropy: bytes | None = None) -> bytes:
        """Check and decrypt one frame's UET bytes (``data``: header || ciphertext || tag);
        returns the plaintext after the header, or raises :class:`TssRefused`."""
        cfg = self.cfg
        if self.disabled:
            raise TssRefused("disabled", f"SDI {self.sdi} is disabled (authentication "
                             "failures)")
        if bool(hdr.sp) != cfg.use_ssi:
            raise TssRefused("ssi_mismatch", "SSI presence differs from the domain's")
        epoch = hdr.epoch
        age = (self.epoch - epoch) & 0xFFFF
        if age < 0x8000 and age > cfg.max_epoch_lifetime:
            raise TssRefused("epoch_expired", f"epoch {epoch}, domain at {self.epoch}")
        if (epoch - self.join_epoch) & 0xFFFF >= 0x8000:
            raise TssRefused("epoch_before_join", f"epoch {epoch} is before this end "
                             f"point joined at {self.join_epoch}")
        n = header_len(hdr)
        if len(data) < n + crypto.TAG_LEN:
            raise TssRefused("malformed", "shorter than the header and the tag")
        self._follow_clock(now)
        gen = self._rx_generation(hdr.an, now)
        if gen < 0:
            raise TssRefused("auth_fail", "no key for that AN")
        sender = ip_bytes(src_ip) if not cfg.use_ssi else hdr.ssi.to_bytes(4, "big") + \
            ip_bytes(src_ip)
        counter = epoch << 48 | hdr.tsc
        wkey = (sender, gen)
        window = self.windows.get(wkey)
        if window is not None:
            verdict = window.check(counter)
            if verdict is Replay.DUPLICATE:
                raise TssRefused("replay", f"epoch:TSC {epoch}:{hdr.tsc} seen before")
            if verdict is Replay.STALE:
                raise TssRefused("replay_stale", f"epoch:TSC {epoch}:{hdr.tsc} is below "
                                 "the replay window")
        key, mask = self.packet_key(gen, epoch, hdr.tsc,
                                    self._kdf_ident(src_ip, dst_ip, hdr.ssi, False))
        nonce = iv(self._iv_ident(src_ip, hdr.ssi), epoch, hdr.tsc, mask)
        raw = bytes(data[:n])
        try:
            plain = key.decrypt(nonce, bytes(data[n:]),
                                aad(encap, src_ip, dst_ip, ev, raw, entropy))
        except InvalidTag:
            self.auth_failures += 1
            if cfg.auth_fail_threshold and self.auth_failures > cfg.auth_fail_threshold \
                    and not self.disabled:
                self.disabled = True
                self.counters["domain_disabled"] += 1
                self._log(now, "tss_domain_disabled", sdi=self.sdi,
                          failures=self.auth_failures)
            raise TssRefused("auth_fail", "tag does not verify") from None
        if window is None:
            window = ReplayWindow(cfg.replay_window)
            self.windows[wkey] = window
            if len(self.windows) > cfg.max_senders:
                self.windows.popitem(last=False)
                self.counters["replay_state_evicted"] += 1
        else:
            self.windows.move_to_end(wkey)
        window.mark(counter)
        if gen > self.rx_gen:
            self.rx_gen = gen
            self.rx_gen_since = now
        if cfg.mode == "server" and cfg.role == "server" and cfg.use_ssi and (
                len(self.clients) < cfg.max_senders or src_ip in self.clients):
            self.clients[src_ip] = hdr.ssi  # the SSI to derive this client's key from
        return plain

    def _log(self, now: int, kind: str, **fields: Any) -> None:
        if self.log_hook is not None:
            self.log_hook(now, kind, **fields)


__all__ = ["SecureDomain", "TssRefused"]
