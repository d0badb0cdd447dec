/* lt_space.cu: the whole of cuBLASLt's algorithm space on a seed-batched layer, not only its heuristic's offers
 * (issue #39's ceiling question: the heuristic picks sm80 mma.sync kernels for N agents' 256 x 256 x 256 TF32
 * products; does the library hold a faster one, an sm90 kernel say, that a fixed rule could ask for?).
 * For each algorithm id the library lists for the types, every tile, stage count, cluster shape (auto, 1x1, 2x1,
 * 1x2, 2x2) and CTA swizzle it accepts (cublasLtMatmulAlgoCheck, within the workspace) is timed as 12 launches on a
 * stream; the five fastest are re-timed as a graph of REPS dependent products, and their outputs compared with the
 * heuristic's first offer on random inputs (relative to the largest entry).
 *   bench_lt_space [--reps 20] [--replays 100] [--agents 16,64]
 * Needs a GPU (exit 77 without one); built with the CUDA backend. */
#include "seed_ceiling.cuh"

#include <math.h>

#include <algorithm>
#include <chrono>
#include <vector>

typedef struct cand {
    cublasLtMatmulAlgo_t algo;
    double us;
    int id, tile, stages, cluster, swz, custom;
} cand;

static uint32_t cap_u32s(const cublasLtMatmulAlgo_t *a, cublasLtMatmulAlgoCapAttributes_t at, uint32_t *v, int max) {
    size_t got = 0;
    if (cublasLtMatmulAlgoCapGetAttribute(a, at, NULL, 0, &got) != CUBLAS_STATUS_SUCCESS || got == 0) return 0;
    int n = (int)(got / sizeof(uint32_t));
    if (n > max) n = max;
    cublasLtMatmulAlgoCapGetAttribute(a, at, v, n * sizeof(uint32_t), &got);
    return (uint32_t)n;
}

/* Microseconds per product over `n` plain launches on the stream (after 2 warm-ups); -1 when a launch fails. */
static double stream_us(bench *B, lt_plan *P, int kind, int n) {
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    double us = -1;
    for (int i = 0; i < n + 2; i++) {
        if (i == 2) CK(cudaEventRecord(e0, B->s));
        if (lt_issue(B, P, kind) != CUBLAS_STATUS_SUCCESS) goto out;
    }
    CK(cudaEventRecord(e1, B->s));
    if (cudaEventSynchronize(e1) == cudaSuccess) {
        float ms = 0;
        cudaEventElapsedTime(&ms, e0, e1);
        us = 1000.0 * ms / n;
    }
out:
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    return us;
}

/* Every agent's output of `kind` after plan P's product, one agent after another (copied from the whole arena). */
static std::vector<float> outputs_of(bench *B, lt_plan *P, int kind) {
    const size_t per = kind == LT_WGRAD ? (size_t)B->fo * B->fi : kind == LT_DGRAD ? (size_t)B->rows * B->fi
                                                                                     : (size_t)B->rows * B->fo;
    lt_run(B, P, kind);
    CK(cudaStreamSynchronize(B->s)); /* B->s does not wait for the legacy stream's copy, nor it for B->s */
    std::vector<float> full((size_t)B->n * B->stride), out((size_t)B->n * per);
    CK(cudaMemcpy(full.data(), B->base, full.size() * sizeof(float), cudaMemcpyDeviceToHost));
    const int64_t at = lt_out(B, kind) - B->base;
    for (int a = 0; a < B->n; a++)
        memcpy(&out[(size_t)a * per], &full[(size_t)a * B->stride + at], per * sizeof(float));
    return out;
}

static const char *kind_name(int kind) { return kind == LT_FWD ? "forward" : kind == LT_DGRAD ? "dgrad  " : "wgrad  "; }

