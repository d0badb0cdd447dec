/* flat.c: the flat passes over contiguous blocks: fill (zero-grad), copy (hard target copy), Adam,
 * Polyak averaging (the first two and the last behind the table's flat op), and device-side counters. Each is one loop over the whole block, which is why every
 * network lays out params | grads | adam_m | adam_v with identical offsets. */
#include <math.h>
#include <string.h>

#include "cpu_ops.h"

/* Elements from which a flat pass is split in two even when the worker has side-lane jobs queued (a quarter
 * of a million: some 100 us of Adam, far longer than those jobs). */
#define FLAT_BIG 262144

typedef struct fill_job {
    float *x;
    uint64_t n;
    float value;
} fill_job;

static void fill_range(void *arg) {
    const fill_job *j = arg;
    if (j->value == 0.0f) {
        memset(j->x, 0, j->n * sizeof *j->x);
        return;
    }
    for (uint64_t i = 0; i < j->n; i++) j->x[i] = j->value;
}

int cpu_fill(rlt_backend *bk, float *x, uint64_t n, float value) {
    cpu_impl *im = bk->impl;
    fill_job j = {x, n, value};
    /* A zero-grad issued on a side lane goes whole to the worker, beside the calling thread's gather. */
    if (cpu_lane_side(bk)) return cpu_lane_defer(bk, fill_range, &j, sizeof j);
    if (n >= 65536 && cpu_lane_can_split(bk, n >= FLAT_BIG)) {
        /* Halves on a 64-byte line (from an aligned start), the worker's first as in Adam (below): a zero-grad
         * then leaves each half in the cache of the thread whose half of Adam reads it. */
        uint64_t h = n / 2 / 16 * 16;
        fill_job w = {x, h, value};
        j.x += h;
        j.n = n - h;
        uint64_t t = cpu_worker_post(im->worker, CPU_JOB_FREE, 0, fill_range, &w, sizeof w);
        fill_range(&j);
        cpu_worker_wait(im->worker, t);
        return RLT_OK;
    }
    fill_range(&j);
    return RLT_OK;
}

int cpu_copy_f32(rlt_backend *bk, float *dst, const float *src, uint64_t n) {
    cpu_lane_fence(bk);
    if (n) memmove(dst, src, n * sizeof *dst);
    return RLT_OK;
}

typedef struct counter_job {
    int64_t *c, v;
} counter_job;

static void counter_run(void *arg) {
    const counter_job *j = arg;
    *j->c += j->v;
}

int cpu_counter_add(rlt_backend *bk, int64_t *c, int64_t v) {
    counter_job j = {c, v};
    if (cpu_lane_side(bk)) return cpu_lane_defer(bk, counter_run, &j, sizeof j);
    counter_run(&j);
    return RLT_OK;
}

CPU_HOT int cpu_adam_plain(rlt_backend *bk, float *p, const float *g, float *m, float *v, uint64_t n, rlt_adam_hp hp,
                   const int64_t *step) {
    CPU_REQUIRE(bk, *step >= 1, "adam");
    rlt_adam_coef c = rlt_adam_coefs(hp, *step);
    for (uint64_t i = 0; i < n; i++) p[i] = rlt_adam_elem(hp, c, p[i], g[i], &m[i], &v[i]);
    return RLT_OK;
}

/* Adam then Polyak in one pass (the fast path of cpu_adam): m and v are the reference's expressions, bit for
 * bit except that subnormal numbers are flushed to zero (below); p moves by step_size * m / (sqrt(v) / sqrt(1 - b2^t) + eps) computed with the reciprocal and reciprocal
 * square root estimates each refined by one Newton step where AVX-512 is present (a few ulp from cpu_adam_plain's
 * divisions, far inside the GPU parity bound for p, and no divider in the loop), and with one division
 * elsewhere; the target moves toward the new p while it is in a register (target NULL: no Polyak step). */
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

