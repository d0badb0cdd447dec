/* layer_chain.c: the cost of one node on an update's critical path. Captures a chain of N ops of one kind into a
 * backend graph and times its replays; capture follows stream order, so each node depends on the one before
 * whatever it reads. The figure is what a graph pays per dependent node of that kind: launch, dependency and the
 * kernel itself. A chain of 1-float fills gives the floor every node pays; dense layers at an update's shapes show
 * what the arithmetic adds.
 *
 *   bench_layer_chain [--device cuda:0] [--rows 256] [--fi 256] [--fo 256] [--nodes 32] [--reps 300]
 *                     [--only fill|fwd|bwd|bwdw]
 *
 * Prints microseconds per node, replayed from the graph and eagerly, for: fill (1 float), linear_forward
 * (ReLU), linear_backward (dW, db and dx through ReLU) and linear_backward without dx (dW and db only, as for a
 * network's first layer). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend_registry.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static rlt_backend bk;
static rlt_err err;

static void check(int rc, const char *what) {
    if (rc == RLT_OK) return;
    fprintf(stderr, "%s: %s\n", what, err.msg);
    exit(1);
}

enum { CHAIN_FILL, CHAIN_FWD, CHAIN_BWD, CHAIN_BWD_W, CHAIN_KINDS };
static const char *const chain_name[CHAIN_KINDS] = {"fill (1 float)", "linear_forward", "linear_backward",
                                                    "backward, no dx"};

typedef struct chain_bufs {
    int32_t rows, fi, fo;
    float *x[2], *W, *b, *dW, *db, *xin; /* xin: the layer input a backward reads (never written) */
} chain_bufs;

/* Node i of a chain: reads buffer i % 2 and writes the other (a dW-only backward writes dW). */
static int chain_node(int kind, const chain_bufs *c, int i) {
    const rlt_backend_ops *op = bk.ops;
    float *in = c->x[i & 1], *out = c->x[(i + 1) & 1];
    int32_t w = c->fi > c->fo ? c->fi : c->fo;
    if (kind == CHAIN_FILL) return op->flat(&bk, RLT_FLAT_FILL, out, NULL, 1, (float)i);
    /* Square layers keep the chain's shapes: fi == fo, or the activations are read at stride w. */
    rlt_linear_fwd f = {.rows = c->rows, .fi = c->fi, .fo = c->fo, .x = in, .ldx = w, .W = c->W, .b = c->b, .y = out,
                        .ldy = w, .act = RLT_ACT_RELU};
    if (kind == CHAIN_FWD) return op->linear_forward(&bk, &f);
    /* Without dx (a network's first layer) each node accumulates into the same dW: stream order chains them. */
    rlt_linear_bwd g = {.rows = c->rows, .fi = c->fi, .fo = c->fo, .dy = in, .lddy = w, .x = c->xin, .ldx = w,
                        .act_x = RLT_ACT_RELU, .W = c->W, .dW = c->dW, .db = c->db, .beta = 1.0f,
                        .dx = kind == CHAIN_BWD_W ? NULL : out, .lddx = w};
    return op->linear_backward(&bk, &g);
}

