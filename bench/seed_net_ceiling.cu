/* seed_net_ceiling.cu: a whole network pass of N agents as one launch, against a launch per layer: the ceiling of
 * docs/seeds.md's next design step (one launch per network pass and seed), measured before building it. The network
 * is a TD3 critic, 23 -> 256 -> 256 (ReLU) -> 1 at batch 256, its agents' buffers at one stride (seed_ceiling.cuh).
 *   forward (fp32 and tf32):
 *     layers      the two layers as cuBLASLt strided products with bias and ReLU in the epilogue, then the 1-wide
 *                 head as a warp-per-row kernel: 3 launches
 *     one launch  net_forward_kernel: a block takes 32 rows of one agent through both layers and the head, the
 *                 hidden activations in shared memory (and stored, as the backward needs them); the 256-wide
 *                 product on TF32 tensor cores (wmma m16n16k8) or, in fp32, FFMA from transposed weight chunks
 *   backward from dq (tf32, sm_90):
 *     layers      dh2 = dq w3 masked by ReLU; dW2 and db2 (cuBLASLt, BGRADB) on a second stream beside dh1 = dh2 W2
 *                 (cuBLASLt) masked by ReLU; dW1 and db1 (cuBLASLt, BGRADB): 5 launches, as the engine's batched
 *                 backward runs them
 *     one launch  net_backward_kernel: a cluster of 8 blocks per agent; each block forms dh2 and dh1 for 32 rows,
 *                 the cluster syncs, then each block sums dW2, db2, dW1 and db1 for 32 output features over all rows
 * Each line gives microseconds per pass (all N agents), as graphs of REPS passes replayed, and the largest
 * difference between the two routes' outputs relative to the largest output.
 *   bench_seed_net_ceiling [--reps 20] [--replays 200] [--agents 16,64]
 * Needs a GPU (exit 77 without one); built with the CUDA backend. */
#include <cooperative_groups.h>
#include <math.h>
#include <mma.h>

#include "seed_ceiling.cuh"

enum { NET_IN = 23, NET_H = 256, NET_ROWS = 256, NET_RT = 32, NET_LDH = NET_H + 4, NET_LDW = NET_H + 1 };

/* Offsets (floats) of one agent's region: W1 [H IN], b1, x [ROWS IN], h1 [ROWS H], W2 [H H], b2, h2 [ROWS H], w3 [H],
 * b3, q [ROWS]; for the backward dq [ROWS], dh2 and dh1 [ROWS H], dW2 [H H], db2, dW1 [H IN], db1; agents at
 * `stride`. */
typedef struct net_layout {
    int64_t W1, b1, x, h1, W2, b2, h2, w3, b3, q, dq, dh2, dh1, dW2, db2, dW1, db1, stride;
} net_layout;

static net_layout net_make_layout(void) {
    net_layout L;
    int64_t o = 0;
    const int64_t HH = (int64_t)NET_H * NET_H, RH = (int64_t)NET_ROWS * NET_H, HI = (int64_t)NET_H * NET_IN;
    L.W1 = o, o += align64(HI);
    L.b1 = o, o += align64(NET_H);
    L.x = o, o += align64((int64_t)NET_ROWS * NET_IN);
    L.h1 = o, o += align64(RH);
    L.W2 = o, o += align64(HH);
    L.b2 = o, o += align64(NET_H);
    L.h2 = o, o += align64(RH);
    L.w3 = o, o += align64(NET_H);
    L.b3 = o, o += align64(1);
    L.q = o, o += align64(NET_ROWS);
    L.dq = o, o += align64(NET_ROWS);
    L.dh2 = o, o += align64(RH);
    L.dh1 = o, o += align64(RH);
    L.dW2 = o, o += align64(HH);
    L.db2 = o, o += align64(NET_H);
    L.dW1 = o, o += align64(HI);
    L.db1 = o, o += align64(NET_H);
    L.stride = o;
    return L;
}

