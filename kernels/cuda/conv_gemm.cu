/* conv_gemm.cu: fp32 convolutions in GEMM form, what every fp32 slot runs (kernels/cuda/conv_ops.c dispatches
 * here). The CUDA twin of kernels/cpu/conv.c, which is im2col + GEMM too.
 *
 * Why not cuDNN in fp32: at RL batch sizes (32 images) cuDNN's plain-fp32, deterministic algorithms took
 * 45-85 us per forward and ~250 us per backward of a Nature DQN layer (docs/gpu_kernels.md), for a few
 * microseconds of arithmetic. Written as GEMMs, conv1 of the Nature torso is M = 32*20*20 rows, N = 32,
 * K = 4*8*8.
 *
 * With R = n*out_h*out_w output pixels and K = c*kh*kw taps, col [R, K] is the im2col matrix (row r = one
 * output pixel, columns in the order of a filter's OIHW row, so w is a [k, K] weight matrix as a dense
 * layer's). The workspace holds col, the weight gradient's split-K partial sums and dyr [R, k]:
 *   forward   y = act(col w^T + b) as an implicit-GEMM kernel that gathers col from x (conv_igemm.cu); split-K
 *             partial sums, when it splits, in col's place.
 *   backward  dy = act'(y) dy in place and dyr = the same values as rows (one pass);
 *             db += per-channel sums of dy (conv_bias.cu, a fixed tree) and dw += dyr^T col as an implicit
 *             GEMM split over chunks of pixels, added in chunk order, both on side lanes; on this lane
 *             col = dyr w (cuBLAS) and dx = col2im(col), a gather that sums each input pixel's taps in a fixed
 *             order (no atomics).
 * A layer with more taps than conv_igemm.cu's tap table holds (conv_igemm_fits) takes the explicit path instead:
 * im2col into col, then cuBLAS for the forward product and for the weight gradient, all on this lane.
 * Every sum is a sum of products in an order fixed by the shapes, so results are the same bits run to run
 * and within the GEMM bound of the CPU's (tests/gpu_dqn_parity.c). Under precision: tf32 every product of a layer,
 * ours and the library's, runs on TF32 tensor cores (cuda_conv_tc), within the TF32 bound. */
#include "conv_geom.cuh"

#define CONV_GEMM_THREADS 256

/* col[r, kk], r = (img, oy, ox), kk = (ci, ky, kx); zero where the tap falls in the padding. A block fills
 * IM2COL_ROWS rows: their (img, oy, ox) are decomposed once into shared memory, each thread decomposes its
 * columns once, and the copy loop is then an add, two bounds checks, a load and a coalesced store (the
 * divisions by runtime sizes, ~20 instructions each, are what an element-wise version spends its time on). */
#define IM2COL_ROWS 8
__global__ void conv_im2col_kernel(float *__restrict__ col, const float *__restrict__ x, conv_geom g, int32_t R) {
    __shared__ int32_t base[IM2COL_ROWS], y0[IM2COL_ROWS], x0[IM2COL_ROWS];
    cuda_pdl_wait();
    cuda_pdl_trigger();
    const int32_t K = g.c * g.kh * g.kw, P = g.oh * g.ow, r0 = (int32_t)blockIdx.x * IM2COL_ROWS;
    const int32_t rows = min(IM2COL_ROWS, R - r0);
    if ((int32_t)threadIdx.x < rows) {
        const int32_t r = r0 + (int32_t)threadIdx.x, img = r / P, p = r - img * P, oy = p / g.ow, ox = p - oy * g.ow;
        y0[threadIdx.x] = oy * g.stride - g.pad;
        x0[threadIdx.x] = ox * g.stride - g.pad;
        base[threadIdx.x] = (img * g.c * g.h + y0[threadIdx.x]) * g.w + x0[threadIdx.x];
    }
    __syncthreads();
    for (int32_t kk = (int32_t)threadIdx.x; kk < K; kk += (int32_t)blockDim.x) {
        const int32_t ci = kk / (g.kh * g.kw), rem = kk - ci * g.kh * g.kw, ky = rem / g.kw, kx = rem - ky * g.kw;
        const int32_t koff = (ci * g.h + ky) * g.w + kx;
        float *dst = col + (int64_t)r0 * K + kk;
#pragma unroll 8
        for (int32_t i = 0; i < rows; i++) {
            const int32_t iy = y0[i] + ky, ix = x0[i] + kx;
            dst[(int64_t)i * K] = (unsigned)iy < (unsigned)g.h && (unsigned)ix < (unsigned)g.w ? x[base[i] + koff] : 0.0f;
        }
    }
}

