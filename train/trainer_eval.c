/* trainer_eval.c: the trainer's evaluation (trainer.h): train.eval_episodes deterministic episodes, eval_rows of them
 * side by side, acted on together.
 *
 * Episode j of an evaluation starts its environment at counter ctr0 + j * EVAL_EPISODE_CTR of the evaluation
 * stream, ctr0 being where the stream stood when the evaluation began, which then moves on by eval_episodes of them:
 * so an episode's start (and any noise of the environment's own) depends on j alone, not on which copy of the
 * environment runs it or how many run together, and the stream's state is still the three integers a checkpoint
 * keeps. Episodes run in waves of eval_rows copies (built-in environments: as many as one acting launch takes, at most
 * eval_episodes, spread evenly over the waves; a user environment's single evaluation instance runs them one by
 * one); each step acts on all the wave's rows at once, finished episodes' rows included (their last observation; the
 * actions are not used), so the row count is fixed, which a seed group's batched acting needs (train/seed_batch.h).
 * The returns are summed in episode order. */
#include <stdlib.h>
#include <string.h>

#include "mem.h"
#include "trainer.h"

/* Counter values between two episodes' starts: far more draws than any episode makes. */
#define EVAL_EPISODE_CTR (1ull << 40)
/* The most copies of a built-in evaluation environment (an acting launch's rows; agents act on fewer). */
#define EVAL_MAX_ROWS 64

static rlt_env *eval_env_of(rlt_trainer *tr, int32_t i) { return i == 0 ? &tr->eval_env : &tr->eval_more[i - 1]; }

int trainer_eval_init(rlt_trainer *tr) {
    rlt_err *e = &tr->err;
    const rlt_config *c = &tr->cfg;
    int32_t w = tr->user_env ? 1 : c->train.eval_episodes < EVAL_MAX_ROWS ? c->train.eval_episodes : EVAL_MAX_ROWS;
    if (w < 1) w = 1;
    tr->eval_cap = w;
    tr->eval_rows = 1;
    if (w > 1) {
        tr->eval_more = rlt_mem_alloc(sizeof *tr->eval_more * (uint64_t)(w - 1), 64);
        if (!tr->eval_more) RLT_FAIL(e, RLT_ENOMEM, "out of host memory for %d evaluation environments", (int)w);
        for (int32_t i = 0; i < w - 1; i++)
            RLT_TRY(rlt_env_make(&tr->eval_more[i], e, c->env.name, c->seed + 100, RLT_STREAM_EVAL_ENV, c->env.max_episode_steps));
    }
    uint64_t ob = (uint64_t)rlt_space_bytes(&tr->eval_env.obs_space), ab = (uint64_t)tr->eval_env.act_space.shape[0] * 4;
    tr->eval_obs = rlt_mem_alloc(ob * (uint64_t)w, 64);
    tr->eval_act = rlt_mem_alloc(ab * (uint64_t)w, 64);
    tr->eval_ret = rlt_mem_alloc(sizeof *tr->eval_ret * (uint64_t)w, 64);
    tr->eval_live = rlt_mem_alloc((uint64_t)w, 64);
    if (!tr->eval_obs || !tr->eval_act || !tr->eval_ret || !tr->eval_live)
        RLT_FAIL(e, RLT_ENOMEM, "out of host memory for the evaluation's %d rows", (int)w);
    return RLT_OK;
}

int32_t trainer_eval_rows_for(int32_t episodes, int32_t cap, int32_t act_rows) {
    int32_t w = cap < act_rows ? cap : act_rows;
    if (w < 1 || episodes < 1) return 1;
    if (w > episodes) w = episodes;
    int32_t waves = (episodes + w - 1) / w;
    return (episodes + waves - 1) / waves; /* the same rows in every wave, the last at most as many */
}

void trainer_eval_set_rows(rlt_trainer *tr) {
    tr->eval_rows = trainer_eval_rows_for(tr->cfg.train.eval_episodes, tr->eval_cap, tr->agent->act_rows);
}