/* Uniform values in [-scale, scale) from a hash of the index: weights, biases and inputs. */
__global__ void net_fill_kernel(float *p, int64_t n, float scale, uint32_t salt) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        uint32_t h = (uint32_t)i * 2654435761u ^ salt;
        h ^= h >> 15, h *= 2246822519u, h ^= h >> 13, h *= 3266489917u, h ^= h >> 16;
        p[i] = scale * ((float)(h >> 8) * (2.0f / 16777216.0f) - 1.0f);
    }
}

/* q[r] = dot(h2[r], w3) + b3: a warp per row (the layers route's third launch). */
__global__ void net_head_kernel(float *base, net_layout L) {
    float *a = base + (int64_t)blockIdx.z * L.stride;
    int r = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (r >= NET_ROWS) return;
    float s = 0.0f;
    for (int c = lane; c < NET_H; c += 32) s = fmaf(a[L.h2 + (int64_t)r * NET_H + c], a[L.w3 + c], s);
    for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0) a[L.q + r] = s + a[L.b3];
}

/* A warp's 16 x 64 block of a TF32 product over K (a multiple of 32), accumulated into acc[0..3] (16 x 16 tiles side by
 * side): A's rows from a (layout LA, leading dimension lda, a_k floats between consecutive k), B's four column tiles
 * from b (layout LB, ldb, b_k floats between consecutive k, b_n between consecutive columns). */
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
typedef nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 8, float> net_acc;
template <typename LA, typename LB>
__device__ void net_mma(net_acc acc[4], const float *a, int lda, int64_t a_k, const float *b, int ldb, int64_t b_k,
                        int64_t b_n, int K) {
    using namespace nvcuda;
    /* Four k steps unrolled: their 16 loads of B from L2 are in flight together before the products wait on them. */
#pragma unroll 4
    for (int k0 = 0; k0 < K; k0 += 8) {
        wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, LA> fa;
        wmma::load_matrix_sync(fa, a + k0 * a_k, lda);
#pragma unroll
        for (int e = 0; e < fa.num_elements; e++) fa.x[e] = wmma::__float_to_tf32(fa.x[e]);
#pragma unroll
        for (int j = 0; j < 4; j++) {
            wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, LB> fb;
            wmma::load_matrix_sync(fb, b + k0 * b_k + j * 16 * b_n, ldb);
#pragma unroll
            for (int e = 0; e < fb.num_elements; e++) fb.x[e] = wmma::__float_to_tf32(fb.x[e]);
            wmma::mma_sync(acc[j], fa, fb, acc[j]);
        }
    }
}
#endif

