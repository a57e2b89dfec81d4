"""uet: an emulator of the Ultra Ethernet Transport (UEC specification 1.0).

From a notebook: ``uet.run(config)``, ``uet.sweep(config, {key: [values]})`` and
``uet.load(run_dir)`` (``docs/api.md``). They are loaded on first use, so ``import uet``
stays cheap (no pandas, Dask, trio or matplotlib).
"""

from typing import Any

__version__ = "0.1.0"

#: lazily loaded public names -> the module that defines them
_LAZY = {"run": "uet.experiments.api", "sweep": "uet.experiments.api",
         "load": "uet.experiments.api", "Results": "uet.experiments.api",
         "SweepResults": "uet.experiments.api"}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'uet' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
