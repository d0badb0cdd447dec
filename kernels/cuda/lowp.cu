/* lowp.cu: the reduced-precision ops (bf16/fp16 compute copies with fp32 masters) and fp16 dynamic loss
 * scaling; CUDA twins of kernels/cpu/lowp.c (semantics in kernels/backend.h).
 *
 * A reduced-precision dense layer is a cuBLASLt GEMM with 16-bit inputs summed in fp32 on the tensor cores, with
 * the bias and ReLU of the forward and the bias gradient of the backward in its epilogue (gemm_lt.c); tanh and
 * the input gradient's activation derivative stay elementwise passes. Where cuBLASLt offers no algorithm the
 * layer runs as before: a cuBLAS GEMM (cuda_gemm_lp) plus one elementwise kernel per epilogue. The fp32 kernels
 * of linear.cu fuse everything into their own GEMM, so a small 16-bit layer is more graph nodes than an fp32 one:
 * reduced precision pays where the GEMMs are large enough for the tensor cores to matter (bench/RESULTS.md
 * measures where). Loss scaling decides on the device: amp's UNSCALE raises a flag, adam reads it as its skip
 * flag, amp's UPDATE adjusts the scale, all inside the captured update.
 *
 * Seed batching (cuda_seeds): every kernel here runs for all batched seeds at once, grid z the agent, each pointer
 * moved to agent z's arena (cuda_seed_ptr); the 16-bit products are cuBLASLt's strided batched calls over the seeds'
 * arenas (gemm_lt.c). */
#include "lowp_elem.cuh"

static int lp_dtype_ok(int32_t dt) { return dt == RLT_LP_F32 || dt == RLT_LP_BF16 || dt == RLT_LP_F16; }
static int lp_half_ok(int32_t dt) { return dt == RLT_LP_BF16 || dt == RLT_LP_F16; }

__device__ __forceinline__ float lp_act_deriv(float y, int32_t act) {
    if (act == RLT_ACT_RELU) return y > 0.0f ? 1.0f : 0.0f;
    if (act == RLT_ACT_TANH) return 1.0f - y * y;
    return 1.0f;
}

__global__ void cast_kernel(int64_t rows, int64_t cols, void *dst, int32_t dd, int64_t ldd, const void *src, int32_t sd,
                            int64_t lds, const float *scale, cuda_seeds seeds) {
    dst = cuda_seed_ptr(seeds, dst), src = cuda_seed_ptr(seeds, src), scale = cuda_seed_ptr(seeds, scale);
    uint64_t n = (uint64_t)rows * (uint64_t)cols, stride = (uint64_t)gridDim.x * blockDim.x;
    float s = scale ? *scale : 1.0f;
    for (uint64_t k = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; k < n; k += stride) {
        int64_t r = (int64_t)(k / (uint64_t)cols), c = (int64_t)(k % (uint64_t)cols);
        float v = sd == RLT_LP_U8 ? (float)((const uint8_t *)src)[r * lds + c] : lp_load(src, sd, r * lds + c);
        lp_store(dst, dd, r * ldd + c, scale ? v * s : v);
    }
}

extern "C" int cuda_cast(rlt_backend *bk, const rlt_cast *d) {
    int32_t rows = d->rows;
    int64_t cols = d->cols, ldd = d->ldd, lds = d->lds;
    void *dst = d->dst;
    const void *src = d->src;
    int32_t dst_dtype = d->dst_dtype, src_dtype = d->src_dtype;
    const float *scale = d->scale;
    CUDA_REQUIRE(bk, rows >= 0 && cols >= 0 && ldd >= cols && lds >= cols, "cast");
    CUDA_REQUIRE(bk, lp_dtype_ok(dst_dtype) && (lp_dtype_ok(src_dtype) || src_dtype == RLT_LP_U8), "cast");
    uint64_t n = (uint64_t)rows * (uint64_t)cols;
    if (n == 0) return RLT_OK;
    RLT_TRY(cuda_seeds_check(bk, "cast", 3, dst, src, scale));
    dim3 grid(cuda_blocks(bk, n, CUDA_THREADS), 1, cuda_seeds_z(bk));
    cast_kernel<<<grid, CUDA_THREADS, 0, cuda_stream(bk)>>>(rows, cols, dst, dst_dtype, ldd, src, src_dtype, lds, scale,
                                                            cuda_seeds_of(bk));
    CUDA_CHECK_LAUNCH(bk, "cast_kernel");
    return RLT_OK;
}

