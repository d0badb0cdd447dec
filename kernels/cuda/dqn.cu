/* dqn.cu: the DQN-specific ops: u8 observation gathers, the (double) DQN target, the TD loss on the taken
 * actions and global gradient-norm clipping; the CUDA twins of kernels/cpu/dqn.c.
 *
 * Elementwise results (gathered frames, targets, chosen actions, loss gradients, clipped gradients given
 * the norm) use the CPU's expressions term for term and the module is built without FMA contraction, so
 * they match the CPU bit for bit. The reductions (the loss, the squared norm) run in fixed-shape trees with
 * no atomics: deterministic on every run and every GPU, equal to the CPU's sums up to rounding. */
#include "cuda_ops.h"

#define DQN_REDUCE_THREADS 256
/* clip_grad_norm's first stage: a fixed grid (not derived from the SM count), so the partial sums, and
 * therefore the norm's bits, are the same on every GPU. 256 x 256 threads read 64K consecutive floats per
 * sweep, enough to saturate memory bandwidth for gradient blocks of millions of parameters. */
#define CLIP_BLOCKS 256

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
                                     float scale) {
    for (uint64_t e = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += (uint64_t)gridDim.x * blockDim.x) {
        uint64_t i = e / row, j = e - i * row;
        uint64_t from = idx ? (uint64_t)idx[i] : i;
        dst[e] = scale * (float)src[from * row + j];
    }
}

__global__ void dqn_target_kernel(float *y, int32_t *a_next, const float *r, const float *term, const float *qt,
                                  const float *sel, int32_t ldq, int32_t n, int32_t n_act, float gamma) {
    for (int32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        const float *s = sel + (int64_t)i * ldq;
        /* Strict comparison: the lowest index among tied maxima, as the CPU twin. */
        int32_t best = 0;
        for (int32_t j = 1; j < n_act; j++)
            if (s[j] > s[best]) best = j;
        y[i] = r[i] + gamma * (1.0f - term[i]) * qt[(int64_t)i * ldq + best];
        if (a_next) a_next[i] = best;
    }
}

/* One block: each thread owns rows i = tid, tid + 256, ..., writes their full gradient rows and sums their
 * losses in index order; the tree then combines the 256 partial sums. Batches are a few hundred rows. */
__global__ void q_loss_grad_kernel(float *dq, int32_t lddq, float *loss, const float *q, int32_t ldq,
                                   const int32_t *act, const float *y, int32_t n, int32_t n_act, float delta,
                                   float k) {
    __shared__ float shared[DQN_REDUCE_THREADS];
    float acc = 0.0f;
    for (int32_t i = threadIdx.x; i < n; i += DQN_REDUCE_THREADS) {
        float *row = dq + (int64_t)i * lddq;
        for (int32_t j = 0; j < n_act; j++) row[j] = 0.0f;
        int32_t a = act[i];
        if (a < 0 || a >= n_act) continue;
        float d = q[(int64_t)i * ldq + a] - y[i];
        float l, g;
        if (delta == 0.0f) {
            l = d * d;
            g = 2.0f * d;
        } else if (fabsf(d) <= delta) {
            l = 0.5f * d * d;
            g = d;
        } else {
            l = delta * (fabsf(d) - 0.5f * delta);
            g = d > 0.0f ? delta : -delta;
        }
        row[a] = k * g;
        acc += l;
    }
    float total = dqn_block_sum(acc, shared);
    if (loss && threadIdx.x == 0) *loss = total / (float)n;
}

/* Stage 1: block b writes the sum of squares of its threads' strided slices to partial[b]. */
__global__ void sumsq_partial_kernel(float *partial, const float *g, uint64_t n) {
    __shared__ float shared[DQN_REDUCE_THREADS];
    float acc = 0.0f;
    const uint64_t stride = (uint64_t)CLIP_BLOCKS * DQN_REDUCE_THREADS;
    for (uint64_t i = (uint64_t)blockIdx.x * DQN_REDUCE_THREADS + threadIdx.x; i < n; i += stride) acc += g[i] * g[i];
    float total = dqn_block_sum(acc, shared);
    if (threadIdx.x == 0) partial[blockIdx.x] = total;
}

/* Stage 2: every block reduces the CLIP_BLOCKS partial sums with the same tree (so all blocks obtain the
 * same bits without a grid-wide barrier or a third launch), block 0 publishes the norm, and each block
 * scales its slice. The norm is read from device memory here, never from the host: capturable. */
__global__ void clip_scale_kernel(float *g, uint64_t n, const float *partial, float *norm, float max_norm) {
    __shared__ float shared[DQN_REDUCE_THREADS];
    float total = dqn_block_sum(threadIdx.x < CLIP_BLOCKS ? partial[threadIdx.x] : 0.0f, shared);
    float nrm = sqrtf(total);
    if (blockIdx.x == 0 && threadIdx.x == 0) *norm = nrm;
    float coef = max_norm / (nrm + 1e-6f);
    if (!(coef < 1.0f)) return;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x)
        g[i] *= coef;
}