/* One launch for the whole forward: block (t, z) takes rows 32t .. 32t + 31 of agent z. 256 threads. */
template <bool TF32>
__global__ void __launch_bounds__(256) net_forward_kernel(float *base, net_layout L) {
    extern __shared__ __align__(128) float sm[]; /* wmma loads want 32-byte aligned tiles */
    float *xs = sm, *hs = sm + NET_RT * 24, *wt = hs + NET_RT * NET_LDH;
    float *a = base + (int64_t)blockIdx.z * L.stride;
    const int r0 = blockIdx.x * NET_RT, tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    for (int i = tid; i < NET_RT * 24; i += 256) {
        int r = i / 24, k = i % 24;
        xs[i] = k < NET_IN ? a[L.x + (int64_t)(r0 + r) * NET_IN + k] : 0.0f;
    }
    /* Layer 1 (K = 23): thread c keeps W1's row c in registers and runs the block's 32 rows. */
    float w[NET_IN];
#pragma unroll
    for (int k = 0; k < NET_IN; k++) w[k] = a[L.W1 + (int64_t)tid * NET_IN + k];
    const float b1 = a[L.b1 + tid];
    __syncthreads();
    for (int r = 0; r < NET_RT; r++) {
        float s = 0.0f;
#pragma unroll
        for (int k = 0; k < NET_IN; k++) s = fmaf(xs[r * 24 + k], w[k], s);
        float h = fmaxf(s + b1, 0.0f);
        hs[r * NET_LDH + tid] = h;
        a[L.h1 + (int64_t)(r0 + r) * NET_H + tid] = h;
    }
    __syncthreads();
    if (TF32) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
        __trap(); /* TF32 tensor cores from sm_80 (the bench runs on sm_90) */
#else
        /* Layer 2 on tensor cores: warp w owns rows 16 (w & 1) .. + 15 and columns 64 (w >> 1) .. + 63; W2 [out in]
         * read as the column-major B operand straight from global memory (L2). */
        using namespace nvcuda;
        const int rt = warp & 1, ct = (warp >> 1) * 4;
        net_acc acc[4];
#pragma unroll
        for (int j = 0; j < 4; j++) wmma::fill_fragment(acc[j], 0.0f);
        /* B (k, n) = W2[n][k]: column-major, columns NET_H apart */
        net_mma<wmma::row_major, wmma::col_major>(acc, hs + rt * 16 * NET_LDH, NET_LDH, 1,
                                                  a + L.W2 + (int64_t)ct * 16 * NET_H, NET_H, 1, NET_H, NET_H);
        __syncthreads(); /* every warp has read hs */
#pragma unroll
        for (int j = 0; j < 4; j++)
            wmma::store_matrix_sync(hs + rt * 16 * NET_LDH + (ct + j) * 16, acc[j], NET_LDH, wmma::mem_row_major);
#endif
    } else {
        /* Layer 2 in fp32: W2's columns k0 .. k0 + 31 copied transposed into wt, then each thread sums 4 rows
         * (warp w's) by 8 columns (lane + 32 j). */
        float acc[4][8];
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int j = 0; j < 8; j++) acc[i][j] = 0.0f;
        for (int k0 = 0; k0 < NET_H; k0 += 32) {
            for (int i = tid; i < 32 * NET_H; i += 256) {
                int c = i / 32, kk = i % 32;
                wt[kk * NET_LDW + c] = a[L.W2 + (int64_t)c * NET_H + k0 + kk];
            }
            __syncthreads();
#pragma unroll 4
            for (int kk = 0; kk < 32; kk++) {
                float x4[4], w8[8];
#pragma unroll
                for (int i = 0; i < 4; i++) x4[i] = hs[(warp * 4 + i) * NET_LDH + k0 + kk];
#pragma unroll
                for (int j = 0; j < 8; j++) w8[j] = wt[kk * NET_LDW + lane + 32 * j];
#pragma unroll
                for (int i = 0; i < 4; i++)
#pragma unroll
                    for (int j = 0; j < 8; j++) acc[i][j] = fmaf(x4[i], w8[j], acc[i][j]);
            }
            __syncthreads();
        }
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int j = 0; j < 8; j++) hs[(warp * 4 + i) * NET_LDH + lane + 32 * j] = acc[i][j];
    }
    __syncthreads();
    /* Bias, ReLU, the stored activations and the head: warp w's 4 rows, lanes over the columns. */
    for (int i = 0; i < 4; i++) {
        const int r = warp * 4 + i;
        float s = 0.0f;
        for (int c = lane; c < NET_H; c += 32) {
            float h = fmaxf(hs[r * NET_LDH + c] + a[L.b2 + c], 0.0f);
            a[L.h2 + (int64_t)(r0 + r) * NET_H + c] = h;
            s = fmaf(h, a[L.w3 + c], s);
        }
        for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
        if (lane == 0) a[L.q + r0 + r] = s + a[L.b3];
    }
}

static size_t net_smem(int tf32) {
    return sizeof(float) * (NET_RT * 24 + NET_RT * NET_LDH + (tf32 ? 0 : 32 * NET_LDW));
}


/* ---- the backward ---------------------------------------------------------------------------------------------- */