int main(int argc, char **argv) {
    const char *device = "cuda:0";
    int32_t rows = 256, fi = 256, fo = 256, nodes = 32, reps = 300, only = -1;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *a = argv[i], *v = argv[i + 1];
        if (!strcmp(a, "--device")) device = v;
        else if (!strcmp(a, "--rows")) rows = atoi(v);
        else if (!strcmp(a, "--fi")) fi = atoi(v);
        else if (!strcmp(a, "--fo")) fo = atoi(v);
        else if (!strcmp(a, "--nodes")) nodes = atoi(v);
        else if (!strcmp(a, "--reps")) reps = atoi(v);
        else if (!strcmp(a, "--only")) {
            static const char *const flag[CHAIN_KINDS] = {"fill", "fwd", "bwd", "bwdw"};
            for (only = CHAIN_KINDS - 1; only >= 0 && strcmp(v, flag[only]); only--) {}
            if (only < 0) {
                fprintf(stderr, "--only takes fill, fwd, bwd or bwdw\n");
                return 2;
            }
        } else {
            fprintf(stderr, "unknown option %s\n", a);
            return 2;
        }
    }
    if (rows < 1 || fi < 1 || fo < 1 || nodes < 2 || reps < 1) {
        fprintf(stderr, "sizes must be positive (nodes at least 2)\n");
        return 2;
    }
    check(rlt_backend_open(&bk, &err, device, 1, NULL, 0), "open");
    if (!bk.ops->graph(&bk, RLT_GRAPH_SUPPORTED, 0)) {
        fprintf(stderr, "%s has no graphs: nothing to time\n", device);
        return 1;
    }
    int32_t w = fi > fo ? fi : fo;
    uint64_t ws = (rlt_backend_workspace_need(&bk) + 255) & ~255ull;
    uint64_t n_act = (uint64_t)rows * w, n_w = (uint64_t)fi * fo;
    uint64_t bytes = ws + 4 * (3 * n_act + 2 * n_w + 2 * (uint64_t)w) + 8 * 256;
    void *base;
    check(bk.ops->reserve(&bk, RLT_LOC_DEVICE, bytes, &base), "reserve");
    check(bk.ops->workspace(&bk, base, ws, NULL), "workspace");
    float *p = (float *)((char *)base + ws);
    chain_bufs c = {rows, fi, fo, {NULL, NULL}, NULL, NULL, NULL, NULL, NULL};
    float **slots[] = {&c.x[0], &c.x[1], &c.xin, &c.W, &c.dW, &c.b, &c.db};
    uint64_t sizes[] = {n_act, n_act, n_act, n_w, n_w, (uint64_t)w, (uint64_t)w};
    float *host = malloc(4 * (n_act > n_w ? n_act : n_w));
    for (int s = 0; s < 7; s++) {
        *slots[s] = p;
        /* Small positive values: ReLU passes them and a chain of layers neither overflows nor vanishes. */
        for (uint64_t j = 0; j < sizes[s]; j++) host[j] = (float)((j * 2654435761u) % 1000) * (1.0f / 256000.0f);
        check(bk.ops->copy(&bk, p, host, 4 * sizes[s], RLT_COPY_H2D), "copy");
        p += (sizes[s] + 63) & ~63ull;
    }
    free(host);
    check(bk.ops->sync(&bk), "sync");
    printf("device %s, rows %d, fi %d, fo %d, %d nodes per chain, %d replays\n", device, rows, fi, fo, nodes, reps);
    printf("%-18s %14s %14s\n", "op", "graph us/node", "eager us/op");
    for (int kind = 0; kind < CHAIN_KINDS; kind++) {
        if (only >= 0 && kind != only) continue;
        check(bk.ops->graph(&bk, RLT_GRAPH_BEGIN, 0), "graph_begin");
        for (int i = 0; i < nodes; i++) check(chain_node(kind, &c, i), chain_name[kind]);
        check(bk.ops->graph(&bk, RLT_GRAPH_END, 0), "graph_end");
        for (int r = 0; r < 20; r++) check(bk.ops->graph(&bk, RLT_GRAPH_LAUNCH, 0), "graph_launch");
        check(bk.ops->sync(&bk), "sync");
        double t0 = now_s();
        for (int r = 0; r < reps; r++) check(bk.ops->graph(&bk, RLT_GRAPH_LAUNCH, 0), "graph_launch");
        check(bk.ops->sync(&bk), "sync");
        double graph_us = (now_s() - t0) * 1e6 / ((double)reps * nodes);
        t0 = now_s();
        for (int r = 0; r < reps / 10 + 1; r++)
            for (int i = 0; i < nodes; i++) check(chain_node(kind, &c, i), chain_name[kind]);
        check(bk.ops->sync(&bk), "sync");
        double eager_us = (now_s() - t0) * 1e6 / ((double)(reps / 10 + 1) * nodes);
        printf("%-18s %14.2f %14.2f\n", chain_name[kind], graph_us, eager_us);
    }
    bk.ops->release(&bk, RLT_LOC_DEVICE, base);
    rlt_backend_close(&bk);
    return 0;
}
