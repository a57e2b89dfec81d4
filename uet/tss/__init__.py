"""The Transport Security Sublayer (TSS, ref. 7): AES-GCM-256, key derivation, secure
domains, rekeying, AN rotation, replay protection and job isolation (docs/tss.md).

Sans-IO like the rest of the protocol core: no Trio, no clock (``now`` is passed in), no
sockets. :class:`TssSublayer` is what an end point holds; :class:`SecureDomain` one SDI's
state; :mod:`uet.tss.config` the configuration and the key-file format.
"""

from uet.tss.config import (
    DomainConfig,
    TssConfig,
    TssConfigError,
    format_key_file,
    load_key_file,
    parse_key_file,
)
from uet.tss.domain import SecureDomain, TssRefused
from uet.tss.sublayer import TssSublayer, is_secured

__all__ = ["DomainConfig", "SecureDomain", "TssConfig", "TssConfigError", "TssRefused",
           "TssSublayer", "format_key_file", "is_secured", "load_key_file",
           "parse_key_file"]
