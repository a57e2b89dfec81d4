"""uet: an emulator of the Ultra Ethernet Transport (UEC specification 1.0)."""

__version__ = "0.1.0"
