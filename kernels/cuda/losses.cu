/* losses.cu: TD3's critic losses (alone, or with the critics' output layers folded in) and the logged
 * reductions; the CUDA twins of cpu_td3_critic_loss
 * (kernels/cpu/fused.c) and cpu_sum (kernels/cpu/losses.c).
 *
 * Reductions run in one block of a fixed size: each thread sums a strided slice in index order, then a
 * shared-memory tree with fixed pairing combines the partial sums. No atomics and no dependence on the
 * device's SM count, so a seed gives the same bits on every run and every GPU. The order differs from
 * the CPU's left-to-right sum, so the two agree to rounding (the parity test bounds it), not bit for bit.
 * One block is plenty for what these reduce (a batch of TD errors, a few hundred values). */
#include "cuda_ops.h"

#define REDUCE_THREADS 256

/* Tree reduction of one value per thread; the result is valid in thread 0. */
__device__ float block_sum(float x, float *shared) {
    shared[threadIdx.x] = x;
    __syncthreads();
    for (int half = REDUCE_THREADS / 2; half > 0; half /= 2) {
        if ((int)threadIdx.x < half) shared[threadIdx.x] += shared[threadIdx.x + half];
        __syncthreads();
    }
    return shared[0];
}

__global__ void sum_kernel(float *out, const float *x, int32_t ldx, int32_t n, float scale, cuda_seeds sd) {
    __shared__ float shared[REDUCE_THREADS];
    out = cuda_seed_ptr(sd, out), x = cuda_seed_ptr(sd, x); /* seed batching: block z is agent z's sum */
    float acc = 0.0f;
    for (int32_t i = threadIdx.x; i < n; i += REDUCE_THREADS) acc += x[(int64_t)i * ldx];
    float total = block_sum(acc, shared);
    if (threadIdx.x == 0) *out = scale * total;
}

extern "C" int cuda_sum(rlt_backend *bk, float *out, const float *x, int32_t ldx, int32_t n, float scale) {
    CUDA_REQUIRE(bk, n >= 0 && ldx >= 1, "sum");
    RLT_TRY(cuda_seeds_check(bk, "sum", 2, out, x));
    sum_kernel<<<dim3(1, 1, cuda_seeds_z(bk)), REDUCE_THREADS, 0, cuda_stream(bk)>>>(out, x, ldx, n, scale,
                                                                                     cuda_seeds_of(bk));
    CUDA_CHECK_LAUNCH(bk, "sum_kernel");
    return RLT_OK;
}

/* The clipped double-Q target and both MSE gradients in one block (td3_critic_loss): the element expressions
 * are the CPU oracles' (cpu_td3_target, cpu_mse_grad) term for term, so y, dq1 and dq2 match the CPU bit for
 * bit; each loss is summed by the fixed tree of block_sum. */
__global__ void td3_critic_loss_kernel(float *y, float *dq1, float *dq2, float *loss1, float *loss2, const float *q1,
                                       const float *q2, const float *qt1, const float *qt2, const float *r,
                                       const float *term, int32_t n, float gamma, float k, const float *gamma_dev,
                                       cuda_seeds sd) {
    __shared__ float shared[REDUCE_THREADS];
    cuda_pdl_wait(); /* launched with cuda_launch_pdl */
    cuda_pdl_trigger();
    /* Seed batching: block z is agent z's whole loss. */
    y = cuda_seed_ptr(sd, y), dq1 = cuda_seed_ptr(sd, dq1), dq2 = cuda_seed_ptr(sd, dq2);
    loss1 = cuda_seed_ptr(sd, loss1), loss2 = cuda_seed_ptr(sd, loss2);
    q1 = cuda_seed_ptr(sd, q1), q2 = cuda_seed_ptr(sd, q2), qt1 = cuda_seed_ptr(sd, qt1), qt2 = cuda_seed_ptr(sd, qt2);
    r = cuda_seed_ptr(sd, r), term = cuda_seed_ptr(sd, term);
    /* The agent's hparams block, where the descriptor names it (a batched graph: each agent's own gamma). */
    gamma_dev = cuda_seed_ptr(sd, gamma_dev);
    if (gamma_dev) gamma = *gamma_dev;
    float acc1 = 0.0f, acc2 = 0.0f;
    for (int32_t i = threadIdx.x; i < n; i += REDUCE_THREADS) {
        /* Every load before the first store: after it, q1 and q2 would be read a round trip later (this kernel is a
         * link of the update's critical chain). */
        const float a = qt1[i], b = qt2[i], ri = r[i], ti = term[i], q1i = q1[i], q2i = q2[i];
        float yi = ri + gamma * (1.0f - ti) * (a < b ? a : b);
        y[i] = yi;
        float d1 = q1i - yi, d2 = q2i - yi;
        dq1[i] = k * d1;
        dq2[i] = k * d2;
        acc1 += d1 * d1;
        acc2 += d2 * d2;
    }
    float total1 = block_sum(acc1, shared);
    __syncthreads(); /* every thread has read shared[0] before the second tree overwrites it */
    float total2 = block_sum(acc2, shared);
    if (threadIdx.x == 0) {
        if (loss1) *loss1 = total1 / (float)n;
        if (loss2) *loss2 = total2 / (float)n;
    }
}

