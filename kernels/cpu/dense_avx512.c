/* dense_avx512.c: the fast dense-layer kernels (dense_kernel.h) for AVX-512: 16 lanes, register tiles of
 * 6 rows x 4 vectors (24 of the 32 zmm registers accumulate), masked loads and stores for the edges, and
 * an in-register 16 x 16 transpose for packing W^T.
 * Compiled for any x86-64 (the functions carry their own target), used only where the CPU has AVX-512F;
 * elsewhere this file is empty. */
#include "cpu_ops.h"

#if defined(__x86_64__) && defined(__GNUC__)
#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512dq,fma")
#include <immintrin.h>

#define DK(name) cpu_dense512_##name
#define DK_NAME "avx512"
#define VL 16
#define MR 6
#define NVMAX 4
#define V __m512
#define M __mmask16
#define M_FULL ((__mmask16)0xFFFF)
#define M_TAIL(n) ((__mmask16)((1u << (n)) - 1u))
#define V_ZERO() _mm512_setzero_ps()
#define V_SET1(x) _mm512_set1_ps(x)
#define V_LOAD(p) _mm512_loadu_ps(p)
#define V_LOADM(p, m) _mm512_maskz_loadu_ps((m), (p))
#define V_STORE(p, v) _mm512_storeu_ps((p), (v))
#define V_STOREM(p, m, v) _mm512_mask_storeu_ps((p), (m), (v))
#define V_BCAST(p) _mm512_set1_ps(*(p))
#define V_FMA(a, b, c) _mm512_fmadd_ps((a), (b), (c))
#define V_ADD(a, b) _mm512_add_ps((a), (b))
#define V_SUB(a, b) _mm512_sub_ps((a), (b))
#define V_MUL(a, b) _mm512_mul_ps((a), (b))
/* max(v, 0) returns +0 for v = -0 and 0 for NaN, as the reference's v > 0 ? v : 0 does. */
#define V_RELU(v) _mm512_max_ps((v), _mm512_setzero_ps())
#define V_RELU_GRAD(d, y) _mm512_maskz_mov_ps(_mm512_cmp_ps_mask((y), _mm512_setzero_ps(), _CMP_GT_OQ), (d))
#define V_REDUCE(v) _mm512_reduce_add_ps(v)

/* dst (16 rows, stride ds) = the transpose of src (16 rows, stride ss), in registers: pairs of rows
 * interleaved, then 64-bit pairs, then 128-bit lanes twice. The forward packs W^T with it. */
static inline void cpu_dense512_transpose(const float *src, int64_t ss, float *dst, int64_t ds) {
    __m512 r[16], t[16];
    for (int i = 0; i < 16; i++) r[i] = _mm512_loadu_ps(src + i * ss);
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; i++) {
        r[4 * i] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(1, 0, 1, 0));
        r[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(3, 2, 3, 2));
        r[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(1, 0, 1, 0));
        r[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (int j = 0; j < 4; j++) {
        t[j] = _mm512_shuffle_f32x4(r[j], r[4 + j], 0x88);
        t[4 + j] = _mm512_shuffle_f32x4(r[j], r[4 + j], 0xdd);
        t[8 + j] = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0x88);
        t[12 + j] = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0xdd);
    }
    for (int j = 0; j < 4; j++) {
        r[j] = _mm512_shuffle_f32x4(t[j], t[8 + j], 0x88);
        r[4 + j] = _mm512_shuffle_f32x4(t[4 + j], t[12 + j], 0x88);
        r[8 + j] = _mm512_shuffle_f32x4(t[j], t[8 + j], 0xdd);
        r[12 + j] = _mm512_shuffle_f32x4(t[4 + j], t[12 + j], 0xdd);
    }
    for (int i = 0; i < 16; i++) _mm512_storeu_ps(dst + i * ds, r[i]);
}
#define V_TRANSPOSE(src, ss, dst, ds) cpu_dense512_transpose((src), (ss), (dst), (ds))

#include "dense_kernel.h"

#pragma GCC pop_options
#else
const cpu_dense_kernels cpu_dense512_kernels = {NULL, NULL, NULL};
#endif
