/* dqn.cu: the DQN-specific ops: u8 observation gathers and the DQN loss (the (double) DQN target and the TD
 * loss on the taken actions, in one launch), and the first stage of the optimiser's gradient-norm clipping;
 * the CUDA twins of cpu_gather_u8_f32 and of cpu_dqn_loss's oracles (cpu_dqn_target, cpu_q_loss_grad) in
 * kernels/cpu/dqn.c.
 *
 * Elementwise results (gathered frames, targets, loss gradients) use the CPU's expressions term for term and
 * the module is built without FMA contraction, so they match the CPU bit for bit. The reductions (the loss,
 * the squared norm) run in fixed-shape trees with no atomics: deterministic on every run and every GPU, equal
 * to the CPU's sums up to rounding. */
#include "td_loss.h"
#include "cuda_ops.h"

#define DQN_REDUCE_THREADS 256
/* Clipping's first stage: a fixed grid (not derived from the SM count), so the partial sums, and
 * therefore the norm's bits, are the same on every GPU. 256 x 256 threads read 64K consecutive floats per
 * sweep, enough to saturate memory bandwidth for gradient blocks of millions of parameters. */
#define CLIP_BLOCKS CUDA_CLIP_BLOCKS

/* Tree reduction of one value per thread with fixed pairing; the result is valid in every thread after
 * the final barrier (each reads shared[0]). */
__device__ static float dqn_block_sum(float x, float *shared) {
    shared[threadIdx.x] = x;
    __syncthreads();
    for (int half = DQN_REDUCE_THREADS / 2; half > 0; half /= 2) {
        if ((int)threadIdx.x < half) shared[threadIdx.x] += shared[threadIdx.x + half];
        __syncthreads();
    }
    return shared[0];
}

__global__ void gather_u8_f32_kernel(float *dst, const uint8_t *src, uint64_t row, const int32_t *idx, uint64_t total,
                                     float scale, cuda_seeds sd) {
    dst = cuda_seed_ptr(sd, dst), src = cuda_seed_ptr(sd, src), idx = cuda_seed_ptr(sd, idx); /* z: the agent */
    for (uint64_t e = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += (uint64_t)gridDim.x * blockDim.x) {
        uint64_t i = e / row, j = e - i * row;
        uint64_t from = idx ? (uint64_t)idx[i] : i;
        dst[e] = scale * (float)src[from * row + j];
    }
}

/* The target and the TD loss in one block (dqn_loss). One block: each thread owns rows i = tid, tid + 256, ...,
 * forms their targets (the argmax with a strict comparison: the lowest index among tied maxima, as the CPU),
 * writes their full gradient rows and sums their losses in index order; the tree then combines the 256
 * partial sums. Batches are a few hundred rows. y and dq are the CPU oracles' bits. */
__global__ void dqn_loss_kernel(float *y, float *dq, int32_t lddq, float *loss, const float *q, int32_t ldq,
                                const int32_t *act, const float *r, const float *term, const float *qt, const float *sel,
                                int32_t ldqn, int32_t n, int32_t n_act, float gamma, float delta, float k,
                                const float *gamma_dev, cuda_seeds sd) {
    __shared__ float shared[DQN_REDUCE_THREADS];
    cuda_pdl_wait(); /* launched with cuda_launch_pdl */
    cuda_pdl_trigger();
    /* Seed batching: block z is agent z's whole loss. */
    y = cuda_seed_ptr(sd, y), dq = cuda_seed_ptr(sd, dq), loss = cuda_seed_ptr(sd, loss), q = cuda_seed_ptr(sd, q);
    act = cuda_seed_ptr(sd, act), r = cuda_seed_ptr(sd, r), term = cuda_seed_ptr(sd, term);
    qt = cuda_seed_ptr(sd, qt), sel = cuda_seed_ptr(sd, sel);
    /* The agent's hparams block, where the descriptor names it (a batched graph: each agent's own gamma). */
    gamma_dev = cuda_seed_ptr(sd, gamma_dev);
    if (gamma_dev) gamma = *gamma_dev;
    float acc = 0.0f;
    for (int32_t i = threadIdx.x; i < n; i += DQN_REDUCE_THREADS) {
        /* Every load before the first store, none waiting on another but q's on the action: the target's value rides
         * along with the argmax instead of being read after it (this kernel is a link of the update's critical chain,
         * and each dependent load a round trip to L2). */
        const int32_t a = act[i];
        const float ri = r[i], ti = term[i];
        const bool taken = a >= 0 && a < n_act;
        const float qa = taken ? q[(int64_t)i * ldq + a] : 0.0f;
        const float *s = sel + (int64_t)i * ldqn, *t = qt + (int64_t)i * ldqn;
        float s_best = s[0], t_best = t[0];
        for (int32_t j = 1; j < n_act; j++) {
            const float sj = s[j], tj = t[j];
            if (sj > s_best) s_best = sj, t_best = tj;
        }
        float yi = ri + gamma * (1.0f - ti) * t_best;
        y[i] = yi;
        float *row = dq + (int64_t)i * lddq;
        for (int32_t j = 0; j < n_act; j++) row[j] = 0.0f;
        if (!taken) continue;
        float d = qa - yi;
        float g, l = rlt_td_loss(d, delta, &g);
        row[a] = k * g;
        acc += l;
    }
    float total = dqn_block_sum(acc, shared);
    if (loss && threadIdx.x == 0) *loss = total / (float)n;
}

