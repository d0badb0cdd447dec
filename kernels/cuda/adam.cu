/* adam.cu: the optimiser step over a whole flat parameter block in one launch: gradient clipping's second
 * stage, Adam (PyTorch's formulation, eps outside the square root), the Polyak target update and the 16-bit
 * copies; the CUDA twin of cpu_adam in kernels/cpu/fused.c.
 *
 * The step count is read from device memory, not passed in, so a captured graph that increments it with
 * counter_add replays correctly. Every thread recomputes the two bias corrections from it: two powf per
 * thread cost nothing next to the five memory streams of the update, and they spare a second launch.
 * The expressions follow the CPU oracles (cpu_clip_grad_norm, cpu_adam_plain, cpu_polyak) term for term; with
 * FMA contraction off (cuda_module.cmake) m and v come out bit-identical to them from the same clipped g, and p
 * differs only through powf's last-ulp differences from glibc. */
#include "lowp_elem.cuh"

/* Every block first reduces the CUDA_CLIP_BLOCKS partial sums of squares (the first n_parts written by
 * cuda_sumsq_partial just before, the others +0.0f) with one fixed tree, so each obtains the same norm, bit for
 * bit, without a grid-wide barrier; block 0 publishes it. Then each element is clipped, stepped, copied to 16 bits
 * and averaged into the target, in that order, while it is in a register. */
#define ADAM_THREADS 256
/* Seed batching: adam_kernel<true> runs agent blockIdx.z's step, its pointers moved and its partial sums its slice
 * of the scratch. Built apart from adam_kernel<false>, the single-agent kernel as it was: ten moved pointers take
 * registers the parameter space spares it (56 against 31 on sm_90), and the blocks an SM holds at once would
 * halve. */
template <bool SEEDS>
__global__ void adam_kernel(float *p, float *g, float *m, float *v, uint64_t n, rlt_adam_hp hp, const int64_t *step,
                               const float *partial, uint32_t n_parts, float *norm, float max_norm, float *target,
                               float tau, void *p_lp, void *target_lp, int32_t lp_dtype, const int32_t *skip,
                               const float *lr_dev, const float *tau_dev, const float *max_norm_dev, cuda_seeds sd) {
    __shared__ float shared[ADAM_THREADS];
    cuda_pdl_wait(); /* launched with cuda_launch_pdl */
    cuda_pdl_trigger();
    if (SEEDS) {
        p = cuda_seed_ptr(sd, p), g = cuda_seed_ptr(sd, g), m = cuda_seed_ptr(sd, m), v = cuda_seed_ptr(sd, v);
        step = cuda_seed_ptr(sd, step), norm = cuda_seed_ptr(sd, norm), target = cuda_seed_ptr(sd, target);
        p_lp = cuda_seed_ptr(sd, p_lp), target_lp = cuda_seed_ptr(sd, target_lp), skip = cuda_seed_ptr(sd, skip);
        lr_dev = cuda_seed_ptr(sd, lr_dev), tau_dev = cuda_seed_ptr(sd, tau_dev);
        max_norm_dev = cuda_seed_ptr(sd, max_norm_dev);
        if (partial) partial = cuda_seed_scratch(sd, (float *)partial);
    }
    if (skip && *skip) return; /* an fp16 step with non-finite gradients: nothing changes (amp's UNSCALE) */
    /* The step count and this thread's first element are read before the norm's tree: their loads need not wait for
     * it (in an update's graph this kernel is a link of the critical chain, and the tree is a dozen barriers). */
    const int64_t s = *step;
    /* The agent's hparams block, where the descriptor names it (a batched graph: each agent's own values). */
    if (lr_dev) hp.lr = *lr_dev;
    if (tau_dev && target) tau = *tau_dev;
    if (max_norm_dev && partial) max_norm = *max_norm_dev;
    const uint64_t i0 = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    float g0 = 0.0f, m0 = 0.0f, v0 = 0.0f, p0 = 0.0f, t0 = 0.0f;
    if (i0 < n) {
        g0 = g[i0], m0 = m[i0], v0 = v[i0], p0 = p[i0];
        if (target) t0 = target[i0];
    }
    float coef = 1.0f;
    if (partial) {
        shared[threadIdx.x] = threadIdx.x < n_parts ? partial[threadIdx.x] : 0.0f;
        __syncthreads();
        for (int half = ADAM_THREADS / 2; half > 0; half /= 2) {
            if ((int)threadIdx.x < half) shared[threadIdx.x] += shared[threadIdx.x + half];
            __syncthreads();
        }
        float nrm = sqrtf(shared[0]);
        if (blockIdx.x == 0 && threadIdx.x == 0) *norm = nrm;
        coef = max_norm / (nrm + 1e-6f);
    }
    const bool clip = partial && coef < 1.0f;
    /* The CPU twin rejects step < 1; here that would need a host sync, so the update is skipped instead
     * (bias correction 1 - beta^0 = 0 would divide by zero). */
    if (s < 1) return;
    const rlt_adam_coef c = rlt_adam_coefs(hp, s);
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = i0; i < n; i += stride) {
        const bool first = i == i0;
        float gi = first ? g0 : g[i];
        if (clip) {
            gi *= coef;
            g[i] = gi;
        }
        float mi = first ? m0 : m[i], vi = first ? v0 : v[i];
        float pi = rlt_adam_elem(hp, c, first ? p0 : p[i], gi, &mi, &vi);
        m[i] = mi;
        v[i] = vi;
        p[i] = pi;
        if (p_lp) lp_store(p_lp, lp_dtype, (int64_t)i, pi);
        if (target) {
            float ti = tau * pi + (1.0f - tau) * (first ? t0 : target[i]);
            target[i] = ti;
            if (target_lp) lp_store(target_lp, lp_dtype, (int64_t)i, ti);
        }
    }
}

