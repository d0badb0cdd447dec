/* test_grad.c: gradients of every layer and loss against central finite differences (in double, from
 * float parameters), the optimiser step (adam) against values computed by hand from Adam's definition, Polyak
 * averaging, and the TD3 pieces (target smoothing, the critic loss's target and gradients) against their
 * formulas. All on the CPU backend; the MSE gradient and the refused GEMM through its oracles (cpu_ops.h). */
#include <string.h>

#include "../agents/mlp.h"
#include "backend_registry.h"
#include "harness.h"
#include "kernels/cpu/cpu_ops.h"
#include "mem.h"

static rlt_backend bk;
static rlt_err err;

/* Loss for the finite-difference checks: L = sum_i w_i * out_i, a fixed random projection, so every
 * output's gradient path is exercised with a different weight. */
static double proj_loss(rlt_mlp *net, const float *params, const float *x, int rows, const float *w, float *out) {
    CHECK(mlp_forward(&bk, net, params, NULL, x, net->dims[0], rows, out, net->dims[net->n_layers]) == RLT_OK, "forward");
    double L = 0;
    for (int i = 0; i < rows * net->dims[net->n_layers]; i++) L += (double)w[i] * out[i];
    return L;
}

static void check_mlp(int act_hidden, int act_out, const char *what) {
    rlt_mlp net;
    int32_t hidden[2] = {7, 5};
    int rows = 4, in = 3, outd = 2;
    CHECK(mlp_define(&net, &err, in, hidden, 2, outd, act_hidden, act_out) == RLT_OK, "define");
    uint64_t np = mlp_param_count(&net);
    /* Each W and b block starts on RLT_PARAM_ALIGN floats: 21, 7, 35, 5, 10, 2 become 32, 16, 48, 16, 16, 16. */
    CHECK(np == (uint64_t)(32 + 16 + 48 + 16 + 16 + 16), "param count %llu", (unsigned long long)np);
    static float params[256], grads[256], x[64], dx[64], w[64], out[64], dout[64], h[512], dh[512];
    net.batch = rows;
    net.h = h;
    net.dh = dh;
    rlt_rng rng;
    rlt_rng_init(&rng, 42, 9);
    mlp_init_params(&net, params, &rng);
    for (int i = 0; i < rows * in; i++) x[i] = 2.0f * rlt_rng_uniform(&rng) - 1.0f;
    for (int i = 0; i < rows * outd; i++) w[i] = 2.0f * rlt_rng_uniform(&rng) - 1.0f;
    proj_loss(&net, params, x, rows, w, out);
    memcpy(dout, w, sizeof(float) * rows * outd);
    memset(grads, 0, sizeof grads);
    CHECK(mlp_backward(&bk, &net, params, NULL, grads, x, in, rows, dout, outd, NULL, dx, in) == RLT_OK, "backward");
    /* Central differences with h = 1e-3 on float parameters: truncation error O(h^2) ~ 1e-6 and float
     * rounding of the loss ~ 1e-7 / h ~ 1e-4 relative; 2e-3 absolute + 2e-2 relative leaves margin while
     * still catching a wrong index, transpose or activation derivative (errors of order 1). ReLU kinks are
     * avoided: a parameter whose perturbation flips a unit is skipped. */
    const double hstep = 1e-3;
    int checked = 0;
    for (uint64_t i = 0; i < np; i++) {
        float keep = params[i];
        params[i] = keep + (float)hstep;
        double lp = proj_loss(&net, params, x, rows, w, out);
        params[i] = keep - (float)hstep;
        double lm = proj_loss(&net, params, x, rows, w, out);
        params[i] = keep;
        double fd = (lp - lm) / (2 * hstep);
        CHECK_NEAR(grads[i], fd, 2e-3, 2e-2, what);
        checked++;
    }
    for (int i = 0; i < rows * in; i++) {
        float keep = x[i];
        x[i] = keep + (float)hstep;
        double lp = proj_loss(&net, params, x, rows, w, out);
        x[i] = keep - (float)hstep;
        double lm = proj_loss(&net, params, x, rows, w, out);
        x[i] = keep;
        CHECK_NEAR(dx[i], (lp - lm) / (2 * hstep), 2e-3, 2e-2, what);
    }
    CHECK(checked == (int)np, "all parameters checked");
}

