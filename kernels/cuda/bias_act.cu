/* bias_act.cu: bias + activation forward and the activation's backward through its output after a library
 * product, the CUDA twins of kernels/cpu/bias_act.c, and the add of a bias gradient cuBLASLt summed (gemm_lt.c).
 * The column sum for a bias gradient the library did not fuse is lowp.cu's cuda_lp_bias_grad, for every type.
 *
 * The 2-D kernels put threadIdx.x along a row (columns), so a warp reads consecutive floats of one row:
 * coalesced for any leading dimension. Both loops are grid-stride, so any shape runs with a bounded grid. */
#include "cuda_ops.h"

#define TILE_X 32
#define TILE_Y 8

static unsigned blocks_along(uint64_t n, unsigned per_block, unsigned cap) {
    uint64_t b = (n + per_block - 1) / per_block;
    if (b > cap) b = cap;
    return b ? (unsigned)b : 1u;
}

template <int ACT>
__global__ void bias_act_kernel(float *y, int32_t ldy, const float *b, int32_t rows, int32_t cols, cuda_seeds sd) {
    y = cuda_seed_ptr(sd, y), b = cuda_seed_ptr(sd, b); /* seed batching: grid z is the agent */
    for (int32_t r = blockIdx.y * blockDim.y + threadIdx.y; r < rows; r += gridDim.y * blockDim.y) {
        float *row = y + (int64_t)r * ldy;
        for (int32_t c = blockIdx.x * blockDim.x + threadIdx.x; c < cols; c += gridDim.x * blockDim.x) {
            row[c] = cuda_act(row[c] + (b ? b[c] : 0.0f), ACT);
        }
    }
}

#define ACT_GRAD_ROWS 4
template <int ACT>
__global__ void act_grad_kernel(float *dy, int32_t lddy, const float *y, int32_t ldy, int32_t rows, int32_t cols,
                                cuda_seeds sd) {
    cuda_pdl_wait(); /* launched with cuda_launch_pdl */
    cuda_pdl_trigger();
    dy = cuda_seed_ptr(sd, dy), y = cuda_seed_ptr(sd, y); /* seed batching: grid z is the agent */
    /* ACT_GRAD_ROWS of a thread's rows at a time, all their loads before any store (dy and y may not be told apart by
     * the compiler, so one row at a time waited out each load in turn: 16 TD3 seeds' ReLU gradients, 4 rows a thread,
     * took 7.9 us in place on an H200, ncu, 1 TB/s). */
    const int32_t r0 = blockIdx.y * blockDim.y + threadIdx.y, rstep = gridDim.y * blockDim.y;
    for (int32_t c = blockIdx.x * blockDim.x + threadIdx.x; c < cols; c += gridDim.x * blockDim.x)
        for (int32_t r = r0; r < rows; r += ACT_GRAD_ROWS * rstep) {
            float dv[ACT_GRAD_ROWS], ov[ACT_GRAD_ROWS];
#pragma unroll
            for (int i = 0; i < ACT_GRAD_ROWS; i++) {
                const int32_t ri = r + i * rstep;
                dv[i] = ri < rows ? dy[(int64_t)ri * lddy + c] : 0.0f;
                ov[i] = ri < rows ? y[(int64_t)ri * ldy + c] : 0.0f;
            }
#pragma unroll
            for (int i = 0; i < ACT_GRAD_ROWS; i++) {
                const int32_t ri = r + i * rstep;
                if (ri >= rows) break;
                dy[(int64_t)ri * lddy + c] = ACT == RLT_ACT_RELU ? (ov[i] > 0.0f ? dv[i] : 0.0f) : dv[i] * (1.0f - ov[i] * ov[i]);
            }
        }
}

/* db[c] = beta db[c] + s[c]: the bias gradient cuBLASLt's BGRADB epilogue wrote to scratch (it has no beta), added
 * into the accumulated one with the column sum's expression (beta db first, then the new sum; lowp.cu). */
__global__ void bias_grad_add_kernel(float *db, const float *s, int32_t n, float beta) {
    int32_t c = (int32_t)(blockIdx.x * blockDim.x + threadIdx.x);
    if (c < n) db[c] = beta == 0.0f ? s[c] : beta * db[c] + s[c];
}

/* The grid of one agent's pass: at most 8 blocks an SM over all the agents batched (16 TD3 seeds' ReLU gradients
 * were 4,096 blocks of one element a thread: 7 us in place on an H200); the grid-stride loops give the same values
 * whatever the grid. */
static dim3 grid_2d(rlt_backend *bk, int32_t rows, int32_t cols) {
    unsigned cap = (unsigned)cuda_get(bk)->sm_count * 8u / cuda_seeds_z(bk);
    if (cap < 8u) cap = 8u;
    unsigned gx = blocks_along((uint64_t)cols, TILE_X, 64u);
    unsigned gy = blocks_along((uint64_t)rows, TILE_Y, cap / gx ? cap / gx : 1u);
    return dim3(gx, gy);
}