/* The elementwise passes below run over [rows, cols] with blocks along the columns (grid x) and rows (grid y), so an
 * element's row and column come without a 64-bit division per element (which made a pass over 4096 x 1024 bf16
 * take 18 us on an H100, 3.6x its memory time). */

/* y = act(y + b) in fp32, rounded back to y's type. */
__global__ void lp_bias_act_kernel(void *y, int32_t yd, int32_t ldy, const float *b, int32_t rows, int32_t cols,
                                   int32_t act, cuda_seeds sd) {
    y = cuda_seed_ptr(sd, y), b = cuda_seed_ptr(sd, b);
    for (int32_t r = (int32_t)blockIdx.y; r < rows; r += (int32_t)gridDim.y)
        for (int32_t c = (int32_t)(blockIdx.x * blockDim.x + threadIdx.x); c < cols; c += (int32_t)(gridDim.x * blockDim.x)) {
            const int64_t i = (int64_t)r * ldy + c;
            float z = lp_load(y, yd, i) + (b ? b[c] : 0.0f);
            lp_store(y, yd, i, cuda_act(z, act));
        }
}

/* dx *= act'(x) in fp32, rounded back to dx's type. */
__global__ void lp_act_grad_kernel(void *dx, int32_t dxd, int32_t lddx, const void *x, int32_t xd, int32_t ldx,
                                   int32_t rows, int32_t cols, int32_t act, cuda_seeds sd) {
    dx = cuda_seed_ptr(sd, dx), x = cuda_seed_ptr(sd, x);
    for (int32_t r = (int32_t)blockIdx.y; r < rows; r += (int32_t)gridDim.y)
        for (int32_t c = (int32_t)(blockIdx.x * blockDim.x + threadIdx.x); c < cols; c += (int32_t)(gridDim.x * blockDim.x)) {
            const int64_t i = (int64_t)r * lddx + c;
            float d = lp_load(dx, dxd, i) * lp_act_deriv(lp_load(x, xd, (int64_t)r * ldx + c), act);
            lp_store(dx, dxd, i, d);
        }
}

/* The same two passes over a 16-bit buffer, eight elements (16 bytes) per load and store, when the rows start on
 * 16 bytes and hold a multiple of eight: each element is computed as above, in fp32 and rounded once, so the bits
 * are the scalar kernels'. One 2-byte access per thread kept a pass over 4096 x 1024 bf16 at 16-18 us on an H100,
 * three times its memory time (bench/RESULTS.md). T is __nv_bfloat16 or __half. */
template <typename T> struct __align__(16) lp_vec8 { T v[8]; };
__device__ __forceinline__ float lp_to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float lp_to_f(__half v) { return __half2float(v); }
template <typename T> __device__ __forceinline__ T lp_from_f(float v);
template <> __device__ __forceinline__ __nv_bfloat16 lp_from_f<__nv_bfloat16>(float v) {
    return __float2bfloat16_rn(v);
}
template <> __device__ __forceinline__ __half lp_from_f<__half>(float v) { return __float2half_rn(v); }
/* The c-th 8-wide vector of row r of a buffer with row stride ld. */
template <typename T> __device__ __forceinline__ lp_vec8<T> *lp_vec_at(T *p, int32_t r, int32_t ld, int32_t c) {
    return (lp_vec8<T> *)(void *)(p + (int64_t)r * ld) + c;
}
template <typename T>
__device__ __forceinline__ const lp_vec8<T> *lp_vec_at(const T *p, int32_t r, int32_t ld, int32_t c) {
    return (const lp_vec8<T> *)(const void *)(p + (int64_t)r * ld) + c;
}

/* Each thread takes one 8-wide column of LP_VEC_ROWS rows gridDim.y apart, all loads issued before the stores:
 * one 16-byte load in flight per thread left the pass at 11.6 us (1.4 TB/s). */
#define LP_VEC_ROWS 4

