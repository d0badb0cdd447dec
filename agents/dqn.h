/* dqn.h: DQN (Mnih et al. 2015, "Human-level control through deep reinforcement learning") with double
 * DQN (van Hasselt, Guez and Silver 2016) on by default, Huber or MSE loss, hard or Polyak target updates,
 * a linear epsilon schedule and global gradient-norm clipping, on the backend interface.
 *
 * Replay stores each observation once, as a frame in a ring; a transition's next observation is the
 * frame in the following slot. When an episode ends (terminated or truncated), the real final observation
 * goes into the following slot as a frame that starts no transition (its valid byte is 0), and the next
 * episode starts one slot later: the next observation after a truncation is never the next episode's
 * first observation. */
#ifndef RLT_DQN_H
#define RLT_DQN_H

#include "mnet.h"
#include "qnet.h"

typedef struct rlt_dqn {
    rlt_qnet net;     /* training batch */
    rlt_qnet net_act; /* acting batch */
    uint64_t n_params;
    float *params, *grads, *adam_m, *adam_v, *target; /* device, n_params floats each */
    void *params_lp, *target_lp; /* 16-bit compute copies of params and target (reduced precision), else NULL */
    int32_t B, n_actions, act_batch, obs_u8;
    float obs_scale; /* uint8 observations: 1 / the space's largest value (255 unless it declares high) */
    int32_t N, Bm; /* micro-batches per update (train.grad_accum_steps) and their size */
    int32_t *idx, *idx_next, *act_b;
    float *x, *x2, *r, *term, *y, *q, *dq, *q_next_t, *q_next_o, *grad_norm;
    float *act_x, *act_q;
    uint8_t *act_u8; /* device staging for u8 observations being acted on */
    int64_t advances;  /* ring slots the write position has moved over, in total */
    int32_t prev_ended;
    int64_t sched_last; /* env steps the training schedule has been run up to; -1 until the first update call */
    /* Dict observations (network.inputs): the networks are rlt_mnets and net / net_act stay unused; the
     * replay's frames are rows of bytes, gathered into raw / raw_next and converted into the planar x / x2
     * (act_u8 holds the acting rows); u8_scale holds one device float per part, 1 / its high. See dqn_dict.c. */
    int32_t dict;
    rlt_mnet mnet, mnet_act;
    uint8_t *raw, *raw_next;
    float *u8_scale;
} rlt_dqn;

struct rlt_agent;

/* The agent's DQN state (the algorithm's state block; see agents/algo.h). */
rlt_dqn *dqn_state(const struct rlt_agent *ag);

/* Replay field order of DQN. */
enum { DQN_F_FRAME = 0, DQN_F_VALID, DQN_F_NEXT, DQN_F_ACTION, DQN_F_REWARD, DQN_F_TERM, DQN_F_COUNT };

/* The dict-observation halves of dqn.c's plan, initial state, update and policy (dqn_dict.c). */
/* Plan pieces both networks share (dqn.c), in the order dqn_plan adds them. */
int dqn_plan_params(struct rlt_agent *ag);
int dqn_plan_targets(struct rlt_agent *ag);
int dqn_plan_replay(struct rlt_agent *ag, int32_t frame_dtype, uint64_t obs_elems);
int dqn_dict_plan(struct rlt_agent *ag);
int dqn_dict_init_params(struct rlt_agent *ag, rlt_rng *rng);
int dqn_dict_update_ops(struct rlt_agent *ag);
/* Q-values of the k dict rows already in act_u8 into act_q. */
int dqn_dict_policy(struct rlt_agent *ag, int32_t k);

/* Epsilon of the linear schedule after `env_steps` steps (exposed for tests). */
double dqn_epsilon(const rlt_dqn *d, double eps_start, double eps_end, double fraction, int64_t total, int64_t env_steps);

#endif
