/* linear_chain.cu: a small MLP's whole forward in one launch (linear_chain_forward) while seeds are batched, where
 * linear.cu takes one launch per layer. A batched round of 16 DQN seeds on CartPole's 4-120-84-2 network is a chain
 * of dependent launches (docs/gpu_kernels.md), three of them per forward, each a wave of hundreds of short blocks
 * for 16 agents; here a forward is one wave of 128 blocks a network (16 seeds x 8 blocks of 16 rows).
 *
 * A block takes 16 rows of one agent through every layer. It copies its rows of x, then each layer's weights and
 * bias as a copy group of its own, into shared memory; layer l waits for its group only, runs, keeps its output in
 * shared memory as the next layer's input and writes it to its global buffer (the backward reads it). Each output is
 * summed exactly as linear.cu's kernel for that layer's shape sums it (cuda_linear_fwd_kind names the path): the
 * same products in the same order, so a chain writes linear_forward's bits, layer by layer, and a batched seed keeps
 * its single run's bits (gpu_ops_parity compares them byte for byte, gpu_seed_batch whole checkpoints):
 *   OUTER   K <= 4: the K products in k order from 0, then + 0.0f;
 *   ROWDOT  N <= 8: lane l sums k = l, l + 32, ..., then a butterfly of shuffles over the 32 lanes;
 *   GEMM    the K range in chunks of 32 (zeros past K), chunk k split into KG groups of 32 / KG k; group g's
 *           partial sum runs over its k of every chunk in order, and the partials are added in group order;
 * then act(sum + b). Here a thread takes 2 rows x 4 columns and forms the KG partial sums one after another where
 * linear.cu spreads them over threads: the arithmetic is the same.
 *
 * Only while batching 8 or more seeds (cuda_seeds, grid z the agent, every pointer moved by its delta as in
 * linear.cu; CHAIN_MIN_SEEDS below): fewer seeds' and a single agent's chains run layer by layer. Measured on an
 * H100 (bench/RESULTS.md): for one agent a one-launch forward (4-row blocks, the k-groups over threads, 8 us alone
 * against 15 us for the three launches) only matched the three launches inside the update's graph (35.6k against
 * 35.7k updates/s), and 16 agents with a graph each lost 11% (188k against 211k): its blocks hold an SM longer and
 * copy the weights 32 times a network.
 *
 * Shape limits (else layer by layer): fp32, every layer at most 128 wide in and out and on our kernels (not the
 * library), weights and biases plus two 16-row activation buffers within CHAIN_SMEM_MAX bytes of shared memory
 * (CartPole's network: 64 KiB). Bank layout: a GEMM layer's W rows are sk = kpad + 4 floats apart (4 mod 32: 16-byte
 * reads of 8 neighbouring rows hit different banks), the other kinds' W is stored as it is; activations rows are sx
 * apart, a multiple of 4. */
#include <string.h>

#include "cp_async.cuh"
#include "cuda_ops.h"

#define CHAIN_THREADS 256
#define CHAIN_ROWS 16        /* rows a block takes through the layers: 8 pairs */
#define CHAIN_MAX_WIDTH 128  /* inputs or outputs of a layer; 8 row pairs x 32 column quads = 256 threads */
#define CHAIN_SMEM_MAX (96 * 1024)
#define CHAIN_CHUNK 32       /* linear.cu's LIN_BK (its cuda_linear_fwd_kind asserts it) */
/* Blocks an SM must hold at once (launch bounds): 3 caps a thread at 80 registers (24 bytes of spill), so 16 batched
 * seeds' three forwards (384 blocks of CartPole's network) fit an H100 in one wave; 2 lost 13% (212k against 243k
 * DQN updates/s). */
#define CHAIN_MIN_BLOCKS 3

typedef struct chain_layer {
    const float *W, *b; /* W [fo, fi] row-major; b [fo] or NULL */
    float *y;           /* [rows, fo], row stride ldy */
    int32_t fi, fo, ldy, act, kind;
    int32_t kpad;       /* k the sums run over: fi, or for a GEMM kind fi rounded up to whole chunks */
    int32_t sk;         /* W's row stride in shared memory: GEMM kpad + 4 (zeros from fi), else fi */
    int32_t w_vec;      /* GEMM: W's rows start 16-byte aligned in global memory (fi % 4 == 0): 16-byte copies */
    int32_t w_off;      /* W's first float in shared memory */
    int32_t b_off;      /* b's first float in shared memory (zeros without b): no global load in the epilogue */
    int32_t zero_to;    /* the next layer's kpad: columns fo .. zero_to - 1 of this output are zeroed */
} chain_layer;

