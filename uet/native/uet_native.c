/*
 * uet_native: C fast path of uet.native.  See uet_native.h and docs/native.md.
 * Portable C99 with GCC/Clang builtins; on x86-64 the checksum has SSE2 and AVX2 paths and
 * CRC-32C an SSE4.2 one, the best the CPU has being chosen at run time (uetn_init).
 */
#include "uet_native.h"

#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define UETN_HAVE_X86_PATHS 1 /* SSE2 checksum, AVX2 checksum, SSE4.2 CRC-32C */
#include <immintrin.h>
#else
#define UETN_HAVE_X86_PATHS 0
#endif

/* ================================================================== checksums */

static inline uint64_t load64(const unsigned char *p)
{
    uint64_t w;
    memcpy(&w, p, sizeof w);
    return w;
}

/* Fold a 64-bit end-around sum to 16 bits (stays non-zero if it was non-zero). */
static inline uint32_t fold16(uint64_t s)
{
    s = (s & 0xFFFFFFFFu) + (s >> 32);
    s = (s & 0xFFFFFFFFu) + (s >> 32);
    s = (s & 0xFFFFu) + (s >> 16);
    s = (s & 0xFFFFu) + (s >> 16);
    s = (s & 0xFFFFu) + (s >> 16);
    return (uint32_t)s;
}

/* The checksum paths.  Every path adds the data as host-order words into 64-bit lanes
 * (32-bit halves, so a lane takes 2^31 additions before it could overflow) and returns a
 * partial sum congruent, modulo 0xFFFF, to the sum of p's host-order 16-bit words, and 0 only
 * if every byte is 0 (RFC 1071 2(B): the sum is byte-order independent up to a final swap).
 * Since 2^16 = 1 (mod 0xFFFF), 32- and 64-bit words can be added instead of 16-bit ones. */

/* Portable: 16-byte blocks, 64-bit loads, two accumulators; any tail zero-padded. */
static uint64_t psum_portable(const unsigned char *p, size_t n)
{
    uint64_t total = 0;
    while (n >= 16) {
        /* at most 2^30 iterations per block: accumulators stay below 2^63 */
        size_t blocks = n / 16;
        if (blocks > ((size_t)1 << 30))
            blocks = (size_t)1 << 30;
        uint64_t a = 0, b = 0;
        for (size_t i = 0; i < blocks; i++, p += 16) {
            uint64_t w0 = load64(p), w1 = load64(p + 8);
            a += (w0 & 0xFFFFFFFFu) + (w1 & 0xFFFFFFFFu);
            b += (w0 >> 32) + (w1 >> 32);
        }
        n -= blocks * 16;
        total += fold16(a);
        total += fold16(b);
    }
    if (n) {
        unsigned char tail[16] = {0};
        memcpy(tail, p, n);
        uint64_t w0 = load64(tail), w1 = load64(tail + 8);
        total += (w0 & 0xFFFFFFFFu) + (w1 & 0xFFFFFFFFu) + (w0 >> 32) + (w1 >> 32);
    }
    return total;
}

#if UETN_HAVE_X86_PATHS
/* The vector paths add 16-bit words exactly: each word is biased to a signed one (xor 0x8000,
 * i.e. minus 32768) so that pmaddwd with ones adds adjacent pairs into 32-bit lanes (three
 * instructions per vector); the bias is added back per round (32768 per word).  A lane takes
 * at most 2^14 pair sums (|sum| <= 65536) per round, far from 2^31.  The rest (under one
 * vector) goes to the portable code, starting at an even offset so word boundaries are
 * kept. */
#define VEC_ROUND_BLOCKS 16384u

/* Exact sum of the words behind lanes (signed 32-bit pair sums) of `words` biased words. */
static inline uint64_t unbias(const int32_t *lanes, int count, size_t words)
{
    int64_t s = 0;
    for (int i = 0; i < count; i++)
        s += lanes[i];
    return (uint64_t)(s + (int64_t)words * 32768); /* the exact sum: >= 0, < 2^36 */
}

