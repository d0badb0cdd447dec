/* lowp_elem.cuh: loads and stores of one element of an fp32, bf16 or fp16 buffer (dtype RLT_LP_*), for the
 * reduced-precision kernels (lowp.cu, adam.cu). Stores round to nearest even, like base/lowp.h on the
 * host, so the GPU and the CPU twins produce the same bits for the same float. */
#ifndef RLT_LOWP_ELEM_CUH
#define RLT_LOWP_ELEM_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda_ops.h"

__device__ __forceinline__ float lp_load(const void *p, int32_t dtype, int64_t i) {
    if (dtype == RLT_LP_BF16) return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
    if (dtype == RLT_LP_F16) return __half2float(((const __half *)p)[i]);
    return ((const float *)p)[i];
}

__device__ __forceinline__ void lp_store(void *p, int32_t dtype, int64_t i, float v) {
    if (dtype == RLT_LP_BF16) ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn(v);
    else if (dtype == RLT_LP_F16) ((__half *)p)[i] = __float2half_rn(v);
    else ((float *)p)[i] = v;
}

#endif