/* dh2 = dq w3 where h2 > 0 (the layers route's first launch). */
__global__ void net_dh2_kernel(float *base, net_layout L) {
    float *a = base + (int64_t)blockIdx.z * L.stride;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < NET_ROWS * NET_H; i += gridDim.x * blockDim.x) {
        int r = i / NET_H, c = i % NET_H;
        a[L.dh2 + i] = a[L.h2 + i] > 0.0f ? a[L.dq + r] * a[L.w3 + c] : 0.0f;
    }
}

/* dh1 = 0 where h1 <= 0 (after the library's dh1 = dh2 W2). */
__global__ void net_mask_kernel(float *base, net_layout L) {
    float *a = base + (int64_t)blockIdx.z * L.stride;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < NET_ROWS * NET_H; i += gridDim.x * blockDim.x)
        if (!(a[L.h1 + i] > 0.0f)) a[L.dh1 + i] = 0.0f;
}

enum { NET_CLUSTER = NET_ROWS / NET_RT, NET_LDS = 33 };

static size_t net_bwd_smem(void) { return sizeof(float) * (NET_RT * NET_LDH + 2 * 32 * NET_LDS + 32 * 24 + 2 * 256); }

/* One launch for the backward: cluster (agent z) of 8 blocks, block t. Phase A: rows 32t .. 32t + 31 of dh2 and dh1;
 * the cluster syncs; phase B: output features 32t .. 32t + 31 of dW2, db2, dW1 and db1, summed over all 256 rows.
 * TF32 products (wmma m16n16k8), 256 threads. */
__global__ void __launch_bounds__(256) net_backward_kernel(float *base, net_layout L) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
    __trap(); /* thread block clusters from sm_90 */
#else
    using namespace nvcuda;
    extern __shared__ __align__(128) float sm[]; /* wmma loads want 32-byte aligned tiles */
    float *ds = sm;                                     /* [32 x LDH]: this block's dh2 rows, then dh1's */
    float *c2 = ds + NET_RT * NET_LDH, *c1 = c2 + 32 * NET_LDS; /* [32 rows x 32 features] of dh2 and dh1 */
    float *xc = c1 + 32 * NET_LDS;                      /* [32 rows x 24] of x */
    float *red = xc + 32 * 24;                          /* [2 x 256]: db2 and db1 partial sums */
    float *a = base + (int64_t)blockIdx.z * L.stride;
    const int t = blockIdx.x, r0 = t * NET_RT, f0 = t * 32, tid = threadIdx.x, warp = tid / 32;
    const int rt = warp & 1, ct = (warp >> 1) * 4;
    for (int i = tid; i < NET_RT * NET_H; i += 256) {
        int r = i / NET_H, c = i % NET_H;
        int64_t g = (int64_t)(r0 + r) * NET_H + c;
        float d = a[L.h2 + g] > 0.0f ? a[L.dq + r0 + r] * a[L.w3 + c] : 0.0f;
        ds[r * NET_LDH + c] = d;
        a[L.dh2 + g] = d;
    }
    __syncthreads();
    /* dh1[r][i] = sum_o dh2[r][o] W2[o][i]: A = ds (row-major), B = W2 (row-major, k = o, n = i) from L2. */
    net_acc acc[4];
#pragma unroll
    for (int j = 0; j < 4; j++) wmma::fill_fragment(acc[j], 0.0f);
    net_mma<wmma::row_major, wmma::row_major>(acc, ds + rt * 16 * NET_LDH, NET_LDH, 1, a + L.W2 + ct * 16, NET_H, NET_H,
                                              1, NET_H);
    __syncthreads(); /* every warp has read ds */