static int cuda_td3_critic_heads(rlt_backend *bk, const rlt_td3_loss *d);

extern "C" int cuda_td3_critic_loss(rlt_backend *bk, const rlt_td3_loss *d) {
    if (d->hidden > 0) return cuda_td3_critic_heads(bk, d);
    int32_t n = d->n;
    CUDA_REQUIRE(bk, n >= 1, "td3_critic_loss");
    /* The gradient factor is computed here, in host float arithmetic, exactly as cpu_mse_grad does, so the
     * gradients are bit-identical to the CPU's. */
    float k = d->grad_scale * 2.0f / (float)n;
    RLT_TRY(cuda_seeds_check(bk, "td3_critic_loss", 12, d->y, d->dq1, d->dq2, d->loss1, d->loss2, d->q1, d->q2, d->qt1,
                             d->qt2, d->r, d->term, d->gamma_dev));
    CUDA_CHECK(bk, cuda_launch_pdl(bk, td3_critic_loss_kernel, dim3(1, 1, cuda_seeds_z(bk)), dim3(REDUCE_THREADS), d->y,
                                   d->dq1, d->dq2, d->loss1, d->loss2, d->q1, d->q2, d->qt1, d->qt2, d->r, d->term, n,
                                   d->gamma, k, d->gamma_dev, cuda_seeds_of(bk)));
    CUDA_CHECK_LAUNCH(bk, "td3_critic_loss_kernel");
    return RLT_OK;
}

/* td3_critic_loss with the output layers folded in (rlt_td3_loss.hidden > 0): a warp per row, HEADS_ROWS rows a
 * block, grid z the agent. Each head's dot product is linear.cu's ROWDOT sum (lane l adds columns l, l + 32, ... with
 * fmaf, then a butterfly of shuffles, so every lane holds the same bits) plus the bias, as lin_store's forward
 * epilogue; the four run in one loop. The target and the gradients are td3_critic_loss_kernel's expressions; dh is
 * OUTER's one-term input gradient (fmaf from 0, the same additions of 0, the ReLU mask through the layer's output).
 * So each value has the bits of the ops it replaces. */
#define HEADS_ROWS (REDUCE_THREADS / 32)

