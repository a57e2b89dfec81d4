"""cffi build script (API mode, out-of-line) for ``uet.native._uet_native``.

Used by setuptools through ``cffi_modules`` in ``setup.py``, so ``pip install .`` and
``pip install -e .`` compile it. It can also be run directly to build in place for a quick
try (``python uet/native/build_native.py``). Extra compiler/linker flags (for instance
``-fsanitize=address``, see ``benchmarks/native_asan.sh``) come from the environment
variables ``UET_NATIVE_CFLAGS`` and ``UET_NATIVE_LDFLAGS``.
"""

from __future__ import annotations

import os
import shlex

from cffi import FFI

HERE = os.path.dirname(os.path.abspath(__file__))

CDEF = """
uint32_t uetn_ones_sum(const char *data, size_t len, uint32_t initial);
uint32_t uetn_internet_checksum(const char *data, size_t len, uint32_t initial);
int32_t uetn_ipv4_header_checksum(const char *hdr, size_t len);
int32_t uetn_udp_checksum_ipv4(const char *src, size_t src_len, const char *dst,
                               size_t dst_len, const char *udp, size_t udp_len);
int32_t uetn_udp_checksum_ipv6(const char *src, size_t src_len, const char *dst,
                               size_t dst_len, const char *udp, size_t udp_len);
int32_t uetn_checksum_adjust(uint32_t csum, uint32_t old16, uint32_t new16);
int uetn_checksum_path(void);
uint32_t uetn_ones_sum_path(int path, const char *data, size_t len, uint32_t initial);

uint32_t uetn_crc32c(const char *data, size_t len, uint32_t crc);
uint32_t uetn_crc32c_slicing8(const char *data, size_t len, uint32_t crc);
uint32_t uetn_crc32c_sse42(const char *data, size_t len, uint32_t crc);
int uetn_crc32c_uses_sse42(void);
void uetn_init(void);

typedef struct uetn_tracker {
    uint32_t base;
    uint32_t window;
    uint32_t max_psn;
    uint64_t ooo_count;
    uint64_t received_count;
    ...;
} uetn_tracker;

uetn_tracker *uetn_tracker_new(uint32_t start_psn, uint32_t window);
void uetn_tracker_free(uetn_tracker *t);
void uetn_tracker_reset(uetn_tracker *t, uint32_t start_psn);
int uetn_tracker_mark(uetn_tracker *t, uint32_t psn);
int uetn_tracker_is_received(const uetn_tracker *t, uint32_t psn);
uint64_t uetn_tracker_sack_bitmap(const uetn_tracker *t, uint32_t base);
int64_t uetn_tracker_mark_cumulative(uetn_tracker *t, uint32_t psn, uint32_t *out, size_t cap);
int64_t uetn_tracker_mark_bitmap(uetn_tracker *t, uint32_t base, uint64_t bitmap,
                                 uint32_t *out, size_t cap);
int64_t uetn_tracker_missing(const uetn_tracker *t, uint32_t end, uint32_t limit,
                             uint32_t *out, size_t cap);
int64_t uetn_tracker_count_received_in(const uetn_tracker *t, uint32_t start, uint32_t n);

int uetn_tracker_classify(const uetn_tracker *t, uint32_t psn);
int64_t uetn_tracker_on_packet(uetn_tracker *t, uint32_t psn);
uint64_t uetn_tracker_ack_bitmap(const uetn_tracker *t);
int64_t uetn_tracker_apply_ack(uetn_tracker *t, uint32_t cack, uint32_t sack_base,
                               uint64_t bitmap, uint32_t *out, size_t cap);
int64_t uetn_tracker_mark_many(uetn_tracker *t, const uint32_t *psns, size_t n);

uint64_t uetn_tracker_key(const uetn_tracker *t);
uint32_t *uetn_tracker_outbuf(uetn_tracker *t);
int uetn_tk_mark(uint64_t key);
int uetn_tk_classify(uint64_t key);
int uetn_tk_is_received(uint64_t key);
int64_t uetn_tk_on_packet(uint64_t key);
uint64_t uetn_tk_sack_bitmap(uint64_t key);
int64_t uetn_tk_cack(uint64_t key);
int64_t uetn_tk_max_psn(uint64_t key);
uint64_t uetn_tk_ack_bitmap(uint64_t key);
int64_t uetn_tk_mark_cumulative(uint64_t key);
int64_t uetn_tk_apply_ack(uint64_t key, uint32_t sack_base, uint64_t bitmap);

typedef struct uetn_rob {
    uint32_t next_psn;
    uint32_t items;
    uint64_t bytes;
    uint64_t max_bytes;
    uint32_t max_items;
    uint32_t max_distance;
    ...;
} uetn_rob;

uetn_rob *uetn_rob_new(uint32_t max_items, uint64_t max_bytes, uint32_t next_psn,
                       uint32_t max_distance);
void uetn_rob_free(uetn_rob *r);
int64_t uetn_rob_insert(uetn_rob *r, uint32_t psn, uint32_t nbytes);
int uetn_rob_contains(const uetn_rob *r, uint32_t psn);
int64_t uetn_rob_pop_one(uetn_rob *r);
int64_t uetn_rob_pop_ready(uetn_rob *r, uint32_t *out, size_t cap);
int64_t uetn_rob_reset(uetn_rob *r, uint32_t next_psn);

#define UETN_ERR_SHORT ...
#define UETN_ERR_IHL ...
#define UETN_ERR_IHL_LEN ...
#define UETN_ERR_ADDR ...
#define UETN_ERR_LONG ...
#define UETN_ERR_RANGE ...
#define UETN_ERR_WINDOW ...
#define UETN_ERR_CAPACITY ...
#define UETN_ERR_NOMEM ...
#define UETN_ERR_KEY ...
#define UETN_OOO_SATURATED ...
#define UETN_CSUM_PORTABLE ...
#define UETN_CSUM_SSE2 ...
#define UETN_CSUM_AVX2 ...
"""


