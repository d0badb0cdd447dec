/* gemm_ceiling.c: the fp32 rate cuBLAS reaches on the products of N TD3 agents' hidden layers, the reference
 * bench/seeds.sh compares a seed group with. For N = 1, 2, 4, 8, 16 agents it times one
 * cublasSgemmStridedBatched over the N agents' 256 x 256 x 256 products (the hidden layer of a 256-256 network at
 * batch 256, all three products of a layer have this shape) and prints the TFLOP/s, and what a whole TD3 update
 * (421.7 MFLOP at 256-256/b256, obs 17, act 6) would run at if every multiply-add ran at that rate and nothing
 * else took time: the upper bound of a seed-batched design built on cuBLAS.
 *   bench_gemm_ceiling [--size 256] [--reps 2000] [--tf32] [--max-agents 16]   (1, 2, 4, ... up to --max-agents)
 * Needs a GPU; built only with the CUDA backend. */
#define _POSIX_C_SOURCE 199309L
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TD3_UPDATE_FLOP 421.7e6

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#define CK(x)                                                                                      \
    do {                                                                                           \
        int rc_ = (int)(x);                                                                        \
        if (rc_) { fprintf(stderr, "%s:%d: %s failed (%d)\n", __FILE__, __LINE__, #x, rc_); return 1; } \
    } while (0)

int main(int argc, char **argv) {
    int size = 256, reps = 2000, tf32 = 0, max_n = 16;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--tf32")) tf32 = 1;
        else if (i + 1 < argc && !strcmp(argv[i], "--size")) size = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--reps")) reps = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--max-agents")) max_n = atoi(argv[++i]);
        else { fprintf(stderr, "usage: %s [--size N] [--reps N] [--tf32] [--max-agents N]\n", argv[0]); return 2; }
    }
    int dev_count = 0;
    if (cudaGetDeviceCount(&dev_count) != cudaSuccess || dev_count < 1) { fprintf(stderr, "no GPU\n"); return 77; }
    if (size < 1 || reps < 1 || max_n < 1 || max_n > 1024) { fprintf(stderr, "%s: bad --size, --reps or --max-agents\n", argv[0]); return 2; }
    size_t elems = (size_t)size * size * max_n;
    float *a, *b, *c;
    CK(cudaMalloc((void **)&a, elems * 4));
    CK(cudaMalloc((void **)&b, elems * 4));
    CK(cudaMalloc((void **)&c, elems * 4));
    CK(cudaMemset(a, 0, elems * 4));
    CK(cudaMemset(b, 0, elems * 4));
    cublasHandle_t h;
    CK(cublasCreate(&h));
    CK(cublasSetMathMode(h, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_PEDANTIC_MATH));
    const float one = 1.0f, zero = 0.0f;
    long long st = (long long)size * size;
    printf("cuBLAS strided-batched SGEMM, %d x %d x %d per agent, %s, %d reps\n", size, size, size,
           tf32 ? "tf32" : "fp32", reps);
    printf("agents  TFLOP/s  TD3 256-256/b256 updates/s if every FLOP ran at this rate (all agents together)\n");
    for (int n = 1; n <= max_n; n *= 2) {
        for (int w = 0; w < 50; w++)
            CK(cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, size, size, size, &one, a, size, st, b, size,
                                         st, &zero, c, size, st, n));
        CK(cudaDeviceSynchronize());
        double t0 = now_s();
        for (int r = 0; r < reps; r++)
            CK(cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, size, size, size, &one, a, size, st, b, size,
                                         st, &zero, c, size, st, n));
        CK(cudaDeviceSynchronize());
        double s = now_s() - t0, flops = 2.0 * size * size * (double)size * n * reps / s;
        printf("%6d  %7.2f  %.0f\n", n, flops / 1e12, flops / TD3_UPDATE_FLOP);
    }
    cublasDestroy(h);
    cudaFree(a);
    cudaFree(b);
    cudaFree(c);
    return 0;
}
