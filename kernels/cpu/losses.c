/* losses.c: loss gradients and logged reductions (summed in index order: deterministic). */
#include "cpu_ops.h"

int cpu_mse_grad(rlt_backend *bk, float *dq, float *loss, const float *q, const float *y, int32_t n, float grad_scale) {
    CPU_REQUIRE(bk, n >= 1, "mse_grad");
    float acc = 0.0f;
    float k = grad_scale * 2.0f / (float)n;
    for (int32_t i = 0; i < n; i++) {
        float d = q[i] - y[i];
        dq[i] = k * d;
        acc += d * d;
    }
    if (loss) *loss = acc / (float)n;
    return RLT_OK;
}

typedef struct sum_job {
    float *out;
    const float *x;
    int32_t ldx, n;
    float scale;
} sum_job;

static void sum_run(void *arg) {
    const sum_job *j = arg;
    float acc = 0.0f;
    for (int32_t i = 0; i < j->n; i++) acc += j->x[(int64_t)i * j->ldx];
    *j->out = j->scale * acc;
}

int cpu_sum(rlt_backend *bk, float *out, const float *x, int32_t ldx, int32_t n, float scale) {
    CPU_REQUIRE(bk, n >= 0 && ldx >= 1, "sum");
    sum_job j = {out, x, ldx, n, scale};
    /* A logged loss on a side lane: to the worker's queue (lanes.c). */
    if (cpu_lane_side(bk)) return cpu_lane_defer(bk, sum_run, &j, sizeof j);
    sum_run(&j);
    return RLT_OK;
}
