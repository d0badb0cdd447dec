/* adam.cu: Adam over a whole flat parameter block in one launch; the CUDA twin of cpu_adam in
 * kernels/cpu/flat.c (PyTorch's formulation, eps outside the square root).
 *
 * The step count is read from device memory, not passed in, so a captured graph that increments it with
 * counter_add replays correctly. Every thread recomputes the two bias corrections from it: two powf per
 * thread cost nothing next to the five memory streams of the update, and they spare a second launch.
 * The expressions follow the CPU twin term by term; with FMA contraction off (cuda_module.cmake) m and v
 * come out bit-identical to it, and p differs only through powf's last-ulp differences from glibc. */
#include "lowp_elem.cuh"

__global__ void adam_kernel(float *p, const float *g, float *m, float *v, uint64_t n, rlt_adam_hp hp,
                            const int64_t *step) {
    int64_t s = *step;
    /* The CPU twin rejects step < 1; here that would need a host sync, so the update is skipped instead
     * (bias correction 1 - beta^0 = 0 would divide by zero). */
    if (s < 1) return;
    float t = (float)s;
    float bc1 = 1.0f - powf(hp.beta1, t);
    float bc2 = 1.0f - powf(hp.beta2, t);
    float step_size = hp.lr / bc1;
    float bc2_sqrt = sqrtf(bc2);
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float gi = g[i];
        float mi = hp.beta1 * m[i] + (1.0f - hp.beta1) * gi;
        float vi = hp.beta2 * v[i] + (1.0f - hp.beta2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        p[i] -= step_size * mi / (sqrtf(vi) / bc2_sqrt + hp.eps);
    }
}

extern "C" int cuda_adam(rlt_backend *bk, float *p, const float *g, float *m, float *v, uint64_t n, rlt_adam_hp hp,
                         const int64_t *step) {
    CUDA_REQUIRE(bk, step != NULL, "adam");
    if (n == 0) return RLT_OK;
    adam_kernel<<<cuda_blocks(bk, n, CUDA_THREADS), CUDA_THREADS, 0, cuda_stream(bk)>>>(p, g, m, v, n, hp, step);
    CUDA_CHECK_LAUNCH(bk, "adam_kernel");
    return RLT_OK;
}

/* adam_ex: clip_grad_norm's second stage, Adam and Polyak in one pass over the block. Every block first
 * reduces the CUDA_CLIP_BLOCKS partial sums of squares (written by cuda_sumsq_partial just before) with the
 * tree clip_scale_kernel uses, so each obtains the same norm, bit for bit, without a grid-wide barrier; block
 * 0 publishes it. The element expressions are clip_scale_kernel's, adam_kernel's and polyak_kernel's in that
 * order, so p, m, v, g (clipped in place, as clip_grad_norm leaves it) and the target come out bit-identical
 * to the three launches they replace. */
