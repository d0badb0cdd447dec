/* qnet.h: the DQN network: an optional convolutional torso (network.conv: a preset such as "nature", or
 * explicit layers, each a convolution and a ReLU) over NCHW images, flattened into an MLP head that
 * outputs one value per action. Like rlt_mlp, the struct holds shapes and activation pointers for one batch
 * size; parameters are passed to each call, so the online and target networks and Adam's state share one
 * layout: conv layers (W[k,c,r,s], b[k]) then the head, each block on RLT_PARAM_ALIGN floats.
 * Reduced precision (head.dtype set before qnet_plan): the torso computes in the same 16-bit type (cuDNN's
 * tensor cores on the GPU), its activations are 16-bit, and the head takes them as they are.
 * Several inputs (network.inputs, dict observations) are agents/mnet.h's network. */
#ifndef RLT_QNET_H
#define RLT_QNET_H

#include "../engine/config.h"
#include "mlp.h"

#define RLT_QNET_MAX_CONV 8
#define RLT_QNET_MAX_SETS 3
_Static_assert(RLT_CFG_MAX_CONV <= RLT_QNET_MAX_CONV, "network.conv accepts no more layers than a qnet holds");
/* DQN plans two networks (training and acting), each on its own run of backend conv slots. */
_Static_assert(2 * RLT_QNET_MAX_CONV <= RLT_BACKEND_MAX_CONVS, "the backends hold both networks' conv slots");

typedef struct rlt_qnet {
    int32_t n_conv;
    rlt_conv_shape conv[RLT_QNET_MAX_CONV];
    int32_t conv_oh[RLT_QNET_MAX_CONV], conv_ow[RLT_QNET_MAX_CONV];
    int32_t conv_slot0;        /* backend conv slots conv_slot0 .. conv_slot0 + n_conv - 1 */
    void *conv_y[RLT_QNET_MAX_CONV];   /* each conv layer's output, [batch, k, oh, ow], in the torso's type */
    void *conv_dy[RLT_QNET_MAX_CONV];  /* gradient of each conv layer's output */
    void *conv_in;                     /* reduced precision: the input's 16-bit copy, [batch, in_elems] */
    void *conv_ws;             /* backend workspace shared by the conv layers */
    uint64_t conv_ws_bytes;
    rlt_mlp head;
    int32_t in_elems;          /* elements of one observation */
    int32_t batch;
    /* Activation sets (as rlt_mlp's; 1 unless the owner raises it between qnet_define and qnet_plan): set 0 is
     * conv_y/conv_dy/conv_in/conv_ws above, sets 1.. are forward-only copies, each with a conv workspace of its
     * own where the backend runs lanes at once (qnet_view hands out a copy that uses one). */
    int32_t n_sets;
    void *set_y[RLT_QNET_MAX_SETS][RLT_QNET_MAX_CONV];
    void *set_in[RLT_QNET_MAX_SETS];
    void *set_ws[RLT_QNET_MAX_SETS];
    int32_t ws_shared;         /* the sets use conv_ws (a backend that runs one op at a time) */
} rlt_qnet;

/* obs: the observation shape (ndim 1: [features]; ndim 3: [c, h, w]); conv: the torso's layers (network.conv,
 * a preset already expanded to its layers; n 0: none), each followed by a ReLU. Fails with RLT_ECONFIG naming
 * the layer and the sizes when a layer's kernel does not fit what the layers before it leave. */
int qnet_define(rlt_qnet *q, rlt_err *e, const rlt_space *obs, const rlt_conv_list *conv, const rlt_int_list *hidden,
                int32_t n_actions);
/* Padding included (every block on RLT_PARAM_ALIGN floats, as rlt_mlp's). */
uint64_t qnet_param_count(const rlt_qnet *q);
/* The blocks' float counts in layout order (each conv layer's W and b, then the head's), as mlp_param_blocks. */
/* Offsets (floats) of conv layer i's W and b; qnet_conv_weight_offset(q, n_conv) is where the head starts. */
uint64_t qnet_conv_weight_offset(const rlt_qnet *q, int32_t layer);
uint64_t qnet_conv_bias_offset(const rlt_qnet *q, int32_t layer);
int32_t qnet_param_blocks(const rlt_qnet *q, uint64_t *sizes, int32_t n, int32_t cap);
/* Plans activations for `batch` rows and prepares the backend's conv slots (conv_slot0 ...). */
int qnet_plan(rlt_qnet *q, rlt_backend *bk, rlt_plan *plan, rlt_err *e, const char *name, int32_t batch, int32_t conv_slot0);
/* A copy of q that runs on activation set `set` (0 .. n_sets - 1); sets above 0 are forward-only. */
rlt_qnet qnet_view(const rlt_qnet *q, int32_t set);
void qnet_init_params(const rlt_qnet *q, float *params, rlt_rng *rng);
/* out[rows, n_actions] = Q(x); x is [rows, in_elems] floats. params_lp: the 16-bit copy of params when the
 * network runs in reduced precision (head.dtype), else NULL. */
int qnet_forward(rlt_backend *bk, rlt_qnet *q, const float *params, const void *params_lp, const float *x, int32_t rows,
                 float *out);
/* Backward through the last forward: dout [rows, n_actions] (overwritten); grads accumulated; dout_scale as
 * in mlp_backward (the gradients, the torso's included, come out multiplied by it). */
int qnet_backward(rlt_backend *bk, rlt_qnet *q, const float *params, const void *params_lp, float *grads, const float *x,
                  int32_t rows, float *dout, const float *dout_scale);

#endif
