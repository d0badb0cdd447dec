/* td3.c: TD3's memory plan, initial state, update and policy on the backend interface (see td3.h). */
#include "td3.h"

#include <math.h>
#include <string.h>

#include "algo.h"
#include "../engine/config_inputs.h"

#define F32 4u

enum { TD3_GRAPH_CRITIC = 0, TD3_GRAPH_CRITIC_ACTOR = 1 };

rlt_td3 *td3_state(const rlt_agent *ag) { return agent_algo_state(ag); }

static int td3_check_spaces(rlt_agent *ag, const rlt_space *obs, const rlt_space *act) {
    rlt_err *e = &ag->err;
    /* A dict space was checked against network.inputs by the agent. */
    td3_state(ag)->dict = obs->kind == RLT_SPACE_DICT;
    if (!td3_state(ag)->dict && (obs->kind != RLT_SPACE_BOX || obs->dtype != RLT_DTYPE_F32 || obs->ndim != 1))
        RLT_FAIL(e, RLT_EINVAL, "td3 needs a 1-D float32 Box observation space, or a dict one (network.inputs)");
    if (act->kind != RLT_SPACE_BOX || act->ndim != 1 || act->shape[0] < 1 || act->shape[0] > 16)
        RLT_FAIL(e, RLT_EINVAL, "td3 needs a 1-D Box action space of 1..16 dimensions (continuous actions)%s",
                 act->kind == RLT_SPACE_DISCRETE ? "; this action space is Discrete: use algo: dqn (--set algo=dqn)"
                                                 : "");
    ag->act_dim = act->shape[0];
    for (int32_t i = 0; i < ag->act_dim; i++) {
        ag->act_low[i] = act->low ? act->low[i] : -1.0f;
        ag->act_high[i] = act->high ? act->high[i] : 1.0f;
        if (!(ag->act_high[i] > ag->act_low[i]) || !isfinite(ag->act_low[i]) || !isfinite(ag->act_high[i]))
            RLT_FAIL(e, RLT_EINVAL, "action dimension %d has bounds [%g, %g]: need finite low < high", i,
                     ag->act_low[i], ag->act_high[i]);
    }
    ag->act_space.low = ag->act_low;
    ag->act_space.high = ag->act_high;
    return RLT_OK;
}

/* Parameters and optimiser state of the three networks (n_total floats), role by role with one layout;
 * both network kinds (MLP and dict) plan them here first. */
int td3_plan_params(rlt_agent *ag) {
    rlt_td3 *t = td3_state(ag);
    rlt_err *e = &ag->err;
    rlt_plan *p = &ag->plan;
    uint64_t nb = t->n_total * F32;
    RLT_TRY(plan_add(p, e, "params", "params", RLT_LOC_DEVICE, nb, (void **)&t->params));
    RLT_TRY(plan_add(p, e, "grads", "grads", RLT_LOC_DEVICE, nb, (void **)&t->grads));
    RLT_TRY(plan_add(p, e, "adam_m", "adam_m", RLT_LOC_DEVICE, nb, (void **)&t->adam_m));
    RLT_TRY(plan_add(p, e, "adam_v", "adam_v", RLT_LOC_DEVICE, nb, (void **)&t->adam_v));
    RLT_TRY(plan_add(p, e, "target", "target", RLT_LOC_DEVICE, nb, (void **)&t->target));
    /* 16-bit compute copies (zero-size entries, so NULL, in fp32); not saved: they follow from the masters. */
    uint64_t nlp = ag->lp != RLT_LP_F32 ? t->n_total * 2 : 0;
    RLT_TRY(plan_add(p, e, "params_lp", "compute", RLT_LOC_DEVICE, nlp, &t->params_lp));
    return plan_add(p, e, "target_lp", "compute", RLT_LOC_DEVICE, nlp, &t->target_lp);
}

/* The actor's Adam step with its targets' Polyak update (every policy_delay-th update), after its gradient. */
int td3_actor_adam(rlt_agent *ag, float *actor_p, float *actor_g, float *actor_tp, void *actor_pl, void *actor_tl) {
    rlt_td3 *t = td3_state(ag);
    const rlt_config *c = &ag->cfg;
    rlt_adam_hp actor_hp = {(float)c->td3.actor_lr, 0.9f, 0.999f, 1e-8f};
    RLT_TRY(agent_grads_ready(ag, actor_g, t->n_actor));
    rlt_adam_step actor_st = {.p = actor_p, .g = actor_g, .m = t->adam_m, .v = t->adam_v, .n = t->n_actor,
                              .hp = actor_hp, .step = &ag->counters[RLT_CTR_ACTOR_STEP], .target = actor_tp,
                              .tau = (float)c->td3.tau, .p_lp = actor_pl, .target_lp = actor_tl, .lp_dtype = ag->lp,
                              .skip = agent_amp_skip(ag), .lr_dev = &ag->hparams[RLT_HP_TD3_ACTOR_LR],
                              .tau_dev = &ag->hparams[RLT_HP_TD3_TAU]};
    RLT_TRY(ag->bk.ops->adam(&ag->bk, &actor_st));
    return agent_amp_update(ag, &ag->counters[RLT_CTR_ACTOR_STEP]);
}

