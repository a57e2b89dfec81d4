#!/usr/bin/env bash
# Build uet.native's C extensions with AddressSanitizer (+ UBSan) into a temporary copy of the
# package and run the native tests against them, then a leak check of the C allocations.
# The cffi extension (_uet_native) and the CPython ones (_event_core: the event loop and the
# fabric's per-frame path, event_core.c + fabric_core.c; _codec_core, codec_core.c; the end
# point's C cores, *_core.c over slots.h) are all instrumented; the fabric tests that drive
# the event core (scheduler, C-vs-Python equivalence, PFC, impairments), the codec's
# fast-path tests and the cores' C-vs-Python tests run too.
# Not part of CI (slow, needs gcc's libasan). Usage: benchmarks/native_asan.sh [pytest args]
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
# the real interpreter (not a pyenv shim: the sanitizer runtime is preloaded into it alone)
PY=$("${PYTHON:-python3}" -c 'import sys; print(sys.executable)')
CC=${CC:-gcc}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/uet-asan.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

# A private copy of the package and of the native tests, without the regular build.
cp -r "$ROOT/uet" "$TMP/uet"
find "$TMP/uet" -name '__pycache__' -prune -exec rm -rf {} +
rm -f "$TMP"/uet/native/_uet_native*.so "$TMP"/uet/native/_uet_native.c
rm -f "$TMP"/uet/native/_event_core*.so "$TMP"/uet/native/_codec_core*.so \
    "$TMP"/uet/native/_recovery_core*.so "$TMP"/uet/native/_sender_core*.so \
    "$TMP"/uet/native/_target_core*.so "$TMP"/uet/native/_fep_core*.so \
    "$TMP"/uet/native/_ses_core*.so "$TMP"/uet/native/_cms_core*.so \
    "$TMP"/uet/native/_huge_heap*.so
mkdir -p "$TMP/tests"
cp "$ROOT/tests/conftest.py" "$TMP/tests/"
touch "$TMP/tests/__init__.py"
cp -r "$ROOT/tests/native" "$TMP/tests/native"
cp -r "$ROOT/tests/fabric" "$TMP/tests/fabric"
cp -r "$ROOT/tests/wire" "$TMP/tests/wire"
cp -r "$ROOT/tests/pds" "$TMP/tests/pds"  # the end point's C cores against their Python forms
cp -r "$ROOT/tests/ses" "$TMP/tests/ses"
cp -r "$ROOT/tests/fep" "$TMP/tests/fep"  # the FEP core's audit and pump
cp -r "$ROOT/tests/cms" "$TMP/tests/cms"  # the CMS core's NSCC and sender gates
# EvLoad's C tap (EvTally, in codec_core.c) and the sampler's ChangeCore (series_core.c)
mkdir -p "$TMP/tests/experiments"
cp "$ROOT/tests/experiments/__init__.py" "$ROOT/tests/experiments/test_ev_tally.py" \
    "$ROOT/tests/experiments/test_timeseries.py" "$TMP/tests/experiments/"
cp "$ROOT/pyproject.toml" "$TMP/"

SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined -g"
echo "== building with: $SAN"
if ! (cd "$TMP" && UET_NATIVE_CFLAGS="$SAN" UET_NATIVE_LDFLAGS="$SAN" \
    "$PY" uet/native/build_native.py >"$TMP/build.log" 2>&1); then
    cat "$TMP/build.log"
    echo "== FAIL: build"
    exit 1
fi
if ! nm -D "$TMP"/uet/native/_uet_native*.so | grep __asan >/dev/null; then
    echo "== FAIL: the extension is not instrumented"
    exit 1
