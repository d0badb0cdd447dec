/* dqn.c: the DQN-specific ops: u8 observation gathers, the (double) DQN target, the TD loss on the taken
 * actions (Huber or squared error) and global gradient-norm clipping. The readable references for the CUDA
 * twins in kernels/cuda/dqn.cu; every loop runs in index order, so results are deterministic. */
#include <math.h>

#include "td_loss.h"
#include "cpu_ops.h"

int cpu_gather_u8_f32(rlt_backend *bk, float *dst, const uint8_t *src, uint64_t row, const int32_t *idx, int32_t n,
                      float scale) {
    cpu_lane_fence(bk); /* runs here: a side lane's queued ops first (lanes.c) */
    CPU_REQUIRE(bk, n >= 0, "gather_u8_f32");
    for (int32_t i = 0; i < n; i++) {
        const uint8_t *s = src + (uint64_t)(idx ? idx[i] : i) * row;
        float *d = dst + (uint64_t)i * row;
        for (uint64_t j = 0; j < row; j++) d[j] = scale * (float)s[j];
    }
    return RLT_OK;
}

/* The lowest index of the maximum: a strict comparison keeps the first of tied values, as numpy's and
 * PyTorch's argmax do, so the chosen action does not depend on the backend. */
static int32_t argmax_row(const float *q, int32_t n_act) {
    int32_t best = 0;
    for (int32_t j = 1; j < n_act; j++)
        if (q[j] > q[best]) best = j;
    return best;
}

int cpu_dqn_target(rlt_backend *bk, float *y, int32_t *a_next, const float *r, const float *term,
                   const float *q_target_next, const float *q_online_next, int32_t ldq, int32_t n, int32_t n_act,
                   float gamma) {
    CPU_REQUIRE(bk, n >= 0 && n_act >= 1 && ldq >= n_act, "dqn_target");
    const float *sel = q_online_next ? q_online_next : q_target_next;
    for (int32_t i = 0; i < n; i++) {
        int32_t a = argmax_row(sel + (int64_t)i * ldq, n_act);
        float q = q_target_next[(int64_t)i * ldq + a];
        y[i] = r[i] + gamma * (1.0f - term[i]) * q;
        if (a_next) a_next[i] = a;
    }
    return RLT_OK;
}

int cpu_q_loss_grad(rlt_backend *bk, float *dq, int32_t lddq, float *loss, const float *q, int32_t ldq,
                    const int32_t *act, const float *y, int32_t n, int32_t n_act, float huber_delta, float grad_scale) {
    CPU_REQUIRE(bk, n >= 1 && n_act >= 1 && ldq >= n_act && lddq >= n_act, "q_loss_grad");
    CPU_REQUIRE(bk, huber_delta >= 0.0f, "q_loss_grad");
    /* The per-sample factor is formed once, in float, exactly as the CUDA twin forms it, so the gradients
     * agree bit for bit. */
    float k = grad_scale / (float)n;
    float acc = 0.0f;
    for (int32_t i = 0; i < n; i++) {
        float *row = dq + (int64_t)i * lddq;
        for (int32_t j = 0; j < n_act; j++) row[j] = 0.0f;
        int32_t a = act[i];
        if (a < 0 || a >= n_act) continue;
        float d = q[(int64_t)i * ldq + a] - y[i];
        float g, l = rlt_td_loss(d, huber_delta, &g);
        row[a] = k * g;
        acc += l;
    }
    if (loss) *loss = acc / (float)n;
    return RLT_OK;
}

int cpu_clip_grad_norm(rlt_backend *bk, float *g, uint64_t n, float max_norm, float *norm) {
    CPU_REQUIRE(bk, max_norm > 0.0f && norm != NULL, "clip_grad_norm");
    /* The reference sums in double: it is then within a few ulp of the exact norm, and the parity test
     * bounds the GPU's fp32 tree against it (a float running sum over a million gradients would be the
     * least accurate of the two, a poor oracle). */
    double acc = 0.0;
    for (uint64_t i = 0; i < n; i++) acc += (double)g[i] * (double)g[i];
    float total = (float)sqrt(acc);
    *norm = total;
    /* PyTorch's rule, in float as the CUDA twin computes it: clip_coef = max_norm / (norm + 1e-6), applied
     * only below 1 (multiplying by 1 would change nothing anyway). */
    float coef = max_norm / (total + 1e-6f);
    if (coef < 1.0f)
        for (uint64_t i = 0; i < n; i++) g[i] *= coef;
    return RLT_OK;
}