/* SSE2 (every x86-64 CPU has it): 64-byte blocks in four 128-bit accumulators. */
static uint64_t psum_sse2(const unsigned char *p, size_t n)
{
    uint64_t total = 0;
    const __m128i bias = _mm_set1_epi16((short)0x8000), ones = _mm_set1_epi16(1);
    while (n >= 64) {
        size_t blocks = n / 64;
        if (blocks > VEC_ROUND_BLOCKS)
            blocks = VEC_ROUND_BLOCKS;
        __m128i a0 = _mm_setzero_si128(), a1 = a0, a2 = a0, a3 = a0;
        for (size_t i = 0; i < blocks; i++, p += 64) {
            __m128i v0 = _mm_loadu_si128((const __m128i *)p);
            __m128i v1 = _mm_loadu_si128((const __m128i *)(p + 16));
            __m128i v2 = _mm_loadu_si128((const __m128i *)(p + 32));
            __m128i v3 = _mm_loadu_si128((const __m128i *)(p + 48));
            a0 = _mm_add_epi32(a0, _mm_madd_epi16(_mm_xor_si128(v0, bias), ones));
            a1 = _mm_add_epi32(a1, _mm_madd_epi16(_mm_xor_si128(v1, bias), ones));
            a2 = _mm_add_epi32(a2, _mm_madd_epi16(_mm_xor_si128(v2, bias), ones));
            a3 = _mm_add_epi32(a3, _mm_madd_epi16(_mm_xor_si128(v3, bias), ones));
        }
        n -= blocks * 64;
        int32_t lanes[16];
        _mm_storeu_si128((__m128i *)lanes, a0);
        _mm_storeu_si128((__m128i *)(lanes + 4), a1);
        _mm_storeu_si128((__m128i *)(lanes + 8), a2);
        _mm_storeu_si128((__m128i *)(lanes + 12), a3);
        total += fold16(unbias(lanes, 16, blocks * 32));
    }
    return total + psum_portable(p, n);
}

/* AVX2: 128-byte blocks in four 256-bit accumulators, then 32 bytes at a time. */
__attribute__((target("avx2"))) static uint64_t psum_avx2(const unsigned char *p, size_t n)
{
    uint64_t total = 0;
    const __m256i bias = _mm256_set1_epi16((short)0x8000), ones = _mm256_set1_epi16(1);
    int32_t lanes[32];
    while (n >= 128) {
        size_t blocks = n / 128;
        if (blocks > VEC_ROUND_BLOCKS)
            blocks = VEC_ROUND_BLOCKS;
        __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
        for (size_t i = 0; i < blocks; i++, p += 128) {
            __m256i v0 = _mm256_loadu_si256((const __m256i *)p);
            __m256i v1 = _mm256_loadu_si256((const __m256i *)(p + 32));
            __m256i v2 = _mm256_loadu_si256((const __m256i *)(p + 64));
            __m256i v3 = _mm256_loadu_si256((const __m256i *)(p + 96));
            a0 = _mm256_add_epi32(a0, _mm256_madd_epi16(_mm256_xor_si256(v0, bias), ones));
            a1 = _mm256_add_epi32(a1, _mm256_madd_epi16(_mm256_xor_si256(v1, bias), ones));
            a2 = _mm256_add_epi32(a2, _mm256_madd_epi16(_mm256_xor_si256(v2, bias), ones));
            a3 = _mm256_add_epi32(a3, _mm256_madd_epi16(_mm256_xor_si256(v3, bias), ones));
        }
        n -= blocks * 128;
        _mm256_storeu_si256((__m256i *)lanes, a0);
        _mm256_storeu_si256((__m256i *)(lanes + 8), a1);
        _mm256_storeu_si256((__m256i *)(lanes + 16), a2);
        _mm256_storeu_si256((__m256i *)(lanes + 24), a3);
        total += fold16(unbias(lanes, 32, blocks * 64));
    }
    if (n >= 32) { /* what is left of a 128-byte block, 32 bytes at a time */
        __m256i a = _mm256_setzero_si256();
        size_t words = 0;
        for (; n >= 32; n -= 32, p += 32, words += 16) {
            __m256i v = _mm256_loadu_si256((const __m256i *)p);
            a = _mm256_add_epi32(a, _mm256_madd_epi16(_mm256_xor_si256(v, bias), ones));
        }
        _mm256_storeu_si256((__m256i *)lanes, a);
        total += fold16(unbias(lanes, 8, words));
    }
    /* clean upper register halves: legacy-SSE code run later (ours, libc's, Python's) would
     * otherwise pay for merging them (GCC does not always emit this for target("avx2")) */
    _mm256_zeroupper();
    return total + psum_portable(p, n);
}
#endif

/* The path uetn_init chose (the best the CPU has). */
static int csum_path = UETN_CSUM_PORTABLE;

static uint64_t psum_path(int path, const unsigned char *p, size_t n)
{
#if UETN_HAVE_X86_PATHS
    if (path >= UETN_CSUM_AVX2 && csum_path >= UETN_CSUM_AVX2)
        return psum_avx2(p, n);
    if (path >= UETN_CSUM_SSE2)
        return psum_sse2(p, n);
#else
    (void)path;
#endif
    return psum_portable(p, n);
}

/* Host-order partial sum -> folded 16-bit sum of big-endian words. */
static inline uint32_t finish_be(uint64_t total)
{
    uint32_t s = fold16(total);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    s = ((s & 0xFFu) << 8) | (s >> 8);
#endif
    return s;
}

/* One's-complement sum of p[0..n) as big-endian 16-bit words, folded to 16 bits. */
static uint32_t sum_be(const unsigned char *p, size_t n)
{
    return finish_be(psum_path(csum_path, p, n));
}

