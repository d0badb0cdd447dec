/* op_profile.c: see op_profile.h. */
#define _POSIX_C_SOURCE 200809L
#include "op_profile.h"

#include <stdio.h>
#include <time.h>

enum { P_LIN_F, P_LIN_B, P_LIN_F_LP, P_LIN_B_LP, P_CONV_F, P_CONV_B, P_GATHER, P_GATHER_U8, P_LOSS_DQN, P_LOSS_TD3,
       P_ADAM, P_CAST, P_TD3_NOISE, P_OTHER_FILL, P_COUNT };
static const char *names[P_COUNT] = {"linear_forward", "linear_backward", "linear_forward_lp", "linear_backward_lp",
                                     "conv_forward", "conv_backward", "gather_fields", "gather_u8_f32", "dqn_loss",
                                     "td3_critic_loss", "adam_ex", "cast", "td3_target_action", "fill"};
static double total[P_COUNT];
static long calls[P_COUNT];
static const rlt_backend_ops *real;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Times one call of real->fn: sync, start, call, sync, stop. */
#define TIMED(slot, call)                  \
    do {                                   \
        real->sync(bk);                    \
        double t0_ = now();                \
        int rc_ = (call);                  \
        real->sync(bk);                    \
        total[slot] += now() - t0_;        \
        calls[slot]++;                     \
        return rc_;                        \
    } while (0)

static int w_lin_f(rlt_backend *bk, int32_t rows, int32_t fi, int32_t fo, const float *x, int32_t ldx, const float *W,
                   const float *b, float *y, int32_t ldy, int32_t act) {
    TIMED(P_LIN_F, real->linear_forward(bk, rows, fi, fo, x, ldx, W, b, y, ldy, act));
}
static int w_lin_b(rlt_backend *bk, int32_t rows, int32_t fi, int32_t fo, const float *dy, int32_t lddy, const float *x,
                   int32_t ldx, int32_t act_x, const float *W, float *dW, float *db, float beta, float *dx, int32_t lddx) {
    TIMED(P_LIN_B, real->linear_backward(bk, rows, fi, fo, dy, lddy, x, ldx, act_x, W, dW, db, beta, dx, lddx));
}
static int w_lin_f_lp(rlt_backend *bk, int32_t dt, int32_t rows, int32_t fi, int32_t fo, const void *x, int32_t ldx,
                      const void *W, const float *b, void *y, int32_t ydt, int32_t ldy, int32_t act) {
    TIMED(P_LIN_F_LP, real->linear_forward_lp(bk, dt, rows, fi, fo, x, ldx, W, b, y, ydt, ldy, act));
}
static int w_lin_b_lp(rlt_backend *bk, int32_t dt, int32_t rows, int32_t fi, int32_t fo, const void *dy, int32_t lddy,
                      const void *x, int32_t ldx, int32_t act_x, const void *W, float *dW, float *db, float beta, void *dx,
                      int32_t dxdt, int32_t lddx) {
    TIMED(P_LIN_B_LP, real->linear_backward_lp(bk, dt, rows, fi, fo, dy, lddy, x, ldx, act_x, W, dW, db, beta, dx, dxdt, lddx));
}
static int w_conv_f(rlt_backend *bk, int32_t slot, void *y, const void *x, const void *w, const float *b, int32_t act,
                    void *ws, uint64_t wsb) {
    TIMED(P_CONV_F, real->conv_forward(bk, slot, y, x, w, b, act, ws, wsb));
}
static int w_conv_b(rlt_backend *bk, int32_t slot, void *dx, float *dw, float *db, void *dy, const void *y,
                    const void *x, const void *w, int32_t act, void *ws, uint64_t wsb) {
    TIMED(P_CONV_B, real->conv_backward(bk, slot, dx, dw, db, dy, y, x, w, act, ws, wsb));
}
static int w_gather(rlt_backend *bk, int32_t *idx, int32_t n, const rlt_sample_spec *s, int32_t nf,
                    const rlt_gather_field *f) {
    TIMED(P_GATHER, real->gather_fields(bk, idx, n, s, nf, f));
}
static int w_gather_u8(rlt_backend *bk, float *dst, const uint8_t *src, uint64_t row, const int32_t *idx, int32_t n,
                       float scale) {
    TIMED(P_GATHER_U8, real->gather_u8_f32(bk, dst, src, row, idx, n, scale));
}
static int w_dqn_loss(rlt_backend *bk, float *y, float *dq, int32_t lddq, float *loss, const float *q, int32_t ldq,
                      const int32_t *act, const float *r, const float *term, const float *qnt, const float *qno,
                      int32_t ldqn, int32_t n, int32_t n_act, float gamma, float delta, float gs) {
    TIMED(P_LOSS_DQN, real->dqn_loss(bk, y, dq, lddq, loss, q, ldq, act, r, term, qnt, qno, ldqn, n, n_act, gamma, delta, gs));
}
static int w_td3_loss(rlt_backend *bk, float *y, float *dq1, float *dq2, float *l1, float *l2, const float *q1,
                      const float *q2, const float *qt1, const float *qt2, const float *r, const float *term, int32_t n,
                      float gamma, float gs) {
    TIMED(P_LOSS_TD3, real->td3_critic_loss(bk, y, dq1, dq2, l1, l2, q1, q2, qt1, qt2, r, term, n, gamma, gs));
}
static int w_adam(rlt_backend *bk, float *p, float *g, float *m, float *v, uint64_t n, rlt_adam_hp hp, const int64_t *step,
                  const rlt_adam_extra *x) {
    TIMED(P_ADAM, real->adam_ex(bk, p, g, m, v, n, hp, step, x));
}
static int w_cast(rlt_backend *bk, int32_t rows, int64_t cols, void *dst, int32_t dd, int64_t ldd, const void *src,
                  int32_t sd, int64_t lds, const float *scale) {
    TIMED(P_CAST, real->cast(bk, rows, cols, dst, dd, ldd, src, sd, lds, scale));
}
static int w_noise(rlt_backend *bk, float *a, int32_t lda, int32_t rows, int32_t cols, float std, float clip, uint64_t seed,
                   uint32_t stream, const int64_t *counter, int32_t row0) {
    TIMED(P_TD3_NOISE, real->td3_target_action(bk, a, lda, rows, cols, std, clip, seed, stream, counter, row0));
}
static int w_fill(rlt_backend *bk, float *x, uint64_t n, float v) { TIMED(P_OTHER_FILL, real->fill(bk, x, n, v)); }

