/* seed_batch.c: see seed_batch.h. The capture of the batched update and acting graphs, and the lock-step that launches them. */
#include <pthread.h>
#include <sched.h>
#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
#endif
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"
#include "clock.h"
#include "mem.h"
#include "seed_batch.h"

/* Arrivals are counted under mu; the agents that wait spin on their own served count (and failed), which the last
 * to arrive advances after the launch that ran their request: a round costs microseconds, too short for a
 * condition variable's wake-ups (16 threads woken one after another took longer than the batched update itself).
 * A waiter yields its core after a short spin, so seeds outnumbering the cores still make progress. Where the seeds
 * and the threads beside them (the caller's, the CUDA runtime's) need about every core, yielding is not enough: a
 * spinning thread holds its core until the scheduler preempts it, milliseconds, while a seed that has work waits
 * for one (64 seeds on a 64-core machine took 179 s, 40x one seed, against 35 s with 64 seeds on 32 cores). There
 * the waiters sleep on a futex (the round count `gen`), and the launching thread wakes them all in one call once it
 * has served them. */
enum { LS_NONE = 0, LS_UPDATE = 1, LS_ACT = 2 };
struct rlt_lockstep {
    pthread_mutex_t mu;
    int32_t n;
    int32_t active;  /* agents still running (under mu) */
    int32_t arrived; /* agents waiting (under mu) */
    atomic_int failed;  /* a round failed: every later call fails too */
    char why[sizeof(((rlt_err *)0)->msg) + 64];
    rlt_agent **agents;
    rlt_backend **bks;
    int32_t *kind, *slot;   /* what agent k waits for (under mu): LS_NONE, or an update or acting graph slot */
    atomic_uint *served;    /* agent k's requests run so far */
    int32_t n_act, act_rows[SEED_BATCH_ACTS], act_slot[SEED_BATCH_ACTS];
    char act_why[sizeof(((rlt_err *)0)->msg) + 64];
    uint64_t act_rounds, update_rounds; /* under mu */
    uint32_t spin; /* pauses before a waiter yields or sleeps (lockstep_set_threads) */
    int sleep;     /* waiters sleep on gen instead of yielding (lockstep_set_threads) */
    atomic_uint gen;      /* rounds served or failed: what sleeping waiters wait on */
    atomic_int sleepers;  /* waiters asleep, or about to sleep, on gen */
    /* The seeds' transition stores run by each round (rlt_backend_ops.copy_lists): the seed table's host deltas on
     * the device, or NULL when each agent issues its own copies; store_rounds: the rounds that ran them (under mu). */
    const int64_t *store_hdelta;
    uint64_t store_rounds;
    /* Acting rounds beside the batched updates (the lead's graph op, ASIDE modes; train/agent.c says how for one
     * agent): aside 1 when the group may (the lead may, and acting is captured); aside_marked 1 while every batched
     * update since the lead's mark left what acting reads as it was; aside_rounds the acting rounds that ran beside
     * (under mu). */
    int32_t aside, aside_marked;
    uint64_t aside_rounds;
    /* Where a round's time goes (under mu; lockstep_times): t_end the end of the last round, t_first and t_last the
     * first and last arrivals of this one; first_s and gap_s the sums of t_first - t_end (what every seed pays
     * before it is back: waking, the launching seed's return) and of t_last - t_end (the slowest seed's host work
     * between two rounds), run_s of the launch and its sync after it, for acting [0] and update [1] rounds. */
    double t_end, t_first, t_last, first_s[2], gap_s[2], run_s[2];
};

/* Under mu, after a round of kind i (0 acting, 1 update) launched: its times. */
static void lockstep_timed(rlt_lockstep *ls, int i) {
    double now = rlt_now_s();
    if (ls->t_end > 0) {
        ls->gap_s[i] += ls->t_last - ls->t_end;
        /* a seed that waited through the round before (for an update, while others acted) arrived before it ended */
        ls->first_s[i] += ls->t_first > ls->t_end ? ls->t_first - ls->t_end : 0.0;
    }
    ls->run_s[i] += now - ls->t_last;
    ls->t_end = now;
}

uint64_t seed_batch_table_bytes(int32_t n) {
    return n > 1 ? (uint64_t)n * (sizeof(int64_t) + sizeof(uint64_t) + sizeof(int64_t)) : 0;
}

/* The library workspace, the device arena's last entry: sized by each agent's lanes (the lead keeps its own, the
 * others run on one), and never read by a batched launch, whose library products use the lead's. The plans must
 * agree on everything before it. */
#define SEED_BATCH_WORKSPACE "backend.workspace"
static uint64_t seed_batch_arena_core(const rlt_plan *p) {
    for (int32_t i = 0; i < p->n; i++)
        if (!strcmp(p->entries[i].name, SEED_BATCH_WORKSPACE) && p->entries[i].location == RLT_LOC_DEVICE)
            return p->entries[i].offset;
    return p->arena_bytes[RLT_LOC_DEVICE];
}