int uetn_checksum_path(void)
{
    return csum_path;
}

uint32_t uetn_ones_sum_path(int path, const char *data, size_t len, uint32_t initial)
{
    uint32_t s = finish_be(psum_path(path, (const unsigned char *)data, len));
    return fold16((uint64_t)s + initial);
}

uint32_t uetn_ones_sum(const char *data, size_t len, uint32_t initial)
{
    return fold16((uint64_t)sum_be((const unsigned char *)data, len) + initial);
}

uint32_t uetn_internet_checksum(const char *data, size_t len, uint32_t initial)
{
    return ~uetn_ones_sum(data, len, initial) & 0xFFFFu;
}

int32_t uetn_ipv4_header_checksum(const char *hdr, size_t len)
{
    const unsigned char *p = (const unsigned char *)hdr;
    if (len < 20)
        return UETN_ERR_SHORT;
    size_t ihl = p[0] & 0x0Fu;
    if (ihl < 5)
        return UETN_ERR_IHL;
    if (len < ihl * 4)
        return UETN_ERR_IHL_LEN;
    uint64_t s = (uint64_t)sum_be(p, 10) + sum_be(p + 12, ihl * 4 - 12);
    return (int32_t)(~fold16(s) & 0xFFFFu);
}

static uint32_t udp_finish(uint64_t s, const unsigned char *udp, size_t len)
{
    s += sum_be(udp, 6);            /* ports and length */
    s += sum_be(udp + 8, len - 8);  /* payload: the checksum field is skipped */
    uint32_t c = ~fold16(s) & 0xFFFFu;
    return c ? c : 0xFFFFu;
}

int32_t uetn_udp_checksum_ipv4(const char *src, size_t src_len, const char *dst,
                               size_t dst_len, const char *udp, size_t udp_len)
{
    if (src_len != 4 || dst_len != 4)
        return UETN_ERR_ADDR;
    if (udp_len < 8)
        return UETN_ERR_SHORT;
    if (udp_len > 0xFFFFu)
        return UETN_ERR_LONG;
    uint64_t s = (uint64_t)sum_be((const unsigned char *)src, 4) +
                 sum_be((const unsigned char *)dst, 4) + 17u + udp_len;
    return (int32_t)udp_finish(s, (const unsigned char *)udp, udp_len);
}

int32_t uetn_udp_checksum_ipv6(const char *src, size_t src_len, const char *dst,
                               size_t dst_len, const char *udp, size_t udp_len)
{
    if (src_len != 16 || dst_len != 16)
        return UETN_ERR_ADDR;
    if (udp_len < 8)
        return UETN_ERR_SHORT;
    if ((uint64_t)udp_len > 0xFFFFFFFFu)
        return UETN_ERR_LONG;
    uint64_t s = (uint64_t)sum_be((const unsigned char *)src, 16) +
                 sum_be((const unsigned char *)dst, 16) + 17u + (udp_len >> 16) +
                 (udp_len & 0xFFFFu);
    return (int32_t)udp_finish(s, (const unsigned char *)udp, udp_len);
}

int32_t uetn_checksum_adjust(uint32_t csum, uint32_t old16, uint32_t new16)
{
    if (csum > 0xFFFFu || old16 > 0xFFFFu || new16 > 0xFFFFu)
        return UETN_ERR_RANGE;
    uint32_t s = (~csum & 0xFFFFu) + (~old16 & 0xFFFFu) + new16;
    s = (s & 0xFFFFu) + (s >> 16);
    s = (s & 0xFFFFu) + (s >> 16);
    return (int32_t)(~s & 0xFFFFu);
}

/* ================================================================== CRC-32C */

#define CRC32C_POLY 0x82F63B78u /* reflected Castagnoli polynomial */

static uint32_t crc_table[8][256];
static int crc_ready;
static int crc_sse42;

static void crc_init_tables(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1u) ? (c >> 1) ^ CRC32C_POLY : c >> 1;
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = crc_table[0][i];
        for (int t = 1; t < 8; t++) {
            c = crc_table[0][c & 0xFFu] ^ (c >> 8);
            crc_table[t][i] = c;
        }
    }
    crc_ready = 1;
}