/* dy (NCHW, in place) *= act'(y), as act_grad_kernel computes it, and dyr[(img, p), o] = the same value. */
template <int ACT>
__global__ void conv_dy_rows_kernel(float *__restrict__ dyr, float *__restrict__ dy, const float *__restrict__ y, int32_t k, int32_t P, int64_t total,
                                    cuda_seeds sd) {
    cuda_pdl_wait();
    cuda_pdl_trigger();
    dyr = cuda_seed_ptr(sd, dyr), dy = cuda_seed_ptr(sd, dy), y = cuda_seed_ptr(sd, y); /* grid z: the agent */
    /* 32-bit indices: the launcher checks n*k*P fits. */
    for (int32_t e = (int32_t)(blockIdx.x * blockDim.x + threadIdx.x); e < (int32_t)total;
         e += (int32_t)(gridDim.x * blockDim.x)) {
        float d = dy[e];
        if (ACT == RLT_ACT_RELU) d = y[e] > 0.0f ? d : 0.0f;
        else if (ACT == RLT_ACT_TANH) d *= 1.0f - y[e] * y[e];
        if (ACT != RLT_ACT_NONE) dy[e] = d;
        const int32_t q = e / P, p = e - q * P, img = q / k, o = q - img * k;
        dyr[(img * P + p) * k + o] = d;
    }
}

/* y[img, o, p] = act(yr[(img, p), o] + b[o]) (NCHW out of the GEMM's rows), as the implicit GEMM's epilogue
 * computes it. */
template <int ACT>
__global__ void conv_rows_bias_act_kernel(float *y, const float *yr, const float *b, int32_t k, int32_t P, int64_t total) {
    cuda_pdl_wait();
    cuda_pdl_trigger();
    for (int32_t e = (int32_t)(blockIdx.x * blockDim.x + threadIdx.x); e < (int32_t)total;
         e += (int32_t)(gridDim.x * blockDim.x)) {
        const int32_t q = e / P, p = e - q * P, img = q / k, o = q - img * k;
        y[e] = cuda_act(yr[(img * P + p) * k + o] + (b ? b[o] : 0.0f), ACT);
    }
}

/* dx[img, ci, iy, ix] = the sum of the dcol entries im2col copied this pixel to: output rows oy (then ox)
 * ascending, each with its one tap ky = iy + pad - oy stride (likewise kx). A fixed order, no atomics. */
__global__ void conv_col2im_kernel(float *__restrict__ dx, const float *__restrict__ dcol, conv_geom g, int32_t total,
                                   cuda_seeds sd) {
    cuda_pdl_wait();
    cuda_pdl_trigger();
    dx = cuda_seed_ptr(sd, dx), dcol = cuda_seed_ptr(sd, dcol); /* grid z: the agent */
    const int32_t K = g.c * g.kh * g.kw, P = g.oh * g.ow;
    for (int32_t e = (int32_t)(blockIdx.x * blockDim.x + threadIdx.x); e < total; e += (int32_t)(gridDim.x * blockDim.x)) {
        const int32_t q = e / g.w, ix = e - q * g.w, q2 = q / g.h, iy = q - q2 * g.h, img = q2 / g.c, ci = q2 - img * g.c;
        const int32_t ty = iy + g.pad, tx = ix + g.pad;
        const int32_t oy_lo = ty >= g.kh ? (ty - g.kh) / g.stride + 1 : 0, oy_hi = min(ty / g.stride, g.oh - 1);
        const int32_t ox_lo = tx >= g.kw ? (tx - g.kw) / g.stride + 1 : 0, ox_hi = min(tx / g.stride, g.ow - 1);
        const float *src = dcol + (int64_t)img * P * K + ci * g.kh * g.kw;
        float acc = 0.0f;
        for (int32_t oy = oy_lo; oy <= oy_hi; oy++)
            for (int32_t ox = ox_lo; ox <= ox_hi; ox++)
                acc += src[(int64_t)(oy * g.ow + ox) * K + (ty - oy * g.stride) * g.kw + (tx - ox * g.stride)];
        dx[e] = acc;
    }
}

