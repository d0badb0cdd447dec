/* fused.c: the CPU twins of the fused ops (kernels/backend.h): the reference dense layers, the
 * multi-field gather, the TD3 and DQN losses, and the optimiser step. On the GPU each of these is one launch
 * (one graph node); here each is written as the sequence of the plain ops (the oracles of cpu_ops.h) it stands
 * for, called in the same order with the same arguments, so a CPU run through the fused ops produces exactly
 * the oracles' bits, and the oracles stay the one readable reference. Two exceptions, for speed: the dense
 * layers run on the fast kernels of dense.c, and the optimiser step runs Adam and Polyak as one pass
 * (cpu_adam_polyak); tests/test_dense.c checks both against these plain sequences. */
#include <string.h>

#include "lowp.h"
#include "cpu_ops.h"

int cpu_linear_forward_ref(rlt_backend *bk, const rlt_linear_fwd *d) {
    if (d->dtype != RLT_LP_F32) return cpu_linear_forward_lp(bk, d);
    int32_t rows = d->rows, fi = d->fi, fo = d->fo, ldx = d->ldx, ldy = d->ldy;
    CPU_REQUIRE(bk, rows >= 0 && fi >= 1 && fo >= 1 && ldx >= fi && ldy >= fo, "linear_forward");
    CPU_REQUIRE(bk, d->y_dtype == RLT_LP_F32, "linear_forward");
    RLT_TRY(cpu_gemm(bk, 0, 1, rows, fo, fi, 1.0f, d->x, ldx, d->W, fi, 0.0f, d->y, ldy));
    return cpu_bias_act(bk, d->y, ldy, d->b, rows, fo, d->act);
}

int cpu_linear_backward_ref(rlt_backend *bk, const rlt_linear_bwd *d) {
    if (d->dtype != RLT_LP_F32) return cpu_linear_backward_lp(bk, d);
    int32_t rows = d->rows, fi = d->fi, fo = d->fo, lddy = d->lddy, ldx = d->ldx, lddx = d->lddx;
    const float *dy = d->dy, *x = d->x, *W = d->W;
    float *dx = d->dx;
    CPU_REQUIRE(bk, rows >= 0 && fi >= 1 && fo >= 1 && lddy >= fo && ldx >= fi, "linear_backward");
    CPU_REQUIRE(bk, !dx || (lddx >= fi && d->dx_dtype == RLT_LP_F32), "linear_backward");
    CPU_REQUIRE(bk, d->act_x >= RLT_ACT_NONE && d->act_x <= RLT_ACT_TANH, "linear_backward");
    if (d->dW) RLT_TRY(cpu_gemm(bk, 1, 0, fo, fi, rows, 1.0f, dy, lddy, x, ldx, d->beta, d->dW, fi));
    if (d->db) RLT_TRY(cpu_bias_grad(bk, d->db, dy, lddy, rows, fo, d->beta));
    if (dx) {
        RLT_TRY(cpu_gemm(bk, 0, 0, rows, fi, fo, 1.0f, dy, lddy, W, fi, 0.0f, dx, lddx));
        RLT_TRY(cpu_act_grad_plain(bk, dx, lddx, x, ldx, rows, fi, d->act_x));
    }
    return RLT_OK;
}

/* Rows [r0, r1) of gather_fields (shapes checked): their replay indices drawn, when there is a sample spec, then
 * every field's rows copied or widened. Each row depends on nothing but its own index, so any split of the rows
 * gives the whole's bits. */
typedef struct gather_job {
    int32_t *idx;
    int32_t r0, r1, n_fields;
    const rlt_sample_spec *sample;
    const rlt_gather_field *fields;
} gather_job;

