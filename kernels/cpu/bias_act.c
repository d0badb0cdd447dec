/* bias_act.c: bias + activation forward, the activation's backward through its output, and bias
 * gradients (column sums in row order, so results do not depend on threading). */
#include <math.h>

#include "cpu_ops.h"

CPU_HOT int cpu_bias_act(rlt_backend *bk, float *y, int32_t ldy, const float *b, int32_t rows, int32_t cols, rlt_act act) {
    CPU_REQUIRE(bk, rows >= 0 && cols >= 0 && ldy >= cols, "bias_act");
    CPU_REQUIRE(bk, act >= RLT_ACT_NONE && act <= RLT_ACT_TANH, "bias_act");
    for (int32_t r = 0; r < rows; r++) {
        float *row = y + (int64_t)r * ldy;
        for (int32_t c = 0; c < cols; c++) {
            float z = row[c] + (b ? b[c] : 0.0f);
            if (act == RLT_ACT_RELU) z = z > 0.0f ? z : 0.0f;
            else if (act == RLT_ACT_TANH) z = tanhf(z);
            row[c] = z;
        }
    }
    return RLT_OK;
}

/* The op issued on a side lane, as the worker's queue runs it (lanes.c). */
typedef struct act_grad_job {
    rlt_backend *bk;
    float *dy;
    const float *y;
    int32_t lddy, ldy, rows, cols;
    rlt_act act;
} act_grad_job;

static void act_grad_run(void *arg) {
    const act_grad_job *j = arg;
    (void)cpu_act_grad_plain(j->bk, j->dy, j->lddy, j->y, j->ldy, j->rows, j->cols, j->act); /* checked: cannot fail */
}

int cpu_act_grad(rlt_backend *bk, float *dy, int32_t lddy, const float *y, int32_t ldy, int32_t rows, int32_t cols,
                 rlt_act act) {
    CPU_REQUIRE(bk, rows >= 0 && cols >= 0 && lddy >= cols && ldy >= cols, "act_grad");
    CPU_REQUIRE(bk, act >= RLT_ACT_NONE && act <= RLT_ACT_TANH, "act_grad");
    if (act == RLT_ACT_NONE) return RLT_OK;
    if (cpu_lane_side(bk)) {
        act_grad_job j = {bk, dy, y, lddy, ldy, rows, cols, act};
        return cpu_lane_defer(bk, act_grad_run, &j, sizeof j);
    }
    return cpu_act_grad_plain(bk, dy, lddy, y, ldy, rows, cols, act);
}

CPU_HOT int cpu_act_grad_plain(rlt_backend *bk, float *dy, int32_t lddy, const float *y, int32_t ldy, int32_t rows,
                               int32_t cols, rlt_act act) {
    CPU_REQUIRE(bk, rows >= 0 && cols >= 0 && lddy >= cols && ldy >= cols, "act_grad");
    CPU_REQUIRE(bk, act >= RLT_ACT_NONE && act <= RLT_ACT_TANH, "act_grad");
    if (act == RLT_ACT_NONE) return RLT_OK;
    for (int32_t r = 0; r < rows; r++) {
        float *d = dy + (int64_t)r * lddy;
        const float *o = y + (int64_t)r * ldy;
        for (int32_t c = 0; c < cols; c++) {
            if (act == RLT_ACT_RELU) d[c] = o[c] > 0.0f ? d[c] : 0.0f;
            else d[c] *= 1.0f - o[c] * o[c];
        }
    }
    return RLT_OK;
}

/* Columns are summed BIAS_GRAD_COLS at a time in a local block that stays in registers over all rows (the
 * compiler cannot keep db there: it may alias dy), so each row costs one vector add per 16 columns instead
 * of a load, an add and a store. Every column is still beta * db, then row 0, row 1, ... in order: the same
 * bits as one running sum in memory. */
#define BIAS_GRAD_COLS 64

CPU_HOT int cpu_bias_grad(rlt_backend *bk, float *db, const float *dy, int32_t lddy, int32_t rows, int32_t cols, float beta) {
    CPU_REQUIRE(bk, rows >= 0 && cols >= 0 && lddy >= cols, "bias_grad");
    int32_t c0 = 0;
    for (; c0 + BIAS_GRAD_COLS <= cols; c0 += BIAS_GRAD_COLS) {
        float acc[BIAS_GRAD_COLS];
        for (int32_t c = 0; c < BIAS_GRAD_COLS; c++) acc[c] = beta == 0.0f ? 0.0f : beta * db[c0 + c];
        for (int32_t r = 0; r < rows; r++) {
            const float *d = dy + (int64_t)r * lddy + c0;
            for (int32_t c = 0; c < BIAS_GRAD_COLS; c++) acc[c] += d[c];
        }
        for (int32_t c = 0; c < BIAS_GRAD_COLS; c++) db[c0 + c] = acc[c];
    }
    /* The last columns (fewer than a block) with the running sum in memory. */
    for (int32_t c = c0; c < cols; c++) db[c] = beta == 0.0f ? 0.0f : beta * db[c];
    for (int32_t r = 0; r < rows && c0 < cols; r++) {
        const float *d = dy + (int64_t)r * lddy;
        for (int32_t c = c0; c < cols; c++) db[c] += d[c];
    }
    return RLT_OK;
}
