/* backend_pair.c: see backend_pair.h. */
#include "backend_pair.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_registry.h"
#include "harness.h"

backend_pair P;
static uint64_t rng_state = 0x243F6A8885A308D3ull;

uint64_t pair_rnd_u64(void) {
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

float pair_rnd_f(float lo, float hi) { return lo + (hi - lo) * (float)((pair_rnd_u64() >> 40) * (1.0 / 16777216.0)); }

void pair_rnd_fill(float *x, size_t n, float lo, float hi) {
    for (size_t i = 0; i < n; i++) x[i] = pair_rnd_f(lo, hi);
}

void pair_set_tf32(int on) {
    rlt_op_use u = {.dense_rows = 1024, .dense_in = 1024, .dense_out = 1024, .dense_tf32 = on};
    uint64_t ws = 0;
    pair_die_on(P.gpu.ops->plan_workspace(&P.gpu, &u, &ws), &P.egpu, "plan_workspace (dense_tf32)");
}

void pair_die_on(int rc, rlt_err *e, const char *what) {
    if (rc == RLT_OK) return;
    fprintf(stderr, "FATAL: %s failed: %s\n", what, e->msg);
    exit(1);
}

void pair_open(uint64_t bytes) {
    /* Tests link the engine statically: point the registry at the module in the build tree. */
    setenv("RLT_CUDA_MODULE", RLT_BINARY_DIR "/librltrain_cuda.so", 0);
    setvbuf(stdout, NULL, _IOLBF, 0);
    pair_die_on(rlt_backend_open(&P.cpu, &P.ecpu, "cpu", 1, NULL, 0), &P.ecpu, "opening the CPU backend");
    /* cuda:0, with room for a seed batch of 32 (gpu_ops_parity's batched chains of layers take 8, its seeds on the
     * library 32, where every product goes there); the text form of the open would reset the count */
    P.gpu.lanes = 0, P.gpu.seeds = 32;
    if (rlt_backend_open_device(&P.gpu, &P.egpu, (rlt_device){RLT_DEVICE_CUDA, 0}, 1, NULL, 0) != RLT_OK) {
        char why[2200];
        snprintf(why, sizeof why, "no CUDA backend: %s", P.egpu.msg);
        rlt_backend_close(&P.cpu);
        test_skip(why);
    }
    printf("device %s\n", P.gpu.device_name);
    uint64_t ws = rlt_backend_workspace_need(&P.gpu);
    void *cb = NULL, *gb = NULL;
    pair_die_on(P.cpu.ops->reserve(&P.cpu, RLT_LOC_DEVICE, bytes, &cb), &P.ecpu, "cpu reserve");
    pair_die_on(P.gpu.ops->reserve(&P.gpu, RLT_LOC_DEVICE, bytes, &gb), &P.egpu, "gpu reserve");
    P.cbase = cb;
    P.gbase = gb;
    P.bytes = bytes;
    pair_die_on(P.gpu.ops->workspace(&P.gpu, gb, ws, NULL), &P.egpu, "workspace");
    P.used = P.mark = (ws + 255) & ~255ull;
}

void pair_close(void) {
    P.gpu.ops->sync(&P.gpu);
    P.cpu.ops->release(&P.cpu, RLT_LOC_DEVICE, P.cbase);
    P.gpu.ops->release(&P.gpu, RLT_LOC_DEVICE, P.gbase);
    rlt_backend_close(&P.gpu);
    rlt_backend_close(&P.cpu);
}

void pair_take(uint64_t bytes, void **c, void **g) {
    uint64_t off = (P.used + 255) & ~255ull;
    if (off + bytes > P.bytes) {
        fprintf(stderr, "FATAL: test arena exhausted\n");
        exit(1);
    }
    *c = P.cbase + off;
    *g = P.gbase + off;
    P.used = off + bytes;
}

void pair_reset(void) { P.used = P.mark; }

void pair_put(void *c, void *g, const void *host, uint64_t bytes) {
    pair_die_on(P.cpu.ops->copy(&P.cpu, c, host, bytes, RLT_COPY_H2D), &P.ecpu, "cpu copy");
    pair_die_on(P.gpu.ops->copy(&P.gpu, g, host, bytes, RLT_COPY_H2D), &P.egpu, "gpu copy");
    pair_die_on(P.gpu.ops->sync(&P.gpu), &P.egpu, "gpu sync");
}

void pair_fetch(void *host_c, void *host_g, const void *c, const void *g, uint64_t bytes) {
    pair_die_on(P.gpu.ops->sync(&P.gpu), &P.egpu, "gpu sync before fetch");
    memcpy(host_c, c, bytes);
    pair_die_on(P.gpu.ops->copy(&P.gpu, host_g, g, bytes, RLT_COPY_D2H), &P.egpu, "gpu copy back");
    pair_die_on(P.gpu.ops->sync(&P.gpu), &P.egpu, "gpu sync after fetch");
}