fi
EXT=$("$PY" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
INC=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
# shellcheck disable=SC2086
if ! "$CC" -shared -fPIC -O1 $SAN -I"$INC" "$TMP/uet/native/event_core.c" \
    "$TMP/uet/native/fabric_core.c" "$TMP/uet/native/series_core.c" \
    -o "$TMP/uet/native/_event_core$EXT" >"$TMP/build2.log" 2>&1
then
    cat "$TMP/build2.log"
    echo "== FAIL: build of the event core"
    exit 1
fi
# shellcheck disable=SC2086
if ! "$CC" -shared -fPIC -O1 $SAN -I"$INC" "$TMP/uet/native/codec_core.c" \
    -o "$TMP/uet/native/_codec_core$EXT" >"$TMP/build3.log" 2>&1; then
    cat "$TMP/build3.log"
    echo "== FAIL: build of the codec core"
    exit 1
fi
# the end point's (slots.h), and the huge-page region for the frames (huge_heap.c)
for core in recovery_core sender_core target_core fep_core ses_core cms_core huge_heap; do
    # shellcheck disable=SC2086
    if ! "$CC" -shared -fPIC -O1 $SAN -I"$INC" "$TMP/uet/native/$core.c" \
        -o "$TMP/uet/native/_$core$EXT" >"$TMP/build-$core.log" 2>&1; then
        cat "$TMP/build-$core.log"
        echo "== FAIL: build of $core"
        exit 1
    fi
done
# (grep reads nm's whole output: with pipefail, grep -q leaving early could fail nm with
# SIGPIPE once a module's symbol table outgrows the pipe's buffer)
for so in _event_core _codec_core _recovery_core _sender_core _target_core _fep_core \
    _ses_core _cms_core _huge_heap; do
    if ! nm -D "$TMP/uet/native/$so$EXT" | grep __asan >/dev/null; then
        echo "== FAIL: $so is not instrumented"
        exit 1
    fi
done

LIBASAN=$("$CC" -print-file-name=libasan.so)
LIBUBSAN=$("$CC" -print-file-name=libubsan.so)
PRELOAD="$LIBASAN $LIBUBSAN"
export PYTHONPATH="$TMP"          # the copy shadows the editable install
export PYTHONMALLOC=malloc        # let ASan see Python's allocations too
export UET_HUGE_HEAP=0            # ... the frames too (tests/native/test_huge_heap.py turns
                                  # the region on in its own processes)
export PYTHONDONTWRITEBYTECODE=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

cd "$TMP"
ASAN_OPTIONS=detect_leaks=0 LD_PRELOAD="$PRELOAD" "$PY" - <<'EOF'
import uet.native as n
from uet.fabric.scheduler import FABRIC_CORE
assert n.IMPLEMENTATION == "native", n.IMPLEMENTATION
assert FABRIC_CORE is not None and FABRIC_CORE.__file__.startswith(n.fast.__file__[:-7])
print("== extensions under test:", n.fast.__file__.replace("fast.py", ""), n.crc32c_impl(),
      FABRIC_CORE.__file__.rsplit("/", 1)[1])
EOF

echo "== native tests and the fabric's C path under ASan"
ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:strict_string_checks=1 LD_PRELOAD="$PRELOAD" \
    "$PY" -m pytest -q -p no:cacheprovider tests/native tests/fabric/test_scheduler.py \
    tests/fabric/test_fabric_core.py tests/fabric/test_pfc.py tests/fabric/test_impairments.py \
    tests/fabric/test_ecn_trim.py tests/wire/test_codec_core.py tests/wire/test_fast_paths.py \
    tests/experiments/test_ev_tally.py tests/experiments/test_timeseries.py \
    tests/fep/test_fep_wire.py tests/pds/test_recovery_core.py \
    tests/pds/test_c_cores.py tests/pds/test_ack_core.py tests/ses/test_ses_core.py \
    tests/fep/test_fep_core.py tests/cms/test_cms_core.py tests/cms/test_cms_nscc.py "$@"

echo "== leak check of the C allocations (trackers and their registry slots and output buffers,"
echo "   the combined operations, reorder buffers)"
LEAKS="$TMP/leaks.txt"
ASAN_OPTIONS=detect_leaks=1 LD_PRELOAD="$PRELOAD" "$PY" - >"$TMP/leakrun.txt" 2>"$LEAKS" <<'EOF' || true
import gc
from uet.native import fast
M = 0xFFFFFFFF
for i in range(2000):
    s = (0xFFFFFF00 + i) & M  # start PSNs cross 2**32
    t = fast.PsnTracker(s, 128 + i * 30)
    t.mark((s + 1) & M)
    t.mark_cumulative((s + 5) & M)
    t.on_packet((s + 7) & M)
    t.classify((s + 8) & M)
    t.ack_state()
    t.ack_state((s - 3) & M)
    t.mark_many([(s + k) & M for k in range(0, 300, 3)])
    a = fast.PsnTracker(s, 128 + i % 7 * 1000)
    a.apply_ack((s + 3) & M, s, (1 << 64) - 1)
    a.apply_ack((s + 9) & M, (s + 10) & M, 0)  # no SACK bits: the cumulative call
    a.mark_cumulative((s + 11) & M)
    a.missing(8, (s + 40) & M)
    fast.ones_sum_portable(bytes(i % 300), i)
    fast.ones_sum_sse2(bytes(i % 300), i)
    fast.ones_sum_avx2(bytes(i % 300), i)
    try:
        a.apply_ack((s + 65600) & M, 0, 1)  # beyond the window
    except ValueError:
        pass
    r = fast.ReorderBuffer(64, 10**6, 0, max_distance=1 << 12)
    for psn in range(1, 200, 3):
        r.insert(psn, object(), 10)
    r.pop_ready()
    if i % 2:
        r.reset(5)
del t, r, a
gc.collect()
print("done")
EOF
if ! grep -q "^done$" "$TMP/leakrun.txt"; then
    cat "$TMP/leakrun.txt"
    grep -v "^ *#" "$LEAKS" | head -30
    echo "== FAIL: the leak-check loop did not finish"
    exit 1
fi
if grep -q "uetn_" "$LEAKS"; then
    grep -B2 -A12 "uetn_" "$LEAKS" | head -60
    echo "== FAIL: leaked allocations from uet_native.c"
    exit 1
fi
echo "== no leaks from uet_native.c ($(grep -c 'Direct leak' "$LEAKS" || true) interpreter-internal leak reports ignored)"
echo "== ASan run OK"
