/* dqn.c: DQN's memory plan, replay writes, update and policy on the backend interface (see dqn.h). */
#include "dqn.h"

#include <string.h>

#include "algo.h"
#include "../engine/config_conv.h"
#include "../engine/config_inputs.h"

#define F32 4u

rlt_dqn *dqn_state(const rlt_agent *ag) { return agent_algo_state(ag); }

static int dqn_check_spaces(rlt_agent *ag, const rlt_space *obs, const rlt_space *act) {
    rlt_dqn *d = dqn_state(ag);
    rlt_err *e = &ag->err;
    if (act->kind != RLT_SPACE_DISCRETE || act->n < 2)
        RLT_FAIL(e, RLT_EINVAL, "dqn needs a Discrete action space with at least 2 actions");
    /* A dict space was checked against network.inputs by the agent. */
    d->dict = obs->kind == RLT_SPACE_DICT;
    if (!d->dict && (obs->kind != RLT_SPACE_BOX || (obs->dtype != RLT_DTYPE_F32 && obs->dtype != RLT_DTYPE_U8)))
        RLT_FAIL(e, RLT_EINVAL, "dqn needs float32 or uint8 Box observations, or dict ones (network.inputs)");
    ag->act_dim = 1;
    d->n_actions = act->n;
    d->obs_u8 = !d->dict && obs->dtype == RLT_DTYPE_U8;
    /* uint8 observations are scaled to [0, 1] by the space's largest value: 255 for camera frames, 1 for 0/1
     * planes such as MinAtar's, whose own DQN feeds them unscaled (a fixed 1/255 made those inputs 255 times
     * smaller than the reference's). high holds one value per channel (shape[0]); NULL means 255. */
    d->obs_scale = 1.0f / 255.0f;
    if (d->obs_u8 && obs->high) {
        float hi = 0;
        for (int32_t c = 0; c < obs->shape[0]; c++) {
            float h = obs->high[c];
            if (!(h >= 1 && h <= 255))
                RLT_FAIL(e, RLT_EINVAL, "uint8 observation space: high[%d] = %g; the largest value of a uint8 channel "
                         "is 1..255", (int)c, (double)h);
            if (h > hi) hi = h;
        }
        d->obs_scale = 1.0f / hi;
    }
    char where[400];
    if (ag->cfg.replay.capacity < 3)
        RLT_FAIL(e, RLT_ECONFIG, "%s: must be at least 3 for dqn (got %lld)",
                 config_key_where(&ag->cfg, "replay.capacity", where, sizeof where), (long long)ag->cfg.replay.capacity);
    return RLT_OK;
}

/* Parameters and optimiser state, role by role with one layout (both networks: qnet and dict). */
int dqn_plan_params(rlt_agent *ag) {
    rlt_dqn *d = dqn_state(ag);
    rlt_err *e = &ag->err;
    rlt_plan *p = &ag->plan;
    uint64_t nb = d->n_params * F32;
    RLT_TRY(plan_add(p, e, "params", "params", RLT_LOC_DEVICE, nb, (void **)&d->params));
    RLT_TRY(plan_add(p, e, "grads", "grads", RLT_LOC_DEVICE, nb, (void **)&d->grads));
    RLT_TRY(plan_add(p, e, "adam_m", "adam_m", RLT_LOC_DEVICE, nb, (void **)&d->adam_m));
    RLT_TRY(plan_add(p, e, "adam_v", "adam_v", RLT_LOC_DEVICE, nb, (void **)&d->adam_v));
    RLT_TRY(plan_add(p, e, "target", "target", RLT_LOC_DEVICE, nb, (void **)&d->target));
    /* 16-bit compute copies (zero-size entries, so NULL, in fp32); not saved: they follow from the masters. */
    uint64_t nlp = ag->lp != RLT_LP_F32 ? d->n_params * 2 : 0;
    RLT_TRY(plan_add(p, e, "params_lp", "compute", RLT_LOC_DEVICE, nlp, &d->params_lp));
    return plan_add(p, e, "target_lp", "compute", RLT_LOC_DEVICE, nlp, &d->target_lp);
}