static uint32_t crc_slicing8(uint32_t c, const unsigned char *p, size_t n)
{
    while (n && ((uintptr_t)p & 7u)) {
        c = crc_table[0][(c ^ *p++) & 0xFFu] ^ (c >> 8);
        n--;
    }
    while (n >= 8) {
        /* little-endian composition of the 8 bytes, independent of the host byte order */
        uint32_t lo = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                      (uint32_t)p[3] << 24;
        uint32_t hi = (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 |
                      (uint32_t)p[7] << 24;
        lo ^= c;
        c = crc_table[7][lo & 0xFFu] ^ crc_table[6][(lo >> 8) & 0xFFu] ^
            crc_table[5][(lo >> 16) & 0xFFu] ^ crc_table[4][lo >> 24] ^
            crc_table[3][hi & 0xFFu] ^ crc_table[2][(hi >> 8) & 0xFFu] ^
            crc_table[1][(hi >> 16) & 0xFFu] ^ crc_table[0][hi >> 24];
        p += 8;
        n -= 8;
    }
    while (n--)
        c = crc_table[0][(c ^ *p++) & 0xFFu] ^ (c >> 8);
    return c;
}

#if UETN_HAVE_X86_PATHS
__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t c, const unsigned char *p,
                                                          size_t n)
{
    while (n && ((uintptr_t)p & 7u)) {
        c = _mm_crc32_u8(c, *p++);
        n--;
    }
    uint64_t c64 = c;
    while (n >= 32) {
        c64 = _mm_crc32_u64(c64, load64(p));
        c64 = _mm_crc32_u64(c64, load64(p + 8));
        c64 = _mm_crc32_u64(c64, load64(p + 16));
        c64 = _mm_crc32_u64(c64, load64(p + 24));
        p += 32;
        n -= 32;
    }
    while (n >= 8) {
        c64 = _mm_crc32_u64(c64, load64(p));
        p += 8;
        n -= 8;
    }
    c = (uint32_t)c64;
    while (n--)
        c = _mm_crc32_u8(c, *p++);
    return c;
}
#endif

void uetn_init(void)
{
    if (!crc_ready)
        crc_init_tables();
#if UETN_HAVE_X86_PATHS
    __builtin_cpu_init();
    crc_sse42 = __builtin_cpu_supports("sse4.2") ? 1 : 0;
    csum_path = __builtin_cpu_supports("avx2") ? UETN_CSUM_AVX2 : UETN_CSUM_SSE2;
#else
    crc_sse42 = 0;
    csum_path = UETN_CSUM_PORTABLE;
#endif
}

int uetn_crc32c_uses_sse42(void)
{
    return crc_sse42;
}

uint32_t uetn_crc32c_slicing8(const char *data, size_t len, uint32_t crc)
{
    if (!crc_ready)
        crc_init_tables();
    return ~crc_slicing8(~crc, (const unsigned char *)data, len);
}

uint32_t uetn_crc32c_sse42(const char *data, size_t len, uint32_t crc)
{
#if UETN_HAVE_X86_PATHS
    if (crc_sse42)
        return ~crc_hw(~crc, (const unsigned char *)data, len);
#endif
    return uetn_crc32c_slicing8(data, len, crc);
}

uint32_t uetn_crc32c(const char *data, size_t len, uint32_t crc)
{
#if UETN_HAVE_X86_PATHS
    if (crc_sse42)
        return ~crc_hw(~crc, (const unsigned char *)data, len);
#endif
    return uetn_crc32c_slicing8(data, len, crc);
}

/* ================================================================== PSN tracker */

#define SERIAL_HALF 0x80000000u

static inline int bit_get(const uetn_tracker *t, uint32_t off)
{
    uint32_t p = (t->head + off) & t->ring_mask;
    return (int)((t->bits[p >> 6] >> (p & 63u)) & 1u);
}

static inline void bit_set(uetn_tracker *t, uint32_t off)
{
    uint32_t p = (t->head + off) & t->ring_mask;
    t->bits[p >> 6] |= (uint64_t)1 << (p & 63u);
}

/* 64 ring bits starting at offset off from base (wrapping around the ring). */
static inline uint64_t bits64(const uetn_tracker *t, uint32_t off)
{
    uint32_t p = (t->head + off) & t->ring_mask;
    uint32_t w = p >> 6, o = p & 63u;
    uint64_t v = t->bits[w] >> o;
    if (o)
        v |= t->bits[(w + 1) & (t->nwords - 1)] << (64u - o);
    return v;
}

/* Clear count (<= window) bits from offset 0 and move base past them. */
static void drop_front(uetn_tracker *t, uint32_t count)
{
    while (count) {
        uint32_t o = t->head & 63u;
        uint32_t take = 64u - o;
        if (take > count)
            take = count;
        uint64_t m = take == 64u ? ~(uint64_t)0 : (((uint64_t)1 << take) - 1) << o;
        t->bits[t->head >> 6] &= ~m;
        t->head = (t->head + take) & t->ring_mask;
        t->base += take;
        count -= take;
    }
}

/* Advance base over the run of received PSNs at the front of the window. */
static void advance(uetn_tracker *t)
{
    for (;;) {
        uint32_t o = t->head & 63u;
        uint64_t inv = ~(t->bits[t->head >> 6] >> o);
        uint32_t run = inv ? (uint32_t)__builtin_ctzll(inv) : 64u;
        if (run == 0)
            return;
        drop_front(t, run);
        if (o + run < 64u)
            return;
    }
}