/* Stage 1: block b writes the sum of squares of its threads' strided slices to partial[b] (batched: block (b, z)
 * to agent z's slice of the scratch). */
__global__ void sumsq_partial_kernel(float *partial, const float *g, uint64_t n, cuda_seeds sd) {
    __shared__ float shared[DQN_REDUCE_THREADS];
    cuda_pdl_wait(); /* launched with cuda_launch_pdl */
    cuda_pdl_trigger();
    partial = cuda_seed_scratch(sd, partial);
    g = cuda_seed_ptr(sd, g);
    float acc = 0.0f;
    const uint64_t stride = (uint64_t)CLIP_BLOCKS * DQN_REDUCE_THREADS;
    for (uint64_t i = (uint64_t)blockIdx.x * DQN_REDUCE_THREADS + threadIdx.x; i < n; i += stride) acc += g[i] * g[i];
    float total = dqn_block_sum(acc, shared);
    if (threadIdx.x == 0) partial[blockIdx.x] = total;
}

extern "C" int cuda_gather_u8_f32(rlt_backend *bk, float *dst, const uint8_t *src, uint64_t row, const int32_t *idx,
                                  int32_t n, float scale) {
    CUDA_REQUIRE(bk, n >= 0, "gather_u8_f32");
    uint64_t total = (uint64_t)n * row;
    if (total == 0) return RLT_OK;
    RLT_TRY(cuda_seeds_check(bk, "gather_u8_f32", 3, dst, src, idx));
    gather_u8_f32_kernel<<<dim3(cuda_blocks(bk, total, CUDA_THREADS), 1, cuda_seeds_z(bk)), CUDA_THREADS, 0,
                           cuda_stream(bk)>>>(dst, src, row, idx, total, scale, cuda_seeds_of(bk));
    CUDA_CHECK_LAUNCH(bk, "gather_u8_f32_kernel");
    return RLT_OK;
}

extern "C" int cuda_dqn_loss(rlt_backend *bk, const rlt_q_loss *d) {
    int32_t n = d->n, n_act = d->n_act;
    CUDA_REQUIRE(bk, n >= 1 && n_act >= 1 && d->ldq >= n_act && d->lddq >= n_act && d->ldqn >= n_act, "dqn_loss");
    CUDA_REQUIRE(bk, d->huber_delta >= 0.0f, "dqn_loss");
    /* Formed on the host in float, exactly as cpu_q_loss_grad does: the gradients then match bit for bit. */
    float k = d->grad_scale / (float)n;
    const float *sel = d->q_next_online ? d->q_next_online : d->q_next_target;
    RLT_TRY(cuda_seeds_check(bk, "dqn_loss", 10, d->y, d->dq, d->loss, d->q, d->act, d->r, d->term, d->q_next_target,
                             sel, d->gamma_dev));
    CUDA_CHECK(bk, cuda_launch_pdl(bk, dqn_loss_kernel, dim3(1, 1, cuda_seeds_z(bk)), dim3(DQN_REDUCE_THREADS), d->y,
                                   d->dq, d->lddq, d->loss, d->q, d->ldq, d->act, d->r, d->term, d->q_next_target, sel,
                                   d->ldqn, n, n_act, d->gamma, d->huber_delta, k, d->gamma_dev, cuda_seeds_of(bk)));
    CUDA_CHECK_LAUNCH(bk, "dqn_loss_kernel");
    return RLT_OK;
}

/* The fixed grid's blocks that hold data (cuda_clip_parts): the reduction's shape, and so its rounding, does
 * not depend on the device; the blocks left out would each have summed to +0.0f. */
extern "C" int cuda_sumsq_partial(rlt_backend *bk, const float *g, uint64_t n) {
    cuda_impl *c = cuda_get(bk);
    static_assert(CLIP_BLOCKS <= CUDA_SCRATCH_FLOATS, "the partial sums must fit the scratch");
    RLT_TRY(cuda_aside_refuse(bk, "adam (clipping)"));
    RLT_TRY(cuda_seeds_check(bk, "adam (clipping)", 1, g));
    CUDA_CHECK(bk, cuda_launch_pdl(bk, sumsq_partial_kernel, dim3(cuda_clip_parts(n), 1, cuda_seeds_z(bk)),
                                   dim3(DQN_REDUCE_THREADS), c->scratch, g, n, cuda_seeds_of(bk)));
    CUDA_CHECK_LAUNCH(bk, "sumsq_partial_kernel");
    return RLT_OK;
}

extern "C" cudaError_t cuda_preload_dqn(void) {
    cudaFuncAttributes a;
    cudaError_t rc = cudaFuncGetAttributes(&a, gather_u8_f32_kernel);
    if (rc == cudaSuccess) rc = cudaFuncGetAttributes(&a, sumsq_partial_kernel);
    if (rc == cudaSuccess) rc = cudaFuncGetAttributes(&a, dqn_loss_kernel);
    return rc;
}
