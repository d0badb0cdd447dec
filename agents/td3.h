/* td3.h: TD3 (Fujimoto, van Hoof and Meger 2018, "Addressing Function Approximation Error in Actor-Critic
 * Methods") on the backend interface: twin critics with clipped double-Q targets, target policy smoothing,
 * delayed actor and target updates. Actions are normalised to [-1, 1] inside; the agent API scales them to
 * the action space's bounds.
 *
 * Memory: one flat block per role with the layout [actor | q1 | q2]: params, grads, adam_m, adam_v and
 * target share offsets, so zero-grad, Adam (one pass per optimiser) and Polyak (one pass for all targets)
 * are flat operations. */
#ifndef RLT_TD3_H
#define RLT_TD3_H

#include "mlp.h"
#include "mnet.h"

struct rlt_agent;

typedef struct rlt_td3 {
    rlt_mlp actor, actor_act, q1, q2; /* actor_act: the actor's activations for acting (act_batch rows) */
    uint64_t n_actor, n_q1, n_q2, n_total;
    float *params, *grads, *adam_m, *adam_v, *target; /* device, n_total floats each */
    void *params_lp, *target_lp; /* 16-bit compute copies of params and target (reduced precision), else NULL */
    int32_t B, O, A, act_batch;
    int32_t N, Bm; /* micro-batches per update (train.grad_accum_steps) and their size */
    /* Batch buffers (device). s_a = [obs | action] (critic input), s2_a2 = [next_obs | target action]. */
    int32_t *idx;
    float *s_a, *s2_a2, *d_sa, *r, *term, *y, *q1o, *q2o, *qt1, *qt2, *dq1, *dq2;
    /* The actor step's own input [obs | pi(obs)] (so pi(obs) can be computed while the critic still reads s_a)
     * and its constant loss gradient d(-mean Q1)/dQ1. */
    float *s_pi, *dq_actor;
    float *act_in, *act_out; /* acting: [act_batch, O] -> [act_batch, A] */
    /* Dict observations (network.inputs; td3_dict.c): the networks are rlt_mnets (actor, its acting copy, the
     * twin critics, whose heads read [torsos | action]); actor, actor_act, q1 and q2 stay unused. Replay rows
     * are bytes, gathered into raw / raw_next and converted into the planar x / x2; a_b holds the sampled
     * actions, a2 the target actions, pi the actor's pi(s); act_raw the acting rows (act_in is then planar). */
    int32_t dict;
    rlt_mnet actor_m, actor_m_act, q1_m, q2_m;
    uint8_t *raw, *raw_next, *act_raw;
    float *x, *x2, *a_b, *a2, *pi, *u8_scale;
} rlt_td3;

/* The agent's TD3 state (the algorithm's state block; see agents/algo.h). */
rlt_td3 *td3_state(const struct rlt_agent *ag);
int td3_plan(struct rlt_agent *ag);
int td3_init_state(struct rlt_agent *ag);
/* The ops of one update; actor_step selects the delayed actor and target update. Runs eagerly, or inside
 * a graph capture on backends that capture; independent chains (the twin critics, the online and target
 * forwards) run on separate lanes (the backend's lane op), which a captured graph turns into parallel branches. */
int td3_update_ops(struct rlt_agent *ag, int actor_step);
/* Deterministic actions in [-1, 1] for n observations already in act_in (device). */
int td3_policy(struct rlt_agent *ag, int32_t n);
/* The dict-observation halves (td3_dict.c): plan, initial parameters, one update, and the policy of the k rows
 * already in act_raw. */
/* Shared by both network kinds (td3.c): the parameter roles' plan and the actor's Adam + Polyak step. */
int td3_plan_params(struct rlt_agent *ag);
int td3_actor_adam(struct rlt_agent *ag, float *actor_p, float *actor_g, float *actor_tp, void *actor_pl, void *actor_tl);
int td3_dict_plan(struct rlt_agent *ag);
int td3_dict_init_params(struct rlt_agent *ag, rlt_rng *rng);
int td3_dict_update_ops(struct rlt_agent *ag, int actor_step);
int td3_dict_policy(struct rlt_agent *ag, int32_t k);

#endif