static inline void raise_max(uetn_tracker *t, uint32_t psn)
{
    uint32_t d = psn - t->max_psn;
    if (d && d < SERIAL_HALF)
        t->max_psn = psn;
}

/* ------------------------------------------------------------------ tracker registry
 * Every tracker has a slot; its key (slot << 32) ORed with a PSN names both in one 64-bit
 * argument, so the per-packet functions take a single integer (a one-argument cffi function
 * is the cheapest call Python can make).  All access happens with the GIL held (the cffi
 * wrappers keep it), so the registry needs no lock. */
#define UETN_MAX_SLOTS 0x7FFFFFFFu /* keys stay below 2^63 */

static uetn_tracker **reg;      /* slot -> tracker, or NULL for a free slot */
static uint32_t *reg_free;      /* free slots (a stack); room for every slot */
static uint32_t reg_len;        /* slots handed out so far (free or in use) */
static uint32_t reg_cap;
static uint32_t reg_nfree;

static int reg_add(uetn_tracker *t)
{
    uint32_t slot;
    if (reg_nfree) {
        slot = reg_free[--reg_nfree];
    } else {
        if (reg_len == reg_cap) {
            if (reg_cap >= UETN_MAX_SLOTS)
                return UETN_ERR_NOMEM;
            uint32_t cap = reg_cap ? reg_cap * 2u : 64u;
            if (cap > UETN_MAX_SLOTS)
                cap = UETN_MAX_SLOTS;
            uetn_tracker **r = realloc(reg, (size_t)cap * sizeof *r);
            if (!r)
                return UETN_ERR_NOMEM;
            reg = r;
            uint32_t *f = realloc(reg_free, (size_t)cap * sizeof *f);
            if (!f)
                return UETN_ERR_NOMEM; /* reg is bigger than needed: harmless */
            reg_free = f;
            reg_cap = cap;
        }
        slot = reg_len++;
    }
    reg[slot] = t;
    t->slot = slot;
    return 0;
}

static void reg_remove(uetn_tracker *t)
{
    reg[t->slot] = NULL;
    reg_free[reg_nfree++] = t->slot; /* cannot overflow: one entry per slot */
}

/* The tracker a key names, or NULL. */
static inline uetn_tracker *key_tracker(uint64_t key)
{
    uint64_t slot = key >> 32;
    return slot < reg_len ? reg[slot] : NULL;
}

uetn_tracker *uetn_tracker_new(uint32_t start_psn, uint32_t window)
{
    if (window < 128u || window > 65536u)
        return NULL;
    uint32_t size = 128;
    while (size < window)
        size <<= 1;
    uetn_tracker *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->bits = calloc(size / 64u, sizeof(uint64_t));
    if (!t->bits || reg_add(t)) {
        free(t->bits);
        free(t);
        return NULL;
    }
    t->window = window;
    t->ring_mask = size - 1u;
    t->nwords = size / 64u;
    uetn_tracker_reset(t, start_psn);
    return t;
}

void uetn_tracker_free(uetn_tracker *t)
{
    if (t) {
        reg_remove(t);
        free(t->out);
        free(t->bits);
        free(t);
    }
}

uint64_t uetn_tracker_key(const uetn_tracker *t)
{
    return (uint64_t)t->slot << 32;
}

uint32_t *uetn_tracker_outbuf(uetn_tracker *t)
{
    if (!t->out) {
        t->out = malloc(((size_t)t->window + 64u) * sizeof *t->out);
        if (t->out)
            t->out_cap = t->window + 64u;
    }
    return t->out;
}

void uetn_tracker_reset(uetn_tracker *t, uint32_t start_psn)
{
    memset(t->bits, 0, (size_t)t->nwords * sizeof(uint64_t));
    t->base = start_psn;
    t->head = 0;
    t->max_psn = start_psn - 1u;
    t->ooo_count = 0;
    t->received_count = 0;
}

int uetn_tracker_mark(uetn_tracker *t, uint32_t psn)
{
    uint32_t off = psn - t->base;
    if (off >= SERIAL_HALF)
        return UETN_MARK_STALE;
    if (off >= t->window)
        return UETN_MARK_OUT_OF_WINDOW;
    uint32_t p = (t->head + off) & t->ring_mask;
    uint64_t *w = &t->bits[p >> 6];
    uint64_t m = (uint64_t)1 << (p & 63u);
    if (*w & m)
        return UETN_MARK_DUPLICATE;
    *w |= m;
    t->received_count++;
    raise_max(t, psn);
    if (off)
        t->ooo_count++;
    else
        advance(t);
    return UETN_MARK_NEW;
}

int uetn_tracker_is_received(const uetn_tracker *t, uint32_t psn)
{
    uint32_t off = psn - t->base;
    if (off >= SERIAL_HALF)
        return 1;
    return off < t->window && bit_get(t, off);
}