int td3_plan(rlt_agent *ag) {
    rlt_td3 *t = td3_state(ag);
    rlt_err *e = &ag->err;
    rlt_plan *p = &ag->plan;
    const rlt_config *c = &ag->cfg;
    t->O = ag->obs_dim;
    t->A = ag->act_dim;
    t->B = c->train.batch_size;
    /* Gradient accumulation: activations and batch buffers hold one micro-batch; only the sampled
     * indices span the whole batch. */
    t->N = c->train.grad_accum_steps;
    t->Bm = t->B / t->N;
    t->act_batch = 64;
    ag->act_rows = t->act_batch;
    if (t->dict) return td3_dict_plan(ag);
    int32_t O = t->O, A = t->A, B = t->Bm;

    RLT_TRY(mlp_define(&t->actor, e, O, c->td3.actor_hidden.v, c->td3.actor_hidden.n, A, RLT_ACT_RELU, RLT_ACT_TANH));
    t->actor_act = t->actor;
    RLT_TRY(mlp_define(&t->q1, e, O + A, c->td3.critic_hidden.v, c->td3.critic_hidden.n, 1, RLT_ACT_RELU, RLT_ACT_NONE));
    /* A second, forward-only activation set per network: the target copy's forward runs beside the online
     * network's on another lane (td3_update_ops). */
    t->actor.n_sets = 2;
    t->q1.n_sets = 2;
    /* Reduced precision for the training networks; acting stays on the fp32 masters. */
    t->actor.dtype = ag->lp;
    t->q1.dtype = ag->lp;
    t->q2 = t->q1;
    t->n_actor = mlp_param_count(&t->actor);
    t->n_q1 = mlp_param_count(&t->q1);
    t->n_q2 = mlp_param_count(&t->q2);
    t->n_total = t->n_actor + t->n_q1 + t->n_q2;
    uint64_t nb = t->n_total * F32;

    RLT_TRY(td3_plan_params(ag));

    /* Activations: the training batch for the actor and both critics, and a small batch for acting. */
    RLT_TRY(mlp_plan(&t->actor, p, e, "actor", B));
    RLT_TRY(mlp_plan(&t->q1, p, e, "q1", B));
    RLT_TRY(mlp_plan(&t->q2, p, e, "q2", B));
    RLT_TRY(mlp_plan(&t->actor_act, p, e, "actor.acting", t->act_batch));

    /* Batch buffers. */
    uint64_t row = (uint64_t)(O + A) * F32;
    RLT_TRY(plan_add(p, e, "batch.idx", "batch", RLT_LOC_DEVICE, (uint64_t)t->B * 4, (void **)&t->idx));
    RLT_TRY(plan_add(p, e, "batch.s_a", "batch", RLT_LOC_DEVICE, B * row, (void **)&t->s_a));
    RLT_TRY(plan_add(p, e, "batch.s2_a2", "batch", RLT_LOC_DEVICE, B * row, (void **)&t->s2_a2));
    RLT_TRY(plan_add(p, e, "batch.d_sa", "batch", RLT_LOC_DEVICE, B * row, (void **)&t->d_sa));
    RLT_TRY(plan_add(p, e, "batch.s_pi", "batch", RLT_LOC_DEVICE, B * row, (void **)&t->s_pi));
    RLT_TRY(plan_add(p, e, "batch.dq_actor", "batch", RLT_LOC_DEVICE, (uint64_t)B * F32, (void **)&t->dq_actor));
    float **vec[] = {&t->r, &t->term, &t->y, &t->q1o, &t->q2o, &t->qt1, &t->qt2, &t->dq1, &t->dq2};
    const char *vec_names[] = {"batch.r", "batch.term", "batch.y", "batch.q1", "batch.q2", "batch.q1_target",
                               "batch.q2_target", "batch.dq1", "batch.dq2"};
    for (size_t i = 0; i < sizeof vec / sizeof vec[0]; i++)
        RLT_TRY(plan_add(p, e, vec_names[i], "batch", RLT_LOC_DEVICE, (uint64_t)B * F32, (void **)vec[i]));
    RLT_TRY(plan_add(p, e, "acting.obs", "batch", RLT_LOC_DEVICE, (uint64_t)t->act_batch * O * F32, (void **)&t->act_in));
    RLT_TRY(plan_add(p, e, "acting.action", "batch", RLT_LOC_DEVICE, (uint64_t)t->act_batch * A * F32,
                     (void **)&t->act_out));

    /* Replay fields: observations, normalised actions, rewards, termination flags, next observations. The
     * observations are stored as replay.obs_dtype says (fp32, or fp16 / bf16 in half the bytes, widened back
     * to fp32 by the gather); the rest stay fp32. */
    RLT_TRY(replay_add_obs_field(&ag->replay, e, "obs", ag->replay_obs_dtype, (uint64_t)O));
    RLT_TRY(replay_add_field(&ag->replay, e, "action", RLT_DTYPE_F32, (uint64_t)A));
    RLT_TRY(replay_add_field(&ag->replay, e, "reward", RLT_DTYPE_F32, 1));
    RLT_TRY(replay_add_field(&ag->replay, e, "terminated", RLT_DTYPE_F32, 1));
    RLT_TRY(replay_add_obs_field(&ag->replay, e, "next_obs", ag->replay_obs_dtype, (uint64_t)O));
    /* Host staging: acting rows in and out, and whole blocks for weight init and checkpoints. */
    ag->io_stage_bytes = nb;
    uint64_t act_io = (uint64_t)t->act_batch * (O + A) * F32 + 16; /* + the outputs' alignment */
    if (act_io > ag->io_stage_bytes) ag->io_stage_bytes = act_io;
    return RLT_OK;
}

