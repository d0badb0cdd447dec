/* mlp.h: a multilayer perceptron on the backend interface. The struct holds the shape and the pointers to
 * its activation buffers (one set per batch size it runs at); parameters are passed to each call, so one
 * spec serves a network, its target copy and its Adam state, which all share one layout:
 * for each layer, W[out, in] row-major, then b[out], each block starting at a multiple of RLT_PARAM_ALIGN
 * floats (zeros in the gaps).
 *
 * In fp32 the whole forward is one backend op (linear_chain_forward: one graph node where the backend fuses the
 * layers, L where it does not); each layer's backward is one op (linear_backward), so an L-layer network costs up
 * to L graph nodes each way. Forwards that should run side by side on different lanes
 * (a network and its target copy, say) need activation buffers of their own: n_sets > 1 plans extra
 * forward-only sets, and mlp_view hands out a copy of the struct that uses one of them.
 *
 * Reduced precision (dtype RLT_LP_BF16 or RLT_LP_F16, set between mlp_define and mlp_plan): the layers run
 * on a 16-bit compute copy of the weights (params_lp: the same layout as the fp32 masters, 2 bytes per
 * element), biases are read from the fp32 masters, and the activations and their gradients are stored in
 * the 16-bit type. The network's boundary stays fp32: its input is cast into the set's own input slot, its
 * output is written as fp32 into the caller's buffer (so losses and TD targets stay fp32), the output
 * gradient arrives as fp32 and is cast (times the loss scale, for fp16) into the gradient set, and dx is
 * returned as fp32. Weight and bias gradients are always fp32. */
#ifndef RLT_MLP_H
#define RLT_MLP_H

#include "backend.h"
#include "../engine/plan.h"
#include "rng.h"

#define RLT_MLP_MAX_LAYERS RLT_CHAIN_MAX_LAYERS /* the fp32 forward is one linear_chain_forward */
#define RLT_MLP_MAX_SETS 3

typedef struct rlt_mlp {
    int32_t n_layers;
    int32_t dims[RLT_MLP_MAX_LAYERS + 1]; /* dims[0] input, dims[n_layers] output */
    rlt_act act[RLT_MLP_MAX_LAYERS];      /* activation after each layer */
    int32_t batch;                        /* rows the activation buffers hold */
    rlt_lp dtype;                         /* RLT_LP_F32 (default), RLT_LP_BF16 or RLT_LP_F16 */
    /* The type of the input x and of dx (reduced precision only): RLT_LP_F32 (default: cast in, fp32 dx out),
     * or dtype when the caller hands over 16-bit activations (a 16-bit conv torso's output) and wants a
     * 16-bit dx back. Set between mlp_define and mlp_plan. */
    rlt_lp in_dtype;
    /* Every layer's output, [batch, dims[i+1]] one after another (reduced precision: preceded by the
     * input's 16-bit copy, [batch, dims[0]]), in dtype. */
    void *h;
    /* Gradients of the hidden layers' outputs (reduced precision: preceded by the output gradient's 16-bit
     * copy, [batch, dims[n_layers]]), in dtype. */
    void *dh;
    /* Where the last forward wrote its output (the caller's buffer or the last h slice). */
    float *y_last;
    int32_t ld_last;
    /* Activation sets mlp_plan reserves (1 unless the owner raises it between mlp_define and mlp_plan):
     * set 0 is h/dh above, sets 1.. are forward-only copies of h. */
    int32_t n_sets;
    void *h_set[RLT_MLP_MAX_SETS];
    /* Gradient buckets (engine/agent_core.h, dist.bucket_mb): when on_bucket is set, mlp_backward with grads hands
     * it the net's gradient in buckets as they become final: layers from the output down, a bucket closing at a
     * layer boundary once it holds bucket_floats and the layers below hold as many (a smaller rest joins the last
     * bucket), each with its alignment padding, so that the buckets cover the net's mlp_param_count floats.
     * NULL (the default): none. Set on a view, for the backward that ends an accumulation. */
    int (*on_bucket)(void *ctx, float *g, uint64_t n);
    void *bucket_ctx;
    uint64_t bucket_floats;
} rlt_mlp;

/* hidden: hidden widths; hidden layers use hidden_act, the output layer out_act. */
int mlp_define(rlt_mlp *net, rlt_err *e, int32_t in, const int32_t *hidden, int32_t n_hidden, int32_t out,
               rlt_act hidden_act, rlt_act out_act);
/* The parameter count, padding included: every W and b starts at a multiple of RLT_PARAM_ALIGN floats
 * (engine/plan.h), and so does the count, so networks placed one after another stay aligned too. */
