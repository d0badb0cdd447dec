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

/* The largest magnitude an observation or a reward may have. sqrt(FLT_MAX) is 1.8e19: a value up to 1e18 can be
 * squared (the TD loss of a value proportional to it, Adam's second moment of a gradient proportional to it) and
 * summed over a layer's inputs without leaving float32. A larger one is a broken environment or an altered
 * checkpoint, not a measurement (-3.3e38 in a replay made the actor output NaN). The same bound refuses it where
 * it enters (rlt_agent_act, rlt_agent_observe) and where it is loaded (a checkpoint's replay and trainer.obs),
 * so a checkpoint is never refused for what its own run stored. */
#define RLT_VALUE_ABS_MAX 1e18f

/* Index of the first value of n that is not finite or is beyond RLT_VALUE_ABS_MAX in magnitude, or -1. */
static inline int64_t rlt_first_implausible(const float *x, uint64_t n) {
    uint32_t any = 0;
    for (uint64_t i = 0; i < n; i++) any |= !(fabsf(x[i]) <= RLT_VALUE_ABS_MAX); /* NaN too */
    if (!any) return -1;
    for (uint64_t i = 0; i < n; i++)
        if (!(fabsf(x[i]) <= RLT_VALUE_ABS_MAX)) return (int64_t)i;
    return -1;
}

#endif
