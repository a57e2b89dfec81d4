/* uet.native._huge_heap: the run's Python objects in memory the kernel may back with
 * 2 MiB pages.
 *
 * Why: a fabric of 1,024 hosts keeps ~45,000 data frames of ~4.2 KB in flight (~180 MB)
 * and hundreds of MB of small objects (PDCs, packet records, route tables), and a hop reads
 * a dozen of them cold. In 4 KiB pages each such read tends to miss the TLB as well as the
 * caches (the second-level TLB covers ~6 MiB of 4 KiB pages); one 2 MiB page's entry covers
 * 512 of them. (glibc does the same for malloc under GLIBC_TUNABLES=glibc.malloc.hugetlb=1,
 * which must be set before the process starts and does not reach pymalloc's arenas.)
 *
 * What: install() reserves one 2 MiB-aligned region (address space only) advised with
 * madvise(MADV_HUGEPAGE) and splits it in two halves:
 *
 * - blocks: it wraps the raw allocator (PYMEM_DOMAIN_RAW), where pymalloc sends every
 *   object of more than 512 bytes (so every data frame and payload), and, where pymalloc
 *   is not under the object allocator (PYTHONMALLOC=malloc: found by a probe at install),
 *   the object allocator too. Requests of MIN_SIZE..MAX_SIZE bytes (2-8 KiB: data frames
 *   and their payloads; a 4,096-byte payload's frame is 4,183 bytes as a bytes object)
 *   are served from the first half, in size classes of 128 bytes; each 64 KiB run holds
 *   one class (a byte per run says which), freed blocks go on their class's free list and
 *   are reused, never returned to the system. Everything else, and everything once the
 *   half is full, goes to the allocator that was installed before. A block's owner is told
 *   by its address, so blocks made before install() (or outside the region) are freed
 *   where they came from. (Wrapping the object domain itself, as this did at first, put a
 *   call in front of every small object's allocation and free: ~1.5% of a run.)
 * - arenas: it replaces pymalloc's arena allocator (PyObject_SetArenaAllocator), so every
 *   arena made from then on (1 MiB each in CPython 3.10+, holding every object of 512 bytes
 *   or less) is carved from the second half. An arena pymalloc frees goes on a free list
 *   for its next arena; arenas made before install(), arenas of another size and arenas
 *   asked for once the half is full go to the arena allocator before.
 *
 * The raw domain is called without the GIL too, so the region's lists are kept under a
 * mutex (taken only for the region's own sizes and blocks). Everything stays installed
 * for the life of the process (live blocks and arenas depend on it). Neither half ever
 * holds more than its peak use: freed memory is only reused.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#define MIN_SIZE 2049 /* the frames' sizes: smaller blocks (dict and list tables of the */
#define MAX_SIZE 8192 /* built fabric...) stay packed in the allocator before */
#define CLASS_SHIFT 7 /* 128-byte classes: a data frame (4,183 B) and a payload (4,129 B) share one */
#define NCLASS ((MAX_SIZE >> CLASS_SHIFT) + 1)
#define RUN_SHIFT 16 /* 64 KiB runs, one class each */
#define RUN_SIZE ((size_t)1 << RUN_SHIFT)
#define HUGE_PAGE ((size_t)2 << 20)

/* the allocators we wrap, each hook's ctx: the raw domain's, and the object domain's
 * where pymalloc is not under it */
static PyMemAllocatorEx before_raw, before_obj;
static int installed = 0;
static int wraps_obj = 0;
/* the raw domain is called without the GIL too */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
#define LOCK() pthread_mutex_lock(&lock)
#define UNLOCK() pthread_mutex_unlock(&lock)
#define BEFORE(ctx) ((PyMemAllocatorEx *)(ctx))

static char *base = NULL, *end = NULL, *next_run = NULL;
static uint8_t *run_class = NULL; /* per run: its class (0: not handed out) */
static size_t reserved = 0;
static int advised = 0;

