/* backend_pair.h: the CPU and CUDA backends side by side for the GPU parity tests: one arena each, buffers
 * taken at the same offset in both, the same host data put into both, results fetched from both, and the
 * random input data (splitmix64, independent of the code under test). */
#ifndef RLT_TEST_BACKEND_PAIR_H
#define RLT_TEST_BACKEND_PAIR_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"

typedef struct backend_pair {
    rlt_backend cpu, gpu;
    rlt_err ecpu, egpu;
    unsigned char *cbase, *gbase; /* the two arenas (the CPU's "device" memory is host memory) */
    uint64_t used, mark, bytes;   /* the same bump offset in both arenas, the reset mark, the arena size */
} backend_pair;

extern backend_pair P;

/* Opens both backends and reserves an arena of `bytes` in each (the cuBLAS workspace first, as the plan lays
 * it out); exits 77 (skipped) when no CUDA device can be opened. */
void pair_open(uint64_t bytes);
void pair_close(void);
/* Prints the failure and exits 1 unless rc is RLT_OK. */
void pair_die_on(int rc, rlt_err *e, const char *what);
/* `bytes` at the same offset in both arenas (256-byte aligned, like the plan); reset returns to the mark. */
void pair_take(uint64_t bytes, void **c, void **g);
void pair_reset(void);
/* The same host data into both; both results back (c from the CPU arena, g from the GPU). */
void pair_put(void *c, void *g, const void *host, uint64_t bytes);
void pair_fetch(void *host_c, void *host_g, const void *c, const void *g, uint64_t bytes);
/* precision: tf32 on the GPU backend or off again (its plan_workspace with rlt_op_use.dense_tf32, for a plan whose
 * dense products go to the library): the products it routes to the tensor cores then round their inputs to TF32. */
void pair_set_tf32(int on);
/* TF32's part of a product's error bound, relative to the sum of the products' magnitudes: each input rounded to 10
 * mantissa bits (2^-11 relative when rounded to nearest, 2^-10 when truncated), so a product is off by at most
 * 2^-9 + 2^-20 relative; 2^-8 covers it with room. */
#define PAIR_TF32_REL (1.0 / 256.0)
/* Input data. */
uint64_t pair_rnd_u64(void);
float pair_rnd_f(float lo, float hi);
void pair_rnd_fill(float *x, size_t n, float lo, float hi);

#endif
