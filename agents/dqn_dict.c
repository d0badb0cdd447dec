/* dqn_dict.c: DQN on dict observations (network.inputs): the network is an rlt_mnet (one torso per input,
 * concatenated into the Q head), the replay's frames are rows of bytes (engine/config_inputs.h), and each
 * gathered row is converted into the network's planar input (uint8 parts scaled by 1/255) before the forwards.
 * The replay bookkeeping, the loss, Adam and the schedule are dqn.c's. */
#include "dqn.h"

#include "algo.h"

#define F32 4u

int dqn_dict_plan(rlt_agent *ag) {
    rlt_dqn *d = dqn_state(ag);
    rlt_err *e = &ag->err;
    rlt_plan *p = &ag->plan;
    const rlt_config *c = &ag->cfg;
    int32_t A = d->n_actions;
    uint64_t O = (uint64_t)ag->obs_dim; /* bytes of one dict row */
    RLT_TRY(mnet_define(&d->mnet, e, &c->network.inputs, 0, &c->network.hidden, A, RLT_ACT_NONE));
    d->mnet_act = d->mnet;
    /* Reduced precision for the training network's head (the torsos compute in fp32); acting stays fp32. */
    d->mnet.head.dtype = ag->lp;
    /* A conv torso runs at its planned batch, so acting plans a small one. */
    d->act_batch = d->mnet.n_conv ? 1 : 64;
    ag->act_rows = d->act_batch;
    d->n_params = mnet_param_count(&d->mnet);
    uint64_t nb = d->n_params * F32;
    RLT_TRY(dqn_plan_params(ag));
    /* Training and acting copies prepare their conv slots in two ranges; the online and target forwards share
     * the training one (they run one after another). */
    RLT_TRY(mnet_plan(&d->mnet, &ag->bk, p, e, "q", d->Bm, 0, 1));
    RLT_TRY(mnet_plan(&d->mnet_act, &ag->bk, p, e, "q.acting", d->act_batch, d->mnet.n_conv, 0));

    uint64_t B = (uint64_t)d->Bm, X = (uint64_t)d->mnet.in_elems;
    RLT_TRY(plan_add(p, e, "batch.idx", "batch", RLT_LOC_DEVICE, (uint64_t)d->B * 4, (void **)&d->idx));
    RLT_TRY(plan_add(p, e, "batch.idx_next", "batch", RLT_LOC_DEVICE, 0, (void **)&d->idx_next));
    RLT_TRY(plan_add(p, e, "batch.action", "batch", RLT_LOC_DEVICE, B * 4, (void **)&d->act_b));
    RLT_TRY(plan_add(p, e, "batch.obs_rows", "batch", RLT_LOC_DEVICE, B * O, (void **)&d->raw));
    RLT_TRY(plan_add(p, e, "batch.next_obs_rows", "batch", RLT_LOC_DEVICE, B * O, (void **)&d->raw_next));
    RLT_TRY(plan_add(p, e, "batch.obs", "batch", RLT_LOC_DEVICE, B * X * F32, (void **)&d->x));
    RLT_TRY(plan_add(p, e, "batch.next_obs", "batch", RLT_LOC_DEVICE, B * X * F32, (void **)&d->x2));
    RLT_TRY(dqn_plan_targets(ag));
    RLT_TRY(plan_add(p, e, "inputs.u8_scale", "batch", RLT_LOC_DEVICE, (uint64_t)d->mnet.n_parts * F32,
                     (void **)&d->u8_scale));
    RLT_TRY(plan_add(p, e, "acting.obs", "batch", RLT_LOC_DEVICE, (uint64_t)d->act_batch * X * F32, (void **)&d->act_x));
    RLT_TRY(plan_add(p, e, "acting.obs_rows", "batch", RLT_LOC_DEVICE, (uint64_t)d->act_batch * O, (void **)&d->act_u8));
    RLT_TRY(plan_add(p, e, "acting.q", "batch", RLT_LOC_DEVICE, (uint64_t)d->act_batch * A * F32, (void **)&d->act_q));

    /* Replay: each frame is a dict row of bytes, stored as it is. */
    RLT_TRY(dqn_plan_replay(ag, RLT_DTYPE_U8, O));
    ag->io_stage_bytes = nb;
    uint64_t act_io = (uint64_t)d->act_batch * (O + A * F32) + 16; /* + the outputs' alignment */
    if (act_io > ag->io_stage_bytes) ag->io_stage_bytes = act_io;
    return RLT_OK;
}

int dqn_dict_init_params(rlt_agent *ag, rlt_rng *rng) {
    rlt_dqn *d = dqn_state(ag);
    mnet_init_params(&d->mnet, ag->io_stage, rng);
    return mnet_fill_u8_scales(&ag->bk, &d->mnet, &ag->cfg.network.inputs, d->u8_scale);
}

/* The same update as dqn_update_ops, on lane 0 alone: one network's forwards run one after another on its one
 * activation set, Q(s) last, whose activations the backward reads. */