int td3_init_state(rlt_agent *ag) {
    rlt_td3 *t = td3_state(ag);
    rlt_backend *bk = &ag->bk;
    rlt_rng rng;
    rlt_rng_init(&rng, ag->cfg.seed, RLT_STREAM_INIT);
    float *h = ag->io_stage;
    if (t->dict) {
        RLT_TRY(td3_dict_init_params(ag, &rng));
    } else {
        mlp_init_params(&t->actor, h, &rng);
        mlp_init_params(&t->q1, h + t->n_actor, &rng);
        mlp_init_params(&t->q2, h + t->n_actor + t->n_q1, &rng);
    }
    RLT_TRY(agent_put(ag, t->params, h, t->n_total * F32));
    /* Targets start equal to the networks; Adam's moments and the gradients start at zero. */
    RLT_TRY(bk->ops->flat(bk, RLT_FLAT_COPY, t->target, t->params, t->n_total, 0.0f));
    RLT_TRY(bk->ops->flat(bk, RLT_FLAT_FILL, t->grads, NULL, t->n_total, 0.0f));
    RLT_TRY(bk->ops->flat(bk, RLT_FLAT_FILL, t->adam_m, NULL, t->n_total, 0.0f));
    RLT_TRY(bk->ops->flat(bk, RLT_FLAT_FILL, t->adam_v, NULL, t->n_total, 0.0f));
    RLT_TRY(agent_refresh_lp(ag, t->params, t->params_lp, t->target, t->target_lp, t->n_total));
    return bk->ops->sync(bk);
}

/* Gathers micro-batch m's transitions in one op: with `critic`, s_a = [obs | action], s2_a2 = [next_obs | .],
 * r and term; with `actor_obs`, the observations into s_pi too. With one micro-batch the replay indices are
 * drawn by the same op (sample spec); with several they were drawn for the whole batch beforehand. */
static int td3_gather(rlt_agent *ag, int32_t m, int critic, int actor_obs) {
    rlt_td3 *t = td3_state(ag);
    rlt_backend *bk = &ag->bk;
    rlt_replay *rp = &ag->replay;
    const rlt_config *c = &ag->cfg;
    int32_t O = t->O, Bm = t->Bm;
    uint64_t row = (uint64_t)(O + t->A) * F32;
    rlt_gather_field f[6];
    int32_t nf = 0;
    /* Observation fields may be fp16 / bf16 in the ring: the gather widens them into the fp32 batch. */
    int32_t od = replay_gather_dtype(&rp->f[0]);
    if (critic) {
        f[nf++] = (rlt_gather_field){t->s_a, row, rp->f[0].data, rp->f[0].row_bytes, NULL, od};
        f[nf++] = (rlt_gather_field){t->s_a + O, row, rp->f[1].data, rp->f[1].row_bytes, NULL, RLT_LP_F32};
        f[nf++] = (rlt_gather_field){t->r, F32, rp->f[2].data, rp->f[2].row_bytes, NULL, RLT_LP_F32};
        f[nf++] = (rlt_gather_field){t->term, F32, rp->f[3].data, rp->f[3].row_bytes, NULL, RLT_LP_F32};
        f[nf++] = (rlt_gather_field){t->s2_a2, row, rp->f[4].data, rp->f[4].row_bytes, NULL, od};
    }
    if (actor_obs) f[nf++] = (rlt_gather_field){t->s_pi, row, rp->f[0].data, rp->f[0].row_bytes, NULL, od};
    rlt_sample_spec smp = {&ag->counters[RLT_CTR_REPLAY_SIZE], NULL, c->seed, rlt_rank_stream(RLT_STREAM_SAMPLE, c->rank), 0, t->B,
                           &ag->counters[RLT_CTR_UPDATE]};
    return bk->ops->gather_fields(bk, t->idx + (int64_t)m * Bm, Bm, t->N == 1 ? &smp : NULL, nf, f);
}

/* Hands net's gradient to the comm lane in buckets during its backward (agents/mlp.h on_bucket) when its
 * optimiser block of n floats is averaged so (agent_bucket_floats); returns whether it is. */
static int td3_buckets(rlt_agent *ag, rlt_mlp *net, uint64_t n) {
    uint64_t k = agent_bucket_floats(ag, n);
    if (k == 0) return 0;
    net->on_bucket = agent_grads_bucket;
    net->bucket_ctx = ag;
    net->bucket_floats = k;
    return 1;
}

/* The second half of a critic step split in two (td3_update_ops, gradient buckets): Q2's, with the first half's
 * descriptor moved onto Q2's parameters, moments and targets, once Q2's average is in. */
static int td3_q2_half(rlt_agent *ag, rlt_adam_step *st) {
    rlt_td3 *t = td3_state(ag);
    float *q2_p = t->params + t->n_actor + t->n_q1, *q2_tp = t->target + t->n_actor + t->n_q1;
    RLT_TRY(agent_grads_ready(ag, t->grads + t->n_actor + t->n_q1, t->n_q2));
    st->p = q2_p;
    st->g = t->grads + t->n_actor + t->n_q1;
    st->m = t->adam_m + t->n_actor + t->n_q1;
    st->v = t->adam_v + t->n_actor + t->n_q1;
    st->n = t->n_q2;
    if (st->target) st->target = q2_tp;
    st->p_lp = mlp_lp_ptr(t->params, t->params_lp, q2_p);
    st->target_lp = mlp_lp_ptr(t->target, t->target_lp, q2_tp);
    return ag->bk.ops->adam(&ag->bk, st);
}

/* A critic's forward: every layer into out, or (lq < n_layers, fp32) its hidden layers only, for td3_critic_loss
 * with the output layers folded in. */
static int td3_critic_forward(rlt_backend *bk, rlt_mlp *net, const float *p, const void *pl, const float *x,
                              int32_t ld, int32_t rows, int32_t lq, float *out) {
    if (lq < net->n_layers) return mlp_forward_layers(bk, net, p, x, ld, rows, 0, lq, NULL, 0);
    return mlp_forward(bk, net, p, pl, x, ld, rows, out, 1);
}

/* A critic's backward from its loss: every layer from dq, or (heads, td3_critic_forward's lq < n_layers) its hidden
 * layers from the gradient td3_critic_loss formed in the last one (the output layer's weight gradient is issued
 * apart). */