/* What one seed's update multiplies, to a constant: the batch times the weights of its hidden products (the hidden
 * widths' consecutive products over TD3's actor and two critics, or DQN's dense layers). */
static double seed_batch_work(const rlt_config *c) {
    const rlt_int_list *nets[3] = {&c->network.hidden, NULL, NULL};
    if (!strcmp(c->algo, "td3")) nets[0] = &c->td3.actor_hidden, nets[1] = nets[2] = &c->td3.critic_hidden;
    double w = 0.0;
    for (int i = 0; i < 3 && nets[i]; i++)
        for (int32_t j = 1; j < nets[i]->n; j++) w += (double)nets[i]->v[j - 1] * nets[i]->v[j];
    return w * c->train.batch_size;
}

/* train.seed_batches 0 (the default): batches of four seeds or more, at most four a GPU, and at most two where a
 * seed's update is large (seed_batch_work over 24M: TD3 256-256 at batch 256 is 50M, DQN 256-256 at batch 64 4M), whose
 * batched update fills the GPU. Measured on an H200 (bench/RESULTS.md, seed groups end to end): 4 batches took 16
 * DQN CartPole seeds 8.62 -> 6.44 s and 64 16.06 -> 13.46 s; TD3 Pendulum groups lost 2-4% with 4 and gained 0-7% with
 * 2 (32 seeds 15.69 -> 14.65 s, 64 25.1-25.6 -> 23.8-24.5 s). */
int32_t seed_batch_auto(const rlt_config *group, int32_t per_device) {
    const int32_t most = seed_batch_work(group) > 24e6 ? 2 : 4, k = per_device / 4;
    return k < 1 ? 1 : k > most ? most : k;
}

int32_t seed_batch_count(const rlt_config *group, int32_t n, int dp) {
    if (dp) return 1;
    const int32_t d = group->devices.n > 1 ? group->devices.n : 1;
    const int32_t asked = group->train.seed_batches > 0 ? group->train.seed_batches : seed_batch_auto(group, n / d);
    int32_t per = group->train.seed_batching && asked > 1 ? asked : 1;
    /* At least two seeds a batch, and no more batches than a group has lock-steps. */
    while (per > 1 && (n / (d * per) < 2 || d * per > RLT_CFG_MAX_DEVICES)) per--;
    return d * per;
}

int32_t seed_batch_per_device(const rlt_config *group, int32_t n, int dp) {
    return seed_batch_count(group, n, dp) / (group->devices.n > 1 ? group->devices.n : 1);
}

int32_t seed_batch_fewer(rlt_config *group, int32_t n, int dp, int auto_asked) {
    if (!auto_asked || dp) return 0;
    const int32_t per = seed_batch_per_device(group, n, dp);
    if (per <= 1) return 0;
    group->train.seed_batches = per / 2;
    return per / 2;
}

int seed_batch_member(const rlt_config *group, int32_t n, int32_t k, int dp, int batchable, rlt_config *m) {
    /* Seeds sharing a GPU overlap each other's updates: each then runs its update on one stream (bench/seeds.sh). */
    const int32_t d = group->devices.n, nb = seed_batch_count(group, n, dp);
    int32_t sharing = 0, batch = 0;
    for (int32_t j = 0; j < n; j++) {
        sharing += d == 0 || j % d == k % d;
        batch += j % nb == k % nb;
    }
    if (!dp && sharing > 1) m->lanes = 1;
    const rlt_device_kind kind = d > 0 ? group->devices.d[k % d].kind : group->device.kind;
    /* The seeds of one batch (k mod seed_batch_count: one for each entry of devices, k mod d, or several on each) may
     * run one batched update graph (train/seed_batch.h), each batch's seeds their own: the plan holds its table. */
    if (!group->train.seed_batching || dp || batch < 2 || kind != RLT_DEVICE_CUDA || !batchable) return 0;
    m->batch_seeds = batch;
    m->arena_slot = nb > 1 ? k / nb : k;
    /* The leading member's batched graph is every seed's update: it keeps the lanes of a single run, so its branches
     * (the target networks beside the online ones) run side by side. */
    if (m->arena_slot == 0) m->lanes = 0;
    return 1;
}