/* The TD targets, Q values and their gradient for one micro-batch, and the gradient norm. */
int dqn_plan_targets(rlt_agent *ag) {
    rlt_dqn *d = dqn_state(ag);
    rlt_err *e = &ag->err;
    rlt_plan *p = &ag->plan;
    uint64_t B = (uint64_t)d->Bm, A = (uint64_t)d->n_actions;
    float **vec[] = {&d->r, &d->term, &d->y};
    const char *vec_names[] = {"batch.r", "batch.term", "batch.y"};
    for (int i = 0; i < 3; i++) RLT_TRY(plan_add(p, e, vec_names[i], "batch", RLT_LOC_DEVICE, B * F32, (void **)vec[i]));
    float **mat[] = {&d->q, &d->dq, &d->q_next_t, &d->q_next_o};
    const char *mat_names[] = {"batch.q", "batch.dq", "batch.q_next_target", "batch.q_next_online"};
    for (int i = 0; i < 4; i++)
        RLT_TRY(plan_add(p, e, mat_names[i], "batch", RLT_LOC_DEVICE, B * A * F32, (void **)mat[i]));
    return plan_add(p, e, "grad_norm", "counters", RLT_LOC_DEVICE, F32, (void **)&d->grad_norm);
}

/* Replay: frames once (obs_elems of frame_dtype each), plus per-slot bookkeeping (dqn_observe). */
int dqn_plan_replay(rlt_agent *ag, int32_t frame_dtype, uint64_t obs_elems) {
    rlt_err *e = &ag->err;
    RLT_TRY(replay_add_obs_field(&ag->replay, e, "frame", frame_dtype, obs_elems));
    RLT_TRY(replay_add_field(&ag->replay, e, "valid", RLT_DTYPE_U8, 1));
    RLT_TRY(replay_add_field(&ag->replay, e, "next", RLT_DTYPE_I32, 1));
    RLT_TRY(replay_add_field(&ag->replay, e, "action", RLT_DTYPE_I32, 1));
    RLT_TRY(replay_add_field(&ag->replay, e, "reward", RLT_DTYPE_F32, 1));
    return replay_add_field(&ag->replay, e, "terminated", RLT_DTYPE_F32, 1);
}

static int dqn_plan(rlt_agent *ag) {
    rlt_dqn *d = dqn_state(ag);
    rlt_err *e = &ag->err;
    rlt_plan *p = &ag->plan;
    const rlt_config *c = &ag->cfg;
    int32_t A = d->n_actions, O = ag->obs_dim;
    d->B = c->train.batch_size;
    d->N = c->train.grad_accum_steps;
    d->Bm = d->B / d->N;
    if (d->dict) return dqn_dict_plan(ag);
    RLT_TRY(qnet_define(&d->net, e, &ag->obs_space, &c->network.conv, &c->network.hidden, A));
    d->net_act = d->net;
    /* The update runs its three forwards (online on s, online and target on s') side by side, each on an
     * activation set of its own (dqn_update_ops). */
    d->net.n_sets = 3;
    /* Reduced precision for the training network's dense head (the conv torso computes in fp32); acting
     * stays on the fp32 masters. */
    d->net.head.dtype = ag->lp;
    /* A conv torso runs at its planned batch, so acting plans a small one. */
    d->act_batch = d->net.n_conv ? 1 : 64;
    ag->act_rows = d->act_batch;
    d->n_params = qnet_param_count(&d->net);
    uint64_t nb = d->n_params * F32;
    RLT_TRY(dqn_plan_params(ag));
    RLT_TRY(qnet_plan(&d->net, &ag->bk, p, e, "q", d->Bm, 0));
    RLT_TRY(qnet_plan(&d->net_act, &ag->bk, p, e, "q.acting", d->act_batch, d->net.n_conv));

    /* Buffers hold one micro-batch; only the sampled indices span the whole batch. */
    uint64_t B = (uint64_t)d->Bm;
    RLT_TRY(plan_add(p, e, "batch.idx", "batch", RLT_LOC_DEVICE, (uint64_t)d->B * 4, (void **)&d->idx));
    RLT_TRY(plan_add(p, e, "batch.idx_next", "batch", RLT_LOC_DEVICE, B * 4, (void **)&d->idx_next));
    RLT_TRY(plan_add(p, e, "batch.action", "batch", RLT_LOC_DEVICE, B * 4, (void **)&d->act_b));
    RLT_TRY(plan_add(p, e, "batch.obs", "batch", RLT_LOC_DEVICE, B * O * F32, (void **)&d->x));
    RLT_TRY(plan_add(p, e, "batch.next_obs", "batch", RLT_LOC_DEVICE, B * O * F32, (void **)&d->x2));
    RLT_TRY(dqn_plan_targets(ag));
    RLT_TRY(plan_add(p, e, "acting.obs", "batch", RLT_LOC_DEVICE, (uint64_t)d->act_batch * O * F32, (void **)&d->act_x));
    RLT_TRY(plan_add(p, e, "acting.obs_u8", "batch", RLT_LOC_DEVICE, d->obs_u8 ? (uint64_t)d->act_batch * O : 0,
                     (void **)&d->act_u8));
    RLT_TRY(plan_add(p, e, "acting.q", "batch", RLT_LOC_DEVICE, (uint64_t)d->act_batch * A * F32, (void **)&d->act_q));

    /* Replay: frames once, plus per-slot bookkeeping. Frames are stored as replay.obs_dtype says: uint8
     * images as they are, float observations as fp32, fp16 or bf16 (widened back by the gather). */
    RLT_TRY(dqn_plan_replay(ag, ag->replay_obs_dtype, (uint64_t)O));
    ag->io_stage_bytes = nb;
    uint64_t act_io = (uint64_t)d->act_batch * (O * F32 + A * F32) + 16; /* + the outputs' alignment */
    if (act_io > ag->io_stage_bytes) ag->io_stage_bytes = act_io;
    return RLT_OK;
}