#define ADAM_EX_THREADS 256
__global__ void adam_ex_kernel(float *p, float *g, float *m, float *v, uint64_t n, rlt_adam_hp hp, const int64_t *step,
                               const float *partial, float *norm, float max_norm, float *target, float tau,
                               void *p_lp, void *target_lp, int32_t lp_dtype, const int32_t *skip) {
    __shared__ float shared[ADAM_EX_THREADS];
    cuda_pdl_wait(); /* launched with cuda_launch_pdl */
    cuda_pdl_trigger();
    if (skip && *skip) return; /* an fp16 step with non-finite gradients: nothing changes (amp_unscale) */
    float coef = 1.0f;
    if (partial) {
        shared[threadIdx.x] = threadIdx.x < CUDA_CLIP_BLOCKS ? partial[threadIdx.x] : 0.0f;
        __syncthreads();
        for (int half = ADAM_EX_THREADS / 2; half > 0; half /= 2) {
            if ((int)threadIdx.x < half) shared[threadIdx.x] += shared[threadIdx.x + half];
            __syncthreads();
        }
        float nrm = sqrtf(shared[0]);
        if (blockIdx.x == 0 && threadIdx.x == 0) *norm = nrm;
        coef = max_norm / (nrm + 1e-6f);
    }
    const bool clip = partial && coef < 1.0f;
    int64_t s = *step;
    if (s < 1) return; /* as adam_kernel */
    float t = (float)s;
    float bc1 = 1.0f - powf(hp.beta1, t);
    float bc2 = 1.0f - powf(hp.beta2, t);
    float step_size = hp.lr / bc1;
    float bc2_sqrt = sqrtf(bc2);
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float gi = g[i];
        if (clip) {
            gi *= coef;
            g[i] = gi;
        }
        float mi = hp.beta1 * m[i] + (1.0f - hp.beta1) * gi;
        float vi = hp.beta2 * v[i] + (1.0f - hp.beta2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        float pi = p[i] - step_size * mi / (sqrtf(vi) / bc2_sqrt + hp.eps);
        p[i] = pi;
        if (p_lp) lp_store(p_lp, lp_dtype, (int64_t)i, pi);
        if (target) {
            float ti = tau * pi + (1.0f - tau) * target[i];
            target[i] = ti;
            if (target_lp) lp_store(target_lp, lp_dtype, (int64_t)i, ti);
        }
    }
}

extern "C" int cuda_adam_ex(rlt_backend *bk, float *p, float *g, float *m, float *v, uint64_t n, rlt_adam_hp hp,
                            const int64_t *step, const rlt_adam_extra *extra) {
    CUDA_REQUIRE(bk, step != NULL, "adam_ex");
    const int clip = extra && extra->max_grad_norm > 0.0f;
    CUDA_REQUIRE(bk, !clip || extra->norm != NULL, "adam_ex");
    CUDA_REQUIRE(bk, !(extra && extra->target) || (extra->tau >= 0.0f && extra->tau <= 1.0f), "adam_ex");
    cuda_impl *c = cuda_get(bk);
    if (clip) {
        /* The partial sums live in the backend's scratch, which only lane 0 may use. */
        if (c->lane != 0)
            return rlt_err_set(bk->err, RLT_ESTATE, __FILE__, __LINE__, "adam_ex with clipping on lane %d: lane 0 only",
                               (int)c->lane);
        RLT_TRY(cuda_sumsq_partial(bk, g, n));
    }
    if (n == 0 && !clip) return RLT_OK;
    static_assert(CUDA_CLIP_BLOCKS <= ADAM_EX_THREADS, "each thread reads at most one partial sum");
    const float *partial = clip ? c->scratch : NULL;
    float *norm = clip ? extra->norm : NULL, *target = extra ? extra->target : NULL;
    float max_norm = clip ? extra->max_grad_norm : 0.0f, tau = extra ? extra->tau : 0.0f;
    void *p_lp = extra ? extra->p_lp : NULL, *target_lp = extra && extra->target ? extra->target_lp : NULL;
    int32_t lp_dtype = extra ? extra->lp_dtype : RLT_LP_F32;
    const int32_t *skip = extra ? extra->skip : NULL;
    CUDA_REQUIRE(bk, !p_lp || lp_dtype == RLT_LP_BF16 || lp_dtype == RLT_LP_F16, "adam_ex");
    CUDA_CHECK(bk, cuda_launch_pdl(bk, adam_ex_kernel, dim3(cuda_blocks(bk, n ? n : 1, ADAM_EX_THREADS)),
                                   dim3(ADAM_EX_THREADS), p, g, m, v, n, hp, step, partial, norm, max_norm, target, tau,
                                   p_lp, target_lp, lp_dtype, skip));
    CUDA_CHECK_LAUNCH(bk, "adam_ex_kernel");
    return RLT_OK;
}

extern "C" cudaError_t cuda_preload_adam(void) {
    cudaFuncAttributes a;
    cudaError_t rc = cudaFuncGetAttributes(&a, adam_kernel);
    if (rc == cudaSuccess) rc = cudaFuncGetAttributes(&a, adam_ex_kernel);
    return rc;
}
