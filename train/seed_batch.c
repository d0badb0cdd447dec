/* seed_batch.c: see seed_batch.h. The capture of the batched update graphs, and the lock-step that launches them. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "agent.h"
#include "mem.h"
#include "seed_batch.h"

/* Arrivals are counted under mu; the agents that wait spin on round (and failed), which the last to arrive
 * advances after its launch: a round costs microseconds, too short for a condition variable's wake-ups (16
 * threads woken one after another took longer than the batched update itself). A waiter yields its core after
 * a short spin, so seeds outnumbering the cores still make progress. */
struct rlt_lockstep {
    pthread_mutex_t mu;
    int32_t n;
    int32_t active;  /* agents still running (under mu) */
    int32_t arrived; /* agents waiting in this round (under mu) */
    int32_t variant; /* of this round (under mu) */
    atomic_int failed;  /* a round failed: every later call fails too */
    atomic_ullong round;
    unsigned long long failed_round; /* the round that failed (under mu; read once failed is seen) */
    char why[sizeof(((rlt_err *)0)->msg) + 64];
    rlt_agent **agents;
    rlt_backend **bks;
};

uint64_t seed_batch_table_bytes(int32_t n) { return n > 1 ? (uint64_t)n * (sizeof(int64_t) + sizeof(uint64_t)) : 0; }

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
    /* bf16 and fp16 layers are cuBLAS products with 16-bit epilogues that run for one agent only. fp32 and tf32
     * layers batch, the library-sized ones as batched library products (the backend says which op cannot, e.g. a
     * convolution, when the capture refuses it). Said first: the workspace is sized by each seed's lanes, so the
     * plans would otherwise only be reported as different. */
    if (ag->lp != RLT_LP_F32 && agent_plan_workspace(ag, NULL)) {
        snprintf(why, cap, "the plan computes in bf16/fp16 on cuBLAS, whose 16-bit products cannot run for several "
                           "seeds at once");
        return;
    }
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