#pragma unroll
    for (int j = 0; j < 4; j++)
        wmma::store_matrix_sync(ds + rt * 16 * NET_LDH + (ct + j) * 16, acc[j], NET_LDH, wmma::mem_row_major);
    __syncthreads();
    for (int i = tid; i < NET_RT * NET_H; i += 256) {
        int r = i / NET_H, c = i % NET_H;
        int64_t g = (int64_t)(r0 + r) * NET_H + c;
        a[L.dh1 + g] = a[L.h1 + g] > 0.0f ? ds[r * NET_LDH + c] : 0.0f;
    }
    __threadfence();
    cooperative_groups::this_cluster().sync(); /* the agent's dh2 and dh1 are whole */
    /* dW2[o][i] = sum_r dh2[r][o] h1[r][i] for o in f0 .. f0 + 31: A (m = o, k = r) column-major at dh2 + f0, B = h1. */
#pragma unroll
    for (int j = 0; j < 4; j++) wmma::fill_fragment(acc[j], 0.0f);
    net_mma<wmma::col_major, wmma::row_major>(acc, a + L.dh2 + f0 + rt * 16, NET_H, NET_H, a + L.h1 + ct * 16, NET_H,
                                              NET_H, 1, NET_ROWS);
#pragma unroll
    for (int j = 0; j < 4; j++)
        wmma::store_matrix_sync(a + L.dW2 + (int64_t)(f0 + rt * 16) * NET_H + (ct + j) * 16, acc[j], NET_H,
                                wmma::mem_row_major);
    /* db2, dW1 and db1 for the block's 32 features, over the rows in chunks of 32 staged in shared memory: thread
     * (warp w, lane l) sums feature l's bias gradients over rows w, w + 8, ... of each chunk, and dW1 outputs
     * tid, tid + 256 and tid + 512 (of 32 x 23). */
    const int lane = tid % 32;
    float s2 = 0.0f, s1 = 0.0f, w1[3] = {0.0f, 0.0f, 0.0f};
    for (int rc = 0; rc < NET_ROWS; rc += 32) {
        for (int i = tid; i < 32 * 32; i += 256) {
            int r = i / 32, o = i % 32;
            c2[r * NET_LDS + o] = a[L.dh2 + (int64_t)(rc + r) * NET_H + f0 + o];
            c1[r * NET_LDS + o] = a[L.dh1 + (int64_t)(rc + r) * NET_H + f0 + o];
        }
        for (int i = tid; i < 32 * NET_IN; i += 256) {
            int r = i / NET_IN, k = i % NET_IN;
            xc[r * 24 + k] = a[L.x + (int64_t)(rc + r) * NET_IN + k];
        }
        __syncthreads();
        for (int r = warp; r < 32; r += 8) s2 += c2[r * NET_LDS + lane], s1 += c1[r * NET_LDS + lane];
#pragma unroll
        for (int m = 0; m < 3; m++) {
            int idx = tid + 256 * m;
            if (idx < 32 * NET_IN) {
                int o = idx / NET_IN, k = idx % NET_IN;
                float s = w1[m];
                for (int r = 0; r < 32; r++) s = fmaf(c1[r * NET_LDS + o], xc[r * 24 + k], s);
                w1[m] = s;
            }
        }
        __syncthreads();
    }
#pragma unroll
    for (int m = 0; m < 3; m++) {
        int idx = tid + 256 * m;
        if (idx < 32 * NET_IN) a[L.dW1 + (int64_t)f0 * NET_IN + idx] = w1[m];
    }
    red[tid] = s2;
    red[256 + tid] = s1;
    __syncthreads();
    if (tid < 32) {
        float b2 = 0.0f, b1 = 0.0f;
        for (int w = 0; w < 8; w++) b2 += red[w * 32 + tid], b1 += red[256 + w * 32 + tid];
        a[L.db2 + f0 + tid] = b2;
        a[L.db1 + f0 + tid] = b1;
    }
#endif
}

typedef struct net_bwd {
    bench l2, l2side, l1;         /* layer 2 (dgrad on the main stream, wgrad on the side one), layer 1 (wgrad) */
    lt_plan dgrad2, wgrad2, wgrad1;
    cudaEvent_t fork, join;
} net_bwd;