def _relative(path: str) -> str:
    """``path`` relative to the current directory when possible (setuptools prefers it)."""
    try:
        rel = os.path.relpath(path)
    except ValueError:  # another drive on Windows
        return path
    return path if rel.startswith("..") else rel


# Prepended to cffi's generated wrappers. cffi releases the GIL and saves/restores errno
# around every C call (two mutex operations and two indirect calls): a third to a half of a
# call's cost here. Every uetn_* function is short, never blocks, never calls back into Python
# and never reads or sets errno, so the wrappers keep the GIL and leave errno alone. (If a
# future cffi stops using these macro names, this only stops saving time.)
PREAMBLE = """
#include "uet_native.h"
static void uetn_keep_errno(void) {}
#undef Py_BEGIN_ALLOW_THREADS
#define Py_BEGIN_ALLOW_THREADS {
#undef Py_END_ALLOW_THREADS
#define Py_END_ALLOW_THREADS }
#undef _cffi_restore_errno
#define _cffi_restore_errno uetn_keep_errno
#undef _cffi_save_errno
#define _cffi_save_errno uetn_keep_errno
"""

ffibuilder = FFI()
ffibuilder.cdef(CDEF)
ffibuilder.set_source(
    "uet.native._uet_native",
    PREAMBLE,
    sources=[_relative(os.path.join(HERE, "uet_native.c"))],
    include_dirs=[_relative(HERE)],
    extra_compile_args=[
        "-O2",
        "-Wall",
        "-Wextra",
        *shlex.split(os.environ.get("UET_NATIVE_CFLAGS", "")),
    ],
    extra_link_args=shlex.split(os.environ.get("UET_NATIVE_LDFLAGS", "")),
)

if __name__ == "__main__":
    # Build in place: the module lands next to the ``uet`` package's parent directory.
    ffibuilder.compile(tmpdir=os.path.dirname(os.path.dirname(HERE)), verbose=True)