uint64_t mlp_param_count(const rlt_mlp *net);
/* Offsets (in floats, from the start of the net's parameters) of layer i's W and b. */
uint64_t mlp_weight_offset(const rlt_mlp *net, int32_t layer);
uint64_t mlp_bias_offset(const rlt_mlp *net, int32_t layer);
/* Appends the float counts of the net's blocks (W_0, b_0, W_1, ...; no padding) to sizes[n..]; returns the new
 * n, or -1 when they would pass cap (or n is -1). The layout before the padding was these blocks back to back. */
int32_t mlp_param_blocks(const rlt_mlp *net, uint64_t *sizes, int32_t n, int32_t cap);
/* Adds "<name>.act" and "<name>.dact" activation entries for `batch` rows, and "<name>.act<k>" for each
 * extra forward-only set k = 1 .. n_sets - 1. */
int mlp_plan(rlt_mlp *net, rlt_plan *plan, rlt_err *e, const char *name, int32_t batch);
/* A copy of net that runs on activation set `set` (0 .. n_sets - 1); sets above 0 have no gradient buffers,
 * so backward through them fails. Forward and backward through the copy keep their state in the copy. */
rlt_mlp mlp_view(const rlt_mlp *net, int32_t set);
/* PyTorch's nn.Linear default: W and b uniform in +-1/sqrt(fan_in). Writes host memory. */
void mlp_init_params(const rlt_mlp *net, float *params, rlt_rng *rng);
/* out = net(x) for `rows` <= batch rows. out may be NULL in fp32 (then the last h slice holds it); reduced
 * precision needs it. params_lp: the 16-bit copy of params (NULL in fp32). */
int mlp_forward(rlt_backend *bk, rlt_mlp *net, const float *params, const void *params_lp, const void *x, int32_t ldx,
                int32_t rows, float *out, int32_t ldout);
/* Layers l0 .. l1 - 1 of an fp32 network's forward (mlp_forward runs 0 .. n_layers): layer l0 reads x when l0 is 0,
 * else layer l0 - 1's output of this activation set; the last layer writes out (when l1 is n_layers and out is not
 * NULL). Lets a caller issue the output layer apart (on another lane) from the layers a backward needs. */
int mlp_forward_layers(rlt_backend *bk, rlt_mlp *net, const float *params, const void *x, int32_t ldx, int32_t rows,
                       int32_t l0, int32_t l1, float *out, int32_t ldout);
/* Backward through the last forward: dout is d loss / d out (overwritten only when the output layer has an
 * activation: it becomes d loss / d pre-activation). grads (may be NULL: no parameter gradients) are
 * ACCUMULATED (beta 1), so zero them first; dx (may be NULL) receives d loss / d x. dout_scale (reduced
 * precision only; NULL: 1) is the device float dout is multiplied by on its way into the 16-bit type: fp16's
 * loss scale, so that grads and dx come out scaled by it. */
int mlp_backward(rlt_backend *bk, rlt_mlp *net, const float *params, const void *params_lp, float *grads,
                 const void *x, int32_t ldx, int32_t rows, float *dout, int32_t lddout, const float *dout_scale,
                 void *dx, int32_t lddx);
/* Layers l0 .. l1 - 1 of an fp32 network's backward (mlp_backward runs 0 .. n_layers after the output activation's
 * derivative): dy is d loss / d (layer l1 - 1's pre-activation output), read only; each layer's input gradient goes to
 * the gradient set, layer l0's to dx (NULL: none; where l0 > 0 and a later call goes on below, mlp_layer_grad(net,
 * l0 - 1)). Gradient buckets only over every layer. Lets a caller split a backward over lanes, or start it from a
 * hidden layer's gradient another op formed (td3_critic_loss with its output layers). */
int mlp_backward_layers(rlt_backend *bk, rlt_mlp *net, const float *params, float *grads, const void *x, int32_t ldx,
                        int32_t rows, int32_t l0, int32_t l1, const float *dy, int32_t lddy, void *dx, int32_t lddx);
/* Layer `layer`'s output in the net's activation set, and its gradient in the gradient set (NULL: not planned):
 * fp32 networks, [batch, dims[layer + 1]], row stride dims[layer + 1]. */
float *mlp_layer_out(const rlt_mlp *net, int32_t layer);
float *mlp_layer_grad(const rlt_mlp *net, int32_t layer);
/* Element offset of params_lp's layout equals the fp32 one: the 16-bit pointer matching p inside a block
 * whose fp32 base is base and 16-bit base is base_lp. */
static inline void *mlp_lp_ptr(const float *base, void *base_lp, const float *p) {
    return base_lp ? (void *)((char *)base_lp + (p - base) * 2) : NULL;
}

#endif