static void gather_run(void *arg) {
    const gather_job *j = arg;
    if (j->sample) cpu_sample_rows(j->idx, j->r0, j->r1, j->sample);
    for (int32_t f = 0; f < j->n_fields; f++) {
        const rlt_gather_field *g = &j->fields[f];
        int wide = g->src_dtype == RLT_LP_F16 || g->src_dtype == RLT_LP_BF16;
        unsigned char *d = g->dst;
        const unsigned char *s = g->src;
        for (int32_t i = j->r0; i < j->r1; i++) {
            int64_t k = g->via ? g->via[j->idx[i]] : j->idx[i];
            const unsigned char *row = s + (uint64_t)k * g->row_bytes;
            if (!wide) {
                memcpy(d + (uint64_t)i * g->dst_stride, row, g->row_bytes);
                continue;
            }
            /* A compact replay row: each 16-bit element widened to fp32 (exact; no plain op does this). */
            float *out = (float *)(d + (uint64_t)i * g->dst_stride);
            const uint16_t *h = (const uint16_t *)row;
            for (uint64_t e = 0; e < g->row_bytes / 2; e++)
                out[e] = g->src_dtype == RLT_LP_F16 ? rlt_f16_to_f32(h[e]) : rlt_bf16_to_f32(h[e]);
        }
    }
}

/* Rows from which the gather is split between the two threads: it leads every update, so both wait for it. */
#define GATHER_SPLIT_ROWS 64

int cpu_gather_fields(rlt_backend *bk, int32_t *idx, int32_t n, const rlt_sample_spec *sample, int32_t n_fields,
                      const rlt_gather_field *fields) {
    cpu_lane_fence(bk); /* runs here: a side lane's queued ops first (lanes.c) */
    CPU_REQUIRE(bk, n >= 0 && n_fields >= 0 && n_fields <= RLT_GATHER_MAX_FIELDS, "gather_fields");
    if (sample) RLT_TRY(cpu_sample_check(bk, n, sample));
    for (int32_t f = 0; f < n_fields; f++) {
        const rlt_gather_field *g = &fields[f];
        int wide = g->src_dtype == RLT_LP_F16 || g->src_dtype == RLT_LP_BF16;
        /* 16-bit rows: even row bytes, a 2-byte aligned source, float-aligned destination rows. */
        CPU_REQUIRE(bk, g->src_dtype == RLT_LP_F32 || (wide && g->row_bytes % 2 == 0 && (uintptr_t)g->src % 2 == 0 &&
                                                   (uintptr_t)g->dst % 4 == 0 && g->dst_stride % 4 == 0),
                     "gather_fields");
        CPU_REQUIRE(bk, g->dst_stride >= rlt_gather_dst_bytes(g), "gather_fields");
    }
    gather_job j = {idx, 0, n, n_fields, sample, fields};
    if (n >= GATHER_SPLIT_ROWS && cpu_lane_can_split(bk, 1)) {
        /* The worker takes the second half of the rows (this thread runs it too when the worker has not
         * started it by then); the descriptors the job points to live until the wait below. */
        gather_job w = j;
        j.r1 = w.r0 = n / 2;
        cpu_impl *im = bk->impl;
        uint64_t t = cpu_worker_post(im->worker, CPU_JOB_FREE, 0, gather_run, &w, sizeof w);
        gather_run(&j);
        cpu_worker_wait(im->worker, t);
        return RLT_OK;
    }
    gather_run(&j);
    return RLT_OK;
}

/* With the output layers folded in (hidden > 0), the sequence it stands for: the four output layers' forwards, the
 * plain op on their outputs, then the two output layers' input gradients, each the plain op. */
static int cpu_td3_critic_heads(rlt_backend *bk, const rlt_td3_loss *d) {
    int32_t n = d->n, H = d->hidden;
    CPU_REQUIRE(bk, n >= 1 && !d->loss1 && !d->loss2, "td3_critic_loss (its output layers folded in)");
    for (int j = 0; j < 4; j++) {
        rlt_linear_fwd f = {.rows = n, .fi = H, .fo = 1, .x = d->h[j], .ldx = H, .W = d->w[j], .b = d->b[j],
                            .y = d->q_out[j], .ldy = 1, .act = RLT_ACT_NONE};
        RLT_TRY(cpu_linear_forward(bk, &f));
    }
    rlt_td3_loss l = *d;
    l.hidden = 0, l.q1 = d->q_out[0], l.q2 = d->q_out[1], l.qt1 = d->q_out[2], l.qt2 = d->q_out[3];
    RLT_TRY(cpu_td3_critic_loss(bk, &l));
    for (int k = 0; k < 2; k++) {
        rlt_linear_bwd b = {.rows = n, .fi = H, .fo = 1, .dy = k ? d->dq2 : d->dq1, .lddy = 1, .x = d->h[k], .ldx = H,
                            .act_x = RLT_ACT_RELU, .W = d->w[k], .beta = 1.0f, .dx = d->dh[k], .lddx = H};
        RLT_TRY(cpu_linear_backward(bk, &b));
    }
    return RLT_OK;
}