typedef struct Free {
    struct Free *next;
} Free;

static Free *free_head[NCLASS];
static char *bump[NCLASS], *bump_end[NCLASS];

/* the arenas' half */
static PyObjectArenaAllocator arena_before; /* pymalloc's arena allocator we replace */
static char *abase = NULL, *aend = NULL, *anext = NULL;
static Free *arena_free_list = NULL; /* arenas pymalloc gave back, for its next ones */
static size_t arena_size = 0;           /* the first size asked for: pymalloc's ARENA_SIZE */
static unsigned long long n_arena, n_arena_free, n_arena_fallback;
static size_t arenas_live, arenas_free;

/* statistics */
static unsigned long long n_alloc, n_free, n_fallback, n_full;
static size_t in_use; /* bytes of blocks handed out (class sizes) */
static size_t peak_in_use;

static inline int owns(const void *p) { return (const char *)p >= base && (const char *)p < end; }

static inline int owns_arena(const void *p) {
    return (const char *)p >= abase && (const char *)p < aend;
}

static inline size_t class_of(size_t n) { return (n + ((1u << CLASS_SHIFT) - 1)) >> CLASS_SHIFT; }

/* a block of class c, or NULL when the region is full (under LOCK) */
static void *take(size_t c) {
    size_t cs = c << CLASS_SHIFT;
    Free *f = free_head[c];
    if (f != NULL) {
        free_head[c] = f->next;
    } else if (bump[c] != NULL && bump[c] + cs <= bump_end[c]) {
        f = (Free *)bump[c];
        bump[c] += cs;
    } else if (next_run + RUN_SIZE <= end) {
        char *run = next_run;
        next_run += RUN_SIZE;
        run_class[(size_t)(run - base) >> RUN_SHIFT] = (uint8_t)c;
        f = (Free *)run;
        bump[c] = run + cs;
        bump_end[c] = run + (RUN_SIZE / cs) * cs;
    } else {
        n_full++;
        return NULL;
    }
    n_alloc++;
    in_use += cs;
    if (in_use > peak_in_use)
        peak_in_use = in_use;
    return f;
}

static void *hh_malloc(void *ctx, size_t n) {
    if (n >= MIN_SIZE && n <= MAX_SIZE) {
        LOCK();
        void *p = take(class_of(n));
        UNLOCK();
        if (p != NULL)
            return p;
    }
    __atomic_fetch_add(&n_fallback, 1, __ATOMIC_RELAXED); /* a statistic */
    return BEFORE(ctx)->malloc(BEFORE(ctx)->ctx, n);
}

static void *hh_calloc(void *ctx, size_t nelem, size_t elsize) {
    if (elsize != 0 && nelem <= MAX_SIZE / elsize) {
        size_t n = nelem * elsize;
        if (n >= MIN_SIZE) {
            LOCK();
            void *p = take(class_of(n));
            UNLOCK();
            if (p != NULL) {
                memset(p, 0, n);
                return p;
            }
        }
    }
    return BEFORE(ctx)->calloc(BEFORE(ctx)->ctx, nelem, elsize);
}

static void hh_free(void *ctx, void *p) {
    if (p == NULL)
        return;
    if (!owns(p)) {
        BEFORE(ctx)->free(BEFORE(ctx)->ctx, p);
        return;
    }
    LOCK();
    size_t c = run_class[(size_t)((char *)p - base) >> RUN_SHIFT];
    Free *f = (Free *)p;
    f->next = free_head[c];
    free_head[c] = f;
    n_free++;
    in_use -= c << CLASS_SHIFT;
    UNLOCK();
}