static int td3_critic_backward(rlt_backend *bk, rlt_mlp *net, const float *p, const void *pl, float *g, const float *x,
                               int32_t ld, int32_t rows, int heads, float *dq, const float *S) {
    const int32_t L = net->n_layers;
    if (heads)
        return mlp_backward_layers(bk, net, p, g, x, ld, rows, 0, L - 1, mlp_layer_grad(net, L - 2), net->dims[L - 1],
                                   NULL, 0);
    return mlp_backward(bk, net, p, pl, g, x, ld, rows, dq, 1, S, NULL, 0);
}

/* The schedule, with the lanes each chain runs on (0 is the main lane; see the lane op in kernels/backend.h).
 * The critical path runs on lanes 0 and 1, work that can wait on lanes 2 and 3 (lower priority on CUDA):
 *   lane 3  zero the gradients, count the optimiser steps, the actor's constant loss gradient (none of it
 *           on the way of anything until the backward passes)
 *   lane 0  gather (and, with one micro-batch, sample) -> pi'(s') -> smoothing noise
 *   lane 3  Q1(s, a)                    lane 2  Q2(s, a) [and pi(s) for the actor step]
 *   lane 1  Q1'(s', a')                 lane 0  Q2'(s', a')
 *   join -> both critic losses in one op -> lane 1: Q1 backward, lane 0: Q2 backward -> join -> Adam (+ Polyak)
 *   (fp32 critics without buckets: the critics' forwards stop at their last hidden layers, and one op,
 *   td3_critic_loss with hidden > 0, forms the four output layers, the loss's gradients and the gradients into
 *   those hidden layers; lanes 1 and 0 go back from there, and lane 2, issued after Q1's backward, gives the
 *   logged losses and the output layers' weight gradients)
 *   (with gradient buckets, td3_buckets: Q1 backward then Q2 backward on lane 0, Q1's buckets averaged on the
 *   backend's comm lane as they become final; without fp16, join -> Q2's average on the comm lane beside Q1's
 *   Adam [and the actor's passes] -> Q2's Adam; with fp16 Q2's buckets too, joined before one Adam)
 *   actor step on lane 0: Q1(s, pi(s)) -> backward to d/da -> actor backward -> Adam (+ Polyak); the actor's
 *   loss for the log on lane 3 (in fp32 with Q1's output layer: the backward starts from the constant d/dQ1 and
 *   needs only Q1's hidden layers); without buckets or fp16 the critic step's Q2 half on lane 2 beside it (the
 *   actor's passes read Q1 only).
 * What one lane writes between a branch and the next join, no other lane touches: each network has its own
 * activation sets (the target forwards use set 1), and s_pi keeps pi(s) away from the s_a the critics read.
 * On the CPU the lanes are ignored and the ops run in this order, each value the same as in the plain
 * sequence (sample, gather, targets, critics, critic Adam, actor, actor Adam, Polyak). */