int dqn_dict_update_ops(rlt_agent *ag) {
    rlt_dqn *d = dqn_state(ag);
    rlt_backend *bk = &ag->bk;
    const rlt_backend_ops *op = bk->ops;
    const rlt_config *c = &ag->cfg;
    rlt_replay *rp = &ag->replay;
    int64_t *ctr = ag->counters;
    int32_t Bm = d->Bm, A = d->n_actions;
    float delta = c->dqn.loss == RLT_DQN_LOSS_HUBER ? 1.0f : 0.0f;
    uint64_t O = (uint64_t)ag->obs_dim;

    RLT_TRY(op->flat(bk, RLT_FLAT_FILL, d->grads, NULL, d->n_params, 0.0f));
    RLT_TRY(op->counter_add(bk, &ctr[RLT_CTR_CRITIC_STEP], 1));
    rlt_sample_spec smp = {&ctr[RLT_CTR_REPLAY_SIZE], rp->f[DQN_F_VALID].data, c->seed, rlt_rank_stream(RLT_STREAM_SAMPLE, c->rank), 0, d->B,
                           &ctr[RLT_CTR_UPDATE]};
    if (d->N > 1) RLT_TRY(op->gather_fields(bk, d->idx, d->B, &smp, 0, NULL));
    for (int32_t m = 0; m < d->N; m++) {
        int32_t *idx = d->idx + (int64_t)m * Bm;
        const rlt_replay_field *fr = &rp->f[DQN_F_FRAME];
        rlt_gather_field f[5] = {
            {d->act_b, 4, rp->f[DQN_F_ACTION].data, 4, NULL, RLT_LP_F32},
            {d->r, 4, rp->f[DQN_F_REWARD].data, 4, NULL, RLT_LP_F32},
            {d->term, 4, rp->f[DQN_F_TERM].data, 4, NULL, RLT_LP_F32},
            {d->raw, O, fr->data, fr->row_bytes, NULL, RLT_LP_F32},
            /* s' is the frame in the slot the `next` field names. */
            {d->raw_next, O, fr->data, fr->row_bytes, (const int32_t *)rp->f[DQN_F_NEXT].data, RLT_LP_F32},
        };
        RLT_TRY(op->gather_fields(bk, idx, Bm, d->N == 1 ? &smp : NULL, 5, f));
        if (m == d->N - 1) RLT_TRY(op->counter_add(bk, &ctr[RLT_CTR_UPDATE], 1)); /* the sampling was its reader */
        RLT_TRY(mnet_convert(bk, &d->mnet, d->raw, Bm, d->x, d->u8_scale));
        RLT_TRY(mnet_convert(bk, &d->mnet, d->raw_next, Bm, d->x2, d->u8_scale));
        /* Target: y = r + gamma (1 - term) Q'(s', argmax_a Q(s', a)) (double) or max_a Q'(s', a). */
        if (c->dqn.double_q) RLT_TRY(mnet_forward(bk, &d->mnet, d->params, d->params_lp, d->x2, Bm, d->q_next_o, A));
        RLT_TRY(mnet_forward(bk, &d->mnet, d->target, d->target_lp, d->x2, Bm, d->q_next_t, A));
        RLT_TRY(mnet_forward(bk, &d->mnet, d->params, d->params_lp, d->x, Bm, d->q, A));
        rlt_q_loss ql = {.y = d->y, .dq = d->dq, .lddq = A, .loss = &ag->losses[RLT_LOSS_Q1], .q = d->q, .ldq = A,
                         .act = d->act_b, .r = d->r, .term = d->term, .q_next_target = d->q_next_t,
                         .q_next_online = c->dqn.double_q ? d->q_next_o : NULL, .ldqn = A, .n = Bm, .n_act = A,
                         .gamma = (float)c->dqn.gamma, .huber_delta = delta, .grad_scale = 1.0f / (float)d->N,
                         .gamma_dev = &ag->hparams[RLT_HP_DQN_GAMMA]};
        RLT_TRY(op->dqn_loss(bk, &ql));
        RLT_TRY(mnet_backward(bk, &d->mnet, d->params, d->params_lp, d->grads, d->x, Bm, d->dq, A, agent_loss_scale(ag)));
    }
    rlt_adam_hp hp = {(float)c->dqn.lr, 0.9f, 0.999f, 1e-8f};
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

int dqn_dict_policy(rlt_agent *ag, int32_t k) {
    rlt_dqn *d = dqn_state(ag);
    rlt_backend *bk = &ag->bk;
    RLT_TRY(mnet_convert(bk, &d->mnet_act, d->act_u8, k, d->act_x, d->u8_scale));
    /* A conv torso always runs its planned rows (acting plans 1). */
    return mnet_forward(bk, &d->mnet_act, d->params, NULL, d->act_x, d->mnet_act.n_conv ? d->act_batch : k, d->act_q,
                        d->n_actions);
}