template <typename T>
__global__ void lp_bias_act8_kernel(T *y, int32_t ldy, const float *b, int32_t rows, int32_t cols8, int32_t act,
                                    cuda_seeds sd) {
    y = cuda_seed_ptr(sd, y), b = cuda_seed_ptr(sd, b);
    const int32_t gy = (int32_t)gridDim.y, c0 = (int32_t)(blockIdx.x * blockDim.x + threadIdx.x);
    for (int32_t r0 = (int32_t)blockIdx.y; r0 < rows; r0 += LP_VEC_ROWS * gy)
        for (int32_t c = c0; c < cols8; c += (int32_t)(gridDim.x * blockDim.x)) {
            lp_vec8<T> v[LP_VEC_ROWS];
#pragma unroll
            for (int j = 0; j < LP_VEC_ROWS; j++)
                if (r0 + j * gy < rows) v[j] = *lp_vec_at(y, r0 + j * gy, ldy, c);
            float bias[8];
#pragma unroll
            for (int k = 0; k < 8; k++) bias[k] = b ? b[8 * c + k] : 0.0f;
#pragma unroll
            for (int j = 0; j < LP_VEC_ROWS; j++) {
                if (r0 + j * gy >= rows) break;
#pragma unroll
                for (int k = 0; k < 8; k++) v[j].v[k] = lp_from_f<T>(cuda_act(lp_to_f(v[j].v[k]) + bias[k], act));
                *lp_vec_at(y, r0 + j * gy, ldy, c) = v[j];
            }
        }
}

template <typename T>
__global__ void lp_act_grad8_kernel(T *dx, int32_t lddx, const T *x, int32_t ldx, int32_t rows, int32_t cols8,
                                    int32_t act, cuda_seeds sd) {
    dx = cuda_seed_ptr(sd, dx), x = cuda_seed_ptr(sd, x);
    const int32_t gy = (int32_t)gridDim.y, c0 = (int32_t)(blockIdx.x * blockDim.x + threadIdx.x);
    for (int32_t r0 = (int32_t)blockIdx.y; r0 < rows; r0 += LP_VEC_ROWS * gy)
        for (int32_t c = c0; c < cols8; c += (int32_t)(gridDim.x * blockDim.x)) {
            lp_vec8<T> v[LP_VEC_ROWS], xv[LP_VEC_ROWS];
#pragma unroll
            for (int j = 0; j < LP_VEC_ROWS; j++)
                if (r0 + j * gy < rows) {
                    v[j] = *lp_vec_at(dx, r0 + j * gy, lddx, c);
                    xv[j] = *lp_vec_at(x, r0 + j * gy, ldx, c);
                }
#pragma unroll
            for (int j = 0; j < LP_VEC_ROWS; j++) {
                if (r0 + j * gy >= rows) break;
#pragma unroll
                for (int k = 0; k < 8; k++)
                    v[j].v[k] = lp_from_f<T>(lp_to_f(v[j].v[k]) * lp_act_deriv(lp_to_f(xv[j].v[k]), act));
                *lp_vec_at(dx, r0 + j * gy, lddx, c) = v[j];
            }
        }
}

/* db[c] = beta db[c] + sum_r dy[r, c], dy in any of the three types: the bias gradient of every library-routed layer
 * whose product the library ran without it (fp32 ones included). A block per 32 columns, its LP_BGRAD_WARPS warps
 * each summing a fixed range of rows in order (loads issued 16 rows ahead of their adds), then warp 0 adding the
 * warps' partial sums in warp order. The order depends on the shape alone, so the bits are the same on every run;
 * it is not the CPU twin's row order, which no library-routed layer promises (its product has the library's order,
 * and cuBLASLt's BGRADB, the other route, its own). One thread per column summing every row ran 485 us for 4096 x
 * 1024 bf16 and 146 us in fp32 on an H100; this spreads it over 16 warps (15 us). */