/* Why agent k cannot share agent 0's batched graph, or "" when it can. */
static void seed_batch_mismatch(const rlt_agent *lead, const rlt_agent *ag, char *why, size_t cap) {
    why[0] = '\0';
    const rlt_plan *a = &lead->plan, *b = &ag->plan;
    if (!ag->graphs || !ag->plan.sealed || !ag->plan.base[RLT_LOC_DEVICE]) {
        snprintf(why, cap, "an agent has no captured graphs or no device arena");
        return;
    }
    if (ag->bk.ops != lead->bk.ops || ag->bk.device_index != lead->bk.device_index) {
        snprintf(why, cap, "the agents are not on one GPU");
        return;
    }
    /* The batched graph is the lead's update: it reads each agent's scalars (learning rates, tau, gamma, noise, the
     * clipping threshold) from that agent's hparams block, and schedules are host code, so population members whose
     * values of those differ share it; a key that changes the update's ops (config_members_unbatched) does not. */
    const char *key_why = "";
    const char *differs = config_members_unbatched(&lead->cfg, &ag->cfg, &key_why);
    if (differs) {
        snprintf(why, cap, "the members' %s differ: %s", differs, key_why);
        return;
    }
    /* fp32, tf32, bf16 and fp16 layers batch, the library-sized and 16-bit ones as strided or pointer-array library
     * products over the seeds' arenas (the backend says which op cannot, e.g. a convolution or a 16-bit product
     * without a cuBLASLt algorithm, when the capture refuses it). */
    if (a->n != b->n || seed_batch_arena_core(a) != seed_batch_arena_core(b)) {
        snprintf(why, cap, "the agents' memory plans differ");
        return;
    }
    for (int32_t i = 0; i < a->n; i++)
        if (strcmp(a->entries[i].name, b->entries[i].name) ||
            (strcmp(a->entries[i].name, SEED_BATCH_WORKSPACE) &&
             (a->entries[i].offset != b->entries[i].offset || a->entries[i].bytes != b->entries[i].bytes ||
              a->entries[i].location != b->entries[i].location))) {
            snprintf(why, cap, "the agents' memory plans differ at %s", a->entries[i].name);
            return;
        }
    /* A batched kernel moves pointers into the device arena only: the replay and everything else an update reads
     * must be there. */
    for (int32_t i = 0; i < b->n; i++)
        if (b->entries[i].location == RLT_LOC_HOST && b->entries[i].bytes && !strcmp(b->entries[i].region, "replay")) {
            snprintf(why, cap, "the replay is in host memory");
            return;
        }
}

/* Acting batched in exact mode for the training's rows and evaluation's (see the top of seed_batch.h), each in a
 * slot after the batched variants. A capture that fails leaves every agent acting on its own, the reason in
 * ls->act_why; the update stays batched either way. */
static void seed_batch_capture_acts(rlt_agent *lead, rlt_lockstep *ls, const int64_t *d_hdelta, int32_t eval_rows) {
    rlt_backend *bk = &lead->bk;
    int32_t n = ls->n;
    int64_t delta[SEED_BATCH_MAX];
    const unsigned char *base0 = lead->plan.base[RLT_LOC_DEVICE];
    for (int32_t k = 0; k < n; k++) delta[k] = (int64_t)((const unsigned char *)ls->agents[k]->plan.base[RLT_LOC_DEVICE] - base0);
    int64_t *d_delta = lead->seed_table;
    rlt_seeds_desc sd = {.n = n, .exact = 1, .delta = d_delta, .seed = (const uint64_t *)(const void *)(d_delta + n),
                         .delta_host = delta, .host_delta = d_hdelta, .host_base = lead->plan.base[RLT_LOC_HOST],
                         .host_bytes = lead->plan.arena_bytes[RLT_LOC_HOST]};
    int32_t rows[SEED_BATCH_ACTS] = {lead->cfg.env.num_envs, eval_rows};
    int32_t slot = SEED_BATCH_SLOT0 + lead->algo->n_variants;
    /* A benchmark switch (bench/seeds_e2e.sh): RLT_SEEDS_ACT=0 keeps each seed acting on its own, the route before
     * batched acting, for an A/B in one build. It changes no result. */
    const char *env = getenv("RLT_SEEDS_ACT");
    if (env && strcmp(env, "0") == 0) {
        snprintf(ls->act_why, sizeof ls->act_why, "(RLT_SEEDS_ACT=0)");
        return;
    }
    if (!lead->algo->act_ops) {
        snprintf(ls->act_why, sizeof ls->act_why, "(algorithm %s has no acting ops to batch)", lead->algo->name);
        return;
    }
    for (int32_t i = 0; i < SEED_BATCH_ACTS; i++) {
        if (i > 0 && rows[i] == rows[0]) break;
        if (slot >= RLT_BACKEND_MAX_GRAPHS) {
            snprintf(ls->act_why, sizeof ls->act_why, "(no graph slot is left for batched acting)");
            break;
        }
        /* Batching on before the capture begins: its check of the host arena is no call to make inside one. */
        int brc = bk->ops->seed_batch(bk, &sd);
        int rc = brc == RLT_OK ? bk->ops->graph(bk, RLT_GRAPH_BEGIN, slot) : brc;
        if (rc != RLT_OK) {
            snprintf(ls->act_why, sizeof ls->act_why, "(%s)", lead->err.msg);
            bk->ops->seed_batch(bk, NULL);
            break;
        }
        int arc = lead->algo->act_ops(lead, rows[i]);
        int orc = bk->ops->seed_batch(bk, NULL); /* exact mode: refuses what gave other bits than a single run's */
        char msg[sizeof lead->err.msg];
        snprintf(msg, sizeof msg, "%s", lead->err.msg);
        int erc = bk->ops->graph(bk, RLT_GRAPH_END, slot);
        if (arc != RLT_OK || orc != RLT_OK || erc != RLT_OK) {
            /* The slot is captured again by the next rows, if any. */
            snprintf(ls->act_why, sizeof ls->act_why, "when acting on %d row%s: %s", (int)rows[i], rows[i] == 1 ? "" : "s",
                     arc != RLT_OK || orc != RLT_OK ? msg : lead->err.msg);
            rlt_err_clear(&lead->err);
            continue;
        }
        lockstep_add_act(ls, rows[i], slot++);
    }
    rlt_err_clear(&lead->err);
}