static void *hh_realloc(void *ctx, void *p, size_t n) {
    if (p == NULL)
        return hh_malloc(ctx, n);
    if (!owns(p))
        return BEFORE(ctx)->realloc(BEFORE(ctx)->ctx, p, n);
    size_t cs = run_class[(size_t)((char *)p - base) >> RUN_SHIFT] << CLASS_SHIFT;
    if (n >= MIN_SIZE && n <= cs)
        return p; /* still fits its block */
    void *q = hh_malloc(ctx, n);
    if (q == NULL)
        return NULL; /* p stays valid, as realloc promises */
    memcpy(q, p, n < cs ? n : cs);
    hh_free(ctx, p);
    return q;
}

/* pymalloc asks for an arena (ARENA_SIZE bytes, always the same size) */
static void *ar_alloc(void *ctx, size_t size) {
    void *p = NULL;
    LOCK();
    if (arena_size == 0 && size > 0 && size <= (size_t)(aend - abase))
        arena_size = size;
    if (size == arena_size) {
        if (arena_free_list != NULL) {
            p = arena_free_list;
            arena_free_list = arena_free_list->next;
            arenas_free--;
        } else if ((size_t)(aend - anext) >= size) {
            p = anext;
            anext += size;
        }
    }
    if (p != NULL) {
        n_arena++;
        arenas_live++;
    }
    UNLOCK();
    if (p != NULL)
        return p;
    n_arena_fallback++;
    return arena_before.alloc(arena_before.ctx, size);
}

static void ar_free(void *ctx, void *p, size_t size) {
    if (!owns_arena(p)) {
        arena_before.free(arena_before.ctx, p, size);
        return;
    }
    LOCK();
    Free *f = (Free *)p;
    f->next = arena_free_list;
    arena_free_list = f;
    arenas_free++;
    arenas_live--;
    n_arena_free++;
    UNLOCK();
}

/* install(reserve_bytes, advise) -> bool: reserve the region and wrap the object allocator
 * (once per process; later calls only report whether it is installed) */