typedef struct chain_launch {
    chain_layer l[RLT_CHAIN_MAX_LAYERS];
    const float *x;
    int32_t ldx, rows, n, sx, w_floats;
    cuda_seeds sd;
} chain_launch;

/* Waits until at most n of this thread's copy groups are in flight (n < RLT_CHAIN_MAX_LAYERS). */
__device__ __forceinline__ void chain_wait(int n) {
    switch (n) {
    case 0: cp_async_wait<0>(); break;
    case 1: cp_async_wait<1>(); break;
    case 2: cp_async_wait<2>(); break;
    case 3: cp_async_wait<3>(); break;
    case 4: cp_async_wait<4>(); break;
    case 5: cp_async_wait<5>(); break;
    case 6: cp_async_wait<6>(); break;
    case 7: cp_async_wait<7>(); break;
    default: cp_async_wait<8>(); break;
    }
}

/* (q, r) = (e / d, e % d) for e = start, start + CHAIN_THREADS, ...: one division, then additions (a division costs
 * some 25 instructions, and these loops run a few times per thread per layer). */
struct chain_walk {
    int q, r;
    const int d, dq, dr;
    __device__ __forceinline__ chain_walk(int e, int d_)
        : q(e / d_), r(e % d_), d(d_), dq(CHAIN_THREADS / d_), dr(CHAIN_THREADS % d_) {}
    __device__ __forceinline__ void next() {
        q += dq, r += dr;
        if (r >= d) r -= d, q++;
    }
};

/* Layer c's weights into shared memory. A GEMM layer's rows are padded (W[n][k] for k < fi, zeros up to sk); the
 * other kinds' are not (sk = fi), so their weights are one contiguous block. */
__device__ __forceinline__ void chain_copy_w(const chain_layer &c, const float *W, float *ws) {
    float *dst = ws + c.w_off;
    const int gemm = c.kind == CUDA_FWD_GEMM_KG8 || c.kind == CUDA_FWD_GEMM_KG4;
    if (!gemm) {
        const int total = c.fo * c.fi;
        if (c.w_vec)
            for (int q = threadIdx.x; q < total / 4; q += CHAIN_THREADS) cp_async16(dst + 4 * q, W + 4 * q, 16);
        for (int e = c.w_vec ? total / 4 * 4 + (int)threadIdx.x : (int)threadIdx.x; e < total; e += CHAIN_THREADS)
            cp_async4(dst + e, W + e, true);
        return;
    }
    const int unit = c.w_vec ? 4 : 1, per = c.sk / unit; /* copies per padded row */
    chain_walk w(threadIdx.x, per);
    for (; w.q < c.fo; w.next()) {
        const int n = w.q, k = w.r * unit;
        if (c.w_vec) {
            const int bytes = k < c.fi ? 16 : 0;
            cp_async16(dst + n * c.sk + k, bytes ? W + (int64_t)n * c.fi + k : W, bytes);
        } else {
            const bool ok = k < c.fi;
            cp_async4(dst + n * c.sk + k, ok ? W + (int64_t)n * c.fi + k : W, ok);
        }
    }
}

/* One output of a layer: act(v + b[n]) to y's row m (when it is a real row) and to the next layer's input. b is
 * the bias's copy in shared memory (zeros for none: v + 0.0f, as linear.cu adds without a bias): read from global
 * memory, each bias load would wait behind the previous output's store for a round trip to L2. */
__device__ __forceinline__ void chain_store(const chain_layer &c, const float *b, float *y, float *out, int32_t sx,
                                            int m, int n, int rows, float v) {
    const float o = cuda_act(v + b[n], c.act);
    if (m < rows) y[(int64_t)m * c.ldy + n] = o;
    if (out) out[m * sx + n] = o;
}

/* The products of one GEMM task: part[i][j] = sum over k-group g's k of every chunk, in order, of row pair a0/a1
 * times W rows w[j], 4 k per 16-byte read (neighbouring threads read neighbouring rows of W, which sk = 4 mod 32
 * spreads over all banks). */
