/* dense.cu: dense_forward, a whole dense network's forward in one launch (sm_90 and later; elsewhere, and for
 * shapes that do not fit, linear_forward layer by layer).
 *
 * Why: an update's chain of dependent graph nodes sets its time (bench/GPU_NOTES.md), and an L-layer forward
 * through linear_forward is L nodes, each a few microseconds of launch, pipeline fill and epilogue around
 * under a microsecond of arithmetic. Here the layers of a network run inside one kernel, and what passes a
 * layer's output to the next is a thread-block cluster barrier instead of a kernel boundary.
 *
 * How: a cluster of DN_CLUSTER blocks owns DN_ROWS rows of the batch; block q of the cluster computes columns
 * [q cw, (q + 1) cw) of every layer (cw = fo / DN_CLUSTER rounded up to 4). At the start each block copies
 * its slice of every layer's W, and the cluster's rows of x, into its shared memory. Per layer, a block
 * computes its RS x cw outputs (4 x 4 per thread, the k range split over groups of threads whose partial
 * sums are added in group order), applies bias and activation (the CPU twin's expressions), writes them to
 * the layer's y (the backward reads them) and stores them into every block's input buffer for the next
 * layer through distributed shared memory; one cluster barrier later the next layer starts. Every sum runs
 * in an order fixed by the shapes alone: the same bits on every run (not the same bits as linear_forward,
 * whose k-chunks are summed in another order; both agree with the CPU to the rounding of a dot product). */
#include <stdlib.h>
#include <string.h>

#include "cp_async.cuh"
#include "cuda_ops.h"

#define DN_THREADS 256
#define DN_CLUSTER 8        /* blocks per cluster (the portable maximum) */
#define DN_ROWS 16          /* batch rows per cluster at most (the slab: 16, or 8 with RLT_CUDA_DENSE_ROWS=8) */
#define DN_MAX_GROUPS 16    /* k-groups per layer at most */
#define DN_MAX_CW 64        /* columns per block at most (fo <= 512): DN_ROWS x cw outputs, 4 per thread */
#define DN_OUT_PER_THREAD (DN_ROWS * DN_MAX_CW / DN_THREADS)

typedef struct dn_layer {
    const float *W, *b;
    float *y;
    int32_t fi, fo, act, ldy;
    int32_t cw;    /* columns per block, a multiple of 4 */
    int32_t sw;    /* row stride of the block's W slice in shared memory (floats) */
    int32_t w_off; /* where that slice starts in shared memory (floats); its cw biases follow it */
} dn_layer;

typedef struct dn_launch {
    const float *x;
    int32_t ldx, rows, n_layers;
    int32_t slab;     /* batch rows per cluster: 16 or 8 */
    int32_t sx;       /* row stride of the two activation buffers */
    int32_t x_off[2]; /* the activation buffers: layer l reads x_off[l & 1] and fills x_off[(l + 1) & 1] */
    int32_t red_off;  /* the partial sums */
    dn_layer l[RLT_DENSE_MAX_LAYERS];
} dn_launch;

/* k-groups of a layer whose blocks compute slab x cw outputs, 4 x 4 per thread of a group. */
__host__ __device__ static inline int32_t dn_groups(int32_t slab, int32_t cw) {
    const int32_t tpg = (slab / 4) * (cw / 4);
    return DN_THREADS / tpg < DN_MAX_GROUPS ? DN_THREADS / tpg : DN_MAX_GROUPS;
}
/* Row stride of the partial sums: 2 more than a multiple of 8, so a warp's 4 x 4 stores spread over the banks. */
__host__ __device__ static inline int32_t dn_red_stride(int32_t cw) { return cw + (10 - cw % 8) % 8; }

/* Shared-memory row stride for rows of n floats: a multiple of 4 (16-byte rows) that is 4 more than a multiple
 * of 32, so 8 threads reading 16 bytes each from 8 consecutive rows hit 32 different banks. */
