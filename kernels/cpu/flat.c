/* flat.c: the flat passes over contiguous blocks: fill (zero-grad), copy (hard target copy), Adam,
 * Polyak averaging, and device-side counters. Each is one loop over the whole block, which is why every
 * network lays out params | grads | adam_m | adam_v with identical offsets. */
#include <math.h>
#include <string.h>

#include "cpu_ops.h"

int cpu_fill(rlt_backend *bk, float *x, uint64_t n, float value) {
    if (value == 0.0f) {
        memset(x, 0, n * sizeof *x);
        return RLT_OK;
    }
    for (uint64_t i = 0; i < n; i++) x[i] = value;
    return RLT_OK;
}

int cpu_copy_f32(rlt_backend *bk, float *dst, const float *src, uint64_t n) {
    if (n) memmove(dst, src, n * sizeof *dst);
    return RLT_OK;
}

int cpu_counter_add(rlt_backend *bk, int64_t *c, int64_t v) {
    *c += v;
    return RLT_OK;
}

CPU_HOT int cpu_adam(rlt_backend *bk, float *p, const float *g, float *m, float *v, uint64_t n, rlt_adam_hp hp,
             const int64_t *step) {
    CPU_REQUIRE(bk, *step >= 1, "adam");
    /* Bias corrections in float, as the CUDA twin computes them. */
    float t = (float)*step;
    float bc1 = 1.0f - powf(hp.beta1, t);
    float bc2 = 1.0f - powf(hp.beta2, t);
    float step_size = hp.lr / bc1;
    float bc2_sqrt = sqrtf(bc2);
    for (uint64_t i = 0; i < n; i++) {
        float gi = g[i];
        float mi = hp.beta1 * m[i] + (1.0f - hp.beta1) * gi;
        float vi = hp.beta2 * v[i] + (1.0f - hp.beta2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        p[i] -= step_size * mi / (sqrtf(vi) / bc2_sqrt + hp.eps);
    }
    return RLT_OK;
}

/* Adam then Polyak in one pass (the fast path of adam_ex): m and v are the reference's expressions, bit for
 * bit; p divides by sqrt(v) * (1 / sqrt(1 - b2^t)) + eps instead of sqrt(v) / sqrt(1 - b2^t) + eps, one
 * division per element instead of two (an ulp apart from cpu_adam, inside the GPU parity bound for p), and
 * the target moves toward the new p while it is in a register (target NULL: no Polyak step). */
CPU_HOT int cpu_adam_polyak(rlt_backend *bk, float *p, const float *g, float *m, float *v, uint64_t n, rlt_adam_hp hp,
                            const int64_t *step, float *target, float tau) {
    CPU_REQUIRE(bk, *step >= 1, "adam");
    CPU_REQUIRE(bk, !target || (tau >= 0.0f && tau <= 1.0f), "polyak");
    float t = (float)*step;
    float bc1 = 1.0f - powf(hp.beta1, t);
    float bc2 = 1.0f - powf(hp.beta2, t);
    float step_size = hp.lr / bc1;
    float inv_bc2_sqrt = 1.0f / sqrtf(bc2);
    float keep = 1.0f - tau;
    for (uint64_t i = 0; i < n; i++) {
        float gi = g[i];
        float mi = hp.beta1 * m[i] + (1.0f - hp.beta1) * gi;
        float vi = hp.beta2 * v[i] + (1.0f - hp.beta2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        float pi = p[i] - step_size * mi / (sqrtf(vi) * inv_bc2_sqrt + hp.eps);
        p[i] = pi;
        if (target) target[i] = tau * pi + keep * target[i];
    }
    return RLT_OK;
}

CPU_HOT int cpu_polyak(rlt_backend *bk, float *target, const float *src, uint64_t n, float tau) {
    CPU_REQUIRE(bk, tau >= 0.0f && tau <= 1.0f, "polyak");
    for (uint64_t i = 0; i < n; i++) target[i] = tau * src[i] + (1.0f - tau) * target[i];
    return RLT_OK;
}