template <int KG>
__device__ __forceinline__ void chain_group(float (&part)[2][4], const float *a0, const float *a1,
                                            const float *const (&w)[4], int g, int chunks) {
    constexpr int KPG = CHAIN_CHUNK / KG;
    static_assert(KPG % 4 == 0, "a group's k in whole quads");
#pragma unroll
    for (int j = 0; j < 4; j++) part[0][j] = part[1][j] = 0.0f;
#pragma unroll 2
    for (int ch = 0; ch < chunks; ch++) {
#pragma unroll
        for (int kq = 0; kq < KPG; kq += 4) {
            const int k = ch * CHAIN_CHUNK + g * KPG + kq;
            const float4 x0 = *reinterpret_cast<const float4 *>(a0 + k);
            const float4 x1 = *reinterpret_cast<const float4 *>(a1 + k);
            const float xa[4] = {x0.x, x0.y, x0.z, x0.w}, xb[4] = {x1.x, x1.y, x1.z, x1.w};
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const float4 wv = *reinterpret_cast<const float4 *>(w[j] + k);
                const float wk[4] = {wv.x, wv.y, wv.z, wv.w};
#pragma unroll
                for (int kk = 0; kk < 4; kk++) {
                    part[0][j] = fmaf(xa[kk], wk[kk], part[0][j]);
                    part[1][j] = fmaf(xb[kk], wk[kk], part[1][j]);
                }
            }
        }
    }
}

/* GEMM kinds: a task is 2 rows x 4 columns (cg, cg + CG, ...), a thread's (8 row pairs x at most 32 column quads);
 * the thread forms its KG partial sums one after another and adds them as it goes. */
template <int KG>
__device__ __forceinline__ void chain_gemm(const chain_layer &c, const float *ws, const float *in, const float *b,
                                           float *y, float *out, int32_t sx, int rows) {
    const int N = c.fo, CG = (N + 3) / 4, chunks = c.kpad / CHAIN_CHUNK;
    for (chain_walk it(threadIdx.x, CG); it.q < CHAIN_ROWS / 2; it.next()) {
        const int cg = it.r, rp = it.q;
        const float *a0 = in + 2 * rp * sx, *a1 = a0 + sx;
        const float *w[4];
#pragma unroll
        for (int j = 0; j < 4; j++) w[j] = ws + c.w_off + min(cg + j * CG, N - 1) * c.sk;
        float part[2][4], tot[2][4];
#pragma unroll 1
        for (int g = 0; g < KG; g++) {
            chain_group<KG>(part, a0, a1, w, g, chunks);
#pragma unroll
            for (int i = 0; i < 2; i++)
#pragma unroll
                for (int j = 0; j < 4; j++) tot[i][j] = g == 0 ? part[i][j] : tot[i][j] + part[i][j];
        }
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const int n = cg + j * CG;
            if (n >= N) break;
            chain_store(c, b, y, out, sx, 2 * rp, n, rows, tot[0][j]);
            chain_store(c, b, y, out, sx, 2 * rp + 1, n, rows, tot[1][j]);
        }
    }
}

/* ROWDOT: a warp per row, lanes over k, then the butterfly (linear.cu's lin_rowdot_tile). */
__device__ __forceinline__ void chain_rowdot(const chain_layer &c, const float *ws, const float *in, const float *b,
                                             float *y, float *out, int32_t sx, int rows) {
    constexpr int MAXN = 8;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    for (int m = warp; m < CHAIN_ROWS; m += CHAIN_THREADS / 32) {
        float acc[MAXN];
#pragma unroll
        for (int j = 0; j < MAXN; j++) acc[j] = 0.0f;
        for (int k = lane; k < c.fi; k += 32) {
            const float av = in[m * sx + k];
#pragma unroll
            for (int j = 0; j < MAXN; j++)
                if (j < c.fo) acc[j] = fmaf(av, ws[c.w_off + j * c.sk + k], acc[j]);
        }
        const float v = cuda_warp_sums<MAXN>(acc, c.fo, lane);
        if (lane < c.fo) chain_store(c, b, y, out, sx, m, lane, rows, v);
    }
}

/* OUTER: K <= 4 products per output in k order (linear.cu's lin_outer_tile); a thread keeps one column's weights
 * and takes every (256 / N)-th row. */
__device__ __forceinline__ void chain_outer(const chain_layer &c, const float *ws, const float *in, const float *b,
                                            float *y, float *out, int32_t sx, int rows) {
    const int N = c.fo, step = CHAIN_THREADS / N, n = threadIdx.x % N;
    if ((int)threadIdx.x >= step * N) return;
    float wk[4];
#pragma unroll
    for (int k = 0; k < 4; k++) wk[k] = k < c.fi ? ws[c.w_off + n * c.sk + k] : 0.0f;
    for (int m = threadIdx.x / N; m < CHAIN_ROWS; m += step) {
        float v = 0.0f;
#pragma unroll
        for (int k = 0; k < 4; k++)
            if (k < c.fi) v = fmaf(in[m * sx + k], wk[k], v);
        chain_store(c, b, y, out, sx, m, n, rows, v + 0.0f);
    }
}