int cpu_td3_critic_loss(rlt_backend *bk, const rlt_td3_loss *d) {
    cpu_lane_fence(bk); /* runs here: a side lane's queued ops first (lanes.c) */
    if (d->hidden > 0) return cpu_td3_critic_heads(bk, d);
    float gamma = d->gamma_dev ? *d->gamma_dev : d->gamma; /* the agent's hparams block, when it names one */
    RLT_TRY(cpu_td3_target(bk, d->y, d->r, d->term, d->qt1, d->qt2, 1, d->n, gamma));
    RLT_TRY(cpu_mse_grad(bk, d->dq1, d->loss1, d->q1, d->y, d->n, d->grad_scale));
    return cpu_mse_grad(bk, d->dq2, d->loss2, d->q2, d->y, d->n, d->grad_scale);
}

int cpu_dqn_loss(rlt_backend *bk, const rlt_q_loss *d) {
    cpu_lane_fence(bk); /* runs here: a side lane's queued ops first (lanes.c) */
    float gamma = d->gamma_dev ? *d->gamma_dev : d->gamma; /* the agent's hparams block, when it names one */
    RLT_TRY(cpu_dqn_target(bk, d->y, NULL, d->r, d->term, d->q_next_target, d->q_next_online, d->ldqn, d->n, d->n_act,
                           gamma));
    return cpu_q_loss_grad(bk, d->dq, d->lddq, d->loss, d->q, d->ldq, d->act, d->y, d->n, d->n_act, d->huber_delta,
                           d->grad_scale);
}

int cpu_adam(rlt_backend *bk, const rlt_adam_step *d) {
    cpu_lane_fence(bk); /* runs here: a side lane's queued ops first (lanes.c) */
    uint64_t n = d->n;
    if (d->skip && *d->skip) return RLT_OK; /* an fp16 step with non-finite gradients */
    /* The agent's hparams block, where the descriptor names it, in place of the plain values. */
    rlt_adam_hp hp = d->hp;
    if (d->lr_dev) hp.lr = *d->lr_dev;
    float tau = d->tau_dev ? *d->tau_dev : d->tau;
    float max_norm = d->max_grad_norm_dev ? *d->max_grad_norm_dev : d->max_grad_norm;
    if (d->max_grad_norm > 0.0f) RLT_TRY(cpu_clip_grad_norm(bk, d->g, n, max_norm, d->norm));
    /* Adam and Polyak in one pass (flat.c): m, v and the order of operations are the plain ops', p is within
     * an ulp of cpu_adam_plain's (one division fewer). The plain sequence stays the reference
     * (tests/test_dense.c). */
    RLT_TRY(cpu_adam_polyak(bk, d->p, d->g, d->m, d->v, n, hp, d->step, d->target, tau));
    if (d->p_lp) {
        /* The compute copies follow their masters. */
        rlt_cast c = {.rows = 1, .cols = (int64_t)n, .dst = d->p_lp, .dst_dtype = d->lp_dtype, .ldd = (int64_t)n,
                      .src = d->p, .src_dtype = RLT_LP_F32, .lds = (int64_t)n};
        RLT_TRY(cpu_cast(bk, &c));
        if (d->target && d->target_lp) {
            c.dst = d->target_lp;
            c.src = d->target;
            RLT_TRY(cpu_cast(bk, &c));
        }
    }
    return RLT_OK;
}
