/* cuda_plan_rules.h: the CUDA backend's rules for what a plan reserves beside its tensors, from shapes and the
 * GPU's architecture alone: which dense layers go to the library (cuBLAS / cuBLASLt), how many lanes the backend
 * runs, and the library workspace that follows. One source for both users: the CUDA module (cuda_backend.c,
 * linear.cu) sizes its workspace with them on a GPU, and the described GPU of `rltrain plan --arch`
 * (kernels/described/) sizes the same workspace without one, so the two plans' arenas agree byte for byte
 * (tests/gpu_described_plan.c). Plain C, no CUDA header: the core library includes it too. */
#ifndef RLT_CUDA_PLAN_RULES_H
#define RLT_CUDA_PLAN_RULES_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"

/* Above this K, linear.cu's kernels (which never split K across blocks) would leave most of the GPU idle. */
#define CUDA_LIN_MAX_K 1024
/* A product of at least this many multiply-adds (M N K) goes to cuBLAS (linear.cu: why). */
#define CUDA_LIN_BLAS_MACS (1ll << 30)
/* Wide layers go to the library too, whatever their K (linear.cu: why and the measurements). */
#define CUDA_LIN_BLAS_WIDE (1ll << 22)
/* cuBLAS workspace of each side lane (lane 0 has more: cuda_rule_lane0_workspace). */
#define CUDA_SIDE_WORKSPACE (4ull << 20)

static inline int cuda_rule_big(int32_t m, int32_t n, int32_t k) { return (int64_t)m * n * k >= CUDA_LIN_BLAS_MACS; }

/* In fp32 a forward with at least CUDA_LIN_BLAS_WIDE outputs (rows x fo); under tf32 the forward and the input
 * gradient of a layer with at least that many inputs or outputs (rows x the larger of fi, fo). */
static inline int cuda_rule_wide(int32_t rows, int32_t fi, int32_t fo, int dx, int tf32) {
    if (!tf32) return !dx && (int64_t)rows * fo >= CUDA_LIN_BLAS_WIDE;
    return (int64_t)rows * (fi > fo ? fi : fo) >= CUDA_LIN_BLAS_WIDE;
}

/* Seed-batched products go to the library's batched GEMM (gemm.c, cuda_gemm_seeds; the forward cuBLASLt's strided
 * product with its epilogue, gemm_lt.c):
 * - from CUDA_LIN_SEEDS_BLAS_AGENTS agents batched, every product, whatever its shape and precision. There the
 *   library's tiles over the agents beat ours even for the smallest products (a 64-wide layer's 64 x 64 weight
 *   gradient, a critic's one output): on an H200 in one call (bench/RESULTS.md, "which products go to the library"),
 *   fp32 TD3 64-64 at 64/256 agents 196.7k/230.2k -> 270.6k/377.6k updates/s, the DQN MLP at 64 agents 384.9k ->
 *   533.2k, TD3 256-256 at 64 agents 61.9k -> 63.9k, tf32 TD3 64-64 at 256 agents 334.7k -> 348.3k. At 16 agents it
 *   was mixed (fp32 64-64 +7%, 256-256 -2%, tf32 64-64 -9%), so below the bound the shapes decide:
 * - under tf32 every product at least 16 wide in each dimension; in fp32 those of 2^20 multiply-adds and 2^14
 *   outputs per agent (m n: a 64-wide layer at a batch of 256, a 256-wide one at 64 or more, the first layers of
 *   TD3's actor and critics with their 17 and 23 inputs among them). 2^14 (2^15 before) sent 64-64 TD3 at batch 256
 *   there, 114.5k/162.4k/180.2k -> 118.6k/194.7k/228.4k updates/s at 16/64/256 agents, the DQN MLP (15,360 and
 *   10,752 outputs) unchanged (H200, one call).
 * Below both, linear.cu's kernels, whose bits equal a single run's (the 64-wide networks of tests/gpu_seed_batch.c,
 * groups of 3 and 8).
 * The rule is a function of shapes, the number of agents and precision only; RLT_CUDA_SEEDS_RULE (the developer
 * switch, `env`) gives the A/B: "shape" the rule without the agents' bound, "old" the rule before 2^14 outputs,
 * "all" every product, "macs" and "dims" the shape rule without its outputs' bound and with only its 16-wide one. */