int td3_update_ops(rlt_agent *ag, int actor_step) {
    rlt_td3 *t = td3_state(ag);
    rlt_backend *bk = &ag->bk;
    const rlt_backend_ops *op = bk->ops;
    const rlt_config *c = &ag->cfg;
    int32_t O = t->O, A = t->A, Bm = t->Bm, N = t->N, ld = O + A;
    int64_t *ctr = ag->counters;
    float *actor_p = t->params, *q1_p = t->params + t->n_actor, *q2_p = q1_p + t->n_q1;
    float *actor_tp = t->target, *q1_tp = t->target + t->n_actor, *q2_tp = q1_tp + t->n_q1;
    float *actor_g = t->grads, *q1_g = t->grads + t->n_actor, *q2_g = q1_g + t->n_q1;
    /* The 16-bit copies (NULL in fp32) and the loss scale (fp16 only: NULL otherwise). */
    void *actor_pl = mlp_lp_ptr(t->params, t->params_lp, actor_p), *q1_pl = mlp_lp_ptr(t->params, t->params_lp, q1_p);
    void *q2_pl = mlp_lp_ptr(t->params, t->params_lp, q2_p), *actor_tl = mlp_lp_ptr(t->target, t->target_lp, actor_tp);
    void *q1_tl = mlp_lp_ptr(t->target, t->target_lp, q1_tp), *q2_tl = mlp_lp_ptr(t->target, t->target_lp, q2_tp);
    const float *S = agent_loss_scale(ag);
    /* Each micro-batch's loss is scaled by 1/N, so the accumulated gradient is the full batch's mean. */
    float scale = 1.0f / (float)N;
    /* Online networks on activation set 0 (their backward passes need it), target copies on set 1. */
    rlt_mlp q1_on = mlp_view(&t->q1, 0), q2_on = mlp_view(&t->q2, 0), pi_on = mlp_view(&t->actor, 0);
    rlt_mlp q1_tg = mlp_view(&t->q1, 1), q2_tg = mlp_view(&t->q2, 1), pi_tg = mlp_view(&t->actor, 1);
    /* With one micro-batch, pi(s) is computed early, beside the critics, from observations gathered into s_pi. */
    int early_pi = actor_step && N == 1;
    int split = 0; /* the critic block's Adam step in two halves (gradient buckets, below) */
    /* fp32 critics with a hidden layer and no gradient buckets: the output layers are folded into the loss
     * (td3_critic_loss with hidden > 0), so the forwards stop at the last hidden layer and the backward passes
     * start there. */
    const int32_t Lq = t->q1.n_layers, Hq = t->q1.dims[Lq - 1];
    const int heads = !q1_pl && Lq > 1 && t->q1.act[Lq - 2] == RLT_ACT_RELU &&
                      agent_bucket_floats(ag, t->n_q1 + t->n_q2) == 0;
    const int32_t lq = heads ? Lq - 1 : Lq; /* the layers a critic's forward runs */

    RLT_TRY(op->lane(bk, 3));
    RLT_TRY(op->flat(bk, RLT_FLAT_FILL, q1_g, NULL, t->n_q1 + t->n_q2, 0.0f));
    RLT_TRY(op->counter_add(bk, &ctr[RLT_CTR_CRITIC_STEP], 1));
    if (actor_step) {
        RLT_TRY(op->flat(bk, RLT_FLAT_FILL, actor_g, NULL, t->n_actor, 0.0f));
        RLT_TRY(op->counter_add(bk, &ctr[RLT_CTR_ACTOR_STEP], 1));
        /* d(-mean_i Q1_i)/dQ1_i, scaled for accumulation: the same for every row and every update. */
        RLT_TRY(op->flat(bk, RLT_FLAT_FILL, t->dq_actor, NULL, (uint64_t)Bm, -scale / (float)Bm));
    }
    RLT_TRY(op->lane(bk, 0));
    /* One draw of the whole batch's indices; micro-batch m uses rows m*Bm .. (m+1)*Bm - 1 (with one
     * micro-batch the gather draws them itself). */
    rlt_sample_spec all = {.size = &ctr[RLT_CTR_REPLAY_SIZE], .seed = c->seed, .stream = rlt_rank_stream(RLT_STREAM_SAMPLE, c->rank),
                           .batch = t->B, .counter = &ctr[RLT_CTR_UPDATE]};
    if (N > 1) RLT_TRY(op->gather_fields(bk, t->idx, t->B, &all, 0, NULL));
    for (int32_t m = 0; m < N; m++) {
        RLT_TRY(td3_gather(ag, m, 1, early_pi));
        RLT_TRY(op->lane(bk, 3));
        RLT_TRY(td3_critic_forward(bk, &q1_on, q1_p, q1_pl, t->s_a, ld, Bm, lq, t->q1o));
        RLT_TRY(op->lane(bk, 2));
        RLT_TRY(td3_critic_forward(bk, &q2_on, q2_p, q2_pl, t->s_a, ld, Bm, lq, t->q2o));
        if (early_pi) RLT_TRY(mlp_forward(bk, &pi_on, actor_p, actor_pl, t->s_pi, ld, Bm, t->s_pi + O, ld));
        /* Target: y = r + gamma (1 - term) min(Q1'(s', a'), Q2'(s', a')), a' = clip(pi'(s') + clip(noise)). */
        RLT_TRY(op->lane(bk, 0));
        RLT_TRY(mlp_forward(bk, &pi_tg, actor_tp, actor_tl, t->s2_a2, ld, Bm, t->s2_a2 + O, ld));
        rlt_target_noise tn = {.a = t->s2_a2 + O, .lda = ld, .rows = Bm, .cols = A, .std = (float)c->td3.policy_noise,
                               .clip = (float)c->td3.noise_clip, .seed = c->seed, .stream = rlt_rank_stream(RLT_STREAM_TARGET, c->rank),
                               .counter = &ctr[RLT_CTR_UPDATE], .row0 = m * Bm,
                               .std_dev = &ag->hparams[RLT_HP_TD3_POLICY_NOISE],
                               .clip_dev = &ag->hparams[RLT_HP_TD3_NOISE_CLIP]};
        RLT_TRY(op->td3_target_action(bk, &tn));
        RLT_TRY(op->lane(bk, 1));
        RLT_TRY(td3_critic_forward(bk, &q1_tg, q1_tp, q1_tl, t->s2_a2, ld, Bm, lq, t->qt1));
        RLT_TRY(op->lane(bk, 0));
        RLT_TRY(td3_critic_forward(bk, &q2_tg, q2_tp, q2_tl, t->s2_a2, ld, Bm, lq, t->qt2));
        RLT_TRY(op->lane(bk, RLT_LANE_JOIN));
        /* Critic gradients of MSE(Q1, y) + MSE(Q2, y), accumulated over micro-batches. */
        rlt_td3_loss tl = {.y = t->y, .dq1 = t->dq1, .dq2 = t->dq2, .loss1 = &ag->losses[RLT_LOSS_Q1],
                           .loss2 = &ag->losses[RLT_LOSS_Q2], .q1 = t->q1o, .q2 = t->q2o, .qt1 = t->qt1, .qt2 = t->qt2,
                           .r = t->r, .term = t->term, .n = Bm, .gamma = (float)c->td3.gamma, .grad_scale = scale,
                           .gamma_dev = &ag->hparams[RLT_HP_TD3_GAMMA]};
        if (heads) {
            /* The four output layers, the loss's gradients and the output layers' input gradients in one op on the
             * critical path; the logged losses and the output layers' weight and bias gradients on lane 2 (below). */
            const uint64_t wo = mlp_weight_offset(&t->q1, Lq - 1), bo = mlp_bias_offset(&t->q1, Lq - 1);
            rlt_td3_loss th = tl;
            th.loss1 = th.loss2 = NULL;
            th.hidden = Hq;
            const float *h[4] = {mlp_layer_out(&q1_on, Lq - 2), mlp_layer_out(&q2_on, Lq - 2),
                                 mlp_layer_out(&q1_tg, Lq - 2), mlp_layer_out(&q2_tg, Lq - 2)};
            const float *p[4] = {q1_p, q2_p, q1_tp, q2_tp};
            float *q[4] = {t->q1o, t->q2o, t->qt1, t->qt2};
            for (int j = 0; j < 4; j++) th.h[j] = h[j], th.w[j] = p[j] + wo, th.b[j] = p[j] + bo, th.q_out[j] = q[j];
            th.dh[0] = mlp_layer_grad(&q1_on, Lq - 2), th.dh[1] = mlp_layer_grad(&q2_on, Lq - 2);
            RLT_TRY(op->td3_critic_loss(bk, &th));
        } else {
            RLT_TRY(op->td3_critic_loss(bk, &tl));
        }
        if (m == N - 1) {
            /* Every reader of the update counter (sampling, target noise) is behind us. */
            RLT_TRY(op->lane(bk, 3));
            RLT_TRY(op->counter_add(bk, &ctr[RLT_CTR_UPDATE], 1));
        }
        /* Gradient buckets (dist.bucket_mb, large networks of a data-parallel run): the last micro-batch's
         * backward passes run one after the other on lane 0, each network's buckets averaged on the comm lane
         * as they become final, so Q1's average overlaps Q2's backward (td3_buckets). Otherwise side by side. */
        int bucketed = m == N - 1 && td3_buckets(ag, &q1_on, t->n_q1 + t->n_q2);
        /* Without fp16's block-wide overflow check, the critic block steps in two halves: Q2's average (issued
         * whole after the join below) runs beside Q1's step, and on an actor step beside the actor's passes. */
        split = bucketed && !ag->amp;
        if (bucketed && !split) td3_buckets(ag, &q2_on, t->n_q1 + t->n_q2);
        RLT_TRY(op->lane(bk, bucketed ? 0 : 1));
        RLT_TRY(td3_critic_backward(bk, &q1_on, q1_p, q1_pl, q1_g, t->s_a, ld, Bm, heads, t->dq1, S));
        if (heads) {
            /* The logged losses (and the same y and gradients again) and the output layers' weight and bias
             * gradients on lane 2, issued after Q1's backward, whose weight gradients fork to lane 2 and are
             * waited for inside it: behind them, not before them (and Q2's backward forks to lane 3). */
            RLT_TRY(op->lane(bk, 2));
            RLT_TRY(op->td3_critic_loss(bk, &tl));
            RLT_TRY(mlp_backward_layers(bk, &q1_on, q1_p, q1_g, NULL, 0, Bm, Lq - 1, Lq, t->dq1, 1, NULL, 0));
            RLT_TRY(mlp_backward_layers(bk, &q2_on, q2_p, q2_g, NULL, 0, Bm, Lq - 1, Lq, t->dq2, 1, NULL, 0));
        }
        RLT_TRY(op->lane(bk, 0));
        RLT_TRY(td3_critic_backward(bk, &q2_on, q2_p, q2_pl, q2_g, t->s_a, ld, Bm, heads, t->dq2, S));
        RLT_TRY(op->lane(bk, RLT_LANE_JOIN));
    }
    rlt_adam_hp critic_hp = {(float)c->td3.critic_lr, 0.9f, 0.999f, 1e-8f};
    /* The delayed target update rides on each Adam step (one pass over each block): the critics' targets move
     * toward the critics just updated, which the actor step below does not change. */
    /* fp16: the gradients come out multiplied by the loss scale; unscale and check them first, and skip the
     * step (and the target update riding on it) on the device when one is not finite. */
    /* split: Q1's buckets were averaged during the backward; Q2's gradient goes to the comm lane whole, and the
     * step of each half waits only for its own average (Adam is elementwise and reads the step counter without
     * moving it, so two halves are the one step, bit for bit). */
    /* On an actor step of a single run without fp16, the critic block steps in two halves too: Q1's, which the actor
     * step reads, on lane 0, and Q2's on lane 2 beside the actor's passes (Adam is elementwise: the same values). */
    const int q2_beside = actor_step && !split && !ag->amp && ag->cfg.n_ranks < 2;
    RLT_TRY(agent_grads_ready(ag, q1_g, split || q2_beside ? t->n_q1 : t->n_q1 + t->n_q2));
    if (split) RLT_TRY(agent_grads_bucket(ag, q2_g, t->n_q2));
    rlt_adam_step critic_st = {.p = q1_p, .g = q1_g, .m = t->adam_m + t->n_actor, .v = t->adam_v + t->n_actor,
                               .n = split || q2_beside ? t->n_q1 : t->n_q1 + t->n_q2, .hp = critic_hp,
                               .step = &ctr[RLT_CTR_CRITIC_STEP], .target = actor_step ? q1_tp : NULL,
                               .tau = (float)c->td3.tau, .p_lp = q1_pl, .target_lp = q1_tl, .lp_dtype = ag->lp,
                               .skip = agent_amp_skip(ag), .lr_dev = &ag->hparams[RLT_HP_TD3_CRITIC_LR],
                               .tau_dev = &ag->hparams[RLT_HP_TD3_TAU]};
    RLT_TRY(bk->ops->adam(bk, &critic_st));
    if (!split) RLT_TRY(agent_amp_update(ag, &ctr[RLT_CTR_CRITIC_STEP]));
    if (split && !actor_step) RLT_TRY(td3_q2_half(ag, &critic_st));
    if (q2_beside) {
        RLT_TRY(op->lane(bk, 2));
        RLT_TRY(td3_q2_half(ag, &critic_st));
        RLT_TRY(op->lane(bk, 0));
    }

    if (actor_step) {
        /* Actor step on -mean Q1(s, pi(s)) with the critic just updated; only d/da flows back through Q1. */
        for (int32_t m = 0; m < N; m++) {
            if (!early_pi) {
                RLT_TRY(td3_gather(ag, m, 0, 1));
                RLT_TRY(mlp_forward(bk, &pi_on, actor_p, actor_pl, t->s_pi, ld, Bm, t->s_pi + O, ld));
            }
            /* The backward to d/da starts from the constant dq_actor and Q1's hidden layers: in fp32, Q1's output
             * layer (read only by the actor's logged loss) runs on lane 3, off the critical path. */
            const int32_t L1 = q1_on.n_layers;
            if (!q1_pl && L1 > 1) {
                RLT_TRY(mlp_forward_layers(bk, &q1_on, q1_p, t->s_pi, ld, Bm, 0, L1 - 1, NULL, 0));
                RLT_TRY(op->lane(bk, 3));
                RLT_TRY(mlp_forward_layers(bk, &q1_on, q1_p, t->s_pi, ld, Bm, L1 - 1, L1, t->q1o, 1));
            } else {
                RLT_TRY(mlp_forward(bk, &q1_on, q1_p, q1_pl, t->s_pi, ld, Bm, t->q1o, 1));
                RLT_TRY(op->lane(bk, 3));
            }
            RLT_TRY(op->sum(bk, &ag->losses[RLT_LOSS_ACTOR], t->q1o, 1, Bm, -1.0f / (float)Bm));
            RLT_TRY(op->lane(bk, 0));
            RLT_TRY(mlp_backward(bk, &q1_on, q1_p, q1_pl, NULL, t->s_pi, ld, Bm, t->dq_actor, 1, S, t->d_sa, ld));
            if (m == N - 1 && !split) td3_buckets(ag, &pi_on, t->n_actor);
            RLT_TRY(mlp_backward(bk, &pi_on, actor_p, actor_pl, actor_g, t->s_pi, ld, Bm, t->d_sa + O, ld, NULL, NULL, 0));
            RLT_TRY(op->lane(bk, RLT_LANE_JOIN));
        }
        /* Q2's half of the critic step, once its average is in (the actor's passes never touch Q2). */
        if (split) RLT_TRY(td3_q2_half(ag, &critic_st));
        RLT_TRY(td3_actor_adam(ag, actor_p, actor_g, actor_tp, actor_pl, actor_tl));
    }
    return op->lane(bk, RLT_LANE_JOIN);
}