static PyObject *install(PyObject *self, PyObject *args) {
    unsigned long long want;
    int advise;
    if (!PyArg_ParseTuple(args, "Kp", &want, &advise))
        return NULL;
    if (installed)
        Py_RETURN_TRUE;
    if (want < 4 * HUGE_PAGE) {
        PyErr_SetString(PyExc_ValueError, "install: reserve at least 8 MiB");
        return NULL;
    }
    size_t size = (size_t)want & ~(2 * HUGE_PAGE - 1); /* two halves of whole huge pages */
    /* address space only (MAP_NORESERVE): pages are made when first written */
    char *raw = mmap(NULL, size + HUGE_PAGE, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (raw == MAP_FAILED)
        Py_RETURN_FALSE;
    char *aligned = (char *)(((uintptr_t)raw + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
    if (aligned > raw)
        munmap(raw, (size_t)(aligned - raw));
    munmap(aligned + size, (size_t)(raw + HUGE_PAGE - aligned));
    size_t half = size / 2;
    run_class = PyMem_RawCalloc(half >> RUN_SHIFT, 1);
    if (run_class == NULL) {
        munmap(aligned, size);
        return PyErr_NoMemory();
    }
#ifdef MADV_HUGEPAGE
    advised = advise && madvise(aligned, size, MADV_HUGEPAGE) == 0;
#endif
    base = next_run = aligned;
    end = abase = anext = aligned + half;
    aend = aligned + size;
    reserved = size;
    /* the raw domain: pymalloc hands it every object of more than 512 bytes, and objects
     * of 512 bytes or less never reach the wrapper (one call less for each) */
    PyMem_GetAllocator(PYMEM_DOMAIN_RAW, &before_raw);
    PyMemAllocatorEx mine = {&before_raw, hh_malloc, hh_calloc, hh_realloc, hh_free};
    PyMem_SetAllocator(PYMEM_DOMAIN_RAW, &mine);
    installed = 1;
    /* without pymalloc (PYTHONMALLOC=malloc) objects do not go through the raw domain:
     * wrap the object domain as well */
    void *probe = PyObject_Malloc(4096);
    int via_raw = probe != NULL && owns(probe);
    PyObject_Free(probe);
    if (!via_raw) {
        PyMem_GetAllocator(PYMEM_DOMAIN_OBJ, &before_obj);
        PyMemAllocatorEx obj = {&before_obj, hh_malloc, hh_calloc, hh_realloc, hh_free};
        PyMem_SetAllocator(PYMEM_DOMAIN_OBJ, &obj);
        wraps_obj = 1;
    }
    PyObject_GetArenaAllocator(&arena_before);
    PyObjectArenaAllocator arenas = {NULL, ar_alloc, ar_free};
    PyObject_SetArenaAllocator(&arenas);
    Py_RETURN_TRUE;
}

static PyObject *stats(PyObject *self, PyObject *unused) {
    LOCK();
    size_t runs = (size_t)(next_run - base) >> RUN_SHIFT;
    unsigned long long a = n_alloc, f = n_free, full = n_full;
    unsigned long long fb = __atomic_load_n(&n_fallback, __ATOMIC_RELAXED);
    size_t use = in_use, peak = peak_in_use;
    size_t a_bytes = (size_t)(anext - abase), a_live = arenas_live, a_free = arenas_free;
    size_t a_size = arena_size;
    unsigned long long na = n_arena, naf = n_arena_free, nafb = n_arena_fallback;
    UNLOCK();
    return Py_BuildValue("{s:O,s:O,s:O,s:n,s:n,s:n,s:n,s:K,s:K,s:K,s:K,s:n,s:n,"
                         "s:n,s:n,s:n,s:n,s:K,s:K,s:K}",
                         "installed", installed ? Py_True : Py_False,
                         "huge_pages_advised", advised ? Py_True : Py_False,
                         "object_domain", wraps_obj ? Py_True : Py_False,
                         "reserved_bytes", (Py_ssize_t)reserved,
                         "region_bytes", (Py_ssize_t)(runs << RUN_SHIFT),
                         "in_use_bytes", (Py_ssize_t)use, "peak_in_use_bytes", (Py_ssize_t)peak,
                         "allocs", a, "frees", f, "fallbacks", fb, "full", full,
                         "min_size", (Py_ssize_t)MIN_SIZE, "max_size", (Py_ssize_t)MAX_SIZE,
                         "arena_size", (Py_ssize_t)a_size, "arena_region_bytes", (Py_ssize_t)a_bytes,
                         "arenas_live", (Py_ssize_t)a_live, "arenas_free", (Py_ssize_t)a_free,
                         "arena_allocs", na, "arena_frees", naf, "arena_fallbacks", nafb);
}

/* owns(obj) -> bool: whether the object's memory is a block of the region (for tests) */
static PyObject *py_owns(PyObject *self, PyObject *obj) {
    return PyBool_FromLong(installed && owns(obj));
}

/* in_arenas(obj) -> bool: whether the object lives in an arena of the region (for tests) */
static PyObject *py_in_arenas(PyObject *self, PyObject *obj) {
    return PyBool_FromLong(installed && owns_arena(obj));
}

static PyMethodDef methods[] = {
    {"install", install, METH_VARARGS,
     "install(reserve_bytes, advise) -> bool: serve 2049..8192-byte objects and pymalloc's "
     "arenas from a reserved region (madvise(MADV_HUGEPAGE) if advise); once per process"},
    {"stats", stats, METH_NOARGS, "stats() -> dict: the region's use and counters"},
    {"owns", py_owns, METH_O, "owns(obj) -> bool: the object is a block of the region"},
    {"in_arenas", py_in_arenas, METH_O,
     "in_arenas(obj) -> bool: the object lives in one of the region's pymalloc arenas"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_huge_heap",
                                    "Frames and pymalloc arenas in a huge-page region.", -1, methods};

PyMODINIT_FUNC PyInit__huge_heap(void) { return PyModule_Create(&module); }