static void check_mse(void) {
    float q[5] = {0.5f, -1.0f, 2.0f, 0.0f, 3.0f}, y[5] = {1.0f, -1.5f, 2.5f, 0.25f, -1.0f}, dq[5], loss;
    CHECK(cpu_mse_grad(&bk, dq, &loss, q, y, 5, 1.0f) == RLT_OK, "mse");
    double want = 0;
    for (int i = 0; i < 5; i++) want += (double)(q[i] - y[i]) * (q[i] - y[i]) / 5;
    CHECK_NEAR(loss, want, 1e-6, 1e-6, "mse loss");
    for (int i = 0; i < 5; i++) {
        /* d/dq_i of mean (q - y)^2 by finite differences */
        double h = 1e-3, lp = 0, lm = 0;
        for (int j = 0; j < 5; j++) {
            double qp = q[j] + (j == i ? h : 0), qm = q[j] - (j == i ? h : 0);
            lp += (qp - y[j]) * (qp - y[j]) / 5;
            lm += (qm - y[j]) * (qm - y[j]) / 5;
        }
        CHECK_NEAR(dq[i], (lp - lm) / (2 * h), 1e-5, 1e-4, "mse grad");
    }
}

static void check_adam(void) {
    /* Two steps by hand: lr 0.1, b1 0.9, b2 0.999, eps 1e-8, p0 = 1, g = 0.5 then -0.25.
     * t=1: m = 0.05, v = 0.00025, mhat = 0.5, vhat = 0.25, p = 1 - 0.1 * 0.5 / (0.5 + 1e-8) = 0.9
     * t=2: m = 0.045 - 0.025 = 0.02, v = 0.00024975 + 0.0000625 = 0.00031225,
     *      mhat = 0.02 / 0.19 = 0.105263..., vhat = 0.00031225 / 0.001999 = 0.156203...,
     *      p = 0.9 - 0.1 * 0.105263 / (0.395225 + 1e-8) = 0.873366... */
    float p = 1.0f, g = 0.5f, m = 0.0f, v = 0.0f;
    int64_t step = 1;
    rlt_adam_step st = {.p = &p, .g = &g, .m = &m, .v = &v, .n = 1, .hp = {0.1f, 0.9f, 0.999f, 1e-8f}, .step = &step};
    CHECK(bk.ops->adam(&bk, &st) == RLT_OK, "adam");
    CHECK_NEAR(m, 0.05, 1e-7, 1e-6, "adam m1");
    CHECK_NEAR(v, 0.00025, 1e-9, 1e-5, "adam v1");
    CHECK_NEAR(p, 0.9, 1e-6, 1e-6, "adam p1");
    g = -0.25f;
    step = 2;
    CHECK(bk.ops->adam(&bk, &st) == RLT_OK, "adam");
    double mhat = 0.02 / 0.19, vhat = 0.00031225 / (1 - 0.999 * 0.999);
    double want = 0.9 - 0.1 * mhat / (sqrt(vhat) + 1e-8);
    CHECK_NEAR(m, 0.02, 1e-7, 1e-5, "adam m2");
    CHECK_NEAR(v, 0.00031225, 1e-9, 1e-5, "adam v2");
    CHECK_NEAR(p, want, 1e-6, 1e-5, "adam p2");
    step = 0;
    CHECK(bk.ops->adam(&bk, &st) == RLT_EINVAL, "adam refuses step 0");
}