int seed_batch_capture(rlt_agent *const *agents, int32_t n, int32_t eval_rows, rlt_lockstep **ls, char *why, size_t cap) {
    why[0] = '\0';
    *ls = NULL;
    if (n > SEED_BATCH_MAX) {
        snprintf(why, cap, "more than %d seeds on one GPU", SEED_BATCH_MAX);
        return RLT_ESTATE;
    }
    rlt_agent *lead = agents[0];
    rlt_backend *bk = &lead->bk;
    if (n < 2 || !lead->seed_table || n > lead->cfg.batch_seeds || !bk->ops->seed_batch) {
        snprintf(why, cap, "%s", bk->ops->seed_batch ? "the plan has no seed table for this many agents"
                                                     : "the backend cannot batch seeds");
        return RLT_ESTATE;
    }
    if (lead->algo->n_variants > RLT_BACKEND_MAX_GRAPHS - SEED_BATCH_SLOT0) {
        snprintf(why, cap, "the algorithm has too many update variants");
        return RLT_ESTATE;
    }
    for (int32_t k = 0; k < n; k++) {
        seed_batch_mismatch(lead, agents[k], why, cap);
        if (why[0]) return RLT_ESTATE;
    }
    /* The table, written once: agent k's device arena offset from the lead's, its seed, its host arena offset. */
    int64_t delta[SEED_BATCH_MAX], hdelta[SEED_BATCH_MAX];
    uint64_t seed[SEED_BATCH_MAX];
    const unsigned char *base0 = lead->plan.base[RLT_LOC_DEVICE], *host0 = lead->plan.base[RLT_LOC_HOST];
    for (int32_t k = 0; k < n; k++) {
        delta[k] = (int64_t)((const unsigned char *)agents[k]->plan.base[RLT_LOC_DEVICE] - base0);
        hdelta[k] = (int64_t)((const unsigned char *)agents[k]->plan.base[RLT_LOC_HOST] - host0);
        seed[k] = agents[k]->cfg.seed;
        /* Kernels pick their vector widths from the lead's addresses: every agent's must align as well. */
        if (delta[k] % RLT_PLAN_ALIGN != 0) {
            snprintf(why, cap, "the agents' arenas are not %d-byte aligned to each other", RLT_PLAN_ALIGN);
            return RLT_ESTATE;
        }
    }
    int64_t *d_delta = lead->seed_table;
    uint64_t *d_seed = (uint64_t *)(void *)(d_delta + n);
    int64_t *d_hdelta = (int64_t *)(void *)(d_seed + n);
    int rc = agent_put(lead, d_delta, delta, (uint64_t)n * sizeof *delta);
    if (rc == RLT_OK) rc = agent_put(lead, d_seed, seed, (uint64_t)n * sizeof *seed);
    if (rc == RLT_OK) rc = agent_put(lead, d_hdelta, hdelta, (uint64_t)n * sizeof *hdelta);
    rlt_seeds_desc sd = {.n = n, .delta = d_delta, .seed = d_seed, .delta_host = delta};
    for (int32_t v = 0; v < lead->algo->n_variants && rc == RLT_OK; v++) {
        rc = bk->ops->graph(bk, RLT_GRAPH_BEGIN, SEED_BATCH_SLOT0 + v);
        if (rc != RLT_OK) break;
        int brc = bk->ops->seed_batch(bk, &sd);
        int urc = brc == RLT_OK ? lead->algo->update_ops(lead, v) : brc;
        bk->ops->seed_batch(bk, NULL);
        char msg[sizeof lead->err.msg];
        snprintf(msg, sizeof msg, "%s", lead->err.msg);
        int erc = bk->ops->graph(bk, RLT_GRAPH_END, SEED_BATCH_SLOT0 + v);
        rc = urc != RLT_OK ? urc : erc;
        if (urc != RLT_OK) snprintf(lead->err.msg, sizeof lead->err.msg, "%s", msg);
    }
    if (rc != RLT_OK) {
        snprintf(why, cap, "%s", lead->err.msg);
        rlt_err_clear(&lead->err);
        return rc;
    }
    *ls = lockstep_new(agents, n);
    if (!*ls) RLT_FAIL(&lead->err, RLT_ENOMEM, "out of host memory for the seeds' lock-step");
    seed_batch_capture_acts(lead, *ls, d_hdelta, eval_rows);
    lockstep_set_aside(*ls, lead->aside_ok && (*ls)->n_act > 0);
    /* The transition stores in one launch a round, unless RLT_SEEDS_STORE=0 (each agent issues its own, for A/B). */
    const char *store = getenv("RLT_SEEDS_STORE");
    int can = bk->ops->copy_lists && !(store && strcmp(store, "0") == 0);
    for (int32_t k = 0; k < n && can; k++) can = agents[k]->copy_list != NULL;
    if (can) lockstep_set_store(*ls, d_hdelta);
    return RLT_OK;
}