static int dqn_init_state(rlt_agent *ag) {
    rlt_dqn *d = dqn_state(ag);
    rlt_backend *bk = &ag->bk;
    rlt_rng rng;
    rlt_rng_init(&rng, ag->cfg.seed, RLT_STREAM_INIT);
    if (d->dict) RLT_TRY(dqn_dict_init_params(ag, &rng));
    else qnet_init_params(&d->net, ag->io_stage, &rng);
    RLT_TRY(agent_put(ag, d->params, ag->io_stage, d->n_params * F32));
    RLT_TRY(bk->ops->flat(bk, RLT_FLAT_COPY, d->target, d->params, d->n_params, 0.0f));
    RLT_TRY(bk->ops->flat(bk, RLT_FLAT_FILL, d->grads, NULL, d->n_params, 0.0f));
    RLT_TRY(bk->ops->flat(bk, RLT_FLAT_FILL, d->adam_m, NULL, d->n_params, 0.0f));
    RLT_TRY(bk->ops->flat(bk, RLT_FLAT_FILL, d->adam_v, NULL, d->n_params, 0.0f));
    RLT_TRY(bk->ops->flat(bk, RLT_FLAT_FILL, d->grad_norm, NULL, 1, 0.0f));
    RLT_TRY(agent_refresh_lp(ag, d->params, d->params_lp, d->target, d->target_lp, d->n_params));
    d->advances = 0;
    d->prev_ended = 0;
    d->sched_last = -1;
    return bk->ops->sync(bk);
}

/* The schedule (lanes: see the lane op in kernels/backend.h): lane 3 zeroes the gradients and counts the step;
 * lane 0 samples and gathers everything in one op (u8 frames: then widens s on lane 1 and s' on lane 0); the
 * three forwards run on lanes 1, 2 and 0 (online Q(s) on activation set 0, which the backward needs, online
 * Q(s') on set 1, target Q'(s') on set 2, each set with its own conv workspace); then the target and the TD
 * loss in one op, the backward, and Adam with the gradient clipping folded in. On the CPU the lanes are
 * ignored; every value is the plain sequence's. */
