/* td3.c: the two TD3-specific pieces: target policy smoothing and the clipped double-Q target
 * (Fujimoto et al. 2018, eqs. 14-15). Actions are normalised to [-1, 1]; the env scales them. */
#include <math.h>

#include "philox.h"
#include "cpu_ops.h"

static inline float clampf(float x, float lo, float hi) { return x < lo ? lo : (x > hi ? hi : x); }

/* Rows [r0, r1) of the target action's noise: element (r, c) draws Philox number (row0 + r) * cols + c, so a
 * split by rows gives the same bits as the whole. */
typedef struct noise_job {
    const rlt_target_noise *d;
    int32_t r0, r1;
} noise_job;

static void noise_rows(void *arg) {
    const noise_job *j = arg;
    const rlt_target_noise *d = j->d;
    float *a = d->a;
    /* The agent's hparams block, where the descriptor names it, in place of the plain values. */
    float std = d->std_dev ? *d->std_dev : d->std, clip = d->clip_dev ? *d->clip_dev : d->clip;
    int32_t lda = d->lda, cols = d->cols, row0 = d->row0;
    uint64_t seed = d->seed, ctr = (uint64_t)*d->counter;
    uint32_t stream = d->stream;
    for (int32_t r = j->r0; r < j->r1; r++) {
        for (int32_t c = 0; c < cols; c++) {
            float eps = std * rlt_philox_normal(seed, stream, ctr, (uint64_t)(row0 + r) * (uint64_t)cols + (uint64_t)c);
            float *x = &a[(int64_t)r * lda + c];
            *x = clampf(*x + clampf(eps, -clip, clip), -1.0f, 1.0f);
        }
    }
}

int cpu_td3_target_action(rlt_backend *bk, const rlt_target_noise *d) {
    int32_t lda = d->lda, rows = d->rows, cols = d->cols, row0 = d->row0;
    CPU_REQUIRE(bk, rows >= 0 && cols >= 0 && lda >= cols && row0 >= 0, "td3_target_action");
    cpu_impl *im = bk->impl;
    cpu_lane_fence(bk);
    if ((int64_t)rows * cols >= 512 && cpu_lane_can_split(bk, (int64_t)rows * cols >= 1024)) {
        /* The second half of the rows on the worker (a Philox normal is some 30 ns: 256 x 6 is worth it). */
        noise_job w = {d, rows / 2, rows}, j = {d, 0, rows / 2};
        uint64_t t = cpu_worker_post(im->worker, CPU_JOB_FREE, 0, noise_rows, &w, sizeof w);
        noise_rows(&j);
        cpu_worker_wait(im->worker, t);
        return RLT_OK;
    }
    noise_job j = {d, 0, rows};
    noise_rows(&j);
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