#define LP_BGRAD_WARPS 16
__global__ void lp_bias_grad_kernel(float *db, const void *dy, int32_t dyd, int32_t lddy, int32_t rows, int32_t cols,
                                    float beta, cuda_seeds sd) {
    db = cuda_seed_ptr(sd, db), dy = cuda_seed_ptr(sd, dy); /* seed batching: grid z is the agent */
    __shared__ float part[LP_BGRAD_WARPS][32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int32_t c = (int32_t)blockIdx.x * 32 + lane;
    const int64_t chunk = ((int64_t)rows + LP_BGRAD_WARPS - 1) / LP_BGRAD_WARPS;
    const int64_t r0 = (int64_t)warp * chunk, r1 = r0 + chunk < rows ? r0 + chunk : rows;
    float s = 0.0f;
    if (c < cols) {
        int64_t r = r0;
        for (; r + 16 <= r1; r += 16) {
            float v[16];
#pragma unroll
            for (int i = 0; i < 16; i++) v[i] = lp_load(dy, dyd, (r + i) * lddy + c);
#pragma unroll
            for (int i = 0; i < 16; i++) s += v[i];
        }
        for (; r < r1; r++) s += lp_load(dy, dyd, r * lddy + c);
    }
    part[warp][lane] = s;
    __syncthreads();
    if (warp == 0 && c < cols) {
        float t = 0.0f;
        for (int w = 0; w < LP_BGRAD_WARPS; w++) t += part[w][lane];
        db[c] = beta == 0.0f ? t : beta * db[c] + t;
    }
}

/* The grid of an elementwise pass (see above): enough column blocks for the row, and rows to fill the device a few
 * times over. */
static dim3 lp_grid(rlt_backend *bk, int32_t rows, int32_t cols, int32_t threads) {
    unsigned gx = (unsigned)((cols + threads - 1) / threads);
    if (gx == 0) gx = 1;
    uint64_t want = (uint64_t)cuda_get(bk)->sm_count * 32u / gx;
    if (want < 1) want = 1;
    if (want > (uint64_t)rows) want = rows > 0 ? (uint64_t)rows : 1;
    if (want > 65535) want = 65535;
    return dim3(gx, (unsigned)want, cuda_seeds_z(bk));
}

/* Threads per block of the 8-wide passes: a 1024-column row is 128 vectors. */
#define LP_VEC_THREADS 128

/* 1 when a [rows, cols] 16-bit buffer with row stride ld can be read 16 bytes at a time. */
static int lp_vec8_ok(const void *p, int32_t dt, int32_t ld, int32_t cols) {
    return lp_half_ok(dt) && ((uintptr_t)p & 15u) == 0 && ld % 8 == 0 && cols % 8 == 0;
}

/* y = act(y + b) over [rows, cols] (rows, cols >= 1), 8-wide where the layout allows. */
static int lp_bias_act_launch(rlt_backend *bk, void *y, int32_t yd, int32_t ldy, const float *b, int32_t rows,
                              int32_t cols, int32_t act) {
    RLT_TRY(cuda_seeds_check(bk, "lp_bias_act", 2, y, b));
    const cuda_seeds sd = cuda_seeds_of(bk);
    if (lp_vec8_ok(y, yd, ldy, cols)) {
        dim3 g = lp_grid(bk, (rows + LP_VEC_ROWS - 1) / LP_VEC_ROWS, cols / 8, LP_VEC_THREADS);
        if (yd == RLT_LP_BF16)
            lp_bias_act8_kernel<<<g, LP_VEC_THREADS, 0, cuda_stream(bk)>>>((__nv_bfloat16 *)y, ldy, b, rows, cols / 8,
                                                                          act, sd);
        else
            lp_bias_act8_kernel<<<g, LP_VEC_THREADS, 0, cuda_stream(bk)>>>((__half *)y, ldy, b, rows, cols / 8, act,
                                                                          sd);
        CUDA_CHECK_LAUNCH(bk, "lp_bias_act8_kernel");
        return RLT_OK;
    }
    dim3 g = lp_grid(bk, rows, cols, CUDA_THREADS);
    lp_bias_act_kernel<<<g, CUDA_THREADS, 0, cuda_stream(bk)>>>(y, yd, ldy, b, rows, cols, act, sd);
    CUDA_CHECK_LAUNCH(bk, "lp_bias_act_kernel");
    return RLT_OK;
}

/* dx *= act'(x) over [rows, cols] (rows, cols >= 1), 8-wide where both layouts allow. */
static int lp_act_grad_launch(rlt_backend *bk, void *dx, int32_t dxd, int32_t lddx, const void *x, int32_t xd,
                              int32_t ldx, int32_t rows, int32_t cols, int32_t act) {
    RLT_TRY(cuda_seeds_check(bk, "lp_act_grad", 2, dx, x));
    const cuda_seeds sd = cuda_seeds_of(bk);
    if (dxd == xd && lp_vec8_ok(dx, dxd, lddx, cols) && lp_vec8_ok(x, xd, ldx, cols)) {
        dim3 g = lp_grid(bk, (rows + LP_VEC_ROWS - 1) / LP_VEC_ROWS, cols / 8, LP_VEC_THREADS);
        if (dxd == RLT_LP_BF16)
            lp_act_grad8_kernel<<<g, LP_VEC_THREADS, 0, cuda_stream(bk)>>>(
                (__nv_bfloat16 *)dx, lddx, (const __nv_bfloat16 *)x, ldx, rows, cols / 8, act, sd);
        else
            lp_act_grad8_kernel<<<g, LP_VEC_THREADS, 0, cuda_stream(bk)>>>((__half *)dx, lddx, (const __half *)x, ldx,
                                                                          rows, cols / 8, act, sd);
        CUDA_CHECK_LAUNCH(bk, "lp_act_grad8_kernel");
        return RLT_OK;
    }
    dim3 g = lp_grid(bk, rows, cols, CUDA_THREADS);
    lp_act_grad_kernel<<<g, CUDA_THREADS, 0, cuda_stream(bk)>>>(dx, dxd, lddx, x, xd, ldx, rows, cols, act, sd);
    CUDA_CHECK_LAUNCH(bk, "lp_act_grad_kernel");
    return RLT_OK;
}

extern "C" int cuda_linear_forward_lp(rlt_backend *bk, const rlt_linear_fwd *d) {
    int32_t dtype = d->dtype, y_dtype = d->y_dtype, act = d->act;
    int32_t rows = d->rows, fi = d->fi, fo = d->fo, ldx = d->ldx, ldy = d->ldy;
    const void *x = d->x, *W = d->W;
    const float *b = d->b;
    void *y = d->y;
    CUDA_REQUIRE(bk, rows >= 0 && fi >= 1 && fo >= 1 && ldx >= fi && ldy >= fo, "linear_forward");
    CUDA_REQUIRE(bk, lp_half_ok(dtype) && (y_dtype == dtype || y_dtype == RLT_LP_F32), "linear_forward");
    CUDA_REQUIRE(bk, act >= RLT_ACT_NONE && act <= RLT_ACT_TANH, "linear_forward");
    if (rows == 0) return RLT_OK;
    int done = 0;
    RLT_TRY(cuda_lt_linear_forward(bk, d, &done));
    if (done) return RLT_OK;
    /* y[rows, fo] = x[rows, fi] W^T (cuBLAS: one agent only, cuda_gemm_lp refuses batched seeds). */
    RLT_TRY(cuda_gemm_lp(bk, 0, 1, rows, fo, fi, 1.0f, x, ldx, W, fi, dtype, 0.0f, y, y_dtype, ldy));
    if (!b && act == RLT_ACT_NONE) return RLT_OK;
    return lp_bias_act_launch(bk, y, y_dtype, ldy, b, rows, fo, act);
}

extern "C" int cuda_linear_backward_lp(rlt_backend *bk, const rlt_linear_bwd *d) {
    int32_t dtype = d->dtype, dx_dtype = d->dx_dtype, act_x = d->act_x;
    int32_t rows = d->rows, fi = d->fi, fo = d->fo, lddy = d->lddy, ldx = d->ldx, lddx = d->lddx;
    const void *dy = d->dy, *x = d->x, *W = d->W;
    float *dW = d->dW, *db = d->db, beta = d->beta;
    void *dx = d->dx;
    CUDA_REQUIRE(bk, rows >= 0 && fi >= 1 && fo >= 1 && lddy >= fo && ldx >= fi && (!dx || lddx >= fi),
                 "linear_backward");
    CUDA_REQUIRE(bk, lp_half_ok(dtype) && (dx_dtype == dtype || dx_dtype == RLT_LP_F32), "linear_backward");
    CUDA_REQUIRE(bk, act_x >= RLT_ACT_NONE && act_x <= RLT_ACT_TANH, "linear_backward");
    /* dW[fo, fi] = beta dW + dy^T x, summed in fp32 into the fp32 gradient, with db in its epilogue. */
    int done = 0;
    if (dW) RLT_TRY(cuda_lt_linear_wgrad(bk, d, cuda_get(bk)->lane, &done));
    if (!done) {
        if (dW) RLT_TRY(cuda_gemm_lp(bk, 1, 0, fo, fi, rows, 1.0f, dy, lddy, x, ldx, dtype, beta, dW, RLT_LP_F32, fi));
        if (db) RLT_TRY(cuda_lp_bias_grad(bk, db, dy, dtype, lddy, rows, fo, beta));
    }
    if (dx && rows > 0) {
        done = 0;
        RLT_TRY(cuda_lt_linear_dgrad(bk, d, &done));
        if (done) return RLT_OK;
        /* dx[rows, fi] = dy W, then times act_x'(x). */
        RLT_TRY(cuda_gemm_lp(bk, 0, 0, rows, fi, fo, 1.0f, dy, lddy, W, fi, dtype, 0.0f, dx, dx_dtype, lddx));
        if (act_x != RLT_ACT_NONE) RLT_TRY(lp_act_grad_launch(bk, dx, dx_dtype, lddx, x, dtype, ldx, rows, fi, act_x));
    }
    return RLT_OK;
}

extern "C" int cuda_lp_bias_act(rlt_backend *bk, void *y, int32_t yd, int32_t ldy, const float *b, int32_t rows,
                                int32_t cols, int32_t act) {
    CUDA_REQUIRE(bk, rows >= 0 && cols >= 0 && ldy >= cols && lp_dtype_ok(yd), "lp_bias_act");
    if ((!b && act == RLT_ACT_NONE) || rows == 0 || cols == 0) return RLT_OK;
    return lp_bias_act_launch(bk, y, yd, ldy, b, rows, cols, act);
}

extern "C" int cuda_lp_bias_grad(rlt_backend *bk, float *db, const void *dy, int32_t dyd, int32_t lddy, int32_t rows,
                                 int32_t cols, float beta) {
    RLT_TRY(cuda_seeds_check(bk, "lp_bias_grad", 2, db, dy));
    CUDA_REQUIRE(bk, rows >= 0 && cols >= 0 && lddy >= cols && lp_dtype_ok(dyd), "lp_bias_grad");
    if (cols == 0) return RLT_OK;
    dim3 grid((unsigned)((cols + 31) / 32), 1, cuda_seeds_z(bk));
    lp_bias_grad_kernel<<<grid, 32 * LP_BGRAD_WARPS, 0, cuda_stream(bk)>>>(db, dy, dyd, lddy, rows, cols, beta,
                                                                         cuda_seeds_of(bk));
    CUDA_CHECK_LAUNCH(bk, "lp_bias_grad_kernel");
    return RLT_OK;
}

extern "C" int cuda_lp_act_grad(rlt_backend *bk, void *dx, int32_t dxd, int32_t lddx, const void *x, int32_t xd,
                                int32_t ldx, int32_t rows, int32_t cols, int32_t act) {
    CUDA_REQUIRE(bk, rows >= 0 && cols >= 0 && lddx >= cols && ldx >= cols, "lp_act_grad");
    if (act == RLT_ACT_NONE || rows == 0 || cols == 0) return RLT_OK;
    return lp_act_grad_launch(bk, dx, dxd, lddx, x, xd, ldx, rows, cols, act);
}

__global__ void lp_add_kernel(float *dst, const void *src, int32_t dt, uint64_t n, cuda_seeds sd) {
    dst = cuda_seed_ptr(sd, dst), src = cuda_seed_ptr(sd, src);
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        dst[i] = dst[i] + lp_load(src, dt, (int64_t)i);
}

extern "C" int cuda_lp_add(rlt_backend *bk, float *dst, const void *src, int32_t dtype, uint64_t n) {
    if (n == 0) return RLT_OK;
    RLT_TRY(cuda_seeds_check(bk, "lp_add", 2, dst, src));
    dim3 grid(cuda_blocks(bk, n, CUDA_THREADS), 1, cuda_seeds_z(bk));
    lp_add_kernel<<<grid, CUDA_THREADS, 0, cuda_stream(bk)>>>(dst, src, dtype, n, cuda_seeds_of(bk));
    CUDA_CHECK_LAUNCH(bk, "lp_add_kernel");
    return RLT_OK;
}

/* Every thread that sees a non-finite value stores 1: the same value from any number of writers, so the
 * flag is deterministic without atomics. */
__global__ void amp_unscale_kernel(float *g, uint64_t n, rlt_amp_state *amp, cuda_seeds sd) {
    g = cuda_seed_ptr(sd, g), amp = cuda_seed_ptr(sd, amp);
    float inv = 1.0f / amp->scale;
    bool bad = false;
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        float gi = g[i], v = gi * inv;
        if (!isfinite(gi) || !isfinite(v)) bad = true;
        g[i] = v;
    }
    if (bad) amp->found_inf = 1;
}