int td3_policy(rlt_agent *ag, int32_t n) {
    rlt_td3 *t = td3_state(ag);
    return mlp_forward(&ag->bk, &t->actor_act, t->params, NULL, t->act_in, t->O, n, t->act_out, t->A);
}

static float scale_action(const rlt_agent *ag, int32_t i, float a) {
    return ag->act_low[i] + 0.5f * (a + 1.0f) * (ag->act_high[i] - ag->act_low[i]);
}

/* Acting's host staging: observation rows from the start of io_stage (O floats, or O bytes for dict rows), outputs
 * after the whole acting batch's rows, so that a seed group's batched acting never writes over observations staged
 * for a later round (train/seed_batch.c). td3_plan sizes io_stage for both. */
static float *td3_act_stage_out(const rlt_agent *ag) {
    const rlt_td3 *t = td3_state(ag);
    uint64_t row = t->dict ? (uint64_t)ag->obs_dim : (uint64_t)ag->obs_dim * F32;
    uint64_t at = ((uint64_t)t->act_batch * row + 15) & ~(uint64_t)15; /* byte rows may leave it unaligned */
    return (float *)(void *)((unsigned char *)ag->io_stage + at);
}

/* See rlt_algo.act_ops. */
static int td3_act_ops(rlt_agent *ag, int32_t k) {
    rlt_td3 *t = td3_state(ag);
    rlt_backend *bk = &ag->bk;
    int32_t A = ag->act_dim, O = ag->obs_dim;
    if (k < 1 || k > t->act_batch)
        RLT_FAIL(&ag->err, RLT_EINVAL, "td3 act_ops: %d rows, outside 1..%d (the acting batch)", (int)k, (int)t->act_batch);
    if (t->dict) {
        /* Dict rows are O bytes each. */
        RLT_TRY(bk->ops->copy(bk, t->act_raw, ag->io_stage, (uint64_t)k * O, RLT_COPY_H2D));
        RLT_TRY(td3_dict_policy(ag, k));
    } else {
        RLT_TRY(bk->ops->copy(bk, t->act_in, ag->io_stage, (uint64_t)k * O * 4, RLT_COPY_H2D));
        RLT_TRY(td3_policy(ag, k));
    }
    return bk->ops->copy(bk, td3_act_stage_out(ag), t->act_out, (uint64_t)k * A * 4, RLT_COPY_D2H);
}

