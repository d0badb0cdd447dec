/* mem.c: the engine's one allocation hook (see mem.h). */
#include "mem.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static _Atomic uint64_t g_alloc_count;   /* process-wide counters are the point: tests read them */
static _Atomic int64_t g_fail_after = -1;
static _Atomic int64_t g_fail_large_count;
static _Atomic uint64_t g_fail_large_min;

void *rlt_mem_alloc(size_t bytes, size_t align) {
    atomic_fetch_add(&g_alloc_count, 1);
    int64_t f = atomic_load(&g_fail_after);
    if (f >= 0) {
        atomic_store(&g_fail_after, f - 1);
        if (f == 0) return NULL;
    }
    if (bytes >= atomic_load(&g_fail_large_min) && atomic_load(&g_fail_large_count) > 0) {
        atomic_fetch_sub(&g_fail_large_count, 1);
        return NULL;
    }
    if (align < sizeof(void *)) align = sizeof(void *);
    /* A size this close to SIZE_MAX would round up to a small one (a saturated plan asks for UINT64_MAX). */
    if (bytes > SIZE_MAX - align) return NULL;
    size_t rounded = (bytes + align - 1) / align * align;
    if (rounded == 0) rounded = align;
    void *p = NULL;
    if (posix_memalign(&p, align, rounded) != 0) return NULL;
    memset(p, 0, rounded);
    return p;
}

void rlt_mem_free(void *p) { free(p); }

uint64_t rlt_mem_alloc_count(void) { return atomic_load(&g_alloc_count); }

void rlt_mem_fail_after(int64_t n) { atomic_store(&g_fail_after, n < 0 ? -1 : n); }

void rlt_mem_fail_large(int64_t count, uint64_t min_bytes) {
    atomic_store(&g_fail_large_min, min_bytes);
    atomic_store(&g_fail_large_count, count);
}
