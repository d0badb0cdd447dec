/* dense_avx2.c: the fast dense-layer kernels (dense_kernel.h) for AVX2 with FMA: 8 lanes, register tiles
 * of 6 rows x 2 vectors (12 of the 16 ymm registers accumulate), maskload/maskstore for the edges.
 * Compiled for any x86-64 (the functions carry their own target), used only where the CPU has AVX2 and
 * FMA but not AVX-512; elsewhere this file is empty. */
#include "cpu_ops.h"

#if defined(__x86_64__) && defined(__GNUC__)
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#include <immintrin.h>

#define DK(name) cpu_dense256_##name
#define DK_NAME "avx2"
#define VL 8
#define MR 6
#define NVMAX 2
#define V __m256
#define M __m256i
#define M_FULL _mm256_set1_epi32(-1)
#define M_TAIL(n) _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7))
#define V_ZERO() _mm256_setzero_ps()
#define V_SET1(x) _mm256_set1_ps(x)
#define V_LOAD(p) _mm256_loadu_ps(p)
#define V_LOADM(p, m) _mm256_maskload_ps((p), (m))
#define V_STORE(p, v) _mm256_storeu_ps((p), (v))
#define V_STOREM(p, m, v) _mm256_maskstore_ps((p), (m), (v))
#define V_BCAST(p) _mm256_broadcast_ss(p)
#define V_FMA(a, b, c) _mm256_fmadd_ps((a), (b), (c))
#define V_ADD(a, b) _mm256_add_ps((a), (b))
#define V_SUB(a, b) _mm256_sub_ps((a), (b))
#define V_MUL(a, b) _mm256_mul_ps((a), (b))
/* max(v, 0) returns +0 for v = -0 and 0 for NaN, as the reference's v > 0 ? v : 0 does. */
#define V_RELU(v) _mm256_max_ps((v), _mm256_setzero_ps())
#define V_RELU_GRAD(d, y) _mm256_and_ps((d), _mm256_cmp_ps((y), _mm256_setzero_ps(), _CMP_GT_OQ))
static inline float cpu_dense256_reduce(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
#define V_REDUCE(v) cpu_dense256_reduce(v)

#include "dense_kernel.h"

#pragma GCC pop_options
#else
const cpu_dense_kernels cpu_dense256_kernels = {NULL, NULL, NULL};
#endif