static int dqn_update_ops(rlt_agent *ag, int32_t variant) {
    (void)variant;
    rlt_dqn *d = dqn_state(ag);
    if (d->dict) return dqn_dict_update_ops(ag);
    rlt_backend *bk = &ag->bk;
    const rlt_backend_ops *op = bk->ops;
    const rlt_config *c = &ag->cfg;
    rlt_replay *rp = &ag->replay;
    int64_t *ctr = ag->counters;
    int32_t Bm = d->Bm, A = d->n_actions;
    float delta = c->dqn.loss == RLT_DQN_LOSS_HUBER ? 1.0f : 0.0f;
    rlt_qnet q_on = qnet_view(&d->net, 0), q_next = qnet_view(&d->net, 1), q_tgt = qnet_view(&d->net, 2);

    RLT_TRY(op->lane(bk, 3));
    RLT_TRY(op->flat(bk, RLT_FLAT_FILL, d->grads, NULL, d->n_params, 0.0f));
    RLT_TRY(op->counter_add(bk, &ctr[RLT_CTR_CRITIC_STEP], 1));
    RLT_TRY(op->lane(bk, 0));
    /* One draw of the whole batch's indices; micro-batch m uses rows m*Bm .. (m+1)*Bm - 1, and its loss
     * is scaled by 1/N so the accumulated gradient is the full batch's mean. With one micro-batch the
     * gather draws them itself. */
    rlt_sample_spec smp = {&ctr[RLT_CTR_REPLAY_SIZE], rp->f[DQN_F_VALID].data, c->seed, rlt_rank_stream(RLT_STREAM_SAMPLE, c->rank), 0, d->B,
                           &ctr[RLT_CTR_UPDATE]};
    if (d->N > 1)
        RLT_TRY(op->gather_fields(bk, d->idx, d->B, &smp, 0, NULL));
    for (int32_t m = 0; m < d->N; m++) {
        int32_t *idx = d->idx + (int64_t)m * Bm;
        const rlt_sample_spec *sp = d->N == 1 ? &smp : NULL;
        const rlt_replay_field *fr = &rp->f[DQN_F_FRAME];
        rlt_gather_field f[5];
        int32_t nf = 0;
        f[nf++] = (rlt_gather_field){d->act_b, 4, rp->f[DQN_F_ACTION].data, 4, NULL, RLT_LP_F32};
        f[nf++] = (rlt_gather_field){d->r, 4, rp->f[DQN_F_REWARD].data, 4, NULL, RLT_LP_F32};
        f[nf++] = (rlt_gather_field){d->term, 4, rp->f[DQN_F_TERM].data, 4, NULL, RLT_LP_F32};
        if (d->obs_u8) {
            /* Frames are converted from u8 as they are gathered, by their own op; it needs the next slots. */
            f[nf++] = (rlt_gather_field){d->idx_next, 4, rp->f[DQN_F_NEXT].data, 4, NULL, RLT_LP_F32};
            RLT_TRY(op->gather_fields(bk, idx, Bm, sp, nf, f));
            RLT_TRY(op->lane(bk, 1)); /* s for Q(s), which runs on lane 1 below */
            RLT_TRY(op->gather_u8_f32(bk, d->x, fr->data, (uint64_t)ag->obs_dim, idx, Bm, d->obs_scale));
            RLT_TRY(op->lane(bk, 0));
            RLT_TRY(op->gather_u8_f32(bk, d->x2, fr->data, (uint64_t)ag->obs_dim, d->idx_next, Bm, d->obs_scale));
        } else {
            /* s' is the frame in the slot the `next` field names. fp16 / bf16 frames are widened to the fp32
             * batch rows (O floats each) as they are gathered. */
            uint64_t xrow = (uint64_t)ag->obs_dim * F32;
            int32_t od = replay_gather_dtype(fr);
            f[nf++] = (rlt_gather_field){d->x, xrow, fr->data, fr->row_bytes, NULL, od};
            f[nf++] = (rlt_gather_field){d->x2, xrow, fr->data, fr->row_bytes, (const int32_t *)rp->f[DQN_F_NEXT].data, od};
            RLT_TRY(op->gather_fields(bk, idx, Bm, sp, nf, f));
        }
        if (m == d->N - 1) {
            /* The sampling was the update counter's only reader. */
            RLT_TRY(op->lane(bk, 3));
            RLT_TRY(op->counter_add(bk, &ctr[RLT_CTR_UPDATE], 1));
            RLT_TRY(op->lane(bk, 0));
        }
        /* Target: y = r + gamma (1 - term) Q'(s', argmax_a Q(s', a)) (double) or max_a Q'(s', a). */
        RLT_TRY(op->lane(bk, 1));
        RLT_TRY(qnet_forward(bk, &q_on, d->params, d->params_lp, d->x, Bm, d->q));
        if (c->dqn.double_q) {
            RLT_TRY(op->lane(bk, 2));
            RLT_TRY(qnet_forward(bk, &q_next, d->params, d->params_lp, d->x2, Bm, d->q_next_o));
        }
        RLT_TRY(op->lane(bk, 0));
        RLT_TRY(qnet_forward(bk, &q_tgt, d->target, d->target_lp, d->x2, Bm, d->q_next_t));
        RLT_TRY(op->lane(bk, RLT_LANE_JOIN));
        /* The target and the TD loss on the taken actions, in one op. */
        rlt_q_loss ql = {.y = d->y, .dq = d->dq, .lddq = A, .loss = &ag->losses[RLT_LOSS_Q1], .q = d->q, .ldq = A,
                         .act = d->act_b, .r = d->r, .term = d->term, .q_next_target = d->q_next_t,
                         .q_next_online = c->dqn.double_q ? d->q_next_o : NULL, .ldqn = A, .n = Bm, .n_act = A,
                         .gamma = (float)c->dqn.gamma, .huber_delta = delta, .grad_scale = 1.0f / (float)d->N,
                         .gamma_dev = &ag->hparams[RLT_HP_DQN_GAMMA]};
        RLT_TRY(op->dqn_loss(bk, &ql));
        RLT_TRY(qnet_backward(bk, &q_on, d->params, d->params_lp, d->grads, d->x, Bm, d->dq, agent_loss_scale(ag)));
    }
    rlt_adam_hp hp = {(float)c->dqn.lr, 0.9f, 0.999f, 1e-8f};
    /* fp16: unscale and check the gradients first; a non-finite one skips the step on the device. */
    RLT_TRY(agent_grads_ready(ag, d->grads, d->n_params));
    rlt_adam_step st = {.p = d->params, .g = d->grads, .m = d->adam_m, .v = d->adam_v, .n = d->n_params, .hp = hp,
                        .step = &ctr[RLT_CTR_CRITIC_STEP],
                        .max_grad_norm = c->dqn.max_grad_norm > 0 ? (float)c->dqn.max_grad_norm : 0.0f,
                        .norm = d->grad_norm, .p_lp = d->params_lp, .lp_dtype = ag->lp, .skip = agent_amp_skip(ag),
                        .lr_dev = &ag->hparams[RLT_HP_DQN_LR],
                        .max_grad_norm_dev = &ag->hparams[RLT_HP_DQN_MAX_GRAD_NORM]};
    RLT_TRY(bk->ops->adam(bk, &st));
    RLT_TRY(agent_amp_update(ag, &ctr[RLT_CTR_CRITIC_STEP]));
    return op->lane(bk, RLT_LANE_JOIN);
}