/* The workspace: col [R, K], the weight gradient's split-K partial sums (their own place: the weight gradient
 * runs beside dcol, which overwrites col), then dyr [R, k]. Offsets of part and dyr: */
static uint64_t conv_gemm_part_off(const conv_geom &g) {
    return conv_align256((uint64_t)g.n * g.oh * g.ow * g.c * g.kh * g.kw * 4);
}

static uint64_t conv_gemm_dyr_off(const conv_geom &g) {
    return conv_gemm_part_off(g) + conv_align256(conv_igemm_part_floats(g) * 4);
}

static uint64_t conv_gemm_ws_bytes(const conv_geom &g) {
    return conv_gemm_dyr_off(g) + conv_align256((uint64_t)g.n * g.oh * g.ow * g.k * 4);
}

/* Checks once, at prepare, what the kernels assume beyond conv_ops.c's shape checks: 32-bit element indices
 * (col's own offsets are 64-bit). conv_ops.c then checks each call's workspace against *ws_bytes. */
extern "C" int cuda_conv_gemm_prepare(rlt_backend *bk, const rlt_conv_shape *s, uint64_t *ws_bytes) {
    conv_geom g = conv_geom_of(s);
    uint64_t R = (uint64_t)g.n * g.oh * g.ow, K = (uint64_t)g.c * g.kh * g.kw;
    CUDA_REQUIRE(bk, s->dtype == RLT_LP_F32 && g.oh >= 1 && g.ow >= 1, "conv_prepare");
    CUDA_REQUIRE(bk, R * g.k <= INT32_MAX && (uint64_t)g.n * g.c * g.h * g.w <= INT32_MAX && K <= INT32_MAX,
                 "conv_prepare");
    *ws_bytes = conv_gemm_ws_bytes(g);
    return RLT_OK;
}

/* A layer's library product (cuda_gemm's arguments): on TF32 tensor cores under precision: tf32 (cuda_conv_tc), as the
 * implicit GEMMs then are; uniform: the side lanes' workspace size on every lane (cuda_gemm_uniform). */
static int conv_gemm(rlt_backend *bk, int32_t uniform, int32_t ta, int32_t tb, int32_t m, int32_t n, int32_t k,
                     const float *A, int32_t lda, const float *B, int32_t ldb, float beta, float *C, int32_t ldc) {
    if (cuda_conv_tc(bk)) return cuda_gemm_tf32(bk, uniform, ta, tb, m, n, k, 1.0f, A, lda, B, ldb, beta, C, ldc);
    if (uniform) return cuda_gemm_uniform(bk, ta, tb, m, n, k, 1.0f, A, lda, B, ldb, beta, C, ldc);
    return cuda_gemm(bk, ta, tb, m, n, k, 1.0f, A, lda, B, ldb, beta, C, ldc);
}

static int conv_im2col(rlt_backend *bk, float *col, const float *x, const conv_geom &g) {
    const int32_t R = g.n * g.oh * g.ow;
    CUDA_CHECK(bk, cuda_launch_pdl(bk, conv_im2col_kernel, dim3((unsigned)((R + IM2COL_ROWS - 1) / IM2COL_ROWS)),
                                   dim3(CONV_GEMM_THREADS), col, x, g, R));
    CUDA_CHECK_LAUNCH(bk, "conv_im2col_kernel");
    return RLT_OK;
}

