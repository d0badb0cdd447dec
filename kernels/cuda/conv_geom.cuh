/* conv_geom.cuh: a convolution's sizes as the fp32 GEMM-form kernels use them (conv_gemm.cu, conv_igemm.cu),
 * with the output size filled in. R = n * oh * ow output pixels (the GEMM's rows), K = c * kh * kw taps. */
#ifndef RLT_CONV_GEOM_CUH
#define RLT_CONV_GEOM_CUH

#include "cuda_ops.h"

typedef struct conv_geom {
    int32_t n, c, h, w, k, kh, kw, stride, pad, oh, ow;
} conv_geom;

static inline conv_geom conv_geom_of(const rlt_conv_shape *s) {
    conv_geom g = {s->n, s->c, s->h, s->w, s->k, s->kh, s->kw, s->stride, s->pad, 0, 0};
    g.oh = rlt_conv_out_dim(s->h, s->kh, s->stride, s->pad);
    g.ow = rlt_conv_out_dim(s->w, s->kw, s->stride, s->pad);
    return g;
}

static inline uint64_t conv_align256(uint64_t b) { return (b + 255) & ~255ull; }

/* conv_igemm.cu: the implicit-GEMM forward and weight gradient (the default for fp32 slots whose filters have at
 * most IGEMM_TAPS_MAX taps: conv_igemm_fits). */
int conv_igemm_fits(const conv_geom &g);
/* part: R * K floats of scratch (col's place) for the forward's split-K partial sums. */
int conv_igemm_forward(rlt_backend *bk, const conv_geom &g, float *y, const float *x, const float *w, const float *b,
                       int32_t act, float *part);
/* dw[k, K] += dyr^T col(x), with the split-K partial sums in part (conv_igemm_part_floats(g) floats). */
int conv_igemm_weight_grad(rlt_backend *bk, const conv_geom &g, float *dw, const float *dyr, const float *x, float *part);
uint64_t conv_igemm_part_floats(const conv_geom &g);
cudaError_t conv_igemm_preload(void);

#endif