double dqn_epsilon(const rlt_dqn *d, double eps_start, double eps_end, double fraction, int64_t total, int64_t env_steps) {
    (void)d;
    double span = fraction * (double)total;
    if (span <= 0 || (double)env_steps >= span) return eps_end;
    return eps_start + (eps_end - eps_start) * (double)env_steps / span;
}

/* Acting's host staging (as td3.c's): observation rows from the start of io_stage, Q-values after the whole acting
 * batch's rows. dqn_plan sizes io_stage for both. */
static uint64_t dqn_act_row_bytes(const rlt_agent *ag) {
    const rlt_dqn *d = dqn_state(ag);
    return (uint64_t)ag->obs_dim * (d->obs_u8 || d->dict ? 1 : F32); /* a dict row's O counts bytes */
}
static float *dqn_act_stage_out(const rlt_agent *ag) {
    /* after the acting batch's rows, 16-byte aligned (byte rows of an odd width would misalign the floats) */
    uint64_t at = ((uint64_t)dqn_state(ag)->act_batch * dqn_act_row_bytes(ag) + 15) & ~(uint64_t)15;
    return (float *)(void *)((unsigned char *)ag->io_stage + at);
}

/* See rlt_algo.act_ops. */
static int dqn_act_ops(rlt_agent *ag, int32_t k) {
    rlt_dqn *d = dqn_state(ag);
    rlt_backend *bk = &ag->bk;
    int32_t A = d->n_actions, O = ag->obs_dim;
    uint64_t ob = dqn_act_row_bytes(ag);
    if (k < 1 || k > d->act_batch)
        RLT_FAIL(&ag->err, RLT_EINVAL, "dqn act_ops: %d rows, outside 1..%d (the acting batch)", (int)k, (int)d->act_batch);
    if (d->dict) {
        RLT_TRY(bk->ops->copy(bk, d->act_u8, ag->io_stage, (uint64_t)k * ob, RLT_COPY_H2D));
        RLT_TRY(dqn_dict_policy(ag, k));
    } else if (d->obs_u8) {
        RLT_TRY(bk->ops->copy(bk, d->act_u8, ag->io_stage, (uint64_t)k * ob, RLT_COPY_H2D));
        RLT_TRY(bk->ops->gather_u8_f32(bk, d->act_x, d->act_u8, (uint64_t)O, NULL, k, d->obs_scale));
    } else {
        RLT_TRY(bk->ops->copy(bk, d->act_x, ag->io_stage, (uint64_t)k * ob, RLT_COPY_H2D));
    }
    /* A conv torso always runs its planned rows; only the first k are read. */
    if (!d->dict)
        RLT_TRY(qnet_forward(bk, &d->net_act, d->params, NULL, d->act_x, d->net_act.n_conv ? d->act_batch : k, d->act_q));
    return bk->ops->copy(bk, dqn_act_stage_out(ag), d->act_q, (uint64_t)k * A * F32, RLT_COPY_D2H);
}