/* route 0: the layers (5 launches, layer 2's weight gradient on a second stream); 1: one launch. */
static void net_bwd_run(net_bwd *N, net_layout L, int route) {
    cudaStream_t s = N->l2.s;
    if (route == 0) {
        net_dh2_kernel<<<dim3(64, 1, N->l2.n), 256, 0, s>>>(N->l2.base, L);
        CK(cudaEventRecord(N->fork, s));
        CK(cudaStreamWaitEvent(N->l2side.s, N->fork, 0));
        lt_run(&N->l2side, &N->wgrad2, LT_WGRAD);
        lt_run(&N->l2, &N->dgrad2, LT_DGRAD);
        net_mask_kernel<<<dim3(64, 1, N->l2.n), 256, 0, s>>>(N->l2.base, L);
        lt_run(&N->l1, &N->wgrad1, LT_WGRAD);
        CK(cudaEventRecord(N->join, N->l2side.s));
        CK(cudaStreamWaitEvent(s, N->join, 0));
        return;
    }
    cudaLaunchConfig_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.gridDim = dim3(NET_CLUSTER, 1, N->l2.n);
    cfg.blockDim = dim3(256);
    cfg.dynamicSmemBytes = net_bwd_smem();
    cfg.stream = s;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = NET_CLUSTER, attr[0].val.clusterDim.y = 1, attr[0].val.clusterDim.z = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    CK(cudaLaunchKernelEx(&cfg, net_backward_kernel, N->l2.base, L));
}

static double net_bwd_time(net_bwd *N, net_layout L, int route, int reps, int replays) {
    cudaGraph_t g;
    CK(cudaStreamBeginCapture(N->l2.s, cudaStreamCaptureModeGlobal));
    for (int i = 0; i < reps; i++) net_bwd_run(N, L, route);
    CK(cudaStreamEndCapture(N->l2.s, &g));
    return graph_us(N->l2.s, g, reps, replays);
}

/* Every agent's dW2, db2, dW1 and db1 from the last run, one after another. */
static size_t net_read_grads(const bench *B, net_layout L, float *out) {
    const int64_t off[4] = {L.dW2, L.db2, L.dW1, L.db1};
    const int64_t len[4] = {(int64_t)NET_H * NET_H, NET_H, (int64_t)NET_H * NET_IN, NET_H};
    size_t k = 0;
    for (int z = 0; z < B->n; z++)
        for (int j = 0; j < 4; j++) {
            CK(cudaMemcpy(out + k, B->base + (int64_t)z * L.stride + off[j], (size_t)len[j] * sizeof(float),
                          cudaMemcpyDeviceToHost));
            k += (size_t)len[j];
        }
    return k;
}

/* Largest |a - b| over the largest |a|. */
static double rel_diff(const float *a, const float *b, size_t n) {
    double dmax = 0.0, amax = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]), m = fabs((double)a[i]);
        dmax = d > dmax ? d : dmax;
        amax = m > amax ? m : amax;
    }
    return amax > 0 ? dmax / amax : 0.0;
}

/* The backward of the critic whose forward ran last (l1, l2: the forward's layer benches, whose buffers and
 * library handle the backward reuses). */