static void check_polyak_and_td3(void) {
    float t[3] = {1, 2, 3}, s[3] = {3, 2, 1};
    CHECK(bk.ops->flat(&bk, RLT_FLAT_POLYAK, t, s, 3, 0.25f) == RLT_OK, "polyak");
    CHECK_NEAR(t[0], 1.5, 1e-7, 0, "polyak 0");
    CHECK_NEAR(t[1], 2.0, 1e-7, 0, "polyak 1");
    CHECK_NEAR(t[2], 2.5, 1e-7, 0, "polyak 2");
    /* The critic loss's target: y = r + gamma (1 - term) min(Q1', Q2'); the gradients are mse's. */
    float r[2] = {1.0f, -2.0f}, term[2] = {0.0f, 1.0f}, q1[2] = {5.0f, 7.0f}, q2[2] = {4.0f, 9.0f}, y[2];
    float qo[2] = {2.5f, -1.0f}, dq1[2], dq2[2], l1, l2;
    rlt_td3_loss tl = {.y = y, .dq1 = dq1, .dq2 = dq2, .loss1 = &l1, .loss2 = &l2, .q1 = qo, .q2 = q1, .qt1 = q1,
                       .qt2 = q2, .r = r, .term = term, .n = 2, .gamma = 0.5f, .grad_scale = 1.0f};
    CHECK(bk.ops->td3_critic_loss(&bk, &tl) == RLT_OK, "td3_critic_loss");
    CHECK_NEAR(y[0], 1.0 + 0.5 * 4.0, 1e-6, 0, "clipped double-Q uses the min");
    CHECK_NEAR(y[1], -2.0, 1e-6, 0, "terminal transitions do not bootstrap");
    CHECK_NEAR(dq1[0], 2.0 * (2.5 - 3.0) / 2, 1e-6, 0, "dq1 = 2 (q1 - y) / n");
    CHECK_NEAR(dq2[1], 2.0 * (7.0 + 2.0) / 2, 1e-6, 0, "dq2 = 2 (q2 - y) / n");
    CHECK_NEAR(l1, (0.25 + 1.0) / 2, 1e-6, 0, "loss1 = mean (q1 - y)^2");
    CHECK_NEAR(l2, (4.0 + 81.0) / 2, 1e-6, 0, "loss2 = mean (q2 - y)^2");
    /* Target smoothing: noise is clipped to +-clip and the action to [-1, 1]. */
    float a[200];
    int64_t ctr = 3;
    for (int i = 0; i < 200; i++) a[i] = 0.0f;
    rlt_target_noise tn = {.a = a, .lda = 2, .rows = 100, .cols = 2, .std = 0.2f, .clip = 0.5f, .seed = 7, .stream = 3,
                           .counter = &ctr};
    CHECK(bk.ops->td3_target_action(&bk, &tn) == RLT_OK, "target action");
    double mean = 0, var = 0;
    int clipped = 0;
    for (int i = 0; i < 200; i++) {
        CHECK(fabsf(a[i]) <= 0.5f, "noise clipped to 0.5: %g", a[i]);
        mean += a[i] / 200.0;
        clipped += fabsf(a[i]) == 0.5f;
    }
    for (int i = 0; i < 200; i++) var += (a[i] - mean) * (a[i] - mean) / 199.0;
    CHECK(fabs(mean) < 0.05, "noise mean %g", mean);
    CHECK(sqrt(var) > 0.15 && sqrt(var) < 0.25, "noise std %g (0.2 before clipping)", sqrt(var));
    for (int i = 0; i < 200; i++) a[i] = 0.95f;
    CHECK(bk.ops->td3_target_action(&bk, &tn) == RLT_OK, "target action");
    for (int i = 0; i < 200; i++) CHECK(a[i] <= 1.0f && a[i] >= 0.45f, "action clipped to [-1, 1]: %g", a[i]);
}

static void check_shapes_refused(void) {
    float x[4];
    rlt_linear_fwd f = {.rows = 2, .fi = 2, .fo = 2, .x = x, .ldx = 1, .W = x, .y = x, .ldy = 2, .act = RLT_ACT_RELU};
    CHECK(bk.ops->linear_forward(&bk, &f) == RLT_EINVAL, "linear_forward ldx < fi refused");
    CHECK(strstr(err.msg, "linear_forward") != NULL, "message names the op: %s", err.msg);
    CHECK(bk.ops->act_grad(&bk, x, 1, x, 2, 2, 2, RLT_ACT_RELU) == RLT_EINVAL, "act_grad ld < cols refused");
    CHECK(cpu_gemm(&bk, 0, 0, 2, 2, 2, 1.0f, x, 1, x, 2, 0.0f, x, 2) == RLT_EINVAL, "gemm lda < k refused");
    CHECK(strstr(err.msg, "gemm") != NULL, "message names the oracle: %s", err.msg);
}

int main(void) {
    CHECK(rlt_backend_open(&bk, &err, "cpu", 1, NULL, 0) == RLT_OK, "cpu backend: %s", err.msg);
    check_mlp(RLT_ACT_TANH, RLT_ACT_NONE, "mlp tanh/linear");
    check_mlp(RLT_ACT_RELU, RLT_ACT_TANH, "mlp relu/tanh");
    check_mse();
    check_adam();
    check_polyak_and_td3();
    check_shapes_refused();
    rlt_backend_close(&bk);
    return test_summary("test_grad");
}