static int dqn_act(rlt_agent *ag, const void *obs, int32_t n, int32_t explore, void *actions) {
    rlt_dqn *d = dqn_state(ag);
    const rlt_config *c = &ag->cfg;
    int32_t *out = actions, A = d->n_actions;
    double eps = explore ? dqn_epsilon(d, c->dqn.eps_start, c->dqn.eps_end, c->dqn.eps_fraction, c->train.total_steps,
                                       ag->env_steps)
                         : c->dqn.eval_epsilon;
    uint64_t ob = dqn_act_row_bytes(ag);
    const float *qv = dqn_act_stage_out(ag);
    for (int32_t done = 0; done < n; done += d->act_batch) {
        int32_t k = n - done < d->act_batch ? n - done : d->act_batch;
        memcpy(ag->io_stage, (const unsigned char *)obs + (uint64_t)done * ob, (uint64_t)k * ob);
        RLT_TRY(agent_run_act(ag, k));
        /* Epsilon-greedy on the host from this agent's own stream: batched or not, the same draws in the same order. */
        for (int32_t i = 0; i < k; i++) {
            int32_t best = 0;
            const float *q = qv + (int64_t)i * A;
            for (int32_t a = 1; a < A; a++)
                if (q[a] > q[best]) best = a;
            if (eps > 0 && rlt_rng_uniform(&ag->explore_rng) < eps) best = (int32_t)rlt_rng_below(&ag->explore_rng, (uint32_t)A);
            out[done + i] = best;
        }
    }
    return RLT_OK;
}