static void net_bwd_case(const bench *l1, const bench *l2, net_layout L, int reps, int replays) {
    net_bwd N;
    memset(&N, 0, sizeof N);
    N.l2 = *l2;
    N.l2.ody = L.dh2, N.l2.odx = L.dh1, N.l2.odW = L.dW2, N.l2.odb = L.db2;
    N.l2side = N.l2;
    CK(cudaStreamCreateWithFlags(&N.l2side.s, cudaStreamNonBlocking));
    CK(cudaMalloc(&N.l2side.ws, N.l2side.ws_bytes));
    N.l1 = *l1;
    N.l1.ody = L.dh1, N.l1.odW = L.dW1, N.l1.odb = L.db1;
    N.dgrad2 = lt_make(&N.l2, LT_DGRAD);
    N.wgrad2 = lt_make(&N.l2side, LT_WGRAD);
    N.wgrad1 = lt_make(&N.l1, LT_WGRAD);
    CK(cudaEventCreateWithFlags(&N.fork, cudaEventDisableTiming));
    CK(cudaEventCreateWithFlags(&N.join, cudaEventDisableTiming));
    CK(cudaFuncSetAttribute(net_backward_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)net_bwd_smem()));
    for (int z = 0; z < l2->n; z++)
        net_fill_kernel<<<8, 256, 0, l2->s>>>(l2->base + (int64_t)z * L.stride + L.dq, NET_ROWS, 0.01f, (uint32_t)(z * 977));
    size_t cap = (size_t)l2->n * (2 * NET_H + (size_t)NET_H * (NET_H + NET_IN));
    float *ga = (float *)malloc(cap * sizeof(float)), *gb = (float *)malloc(cap * sizeof(float));
    double t0 = -1.0;
    if (N.dgrad2.ok && N.wgrad2.ok && N.wgrad1.ok) {
        t0 = net_bwd_time(&N, L, 0, reps, replays);
        CK(cudaStreamSynchronize(N.l2.s));
        net_read_grads(l2, L, ga);
    }
    double t1 = net_bwd_time(&N, L, 1, reps, replays);
    CK(cudaStreamSynchronize(N.l2.s));
    CK(cudaGetLastError());
    size_t k = net_read_grads(l2, L, gb);
    char a0[32];
    snprintf(a0, sizeof a0, t0 < 0 ? "-" : "%.2f", t0);
    printf("%6d  tf32  critic 23-256-256-1 backward: layers (5 launches, 2 streams) %6s us  one launch %6.2f us  "
           "(%.2fx)  max |dgrad diff| / max |grad| %.1e\n",
           l2->n, a0, t1, t0 > 0 ? t0 / t1 : 0.0, t0 >= 0 ? rel_diff(ga, gb, k) : 0.0);
    fflush(stdout);
    free(ga);
    free(gb);
    cudaEventDestroy(N.fork);
    cudaEventDestroy(N.join);
    cudaFree(N.l2side.ws);
    cudaStreamDestroy(N.l2side.s);
}
/* route 0: the layers (lt-fused, then the head); 1: one launch. */
static void net_run(bench *L1, bench *L2, lt_plan *p1, lt_plan *p2, net_layout L, int route) {
    if (route == 0) {
        lt_run(L1, p1, LT_FWD);
        lt_run(L2, p2, LT_FWD);
        net_head_kernel<<<dim3(NET_ROWS / 8, 1, L1->n), 256, 0, L1->s>>>(L1->base, L);
    } else if (L1->tf32) {
        net_forward_kernel<true><<<dim3(NET_ROWS / NET_RT, 1, L1->n), 256, net_smem(1), L1->s>>>(L1->base, L);
    } else {
        net_forward_kernel<false><<<dim3(NET_ROWS / NET_RT, 1, L1->n), 256, net_smem(0), L1->s>>>(L1->base, L);
    }
}