static int td3_act(rlt_agent *ag, const void *obs, int32_t n, int32_t explore, void *actions) {
    rlt_td3 *t = td3_state(ag);
    float *out = actions;
    int32_t A = ag->act_dim, O = ag->obs_dim;
    if (explore && ag->env_steps < ag->cfg.train.start_steps) {
        /* Uniform random actions before learning starts (TD3's start_timesteps). */
        for (int64_t i = 0; i < (int64_t)n * A; i++)
            out[i] = scale_action(ag, (int32_t)(i % A), 2.0f * rlt_rng_uniform(&ag->explore_rng) - 1.0f);
        return RLT_OK;
    }
    float sigma = (float)ag->cfg.td3.exploration_noise;
    uint64_t row = t->dict ? (uint64_t)O : (uint64_t)O * 4;
    const float *pi = td3_act_stage_out(ag);
    for (int32_t done = 0; done < n; done += t->act_batch) {
        int32_t k = n - done < t->act_batch ? n - done : t->act_batch;
        memcpy(ag->io_stage, (const unsigned char *)obs + (uint64_t)done * row, (uint64_t)k * row);
        RLT_TRY(agent_run_act(ag, k));
        /* The exploration noise is drawn here, on the host, from this agent's own stream: batched or not, the same
         * draws in the same order. */
        for (int64_t i = 0; i < (int64_t)k * A; i++) {
            float a = pi[i];
            if (explore) a += sigma * rlt_rng_normal(&ag->explore_rng);
            a = a < -1.0f ? -1.0f : (a > 1.0f ? 1.0f : a);
            out[(int64_t)done * A + i] = scale_action(ag, (int32_t)(i % A), a);
        }
    }
    return RLT_OK;
}

