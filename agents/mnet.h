/* mnet.h: a network over a dict observation (network.inputs): one torso per part, each image's a stack of
 * convolutions with ReLUs (its `torso`), each vector passed straight through; every torso's output is flattened
 * and the outputs are concatenated, in the order the inputs are listed, into the head's input, optionally
 * followed by `extra` columns the caller fills (TD3's critics: the action). The head is an rlt_mlp.
 *
 * Layout. Parameters: every conv layer (W[k,c,r,s], b[k]) of every part in input order, then the head; the
 * online and target networks and Adam's state share it, as for rlt_qnet. The network's input x is "planar":
 * part p's rows are one contiguous block [batch, elems_p] at x + batch * in_off_p, so a conv torso reads its
 * NCHW batch in place. mnet_convert builds it from the API's rows of bytes (uint8 parts scaled by 1/255).
 *
 * Buffers per network: each conv layer's output and its gradient, named per input
 * (<name>.in.<input>.conv<i>.act / .dact), one conv workspace, the head's input and its gradient
 * (<name>.cat / <name>.dcat) and the head's own. One activation set: the callers run a network's forwards one
 * after another on one lane, the forward a backward needs last.
 *
 * Precision: the torsos and the concatenation compute in fp32; the head may run in bf16 or fp16 (head.dtype set
 * before mnet_plan), taking the fp32 concatenation and returning an fp32 gradient of it. */
#ifndef RLT_MNET_H
#define RLT_MNET_H

#include "../engine/config.h"
#include "mlp.h"

#define RLT_MNET_MAX_CONV RLT_CFG_MAX_CONV
_Static_assert(2 * RLT_MNET_MAX_CONV <= RLT_BACKEND_MAX_CONVS, "training and acting torsos fit the backend's conv slots");

typedef struct rlt_mnet_part {
    char name[RLT_CFG_INPUT_NAME];
    int32_t u8;       /* uint8 in the row: scaled by 1/255 as it is converted */
    int64_t row_off;  /* byte offset in the dict row */
    int32_t elems;    /* elements of one row of the part */
    int32_t in_off;   /* elements of the parts before it in one row: its block is at x + batch * in_off */
    int32_t n_conv;   /* conv layers of its torso (0: a vector or an image passed through flat) */
    int32_t conv0;    /* its first layer's index in rlt_mnet.conv */
    int32_t features; /* its flattened torso output */
    int32_t col;      /* the first column it fills in the head's input */
} rlt_mnet_part;

typedef struct rlt_mnet {
    int32_t n_parts;
    rlt_mnet_part part[RLT_CFG_MAX_INPUTS];
    int32_t n_conv; /* over all parts */
    rlt_conv_shape conv[RLT_MNET_MAX_CONV];
    int32_t conv_oh[RLT_MNET_MAX_CONV], conv_ow[RLT_MNET_MAX_CONV];
    int32_t conv_slot0; /* backend conv slots conv_slot0 .. conv_slot0 + n_conv - 1 */
    void *conv_y[RLT_MNET_MAX_CONV], *conv_dy[RLT_MNET_MAX_CONV];
    void *conv_ws;
    uint64_t conv_ws_bytes;
    int32_t in_elems;  /* elements of one planar row (all parts) */
    int64_t row_bytes; /* bytes of one dict row */
    int32_t features;  /* the torsos' outputs together */
    int32_t extra;     /* columns after them */
    float *cat, *dcat; /* the head's input [batch, features + extra] and its gradient */
    rlt_mlp head;
    int32_t batch;
} rlt_mnet;

/* The network for network.inputs `in`, `extra` columns after the torsos' outputs, and a head of `hidden`
 * (ReLU) and `out` outputs (out_act). RLT_ECONFIG naming the input and the layer when a kernel does not fit. */
int mnet_define(rlt_mnet *m, rlt_err *e, const rlt_input_list *in, int32_t extra, const rlt_int_list *hidden,
                int32_t out, rlt_act out_act);
/* Padding included (every block on RLT_PARAM_ALIGN floats, as rlt_mlp's). */
uint64_t mnet_param_count(const rlt_mnet *m);
/* The blocks' float counts in layout order (each torso layer's W and b, then the head's), as mlp_param_blocks. */
/* Offsets (floats) of conv layer i's W and b (all torsos in order); mnet_conv_weight_offset(m, n_conv) is where
 * the head starts. */
uint64_t mnet_conv_weight_offset(const rlt_mnet *m, int32_t layer);
uint64_t mnet_conv_bias_offset(const rlt_mnet *m, int32_t layer);
int32_t mnet_param_blocks(const rlt_mnet *m, uint64_t *sizes, int32_t n, int32_t cap);
/* Plans the buffers for `batch` rows under `name` and prepares conv slots conv_slot0 ...; grads 0 plans no
 * gradient buffers (an acting copy, forward only). */
int mnet_plan(rlt_mnet *m, rlt_backend *bk, rlt_plan *plan, rlt_err *e, const char *name, int32_t batch,
              int32_t conv_slot0, int grads);
void mnet_init_params(const rlt_mnet *m, float *params, rlt_rng *rng);
/* x (planar, [batch, in_elems] floats) from `rows` dict rows of row_bytes bytes at `raw` (device); u8_scale
 * points to n_parts device floats, part p's uint8 values are multiplied by u8_scale[p] (mnet_fill_u8_scales). */
int mnet_convert(rlt_backend *bk, const rlt_mnet *m, const void *raw, int32_t rows, float *x, const float *u8_scale);
/* Writes 1 / high of each part (network.inputs[p].high, 255 when not given) into the n_parts device floats. */
int mnet_fill_u8_scales(rlt_backend *bk, const rlt_mnet *m, const rlt_input_list *inputs, float *u8_scale);
/* The extra columns of the head's input, row stride mnet_ld. */
static inline float *mnet_extra(const rlt_mnet *m) { return m->cat + m->features; }
static inline int32_t mnet_ld(const rlt_mnet *m) { return m->features + m->extra; }
/* out[rows, out] = head([torsos(x) | extra]); the extra columns must be filled first. params_lp: the 16-bit
 * copy of params when the head runs in reduced precision, else NULL. With a conv torso rows is the batch. */
int mnet_forward(rlt_backend *bk, rlt_mnet *m, const float *params, const void *params_lp, const float *x, int32_t rows,
                 float *out, int32_t ldout);
/* Backward through the last forward (x: its input): dout [rows, out] (ld lddout; overwritten when the head's output has an
 * activation). dcat receives d loss / d (head input), the extra columns' gradient included. With grads, the
 * head's and every torso's parameter gradients are accumulated into grads; NULL: only dcat. dout_scale as in
 * mlp_backward. */
int mnet_backward(rlt_backend *bk, rlt_mnet *m, const float *params, const void *params_lp, float *grads, const float *x,
                  int32_t rows, float *dout, int32_t lddout, const float *dout_scale);

#endif
