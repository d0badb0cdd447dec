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
#ifndef ADAM_SEEDS_ITEMS
#define ADAM_SEEDS_ITEMS 1 /* see adam_kernel */
#endif
#ifndef ADAM_SEEDS_MIN_BLOCKS
#define ADAM_SEEDS_MIN_BLOCKS 4 /* the batched kernel's blocks an SM: 64 registers a thread (81 without) */
#endif

/* What every element's step shares: the streams, the clipping coefficient and tau. */
struct adam_args {
    float *p, *g, *m, *v, *target;
    void *p_lp, *target_lp;
    int32_t lp_dtype;
    bool clip;
    float coef, tau;
};

/* One element's whole step, in the order the CPU oracles take it: clipped (g written back), stepped, copied to 16
 * bits, averaged into the target; the new p, m, v and target go to *po, *mo, *vo, *to for the caller to store. */
__device__ __forceinline__ void adam_one(const adam_args &a, const rlt_adam_hp &hp, const rlt_adam_coef &c, uint64_t i,
                                         float pi, float gi, float mi, float vi, float ti, float *po, float *mo,
                                         float *vo, float *to) {
    if (a.clip) {
        gi *= a.coef;
        a.g[i] = gi;
    }
    pi = rlt_adam_elem(hp, c, pi, gi, &mi, &vi);
    *mo = mi, *vo = vi, *po = pi;
    if (a.p_lp) lp_store(a.p_lp, a.lp_dtype, (int64_t)i, pi);
    if (a.target) {
        ti = a.tau * pi + (1.0f - a.tau) * ti;
        *to = ti;
        if (a.target_lp) lp_store(a.target_lp, a.lp_dtype, (int64_t)i, ti);
    }
}

/* VEC 4: each thread steps four neighbouring elements through 16-byte loads and stores (every stream 16-byte
 * aligned, checked by the launcher), and thread 0 the n % 4 left; the same arithmetic per element, so the same bits.
 * One element per thread paid the two powf of the bias corrections and a batched seed's pointer moves for every
 * element, and its scalar loads left the step at a third of the memory's rate (bench/RESULTS.md). */
/* Seed batching: adam_kernel<true, VEC> runs agent blockIdx.z's step, its pointers moved and its partial sums its slice
 * of the scratch. Built apart from adam_kernel<false, VEC>, the single-agent kernel: ten moved pointers take
 * registers the parameter space spares it (56 against 31 on sm_90), and the blocks an SM holds at once would
 * halve. */
/* ITEMS: the vectors a thread steps at once, loaded together before any is stepped (1 everywhere now). 16 TD3 seeds'
 * critics (2.15 million parameters) were 2,272 blocks of one vector a thread at 3 blocks an SM (81 registers), 30 us
 * in place on an H200 (ncu), about 2 TB/s. Measured in one call (bench_td3_update, 16 and 64 seeds, H200): capping
 * the batched kernel at 64 registers (4 blocks an SM, ADAM_SEEDS_MIN_BLOCKS) with one vector a thread beat two
 * vectors a thread (ADAM_SEEDS_ITEMS=2: 64 registers and 44 bytes of spill) by 1-2%. The same arithmetic per element
 * either way: the same bits. */