__attribute__((target("avx512f"))) static uint64_t adam_polyak_512(float *p, const float *g, float *m, float *v,
                                                                    uint64_t n, rlt_adam_hp hp, float step_size,
                                                                    float inv_bc2_sqrt, float *target, float tau) {
    const __m512 b1 = _mm512_set1_ps(hp.beta1), c1 = _mm512_set1_ps(1.0f - hp.beta1);
    const __m512 b2 = _mm512_set1_ps(hp.beta2), c2 = _mm512_set1_ps(1.0f - hp.beta2);
    const __m512 ss = _mm512_set1_ps(step_size), ib = _mm512_set1_ps(inv_bc2_sqrt), eps = _mm512_set1_ps(hp.eps);
    const __m512 half = _mm512_set1_ps(0.5f), three_halves = _mm512_set1_ps(1.5f), two = _mm512_set1_ps(2.0f);
    const __m512 t = _mm512_set1_ps(tau), keep = _mm512_set1_ps(1.0f - tau), zero = _mm512_setzero_ps();
    uint64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 gi = _mm512_loadu_ps(g + i);
        /* The reference's order: b1 m + (1 - b1) g and b2 v + ((1 - b2) g) g, unfused. */
        __m512 mi = _mm512_add_ps(_mm512_mul_ps(b1, _mm512_loadu_ps(m + i)), _mm512_mul_ps(c1, gi));
        __m512 vi = _mm512_add_ps(_mm512_mul_ps(b2, _mm512_loadu_ps(v + i)), _mm512_mul_ps(_mm512_mul_ps(c2, gi), gi));
        _mm512_storeu_ps(m + i, mi);
        _mm512_storeu_ps(v + i, vi);
        /* sqrt(v) = v / sqrt(v), 0 where v is 0 (v >= 0 always). */
        __m512 r = _mm512_rsqrt14_ps(vi);
        r = _mm512_mul_ps(r, _mm512_sub_ps(three_halves, _mm512_mul_ps(_mm512_mul_ps(half, vi), _mm512_mul_ps(r, r))));
        __m512 sq = _mm512_maskz_mul_ps(_mm512_cmp_ps_mask(vi, zero, _CMP_GT_OQ), vi, r);
        __m512 d = _mm512_add_ps(_mm512_mul_ps(sq, ib), eps);
        __m512 q = _mm512_rcp14_ps(d);
        q = _mm512_mul_ps(q, _mm512_sub_ps(two, _mm512_mul_ps(d, q)));
        __m512 pi = _mm512_sub_ps(_mm512_loadu_ps(p + i), _mm512_mul_ps(_mm512_mul_ps(ss, mi), q));
        _mm512_storeu_ps(p + i, pi);
        if (target)
            _mm512_storeu_ps(target + i, _mm512_add_ps(_mm512_mul_ps(t, pi), _mm512_mul_ps(keep, _mm512_loadu_ps(target + i))));
    }
    return i;
}

static int adam_has_512(void) {
    static int has = -1; /* a benign race: every thread computes the same value */
    if (has < 0) {
        __builtin_cpu_init();
        has = __builtin_cpu_supports("avx512f") ? 1 : 0;
    }
    return has;
}
#endif

/* Adam then Polyak over elements [0, n) of the given arrays: the body of cpu_adam_polyak, run by one thread. */
typedef struct adam_job {
    float *p;
    const float *g;
    float *m, *v, *target;
    uint64_t n;
    rlt_adam_hp hp;
    float step_size, inv_bc2_sqrt, tau;
    int fast;
} adam_job;