static int32_t dn_stride(int32_t n) { return ((n + 27) / 32) * 32 + 4; }

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
__device__ __forceinline__ unsigned dn_rank(void) {
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
    return r;
}
__device__ __forceinline__ void dn_cluster_arrive_relaxed(void) {
    asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void dn_cluster_wait(void) { asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory"); }
/* The two halves of a cluster barrier that publishes this thread's earlier stores (to its own and other blocks'
 * shared memory) to every thread that has waited on the same barrier. */
__device__ __forceinline__ void dn_cluster_arrive_release(void) {
    asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void dn_cluster_wait_acquire(void) {
    asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
/* Waits until at most n (0 .. RLT_DENSE_MAX_LAYERS - 1) of this thread's copy groups are in flight. */
__device__ __forceinline__ void dn_cp_wait(int32_t n) {
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
/* The address of the same shared-memory location in block `rank` of the cluster. */
__device__ __forceinline__ unsigned dn_map(unsigned addr, unsigned rank) {
    unsigned r;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(addr), "r"(rank));
    return r;
}
__device__ __forceinline__ void dn_store_remote(unsigned addr, float v) {
    asm volatile("st.shared::cluster.f32 [%0], %1;\n" ::"r"(addr), "f"(v) : "memory");
}

/* One layer's RS x cw outputs of this block (see the file comment); the result goes to y and, unless this is
 * the last layer, to every block's buffer xn. */
__device__ __forceinline__ void dn_layer_run(const dn_layer &d, const float *xs, float *xn, float *red, int32_t sx,
                                             int32_t slab, int32_t r0, int32_t rows, unsigned rank, bool last) {
    extern __shared__ __align__(16) float dn_smem[];
    const int t = threadIdx.x;
    const int32_t cw = d.cw, cq = cw >> 2, tpg = (slab >> 2) * cq; /* threads per k-group */
    const int32_t kg = dn_groups(slab, cw);
    const int32_t g = t / tpg, r = t - g * tpg, tr = r / cq, tc = r - tr * cq;
    const int32_t kchunk = (((d.fi + kg - 1) / kg) + 3) & ~3;
    const int32_t kb = g * kchunk, ke = min(d.fi, kb + kchunk);
    const int32_t rs = dn_red_stride(cw);
    float acc[4][4];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) acc[i][j] = 0.0f;
    if (g < kg) {
        const float *w = dn_smem + d.w_off;
        /* Columns tc, tc + cq, tc + 2 cq, tc + 3 cq: 8 neighbouring threads read 8 consecutive W rows. */
        const float *xr = xs + (4 * tr) * sx, *wr = w + tc * d.sw;
        const int32_t wq = cq * d.sw;
        int32_t k = kb;
#pragma unroll 2
        for (; k + 4 <= ke; k += 4) {
            float4 xv[4], wv[4];
#pragma unroll
            for (int i = 0; i < 4; i++) xv[i] = *reinterpret_cast<const float4 *>(xr + i * sx + k);
#pragma unroll
            for (int j = 0; j < 4; j++) wv[j] = *reinterpret_cast<const float4 *>(wr + j * wq + k);
            /* k, k+1, k+2, k+3 in turn for all 16 outputs: 16 independent FMAs between dependent ones. */
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 4; j++) acc[i][j] = fmaf(xv[i].x, wv[j].x, acc[i][j]);
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 4; j++) acc[i][j] = fmaf(xv[i].y, wv[j].y, acc[i][j]);
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 4; j++) acc[i][j] = fmaf(xv[i].z, wv[j].z, acc[i][j]);
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 4; j++) acc[i][j] = fmaf(xv[i].w, wv[j].w, acc[i][j]);
        }
        for (; k < ke; k++)
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 4; j++) acc[i][j] = fmaf(xr[i * sx + k], wr[j * wq + k], acc[i][j]);
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int j = 0; j < 4; j++) red[(g * slab + 4 * tr + i) * rs + tc + j * cq] = acc[i][j];
    }
    __syncthreads();
    /* Each thread finishes DN_OUT_PER_THREAD outputs at most, sends them to every block of the cluster, releases
     * them with its arrival at the cluster barrier, and only then writes them to y: the barrier's release need
     * not wait for the global stores. */
    const float *bias = dn_smem + d.w_off + cw * d.sw;
    const int32_t c0 = (int32_t)rank * cw;
    const unsigned xn_addr = (unsigned)__cvta_generic_to_shared(xn);
    float z_out[DN_OUT_PER_THREAD];
    int32_t at_out[DN_OUT_PER_THREAD];
#pragma unroll
    for (int u = 0; u < DN_OUT_PER_THREAD; u++) {
        const int32_t o = t + u * DN_THREADS;
        const int32_t row = o / cw, col = o - row * cw, n = c0 + col;
        at_out[u] = -1;
        if (o >= slab * cw || n >= d.fo) continue;
        float v = red[row * rs + col];
        for (int32_t q = 1; q < kg; q++) v += red[(q * slab + row) * rs + col];
        float z = v + bias[col];
        if (d.act == RLT_ACT_RELU) z = z > 0.0f ? z : 0.0f;
        else if (d.act == RLT_ACT_TANH) z = tanhf(z);
        z_out[u] = z;
        if (r0 + row < rows) at_out[u] = row;
        if (!last) {
            const unsigned a = xn_addr + 4u * (unsigned)(row * sx + n);
#pragma unroll
            for (unsigned q = 0; q < DN_CLUSTER; q++) dn_store_remote(dn_map(a, q), z);
        }
    }
    if (!last) dn_cluster_arrive_release();
