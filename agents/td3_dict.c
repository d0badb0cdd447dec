/* td3_dict.c: TD3 on dict observations (network.inputs). The actor and each twin critic have torsos of their own
 * (rlt_mnet), the critics' heads reading [torsos(s) | a]; replay rows are bytes (engine/config_inputs.h),
 * converted into each network's planar input after the gather. The losses, Adam, Polyak and the schedule are
 * td3.c's; the critics' gradients reach their torsos, the actor's loss reaches the actor's torso through d/da. */
#include "td3.h"

#include "algo.h"

#define F32 4u

int td3_dict_plan(rlt_agent *ag) {
    rlt_td3 *t = td3_state(ag);
    rlt_err *e = &ag->err;
    rlt_plan *p = &ag->plan;
    const rlt_config *c = &ag->cfg;
    int32_t A = t->A;
    uint64_t B = (uint64_t)t->Bm, R = (uint64_t)ag->obs_dim; /* bytes of one dict row */
    RLT_TRY(mnet_define(&t->actor_m, e, &c->network.inputs, 0, &c->td3.actor_hidden, A, RLT_ACT_TANH));
    RLT_TRY(mnet_define(&t->q1_m, e, &c->network.inputs, A, &c->td3.critic_hidden, 1, RLT_ACT_NONE));
    t->actor_m_act = t->actor_m;
    /* Reduced precision for the training networks' heads; the torsos and acting stay fp32. */
    t->actor_m.head.dtype = ag->lp;
    t->q1_m.head.dtype = ag->lp;
    t->q2_m = t->q1_m;
    t->act_batch = t->actor_m.n_conv ? 1 : 64; /* a conv torso runs at its planned batch */
    ag->act_rows = t->act_batch;
    t->n_actor = mnet_param_count(&t->actor_m);
    t->n_q1 = mnet_param_count(&t->q1_m);
    t->n_q2 = t->n_q1;
    t->n_total = t->n_actor + t->n_q1 + t->n_q2;
    uint64_t nb = t->n_total * F32;
    RLT_TRY(td3_plan_params(ag));
    /* The training networks' torsos have the same shapes and run one after another, so they share one range of
     * conv slots; the acting copy has its own. */
    RLT_TRY(mnet_plan(&t->actor_m, &ag->bk, p, e, "actor", t->Bm, 0, 1));
    RLT_TRY(mnet_plan(&t->q1_m, &ag->bk, p, e, "q1", t->Bm, 0, 1));
    RLT_TRY(mnet_plan(&t->q2_m, &ag->bk, p, e, "q2", t->Bm, 0, 1));
    RLT_TRY(mnet_plan(&t->actor_m_act, &ag->bk, p, e, "actor.acting", t->act_batch, t->actor_m.n_conv, 0));

    uint64_t X = (uint64_t)t->actor_m.in_elems;
    RLT_TRY(plan_add(p, e, "batch.idx", "batch", RLT_LOC_DEVICE, (uint64_t)t->B * 4, (void **)&t->idx));
    RLT_TRY(plan_add(p, e, "batch.obs_rows", "batch", RLT_LOC_DEVICE, B * R, (void **)&t->raw));
    RLT_TRY(plan_add(p, e, "batch.next_obs_rows", "batch", RLT_LOC_DEVICE, B * R, (void **)&t->raw_next));
    RLT_TRY(plan_add(p, e, "batch.obs", "batch", RLT_LOC_DEVICE, B * X * F32, (void **)&t->x));
    RLT_TRY(plan_add(p, e, "batch.next_obs", "batch", RLT_LOC_DEVICE, B * X * F32, (void **)&t->x2));
    float **mat[] = {&t->a_b, &t->a2, &t->pi};
    const char *mat_names[] = {"batch.action", "batch.target_action", "batch.pi"};
    for (int i = 0; i < 3; i++)
        RLT_TRY(plan_add(p, e, mat_names[i], "batch", RLT_LOC_DEVICE, B * (uint64_t)A * F32, (void **)mat[i]));
    float **vec[] = {&t->r, &t->term, &t->y, &t->q1o, &t->q2o, &t->qt1, &t->qt2, &t->dq1, &t->dq2, &t->dq_actor};
    const char *vec_names[] = {"batch.r", "batch.term", "batch.y", "batch.q1", "batch.q2", "batch.q1_target",
                               "batch.q2_target", "batch.dq1", "batch.dq2", "batch.dq_actor"};
    for (size_t i = 0; i < sizeof vec / sizeof vec[0]; i++)
        RLT_TRY(plan_add(p, e, vec_names[i], "batch", RLT_LOC_DEVICE, B * F32, (void **)vec[i]));
    RLT_TRY(plan_add(p, e, "inputs.u8_scale", "batch", RLT_LOC_DEVICE, (uint64_t)t->actor_m.n_parts * F32,
                     (void **)&t->u8_scale));
    RLT_TRY(plan_add(p, e, "acting.obs_rows", "batch", RLT_LOC_DEVICE, (uint64_t)t->act_batch * R, (void **)&t->act_raw));
    RLT_TRY(plan_add(p, e, "acting.obs", "batch", RLT_LOC_DEVICE, (uint64_t)t->act_batch * X * F32, (void **)&t->act_in));
    RLT_TRY(plan_add(p, e, "acting.action", "batch", RLT_LOC_DEVICE, (uint64_t)t->act_batch * A * F32,
                     (void **)&t->act_out));

    /* Replay fields in td3.c's order; the observations are the rows' bytes as they came. */
    RLT_TRY(replay_add_obs_field(&ag->replay, e, "obs", RLT_DTYPE_U8, R));
    RLT_TRY(replay_add_field(&ag->replay, e, "action", RLT_DTYPE_F32, (uint64_t)A));
    RLT_TRY(replay_add_field(&ag->replay, e, "reward", RLT_DTYPE_F32, 1));
    RLT_TRY(replay_add_field(&ag->replay, e, "terminated", RLT_DTYPE_F32, 1));
    RLT_TRY(replay_add_obs_field(&ag->replay, e, "next_obs", RLT_DTYPE_U8, R));
    ag->io_stage_bytes = nb;
    uint64_t act_io = (uint64_t)t->act_batch * (R + (uint64_t)A * F32) + 16; /* + the outputs' alignment */
    if (act_io > ag->io_stage_bytes) ag->io_stage_bytes = act_io;
    return RLT_OK;
}