extern "C" int cuda_conv_gemm_forward(rlt_backend *bk, const rlt_conv_shape *s, float *y, const float *x,
                                      const float *w, const float *b, int32_t act, void *ws) {
    conv_geom g = conv_geom_of(s);
    /* Batched over seeds (grid z, each agent's pointers moved by its delta): the implicit GEMMs; the explicit path's
     * library product is never batched here. */
    if (conv_igemm_fits(g)) {
        RLT_TRY(cuda_seeds_check(bk, "conv_forward", 5, y, x, w, b, ws));
        return conv_igemm_forward(bk, g, y, x, w, b, act, (float *)ws);
    }
    RLT_TRY(cuda_seeds_refuse(bk, "conv_forward (a layer past the implicit GEMM's taps)"));
    float *col = (float *)ws;
    RLT_TRY(conv_im2col(bk, col, x, g));
    const int32_t P = g.oh * g.ow, R = g.n * P, K = g.c * g.kh * g.kw;
    float *yr = (float *)((unsigned char *)ws + conv_gemm_dyr_off(g));
    RLT_TRY(conv_gemm(bk, 1, 0, 1, R, g.k, K, col, K, w, K, 0.0f, yr, g.k));
    int64_t ny = (int64_t)R * g.k;
    dim3 grid(cuda_blocks(bk, (uint64_t)ny, CONV_GEMM_THREADS)), block(CONV_GEMM_THREADS);
    if (act == RLT_ACT_RELU)
        CUDA_CHECK(bk, cuda_launch_pdl(bk, conv_rows_bias_act_kernel<RLT_ACT_RELU>, grid, block, y, (const float *)yr, b, g.k, P, ny));
    else if (act == RLT_ACT_TANH)
        CUDA_CHECK(bk, cuda_launch_pdl(bk, conv_rows_bias_act_kernel<RLT_ACT_TANH>, grid, block, y, (const float *)yr, b, g.k, P, ny));
    else CUDA_CHECK(bk, cuda_launch_pdl(bk, conv_rows_bias_act_kernel<RLT_ACT_NONE>, grid, block, y, (const float *)yr, b, g.k, P, ny));
    CUDA_CHECK_LAUNCH(bk, "conv_rows_bias_act_kernel");
    return RLT_OK;
}

static int conv_dx(rlt_backend *bk, const conv_geom &g, float *dx, const float *dyr, const float *w, float *col);

extern "C" int cuda_conv_gemm_backward(rlt_backend *bk, const rlt_conv_shape *s, float *dx, float *dw, float *db,
                                       float *dy, const float *y, const float *x, const float *w, int32_t act, void *ws) {
    conv_geom g = conv_geom_of(s);
    if (!conv_igemm_fits(g)) RLT_TRY(cuda_seeds_refuse(bk, "conv_backward (a layer past the implicit GEMM's taps)"));
    RLT_TRY(cuda_seeds_check(bk, "conv_backward", 8, dx, dw, db, dy, y, x, w, ws));
    const int32_t P = g.oh * g.ow, R = g.n * P, K = g.c * g.kh * g.kw;
    float *col = (float *)ws;
    float *part = (float *)((unsigned char *)ws + conv_gemm_part_off(g));
    float *dyr = (float *)((unsigned char *)ws + conv_gemm_dyr_off(g));
    int64_t ny = (int64_t)R * g.k;
    const cuda_seeds sd = cuda_seeds_of(bk);
    dim3 grid(cuda_blocks(bk, (uint64_t)ny, CONV_GEMM_THREADS), 1, cuda_seeds_z(bk)), block(CONV_GEMM_THREADS);
    if (act == RLT_ACT_RELU)
        CUDA_CHECK(bk, cuda_launch_pdl(bk, conv_dy_rows_kernel<RLT_ACT_RELU>, grid, block, dyr, dy, y, g.k, P, ny, sd));
    else if (act == RLT_ACT_TANH)
        CUDA_CHECK(bk, cuda_launch_pdl(bk, conv_dy_rows_kernel<RLT_ACT_TANH>, grid, block, dyr, dy, y, g.k, P, ny, sd));
    else CUDA_CHECK(bk, cuda_launch_pdl(bk, conv_dy_rows_kernel<RLT_ACT_NONE>, grid, block, dyr, dy, y, g.k, P, ny, sd));
    CUDA_CHECK_LAUNCH(bk, "conv_dy_rows_kernel");
    if (!conv_igemm_fits(g)) {
        /* Explicit (a layer too wide for the implicit GEMMs): everything in order on this lane; col is im2col(x)
         * until dcol overwrites it. */
        if (db) RLT_TRY(cuda_conv_bias_grad(bk, db, dy, RLT_LP_F32, g.n, g.k, P));
        RLT_TRY(conv_im2col(bk, col, x, g));
        RLT_TRY(conv_gemm(bk, 0, 1, 0, g.k, K, R, dyr, g.k, col, K, 1.0f, dw, K));
    } else {
        /* Three independent chains follow dyr: the weight gradient and the bias gradient on two side lanes,
         * dcol and col2im (which the layer below waits for) on this one (cuda_fork_side). */
        const int32_t lane = cuda_get(bk)->lane;
        int32_t side[2];
        RLT_TRY(cuda_fork_side(bk, side));
        /* dw[k, K] += dyr^T col(x): the sum runs over all R output pixels. */
        cuda_get(bk)->lane = side[0];
        int rc = conv_igemm_weight_grad(bk, g, dw, dyr, x, part);
        cuda_get(bk)->lane = side[1];
        if (rc == RLT_OK && db) rc = cuda_conv_bias_grad(bk, db, dy, RLT_LP_F32, g.n, g.k, P);
        cuda_get(bk)->lane = lane;
        if (rc == RLT_OK && dx) rc = conv_dx(bk, g, dx, dyr, w, col);
        int rc2 = cuda_merge_side(bk, lane, side);
        return rc != RLT_OK ? rc : rc2;
    }
    if (!dx) return RLT_OK;
    return conv_dx(bk, g, dx, dyr, w, col);
}

