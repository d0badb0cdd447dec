/* lt_algos.cu: how much faster than cuBLASLt heuristic's first choice its other offers run on a seed-batched layer
 * (issue #39; XLA autotunes its products, rltrain takes the heuristic's first). For N agents' layers at one stride
 * (TD3 256-256/b256: the 256-input hidden layer and the critic's 23-input first layer), each of the heuristic's
 * offers (up to 32) is timed as a graph of REPS dependent products replayed; the line gives the first offer's
 * microseconds per product, the fastest offer's, its rank and its configuration (algorithm id, tile, stages, split-K).
 *   forward   y = relu(x W^T + b), the RELU_BIAS epilogue (as gemm_lt.c runs a batched forward)
 *   dgrad     dx = dy W (the product alone)
 *   wgrad     dW = dy^T x with the BGRADB epilogue
 *   bench_lt_algos [--reps 20] [--replays 200] [--agents 16,64]
 * Needs a GPU (exit 77 without one); built with the CUDA backend. */
#include "seed_ceiling.cuh"

/* One 4-byte field of an algorithm's configuration (-1 where the library does not say). */
static int algo_cfg(const cublasLtMatmulAlgo_t *a, cublasLtMatmulAlgoConfigAttributes_t at) {
    uint32_t v = 0;
    size_t got = 0;
    return cublasLtMatmulAlgoConfigGetAttribute(a, at, &v, sizeof v, &got) == CUBLAS_STATUS_SUCCESS ? (int)v : -1;
}

static void bench_kind(bench *B, int kind, int reps, int replays) {
    lt_plan P = lt_make(B, kind);
    if (!P.ok) {
        printf("%6d  %s  %s fi %3d: no algorithm\n", B->n, B->tf32 ? "tf32" : "fp32",
               kind == LT_FWD ? "forward" : kind == LT_DGRAD ? "dgrad  " : "wgrad  ", B->fi);
        return;
    }
    cublasLtMatmulPreference_t pref;
    CK(cublasLtMatmulPreferenceCreate(&pref));
    CK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &B->ws_bytes,
                                            sizeof B->ws_bytes));
    cublasLtMatmulHeuristicResult_t r[32];
    int found = 0;
    CK(cublasLtMatmulAlgoGetHeuristic(B->lt, P.d, P.la, P.lb, P.lc, P.lc, pref, 32, r, &found));
    cublasLtMatmulPreferenceDestroy(pref);
    double first = -1, best = 1e30;
    int best_i = -1;
    for (int i = 0; i < found; i++) {
        if (r[i].state != CUBLAS_STATUS_SUCCESS) continue;
        P.algo = r[i].algo;
        const double us = lt_chain_us(B, &P, kind, reps, replays);
        if (i == 0) first = us;
        if (us < best) best = us, best_i = i;
    }
    if (best_i < 0) {
        printf("%6d  %s  fi %3d: no usable offer\n", B->n, B->tf32 ? "tf32" : "fp32", B->fi);
        return;
    }
    const cublasLtMatmulAlgo_t *a = &r[best_i].algo;
    printf("%6d  %s  %s fi %3d: offers %2d  first %6.2f us  fastest %6.2f us (offer %2d: algo %d tile %d stages %d "
           "split-k %d custom %d)\n",
           B->n, B->tf32 ? "tf32" : "fp32", kind == LT_FWD ? "forward" : kind == LT_DGRAD ? "dgrad  " : "wgrad  ",
           B->fi,
           found, first, best, best_i, algo_cfg(a, CUBLASLT_ALGO_CONFIG_ID), algo_cfg(a, CUBLASLT_ALGO_CONFIG_TILE_ID),
           algo_cfg(a, CUBLASLT_ALGO_CONFIG_STAGES_ID), algo_cfg(a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM),
           algo_cfg(a, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION));
    fflush(stdout);
}

static void bench_case(int n, int fi, int tf32, int reps, int replays) {
    bench B;
    bench_shape(&B, n, fi, tf32);
    B.stride = bench_plain_layout(&B);
    bench_open(&B, NULL);
    for (int kind = 0; kind < 3; kind++)
        if (kind != LT_DGRAD || fi > 128) bench_kind(&B, kind, reps, replays);
    bench_close(&B, 1);
}

int main(int argc, char **argv) {
    ceiling_opts o;
    int rc = ceiling_start(argc, argv, "cuBLASLt's offers on a seed-batched layer in a CUDA graph", "ops", 0, &o);
    if (rc) return rc;
    for (int a = 0; a < o.n_agents; a++)
        for (int tf32 = 0; tf32 < 2; tf32++)
            for (int k = 0; k < 2; k++) bench_case(o.agents[a], k == 0 ? 256 : 23, tf32, o.reps, o.replays);
    return 0;
}