#pragma unroll
    for (int u = 0; u < DN_OUT_PER_THREAD; u++) {
        if (at_out[u] < 0) continue;
        const int32_t o = t + u * DN_THREADS, row = at_out[u], n = c0 + (o - row * cw);
        d.y[(int64_t)(r0 + row) * d.ldy + n] = z_out[u];
    }
}
#endif

__global__ void __launch_bounds__(DN_THREADS) dense_kernel(const __grid_constant__ dn_launch L) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    extern __shared__ __align__(16) float dn_smem[];
    const int t = threadIdx.x, warp = t >> 5, lane = t & 31;
    const unsigned rank = dn_rank();
    const int32_t r0 = (int32_t)(blockIdx.x / DN_CLUSTER) * L.slab;
    /* Every block of the cluster has started before anyone stores into its shared memory (the wait is just
     * before the first remote store). */
    dn_cluster_arrive_relaxed();
    cuda_pdl_wait(); /* launched with cuda_launch_pdl_cluster: nothing touches memory before this */
    cuda_pdl_trigger();
    /* This block's W slices (rows c0 .. c0 + cw - 1 of each layer, zeros past fo) and biases, and the cluster's x
     * rows: one copy group per layer (x with layer 0), so layer l waits only for its own. */
    float *x0 = dn_smem + L.x_off[0];
    for (int32_t r = warp; r < L.slab; r += DN_THREADS / 32) {
        const bool ok = r0 + r < L.rows;
        const float *src = L.x + (ok ? (int64_t)(r0 + r) * L.ldx : 0);
        for (int32_t k = lane; k < L.l[0].fi; k += 32) cp_async4(x0 + r * L.sx + k, src + k, ok);
    }
    for (int32_t l = 0; l < L.n_layers; l++) {
        const dn_layer &d = L.l[l];
        const int32_t c0 = (int32_t)rank * d.cw;
        float *w = dn_smem + d.w_off;
        const bool vec = (d.fi & 3) == 0 && ((uintptr_t)d.W & 15) == 0;
        for (int32_t n = warp; n < d.cw; n += DN_THREADS / 32) {
            const bool ok = c0 + n < d.fo;
            const float *src = d.W + (ok ? (int64_t)(c0 + n) * d.fi : 0);
            if (vec)
                for (int32_t k = 4 * lane; k < d.fi; k += 128) cp_async16(w + n * d.sw + k, src + k, ok);
            else
                for (int32_t k = lane; k < d.fi; k += 32) cp_async4(w + n * d.sw + k, src + k, ok);
        }
        for (int32_t n = t; n < d.cw; n += DN_THREADS) {
            const bool ok = d.b && c0 + n < d.fo;
            cp_async4(w + d.cw * d.sw + n, ok ? d.b + c0 + n : d.W, ok);
        }
        cp_async_commit();
    }
    float *red = dn_smem + L.red_off;
    for (int32_t l = 0; l < L.n_layers; l++) {
        const bool last = l == L.n_layers - 1;
        const float *xs = dn_smem + L.x_off[l & 1];
        float *xn = dn_smem + L.x_off[(l + 1) & 1];
        dn_cp_wait(L.n_layers - 1 - l); /* this layer's copies have landed (the later layers' may not have) */
        __syncthreads();
        if (l == 0) dn_cluster_wait(); /* pairs with the arrive above */
        dn_layer_run(L.l[l], xs, xn, red, L.sx, L.slab, r0, L.rows, rank, last);
        /* (dn_layer_run arrived, unless last.) The next layer's inputs have arrived in every block, and nobody
         * still reads this layer's. */
        if (!last) dn_cluster_wait_acquire();
    }
#endif
}

/* Whether the fused kernel takes these layers, and its launch descriptor and shared memory if so. */
static int dn_plan(dn_launch *L, size_t *smem, size_t smem_max, int32_t slab, int32_t rows, const float *x, int32_t ldx,
                   int32_t n_layers, const rlt_dense_layer *layers) {
    memset(L, 0, sizeof *L);
    L->x = x, L->ldx = ldx, L->rows = rows, L->n_layers = n_layers, L->slab = slab;
    int32_t fi_max = 0, off = 0, red = 0;
    for (int32_t l = 0; l < n_layers; l++) {
        const rlt_dense_layer *s = &layers[l];
        dn_layer *d = &L->l[l];
        d->W = s->W, d->b = s->b, d->y = s->y;
        d->fi = s->fi, d->fo = s->fo, d->act = s->act, d->ldy = s->ldy;
        d->cw = (((s->fo + DN_CLUSTER - 1) / DN_CLUSTER) + 3) & ~3;
        if (d->cw > DN_MAX_CW || s->fi > (1 << 14)) return 0;
        d->sw = dn_stride(s->fi);
        d->w_off = off;
        if ((int64_t)off + (int64_t)d->cw * (d->sw + 1) > (int64_t)(smem_max / 4)) return 0;
        off += d->cw * (d->sw + 1);
        if (s->fi > fi_max) fi_max = s->fi;
        const int32_t lr = dn_groups(slab, d->cw) * slab * dn_red_stride(d->cw);
        if (lr > red) red = lr;
    }
    L->sx = dn_stride(fi_max);
    L->x_off[0] = off;
    L->x_off[1] = off + slab * L->sx;
    L->red_off = off + 2 * slab * L->sx;
    *smem = ((size_t)L->red_off + red) * sizeof(float);
    return *smem <= smem_max;
}

