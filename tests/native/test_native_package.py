"""uet.native as a package: implementation choice, UET_PURE_PYTHON, fallback warning, build."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import uet.native as native

NATIVE_DIR = Path(native.__file__).parent
API = [
    "internet_checksum",
    "ones_sum",
    "ipv4_header_checksum",
    "udp_checksum_ipv4",
    "udp_checksum_ipv6",
    "checksum_adjust",
    "checksum_impl",
    "crc32c",
    "crc32c_impl",
    "PsnTracker",
    "ReorderBuffer",
    "MarkResult",
    "InsertResult",
    "PsnWindowError",
    "IMPLEMENTATION",
]


def _run(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if k != "UET_PURE_PYTHON"}
    full_env.update(env)
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=full_env, timeout=120
    )


def test_extension_is_built() -> None:
    assert native.fast is not None, f"C extension not built: {native.FAST_IMPORT_ERROR}"
    assert native.fast.IMPLEMENTATION == "native"
    assert native.pure.IMPLEMENTATION == "python"


def test_selected_implementation() -> None:
    chosen = native.pure if native.FORCED_PURE or native.fast is None else native.fast
    assert native.IMPLEMENTATION == chosen.IMPLEMENTATION
    for name in API:
        assert getattr(native, name) is getattr(chosen, name), name
        assert hasattr(native.pure, name), name
        if native.fast is not None:
            assert hasattr(native.fast, name), name


def test_default_is_native_without_warning() -> None:
    proc = _run(
        "import warnings; warnings.simplefilter('error');"
        "import uet.native as n;"
        "print(n.IMPLEMENTATION, n.crc32c_impl(), n.checksum_impl())"
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[0] == "native"
    assert proc.stdout.split()[1] in ("sse4.2", "slicing8")
    assert proc.stdout.split()[2] in ("avx2", "sse2", "portable")


def test_env_forces_pure_without_warning() -> None:
    proc = _run(
        "import warnings; warnings.simplefilter('error');"
        "import uet.native as n;"
        "assert n.fast is not None and n.PsnTracker is n.pure.PsnTracker;"
        "print(n.IMPLEMENTATION, n.crc32c_impl(), n.checksum_impl())",
        UET_PURE_PYTHON="1",
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["python", "python", "python"]


def test_missing_extension_falls_back_with_one_warning() -> None:
    code = """
import sys, warnings
class Block:
    def find_spec(self, name, path=None, target=None):
        if name == "uet.native._uet_native":
            raise ImportError("blocked for the test")
sys.meta_path.insert(0, Block())
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import uet.native as n
    import uet.native  # a second import does not warn again
msgs = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
assert len(msgs) == 1, msgs
assert "not built" in msgs[0], msgs
assert n.fast is None and n.IMPLEMENTATION == "python"
assert n.crc32c(b"123456789") == 0xE3069283
print("ok")
"""
    proc = _run(code)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"


def test_c_sources_compile_without_warnings(tmp_path: Path) -> None:
    """Our C file and the cffi-generated wrapper, with -O2 -Wall -Wextra -Werror."""
    spec = importlib.util.spec_from_file_location("build_native", NATIVE_DIR / "build_native.py")
    assert spec and spec.loader
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    generated = tmp_path / "_uet_native.c"
    build.ffibuilder.emit_c_code(str(generated))
    cc = shutil.which(sysconfig.get_config_var("CC").split()[0]) or "gcc"
    include = sysconfig.get_paths()["include"]
    for source in (NATIVE_DIR / "uet_native.c", generated):
        proc = subprocess.run(
            [cc, "-c", "-fPIC", "-O2", "-Wall", "-Wextra", "-Werror", f"-I{include}",
             f"-I{NATIVE_DIR}", str(source), "-o", str(tmp_path / "x.o")],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        assert proc.stderr == "", proc.stderr


def test_wrappers_keep_the_gil_and_errno(tmp_path: Path) -> None:
    """build_native.PREAMBLE turns cffi's per-call GIL release and errno save/restore off:
    the compiled wrappers reference neither PyEval_SaveThread nor the errno helpers."""
    spec = importlib.util.spec_from_file_location("build_native", NATIVE_DIR / "build_native.py")
    assert spec and spec.loader
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    generated = tmp_path / "_uet_native.c"
    build.ffibuilder.emit_c_code(str(generated))
    text = generated.read_text()
    assert text.count("Py_BEGIN_ALLOW_THREADS") > 20  # cffi still writes them per function
    cc = shutil.which(sysconfig.get_config_var("CC").split()[0]) or "gcc"
    include = sysconfig.get_paths()["include"]
    obj = tmp_path / "wrappers.o"
    proc = subprocess.run(
        [cc, "-c", "-fPIC", "-O2", f"-I{include}", f"-I{NATIVE_DIR}", str(generated), "-o",
         str(obj)], capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    undefined = subprocess.run(["nm", "-u", str(obj)], capture_output=True, text=True,
                               timeout=60, check=True).stdout  # fmt: skip
    assert "PyEval_SaveThread" not in undefined and "PyEval_RestoreThread" not in undefined
    expanded = subprocess.run(
        [cc, "-E", f"-I{include}", f"-I{NATIVE_DIR}", str(generated)],
        capture_output=True, text=True, timeout=120, check=True,
    ).stdout  # fmt: skip
    # cffi's errno helpers are _cffi_exports[13] and [14]; the wrappers call the no-op instead
    assert "_cffi_exports[13]" not in expanded and "_cffi_exports[14]" not in expanded
    assert expanded.count("uetn_keep_errno()") > 40
    # and the extension in use was built that way
    from uet.native import _uet_native

    built = subprocess.run(["nm", "-D", _uet_native.__file__], capture_output=True, text=True,
                           timeout=60, check=True).stdout  # fmt: skip
    assert "PyEval_SaveThread" not in built
