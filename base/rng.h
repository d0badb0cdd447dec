/* rng.h: host-side random streams over Philox (base/philox.h). A stream is (seed, stream id, counter);
 * each draw consumes one counter value, so state is three integers and checkpoints restore it exactly.
 * The trainer owns every stream: there is no global random state. */
#ifndef RLT_RNG_H
#define RLT_RNG_H

#include <stdint.h>
#include "philox.h"

typedef struct rlt_rng {
    uint64_t seed;
    uint64_t ctr;
    uint32_t stream;
    uint32_t reserved_;
} rlt_rng;

static inline void rlt_rng_init(rlt_rng *r, uint64_t seed, uint32_t stream) {
    r->seed = seed; r->stream = stream; r->ctr = 0; r->reserved_ = 0;
}
/* Uniform float in [0, 1). */
static inline float rlt_rng_uniform(rlt_rng *r) {
    return rlt_u32_to_unit(rlt_philox4x32(r->seed, r->stream, r->ctr++, 0).v[0]);
}
/* Uniform double in [0, 1) with 53 random bits (environment resets use doubles, as NumPy does). */
static inline double rlt_rng_uniform_f64(rlt_rng *r) {
    rlt_u32x4 x = rlt_philox4x32(r->seed, r->stream, r->ctr++, 0);
    uint64_t bits = ((uint64_t)x.v[0] << 21) ^ (uint64_t)(x.v[1] >> 11);
    return (double)(bits & ((1ull << 53) - 1)) * (1.0 / 9007199254740992.0);
}
static inline double rlt_rng_range_f64(rlt_rng *r, double lo, double hi) { return lo + (hi - lo) * rlt_rng_uniform_f64(r); }
static inline float rlt_rng_normal(rlt_rng *r) { return rlt_philox_normal(r->seed, r->stream, r->ctr++, 0); }
/* Uniform integer in [0, n). */
static inline uint32_t rlt_rng_below(rlt_rng *r, uint32_t n) { return rlt_philox_below(r->seed, r->stream, r->ctr++, 0, n); }

#endif
