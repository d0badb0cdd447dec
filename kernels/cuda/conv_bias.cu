/* conv_bias.cu: the per-channel pieces of a convolution layer over NCHW tensors: bias + activation after
 * the convolution, and the bias gradient. The convolution itself is cuDNN's (kernels/cuda/cudnn/); these
 * stay ours because cuDNN's bias gradient promises no summation order, and a fused bias + activation pass
 * costs one read and one write of y where cudnnAddTensor + cudnnActivationForward would cost two.
 * The CPU twin of both is inside kernels/cpu/conv.c (cpu_conv_forward, cpu_conv_backward). The tensors are
 * fp32, bf16 or fp16 (dt, lowp_elem.cuh); the arithmetic is fp32 either way, and a 16-bit y is rounded once
 * when stored. */
#include "lowp_elem.cuh"

#define CONV_BIAS_THREADS 256

/* Grid-stride over the n*k*hw elements; element e belongs to channel (e / hw) % k. The expression is the
 * CPU's (y + b, then the activation), so only the convolution's rounding separates the backends. */
template <int ACT>
__global__ void conv_bias_act_kernel(void *y, int32_t dt, const float *b, int32_t k, int32_t hw, uint64_t total) {
    for (uint64_t e = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += (uint64_t)gridDim.x * blockDim.x) {
        float z = lp_load(y, dt, (int64_t)e);
        if (b) z = z + b[(e / (uint64_t)hw) % (uint64_t)k];
        lp_store(y, dt, (int64_t)e, cuda_act(z, ACT));
    }
}

/* One block per channel: each thread sums a strided slice of the channel's n*hw values (image-major, as
 * the CPU twin walks them), then a fixed tree combines the slices. No atomics: the same bits every run.
 * The slice's position steps without a division, and its values are loaded 8 at a time before they are
 * added in order (a division and a dependent load per element made this the slowest kernel of a Nature
 * DQN backward). */
#define CONV_BIAS_BATCH 8
__global__ void conv_bias_grad_kernel(float *db, const void *dy, int32_t dt, int32_t n, int32_t k, int32_t hw,
                                      cuda_seeds sd) {
    __shared__ float shared[CONV_BIAS_THREADS];
    db = cuda_seed_ptr(sd, db), dy = cuda_seed_ptr(sd, dy); /* grid z: the agent */
    int32_t ch = blockIdx.x;
    float acc = 0.0f;
    int32_t img = 0, p = (int32_t)threadIdx.x;
    while (p >= hw) p -= hw, img++;
    while (img < n) {
        float v[CONV_BIAS_BATCH];
        int cnt = 0;
#pragma unroll
        for (int u = 0; u < CONV_BIAS_BATCH; u++) {
            if (img < n) {
                v[u] = lp_load(dy, dt, ((int64_t)img * k + ch) * hw + p);
                cnt = u + 1;
                p += CONV_BIAS_THREADS;
                while (p >= hw) p -= hw, img++;
            }
        }
#pragma unroll
        for (int u = 0; u < CONV_BIAS_BATCH; u++)
            if (u < cnt) acc += v[u];
    }
    shared[threadIdx.x] = acc;
    __syncthreads();
    for (int half = CONV_BIAS_THREADS / 2; half > 0; half /= 2) {
        if ((int)threadIdx.x < half) shared[threadIdx.x] += shared[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x == 0) db[ch] = db[ch] + shared[0];
}

extern "C" int cuda_conv_bias_act(rlt_backend *bk, void *y, int32_t dt, const float *b, int32_t n, int32_t k,
                                  int32_t hw, int32_t act) {
    RLT_TRY(cuda_seeds_refuse(bk, "conv_bias_act"));
    CUDA_REQUIRE(bk, n >= 0 && k >= 1 && hw >= 1, "conv_bias_act");
    CUDA_REQUIRE(bk, act >= RLT_ACT_NONE && act <= RLT_ACT_TANH, "conv_bias_act");
    uint64_t total = (uint64_t)n * (uint64_t)k * (uint64_t)hw;
    if (total == 0 || (!b && act == RLT_ACT_NONE)) return RLT_OK;
    unsigned blocks = cuda_blocks(bk, total, CONV_BIAS_THREADS);
    cudaStream_t s = cuda_stream(bk);
    if (act == RLT_ACT_RELU) conv_bias_act_kernel<RLT_ACT_RELU><<<blocks, CONV_BIAS_THREADS, 0, s>>>(y, dt, b, k, hw, total);
    else if (act == RLT_ACT_TANH)
        conv_bias_act_kernel<RLT_ACT_TANH><<<blocks, CONV_BIAS_THREADS, 0, s>>>(y, dt, b, k, hw, total);
    else conv_bias_act_kernel<RLT_ACT_NONE><<<blocks, CONV_BIAS_THREADS, 0, s>>>(y, dt, b, k, hw, total);
    CUDA_CHECK_LAUNCH(bk, "conv_bias_act_kernel");
    return RLT_OK;
}

extern "C" int cuda_conv_bias_grad(rlt_backend *bk, float *db, const void *dy, int32_t dt, int32_t n, int32_t k,
                                   int32_t hw) {
    CUDA_REQUIRE(bk, n >= 0 && k >= 1 && hw >= 1, "conv_bias_grad");
    RLT_TRY(cuda_seeds_check(bk, "conv_bias_grad", 2, db, dy));
    conv_bias_grad_kernel<<<dim3((unsigned)k, 1, cuda_seeds_z(bk)), CONV_BIAS_THREADS, 0, cuda_stream(bk)>>>(
        db, dy, dt, n, k, hw, cuda_seeds_of(bk));
    CUDA_CHECK_LAUNCH(bk, "conv_bias_grad_kernel");
    return RLT_OK;
}

extern "C" cudaError_t cuda_preload_conv_bias(void) {
    cudaFuncAttributes a;
    cudaError_t rc = cudaFuncGetAttributes(&a, conv_bias_act_kernel<RLT_ACT_NONE>);
    if (rc == cudaSuccess) rc = cudaFuncGetAttributes(&a, conv_bias_act_kernel<RLT_ACT_RELU>);
    if (rc == cudaSuccess) rc = cudaFuncGetAttributes(&a, conv_bias_act_kernel<RLT_ACT_TANH>);
    if (rc == cudaSuccess) rc = cudaFuncGetAttributes(&a, conv_bias_grad_kernel);
    return rc;
}