uint64_t uetn_tracker_sack_bitmap(const uetn_tracker *t, uint32_t base)
{
    uint32_t off = base - t->base;
    if (off >= SERIAL_HALF) { /* starts before the window: those PSNs read as received */
        uint32_t below = 0u - off; /* 1 .. 2^31 */
        if (below >= 64u)
            return ~(uint64_t)0;
        return (bits64(t, 0) << below) | (((uint64_t)1 << below) - 1);
    }
    if (off < t->window) {
        uint64_t v = bits64(t, off);
        uint32_t left = t->window - off;
        if (left < 64u)
            v &= ((uint64_t)1 << left) - 1;
        return v;
    }
    /* beyond the window: zeros until base + i wraps (serially) to before the window */
    uint32_t wrap = SERIAL_HALF - off;
    return wrap >= 64u ? 0 : ~(uint64_t)0 ^ (((uint64_t)1 << wrap) - 1);
}

int64_t uetn_tracker_count_received_in(const uetn_tracker *t, uint32_t start, uint32_t n)
{
    if (n > 65536u)
        return UETN_ERR_RANGE;
    int64_t total = 0;
    for (uint32_t chunk = 0; chunk < n; chunk += 64u) {
        uint64_t bm = uetn_tracker_sack_bitmap(t, start + chunk);
        if (n - chunk < 64u)
            bm &= ((uint64_t)1 << (n - chunk)) - 1;
        total += __builtin_popcountll(bm);
    }
    return total;
}

/* Write base + i for the first (at most limit) clear bits i in [0, span) to out. */
static int64_t list_holes(const uetn_tracker *t, uint32_t span, uint32_t *out, uint32_t limit)
{
    int64_t k = 0;
    for (uint32_t rel = 0; rel < span; rel += 64u) {
        uint64_t holes = ~bits64(t, rel);
        if (span - rel < 64u)
            holes &= ((uint64_t)1 << (span - rel)) - 1;
        while (holes && k < (int64_t)limit) {
            out[k++] = t->base + rel + (uint32_t)__builtin_ctzll(holes);
            holes &= holes - 1;
        }
    }
    return k;
}

int64_t uetn_tracker_mark_cumulative(uetn_tracker *t, uint32_t psn, uint32_t *out, size_t cap)
{
    uint32_t off = psn - t->base;
    if (off >= SERIAL_HALF)
        return 0;
    if (off >= t->window)
        return UETN_ERR_WINDOW;
    if (cap < (size_t)off + 1u)
        return UETN_ERR_CAPACITY;
    int64_t k = list_holes(t, off + 1u, out, off + 1u);
    t->received_count += (uint64_t)k;
    raise_max(t, psn);
    drop_front(t, off + 1u);
    advance(t);
    return k;
}

int64_t uetn_tracker_mark_bitmap(uetn_tracker *t, uint32_t base, uint64_t bitmap, uint32_t *out,
                                 size_t cap)
{
    if (cap < 64u)
        return UETN_ERR_CAPACITY;
    int64_t k = 0;
    while (bitmap) {
        uint32_t i = (uint32_t)__builtin_ctzll(bitmap);
        bitmap &= bitmap - 1;
        uint32_t psn = base + i;
        uint32_t off = psn - t->base; /* stale PSNs give off >= 2^31 > window */
        if (off < t->window && !bit_get(t, off)) {
            bit_set(t, off);
            out[k++] = psn;
        }
    }
    if (k) {
        t->received_count += (uint64_t)k;
        raise_max(t, out[k - 1]);
        advance(t);
    }
    return k;
}

int64_t uetn_tracker_missing(const uetn_tracker *t, uint32_t end, uint32_t limit, uint32_t *out,
                             size_t cap)
{
    uint64_t span = (uint64_t)(uint32_t)(end - t->base) + 1u;
    if (span > SERIAL_HALF) /* end before base */
        return 0;
    if (span > t->window)
        span = t->window;
    if (cap < span && cap < limit)
        return UETN_ERR_CAPACITY;
    return list_holes(t, (uint32_t)span, out, limit);
}

/* ------------------------------------------------------------------ combined operations
 * One call per received packet (on_packet) and per ACK (ack_bitmap, apply_ack): the cost of
 * crossing from Python into C is paid once for what the PDS needs, not per elementary op. */

int uetn_tracker_classify(const uetn_tracker *t, uint32_t psn)
{
    uint32_t off = psn - t->base;
    if (off >= SERIAL_HALF)
        return UETN_MARK_STALE;
    if (off >= t->window)
        return UETN_MARK_OUT_OF_WINDOW;
    return bit_get(t, off) ? UETN_MARK_DUPLICATE : UETN_MARK_NEW;
}

int64_t uetn_tracker_on_packet(uetn_tracker *t, uint32_t psn)
{
    int in_order = psn == t->base;
    int r = uetn_tracker_mark(t, psn);
    uint64_t ooo = t->ooo_count;
    if (ooo > UETN_OOO_SATURATED)
        ooo = UETN_OOO_SATURATED;
    return (int64_t)(ooo << 3) | (int64_t)((r == UETN_MARK_NEW && in_order) << 2) | r;
}