void trainer_eval_free(rlt_trainer *tr) {
    rlt_mem_free(tr->eval_more);
    rlt_mem_free(tr->eval_obs);
    rlt_mem_free(tr->eval_act);
    rlt_mem_free(tr->eval_ret);
    rlt_mem_free(tr->eval_live);
}

/* Mean return of eval_episodes deterministic episodes (see the top). A stop request (SIGINT) made during it ends it
 * between two of its steps; one made before it began (during the training step it follows) lets it run, as a part of
 * that step. The random streams a cut evaluation drew from (the evaluation environment's, and the agent's for DQN's
 * eval_epsilon) go back to where they were before it, and eval_pending tells final.ckpt that this evaluation is
 * still due: a resumed run does it whole first, as the uninterrupted run did. */
int trainer_evaluate(rlt_trainer *tr, double *mean) {
    const int32_t E = tr->cfg.train.eval_episodes, W = tr->eval_rows;
    const rlt_rng stream = tr->eval_env.rng, explore_rng = tr->agent->explore_rng;
    const int stop_before = tr->stop != 0;
    const uint64_t ob = (uint64_t)rlt_space_bytes(&tr->eval_env.obs_space), ab = (uint64_t)tr->eval_env.act_space.shape[0] * 4;
    unsigned char *obs = tr->eval_obs, *act = tr->eval_act;
    double total = 0.0;
    for (int32_t first = 0; first < E; first += W) {
        const int32_t w = E - first < W ? E - first : W;
        for (int32_t i = 0; i < w; i++) {
            rlt_env *env = eval_env_of(tr, i);
            env->rng = stream;
            env->rng.ctr = stream.ctr + (uint64_t)(first + i) * EVAL_EPISODE_CTR;
            RLT_TRY(trainer_env_call(tr, env, rlt_env_reset(env, obs + (uint64_t)i * ob)));
            tr->eval_ret[i] = 0.0;
            tr->eval_live[i] = 1;
        }
        int32_t live = w;
        for (int64_t t = 0; live > 0; t++) {
            /* The ranks of a data-parallel run stop together, at a step (trainer_stop_agreed), never inside one. */
            if (tr->stop && !stop_before && !tr->cfg.comm) {
                tr->eval_env.rng = stream;
                tr->agent->explore_rng = explore_rng;
                tr->eval_pending = 1;
                RLT_FAIL(&tr->err, RLT_EINTERRUPTED, "stopped on request during the evaluation at step %lld (a run "
                         "resumed from final.ckpt does this evaluation first)", (long long)tr->prog.env_steps);
            }
            /* Every episode of the wave started together: with no time limit all are cut at once. */
            if (tr->eval_env.max_steps <= 0 && t == RLT_EVAL_MAX_EPISODE_STEPS) break;
            RLT_TRY(trainer_agent_call(tr, rlt_agent_act(tr->agent, obs, w, 0, act)));
            for (int32_t i = 0; i < w; i++) {
                if (!tr->eval_live[i]) continue;
                rlt_env *env = eval_env_of(tr, i);
                float r;
                uint8_t term = 0, trunc = 0;
                RLT_TRY(trainer_env_call(tr, env, rlt_env_step(env, act + (uint64_t)i * ab, obs + (uint64_t)i * ob, &r,
                                                               &term, &trunc)));
                tr->eval_ret[i] += r;
                if (term || trunc) {
                    tr->eval_live[i] = 0;
                    live--;
                }
            }
        }
        for (int32_t i = 0; i < w; i++) total += tr->eval_ret[i];
    }
    tr->eval_env.rng = stream;
    tr->eval_env.rng.ctr = stream.ctr + (uint64_t)E * EVAL_EPISODE_CTR;
    *mean = total / E;
    tr->eval_pending = 0;
    return RLT_OK;
}