template <bool SEEDS, int VEC, int ITEMS>
__global__ void __launch_bounds__(ADAM_THREADS, SEEDS ? ADAM_SEEDS_MIN_BLOCKS : 1)
    adam_kernel(float *p, float *g, float *m, float *v, uint64_t n, rlt_adam_hp hp, const int64_t *step,
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
    /* The step count and this thread's first elements are read before the norm's tree: their loads need not wait for
     * it (in an update's graph this kernel is a link of the critical chain, and the tree is a dozen barriers). */
    const int64_t s = *step;
    /* The agent's hparams block, where the descriptor names it (a batched graph: each agent's own values). */
    if (lr_dev) hp.lr = *lr_dev;
    if (tau_dev && target) tau = *tau_dev;
    if (max_norm_dev && partial) max_norm = *max_norm_dev;
    const uint64_t i0 = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x, nv = n / VEC;
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    float4 g0[ITEMS], m0[ITEMS], v0[ITEMS], p0[ITEMS], t0[ITEMS];
    auto load = [&](uint64_t q) {
#pragma unroll
        for (int j = 0; j < ITEMS; j++) {
            const uint64_t qj = q + j * stride;
            g0[j] = m0[j] = v0[j] = p0[j] = t0[j] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            if (qj >= nv) continue;
            if (VEC == 4) {
                g0[j] = ((const float4 *)g)[qj], m0[j] = ((const float4 *)m)[qj], v0[j] = ((const float4 *)v)[qj];
                p0[j] = ((const float4 *)p)[qj];
                if (target) t0[j] = ((const float4 *)target)[qj];
            } else {
                g0[j].x = g[qj], m0[j].x = m[qj], v0[j].x = v[qj], p0[j].x = p[qj];
                if (target) t0[j].x = target[qj];
            }
        }
    };
    load(i0);
    adam_args a = {p, g, m, v, target, p_lp, target_lp, lp_dtype, false, 1.0f, tau};
    if (partial) {
        shared[threadIdx.x] = threadIdx.x < n_parts ? partial[threadIdx.x] : 0.0f;
        __syncthreads();
        for (int half = ADAM_THREADS / 2; half > 0; half /= 2) {
            if ((int)threadIdx.x < half) shared[threadIdx.x] += shared[threadIdx.x + half];
            __syncthreads();
        }
        float nrm = sqrtf(shared[0]);
        if (blockIdx.x == 0 && threadIdx.x == 0) *norm = nrm;
        a.coef = max_norm / (nrm + 1e-6f);
    }
    a.clip = partial && a.coef < 1.0f;
    /* The CPU twin rejects step < 1; here that would need a host sync, so the update is skipped instead
     * (bias correction 1 - beta^0 = 0 would divide by zero). */
    if (s < 1) return;
    /* The bias corrections' two powf once a block, not once a thread: ncu puts the batched step at 860 instructions a
     * thread (four elements), instruction-bound (16 TD3 seeds' critics: 22 us, 1.9 TB/s); the same values. */
    __shared__ rlt_adam_coef cs;
    if (threadIdx.x == 0) cs = rlt_adam_coefs(hp, s);
    __syncthreads();
    const rlt_adam_coef c = cs;
    for (uint64_t q = i0; q < nv; q += stride * ITEMS) {
        if (q != i0) load(q);
#pragma unroll
        for (int j = 0; j < ITEMS; j++) {
            const uint64_t qj = q + j * stride;
            if (qj >= nv) break;
            const uint64_t i = qj * VEC;
            adam_one(a, hp, c, i, p0[j].x, g0[j].x, m0[j].x, v0[j].x, t0[j].x, &p0[j].x, &m0[j].x, &v0[j].x, &t0[j].x);
            if (VEC == 4) {
                adam_one(a, hp, c, i + 1, p0[j].y, g0[j].y, m0[j].y, v0[j].y, t0[j].y, &p0[j].y, &m0[j].y, &v0[j].y,
                         &t0[j].y);
                adam_one(a, hp, c, i + 2, p0[j].z, g0[j].z, m0[j].z, v0[j].z, t0[j].z, &p0[j].z, &m0[j].z, &v0[j].z,
                         &t0[j].z);
                adam_one(a, hp, c, i + 3, p0[j].w, g0[j].w, m0[j].w, v0[j].w, t0[j].w, &p0[j].w, &m0[j].w, &v0[j].w,
                         &t0[j].w);
                ((float4 *)m)[qj] = m0[j], ((float4 *)v)[qj] = v0[j], ((float4 *)p)[qj] = p0[j];
                if (target) ((float4 *)target)[qj] = t0[j];
            } else {
                m[qj] = m0[j].x, v[qj] = v0[j].x, p[qj] = p0[j].x;
                if (target) target[qj] = t0[j].x;
            }
        }
    }
    /* The n % VEC elements past the last whole vector. */
    if (VEC > 1 && i0 == 0)
        for (uint64_t i = nv * VEC; i < n; i++) {
            float pi, mi, vi, ti = 0.0f;
            adam_one(a, hp, c, i, p[i], g[i], m[i], v[i], target ? target[i] : 0.0f, &pi, &mi, &vi, &ti);
            m[i] = mi, v[i] = vi, p[i] = pi;
            if (target) target[i] = ti;
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
    /* Four elements a thread where every stream is 16-byte aligned (a batched agent's arena lies a multiple of the
     * plan's alignment from the lead's, so its pointers align as the lead's do). */
    const uintptr_t any = (uintptr_t)p | (uintptr_t)g | (uintptr_t)m | (uintptr_t)v | (uintptr_t)target;
    /* One agent takes four a thread only where that still gives every SM a block: the DQN MLP's 10,900 parameters
     * were 11 blocks four-wide, 5.1 us in place on an H200 against 3.6 us for 43 blocks of one (ncu), on the
     * critical path of every update. Batched seeds have z times the blocks. */
    const uint64_t sms = (uint64_t)cuda_get(bk)->sm_count;
    const int vec = (any % 16) == 0 && n >= 4 && (z > 1 || n / 4 >= sms * ADAM_THREADS);
    void (*kernel)(float *, float *, float *, float *, uint64_t, rlt_adam_hp, const int64_t *, const float *, uint32_t,
                   float *, float, float *, float, void *, void *, int32_t, const int32_t *, const float *,
                   const float *, const float *, cuda_seeds) =
        z > 1 ? (vec ? adam_kernel<true, 4, ADAM_SEEDS_ITEMS> : adam_kernel<true, 1, ADAM_SEEDS_ITEMS>)
              : (vec ? adam_kernel<false, 4, 1> : adam_kernel<false, 1, 1>);
    const uint64_t items = vec ? n / 4 : n, per = z > 1 ? ADAM_SEEDS_ITEMS : 1;
    CUDA_CHECK(bk, cuda_launch_pdl(bk, kernel, dim3(cuda_blocks(bk, items ? (items + per - 1) / per : 1, ADAM_THREADS), 1, z),
                                   dim3(ADAM_THREADS), p, g, m, v,
                                   n, d->hp, d->step, partial, cuda_clip_parts(n), norm, max_norm, target, tau, p_lp,
                                   target_lp, lp_dtype, skip, lr_dev, tau_dev, max_norm_dev, cuda_seeds_of(bk)));
    CUDA_CHECK_LAUNCH(bk, "adam_kernel");
    return RLT_OK;
}

extern "C" cudaError_t cuda_preload_adam(void) {
    cudaFuncAttributes a;
    cudaError_t rc = cudaFuncGetAttributes(&a, adam_kernel<false, 1, 1>);
    if (rc == cudaSuccess) rc = cudaFuncGetAttributes(&a, adam_kernel<false, 4, 1>);
    if (rc == cudaSuccess) rc = cudaFuncGetAttributes(&a, adam_kernel<true, 1, ADAM_SEEDS_ITEMS>);
    return rc == cudaSuccess ? cudaFuncGetAttributes(&a, adam_kernel<true, 4, ADAM_SEEDS_ITEMS>) : rc;
}