uint64_t uetn_tracker_ack_bitmap(const uetn_tracker *t)
{
    return bits64(t, 0); /* the window is at least 128 PSNs: no bit beyond it */
}

int64_t uetn_tracker_apply_ack(uetn_tracker *t, uint32_t cack, uint32_t sack_base,
                               uint64_t bitmap, uint32_t *out, size_t cap)
{
    if (cap < (size_t)t->window + 64u)
        return UETN_ERR_CAPACITY;
    int64_t k = uetn_tracker_mark_cumulative(t, cack, out, cap);
    if (k < 0)
        return k;
    int64_t k2 = uetn_tracker_mark_bitmap(t, sack_base, bitmap, out + k, cap - (size_t)k);
    return k2 < 0 ? k2 : k + k2;
}

/* ------------------------------------------------------------------ by key
 * The same operations named by a key (uetn_tracker_key(t) | psn); UETN_ERR_KEY (or 0 for the
 * bitmaps) if the key names no tracker. */

int uetn_tk_mark(uint64_t key)
{
    uetn_tracker *t = key_tracker(key);
    return t ? uetn_tracker_mark(t, (uint32_t)key) : UETN_ERR_KEY;
}

int uetn_tk_classify(uint64_t key)
{
    uetn_tracker *t = key_tracker(key);
    return t ? uetn_tracker_classify(t, (uint32_t)key) : UETN_ERR_KEY;
}

int uetn_tk_is_received(uint64_t key)
{
    uetn_tracker *t = key_tracker(key);
    return t ? uetn_tracker_is_received(t, (uint32_t)key) : UETN_ERR_KEY;
}

int64_t uetn_tk_on_packet(uint64_t key)
{
    uetn_tracker *t = key_tracker(key);
    return t ? uetn_tracker_on_packet(t, (uint32_t)key) : UETN_ERR_KEY;
}

uint64_t uetn_tk_sack_bitmap(uint64_t key)
{
    uetn_tracker *t = key_tracker(key);
    return t ? uetn_tracker_sack_bitmap(t, (uint32_t)key) : 0;
}

int64_t uetn_tk_cack(uint64_t key)
{
    uetn_tracker *t = key_tracker(key);
    return t ? (int64_t)(uint32_t)(t->base - 1u) : UETN_ERR_KEY;
}

int64_t uetn_tk_max_psn(uint64_t key)
{
    uetn_tracker *t = key_tracker(key);
    return t ? (int64_t)t->max_psn : UETN_ERR_KEY;
}

uint64_t uetn_tk_ack_bitmap(uint64_t key)
{
    uetn_tracker *t = key_tracker(key);
    return t ? uetn_tracker_ack_bitmap(t) : 0;
}

int64_t uetn_tk_mark_cumulative(uint64_t key)
{
    uetn_tracker *t = key_tracker(key);
    if (!t)
        return UETN_ERR_KEY;
    if (!t->out)
        return UETN_ERR_CAPACITY;
    return uetn_tracker_mark_cumulative(t, (uint32_t)key, t->out, t->out_cap);
}

int64_t uetn_tk_apply_ack(uint64_t key, uint32_t sack_base, uint64_t bitmap)
{
    uetn_tracker *t = key_tracker(key);
    if (!t)
        return UETN_ERR_KEY;
    if (!t->out)
        return UETN_ERR_CAPACITY;
    return uetn_tracker_apply_ack(t, (uint32_t)key, sack_base, bitmap, t->out, t->out_cap);
}

int64_t uetn_tracker_mark_many(uetn_tracker *t, const uint32_t *psns, size_t n)
{
    int64_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += uetn_tracker_mark(t, psns[i]) == UETN_MARK_NEW;
    return k;
}

/* ================================================================== ROD reorder buffer */

uetn_rob *uetn_rob_new(uint32_t max_items, uint64_t max_bytes, uint32_t next_psn,
                       uint32_t max_distance)
{
    if (max_items < 1u || max_distance < 1u || max_distance > UETN_ROB_MAX_DISTANCE ||
        max_bytes > UETN_ROB_MAX_BYTES)
        return NULL;
    uetn_rob *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    uint32_t max_cap = 1;
    while (max_cap < max_distance)
        max_cap <<= 1;
    r->max_cap = max_cap;
    r->cap = max_cap < 16u ? max_cap : 16u;
    r->slot = calloc(r->cap, sizeof *r->slot);
    r->size = calloc(r->cap, sizeof *r->size);
    r->free_cap = 16;
    r->free_stack = malloc(r->free_cap * sizeof *r->free_stack);
    if (!r->slot || !r->size || !r->free_stack) {
        uetn_rob_free(r);
        return NULL;
    }
    r->max_items = max_items;
    r->max_bytes = max_bytes;
    r->max_distance = max_distance;
    r->next_psn = next_psn;
    return r;
}