static int td3_observe(rlt_agent *ag, const void *obs, const void *actions, const float *rewards, const void *next_obs,
                       const uint8_t *terminated, const uint8_t *truncated, int32_t n) {
    (void)truncated; /* Truncation does not stop bootstrapping: next_obs is the real final observation. */
    int32_t A = ag->act_dim, O = ag->obs_dim;
    const float *act = actions, *o = obs, *o2 = next_obs;
    for (int32_t done = 0; done < n; done += RLT_OBSERVE_STAGE_ROWS) {
        int32_t k = n - done < RLT_OBSERVE_STAGE_ROWS ? n - done : RLT_OBSERVE_STAGE_ROWS;
        float *an = ag->io_stage, *term = ag->io_stage + (int64_t)k * A;
        for (int32_t r = 0; r < k; r++) {
            for (int32_t j = 0; j < A; j++) {
                float a = act[(int64_t)(done + r) * A + j];
                float x = 2.0f * (a - ag->act_low[j]) / (ag->act_high[j] - ag->act_low[j]) - 1.0f;
                an[(int64_t)r * A + j] = x < -1.0f ? -1.0f : (x > 1.0f ? 1.0f : x);
            }
            term[r] = terminated[done + r] ? 1.0f : 0.0f;
        }
        /* Observation rows are O floats, or O bytes for dict rows. */
        int64_t ob = td3_state(ag)->dict ? 1 : 4;
        const void *rows[5] = {(const unsigned char *)o + (int64_t)done * O * ob, an, rewards + done, term,
                               (const unsigned char *)o2 + (int64_t)done * O * ob};
        RLT_TRY(replay_append(&ag->replay, &ag->bk, rows, k));
    }
    return RLT_OK;
}

/* See rlt_algo.act_beside: a critic-only update writes nothing of the actor. Not a dict actor with convolutions: a
 * seed group may capture them into its acting graph (RLT_CUDA_SEEDS_CONV=1), which the aside stream cannot refuse. */
static int td3_act_beside(const rlt_agent *ag, int32_t variant) {
    const rlt_td3 *t = td3_state(ag);
    return variant == TD3_GRAPH_CRITIC && !(t->dict && t->actor_m_act.n_conv > 0);
}

static int td3_update(rlt_agent *ag, int32_t *done) {
    /* TD3's schedule: train once the first start_steps transitions (random actions) are in. The observe
     * call for this step has already counted its transition. */
    if (ag->env_steps <= ag->cfg.train.start_steps || ag->replay.size < 1) return RLT_OK;
    for (int32_t k = 0; k < ag->cfg.train.updates_per_step; k++) {
        int actor = (ag->updates + 1) % ag->cfg.td3.policy_delay == 0;
        RLT_TRY(agent_run_update(ag, actor ? TD3_GRAPH_CRITIC_ACTOR : TD3_GRAPH_CRITIC));
        ag->updates++;
        (*done)++;
    }
    return RLT_OK;
}

static uint64_t td3_param_count(const rlt_agent *ag) { return td3_state(ag)->n_total; }

/* The actor's blocks, then the twin critics', in the order td3_plan lays them out. */
static int32_t td3_param_blocks(const rlt_agent *ag, uint64_t *sizes, int32_t cap) {
    const rlt_td3 *t = td3_state(ag);
    if (t->dict) {
        int32_t n = mnet_param_blocks(&t->actor_m, sizes, 0, cap);
        n = mnet_param_blocks(&t->q1_m, sizes, n, cap);
        return mnet_param_blocks(&t->q2_m, sizes, n, cap);
    }
    int32_t n = mlp_param_blocks(&t->actor, sizes, 0, cap);
    n = mlp_param_blocks(&t->q1, sizes, n, cap);
    return mlp_param_blocks(&t->q2, sizes, n, cap);
}

/* The critic loss is the twin critics' mean. */
static void td3_loss_values(const float losses[RLT_LOSS_COUNT], double *out) {
    out[0] = 0.5 * (losses[RLT_LOSS_Q1] + losses[RLT_LOSS_Q2]);
    out[1] = losses[RLT_LOSS_ACTOR];
}

static void td3_network_text(const rlt_agent *ag, rlt_text *o) {
    agent_key_text(o, ag, "actor_hidden", "td3.actor_hidden");
    rlt_text_add(o, "; ");
    agent_key_text(o, ag, "critic_hidden", "td3.critic_hidden");
    /* Only dict networks name their inputs, so the text of every other network is as it always was. */
    if (ag->cfg.network.inputs.n > 0) {
        rlt_text_add(o, "; inputs: ");
        config_inputs_format(o, &ag->cfg.network.inputs, 1);
    }
}

static int td3_after_load(rlt_agent *ag) {
    rlt_td3 *t = td3_state(ag);
    return agent_refresh_lp(ag, t->params, t->params_lp, t->target, t->target_lp, t->n_total);
}

static int td3_update_variant(rlt_agent *ag, int32_t variant) {
    if (td3_state(ag)->dict) return td3_dict_update_ops(ag, variant == TD3_GRAPH_CRITIC_ACTOR);
    return td3_update_ops(ag, variant == TD3_GRAPH_CRITIC_ACTOR);
}

const rlt_algo rlt_algo_td3 = {
    .name = "td3",
    .state_bytes = sizeof(rlt_td3),
    .n_variants = 2,
    .min_replay_capacity = 1,
    .first_update_key = "train.start_steps",
    .n_loss_columns = 2,
    .loss_columns = {"critic_loss", "actor_loss"},
    .loss_values = td3_loss_values,
    .check_spaces = td3_check_spaces,
    .plan = td3_plan,
    .init_state = td3_init_state,
    .update_ops = td3_update_variant,
    .act = td3_act,
    .act_ops = td3_act_ops,
    .act_beside = td3_act_beside,
    .observe = td3_observe,
    .update = td3_update,
    .param_count = td3_param_count,
    .param_blocks = td3_param_blocks,
    .network_text = td3_network_text,
    .after_load = td3_after_load,
};
