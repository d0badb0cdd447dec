/* mlp.h: a multilayer perceptron on the backend interface. The struct holds the shape and the pointers to
 * its activation buffers (one set per batch size it runs at); parameters are passed to each call, so one
 * spec serves a network, its target copy and its Adam state, which all share one layout:
 * for each layer, W[out, in] row-major, then b[out].
 *
 * Each layer's forward is one backend op (linear_forward) and so is its backward (linear_backward), so an
 * L-layer network costs L graph nodes each way. Forwards that should run side by side on different lanes
 * (a network and its target copy, say) need activation buffers of their own: n_sets > 1 plans extra
 * forward-only sets, and mlp_view hands out a copy of the struct that uses one of them. */
#ifndef RLT_MLP_H
#define RLT_MLP_H

#include "../engine/backend.h"
#include "../engine/plan.h"
#include "../engine/rng.h"

#define RLT_MLP_MAX_LAYERS 9
#define RLT_MLP_MAX_SETS 3

typedef struct rlt_mlp {
    int32_t n_layers;
    int32_t dims[RLT_MLP_MAX_LAYERS + 1]; /* dims[0] input, dims[n_layers] output */
    int32_t act[RLT_MLP_MAX_LAYERS];      /* activation after each layer */
    int32_t batch;                        /* rows the activation buffers hold */
    float *h;                             /* every layer's output, [batch, dims[i+1]] one after another */
    float *dh;                            /* gradients of the hidden layers' outputs */
    /* Where the last forward wrote its output (the caller's buffer or the last h slice). */
    float *y_last;
    int32_t ld_last;
    /* Activation sets mlp_plan reserves (1 unless the owner raises it between mlp_define and mlp_plan):
     * set 0 is h/dh above, sets 1.. are forward-only copies of h. */
    int32_t n_sets;
    float *h_set[RLT_MLP_MAX_SETS];
} rlt_mlp;

/* hidden: hidden widths; hidden layers use hidden_act, the output layer out_act. */
int mlp_define(rlt_mlp *net, rlt_err *e, int32_t in, const int32_t *hidden, int32_t n_hidden, int32_t out,
               int32_t hidden_act, int32_t out_act);
uint64_t mlp_param_count(const rlt_mlp *net);
/* Offsets (in floats, from the start of the net's parameters) of layer i's W and b. */
uint64_t mlp_weight_offset(const rlt_mlp *net, int32_t layer);
uint64_t mlp_bias_offset(const rlt_mlp *net, int32_t layer);
/* Adds "<name>.act" and "<name>.dact" activation entries for `batch` rows, and "<name>.act<k>" for each
 * extra forward-only set k = 1 .. n_sets - 1. */
int mlp_plan(rlt_mlp *net, rlt_plan *plan, rlt_err *e, const char *name, int32_t batch);
/* A copy of net that runs on activation set `set` (0 .. n_sets - 1); sets above 0 have no gradient buffers,
 * so backward through them fails. Forward and backward through the copy keep their state in the copy. */
rlt_mlp mlp_view(const rlt_mlp *net, int32_t set);
/* PyTorch's nn.Linear default: W and b uniform in +-1/sqrt(fan_in). Writes host memory. */
void mlp_init_params(const rlt_mlp *net, float *params, rlt_rng *rng);
/* out = net(x) for `rows` <= batch rows. out may be NULL (then the last h slice holds it). */
int mlp_forward(rlt_backend *bk, rlt_mlp *net, const float *params, const float *x, int32_t ldx, int32_t rows,
                float *out, int32_t ldout);
/* Backward through the last forward: dout is d loss / d out (overwritten only when the output layer has an
 * activation: it becomes d loss / d pre-activation). grads (may be NULL: no parameter gradients) are
 * ACCUMULATED (beta 1), so zero them first; dx (may be NULL) receives d loss / d x. */
int mlp_backward(rlt_backend *bk, rlt_mlp *net, const float *params, float *grads, const float *x, int32_t ldx,
                 int32_t rows, float *dout, int32_t lddout, float *dx, int32_t lddx);

#endif