static void search(bench *B, int kind, int reps, int replays) {
    lt_plan P = lt_make(B, kind);
    if (!P.ok) {
        printf("%4d %s %s: no heuristic algorithm\n", B->n, B->tf32 ? "tf32" : "fp32", kind_name(kind));
        return;
    }
    const cublasComputeType_t ct = B->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    /* The heuristic's first: its time in a graph and its output. */
    const double heur = lt_chain_us(B, &P, kind, reps, replays);
    CK(cudaStreamSynchronize(B->s));
    const std::vector<float> ref = outputs_of(B, &P, kind);

    int ids[128], n_ids = 0;
    CK(cublasLtMatmulAlgoGetIds(B->lt, ct, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, 128, ids,
                                &n_ids));
    static const uint16_t clusters[] = {CUBLASLT_CLUSTER_SHAPE_AUTO, CUBLASLT_CLUSTER_SHAPE_1x1x1,
                                        CUBLASLT_CLUSTER_SHAPE_2x1x1, CUBLASLT_CLUSTER_SHAPE_1x2x1,
                                        CUBLASLT_CLUSTER_SHAPE_2x2x1};
    std::vector<cand> all;
    long tried = 0;
    const auto t0 = std::chrono::steady_clock::now();
    int cut = 0; /* the search stopped at its time limit (20 s a kind) */
    for (int ii = 0; ii < n_ids && !cut; ii++) {
        cublasLtMatmulAlgo_t a;
        if (cublasLtMatmulAlgoInit(B->lt, ct, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, ids[ii],
                                   &a) != CUBLAS_STATUS_SUCCESS)
            continue;
        uint32_t tiles[256], stages[256];
        uint32_t nt = cap_u32s(&a, CUBLASLT_ALGO_CAP_TILE_IDS, tiles, 256);
        uint32_t ns = cap_u32s(&a, CUBLASLT_ALGO_CAP_STAGES_IDS, stages, 256);
        if (!nt) tiles[0] = CUBLASLT_MATMUL_TILE_UNDEFINED, nt = 1;
        if (!ns) stages[0] = CUBLASLT_MATMUL_STAGES_UNDEFINED, ns = 1;
        int32_t swz_ok = 0, cmax = 0;
        size_t got;
        cublasLtMatmulAlgoCapGetAttribute(&a, CUBLASLT_ALGO_CAP_CTA_SWIZZLING_SUPPORT, &swz_ok, sizeof swz_ok, &got);
        cublasLtMatmulAlgoCapGetAttribute(&a, CUBLASLT_ALGO_CAP_CUSTOM_OPTION_MAX, &cmax, sizeof cmax, &got);
        if (cmax > 1) cmax = 1;
        for (uint32_t t = 0; t < nt; t++)
            for (uint32_t s = 0; s < ns; s++)
                for (int c = 0; c < 5; c++)
                    for (uint32_t swz = 0; swz <= (uint32_t)(swz_ok ? 1 : 0); swz++)
                        for (uint32_t cu = 0; cu <= (uint32_t)cmax; cu++) {
                            cublasLtMatmulAlgo_t x = a;
                            cublasLtMatmulAlgoConfigSetAttribute(&x, CUBLASLT_ALGO_CONFIG_TILE_ID, &tiles[t],
                                                                 sizeof tiles[t]);
                            cublasLtMatmulAlgoConfigSetAttribute(&x, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages[s],
                                                                 sizeof stages[s]);
                            cublasLtMatmulAlgoConfigSetAttribute(&x, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID,
                                                                 &clusters[c], sizeof clusters[c]);
                            cublasLtMatmulAlgoConfigSetAttribute(&x, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &swz,
                                                                 sizeof swz);
                            cublasLtMatmulAlgoConfigSetAttribute(&x, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, &cu,
                                                                 sizeof cu);
                            cublasLtMatmulHeuristicResult_t r;
                            if (cublasLtMatmulAlgoCheck(B->lt, P.d, P.la, P.lb, P.lc, P.lc, &x, &r) !=
                                    CUBLAS_STATUS_SUCCESS ||
                                r.workspaceSize > B->ws_bytes)
                                continue;
                            tried++;
                            if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > 20) {
                                cut = 1;
                                goto done;
                            }
                            P.algo = x;
                            const double us = stream_us(B, &P, kind, 12);
                            if (us > 0)
                                all.push_back(cand{x, us, ids[ii], (int)tiles[t], (int)stages[s], clusters[c],
                                                   (int)swz, (int)cu});
                        }
    }
done:
    std::sort(all.begin(), all.end(), [](const cand &p, const cand &q) { return p.us < q.us; });
    printf("%4d %s %s: %d ids, %ld configurations accepted%s; heuristic's first %.2f us (graph)\n", B->n,
           B->tf32 ? "tf32" : "fp32", kind_name(kind), n_ids, tried, cut ? " (cut at 20 s)" : "", heur);
    for (size_t i = 0; i < all.size() && i < 6; i++) {
        P.algo = all[i].algo;
        const double g = lt_chain_us(B, &P, kind, reps, replays);
        CK(cudaStreamSynchronize(B->s));
        const std::vector<float> o = outputs_of(B, &P, kind);
        double d = 0, m = 0;
        for (size_t j = 0; j < o.size(); j++) d = fmax(d, fabs((double)o[j] - ref[j])), m = fmax(m, fabs((double)ref[j]));
        printf("      %6.2f us (graph; %6.2f on the stream)  algo %3d tile %3d stages %3d cluster %2d swizzle %d "
               "custom %d  diff %.1e\n",
               g, all[i].us, all[i].id, all[i].tile, all[i].stages, all[i].cluster, all[i].swz, all[i].custom,
               m > 0 ? d / m : d);
    }
    fflush(stdout);
}

static void bench_case(int n, int tf32, int reps, int replays) {
    bench B;
    bench_shape(&B, n, 256, tf32);
    B.stride = bench_plain_layout(&B);
    bench_open(&B, NULL);
    ceiling_fill<<<1024, 256, 0, B.s>>>(B.base, B.stride * B.n);
    CK(cudaStreamSynchronize(B.s));
    for (int kind = 0; kind < 3; kind++) search(&B, kind, reps, replays);
    bench_close(&B, 1);
}

int main(int argc, char **argv) {
    ceiling_opts o;
    int rc = ceiling_start(argc, argv, "cuBLASLt's whole algorithm space on a seed-batched 256x256 layer", "ops", 0, &o);
    if (rc) return rc;
    for (int a = 0; a < o.n_agents; a++)
        for (int tf32 = 1; tf32 >= 0; tf32--) bench_case(o.agents[a], tf32, o.reps, o.replays);
    return 0;
}