#define CUDA_LIN_SEEDS_BLAS_AGENTS 32
#define CUDA_LIN_SEEDS_BLAS_MACS (1ll << 20)
#define CUDA_LIN_SEEDS_BLAS_OUTPUTS (1ll << 14)
enum {
    CUDA_SEEDS_RULE = 0,
    CUDA_SEEDS_RULE_OLD = 1,
    CUDA_SEEDS_RULE_ALL = 2,
    CUDA_SEEDS_RULE_SHAPE = 3,
    CUDA_SEEDS_RULE_MACS = 4,
    CUDA_SEEDS_RULE_DIMS = 5
};
static inline int cuda_rule_seeds_blas_as(int rule, int tf32, int32_t agents, int32_t m, int32_t n, int32_t k) {
    if (rule == CUDA_SEEDS_RULE_ALL || (rule == CUDA_SEEDS_RULE && agents >= CUDA_LIN_SEEDS_BLAS_AGENTS)) return 1;
    if (rule == CUDA_SEEDS_RULE_OLD)
        return m >= 16 && n >= 16 && k >= 16 &&
               (tf32 || (m >= 32 && n >= 32 && k >= 32 && (int64_t)m * n * k >= (1ll << 22)));
    if (m < 16 || n < 16 || k < 16) return 0;
    if (tf32 || rule == CUDA_SEEDS_RULE_DIMS) return 1;
    if (rule == CUDA_SEEDS_RULE_MACS) return (int64_t)m * n * k >= CUDA_LIN_SEEDS_BLAS_MACS;
    return (int64_t)m * n * k >= CUDA_LIN_SEEDS_BLAS_MACS && (int64_t)m * n >= CUDA_LIN_SEEDS_BLAS_OUTPUTS;
}
/* The rule RLT_CUDA_SEEDS_RULE names (NULL or anything else: the default). */
static inline int cuda_rule_seeds_env(const char *env) {
    static const char *const names[] = {"", "old", "all", "shape", "macs", "dims"}; /* indexed by the enum above */
    for (int i = 1; env && i < (int)(sizeof names / sizeof names[0]); i++)
        if (strcmp(env, names[i]) == 0) return i;
    return CUDA_SEEDS_RULE;
}
/* The plan's side: the same switch as the backend's (cuda_backend.c reads it at open), so that an A/B rule's library
 * products find the cuBLAS handle and workspace planned for them (with "all", 64-64 seeds once failed to capture). */
static inline int cuda_rule_seeds_blas(int tf32, int32_t agents, int32_t m, int32_t n, int32_t k) {
    return cuda_rule_seeds_blas_as(cuda_rule_seeds_env(getenv("RLT_CUDA_SEEDS_RULE")), tf32, agents, m, n, k);
}

/* 1 when linear_forward or linear_backward of this shape may call the library: the forward when fi is beyond the
 * kernels' K or the product big or the layer wide, the backward when a part is beyond the fused kernels (rows or
 * fi for dW, fo or fi for dx; dx may not be asked for, which the rule does not know, so it says yes then too), big
 * (every part has the same M N K) or wide (as under tf32, the wider rule: the plan does not know the precision), and
 * with seeds > 1 agents batched, the products that go to the library's batched GEMM, in each of the orientations
 * linear.cu asks the seed rule about (M N K): the forward (rows, fo, fi), the weight gradient (fo, fi, rows) and the
 * input gradient (rows, fi, fo). The rule's output bound is not symmetric: a 256-256 DQN at batch 64 sends only its
 * weight gradients (256 x 256 outputs) to the library. */
static inline int cuda_rule_linear_calls_blas(int32_t rows, int32_t fi, int32_t fo, int32_t seeds, int tf32) {
    return rows > CUDA_LIN_MAX_K || fi > CUDA_LIN_MAX_K || fo > CUDA_LIN_MAX_K || cuda_rule_big(rows, fi, fo) ||
           cuda_rule_wide(rows, fi, fo, 1, 1) ||
           (seeds > 1 &&
            (cuda_rule_seeds_blas(tf32, seeds, rows, fo, fi) || cuda_rule_seeds_blas(tf32, seeds, fo, fi, rows) ||
             cuda_rule_seeds_blas(tf32, seeds, rows, fi, fo)));
}

/* Dense layers whose products go to the library: the 16-bit ones, those beyond linear.cu's kernels, and with seeds
 * > 1 (rlt_backend.seeds) the seed-batched ones. They run on cuBLASLt (gemm_lt.c), with cuBLAS as its fallback; the
 * batched ones on cuBLAS. */
static inline int cuda_rule_dense_library(const rlt_op_use *use, int32_t seeds) {
    if (use->dense_lp) return 1;
    return use->dense_rows > 0 &&
           cuda_rule_linear_calls_blas(use->dense_rows, use->dense_in, use->dense_out, seeds, use->dense_tf32);
}

/* fp32 convolutions compute their input gradient with a cuBLAS GEMM (conv_gemm.cu); 16-bit ones run on cuDNN. */
static inline int cuda_rule_conv_calls_blas(int32_t dtype) { return dtype == RLT_LP_F32; }

/* The lanes the backend runs: RLT_BACKEND_MAX_LANES, or 1 with RLT_CUDA_LANES=1 (the developer switch, `env`),
 * or fewer when the caller asks (rlt_backend.lanes: a seed group's members sharing the GPU). */
static inline int32_t cuda_rule_lanes(const char *env, int32_t caller_lanes) {
    int32_t n = env && strcmp(env, "1") == 0 ? 1 : RLT_BACKEND_MAX_LANES;
    return caller_lanes > 0 && caller_lanes < n ? caller_lanes : n;
}

/* cuBLAS workspace sizes NVIDIA recommends in the cublasSetWorkspace documentation: 32 MiB on Hopper (compute
 * capability 9.x) and later, 4 MiB before, for lane 0; each side lane gets CUDA_SIDE_WORKSPACE of its own (two
 * GEMMs running at once on two lanes must never share a workspace). */
static inline uint64_t cuda_rule_lane0_workspace(int32_t cc_major) { return cc_major >= 9 ? 32ull << 20 : 4ull << 20; }

static inline uint64_t cuda_rule_workspace_bytes(int32_t cc_major, int32_t lanes) {
    return cuda_rule_lane0_workspace(cc_major) + (uint64_t)(lanes - 1) * CUDA_SIDE_WORKSPACE;
}

#endif