void uetn_rob_free(uetn_rob *r)
{
    if (r) {
        free(r->slot);
        free(r->size);
        free(r->free_stack);
        free(r);
    }
}

/* Grow the ring so that offset off fits; re-bases the ring at index 0. */
static int rob_grow(uetn_rob *r, uint32_t off)
{
    uint32_t cap = r->cap;
    while (cap <= off)
        cap <<= 1;
    if (cap > r->max_cap)
        return UETN_ERR_RANGE;
    uint32_t *slot = calloc(cap, sizeof *slot);
    uint32_t *size = calloc(cap, sizeof *size);
    if (!slot || !size) {
        free(slot);
        free(size);
        return UETN_ERR_NOMEM;
    }
    for (uint32_t i = 0; i < r->cap; i++) {
        uint32_t j = (r->head + i) & (r->cap - 1u);
        slot[i] = r->slot[j];
        size[i] = r->size[j];
    }
    free(r->slot);
    free(r->size);
    r->slot = slot;
    r->size = size;
    r->cap = cap;
    r->head = 0;
    return 0;
}

/* Make room on the free stack for every handle given out (so releasing never fails). */
static int rob_reserve_free(uetn_rob *r, uint32_t need)
{
    if (need <= r->free_cap)
        return 0;
    uint32_t cap = r->free_cap;
    while (cap < need)
        cap *= 2u;
    uint32_t *stack = realloc(r->free_stack, (size_t)cap * sizeof *stack);
    if (!stack)
        return UETN_ERR_NOMEM;
    r->free_stack = stack;
    r->free_cap = cap;
    return 0;
}

int64_t uetn_rob_insert(uetn_rob *r, uint32_t psn, uint32_t nbytes)
{
    uint32_t off = psn - r->next_psn;
    if (off >= SERIAL_HALF)
        return -UETN_INS_STALE;
    if (off >= r->max_distance)
        return -UETN_INS_OUT_OF_RANGE;
    if (off < r->cap && r->slot[(r->head + off) & (r->cap - 1u)])
        return -UETN_INS_DUPLICATE;
    if (off && (r->items >= r->max_items || r->bytes > r->max_bytes ||
                nbytes > r->max_bytes - r->bytes))
        return -UETN_INS_FULL;
    if (off >= r->cap) {
        int rc = rob_grow(r, off);
        if (rc)
            return rc;
    }
    uint32_t handle;
    if (r->nfree) {
        handle = r->free_stack[--r->nfree];
    } else {
        /* handles stay below items + 1 <= max_distance + 1 <= 2^20 + 1 */
        if (rob_reserve_free(r, r->handles + 1u))
            return UETN_ERR_NOMEM;
        handle = r->handles++;
    }
    uint32_t j = (r->head + off) & (r->cap - 1u);
    r->slot[j] = handle + 1u;
    r->size[j] = nbytes;
    r->items++;
    r->bytes += nbytes;
    return ((int64_t)handle << 1) | (off == 0);
}

int uetn_rob_contains(const uetn_rob *r, uint32_t psn)
{
    uint32_t off = psn - r->next_psn;
    return off < r->cap && r->slot[(r->head + off) & (r->cap - 1u)] != 0;
}

/* Release next_psn's item (which must be held) and return its handle. */
static uint32_t rob_take(uetn_rob *r)
{
    uint32_t handle = r->slot[r->head] - 1u;
    r->bytes -= r->size[r->head];
    r->slot[r->head] = 0;
    r->size[r->head] = 0;
    r->items--;
    r->head = (r->head + 1u) & (r->cap - 1u);
    r->next_psn++;
    r->free_stack[r->nfree++] = handle; /* room reserved when the handle was given out */
    return handle;
}

int64_t uetn_rob_pop_one(uetn_rob *r)
{
    if (!r->slot[r->head])
        return -1;
    int64_t handle = rob_take(r);
    return r->slot[r->head] ? handle | ((int64_t)1 << 32) : handle;
}

int64_t uetn_rob_pop_ready(uetn_rob *r, uint32_t *out, size_t cap)
{
    int64_t k = 0;
    while ((size_t)k < cap && r->slot[r->head])
        out[k++] = rob_take(r);
    return k;
}

int64_t uetn_rob_reset(uetn_rob *r, uint32_t next_psn)
{
    int64_t k = r->items;
    memset(r->slot, 0, (size_t)r->cap * sizeof *r->slot);
    memset(r->size, 0, (size_t)r->cap * sizeof *r->size);
    r->items = 0;
    r->bytes = 0;
    r->head = 0;
    r->next_psn = next_psn;
    r->handles = 0; /* every handle is free again */
    r->nfree = 0;
    return k;
}
