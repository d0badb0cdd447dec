/* mem.h: the one allocation hook of the engine. Every host allocation the library makes goes through
 * rlt_mem_alloc, so tests can count allocations (the arena promise: none after init) and fail them one by
 * one (every failure must give a clean error and leak nothing). */
#ifndef RLT_MEM_H
#define RLT_MEM_H

#include <stddef.h>
#include <stdint.h>

/* Aligned, zeroed allocation (align is a power of two >= sizeof(void*)). NULL on failure. */
void *rlt_mem_alloc(size_t bytes, size_t align);
void rlt_mem_free(void *p);
/* Allocations made through the hook since process start (monotonic, thread-safe). */
uint64_t rlt_mem_alloc_count(void);
/* Test hook: the n-th allocation from now fails (n = 0 the next one); n < 0 turns injection off. */
void rlt_mem_fail_after(int64_t n);
/* Test hook: the next `count` allocations of at least min_bytes fail (an arena reservation that another
 * process's memory makes fail, for memory.wait_s tests). */
void rlt_mem_fail_large(int64_t count, uint64_t min_bytes);

#endif
