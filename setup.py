"""Build hook: compiles the cffi extension ``uet.native._uet_native`` and the C event core
``uet.native._event_core`` (see docs/native.md).

All metadata lives in pyproject.toml; this file only adds the two extensions.
"""

from setuptools import Extension, setup

setup(
    cffi_modules=["uet/native/build_native.py:ffibuilder"],
    # the fabric's event core (uet.fabric.scheduler) and the per-frame path of its ports,
    # switch ports and channels (uet/native/fabric_core.c): CPython extension types, since
    # they hold the callbacks and frames they run (cffi cannot keep Python objects)
    ext_modules=[Extension("uet.native._event_core",
                           ["uet/native/event_core.c", "uet/native/fabric_core.c"],
                           depends=["uet/native/event_core.h"], optional=True)],
)