void lockstep_set_store(rlt_lockstep *ls, const int64_t *host_delta) { ls->store_hdelta = host_delta; }

void lockstep_set_aside(rlt_lockstep *ls, int aside) { ls->aside = aside != 0; }

int lockstep_sleeps(const rlt_lockstep *ls) { return ls->sleep; }

int lockstep_yields(const rlt_lockstep *ls) { return !ls->sleep && ls->spin == 0; }

void lockstep_set_threads(rlt_lockstep *ls, int32_t threads) {
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
#ifdef __linux__
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) cores = CPU_COUNT(&set);
#endif
    /* While the cores outnumber the seeds' threads by an eighth (at least 2) a waiter spins, then yields. Past that
     * the spinners would hold the cores that the last seeds need to step their environments and reach the lock-step:
     * a waiter sleeps at once (yielding first, or yielding alone, were slower on a 64-core host with 64 seeds:
     * bench/RESULTS.md). From twice as many seed threads as cores, every core holds two seeds or more, and a waiter
     * that yields hands its core to a sibling with an environment to step: there it yields from the start (64 seeds
     * on 32 cores: 30.9 s td3 and 24.6 s dqn yielding, 32.0 s and 28.7 s asleep). A group of at most
     * LOCKSTEP_YIELD_MAX threads yields instead of sleeping there: its waiters are few enough that a yield finds the
     * core idle, and a futex wake-up costs each round more than it saves (16 seeds on a 16-core host: td3_pendulum
     * under tf32 6.81 -> 6.54 s, dqn_cartpole 6.16 -> 5.81 s; bench/RESULTS.md). RLT_SEEDS_WAIT forces one way, for
     * A/B: spin (pauses, then yields), yield (yields from the start), sleep (at once), spin_sleep (pauses, then
     * sleeps). */
    long spare = cores / 8 > 2 ? cores / 8 : 2;
    int full = cores > 0 && threads + spare > cores; /* past the first bound: no spinning */
    int crowded = cores > 0 && (long)threads >= 2 * cores;
    ls->sleep = full && !crowded && threads > LOCKSTEP_YIELD_MAX;
    ls->spin = full ? 0 : 2000;
    const char *wait = getenv("RLT_SEEDS_WAIT");
    if (wait && !strcmp(wait, "spin")) ls->sleep = 0, ls->spin = 2000;
    if (wait && !strcmp(wait, "yield")) ls->sleep = 0, ls->spin = 0;
    if (wait && !strcmp(wait, "sleep")) ls->sleep = 1, ls->spin = 0;
    if (wait && !strcmp(wait, "spin_sleep")) ls->sleep = 1, ls->spin = 2000;
}

rlt_lockstep *lockstep_new(rlt_agent *const *agents, int32_t n) {
    size_t per = sizeof(rlt_agent *) + sizeof(rlt_backend *) + 2 * sizeof(int32_t) + sizeof(atomic_uint);
    rlt_lockstep *ls = rlt_mem_alloc(sizeof *ls + (size_t)n * per, 64);
    if (!ls) return NULL;
    memset(ls, 0, sizeof *ls + (size_t)n * per);
    ls->agents = (rlt_agent **)(void *)(ls + 1);
    ls->bks = (rlt_backend **)(void *)(ls->agents + n);
    ls->kind = (int32_t *)(void *)(ls->bks + n);
    ls->slot = ls->kind + n;
    ls->served = (atomic_uint *)(void *)(ls->slot + n);
    for (int32_t k = 0; k < n; k++) {
        ls->agents[k] = agents[k];
        ls->bks[k] = &agents[k]->bk;
        atomic_init(&ls->served[k], 0);
    }
    ls->n = ls->active = n;
    lockstep_set_threads(ls, n);
    atomic_init(&ls->gen, 0);
    atomic_init(&ls->sleepers, 0);
    atomic_init(&ls->failed, 0);
    pthread_mutex_init(&ls->mu, NULL);
    return ls;
}

