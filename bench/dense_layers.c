/* dense_layers.c: times the CPU backend's dense-layer ops one shape at a time, the fast kernels next to
 * the reference (CBLAS + separate passes), so a kernel change can be judged per product before the whole
 * update. Shapes: rows fi fo (default: the layers of the 64-64 Pendulum and the 256-256 HalfCheetah TD3).
 *
 *   bench_dense_layers [rows fi fo]...
 *
 * Prints microseconds per call (best of 7 repeats) and the GFLOP/s for the forward, the backward's dW and
 * the backward's dx. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/cpu/cpu_ops.h"
#include "mem.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct shape {
    int32_t rows, fi, fo;
} shape;

enum { PASS_FWD, PASS_DW, PASS_DX, PASS_COUNT };

static double time_pass(rlt_backend *bk, int pass, shape s, float *x, float *W, float *b, float *y, float *dW,
                        float *db, float *dx) {
    const rlt_backend_ops *op = bk->ops;
    int reps = (int)(2e7 / ((double)s.rows * s.fi * s.fo + 1e4)) + 1;
    double best = 1e30;
    for (int t = 0; t < 7; t++) {
        double t0 = now_s();
        rlt_linear_fwd f = {.rows = s.rows, .fi = s.fi, .fo = s.fo, .x = x, .ldx = s.fi, .W = W, .b = b, .y = y,
                            .ldy = s.fo, .act = RLT_ACT_RELU};
        /* dW and db alone (PASS_DW), or dx alone. */
        rlt_linear_bwd g = {.rows = s.rows, .fi = s.fi, .fo = s.fo, .dy = y, .lddy = s.fo, .x = x, .ldx = s.fi,
                            .act_x = RLT_ACT_RELU, .W = W, .beta = 1.0f};
        if (pass == PASS_DW) g.dW = dW, g.db = db;
        else g.dx = dx, g.lddx = s.fi;
        for (int i = 0; i < reps; i++) {
            int rc = pass == PASS_FWD ? op->linear_forward(bk, &f) : op->linear_backward(bk, &g);
            if (rc != RLT_OK) return -1.0;
        }
        double dt = (now_s() - t0) / reps;
        if (dt < best) best = dt;
    }
    return best;
}

int main(int argc, char **argv) {
    shape def[] = {{100, 4, 64}, {100, 64, 64}, {100, 64, 1}, {100, 3, 64}, {256, 23, 256}, {256, 256, 256},
                   {256, 256, 1}, {256, 256, 6}, {1, 64, 64}};
    shape sh[32];
    int n = 0;
    if (argc > 1) {
        for (int i = 1; i + 2 < argc && n < 32; i += 3) sh[n++] = (shape){atoi(argv[i]), atoi(argv[i + 1]), atoi(argv[i + 2])};
    } else {
        n = (int)(sizeof def / sizeof def[0]);
        memcpy(sh, def, sizeof def);
    }
    rlt_err err = {0};
    rlt_backend bk_ref = {0}, bk_fast = {0};
    bk_ref.ops = bk_fast.ops = rlt_cpu_backend_ops();
    bk_ref.err = bk_fast.err = &err;
    if (bk_fast.ops->open(&bk_fast, -1, 1) != RLT_OK || bk_ref.ops->open(&bk_ref, -1, 1) != RLT_OK) {
        fprintf(stderr, "open: %s\n", err.msg);
        return 1;
    }
    ((cpu_impl *)bk_ref.impl)->dense = NULL;
    float *pack = rlt_mem_alloc(CPU_DENSE_PACK_FLOATS * sizeof(float), 64);
    bk_fast.ops->workspace(&bk_fast, pack, CPU_DENSE_PACK_FLOATS * sizeof(float), NULL);
    const cpu_impl *fi = bk_fast.impl;
    printf("dense layers: us per call (best of 7), reference (CBLAS + passes) vs fast (%s)\n",
           fi->dense ? fi->dense->name : "none: reference");
    printf("%-16s %-8s %10s %10s %8s %10s\n", "rows x fi x fo", "pass", "ref us", "fast us", "speedup", "fast GF/s");
    for (int k = 0; k < n; k++) {
        shape s = sh[k];
        size_t big = (size_t)(s.rows + 1) * (s.fi + s.fo + 1) + (size_t)s.fi * s.fo + 64;
        float *x = rlt_mem_alloc(big * 4, 64), *W = rlt_mem_alloc(big * 4, 64), *b = rlt_mem_alloc(big * 4, 64);
        float *y = rlt_mem_alloc(big * 4, 64), *dW = rlt_mem_alloc(big * 4, 64), *db = rlt_mem_alloc(big * 4, 64);
        float *dx = rlt_mem_alloc(big * 4, 64);
        srand(7);
        for (size_t i = 0; i < big; i++) {
            x[i] = rand() / (float)RAND_MAX - 0.3f;
            W[i] = (rand() / (float)RAND_MAX - 0.5f) * 0.1f;
            b[i] = 0.01f;
        }
        const char *names[PASS_COUNT] = {"forward", "dW+db", "dx"};
        for (int p = 0; p < PASS_COUNT; p++) {
            double tr = time_pass(&bk_ref, p, s, x, W, b, y, dW, db, dx);
            double tf = time_pass(&bk_fast, p, s, x, W, b, y, dW, db, dx);
            double fl = 2.0 * s.rows * s.fi * s.fo;
            char nm[32];
            snprintf(nm, sizeof nm, "%dx%dx%d", s.rows, s.fi, s.fo);
            printf("%-16s %-8s %10.2f %10.2f %7.2fx %10.1f\n", nm, names[p], tr * 1e6, tf * 1e6, tr / tf, fl / tf * 1e-9);
        }
        rlt_mem_free(x); rlt_mem_free(W); rlt_mem_free(b); rlt_mem_free(y); rlt_mem_free(dW); rlt_mem_free(db);
        rlt_mem_free(dx);
    }
    rlt_mem_free(pack);
    bk_fast.ops->close(&bk_fast);
    bk_ref.ops->close(&bk_ref);
    return 0;
}
