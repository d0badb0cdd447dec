/* agent_core.c: the optimiser-step services of engine/agent_core.h: what an algorithm's update and checkpoint
 * hooks call on the agent (staging copies through io_stage, the gradient average and fp16 unscaling before a
 * step, the loss scaler after it, the 16-bit compute copies, config values for network descriptions). */
#include <string.h>

#include "agent_core.h"
#include "config_schema.h"

int agent_put(rlt_agent *ag, void *dev, const void *host, uint64_t bytes) {
    rlt_backend *bk = &ag->bk;
    for (uint64_t off = 0; off < bytes; off += ag->io_stage_bytes) {
        uint64_t k = bytes - off < ag->io_stage_bytes ? bytes - off : ag->io_stage_bytes;
        if ((const unsigned char *)host + off != (unsigned char *)ag->io_stage)
            memcpy(ag->io_stage, (const unsigned char *)host + off, k);
        RLT_TRY(bk->ops->copy(bk, (unsigned char *)dev + off, ag->io_stage, k, RLT_COPY_H2D));
        RLT_TRY(bk->ops->sync(bk));
    }
    return RLT_OK;
}

void agent_hparams_values(const rlt_config *c, float out[RLT_HP_COUNT]) {
    memset(out, 0, RLT_HP_COUNT * sizeof(float));
    out[RLT_HP_TD3_ACTOR_LR] = (float)c->td3.actor_lr;
    out[RLT_HP_TD3_CRITIC_LR] = (float)c->td3.critic_lr;
    out[RLT_HP_TD3_TAU] = (float)c->td3.tau;
    out[RLT_HP_TD3_GAMMA] = (float)c->td3.gamma;
    out[RLT_HP_TD3_POLICY_NOISE] = (float)c->td3.policy_noise;
    out[RLT_HP_TD3_NOISE_CLIP] = (float)c->td3.noise_clip;
    out[RLT_HP_DQN_LR] = (float)c->dqn.lr;
    out[RLT_HP_DQN_GAMMA] = (float)c->dqn.gamma;
    out[RLT_HP_DQN_MAX_GRAD_NORM] = c->dqn.max_grad_norm > 0 ? (float)c->dqn.max_grad_norm : 0.0f;
}

int agent_write_hparams(rlt_agent *ag) {
    float hp[RLT_HP_COUNT];
    agent_hparams_values(&ag->cfg, hp);
    return agent_put(ag, ag->hparams, hp, sizeof hp);
}

int agent_fetch(rlt_agent *ag, void *host, const void *dev, uint64_t bytes) {
    rlt_backend *bk = &ag->bk;
    for (uint64_t off = 0; off < bytes; off += ag->io_stage_bytes) {
        uint64_t k = bytes - off < ag->io_stage_bytes ? bytes - off : ag->io_stage_bytes;
        RLT_TRY(bk->ops->copy(bk, ag->io_stage, (const unsigned char *)dev + off, k, RLT_COPY_D2H));
        RLT_TRY(bk->ops->sync(bk));
        if ((unsigned char *)host + off != (unsigned char *)ag->io_stage) memcpy((unsigned char *)host + off, ag->io_stage, k);
    }
    return RLT_OK;
}

uint64_t agent_bucket_floats(const rlt_agent *ag, uint64_t n) {
    double mb = ag->cfg.dist.bucket_mb;
    if (ag->cfg.n_ranks < 2 || !(mb > 0.0)) return 0;
    double f = mb * 1048576.0 / 4.0;
    uint64_t k = f < 1.0 ? 1 : (uint64_t)f;
    return n >= 2 * k ? k : 0;
}

int agent_grads_bucket(void *agent, float *g, uint64_t n) {
    rlt_agent *ag = agent;
    RLT_TRY(ag->bk.ops->allreduce_mean(&ag->bk, g, n, 1));
    ag->bucket_done += n;
    return RLT_OK;
}

int agent_grads_ready(rlt_agent *ag, float *g, uint64_t n) {
    if (ag->bucket_done == 0) {
        RLT_TRY(ag->bk.ops->allreduce_mean(&ag->bk, g, n, 0));
    } else {
        uint64_t done = ag->bucket_done;
        ag->bucket_done = 0;
        if (done != n)
            RLT_FAIL(&ag->err, RLT_ESTATE, "gradient buckets averaged %llu floats of a block of %llu",
                     (unsigned long long)done, (unsigned long long)n);
        /* The buckets ran on the comm lane: lane 0 waits for them before the unscale and the step. */
        RLT_TRY(ag->bk.ops->lane(&ag->bk, RLT_LANE_JOIN));
    }
    return ag->amp ? ag->bk.ops->amp(&ag->bk, &(rlt_amp_op){.mode = RLT_AMP_UNSCALE, .amp = ag->amp, .g = g, .n = n})
                   : RLT_OK;
}

int agent_amp_update(rlt_agent *ag, int64_t *step) {
    if (!ag->amp) return RLT_OK;
    return ag->bk.ops->amp(&ag->bk, &(rlt_amp_op){.mode = RLT_AMP_UPDATE, .amp = ag->amp, .step = step, .growth = 2.0f,
                                                  .backoff = 0.5f, .growth_interval = RLT_AMP_GROWTH_INTERVAL});
}

int agent_refresh_lp(rlt_agent *ag, const float *p, void *p_lp, const float *t, void *t_lp, uint64_t n) {
    if (ag->lp == RLT_LP_F32) return RLT_OK;
    rlt_backend *bk = &ag->bk;
    rlt_cast c = {.rows = 1, .cols = (int64_t)n, .dst = p_lp, .dst_dtype = ag->lp, .ldd = (int64_t)n, .src = p,
                  .src_dtype = RLT_LP_F32, .lds = (int64_t)n};
    RLT_TRY(bk->ops->cast(bk, &c));
    c.dst = t_lp;
    c.src = t;
    return bk->ops->cast(bk, &c);
}

void agent_key_text(rlt_text *o, const rlt_agent *ag, const char *label, const char *key) {
    char v[256];
    config_schema_format(config_schema_find(key, strlen(key)), &ag->cfg, v, sizeof v);
    rlt_text_add(o, "%s: %s", label, v);
}

