/* op_profile.c: see op_profile.h. */
#define _POSIX_C_SOURCE 200809L
#include "op_profile.h"

#include <stdio.h>
#include <time.h>

enum { P_LIN_F, P_LIN_CHAIN, P_LIN_B, P_LIN_F_LP, P_LIN_B_LP, P_CONV_F, P_CONV_B, P_GATHER, P_GATHER_U8, P_LOSS_DQN,
       P_LOSS_TD3, P_ADAM, P_CAST, P_TD3_NOISE, P_OTHER_FLAT, P_COUNT };
static const char *names[P_COUNT] = {"linear_forward", "linear_chain_forward", "linear_backward", "linear_forward 16b",
                                     "linear_backward 16b", "conv_forward", "conv_backward", "gather_fields",
                                     "gather_u8_f32", "dqn_loss", "td3_critic_loss", "adam", "cast", "td3_target_action",
                                     "flat"};
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

static int w_lin_f(rlt_backend *bk, const rlt_linear_fwd *d) {
    TIMED(d->dtype == RLT_LP_F32 ? P_LIN_F : P_LIN_F_LP, real->linear_forward(bk, d));
}
static int w_lin_chain(rlt_backend *bk, const rlt_linear_fwd *d, int32_t n) {
    TIMED(P_LIN_CHAIN, real->linear_chain_forward(bk, d, n));
}
static int w_lin_b(rlt_backend *bk, const rlt_linear_bwd *d) {
    TIMED(d->dtype == RLT_LP_F32 ? P_LIN_B : P_LIN_B_LP, real->linear_backward(bk, d));
}
static int w_conv_f(rlt_backend *bk, const rlt_conv_fwd *d) { TIMED(P_CONV_F, real->conv_forward(bk, d)); }
static int w_conv_b(rlt_backend *bk, const rlt_conv_bwd *d) { TIMED(P_CONV_B, real->conv_backward(bk, d)); }
static int w_gather(rlt_backend *bk, int32_t *idx, int32_t n, const rlt_sample_spec *s, int32_t nf,
                    const rlt_gather_field *f) {
    TIMED(P_GATHER, real->gather_fields(bk, idx, n, s, nf, f));
}
static int w_gather_u8(rlt_backend *bk, float *dst, const uint8_t *src, uint64_t row, const int32_t *idx, int32_t n,
                       float scale) {
    TIMED(P_GATHER_U8, real->gather_u8_f32(bk, dst, src, row, idx, n, scale));
}
static int w_dqn_loss(rlt_backend *bk, const rlt_q_loss *d) { TIMED(P_LOSS_DQN, real->dqn_loss(bk, d)); }
static int w_td3_loss(rlt_backend *bk, const rlt_td3_loss *d) { TIMED(P_LOSS_TD3, real->td3_critic_loss(bk, d)); }
static int w_adam(rlt_backend *bk, const rlt_adam_step *d) { TIMED(P_ADAM, real->adam(bk, d)); }
static int w_cast(rlt_backend *bk, const rlt_cast *d) { TIMED(P_CAST, real->cast(bk, d)); }
static int w_noise(rlt_backend *bk, const rlt_target_noise *d) { TIMED(P_TD3_NOISE, real->td3_target_action(bk, d)); }
static int w_flat(rlt_backend *bk, rlt_flat_mode mode, float *dst, const float *src, uint64_t n, float v) {
    TIMED(P_OTHER_FLAT, real->flat(bk, mode, dst, src, n, v));
}

int op_profile_run(rlt_agent *ag, int32_t variant, int reps) {
    static rlt_backend_ops wrapped;
    real = ag->bk.ops;
    wrapped = *real;
    wrapped.linear_forward = w_lin_f;
    wrapped.linear_chain_forward = w_lin_chain;
    wrapped.linear_backward = w_lin_b;
    wrapped.conv_forward = w_conv_f;
    wrapped.conv_backward = w_conv_b;
    wrapped.gather_fields = w_gather;
    wrapped.gather_u8_f32 = w_gather_u8;
    wrapped.dqn_loss = w_dqn_loss;
    wrapped.td3_critic_loss = w_td3_loss;
    wrapped.adam = w_adam;
    wrapped.cast = w_cast;
    wrapped.td3_target_action = w_noise;
    wrapped.flat = w_flat;
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