static void adam_range(void *arg) {
    const adam_job *j = arg;
    float *p = j->p, *m = j->m, *v = j->v, *target = j->target;
    const float *g = j->g;
    rlt_adam_hp hp = j->hp;
    float step_size = j->step_size, inv_bc2_sqrt = j->inv_bc2_sqrt, tau = j->tau, keep = 1.0f - tau;
    uint64_t n = j->n, i = 0;
#if defined(__x86_64__) && defined(__GNUC__)
    /* The moments of parameters whose gradient stays 0 (a dead ReLU unit) decay geometrically into subnormal
     * numbers within a few hundred steps (m by 0.9 a step), and every operation on a subnormal takes a
     * microcode assist: that made this pass a sixth of a 64-64 TD3 update. The fast pass flushes them to
     * zero (MXCSR FTZ and DAZ, per thread, restored on the way out); the reference ops (a CPU without AVX2)
     * keep IEEE subnormals. */
    unsigned csr = _mm_getcsr();
    if (j->fast) _mm_setcsr(csr | 0x8040);
    if (j->fast && adam_has_512()) i = adam_polyak_512(p, g, m, v, n, hp, step_size, inv_bc2_sqrt, target, tau);
#endif
    for (; i < n; i++) {
        float gi = g[i];
        float mi = m[i], vi = v[i];
        rlt_adam_moments(hp, gi, &mi, &vi);
        m[i] = mi;
        v[i] = vi;
        /* The reciprocal form of the AVX-512 loop above, so the tail matches it. */
        float pi = p[i] - step_size * mi / (sqrtf(vi) * inv_bc2_sqrt + hp.eps);
        p[i] = pi;
        if (target) target[i] = tau * pi + keep * target[i];
    }
#if defined(__x86_64__) && defined(__GNUC__)
    if (j->fast) _mm_setcsr(csr);
#endif
}

/* Blocks at least this long are split between the two threads (below it the hand-off costs more). */
#define ADAM_SPLIT_MIN 4096

CPU_HOT int cpu_adam_polyak(rlt_backend *bk, float *p, const float *g, float *m, float *v, uint64_t n, rlt_adam_hp hp,
                            const int64_t *step, float *target, float tau) {
    cpu_lane_fence(bk); /* before *step is read: a side lane's counter_add may still be queued */
    CPU_REQUIRE(bk, *step >= 1, "adam");
    CPU_REQUIRE(bk, !target || (tau >= 0.0f && tau <= 1.0f), "polyak");
    rlt_adam_coef c = rlt_adam_coefs(hp, *step);
    cpu_impl *im = bk->impl;
    int fast = 0;
#if defined(__x86_64__) && defined(__GNUC__)
    fast = !im || im->dense;
#endif
    adam_job j = {p, g, m, v, target, n, hp, c.step_size, 1.0f / c.bc2_sqrt, tau, fast};
    if (n >= ADAM_SPLIT_MIN && cpu_lane_can_split(bk, n >= FLAT_BIG)) {
        /* Elementwise, so any split gives the same bits as long as each element takes the same path: the
         * first half is a whole number of 16-lane vectors, and only the second half has a scalar tail. The
         * split falls on a 64-byte line so the threads never write the same cache line. The worker takes the
         * first half: in TD3's critic block (Q1 | Q2) that is Q1, whose gradients it computed (lanes.c), so
         * each half is stepped where its gradients and weights already are. */
        uint64_t h = n / 2 / 16 * 16;
        adam_job w = j;
        j.p += h, j.g += h, j.m += h, j.v += h, j.n = n - h;
        if (target) j.target += h;
        w.n = h;
        uint64_t t = cpu_worker_post(im->worker, CPU_JOB_FREE, 0, adam_range, &w, sizeof w);
        adam_range(&j);
        cpu_worker_wait(im->worker, t);
        return RLT_OK;
    }
    adam_range(&j);
    return RLT_OK;
}

CPU_HOT int cpu_polyak(rlt_backend *bk, float *target, const float *src, uint64_t n, float tau) {
    CPU_REQUIRE(bk, tau >= 0.0f && tau <= 1.0f, "polyak");
    cpu_lane_fence(bk);
    for (uint64_t i = 0; i < n; i++) target[i] = tau * src[i] + (1.0f - tau) * target[i];
    return RLT_OK;
}

/* The table's flat op: one entry point for the three passes (kernels/backend.h). */
int cpu_flat(rlt_backend *bk, rlt_flat_mode mode, float *dst, const float *src, uint64_t n, float scalar) {
    switch (mode) {
    case RLT_FLAT_FILL: return cpu_fill(bk, dst, n, scalar);
    case RLT_FLAT_COPY: return cpu_copy_f32(bk, dst, src, n);
    case RLT_FLAT_POLYAK: return cpu_polyak(bk, dst, src, n, scalar);
    }
    return rlt_err_set(bk->err, RLT_EINVAL, __FILE__, __LINE__, "flat: unknown mode %d", (int)mode);
}