static int dqn_observe(rlt_agent *ag, const void *obs, const void *actions, const float *rewards, const void *next_obs,
                       const uint8_t *terminated, const uint8_t *truncated, int32_t n) {
    rlt_dqn *d = dqn_state(ag);
    rlt_replay *rp = &ag->replay;
    rlt_backend *bk = &ag->bk;
    const int32_t *act = actions;
    int64_t cap = rp->capacity;
    uint64_t ob = rp->f[DQN_F_FRAME].in_row_bytes; /* as observed; replay_write converts to the stored type */
    /* One environment's transitions share frames: a transition's next frame is the following one's frame.
     * Rows of several environments (env.num_envs > 1, or n > 1) interleave, so each transition keeps its own
     * next frame: two slots per transition, and the replay holds half as many transitions. */
    int own_next = n > 1 || ag->cfg.env.num_envs > 1;
    /* Copies an earlier call held that no group round has run: its staging rows are reused below. */
    RLT_TRY(replay_settle(rp, bk));
    for (int32_t j = 0; j < n; j++) {
        if (act[j] < 0 || act[j] >= d->n_actions)
            RLT_FAIL(&ag->err, RLT_EINVAL, "observe: action %d is outside 0..%d", act[j], d->n_actions - 1);
        int64_t p = rp->pos, q = (p + 1) % cap;
        int32_t next = (int32_t)q;
        uint8_t yes = 1, no = 0;
        float term = terminated[j] ? 1.0f : 0.0f;
        int ended = terminated[j] || (truncated && truncated[j]);
        /* Staging row s carries slot p, row s + 1 slot q. */
        int32_t s;
        RLT_TRY(replay_stage_take(rp, bk, 2, &s));
        RLT_TRY(replay_write(rp, bk, DQN_F_FRAME, p, (const unsigned char *)obs + (uint64_t)j * ob, 1, s));
        RLT_TRY(replay_write(rp, bk, DQN_F_VALID, p, &yes, 1, s));
        RLT_TRY(replay_write(rp, bk, DQN_F_NEXT, p, &next, 1, s));
        RLT_TRY(replay_write(rp, bk, DQN_F_ACTION, p, &act[j], 1, s));
        RLT_TRY(replay_write(rp, bk, DQN_F_REWARD, p, &rewards[j], 1, s));
        RLT_TRY(replay_write(rp, bk, DQN_F_TERM, p, &term, 1, s));
        /* The next observation goes into the following slot, which starts no transition yet. At an episode
         * end it stays a frame of its own and the next episode starts one slot further on. */
        RLT_TRY(replay_write(rp, bk, DQN_F_FRAME, q, (const unsigned char *)next_obs + (uint64_t)j * ob, 1, s + 1));
        RLT_TRY(replay_write(rp, bk, DQN_F_VALID, q, &no, 1, s + 1));
        int64_t step = ended || own_next ? 2 : 1;
        rp->pos = (p + step) % cap;
        d->advances += step;
        d->prev_ended = ended;
        RLT_TRY(replay_set_size(rp, bk, d->advances + 1 < cap ? d->advances + 1 : cap, s));
        /* With the group's held copies, the next transition reuses their rows: they run first (the last one's are
         * left for the group's round). */
        RLT_TRY(replay_done(rp, bk, j + 1 == n));
    }
    return RLT_OK;
}

static int dqn_update(rlt_agent *ag, int32_t *done) {
    const rlt_config *c = &ag->cfg;
    rlt_dqn *d = dqn_state(ag);
    rlt_backend *bk = &ag->bk;
    /* CleanRL's and SB3's schedule, in env steps: train every train_freq steps after learning_starts, and
     * update the target every target_update_every steps. */
    /* Every env step s since the last call is visited in order, so with several environments (env_steps
     * advancing num_envs at a time) the schedule is the one-environment schedule, step for step; the first
     * call of an iteration does the iteration's work and the others find nothing due. */
    int64_t last = d->sched_last >= 0 ? d->sched_last : ag->env_steps - ag->cfg.env.num_envs; /* first call */
    if (last < 0) last = 0;
    for (int64_t s = last + 1; s <= ag->env_steps; s++) {
        if (s <= c->dqn.learning_starts) continue;
        if (s % c->dqn.train_freq == 0) {
            for (int32_t k = 0; k < c->dqn.gradient_steps; k++) {
                RLT_TRY(agent_run_update(ag, 0));
                ag->updates++;
                (*done)++;
            }
        }
        if (s % c->dqn.target_update_every == 0) {
            if (c->dqn.tau >= 1.0) RLT_TRY(bk->ops->flat(bk, RLT_FLAT_COPY, d->target, d->params, d->n_params, 0.0f));
            else RLT_TRY(bk->ops->flat(bk, RLT_FLAT_POLYAK, d->target, d->params, d->n_params, (float)c->dqn.tau));
            rlt_cast cp = {.rows = 1, .cols = (int64_t)d->n_params, .dst = d->target_lp, .dst_dtype = ag->lp,
                           .ldd = (int64_t)d->n_params, .src = d->target, .src_dtype = RLT_LP_F32,
                           .lds = (int64_t)d->n_params};
            if (d->target_lp) RLT_TRY(bk->ops->cast(bk, &cp));
        }
    }
    d->sched_last = ag->env_steps;
    return RLT_OK;
}

static uint64_t dqn_param_count(const rlt_agent *ag) { return dqn_state(ag)->n_params; }

static int32_t dqn_param_blocks(const rlt_agent *ag, uint64_t *sizes, int32_t cap) {
    const rlt_dqn *d = dqn_state(ag);
    return d->dict ? mnet_param_blocks(&d->mnet, sizes, 0, cap) : qnet_param_blocks(&d->net, sizes, 0, cap);
}