static double net_time(bench *L1, bench *L2, lt_plan *p1, lt_plan *p2, net_layout L, int route, int reps, int replays) {
    cudaGraph_t g;
    CK(cudaStreamBeginCapture(L1->s, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < reps; i++) net_run(L1, L2, p1, p2, L, route);
    CK(cudaStreamEndCapture(L1->s, &g));
    return graph_us(L1->s, g, reps, replays);
}

/* Agent z's q from the last run of a route, for every agent. */
static void net_read_q(const bench *B, net_layout L, float *q) {
    for (int z = 0; z < B->n; z++)
        CK(cudaMemcpy(q + (size_t)z * NET_ROWS, B->base + (int64_t)z * L.stride + L.q, NET_ROWS * sizeof(float),
                      cudaMemcpyDeviceToHost));
}

static void net_case(int n, int tf32, int backward, int reps, int replays) {
    net_layout L = net_make_layout();
    bench L1, L2;
    memset(&L1, 0, sizeof L1);
    L1.n = n, L1.rows = NET_ROWS, L1.fi = NET_IN, L1.fo = NET_H, L1.tf32 = tf32, L1.stride = L.stride;
    L1.oW = L.W1, L1.ob = L.b1, L1.ox = L.x, L1.oy = L.h1;
    CK(cudaStreamCreateWithFlags(&L1.s, cudaStreamNonBlocking));
    CK(cudaMalloc((void **)&L1.base, (size_t)L.stride * n * sizeof(float)));
    L1.ws_bytes = 32u << 20;
    CK(cudaMalloc(&L1.ws, L1.ws_bytes));
    CK(cublasLtCreate(&L1.lt));
    L2 = L1;
    L2.fi = NET_H, L2.oW = L.W2, L2.ob = L.b2, L2.ox = L.h1, L2.oy = L.h2;
    for (int z = 0; z < n; z++) {
        float *a = L1.base + (int64_t)z * L.stride;
        const struct { int64_t off, len; float scale; } f[] = {
            {L.W1, (int64_t)NET_H * NET_IN, 0.2085f}, {L.b1, NET_H, 0.2085f}, {L.x, (int64_t)NET_ROWS * NET_IN, 1.0f},
            {L.W2, (int64_t)NET_H * NET_H, 0.0625f},   {L.b2, NET_H, 0.0625f}, {L.w3, NET_H, 0.0625f},
            {L.b3, 1, 0.0625f}};
        for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
            net_fill_kernel<<<64, 256, 0, L1.s>>>(a + f[i].off, f[i].len, f[i].scale, (uint32_t)(z * 131 + i * 7919));
    }
    CK(cudaFuncSetAttribute(net_forward_kernel<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)net_smem(1)));
    CK(cudaFuncSetAttribute(net_forward_kernel<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)net_smem(0)));
    lt_plan p1 = lt_make(&L1, LT_FWD), p2 = lt_make(&L2, LT_FWD);
    double t0 = -1.0, t1;
    float *qa = (float *)malloc(sizeof(float) * (size_t)n * NET_ROWS), *qb = (float *)malloc(sizeof(float) * (size_t)n * NET_ROWS);
    if (p1.ok && p2.ok) {
        t0 = net_time(&L1, &L2, &p1, &p2, L, 0, reps, replays);
        CK(cudaStreamSynchronize(L1.s));
        net_read_q(&L1, L, qa);
    }
    t1 = net_time(&L1, &L2, &p1, &p2, L, 1, reps, replays);
    CK(cudaStreamSynchronize(L1.s));
    CK(cudaGetLastError());
    net_read_q(&L1, L, qb);
    char a0[32];
    snprintf(a0, sizeof a0, t0 < 0 ? "-" : "%.2f", t0);
    printf("%6d  %4s  critic 23-256-256-1 forward: layers (3 launches) %6s us  one launch %6.2f us  (%.2fx)  "
           "max |dq| / max |q| %.1e\n",
           n, tf32 ? "tf32" : "fp32", a0, t1, t0 > 0 ? t0 / t1 : 0.0, t0 >= 0 ? rel_diff(qa, qb, (size_t)n * NET_ROWS) : 0.0);
    fflush(stdout);
    if (backward) net_bwd_case(&L1, &L2, L, reps, replays);
    free(qa);
    free(qb);
    cublasLtDestroy(L1.lt);
    cudaFree(L1.ws);
    cudaFree(L1.base);
    cudaStreamDestroy(L1.s);
}

int main(int argc, char **argv) {
    ceiling_opts o;
    int rc = ceiling_start(argc, argv, "a critic's passes for N agents, a launch per layer against one launch",
                           "passes", 0, &o);
    if (rc) return rc;
    for (int a = 0; a < o.n_agents; a++)
        for (int tf32 = 0; tf32 < (o.prop.major >= 8 ? 2 : 1); tf32++)
            net_case(o.agents[a], tf32, tf32 && o.prop.major >= 9, o.reps, o.replays);
    return 0;
}