__global__ void __launch_bounds__(CHAIN_THREADS, CHAIN_MIN_BLOCKS)
    chain_kernel(const __grid_constant__ chain_launch L) {
    extern __shared__ __align__(16) float smem[];
    cuda_pdl_wait(); /* launched with cuda_launch_pdl_smem: nothing touches memory before this */
    cuda_pdl_trigger();
    const int t = threadIdx.x;
    const int64_t dz = L.sd.delta[blockIdx.z];
    const int32_t m0 = (int32_t)blockIdx.x * CHAIN_ROWS;
    const int rows = min(CHAIN_ROWS, L.rows - m0);
    float *ws = smem, *in = smem + L.w_floats, *out = in + CHAIN_ROWS * L.sx;

    /* This block's rows of x (zero rows past the end, zeros past fi) with the first layer's weights and bias, then
     * each further layer's as a copy group of its own. */
    const float *x = cuda_at(L.x, dz);
    const int kp0 = L.l[0].kpad;
    for (int m = t / 32; m < CHAIN_ROWS; m += CHAIN_THREADS / 32)
        for (int k = t % 32; k < kp0; k += 32) {
            const bool ok = m < rows && k < L.l[0].fi;
            cp_async4(in + m * L.sx + k, ok ? x + (int64_t)(m0 + m) * L.ldx + k : x, ok);
        }
    for (int l = 0; l < L.n; l++) {
        const chain_layer &c = L.l[l];
        const float *b = c.b ? cuda_at(c.b, dz) : nullptr;
        for (int n = t; n < c.fo; n += CHAIN_THREADS) cp_async4(ws + c.b_off + n, b ? b + n : x, b != nullptr);
        chain_copy_w(c, cuda_at(c.W, dz), ws);
        cp_async_commit();
    }

    for (int l = 0; l < L.n; l++) {
        const chain_layer &c = L.l[l];
        chain_wait(L.n - 1 - l);
        __syncthreads();
        const float *b = ws + c.b_off;
        float *y = cuda_at(c.y, dz) + (int64_t)m0 * c.ldy;
        float *o = l + 1 < L.n ? out : nullptr; /* the last layer's output stays in global memory only */
        if (c.kind == CUDA_FWD_OUTER) chain_outer(c, ws, in, b, y, o, L.sx, rows);
        else if (c.kind == CUDA_FWD_ROWDOT) chain_rowdot(c, ws, in, b, y, o, L.sx, rows);
        else if (c.kind == CUDA_FWD_GEMM_KG8) chain_gemm<8>(c, ws, in, b, y, o, L.sx, rows);
        else chain_gemm<4>(c, ws, in, b, y, o, L.sx, rows);
        if (o) /* the next layer's sums run over zeros past its fi */
            for (int m = t / 32; m < CHAIN_ROWS; m += CHAIN_THREADS / 32)
                for (int k = c.fo + t % 32; k < c.zero_to; k += 32) o[m * L.sx + k] = 0.0f;
        float *s = in;
        in = out, out = s;
    }
}