/* dx = col2im(dyr w), with dcol = dyr w in col's place. */
static int conv_dx(rlt_backend *bk, const conv_geom &g, float *dx, const float *dyr, const float *w, float *col) {
    const int32_t R = g.n * g.oh * g.ow, K = g.c * g.kh * g.kw;
    /* dcol = dyr w into col's place (no activation: the previous layer applies its own derivative); batched over
     * seeds, one library product over the agents' pointer arrays (summed in its order, not the single product's). */
    if (cuda_get(bk)->seeds.n > 1)
        RLT_TRY(cuda_gemm_seeds_as(bk, cuda_conv_tc(bk), 0, 0, R, K, g.k, 1.0f, dyr, g.k, w, K, 0.0f, col, K));
    else RLT_TRY(conv_gemm(bk, 0, 0, 0, R, K, g.k, dyr, g.k, w, K, 0.0f, col, K));
    int64_t nx = (int64_t)g.n * g.c * g.h * g.w;
    CUDA_CHECK(bk, cuda_launch_pdl(bk, conv_col2im_kernel,
                                   dim3(cuda_blocks(bk, (uint64_t)nx, CONV_GEMM_THREADS), 1, cuda_seeds_z(bk)),
                                   dim3(CONV_GEMM_THREADS), dx, (const float *)col, g, (int32_t)nx, cuda_seeds_of(bk)));
    CUDA_CHECK_LAUNCH(bk, "conv_col2im_kernel");
    return RLT_OK;
}

extern "C" cudaError_t cuda_preload_conv_gemm(void) {
    cudaFuncAttributes a;
    cudaError_t rc = conv_igemm_preload();
    if (rc == cudaSuccess) rc = cudaFuncGetAttributes(&a, conv_im2col_kernel);
    if (rc == cudaSuccess) rc = cudaFuncGetAttributes(&a, conv_col2im_kernel);
    if (rc == cudaSuccess) rc = cudaFuncGetAttributes(&a, conv_dy_rows_kernel<RLT_ACT_NONE>);
    if (rc == cudaSuccess) rc = cudaFuncGetAttributes(&a, conv_dy_rows_kernel<RLT_ACT_RELU>);
    if (rc == cudaSuccess) rc = cudaFuncGetAttributes(&a, conv_dy_rows_kernel<RLT_ACT_TANH>);
    if (rc == cudaSuccess) rc = cudaFuncGetAttributes(&a, conv_rows_bias_act_kernel<RLT_ACT_NONE>);
    if (rc == cudaSuccess) rc = cudaFuncGetAttributes(&a, conv_rows_bias_act_kernel<RLT_ACT_RELU>);
    if (rc == cudaSuccess) rc = cudaFuncGetAttributes(&a, conv_rows_bias_act_kernel<RLT_ACT_TANH>);
    return rc;
}
