/* mma_tf32.cuh: fp32 products on the tensor cores by the 3xTF32 split (the tile paths of linear.cu and
 * conv_igemm.cu; RLT_CUDA_MMA=0 turns them off).
 *
 * Why: the dense and convolution tiles of an RL update are issue-bound (bench/GPU_NOTES.md): an FFMA path spends
 * one instruction per multiply-add and one shared-memory load per few. One mma.sync m16n8k8 does 1,024
 * multiply-adds; with the three it takes per step here, a warp issues some 2.5x fewer instructions per tile.
 *
 * The split: x = big + small with big = x rounded to TF32 (10 mantissa bits) and small = x - big (exact in fp32)
 * rounded to TF32, so |x - big - small| <= 2^-22 |x|. A product is then big_a big_b + big_a small_b + small_a big_b
 * (the small x small term, <= 2^-22 |ab|, is dropped), so each product is within 3 * 2^-22 |ab| of the fp32 one;
 * the tensor core adds them with fp32 accumulation (truncating, not rounding: up to 2u per addition, u = 2^-24).
 * gpu_ops_parity's bound for these paths says exactly that. The order of the sums is fixed by the fragment
 * layout and the k order, so the bits do not change from run to run.
 *
 * Fragments (PTX ISA, mma.m16n8k8 .tf32): lane = 4 g + t. A (16 x 8, row): a0 = A[g][t], a1 = A[g + 8][t],
 * a2 = A[g][t + 4], a3 = A[g + 8][t + 4]. B (8 x 8, col): b0 = B[t][g], b1 = B[t + 4][g]. C (16 x 8):
 * c0 = C[g][2t], c1 = C[g][2t + 1], c2 = C[g + 8][2t], c3 = C[g + 8][2t + 1].
 */
#ifndef RLT_MMA_TF32_CUH
#define RLT_MMA_TF32_CUH

#include <stdint.h>

/* The tensor-core paths need sm_80 or later; older targets compile the FFMA paths only. */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define MMA_TF32_OK 1
#else
#define MMA_TF32_OK 0
#endif

struct mma_split {
    uint32_t big, small;
};

__device__ __forceinline__ uint32_t mma_to_tf32(float x) {
    uint32_t r;
#if MMA_TF32_OK
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
#else
    r = __float_as_uint(x);
#endif
    return r;
}

__device__ __forceinline__ mma_split mma_split_of(float x) {
    mma_split s;
    s.big = mma_to_tf32(x);
    s.small = mma_to_tf32(x - __uint_as_float(s.big));
    return s;
}

/* d += a b for one m16n8k8 TF32 fragment triple. */
__device__ __forceinline__ void mma_tf32_step(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
#if MMA_TF32_OK
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
    (void)d, (void)a, (void)b;
#endif
}

/* Operands sit in shared memory at As[m sm + k sk] and Bs[n sn + k sk]: k-major (sm = 1, sk = the row stride)
 * or k-contiguous (sk = 1, sm = the row stride); either way a row stride of 8 (k-major) or 4 (k-contiguous) mod
 * 32 floats puts a fragment's 32 loads in 32 different banks. */

/* The A fragment of rows m0 .. m0 + 15, k0 .. k0 + 7, split in two. */
__device__ __forceinline__ void mma_load_a(uint32_t (&big)[4], uint32_t (&small)[4], const float *As, int sm, int sk,
                                           int m0, int k0, int lane) {
    const int g = lane >> 2, t = lane & 3;
    const float *p = As + (m0 + g) * sm + (k0 + t) * sk;
    const float v[4] = {p[0], p[8 * sm], p[4 * sk], p[8 * sm + 4 * sk]};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const mma_split s = mma_split_of(v[i]);
        big[i] = s.big, small[i] = s.small;
    }
}

/* The B fragment of columns n0 .. n0 + 7, k0 .. k0 + 7, split in two. */
__device__ __forceinline__ void mma_load_b(uint32_t (&big)[2], uint32_t (&small)[2], const float *Bs, int sn, int sk,
                                           int n0, int k0, int lane) {
    const int g = lane >> 2, t = lane & 3;
    const float *p = Bs + (n0 + g) * sn + (k0 + t) * sk;
    const mma_split s0 = mma_split_of(p[0]), s1 = mma_split_of(p[4 * sk]);
    big[0] = s0.big, big[1] = s1.big, small[0] = s0.small, small[1] = s1.small;
}

/* acc[j] += A[m0 .. m0 + 15][k0 .. k0 + 7] B[k0 .. k0 + 7][n0 + 8 j .. n0 + 8 j + 7] for j < NF, 3xTF32: the
 * correction products first, then the main one, into the same fp32 accumulators. */
template <int NF>
__device__ __forceinline__ void mma_tf32x3_k8(float (&acc)[NF][4], const float *As, int sm, const float *Bs, int sn,
                                              int sk_a, int sk_b, int m0, int n0, int k0, int lane) {
    uint32_t ab[4], as[4];
    mma_load_a(ab, as, As, sm, sk_a, m0, k0, lane);
#pragma unroll
    for (int j = 0; j < NF; j++) {
        uint32_t bb[2], bs[2];
        mma_load_b(bb, bs, Bs, sn, sk_b, n0 + 8 * j, k0, lane);
        mma_tf32_step(acc[j], as, bb);
        mma_tf32_step(acc[j], ab, bs);
        mma_tf32_step(acc[j], ab, bb);
    }
}

/* Writes the warp's NF fragments (rows m0.., columns n0 + 8 j..) into red[m][n] (row stride ldr). */
template <int NF>
__device__ __forceinline__ void mma_store_c(float *red, int ldr, const float (&acc)[NF][4], int m0, int n0, int lane) {
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int j = 0; j < NF; j++) {
        float *r0 = red + (m0 + g) * ldr + n0 + 8 * j + 2 * t, *r1 = r0 + 8 * ldr;
        r0[0] = acc[j][0], r0[1] = acc[j][1], r1[0] = acc[j][2], r1[1] = acc[j][3];
    }
}

#endif