extern "C" int cuda_amp_unscale(rlt_backend *bk, float *g, uint64_t n, rlt_amp_state *amp) {
    CUDA_REQUIRE(bk, amp != NULL, "amp UNSCALE");
    if (n == 0) return RLT_OK;
    RLT_TRY(cuda_seeds_check(bk, "amp UNSCALE", 2, g, amp));
    dim3 grid(cuda_blocks(bk, n, CUDA_THREADS), 1, cuda_seeds_z(bk));
    amp_unscale_kernel<<<grid, CUDA_THREADS, 0, cuda_stream(bk)>>>(g, n, amp, cuda_seeds_of(bk));
    CUDA_CHECK_LAUNCH(bk, "amp_unscale_kernel");
    return RLT_OK;
}

__global__ void amp_update_kernel(rlt_amp_state *amp, int64_t *step, float growth, float backoff, int32_t interval,
                                  cuda_seeds sd) {
    amp = cuda_seed_ptr(sd, amp), step = cuda_seed_ptr(sd, step);
    if (amp->found_inf) {
        amp->scale *= backoff;
        amp->good_steps = 0;
        amp->skipped += 1;
        if (step) *step -= 1;
    } else if (++amp->good_steps >= interval) {
        amp->scale *= growth;
        amp->good_steps = 0;
    }
    amp->found_inf = 0;
}