int seed_batch_capture(rlt_agent *const *agents, int32_t n, rlt_lockstep **ls, char *why, size_t cap) {
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
    /* The table, written once: agent k's arena offset from the lead's, then its seed. */
    int64_t delta[SEED_BATCH_MAX];
    uint64_t seed[SEED_BATCH_MAX];
    const unsigned char *base0 = lead->plan.base[RLT_LOC_DEVICE];
    for (int32_t k = 0; k < n; k++) {
        delta[k] = (int64_t)((const unsigned char *)agents[k]->plan.base[RLT_LOC_DEVICE] - base0);
        seed[k] = agents[k]->cfg.seed;
        /* Kernels pick their vector widths from the lead's addresses: every agent's must align as well. */
        if (delta[k] % RLT_PLAN_ALIGN != 0) {
            snprintf(why, cap, "the agents' arenas are not %d-byte aligned to each other", RLT_PLAN_ALIGN);
            return RLT_ESTATE;
        }
    }
    int64_t *d_delta = lead->seed_table;
    uint64_t *d_seed = (uint64_t *)(void *)(d_delta + n);
    int rc = agent_put(lead, d_delta, delta, (uint64_t)n * sizeof *delta);
    if (rc == RLT_OK) rc = agent_put(lead, d_seed, seed, (uint64_t)n * sizeof *seed);
    for (int32_t v = 0; v < lead->algo->n_variants && rc == RLT_OK; v++) {
        rc = bk->ops->graph(bk, RLT_GRAPH_BEGIN, SEED_BATCH_SLOT0 + v);
        if (rc != RLT_OK) break;
        int brc = bk->ops->seed_batch(bk, n, d_delta, d_seed, delta);
        int urc = brc == RLT_OK ? lead->algo->update_ops(lead, v) : brc;
        bk->ops->seed_batch(bk, 0, NULL, NULL, NULL);
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
    return RLT_OK;
}

rlt_lockstep *lockstep_new(rlt_agent *const *agents, int32_t n) {
    rlt_lockstep *ls = rlt_mem_alloc(sizeof *ls + (size_t)n * (sizeof(rlt_agent *) + sizeof(rlt_backend *)), 64);
    if (!ls) return NULL;
    memset(ls, 0, sizeof *ls);
    ls->agents = (rlt_agent **)(void *)(ls + 1);
    ls->bks = (rlt_backend **)(void *)(ls->agents + n);
    for (int32_t k = 0; k < n; k++) {
        ls->agents[k] = agents[k];
        ls->bks[k] = &agents[k]->bk;
    }
    ls->n = ls->active = n;
    atomic_init(&ls->failed, 0);
    atomic_init(&ls->round, 0);
    pthread_mutex_init(&ls->mu, NULL);
    return ls;
}

void lockstep_attach(rlt_lockstep *ls) {
    ls->active = ls->n;
    ls->arrived = 0;
    atomic_store(&ls->failed, 0);
    for (int32_t k = 0; k < ls->n; k++) ls->agents[k]->lockstep = ls;
}

void lockstep_detach(rlt_lockstep *ls) {
    if (!ls) return;
    for (int32_t k = 0; k < ls->n; k++) ls->agents[k]->lockstep = NULL;
}

/* Touches only the lock-step: its agents may be gone already (a group frees its members first). */
void lockstep_free(rlt_lockstep *ls) {
    if (!ls) return;
    pthread_mutex_destroy(&ls->mu);
    rlt_mem_free(ls);
}

/* Under mu, by the last agent to arrive: runs the round, then lets the others go. */
static void lockstep_launch(rlt_lockstep *ls) {
    rlt_agent *lead = ls->agents[0];
    int rc = lead->bk.ops->graph_launch_seeds(&lead->bk, SEED_BATCH_SLOT0 + ls->variant, ls->bks, ls->n);
    if (rc != RLT_OK) {
        snprintf(ls->why, sizeof ls->why, "the seeds' batched update failed: %s", lead->err.msg);
        ls->failed_round = atomic_load(&ls->round);
        atomic_store(&ls->failed, 1);
    }
    ls->arrived = 0;
    atomic_fetch_add(&ls->round, 1);
}

static int lockstep_fail(rlt_lockstep *ls, rlt_agent *ag) {
    pthread_mutex_lock(&ls->mu);
    char why[sizeof ls->why];
    memcpy(why, ls->why, sizeof why);
    pthread_mutex_unlock(&ls->mu);
    RLT_FAIL(&ag->err, RLT_ERUNTIME, "%s", why);
}

int lockstep_update(rlt_lockstep *ls, rlt_agent *ag, int32_t variant) {
    rlt_agent *lead = ls->agents[0];
    /* This agent's work so far (its observations' copies), which the batched update reads. */
    if (ag != lead) RLT_TRY(ag->bk.ops->seed_mark(&ag->bk));
    pthread_mutex_lock(&ls->mu);
    if (!atomic_load(&ls->failed) && ls->arrived > 0 && variant != ls->variant) {
        snprintf(ls->why, sizeof ls->why,
                 "the seeds' updates are out of step (update variants %d and %d in one batched round)", (int)ls->variant,
                 (int)variant);
        ls->failed_round = atomic_load(&ls->round);
        atomic_store(&ls->failed, 1);
    }
    if (atomic_load(&ls->failed)) {
        pthread_mutex_unlock(&ls->mu);
        return lockstep_fail(ls, ag);
    }
    ls->variant = variant;
    unsigned long long mine = atomic_load(&ls->round);
    int last = ++ls->arrived >= ls->active;
    if (last) lockstep_launch(ls);
    pthread_mutex_unlock(&ls->mu);
    for (uint32_t spins = 0; !last && atomic_load(&ls->round) == mine && !atomic_load(&ls->failed); spins++) {
        if (spins > 2000) sched_yield();
#if defined(__x86_64__) || defined(__i386__)
        else __builtin_ia32_pause();
#endif
    }
    /* This agent's round succeeded if it was launched, whatever a later round (which others may have reached
     * already) did. */
    if (atomic_load(&ls->failed)) {
        pthread_mutex_lock(&ls->mu);
        int mine_failed = ls->failed_round <= mine;
        pthread_mutex_unlock(&ls->mu);
        if (mine_failed) return lockstep_fail(ls, ag);
    }
    /* This agent's later work (its next action) reads what the batched update wrote. */
    if (ag != lead) RLT_TRY(ag->bk.ops->seed_follow(&ag->bk, &lead->bk));
    return RLT_OK;
}

void lockstep_leave(rlt_lockstep *ls) {
    pthread_mutex_lock(&ls->mu);
    ls->active--;
    /* The others may all be waiting for this one. */
    if (!atomic_load(&ls->failed) && ls->arrived > 0 && ls->arrived >= ls->active) lockstep_launch(ls);
    pthread_mutex_unlock(&ls->mu);
}
