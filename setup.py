"""Build hook: compiles the cffi extension ``uet.native._uet_native`` (see docs/native.md).

All metadata lives in pyproject.toml; this file only adds the cffi module.
"""

from setuptools import setup

setup(cffi_modules=["uet/native/build_native.py:ffibuilder"])
