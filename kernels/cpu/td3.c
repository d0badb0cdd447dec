/* td3.c: the two TD3-specific pieces: target policy smoothing and the clipped double-Q target
 * (Fujimoto et al. 2018, eqs. 14-15). Actions are normalised to [-1, 1]; the env scales them. */
#include <math.h>

#include "philox.h"
#include "cpu_ops.h"

static inline float clampf(float x, float lo, float hi) { return x < lo ? lo : (x > hi ? hi : x); }

int cpu_td3_target_action(rlt_backend *bk, const rlt_target_noise *d) {
    float *a = d->a, std = d->std, clip = d->clip;
    int32_t lda = d->lda, rows = d->rows, cols = d->cols, row0 = d->row0;
    uint64_t seed = d->seed;
    uint32_t stream = d->stream;
    const int64_t *counter = d->counter;
    CPU_REQUIRE(bk, rows >= 0 && cols >= 0 && lda >= cols && row0 >= 0, "td3_target_action");
    uint64_t ctr = (uint64_t)*counter;
    for (int32_t r = 0; r < rows; r++) {
        for (int32_t c = 0; c < cols; c++) {
            float eps = std * rlt_philox_normal(seed, stream, ctr, (uint64_t)(row0 + r) * (uint64_t)cols + (uint64_t)c);
            float *x = &a[(int64_t)r * lda + c];
            *x = clampf(*x + clampf(eps, -clip, clip), -1.0f, 1.0f);
        }
    }
    return RLT_OK;
}

int cpu_td3_target(rlt_backend *bk, float *y, const float *r, const float *term, const float *q1, const float *q2,
                   int32_t ldq, int32_t n, float gamma) {
    CPU_REQUIRE(bk, n >= 0 && ldq >= 1, "td3_target");
    for (int32_t i = 0; i < n; i++) {
        float a = q1[(int64_t)i * ldq], b = q2[(int64_t)i * ldq];
        y[i] = r[i] + gamma * (1.0f - term[i]) * (a < b ? a : b);
    }
    return RLT_OK;
}
