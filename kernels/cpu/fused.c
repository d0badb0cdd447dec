/* fused.c: the CPU twins of the fused ops (engine/backend.h, ABI 3): lanes, whole dense layers, the multi-field
 * gather, the TD3 and DQN losses, and Adam with clipping and Polyak. On the GPU each of these is one launch
 * (one graph node); here each is written as the sequence of the plain ops it stands for, called in the same
 * order with the same arguments, so a CPU run through the fused ops produces exactly the bits it produced
 * through the plain ones, and the plain ops stay the one readable reference. Two exceptions, for speed:
 * the backend table routes linear_forward/linear_backward to the fast kernels of dense.c, and adam_ex runs
 * Adam and Polyak as one pass (cpu_adam_polyak); both are checked against these plain sequences. */
#include <string.h>

#include "lowp.h"
#include "philox.h"
#include "cpu_ops.h"

/* The CPU runs every op to completion in call order, which satisfies any branch/join schedule. */
int cpu_branch(rlt_backend *bk, int32_t lane) {
    CPU_REQUIRE(bk, lane >= 0 && lane < RLT_BACKEND_MAX_LANES, "branch");
    return RLT_OK;
}

int cpu_join(rlt_backend *bk) { return RLT_OK; }

int cpu_linear_forward(rlt_backend *bk, int32_t rows, int32_t fi, int32_t fo, const float *x, int32_t ldx,
                       const float *W, const float *b, float *y, int32_t ldy, int32_t act) {
    CPU_REQUIRE(bk, rows >= 0 && fi >= 1 && fo >= 1 && ldx >= fi && ldy >= fo, "linear_forward");
    RLT_TRY(cpu_gemm(bk, 0, 1, rows, fo, fi, 1.0f, x, ldx, W, fi, 0.0f, y, ldy));
    return cpu_bias_act(bk, y, ldy, b, rows, fo, act);
}

int cpu_linear_backward(rlt_backend *bk, int32_t rows, int32_t fi, int32_t fo, const float *dy, int32_t lddy,
                        const float *x, int32_t ldx, int32_t act_x, const float *W, float *dW, float *db, float beta,
                        float *dx, int32_t lddx) {
    CPU_REQUIRE(bk, rows >= 0 && fi >= 1 && fo >= 1 && lddy >= fo && ldx >= fi, "linear_backward");
    CPU_REQUIRE(bk, !dx || lddx >= fi, "linear_backward");
    CPU_REQUIRE(bk, act_x >= RLT_ACT_NONE && act_x <= RLT_ACT_TANH, "linear_backward");
    if (dW) RLT_TRY(cpu_gemm(bk, 1, 0, fo, fi, rows, 1.0f, dy, lddy, x, ldx, beta, dW, fi));
    if (db) RLT_TRY(cpu_bias_grad(bk, db, dy, lddy, rows, fo, beta));
    if (dx) {
        RLT_TRY(cpu_gemm(bk, 0, 0, rows, fi, fo, 1.0f, dy, lddy, W, fi, 0.0f, dx, lddx));
        RLT_TRY(cpu_act_grad(bk, dx, lddx, x, ldx, rows, fi, act_x));
    }
    return RLT_OK;
}

