"""Fixtures running every native test against both implementations.

``impl`` is parametrized over ``uet.native.pure`` and ``uet.native.fast``. The fast param
FAILS (it does not skip) when the C extension is not built: building it is part of the product.
"""

from __future__ import annotations

from types import ModuleType

import pytest

import uet.native as native


def fast_module() -> ModuleType:
    """``uet.native.fast``, or fail the test if the extension is not built."""
    if native.fast is None:
        pytest.fail(
            f"the uet.native C extension is not built ({native.FAST_IMPORT_ERROR}); "
            "run `pip install -e .`"
        )
    return native.fast


@pytest.fixture(scope="session", params=["pure", "fast"])
def impl(request: pytest.FixtureRequest) -> ModuleType:
    """One implementation of the uet.native API."""
    return native.pure if request.param == "pure" else fast_module()


@pytest.fixture(scope="session")
def both() -> tuple[ModuleType, ModuleType]:
    """``(pure, fast)`` for side-by-side comparisons."""
    return native.pure, fast_module()


@pytest.fixture(scope="session")
def fast_impl() -> ModuleType:
    """``uet.native.fast`` alone (its extra, C-only functions)."""
    return fast_module()