static int dn_check(rlt_backend *bk, int32_t rows, int32_t ldx, int32_t n_layers, const rlt_dense_layer *layers) {
    CUDA_REQUIRE(bk, rows >= 0 && n_layers >= 1 && n_layers <= RLT_DENSE_MAX_LAYERS, "dense_forward");
    for (int32_t l = 0; l < n_layers; l++) {
        const rlt_dense_layer *d = &layers[l];
        CUDA_REQUIRE(bk, d->fi >= 1 && d->fo >= 1 && d->ldy >= d->fo && d->W && d->y, "dense_forward");
        CUDA_REQUIRE(bk, d->act >= RLT_ACT_NONE && d->act <= RLT_ACT_TANH, "dense_forward");
        CUDA_REQUIRE(bk, l == 0 ? ldx >= d->fi : d->fi == layers[l - 1].fo, "dense_forward");
    }
    return RLT_OK;
}

extern "C" int cuda_dense_forward(rlt_backend *bk, int32_t rows, const float *x, int32_t ldx, int32_t n_layers,
                                  const rlt_dense_layer *layers) {
    RLT_TRY(dn_check(bk, rows, ldx, n_layers, layers));
    if (rows == 0) return RLT_OK;
    cuda_impl *c = cuda_get(bk);
    dn_launch L;
    size_t smem = 0;
    if (!c->dense_smem || c->linear_mode == CUDA_LINEAR_CUBLAS ||
        !dn_plan(&L, &smem, c->dense_smem, c->dense_slab, rows, x, ldx, n_layers, layers))
        return rlt_dense_forward_layers(bk, cuda_linear_forward, rows, x, ldx, n_layers, layers);
    const int64_t clusters = ((int64_t)rows + L.slab - 1) / L.slab;
    CUDA_REQUIRE(bk, clusters * DN_CLUSTER <= INT32_MAX, "dense_forward: grid size");
    CUDA_CHECK(bk, cuda_launch_pdl_cluster(bk, dense_kernel, dim3((unsigned)(clusters * DN_CLUSTER)), dim3(DN_THREADS),
                                           smem, DN_CLUSTER, L));
    CUDA_CHECK_LAUNCH(bk, "dense_kernel");
    return RLT_OK;
}

/* At open: the shared memory the fused kernel may use on this device (0: it does not run here, and
 * dense_forward goes layer by layer). Needs thread-block clusters (sm_90) and room for a cluster of
 * DN_CLUSTER blocks at that size; RLT_CUDA_DENSE=layers turns it off. */
extern "C" cudaError_t cuda_dense_open(cuda_impl *c, int fused) {
    const char *slab = getenv("RLT_CUDA_DENSE_ROWS");
    c->dense_slab = slab && strcmp(slab, "8") == 0 ? 8 : 16;
    c->dense_smem = 0;
    if (!fused || c->cc_major < 9) return cudaSuccess;
    int optin = 0;
    cudaError_t rc = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, c->device);
    if (rc != cudaSuccess) return rc;
    rc = cudaFuncSetAttribute(dense_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, optin);
    if (rc != cudaSuccess) return rc;
    rc = cudaFuncSetAttribute(dense_kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 0);
    if (rc != cudaSuccess) return rc;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(DN_CLUSTER);
    cfg.blockDim = dim3(DN_THREADS);
    cfg.dynamicSmemBytes = (size_t)optin;
    cudaLaunchAttribute attr;
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = DN_CLUSTER, attr.val.clusterDim.y = 1, attr.val.clusterDim.z = 1;
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
    int clusters = 0;
    rc = cudaOccupancyMaxActiveClusters(&clusters, dense_kernel, &cfg);
    if (rc != cudaSuccess) return rc;
    if (clusters > 0) c->dense_smem = (size_t)optin;
    return cudaSuccess;
}