extern "C" int cuda_amp_update(rlt_backend *bk, rlt_amp_state *amp, int64_t *step, float growth, float backoff,
                               int32_t growth_interval) {
    CUDA_REQUIRE(bk, amp != NULL && growth_interval >= 1, "amp UPDATE");
    RLT_TRY(cuda_seeds_check(bk, "amp UPDATE", 2, amp, step));
    amp_update_kernel<<<dim3(1, 1, cuda_seeds_z(bk)), 1, 0, cuda_stream(bk)>>>(amp, step, growth, backoff,
                                                                              growth_interval, cuda_seeds_of(bk));
    CUDA_CHECK_LAUNCH(bk, "amp_update_kernel");
    return RLT_OK;
}

/* The table's amp op: each half keeps its launcher and kernel. */
extern "C" int cuda_amp(rlt_backend *bk, const rlt_amp_op *d) {
    switch (d->mode) {
    case RLT_AMP_UNSCALE: return cuda_amp_unscale(bk, d->g, d->n, d->amp);
    case RLT_AMP_UPDATE: return cuda_amp_update(bk, d->amp, d->step, d->growth, d->backoff, d->growth_interval);
    }
    return rlt_err_set(bk->err, RLT_EINVAL, __FILE__, __LINE__, "amp: unknown mode %d", (int)d->mode);
}

extern "C" cudaError_t cuda_preload_lowp(void) {
    cudaFuncAttributes a;
    const void *kernels[] = {(const void *)cast_kernel,        (const void *)lp_bias_act_kernel,
                             (const void *)lp_act_grad_kernel, (const void *)lp_bias_grad_kernel,
                             (const void *)amp_unscale_kernel, (const void *)amp_update_kernel,
                             (const void *)lp_add_kernel,
                             (const void *)lp_bias_act8_kernel<__nv_bfloat16>,
                             (const void *)lp_bias_act8_kernel<__half>,
                             (const void *)lp_act_grad8_kernel<__nv_bfloat16>,
                             (const void *)lp_act_grad8_kernel<__half>};
    for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; i++) {
        cudaError_t rc = cudaFuncGetAttributes(&a, kernels[i]);
        if (rc != cudaSuccess) return rc;
    }
    return cudaSuccess;
}