/* Fills L for the chain, or returns 0 where it cannot run as one launch (then the layers run one by one). */
static int chain_plan(rlt_backend *bk, const rlt_linear_fwd *ly, int32_t n, chain_launch *L, size_t *bytes) {
    if (n < 2 || ly[0].rows < 1) return 0;
    memset(L, 0, sizeof *L);
    int32_t w = 0, sx = 4;
    for (int32_t l = 0; l < n; l++) {
        const rlt_linear_fwd *d = &ly[l];
        chain_layer *c = &L->l[l];
        if (d->dtype != RLT_LP_F32 || d->y_dtype != RLT_LP_F32 || d->rows != ly[0].rows) return 0;
        if (d->fi < 1 || d->fo < 1 || d->fi > CHAIN_MAX_WIDTH || d->fo > CHAIN_MAX_WIDTH) return 0;
        if (d->ldx < d->fi || d->ldy < d->fo || d->act < RLT_ACT_NONE || d->act > RLT_ACT_TANH) return 0;
        c->kind = cuda_linear_fwd_kind(bk, d->rows, d->fi, d->fo);
        if (c->kind == CUDA_FWD_LIBRARY) return 0;
        int gemm = c->kind == CUDA_FWD_GEMM_KG8 || c->kind == CUDA_FWD_GEMM_KG4;
        c->W = (const float *)d->W, c->b = d->b, c->y = (float *)d->y;
        c->fi = d->fi, c->fo = d->fo, c->ldy = d->ldy, c->act = d->act;
        c->kpad = gemm ? (d->fi + CHAIN_CHUNK - 1) / CHAIN_CHUNK * CHAIN_CHUNK : d->fi;
        c->sk = gemm ? c->kpad + 4 : c->fi; /* GEMM rows 4 mod 32 floats apart; the others' W as it is */
        c->w_vec = (uintptr_t)d->W % 16 == 0 && (gemm ? d->fi % 4 == 0 : 1);
        c->w_off = w; /* a multiple of 4 floats: GEMM rows start 16-byte aligned */
        w += (c->fo * c->sk + 3) / 4 * 4;
        c->b_off = w;
        w += (c->fo + 3) / 4 * 4;
        /* the input buffers' row stride: 4 mod 32 (16-byte GEMM reads of a row pair hit different banks) */
        if (c->kpad + 4 > sx) sx = (c->kpad + 3) / 4 * 4 + 4;
        if (l > 0) L->l[l - 1].zero_to = c->kpad;
    }
    L->l[n - 1].zero_to = L->l[n - 1].fo;
    L->x = (const float *)ly[0].x, L->ldx = ly[0].ldx, L->rows = ly[0].rows, L->n = n, L->sx = sx, L->w_floats = w;
    *bytes = sizeof(float) * ((size_t)w + 2 * (size_t)CHAIN_ROWS * sx);
    size_t cap = (size_t)cuda_get(bk)->smem_optin < CHAIN_SMEM_MAX ? (size_t)cuda_get(bk)->smem_optin : CHAIN_SMEM_MAX;
    return *bytes <= cap;
}

/* Fuses only from this many batched seeds on: below it the layers' own launches win (the same bits either way).
 * Measured on an H100, batched DQN seeds on CartPole's 4-120-84-2 network, fused against layer by layer
 * (bench/RESULTS.md): 2 seeds 49.5k against 52.1k updates/s, 4 seeds 90.2k against 100.2k, 8 seeds 157.6k against
 * 154.2k, 16 seeds 253.3k against 231.9k: with few seeds the chain's blocks, a whole network each, finish after the
 * layers' many short ones. */
#define CHAIN_MIN_SEEDS 8

extern "C" int cuda_linear_chain_forward(rlt_backend *bk, const rlt_linear_fwd *layers, int32_t n) {
    CUDA_REQUIRE(bk, rlt_chain_ok(layers, n),
                 "linear_chain_forward: 1 to 9 layers, each reading the previous one's output");
    chain_launch L;
    size_t bytes = 0;
    const unsigned z = cuda_seeds_z(bk);
    if (z < CHAIN_MIN_SEEDS || !chain_plan(bk, layers, n, &L, &bytes)) { /* layer by layer (see above) */
        for (int32_t l = 0; l < n; l++) RLT_TRY(cuda_linear_forward(bk, &layers[l]));
        return RLT_OK;
    }
    RLT_TRY(cuda_seeds_check(bk, "linear_chain_forward", 1, L.x));
    for (int32_t l = 0; l < n; l++)
        RLT_TRY(cuda_seeds_check(bk, "linear_chain_forward", 3, L.l[l].W, L.l[l].b, L.l[l].y));
    L.sd = cuda_seeds_of(bk);
    const dim3 grid((unsigned)((L.rows + CHAIN_ROWS - 1) / CHAIN_ROWS), 1, z);
    CUDA_CHECK(bk, cuda_launch_pdl_smem(bk, chain_kernel, grid, dim3(CHAIN_THREADS), bytes, L));
    CUDA_CHECK_LAUNCH(bk, "chain_kernel");
    return RLT_OK;
}

/* Loads the kernel and lets it take up to CHAIN_SMEM_MAX bytes of shared memory (or the device's most). */
extern "C" cudaError_t cuda_preload_linear_chain(void) {
    int dev = 0, optin = 0;
    cudaError_t rc = cudaGetDevice(&dev);
    if (rc == cudaSuccess) rc = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
    const int cap = optin < CHAIN_SMEM_MAX ? optin : CHAIN_SMEM_MAX;
    if (rc == cudaSuccess) rc = cudaFuncSetAttribute(chain_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, cap);
    return rc;
}