int td3_dict_init_params(rlt_agent *ag, rlt_rng *rng) {
    rlt_td3 *t = td3_state(ag);
    float *h = ag->io_stage;
    mnet_init_params(&t->actor_m, h, rng);
    mnet_init_params(&t->q1_m, h + t->n_actor, rng);
    mnet_init_params(&t->q2_m, h + t->n_actor + t->n_q1, rng);
    return mnet_fill_u8_scales(&ag->bk, &t->actor_m, &ag->cfg.network.inputs, t->u8_scale);
}

/* Copies [Bm, A] actions (row stride A) into a critic's extra columns. */
static int put_action(rlt_backend *bk, rlt_mnet *q, const float *a, int32_t rows, int32_t A) {
    rlt_cast c = {.rows = rows, .cols = A, .dst = mnet_extra(q), .dst_dtype = RLT_LP_F32, .ldd = mnet_ld(q), .src = a,
                  .src_dtype = RLT_LP_F32, .lds = A};
    return bk->ops->cast(bk, &c);
}

/* td3_update_ops' update in the plain sequence on lane 0: each network has one activation set, so its forwards
 * run one after another, the one a backward reads last (the targets first, then Q(s, a); pi(s) after the
 * critics' step). */
int td3_dict_update_ops(rlt_agent *ag, int actor_step) {
    rlt_td3 *t = td3_state(ag);
    rlt_backend *bk = &ag->bk;
    const rlt_backend_ops *op = bk->ops;
    const rlt_config *c = &ag->cfg;
    rlt_replay *rp = &ag->replay;
    int32_t A = t->A, Bm = t->Bm, N = t->N;
    uint64_t R = (uint64_t)ag->obs_dim;
    int64_t *ctr = ag->counters;
    float *actor_p = t->params, *q1_p = t->params + t->n_actor, *q2_p = q1_p + t->n_q1;
    float *actor_tp = t->target, *q1_tp = t->target + t->n_actor, *q2_tp = q1_tp + t->n_q1;
    float *actor_g = t->grads, *q1_g = t->grads + t->n_actor, *q2_g = q1_g + t->n_q1;
    void *actor_pl = mlp_lp_ptr(t->params, t->params_lp, actor_p), *q1_pl = mlp_lp_ptr(t->params, t->params_lp, q1_p);
    void *q2_pl = mlp_lp_ptr(t->params, t->params_lp, q2_p), *actor_tl = mlp_lp_ptr(t->target, t->target_lp, actor_tp);
    void *q1_tl = mlp_lp_ptr(t->target, t->target_lp, q1_tp), *q2_tl = mlp_lp_ptr(t->target, t->target_lp, q2_tp);
    const float *S = agent_loss_scale(ag);
    float scale = 1.0f / (float)N;

    RLT_TRY(op->flat(bk, RLT_FLAT_FILL, q1_g, NULL, t->n_q1 + t->n_q2, 0.0f));
    RLT_TRY(op->counter_add(bk, &ctr[RLT_CTR_CRITIC_STEP], 1));
    if (actor_step) {
        RLT_TRY(op->flat(bk, RLT_FLAT_FILL, actor_g, NULL, t->n_actor, 0.0f));
        RLT_TRY(op->counter_add(bk, &ctr[RLT_CTR_ACTOR_STEP], 1));
        RLT_TRY(op->flat(bk, RLT_FLAT_FILL, t->dq_actor, NULL, (uint64_t)Bm, -scale / (float)Bm));
    }
    rlt_sample_spec all = {.size = &ctr[RLT_CTR_REPLAY_SIZE], .seed = c->seed, .stream = rlt_rank_stream(RLT_STREAM_SAMPLE, c->rank),
                           .batch = t->B, .counter = &ctr[RLT_CTR_UPDATE]};
    if (N > 1) RLT_TRY(op->gather_fields(bk, t->idx, t->B, &all, 0, NULL));
    for (int32_t m = 0; m < N; m++) {
        rlt_gather_field f[5] = {
            {t->raw, R, rp->f[0].data, rp->f[0].row_bytes, NULL, RLT_LP_F32},
            {t->a_b, (uint64_t)A * F32, rp->f[1].data, rp->f[1].row_bytes, NULL, RLT_LP_F32},
            {t->r, F32, rp->f[2].data, rp->f[2].row_bytes, NULL, RLT_LP_F32},
            {t->term, F32, rp->f[3].data, rp->f[3].row_bytes, NULL, RLT_LP_F32},
            {t->raw_next, R, rp->f[4].data, rp->f[4].row_bytes, NULL, RLT_LP_F32},
        };
        RLT_TRY(op->gather_fields(bk, t->idx + (int64_t)m * Bm, Bm, N == 1 ? &all : NULL, 5, f));
        RLT_TRY(mnet_convert(bk, &t->actor_m, t->raw, Bm, t->x, t->u8_scale));
        RLT_TRY(mnet_convert(bk, &t->actor_m, t->raw_next, Bm, t->x2, t->u8_scale));
        /* Target: y = r + gamma (1 - term) min(Q1'(s', a'), Q2'(s', a')), a' = clip(pi'(s') + clip(noise)). */
        RLT_TRY(mnet_forward(bk, &t->actor_m, actor_tp, actor_tl, t->x2, Bm, t->a2, A));
        rlt_target_noise tn = {.a = t->a2, .lda = A, .rows = Bm, .cols = A, .std = (float)c->td3.policy_noise,
                               .clip = (float)c->td3.noise_clip, .seed = c->seed, .stream = rlt_rank_stream(RLT_STREAM_TARGET, c->rank),
                               .counter = &ctr[RLT_CTR_UPDATE], .row0 = m * Bm,
                               .std_dev = &ag->hparams[RLT_HP_TD3_POLICY_NOISE],
                               .clip_dev = &ag->hparams[RLT_HP_TD3_NOISE_CLIP]};
        RLT_TRY(op->td3_target_action(bk, &tn));
        RLT_TRY(put_action(bk, &t->q1_m, t->a2, Bm, A));
        RLT_TRY(mnet_forward(bk, &t->q1_m, q1_tp, q1_tl, t->x2, Bm, t->qt1, 1));
        RLT_TRY(put_action(bk, &t->q2_m, t->a2, Bm, A));
        RLT_TRY(mnet_forward(bk, &t->q2_m, q2_tp, q2_tl, t->x2, Bm, t->qt2, 1));
        RLT_TRY(put_action(bk, &t->q1_m, t->a_b, Bm, A));
        RLT_TRY(mnet_forward(bk, &t->q1_m, q1_p, q1_pl, t->x, Bm, t->q1o, 1));
        RLT_TRY(put_action(bk, &t->q2_m, t->a_b, Bm, A));
        RLT_TRY(mnet_forward(bk, &t->q2_m, q2_p, q2_pl, t->x, Bm, t->q2o, 1));
        rlt_td3_loss tl = {.y = t->y, .dq1 = t->dq1, .dq2 = t->dq2, .loss1 = &ag->losses[RLT_LOSS_Q1],
                           .loss2 = &ag->losses[RLT_LOSS_Q2], .q1 = t->q1o, .q2 = t->q2o, .qt1 = t->qt1, .qt2 = t->qt2,
                           .r = t->r, .term = t->term, .n = Bm, .gamma = (float)c->td3.gamma, .grad_scale = scale,
                           .gamma_dev = &ag->hparams[RLT_HP_TD3_GAMMA]};
        RLT_TRY(op->td3_critic_loss(bk, &tl));
        /* Every reader of the update counter (sampling, target noise) is behind us. */
        if (m == N - 1) RLT_TRY(op->counter_add(bk, &ctr[RLT_CTR_UPDATE], 1));
        RLT_TRY(mnet_backward(bk, &t->q1_m, q1_p, q1_pl, q1_g, t->x, Bm, t->dq1, 1, S));
        RLT_TRY(mnet_backward(bk, &t->q2_m, q2_p, q2_pl, q2_g, t->x, Bm, t->dq2, 1, S));
    }
    rlt_adam_hp critic_hp = {(float)c->td3.critic_lr, 0.9f, 0.999f, 1e-8f};
    RLT_TRY(agent_grads_ready(ag, q1_g, t->n_q1 + t->n_q2));
    rlt_adam_step critic_st = {.p = q1_p, .g = q1_g, .m = t->adam_m + t->n_actor, .v = t->adam_v + t->n_actor,
                               .n = t->n_q1 + t->n_q2, .hp = critic_hp, .step = &ctr[RLT_CTR_CRITIC_STEP],
                               .target = actor_step ? q1_tp : NULL, .tau = (float)c->td3.tau, .p_lp = q1_pl,
                               .target_lp = q1_tl, .lp_dtype = ag->lp, .skip = agent_amp_skip(ag),
                               .lr_dev = &ag->hparams[RLT_HP_TD3_CRITIC_LR], .tau_dev = &ag->hparams[RLT_HP_TD3_TAU]};
    RLT_TRY(bk->ops->adam(bk, &critic_st));
    RLT_TRY(agent_amp_update(ag, &ctr[RLT_CTR_CRITIC_STEP]));
    if (!actor_step) return op->lane(bk, RLT_LANE_JOIN);

    /* Actor step on -mean Q1(s, pi(s)) with the critic just updated; only d/da flows back through Q1 (its
     * torso gets no gradient), then through the actor's head into the actor's torsos. */
    for (int32_t m = 0; m < N; m++) {
        if (N > 1) {
            rlt_gather_field f = {t->raw, R, rp->f[0].data, rp->f[0].row_bytes, NULL, RLT_LP_F32};
            RLT_TRY(op->gather_fields(bk, t->idx + (int64_t)m * Bm, Bm, NULL, 1, &f));
            RLT_TRY(mnet_convert(bk, &t->actor_m, t->raw, Bm, t->x, t->u8_scale));
        }
        RLT_TRY(mnet_forward(bk, &t->actor_m, actor_p, actor_pl, t->x, Bm, t->pi, A));
        RLT_TRY(put_action(bk, &t->q1_m, t->pi, Bm, A));
        RLT_TRY(mnet_forward(bk, &t->q1_m, q1_p, q1_pl, t->x, Bm, t->q1o, 1));
        RLT_TRY(op->sum(bk, &ag->losses[RLT_LOSS_ACTOR], t->q1o, 1, Bm, -1.0f / (float)Bm));
        RLT_TRY(mnet_backward(bk, &t->q1_m, q1_p, q1_pl, NULL, t->x, Bm, t->dq_actor, 1, S));
        float *d_a = t->q1_m.dcat + t->q1_m.features; /* d/da, the critic input's action columns */
        RLT_TRY(mnet_backward(bk, &t->actor_m, actor_p, actor_pl, actor_g, t->x, Bm, d_a, mnet_ld(&t->q1_m), NULL));
    }
    RLT_TRY(td3_actor_adam(ag, actor_p, actor_g, actor_tp, actor_pl, actor_tl));
    return op->lane(bk, RLT_LANE_JOIN);
}

int td3_dict_policy(rlt_agent *ag, int32_t k) {
    rlt_td3 *t = td3_state(ag);
    rlt_backend *bk = &ag->bk;
    RLT_TRY(mnet_convert(bk, &t->actor_m_act, t->act_raw, k, t->act_in, t->u8_scale));
    return mnet_forward(bk, &t->actor_m_act, t->params, NULL, t->act_in, t->actor_m_act.n_conv ? t->act_batch : k,
                        t->act_out, t->A);
}
