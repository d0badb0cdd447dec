/* alloc_counter.h: the process-wide allocation counter of the tests that prove nothing is allocated after
 * init. Included by exactly one file of a test program, it interposes malloc, calloc, realloc and
 * posix_memalign for the whole process (libopenblas and libyaml included): while `counting` is set, every
 * call adds one to `n_alloc`. */
#ifndef RLT_TEST_ALLOC_COUNTER_H
#define RLT_TEST_ALLOC_COUNTER_H

#include <stddef.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

static volatile int counting;
static volatile long n_alloc;

void *malloc(size_t n) {
    if (counting) n_alloc++;
    return __libc_malloc(n);
}
void *calloc(size_t a, size_t b) {
    if (counting) n_alloc++;
    return __libc_calloc(a, b);
}
void *realloc(void *p, size_t n) {
    if (counting) n_alloc++;
    return __libc_realloc(p, n);
}
int posix_memalign(void **p, size_t align, size_t n) {
    if (counting) n_alloc++;
    *p = __libc_memalign(align, n);
    return *p ? 0 : 12;
}

#endif
