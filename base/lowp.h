/* lowp.h: conversions between fp32 and the 16-bit types (bf16, fp16), rounding to nearest even as the CUDA
 * intrinsics __float2bfloat16_rn and __float2half_rn do, so the CPU twins of the reduced-precision ops
 * produce the same bits as the GPU. Pure integer arithmetic, usable from C and from CUDA device code (as
 * base/philox.h): the replay gather widens fp16/bf16 observations with these very functions on both
 * backends, so CPU and GPU batches agree bit for bit, NaN payloads included. The compute kernels (lowp.cu)
 * use the intrinsics. */
#ifndef RLT_LOWP_H
#define RLT_LOWP_H

#include <stdint.h>
#include <string.h>

/* The same definition as base/philox.h's (an identical redefinition is allowed). */
#ifdef __CUDACC__
#define RLT_HD __host__ __device__ __forceinline__
#else
#define RLT_HD static inline
#endif

RLT_HD uint16_t rlt_f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u); /* NaN stays a (quiet) NaN */
    u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest, ties to even; overflow carries into inf */
    return (uint16_t)(u >> 16);
}

RLT_HD float rlt_bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* IEEE binary16: 1 sign, 5 exponent (bias 15), 10 mantissa bits; subnormals below 2^-14, inf above 65504
 * (after rounding). */
RLT_HD uint16_t rlt_f32_to_f16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);      /* NaN */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);     /* rounds to >= 65520: inf */
    if (a < 0x38800000u) {                                       /* below 2^-14: subnormal or zero */
        if (a < 0x33000000u) return sign;                        /* below 2^-25: rounds to zero */
        uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u;   /* value = m * 2^(e - 150) */
        uint32_t shift = 126u - e;                               /* result = m >> (shift) in units of 2^-24 */
        uint32_t r = m >> shift, rem = m & ((1u << shift) - 1u), halfway = 1u << (shift - 1u);
        if (rem > halfway || (rem == halfway && (r & 1u))) r++;
        return (uint16_t)(sign | r);
    }
    uint32_t r = ((a >> 13) - (112u << 10));                    /* rebias the exponent (127 - 15 = 112) */
    uint32_t rem = a & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) r++;      /* may carry into the exponent: still right */
    return (uint16_t)(sign | r);
}

RLT_HD float rlt_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, u;
    if (e == 0x1fu) u = sign | 0x7f800000u | (m << 13);          /* inf, NaN */
    else if (e) u = sign | ((e + 112u) << 23) | (m << 13);       /* normal */
    else if (!m) u = sign;                                       /* zero */
    else {                                                       /* subnormal: normalise */
        e = 113u;
        while (!(m & 0x400u)) { m <<= 1; e--; }
        u = sign | (e << 23) | ((m & 0x3ffu) << 13);
    }
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Element i of a buffer of dtype RLT_LP_F32 / RLT_LP_BF16 / RLT_LP_F16 (kernels/backend.h), as float, and the
 * store that rounds to it. */
RLT_HD float rlt_lp_load(const void *p, int32_t dtype, int64_t i) {
    if (dtype == 4) return rlt_bf16_to_f32(((const uint16_t *)p)[i]);
    if (dtype == 3) return rlt_f16_to_f32(((const uint16_t *)p)[i]);
    return ((const float *)p)[i];
}

RLT_HD void rlt_lp_store(void *p, int32_t dtype, int64_t i, float v) {
    if (dtype == 4) ((uint16_t *)p)[i] = rlt_f32_to_bf16(v);
    else if (dtype == 3) ((uint16_t *)p)[i] = rlt_f32_to_f16(v);
    else ((float *)p)[i] = v;
}

/* v rounded to dtype and widened back. */
static inline float rlt_lp_round(float v, int32_t dtype) {
    if (dtype == 4) return rlt_bf16_to_f32(rlt_f32_to_bf16(v));
    if (dtype == 3) return rlt_f16_to_f32(rlt_f32_to_f16(v));
    return v;
}

#endif