int cpu_gather_fields(rlt_backend *bk, int32_t *idx, int32_t n, const rlt_sample_spec *sample, int32_t n_fields,
                      const rlt_gather_field *fields) {
    CPU_REQUIRE(bk, n >= 0 && n_fields >= 0 && n_fields <= RLT_GATHER_MAX_FIELDS, "gather_fields");
    if (sample) {
        CPU_REQUIRE(bk, *sample->size >= 1 && *sample->size <= INT32_MAX, "gather_fields");
        CPU_REQUIRE(bk, sample->row0 >= 0 && sample->batch >= sample->row0 + n, "gather_fields");
        uint64_t ctr = (uint64_t)*sample->counter, sz = (uint64_t)*sample->size;
        for (int32_t i = 0; i < n; i++)
            idx[i] = (int32_t)rlt_replay_slot(sample->seed, sample->stream, ctr, (uint64_t)(sample->row0 + i),
                                              (uint64_t)sample->batch, sz, sample->valid);
    }
    for (int32_t f = 0; f < n_fields; f++) {
        const rlt_gather_field *g = &fields[f];
        int wide = g->src_dtype == RLT_LP_F16 || g->src_dtype == RLT_LP_BF16;
        /* 16-bit rows: even row bytes, a 2-byte aligned source, float-aligned destination rows. */
        CPU_REQUIRE(bk, g->src_dtype == RLT_LP_F32 || (wide && g->row_bytes % 2 == 0 && (uintptr_t)g->src % 2 == 0 &&
                                                   (uintptr_t)g->dst % 4 == 0 && g->dst_stride % 4 == 0),
                     "gather_fields");
        CPU_REQUIRE(bk, g->dst_stride >= rlt_gather_dst_bytes(g), "gather_fields");
        unsigned char *d = g->dst;
        const unsigned char *s = g->src;
        for (int32_t i = 0; i < n; i++) {
            int64_t j = g->via ? g->via[idx[i]] : idx[i];
            const unsigned char *row = s + (uint64_t)j * g->row_bytes;
            if (!wide) {
                memcpy(d + (uint64_t)i * g->dst_stride, row, g->row_bytes);
                continue;
            }
            /* A compact replay row: each 16-bit element widened to fp32 (exact; no plain op does this). */
            float *out = (float *)(d + (uint64_t)i * g->dst_stride);
            const uint16_t *h = (const uint16_t *)row;
            for (uint64_t k = 0; k < g->row_bytes / 2; k++)
                out[k] = g->src_dtype == RLT_LP_F16 ? rlt_f16_to_f32(h[k]) : rlt_bf16_to_f32(h[k]);
        }
    }
    return RLT_OK;
}

int cpu_td3_critic_loss(rlt_backend *bk, float *y, float *dq1, float *dq2, float *loss1, float *loss2, const float *q1,
                        const float *q2, const float *qt1, const float *qt2, const float *r, const float *term, int32_t n,
                        float gamma, float grad_scale) {
    RLT_TRY(cpu_td3_target(bk, y, r, term, qt1, qt2, 1, n, gamma));
    RLT_TRY(cpu_mse_grad(bk, dq1, loss1, q1, y, n, grad_scale));
    return cpu_mse_grad(bk, dq2, loss2, q2, y, n, grad_scale);
}

int cpu_dqn_loss(rlt_backend *bk, float *y, float *dq, int32_t lddq, float *loss, const float *q, int32_t ldq,
                 const int32_t *act, const float *r, const float *term, const float *q_next_target,
                 const float *q_next_online, int32_t ldqn, int32_t n, int32_t n_act, float gamma, float huber_delta,
                 float grad_scale) {
    RLT_TRY(cpu_dqn_target(bk, y, NULL, r, term, q_next_target, q_next_online, ldqn, n, n_act, gamma));
    return cpu_q_loss_grad(bk, dq, lddq, loss, q, ldq, act, y, n, n_act, huber_delta, grad_scale);
}

int cpu_adam_ex(rlt_backend *bk, float *p, float *g, float *m, float *v, uint64_t n, rlt_adam_hp hp,
                const int64_t *step, const rlt_adam_extra *extra) {
    if (extra && extra->skip && *extra->skip) return RLT_OK; /* an fp16 step with non-finite gradients */
    if (extra && extra->max_grad_norm > 0.0f) RLT_TRY(cpu_clip_grad_norm(bk, g, n, extra->max_grad_norm, extra->norm));
    /* Adam and Polyak in one pass (flat.c): m, v and the order of operations are the plain ops', p is within
     * an ulp of cpu_adam's (one division fewer). The plain sequence stays the reference (tests/test_dense.c). */
    RLT_TRY(cpu_adam_polyak(bk, p, g, m, v, n, hp, step, extra ? extra->target : NULL, extra ? extra->tau : 0.0f));
    if (extra && extra->p_lp) {
        /* The compute copies follow their masters. */
        RLT_TRY(cpu_cast(bk, 1, (int64_t)n, extra->p_lp, extra->lp_dtype, (int64_t)n, p, RLT_LP_F32, (int64_t)n, NULL));
        if (extra->target && extra->target_lp)
            RLT_TRY(cpu_cast(bk, 1, (int64_t)n, extra->target_lp, extra->lp_dtype, (int64_t)n, extra->target, RLT_LP_F32,
                             (int64_t)n, NULL));
    }
    return RLT_OK;
}
