/* alloc_counter.h: the process-wide allocation counter of the tests that prove nothing is allocated after
 * init. Included by exactly one file of a test program, it counts every malloc, calloc, realloc and aligned
 * allocation of the whole process (libopenblas and libyaml included): while `counting` is set, every call
 * adds one to `n_alloc`.
 *
 * Normally it interposes those functions. Under AddressSanitizer that cannot work (ASan's own malloc must
 * serve every allocation, and interposing it breaks ASan's startup), so there it counts through the
 * sanitizer's malloc hook instead, which sees the same allocations: the count, and what the tests assert
 * about it, stay the same in both builds. */
#ifndef RLT_TEST_ALLOC_COUNTER_H
#define RLT_TEST_ALLOC_COUNTER_H

#include <stddef.h>

#if defined(__SANITIZE_ADDRESS__)
#define RLT_ALLOC_COUNTER_HOOK 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RLT_ALLOC_COUNTER_HOOK 1
#endif
#endif

static volatile int counting;
static volatile long n_alloc;

#ifdef RLT_ALLOC_COUNTER_HOOK
/* From the sanitizers' allocator_interface.h, which some compilers do not ship. */
int __sanitizer_install_malloc_and_free_hooks(void (*malloc_hook)(const volatile void *, size_t),
                                              void (*free_hook)(const volatile void *));

static void alloc_counter_hook(const volatile void *p, size_t n) {
    (void)p;
    (void)n;
    if (counting) __atomic_add_fetch(&n_alloc, 1, __ATOMIC_RELAXED);
}

/* The runtime takes the pair only with both hooks. */
static void alloc_counter_free_hook(const volatile void *p) { (void)p; }

__attribute__((constructor)) static void alloc_counter_install(void) {
    __sanitizer_install_malloc_and_free_hooks(alloc_counter_hook, alloc_counter_free_hook);
}
#else
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

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

#endif
