/* dqn.cu: the DQN-specific ops: u8 observation gathers, the (double) DQN target, the TD loss on the taken
 * actions and global gradient-norm clipping; the CUDA twins of kernels/cpu/dqn.c.
 *
 * Elementwise results (gathered frames, targets, chosen actions, loss gradients, clipped gradients given
 * the norm) use the CPU's expressions term for term and the module is built without FMA contraction, so
 * they match the CPU bit for bit. The reductions (the loss, the squared norm) run in fixed-shape trees with
 * no atomics: deterministic on every run and every GPU, equal to the CPU's sums up to rounding. */
#include "td_loss.h"
#include "cuda_ops.h"

#define DQN_REDUCE_THREADS 256
/* clip_grad_norm's first stage: a fixed grid (not derived from the SM count), so the partial sums, and
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
        float g, l = rlt_td_loss(d, delta, &g);
        row[a] = k * g;
        acc += l;
    }
    float total = dqn_block_sum(acc, shared);
    if (loss && threadIdx.x == 0) *loss = total / (float)n;
}

/* dqn_target then q_loss_grad in one block (dqn_loss): each thread forms its rows' targets exactly as
 * dqn_target_kernel does and their losses exactly as q_loss_grad_kernel does, and the tree sums the losses
 * as q_loss_grad_kernel's does: y, dq and the loss are bit-identical to the two launches it replaces. */
__global__ void dqn_loss_kernel(float *y, float *dq, int32_t lddq, float *loss, const float *q, int32_t ldq,
                                const int32_t *act, const float *r, const float *term, const float *qt, const float *sel,
                                int32_t ldqn, int32_t n, int32_t n_act, float gamma, float delta, float k) {
    __shared__ float shared[DQN_REDUCE_THREADS];
    cuda_pdl_wait(); /* launched with cuda_launch_pdl */
    cuda_pdl_trigger();
    float acc = 0.0f;
    for (int32_t i = threadIdx.x; i < n; i += DQN_REDUCE_THREADS) {
        const float *s = sel + (int64_t)i * ldqn;
        int32_t best = 0;
        for (int32_t j = 1; j < n_act; j++)
            if (s[j] > s[best]) best = j;
        float yi = r[i] + gamma * (1.0f - term[i]) * qt[(int64_t)i * ldqn + best];
        y[i] = yi;
        float *row = dq + (int64_t)i * lddq;
        for (int32_t j = 0; j < n_act; j++) row[j] = 0.0f;
        int32_t a = act[i];
        if (a < 0 || a >= n_act) continue;
        float d = q[(int64_t)i * ldq + a] - yi;
        float g, l = rlt_td_loss(d, delta, &g);
        row[a] = k * g;
        acc += l;
    }
    float total = dqn_block_sum(acc, shared);
    if (loss && threadIdx.x == 0) *loss = total / (float)n;
}

/* Stage 1: block b writes the sum of squares of its threads' strided slices to partial[b]. */
__global__ void sumsq_partial_kernel(float *partial, const float *g, uint64_t n) {
    __shared__ float shared[DQN_REDUCE_THREADS];
    cuda_pdl_wait(); /* launched with cuda_launch_pdl */
    cuda_pdl_trigger();
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

extern "C" int cuda_dqn_loss(rlt_backend *bk, float *y, float *dq, int32_t lddq, float *loss, const float *q,
                             int32_t ldq, const int32_t *act, const float *r, const float *term,
                             const float *q_next_target, const float *q_next_online, int32_t ldqn, int32_t n,
                             int32_t n_act, float gamma, float huber_delta, float grad_scale) {
    CUDA_REQUIRE(bk, n >= 1 && n_act >= 1 && ldq >= n_act && lddq >= n_act && ldqn >= n_act, "dqn_loss");
    CUDA_REQUIRE(bk, huber_delta >= 0.0f, "dqn_loss");
    float k = grad_scale / (float)n; /* as cuda_q_loss_grad */
    const float *sel = q_next_online ? q_next_online : q_next_target;
    CUDA_CHECK(bk, cuda_launch_pdl(bk, dqn_loss_kernel, dim3(1), dim3(DQN_REDUCE_THREADS), y, dq, lddq, loss, q, ldq,
                                   act, r, term, q_next_target, sel, ldqn, n, n_act, gamma, huber_delta, k));
    CUDA_CHECK_LAUNCH(bk, "dqn_loss_kernel");
    return RLT_OK;
}

/* Always the full fixed grid (blocks past n write a zero partial): the reduction's shape, and so its
 * rounding, does not depend on n or on the device. */
extern "C" int cuda_sumsq_partial(rlt_backend *bk, const float *g, uint64_t n) {
    cuda_impl *c = cuda_get(bk);
    static_assert(CLIP_BLOCKS <= CUDA_SCRATCH_FLOATS, "the partial sums must fit the scratch");
    CUDA_CHECK(bk, cuda_launch_pdl(bk, sumsq_partial_kernel, dim3(CLIP_BLOCKS), dim3(DQN_REDUCE_THREADS), c->scratch, g, n));
    CUDA_CHECK_LAUNCH(bk, "sumsq_partial_kernel");
    return RLT_OK;
}

extern "C" int cuda_clip_grad_norm(rlt_backend *bk, float *g, uint64_t n, float max_norm, float *norm) {
    CUDA_REQUIRE(bk, max_norm > 0.0f && norm != NULL, "clip_grad_norm");
    cuda_impl *c = cuda_get(bk);
    static_assert(CLIP_BLOCKS <= DQN_REDUCE_THREADS, "stage 2 reads one partial per thread");
    /* The partial sums live in the backend's scratch, which only lane 0 may use. */
    if (c->lane != 0)
        return rlt_err_set(bk->err, RLT_ESTATE, __FILE__, __LINE__, "clip_grad_norm on lane %d: lane 0 only",
                           (int)c->lane);
    cudaStream_t s = cuda_stream(bk);
    RLT_TRY(cuda_sumsq_partial(bk, g, n));
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
    if (rc == cudaSuccess) rc = cudaFuncGetAttributes(&a, dqn_loss_kernel);
    return rc;
}