extern "C" int cuda_adam(rlt_backend *bk, const rlt_adam_step *d) {
    CUDA_REQUIRE(bk, d->step != NULL, "adam");
    const int clip = d->max_grad_norm > 0.0f;
    CUDA_REQUIRE(bk, !clip || d->norm != NULL, "adam");
    CUDA_REQUIRE(bk, !d->target || (d->tau >= 0.0f && d->tau <= 1.0f), "adam");
    cuda_impl *c = cuda_get(bk);
    float *p = d->p, *g = d->g, *m = d->m, *v = d->v;
    uint64_t n = d->n;
    const float *lr_dev = d->lr_dev, *tau_dev = d->target ? d->tau_dev : NULL;
    const float *max_norm_dev = clip ? d->max_grad_norm_dev : NULL;
    RLT_TRY(cuda_seeds_check(bk, "adam", 13, p, g, m, v, d->step, clip ? d->norm : NULL, d->target, d->p_lp,
                             d->target ? d->target_lp : NULL, d->skip, lr_dev, tau_dev, max_norm_dev));
    if (clip) {
        /* The partial sums live in the backend's scratch, which only lane 0 may use. */
        if (c->lane != 0)
            return rlt_err_set(bk->err, RLT_ESTATE, __FILE__, __LINE__, "adam with clipping on lane %d: lane 0 only",
                               (int)c->lane);
        RLT_TRY(cuda_sumsq_partial(bk, g, n));
    }
    if (n == 0 && !clip) return RLT_OK;
    static_assert(CUDA_CLIP_BLOCKS <= ADAM_THREADS, "each thread reads at most one partial sum");
    const float *partial = clip ? c->scratch : NULL;
    float *norm = clip ? d->norm : NULL, *target = d->target;
    float max_norm = clip ? d->max_grad_norm : 0.0f, tau = d->tau;
    void *p_lp = d->p_lp, *target_lp = d->target ? d->target_lp : NULL;
    int32_t lp_dtype = d->lp_dtype;
    const int32_t *skip = d->skip;
    CUDA_REQUIRE(bk, !p_lp || lp_dtype == RLT_LP_BF16 || lp_dtype == RLT_LP_F16, "adam");
    const unsigned z = cuda_seeds_z(bk);
    CUDA_CHECK(bk, cuda_launch_pdl(bk, z > 1 ? adam_kernel<true> : adam_kernel<false>,
                                   dim3(cuda_blocks(bk, n ? n : 1, ADAM_THREADS), 1, z), dim3(ADAM_THREADS), p, g, m, v,
                                   n, d->hp, d->step, partial, cuda_clip_parts(n), norm, max_norm, target, tau, p_lp,
                                   target_lp, lp_dtype, skip, lr_dev, tau_dev, max_norm_dev, cuda_seeds_of(bk)));
    CUDA_CHECK_LAUNCH(bk, "adam_kernel");
    return RLT_OK;
}

extern "C" cudaError_t cuda_preload_adam(void) {
    cudaFuncAttributes a;
    cudaError_t rc = cudaFuncGetAttributes(&a, adam_kernel<false>);
    return rc == cudaSuccess ? cudaFuncGetAttributes(&a, adam_kernel<true>) : rc;
}