extern "C" int cuda_bias_act(rlt_backend *bk, float *y, int32_t ldy, const float *b, int32_t rows, int32_t cols,
                             int32_t act) {
    CUDA_REQUIRE(bk, rows >= 0 && cols >= 0 && ldy >= cols, "bias_act");
    CUDA_REQUIRE(bk, act >= RLT_ACT_NONE && act <= RLT_ACT_TANH, "bias_act");
    /* After a library product: a single agent's, or every batched seed's (cuda_gemm_seeds). */
    RLT_TRY(cuda_seeds_check(bk, "bias_act", 2, y, b));
    if (rows == 0 || cols == 0) return RLT_OK;
    dim3 grid = grid_2d(bk, rows, cols), block(TILE_X, TILE_Y);
    grid.z = cuda_seeds_z(bk);
    cudaStream_t s = cuda_stream(bk);
    const cuda_seeds sd = cuda_seeds_of(bk);
    if (act == RLT_ACT_RELU) bias_act_kernel<RLT_ACT_RELU><<<grid, block, 0, s>>>(y, ldy, b, rows, cols, sd);
    else if (act == RLT_ACT_TANH) bias_act_kernel<RLT_ACT_TANH><<<grid, block, 0, s>>>(y, ldy, b, rows, cols, sd);
    else bias_act_kernel<RLT_ACT_NONE><<<grid, block, 0, s>>>(y, ldy, b, rows, cols, sd);
    CUDA_CHECK_LAUNCH(bk, "bias_act_kernel");
    return RLT_OK;
}

extern "C" int cuda_act_grad(rlt_backend *bk, float *dy, int32_t lddy, const float *y, int32_t ldy, int32_t rows,
                             int32_t cols, rlt_act act) {
    CUDA_REQUIRE(bk, rows >= 0 && cols >= 0 && lddy >= cols && ldy >= cols, "act_grad");
    CUDA_REQUIRE(bk, act >= RLT_ACT_NONE && act <= RLT_ACT_TANH, "act_grad");
    if (act == RLT_ACT_NONE || rows == 0 || cols == 0) return RLT_OK;
    RLT_TRY(cuda_seeds_check(bk, "act_grad", 2, dy, y));
    dim3 grid = grid_2d(bk, rows, cols), block(TILE_X, TILE_Y);
    grid.z = cuda_seeds_z(bk);
    /* On the actor step's critical path (the tanh output's derivative): launched with cuda_launch_pdl. */
    auto kernel = act == RLT_ACT_RELU ? act_grad_kernel<RLT_ACT_RELU> : act_grad_kernel<RLT_ACT_TANH>;
    CUDA_CHECK(bk, cuda_launch_pdl(bk, kernel, grid, block, dy, lddy, y, ldy, rows, cols, cuda_seeds_of(bk)));
    CUDA_CHECK_LAUNCH(bk, "act_grad_kernel");
    return RLT_OK;
}

extern "C" int cuda_bias_grad_add(rlt_backend *bk, float *db, const float *s, int32_t n, float beta) {
    CUDA_REQUIRE(bk, n >= 0, "bias_grad_add");
    RLT_TRY(cuda_seeds_refuse(bk, "bias_grad_add")); /* after a cuBLASLt product only */
    if (n == 0) return RLT_OK;
    bias_grad_add_kernel<<<(unsigned)((n + CUDA_THREADS - 1) / CUDA_THREADS), CUDA_THREADS, 0, cuda_stream(bk)>>>(db, s, n,
                                                                                                             beta);
    CUDA_CHECK_LAUNCH(bk, "bias_grad_add_kernel");
    return RLT_OK;
}

extern "C" cudaError_t cuda_preload_bias_act(void) {
    cudaFuncAttributes a;
    cudaError_t rc = cudaSuccess;
    if (rc == cudaSuccess) rc = cudaFuncGetAttributes(&a, bias_act_kernel<RLT_ACT_NONE>);
    if (rc == cudaSuccess) rc = cudaFuncGetAttributes(&a, bias_act_kernel<RLT_ACT_RELU>);
    if (rc == cudaSuccess) rc = cudaFuncGetAttributes(&a, bias_act_kernel<RLT_ACT_TANH>);
    if (rc == cudaSuccess) rc = cudaFuncGetAttributes(&a, act_grad_kernel<RLT_ACT_RELU>);
    if (rc == cudaSuccess) rc = cudaFuncGetAttributes(&a, act_grad_kernel<RLT_ACT_TANH>);
    if (rc == cudaSuccess) rc = cudaFuncGetAttributes(&a, bias_grad_add_kernel);
    return rc;
}