int op_profile_run(rlt_agent *ag, int32_t variant, int reps) {
    static rlt_backend_ops wrapped;
    real = ag->bk.ops;
    wrapped = *real;
    wrapped.linear_forward = w_lin_f;
    wrapped.linear_backward = w_lin_b;
    wrapped.linear_forward_lp = w_lin_f_lp;
    wrapped.linear_backward_lp = w_lin_b_lp;
    wrapped.conv_forward = w_conv_f;
    wrapped.conv_backward = w_conv_b;
    wrapped.gather_fields = w_gather;
    wrapped.gather_u8_f32 = w_gather_u8;
    wrapped.dqn_loss = w_dqn_loss;
    wrapped.td3_critic_loss = w_td3_loss;
    wrapped.adam_ex = w_adam;
    wrapped.cast = w_cast;
    wrapped.td3_target_action = w_noise;
    wrapped.fill = w_fill;
    ag->bk.ops = &wrapped;
    for (int i = 0; i < P_COUNT; i++) total[i] = 0, calls[i] = 0;
    double t0 = now();
    int rc = RLT_OK;
    for (int r = 0; r < reps && rc == RLT_OK; r++) {
        rc = ag->algo->update_ops(ag, variant);
        if (rc == RLT_OK) rc = real->sync(&ag->bk);
    }
    double wall = now() - t0;
    ag->bk.ops = real;
    if (rc != RLT_OK) return rc;
    printf("  op profile (eager, each op synchronised; per update, variant %d):\n", variant);
    double sum = 0;
    for (int i = 0; i < P_COUNT; i++) {
        if (!calls[i]) continue;
        sum += total[i];
        printf("    %-20s %4ld calls %9.1f us  (%.1f us per call)\n", names[i], calls[i] / reps, 1e6 * total[i] / reps,
               1e6 * total[i] / calls[i]);
    }
    printf("    %-20s           %9.1f us  (eager wall %.1f us per update)\n", "profiled ops", 1e6 * sum / reps,
           1e6 * wall / reps);
    return RLT_OK;
}
