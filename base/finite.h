/* finite.h: finding the first non-finite float in a block, for refusing untrusted input (the agent API's
 * arguments, a checkpoint's tensors) in one quick pass. */
#ifndef RLT_FINITE_H
#define RLT_FINITE_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* Index of the first non-finite value of n floats, or -1. The first loop tests exponent bits with no early
 * exit, so it vectorises; only a block that has one is searched again. */
static inline int64_t rlt_first_nonfinite(const float *x, uint64_t n) {
    uint32_t any = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint32_t b;
        memcpy(&b, x + i, sizeof b);
        any |= (b & 0x7f800000u) == 0x7f800000u;
    }
    if (!any) return -1;
    for (uint64_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return (int64_t)i;
    return -1;
}

#endif