__global__ void td3_critic_heads_kernel(rlt_td3_loss d, float k, cuda_seeds sd) {
    cuda_pdl_wait(); /* launched with cuda_launch_pdl */
    cuda_pdl_trigger();
    const int lane = threadIdx.x & 31;
    const int32_t i = blockIdx.x * HEADS_ROWS + (threadIdx.x >> 5), H = d.hidden;
    if (i >= d.n) return;
    const float *h[4], *w[4];
    float acc[4];
#pragma unroll
    for (int j = 0; j < 4; j++) {
        h[j] = cuda_seed_ptr(sd, d.h[j]) + (int64_t)i * H;
        w[j] = cuda_seed_ptr(sd, d.w[j]);
        acc[j] = 0.0f;
    }
#pragma unroll 4
    for (int32_t c = lane; c < H; c += 32) {
        float hv[4];
#pragma unroll
        for (int j = 0; j < 4; j++) hv[j] = h[j][c];
#pragma unroll
        for (int j = 0; j < 4; j++) acc[j] = fmaf(hv[j], w[j][c], acc[j]);
    }
    float q[4];
#pragma unroll
    for (int j = 0; j < 4; j++) {
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) acc[j] += __shfl_xor_sync(0xffffffffu, acc[j], off);
        q[j] = acc[j] + *cuda_seed_ptr(sd, d.b[j]);
    }
    const float *gamma_dev = cuda_seed_ptr(sd, d.gamma_dev);
    const float gamma = gamma_dev ? *gamma_dev : d.gamma;
    const float ri = cuda_seed_ptr(sd, d.r)[i], ti = cuda_seed_ptr(sd, d.term)[i], a = q[2], b = q[3];
    const float yi = ri + gamma * (1.0f - ti) * (a < b ? a : b);
    const float g[2] = {k * (q[0] - yi), k * (q[1] - yi)};
    if (lane == 0) {
#pragma unroll
        for (int j = 0; j < 4; j++) cuda_seed_ptr(sd, d.q_out[j])[i] = q[j];
        cuda_seed_ptr(sd, d.y)[i] = yi;
        cuda_seed_ptr(sd, d.dq1)[i] = g[0];
        cuda_seed_ptr(sd, d.dq2)[i] = g[1];
    }
#pragma unroll
    for (int kk = 0; kk < 2; kk++) {
        float *dh = cuda_seed_ptr(sd, d.dh[kk]) + (int64_t)i * H;
#pragma unroll 4
        for (int32_t c = lane; c < H; c += 32) {
            const float x = h[kk][c];
            const float v = (fmaf(g[kk], w[kk][c], 0.0f) + 0.0f) + 0.0f;
            dh[c] = x > 0.0f ? v : 0.0f;
        }
    }
}

static int cuda_td3_critic_heads(rlt_backend *bk, const rlt_td3_loss *d) {
    const int32_t n = d->n;
    CUDA_REQUIRE(bk, n >= 1 && !d->loss1 && !d->loss2, "td3_critic_loss (its output layers folded in)");
    for (int j = 0; j < 4; j++)
        CUDA_REQUIRE(bk, d->h[j] && d->w[j] && d->b[j] && d->q_out[j], "td3_critic_loss (its output layers folded in)");
    CUDA_REQUIRE(bk, d->y && d->dq1 && d->dq2 && d->dh[0] && d->dh[1] && d->r && d->term,
                 "td3_critic_loss (its output layers folded in)");
    /* td3_critic_loss's factor, formed the same way. */
    const float k = d->grad_scale * 2.0f / (float)n;
    RLT_TRY(cuda_seeds_check(bk, "td3_critic_loss", 22, d->h[0], d->h[1], d->h[2], d->h[3], d->w[0], d->w[1], d->w[2],
                             d->w[3], d->b[0], d->b[1], d->b[2], d->b[3], d->q_out[0], d->q_out[1], d->q_out[2],
                             d->q_out[3], d->y, d->dq1, d->dq2, d->dh[0], d->dh[1], d->gamma_dev));
    RLT_TRY(cuda_seeds_check(bk, "td3_critic_loss", 2, d->r, d->term));
    CUDA_CHECK(bk, cuda_launch_pdl(bk, td3_critic_heads_kernel, dim3((unsigned)((n + HEADS_ROWS - 1) / HEADS_ROWS), 1,
                                                                     cuda_seeds_z(bk)),
                                   dim3(REDUCE_THREADS), *d, k, cuda_seeds_of(bk)));
    CUDA_CHECK_LAUNCH(bk, "td3_critic_heads_kernel");
    return RLT_OK;
}

extern "C" cudaError_t cuda_preload_losses(void) {
    cudaFuncAttributes a;
    cudaError_t rc = cudaFuncGetAttributes(&a, sum_kernel);
    if (rc == cudaSuccess) rc = cudaFuncGetAttributes(&a, td3_critic_loss_kernel);
    if (rc == cudaSuccess) rc = cudaFuncGetAttributes(&a, td3_critic_heads_kernel);
    return rc;
}