int lockstep_add_act(rlt_lockstep *ls, int32_t rows, int32_t slot) {
    if (ls->n_act >= SEED_BATCH_ACTS) return RLT_ESTATE;
    ls->act_rows[ls->n_act] = rows;
    ls->act_slot[ls->n_act++] = slot;
    return RLT_OK;
}

const char *lockstep_act_why(const rlt_lockstep *ls) { return ls->act_why; }

int32_t lockstep_acts(const rlt_lockstep *ls, int32_t *rows) {
    for (int32_t i = 0; i < ls->n_act; i++) rows[i] = ls->act_rows[i];
    return ls->n_act;
}

void lockstep_rounds(rlt_lockstep *ls, uint64_t *act_rounds, uint64_t *update_rounds, uint64_t *store_rounds) {
    pthread_mutex_lock(&ls->mu);
    *act_rounds = ls->act_rounds;
    *update_rounds = ls->update_rounds;
    if (store_rounds) *store_rounds = ls->store_hdelta ? ls->store_rounds : UINT64_MAX;
    pthread_mutex_unlock(&ls->mu);
}

uint64_t lockstep_aside_rounds(rlt_lockstep *ls) {
    pthread_mutex_lock(&ls->mu);
    uint64_t n = ls->aside_rounds;
    pthread_mutex_unlock(&ls->mu);
    return n;
}

void lockstep_times(rlt_lockstep *ls, double first_s[2], double gap_s[2], double run_s[2]) {
    pthread_mutex_lock(&ls->mu);
    for (int i = 0; i < 2; i++) {
        first_s[i] = ls->first_s[i];
        gap_s[i] = ls->gap_s[i];
        run_s[i] = ls->run_s[i];
    }
    pthread_mutex_unlock(&ls->mu);
}

void lockstep_attach(rlt_lockstep *ls) {
    ls->active = ls->n;
    ls->arrived = 0;
    atomic_store(&ls->failed, 0);
    for (int32_t k = 0; k < ls->n; k++) {
        ls->kind[k] = LS_NONE;
        ls->agents[k]->lockstep = ls;
        /* Each agent's replay holds its copies for the rounds (replay.defer) from now on. */
        if (ls->store_hdelta) {
            ls->agents[k]->copy_list->n = 0;
            ls->agents[k]->replay.defer = ls->agents[k]->copy_list;
        }
    }
}

void lockstep_detach(rlt_lockstep *ls) {
    if (!ls) return;
    for (int32_t k = 0; k < ls->n; k++) {
        ls->agents[k]->lockstep = NULL;
        ls->agents[k]->replay.defer = NULL; /* each settled its own on leaving (seed_group.c, after its run) */
    }
}

/* Touches only the lock-step: its agents may be gone already (a group frees its members first). */
void lockstep_free(rlt_lockstep *ls) {
    if (!ls) return;
    pthread_mutex_destroy(&ls->mu);
    rlt_mem_free(ls);
}

/* Under mu: the round failed; every agent waiting, and every later call, fails with why. */
static void lockstep_set_failed(rlt_lockstep *ls) { atomic_store(&ls->failed, 1); }