/* One network: its TD loss is the critic column; there is no actor (its loss stays 0). */
static void dqn_loss_values(const float losses[RLT_LOSS_COUNT], double *out) {
    out[0] = losses[RLT_LOSS_Q1];
    out[1] = losses[RLT_LOSS_ACTOR];
}

static void dqn_network_text(const rlt_agent *ag, rlt_text *o) {
    rlt_text_add(o, "conv: ");
    config_conv_format_layers(o, &ag->cfg.network.conv);
    rlt_text_add(o, "; ");
    agent_key_text(o, ag, "hidden", "network.hidden");
    /* Only dict networks name their inputs, so the text of every other network is as it always was. */
    if (ag->cfg.network.inputs.n > 0) {
        rlt_text_add(o, "; inputs: ");
        config_inputs_format(o, &ag->cfg.network.inputs, 1);
    }
}

static int dqn_after_load(rlt_agent *ag) {
    rlt_dqn *d = dqn_state(ag);
    return agent_refresh_lp(ag, d->params, d->params_lp, d->target, d->target_lp, d->n_params);
}

/* agent.host words 4 and 5: the ring's advances and whether the last transition ended an episode. */
static void dqn_host_save(const rlt_agent *ag, int64_t w[RLT_ALGO_HOST_WORDS]) {
    const rlt_dqn *d = dqn_state(ag);
    w[0] = d->advances;
    w[1] = d->prev_ended;
}

/* Every transition moves the write position 1 slot, or 2 at an episode's end, and the size is one more
 * than the slots moved over (the last next-frame), up to the capacity. The position is not tied to
 * `advances` here, since a ring of another capacity may be loaded. */
static int dqn_host_check(rlt_agent *ag, const char *path, const int64_t w[RLT_ALGO_HOST_WORDS], int64_t pos,
                          int64_t size, int with_replay) {
    rlt_err *e = &ag->err;
    if (!with_replay) return RLT_OK;
    if (w[0] < 0 || (w[1] != 0 && w[1] != 1))
        RLT_FAIL(e, RLT_ECHECKPOINT, "%s: tensor 'agent.host': dqn advances %lld, prev_ended %lld: expected "
                 "advances >= 0 and prev_ended 0 or 1", path, (long long)w[0], (long long)w[1]);
    if ((size == 0) != (w[0] == 0) || size > w[0] + 1)
        RLT_FAIL(e, RLT_ECHECKPOINT, "%s: tensor 'agent.host': replay size %lld does not follow from dqn advances "
                 "%lld (size is advances + 1, up to the capacity, and 0 only before the first transition)", path,
                 (long long)size, (long long)w[0]);
    if (pos >= size && !(pos == 0 && size == 0))
        RLT_FAIL(e, RLT_ECHECKPOINT, "%s: tensor 'agent.host': replay position %lld is not inside the %lld filled "
                 "slots", path, (long long)pos, (long long)size);
    return RLT_OK;
}

/* The ring's bookkeeping belongs to the replay contents: without them it stays as it is. */
static void dqn_host_load(rlt_agent *ag, const int64_t w[RLT_ALGO_HOST_WORDS], int with_replay) {
    if (!with_replay) return;
    rlt_dqn *d = dqn_state(ag);
    d->advances = w[0];
    d->prev_ended = (int32_t)w[1];
}

const rlt_algo rlt_algo_dqn = {
    .name = "dqn",
    .state_bytes = sizeof(rlt_dqn),
    .n_variants = 1,
    .min_replay_capacity = 3, /* a transition, its next frame and the slot after an episode's end */
    .first_update_key = "dqn.learning_starts",
    .n_loss_columns = 2,
    .loss_columns = {"critic_loss", "actor_loss"},
    .loss_values = dqn_loss_values,
    .check_spaces = dqn_check_spaces,
    .plan = dqn_plan,
    .init_state = dqn_init_state,
    .update_ops = dqn_update_ops,
    .act = dqn_act,
    .act_ops = dqn_act_ops,
    .observe = dqn_observe,
    .update = dqn_update,
    .param_count = dqn_param_count,
    .param_blocks = dqn_param_blocks,
    .network_text = dqn_network_text,
    .after_load = dqn_after_load,
    .host_save = dqn_host_save,
    .host_check = dqn_host_check,
    .host_load = dqn_host_load,
};