extern "C" int cuda_gather_u8_f32(rlt_backend *bk, float *dst, const uint8_t *src, uint64_t row, const int32_t *idx,
                                  int32_t n, float scale) {
    CUDA_REQUIRE(bk, n >= 0, "gather_u8_f32");
    uint64_t total = (uint64_t)n * row;
    if (total == 0) return RLT_OK;
    gather_u8_f32_kernel<<<cuda_blocks(bk, total, CUDA_THREADS), CUDA_THREADS, 0, cuda_stream(bk)>>>(dst, src, row, idx,
                                                                                                     total, scale);
    CUDA_CHECK_LAUNCH(bk, "gather_u8_f32_kernel");
    return RLT_OK;
}

extern "C" int cuda_dqn_target(rlt_backend *bk, float *y, int32_t *a_next, const float *r, const float *term,
                               const float *q_target_next, const float *q_online_next, int32_t ldq, int32_t n,
                               int32_t n_act, float gamma) {
    CUDA_REQUIRE(bk, n >= 0 && n_act >= 1 && ldq >= n_act, "dqn_target");
    if (n == 0) return RLT_OK;
    /* Small blocks: a batch of a few hundred rows should still spread over several SMs. */
    unsigned threads = 64;
    const float *sel = q_online_next ? q_online_next : q_target_next;
    dqn_target_kernel<<<cuda_blocks(bk, (uint64_t)n, threads), threads, 0, cuda_stream(bk)>>>(
        y, a_next, r, term, q_target_next, sel, ldq, n, n_act, gamma);
    CUDA_CHECK_LAUNCH(bk, "dqn_target_kernel");
    return RLT_OK;
}

extern "C" int cuda_q_loss_grad(rlt_backend *bk, float *dq, int32_t lddq, float *loss, const float *q, int32_t ldq,
                                const int32_t *act, const float *y, int32_t n, int32_t n_act, float huber_delta,
                                float grad_scale) {
    CUDA_REQUIRE(bk, n >= 1 && n_act >= 1 && ldq >= n_act && lddq >= n_act, "q_loss_grad");
    CUDA_REQUIRE(bk, huber_delta >= 0.0f, "q_loss_grad");
    /* Formed on the host in float, exactly as the CPU twin does: the gradients then match bit for bit. */
    float k = grad_scale / (float)n;
    q_loss_grad_kernel<<<1, DQN_REDUCE_THREADS, 0, cuda_stream(bk)>>>(dq, lddq, loss, q, ldq, act, y, n, n_act,
                                                                      huber_delta, k);
    CUDA_CHECK_LAUNCH(bk, "q_loss_grad_kernel");
    return RLT_OK;
}

extern "C" int cuda_clip_grad_norm(rlt_backend *bk, float *g, uint64_t n, float max_norm, float *norm) {
    CUDA_REQUIRE(bk, max_norm > 0.0f && norm != NULL, "clip_grad_norm");
    cuda_impl *c = cuda_get(bk);
    static_assert(CLIP_BLOCKS <= CUDA_SCRATCH_FLOATS, "the partial sums must fit the scratch");
    static_assert(CLIP_BLOCKS <= DQN_REDUCE_THREADS, "stage 2 reads one partial per thread");
    cudaStream_t s = cuda_stream(bk);
    /* Always the full fixed grid (blocks past n write a zero partial): the reduction's shape, and so its
     * rounding, does not depend on n or on the device. */
    sumsq_partial_kernel<<<CLIP_BLOCKS, DQN_REDUCE_THREADS, 0, s>>>(c->scratch, g, n);
    CUDA_CHECK_LAUNCH(bk, "sumsq_partial_kernel");
    clip_scale_kernel<<<cuda_blocks(bk, n, DQN_REDUCE_THREADS), DQN_REDUCE_THREADS, 0, s>>>(g, n, c->scratch, norm,
                                                                                           max_norm);
    CUDA_CHECK_LAUNCH(bk, "clip_scale_kernel");
    return RLT_OK;
}

extern "C" cudaError_t cuda_preload_dqn(void) {
    cudaFuncAttributes a;
    cudaError_t rc = cudaFuncGetAttributes(&a, gather_u8_f32_kernel);
    if (rc == cudaSuccess) rc = cudaFuncGetAttributes(&a, dqn_target_kernel);
    if (rc == cudaSuccess) rc = cudaFuncGetAttributes(&a, q_loss_grad_kernel);
    if (rc == cudaSuccess) rc = cudaFuncGetAttributes(&a, sumsq_partial_kernel);
    if (rc == cudaSuccess) rc = cudaFuncGetAttributes(&a, clip_scale_kernel);
    return rc;
}