/* After a round served agents or failed (their served counts or failed already written): wakes the sleepers. */
static void lockstep_wake(rlt_lockstep *ls) {
    atomic_fetch_add(&ls->gen, 1u);
#ifdef __linux__
    if (atomic_load(&ls->sleepers) > 0) syscall(SYS_futex, (unsigned *)&ls->gen, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
#endif
}

/* Agent k's wait for its served count to pass mine, or the group to fail. */
static void lockstep_wait_served(rlt_lockstep *ls, int32_t k, unsigned mine) {
    for (uint32_t spins = 0;; spins++) {
        unsigned g = atomic_load(&ls->gen);
        if (atomic_load(&ls->served[k]) != mine || atomic_load(&ls->failed)) return;
        if (spins < ls->spin) {
#if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();
#endif
            continue;
        }
#ifdef __linux__
        if (ls->sleep) {
            /* A round that ends after the load of g changed gen: the futex then returns at once. */
            atomic_fetch_add(&ls->sleepers, 1);
            syscall(SYS_futex, (unsigned *)&ls->gen, FUTEX_WAIT_PRIVATE, g, NULL, NULL, 0);
            atomic_fetch_sub(&ls->sleepers, 1);
            continue;
        }
#endif
        (void)g;
        sched_yield();
    }
}

/* Under mu, first in a round: the transition stores the agents hold, all in one launch on the lead's stream before
 * the round's graph (so the update samples them). 1 when it launched them: the round then syncs and empties the
 * lists, so that no agent writes its staging or its list again before the launch has read them; 0 when none was
 * held; -1 on failure (the round failed). */
static int lockstep_store(rlt_lockstep *ls) {
    if (!ls->store_hdelta) return 0;
    int any = 0;
    for (int32_t k = 0; k < ls->n && !any; k++) any = ls->agents[k]->copy_list->n > 0;
    if (!any) return 0;
    rlt_agent *lead = ls->agents[0];
    if (lead->bk.ops->copy_lists(&lead->bk, lead->copy_list, ls->store_hdelta, ls->n) != RLT_OK) {
        snprintf(ls->why, sizeof ls->why, "the seeds' batched transition store failed: %s", lead->err.msg);
        lockstep_set_failed(ls);
        return -1;
    }
    ls->store_rounds++;
    return 1;
}

/* Under mu, after the round's sync: the stores have run, the lists are empty again. */
static void lockstep_store_done(rlt_lockstep *ls) {
    for (int32_t k = 0; k < ls->n; k++) ls->agents[k]->copy_list->n = 0;
}

/* Under mu, once every active agent waits: runs one round and lets the agents it served go. Acting first (the
 * agents waiting to update cannot go on before the others reach their update), one acting graph per round: the graph
 * computes every agent, and a later one would write over the outputs of an agent the earlier one served. */
static void lockstep_launch(rlt_lockstep *ls) {
    rlt_agent *lead = ls->agents[0];
    int32_t act_slot = -1, upd_slot = -1;
    for (int32_t k = 0; k < ls->n; k++) {
        if (ls->kind[k] == LS_ACT && (act_slot < 0 || ls->slot[k] < act_slot)) act_slot = ls->slot[k];
        if (ls->kind[k] == LS_UPDATE) {
            if (upd_slot >= 0 && ls->slot[k] != upd_slot) {
                snprintf(ls->why, sizeof ls->why,
                         "the seeds' updates are out of step (update variants %d and %d in one batched round)",
                         (int)(upd_slot - SEED_BATCH_SLOT0), (int)(ls->slot[k] - SEED_BATCH_SLOT0));
                lockstep_set_failed(ls);
            }
            upd_slot = ls->slot[k];
        }
    }
    const int stored = atomic_load(&ls->failed) ? 0 : lockstep_store(ls);
    if (stored < 0) return;
    if (act_slot >= 0) {
        /* One launch for every agent's chunk, then one sync for the group: the outputs are in the staging. Beside the
         * batched update in flight when every update since the mark left the policies as they were, unless the
         * round ran stores (whose staging must be read before anyone stages again: the sync on lane 0). */
        const int aside = ls->aside_marked && !stored;
        int rc = aside ? lead->bk.ops->graph(&lead->bk, RLT_GRAPH_ASIDE_LAUNCH, act_slot)
                       : lead->bk.ops->graph(&lead->bk, RLT_GRAPH_LAUNCH, act_slot);
        if (rc == RLT_OK && !aside) rc = lead->bk.ops->sync(&lead->bk);
        if (rc != RLT_OK) {
            snprintf(ls->why, sizeof ls->why, "the seeds' batched acting failed: %s", lead->err.msg);
            lockstep_set_failed(ls);
            return;
        }
        if (stored) lockstep_store_done(ls);
        ls->act_rounds++;
        ls->aside_rounds += (uint64_t)aside;
        lockstep_timed(ls, 0);
        for (int32_t k = 0; k < ls->n; k++)
            if (ls->kind[k] == LS_ACT && ls->slot[k] == act_slot) {
                ls->kind[k] = LS_NONE;
                ls->arrived--;
                atomic_fetch_add(&ls->served[k], 1u);
            }
        return;
    }
    if (atomic_load(&ls->failed)) return;
    if (upd_slot < 0) {
        /* Nothing to launch (cannot happen while every waiting agent waits for something); stores must still end. */
        if (stored && lead->bk.ops->sync(&lead->bk) == RLT_OK) lockstep_store_done(ls);
        return;
    }
    /* An update round does not wait for its graph, but the stores it ran must be read before any agent stages or
     * holds again: the agents' next step would otherwise overwrite what the launch has yet to read. So it syncs
     * between the stores and the update's launch: the seeds' host work until their next round then overlaps the
     * batched update (which their next acting round, on the same stream, waits for; each member's own stream follows
     * it through seed_follow). */
    int rc = stored ? lead->bk.ops->sync(&lead->bk) : RLT_OK;
    /* Acting rounds until the next update that changes the policies run beside this one when it does not. */
    if (rc == RLT_OK) rc = agent_aside_before(lead, ls->aside, &ls->aside_marked, upd_slot - SEED_BATCH_SLOT0);
    if (rc == RLT_OK) rc = lead->bk.ops->graph_launch_seeds(&lead->bk, upd_slot, ls->bks, ls->n);
    if (rc != RLT_OK) {
        snprintf(ls->why, sizeof ls->why, "the seeds' batched update failed: %s", lead->err.msg);
        lockstep_set_failed(ls);
        return;
    }
    if (stored) lockstep_store_done(ls);
    ls->update_rounds++;
    lockstep_timed(ls, 1);
    for (int32_t k = 0; k < ls->n; k++)
        if (ls->kind[k] == LS_UPDATE) {
            ls->kind[k] = LS_NONE;
            atomic_fetch_add(&ls->served[k], 1u);
        }
    ls->arrived = 0;
}

static int lockstep_fail(rlt_lockstep *ls, rlt_agent *ag) {
    pthread_mutex_lock(&ls->mu);
    char why[sizeof ls->why];
    memcpy(why, ls->why, sizeof why);
    pthread_mutex_unlock(&ls->mu);
    RLT_FAIL(&ag->err, RLT_ERUNTIME, "%s", why);
}

static int32_t lockstep_index(const rlt_lockstep *ls, const rlt_agent *ag) {
    for (int32_t k = 0; k < ls->n; k++)
        if (ls->agents[k] == ag) return k;
    return -1;
}

/* Waits for a round that runs agent ag's request (kind, slot); the last to arrive launches. */
static int lockstep_wait(rlt_lockstep *ls, rlt_agent *ag, int32_t kind, int32_t slot) {
    int32_t k = lockstep_index(ls, ag);
    if (k < 0) RLT_FAIL(&ag->err, RLT_ESTATE, "an agent outside its seed group's lock-step waited in it (a bug)");
    pthread_mutex_lock(&ls->mu);
    if (atomic_load(&ls->failed)) {
        pthread_mutex_unlock(&ls->mu);
        return lockstep_fail(ls, ag);
    }
    unsigned mine = atomic_load(&ls->served[k]);
    if (ls->arrived == 0) ls->t_first = rlt_now_s();
    ls->kind[k] = kind;
    ls->slot[k] = slot;
    if (++ls->arrived >= ls->active) {
        ls->t_last = rlt_now_s();
        lockstep_launch(ls);
        lockstep_wake(ls);
    }
    pthread_mutex_unlock(&ls->mu);
    lockstep_wait_served(ls, k, mine);
    /* This agent's request succeeded if it was run, whatever a later round (which others may have reached already)
     * did. */
    if (atomic_load(&ls->served[k]) == mine) return lockstep_fail(ls, ag);
    return RLT_OK;
}

int lockstep_update(rlt_lockstep *ls, rlt_agent *ag, int32_t variant) {
    rlt_agent *lead = ls->agents[0];
    /* This agent's work so far (its observations' copies), which the batched update reads. */
    if (ag != lead) RLT_TRY(ag->bk.ops->seed_mark(&ag->bk));
    RLT_TRY(lockstep_wait(ls, ag, LS_UPDATE, SEED_BATCH_SLOT0 + variant));
    /* This agent's later work (its next action) reads what the batched update wrote. */
    if (ag != lead) RLT_TRY(ag->bk.ops->seed_follow(&ag->bk, &lead->bk));
    return RLT_OK;
}

int lockstep_act(rlt_lockstep *ls, rlt_agent *ag, int32_t rows, int *served) {
    *served = 0;
    int32_t slot = -1;
    for (int32_t i = 0; i < ls->n_act; i++)
        if (ls->act_rows[i] == rows) slot = ls->act_slot[i];
    if (slot < 0) return RLT_OK;
    /* The acting graph reads what this agent's earlier work left on the device (its parameters: the batched updates
     * on the lead's stream, where the acting graph runs too) and its staging, nothing its own stream still writes:
     * no mark is needed, and the group's sync leaves nothing for it to follow. */
    RLT_TRY(lockstep_wait(ls, ag, LS_ACT, slot));
    *served = 1;
    return RLT_OK;
}

void lockstep_leave(rlt_lockstep *ls) {
    pthread_mutex_lock(&ls->mu);
    ls->active--;
    /* The others may all be waiting for this one. */
    if (!atomic_load(&ls->failed) && ls->arrived > 0 && ls->arrived >= ls->active) {
        lockstep_launch(ls);
        lockstep_wake(ls);
    }
    pthread_mutex_unlock(&ls->mu);
}
