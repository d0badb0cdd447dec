/* seed_group.c: a seed group (rlt_group_*): N independent trainers of one config in one process, one per
 * seed (train.seeds, or train.num_seeds from `seed`) or one per member of a population (the config's
 * `population:`, engine/config_population.c: each member the config with its own values, in out_dir/member_<k> or
 * its name), each in a thread of its own, and what the group adds around them: the check that all of them fit the
 * budgets, one combined progress report, out_dir/summary.csv.
 *
 * Member k is a whole trainer (train/trainer.c) of the config with seed = its seed and out_dir =
 * out_dir/seed_<seed>: its own agent, backend instance (on a GPU its own streams and captured graphs),
 * replay, environments, random streams and outputs. Nothing is shared but the process, so on the CPU member
 * k is bit-identical to the single run with its seed, by construction; on a GPU the members share one CUDA
 * context, and graphs launched from their threads' streams run concurrently, which is where a group gains
 * throughput over N processes taking turns on the GPU.
 *
 * Each member's thread does everything to its trainer: init, resume, run and free. A trainer's thread-bound
 * state (the CUDA runtime's current device, OpenBLAS's per-thread buffer, which the backend takes at init)
 * thus belongs to the thread that trains it, and is taken at init, not during the run. The threads start in
 * rlt_group_init and wait for commands, so rlt_group_run starts nothing: like a single run it allocates
 * nothing. Members are initialised one after another (in their threads), so the messages and the device's
 * free memory come in a repeatable order, and the budget check can stop after the first member. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "agent.h"
#include "backend_registry.h"
#include "config_schema.h"
#include "comm.h"
#include "launch.h"
#include "mem.h"
#include "outputs.h"
#include "seed_batch.h"
#include "text.h"
#include "trainer.h"

#define MIB (1024.0 * 1024.0)
/* One summary.csv row at most: a seed, a status word, two counters, three numbers. */
#define GROUP_CSV_ROW 192
/* What each seed's thread maps beyond its plan, held against an address-space or data limit (group_fit):
 * glibc's malloc arena for a thread (64 MiB reserved at its first allocation), and on the CPU an OpenBLAS GEMM
 * buffer (CPU_BLAS_BUFFER_BYTES of kernels/cpu/cpu_backend.c). */
#define GROUP_THREAD_ARENA_BYTES ((uint64_t)64 << 20)
#define GROUP_BLAS_BUFFER_BYTES ((uint64_t)129 << 20)

typedef enum { CMD_NONE, CMD_INIT, CMD_RESUME, CMD_BATCH, CMD_RUN, CMD_EXIT } member_cmd;

typedef struct seed_member {
    struct rlt_group *g;
    uint64_t seed;
    rlt_config cfg;               /* the group's config with this seed and out_dir/seed_<seed> */
    const rlt_env_callbacks *env; /* the caller's environment, or NULL for the built-in one */
    rlt_trainer *tr;
    int32_t inited; /* its trainer is initialised */
    char dir[RLT_CFG_POP_NAME + 16]; /* its directory under out_dir: seed_<seed>, rank_<k>, member_<k> or its name */
    pthread_t thread;
    int32_t started;
    /* Under the group's mutex: */
    member_cmd cmd; /* posted by the caller's thread, cleared by the member's when done */
    int rc;         /* of the last command */
    int32_t n_evals;
    rlt_progress snap; /* the member's latest report */
} seed_member;

struct rlt_group {
    rlt_err err;
    rlt_config cfg;
    int32_t n;
    seed_member *m;
    pthread_mutex_t mu;
    pthread_cond_t cv_cmd;  /* members wait here for a command */
    pthread_cond_t cv_done; /* the caller waits here for members to finish one, or to report */
    int32_t sync_ready;
    int32_t pending; /* members still on the current command (under mu) */
    int32_t shown;   /* the member whose plan the table shows */
    int32_t resumed;
    int32_t ran;
    volatile sig_atomic_t stop;
    char resume_name[256];
    double t0, t_end;
    char *csv; /* summary.csv, reserved at init */
    size_t csv_cap;
    /* A data-parallel group (config_is_data_parallel): the members are ranks of one run, one per device, that
     * average their gradients through comm (and, on GPUs, the NCCL communicators comm keeps, made by dev_ops). */
    int32_t dp;
    int32_t world, first; /* the run's ranks, and the first one held here (members are ranks first .. first+n-1) */
    int32_t launched;     /* one process per rank (config launch.world > 1): the others are elsewhere */
    int32_t n_ranks_here; /* the members to be, while the group is set up */
    char *rows;           /* a launched run: every rank's summary.csv row (world x GROUP_CSV_ROW), reserved at init */
    rlt_comm *comm;
    const rlt_backend_ops *dev_ops;
    /* Seeds sharing one GPU (train/seed_batch.h), in batches: train.seed_batches for each entry of devices (member k
     * in batch k mod batches, seed_batch_count). ls[b]: the lock-step of batch b's batched update graphs, NULL when
     * its members run their own (then batch_why[b] says why). */
    int32_t batches;
    int32_t unfit_leads; /* group_fit refused a group with this many batches' leads (train.seed_batches 0 retries) */
    int32_t batches_picked; /* train.seed_batches 0: g->cfg holds the count plan_group_batches picked */
    rlt_lockstep *ls[RLT_CFG_MAX_DEVICES];
    /* Each batch's arena span (rlt_backend.span): its members' device arenas at one stride, for strided library
     * products. The members' backends fill it; the last arena released frees its address range. */
    rlt_arena_span span[RLT_CFG_MAX_DEVICES];
    char batch_why[RLT_CFG_MAX_DEVICES][320];
    int lock_fd; /* out_dir/.rltrain.lock (outputs.h), held from the first resume or run to rlt_group_free */
    /* A population (config.h): members with their own values of its keys; pop_differs names the first key whose
     * values differ in a way the batched update graph cannot take per member ("" when none:
     * config_population_unbatched), pop_why what that key changes. */
    int32_t pop;
    char pop_differs[64];
    const char *pop_why;
};

/* The members a valid config names: the population's, train.seeds' entries, else train.num_seeds above 1; 0 for
 * one run. */
static int32_t group_members_of(const rlt_config *c) {
    if (c->population.n > 0) return c->population.n;
    if (config_is_data_parallel(c)) return c->launch.world > 1 ? 1 : c->devices.n; /* a launched run: this rank */
    if (c->train.seeds.n > 0) return c->train.seeds.n;
    return c->train.num_seeds > 1 ? c->train.num_seeds : 0;
}

static uint64_t group_seed_of(const rlt_config *c, int32_t k) {
    if (c->population.n > 0) return c->seed; /* the population's seed for member k, if it lists seeds (member_config) */
    if (config_is_data_parallel(c)) return c->train.seeds.n == 1 ? c->train.seeds.v[0] : c->seed; /* one run */
    return c->train.seeds.n > 0 ? c->train.seeds.v[k] : c->seed + (uint64_t)k;
}

/* The key that named the members, for messages. */
static const char *group_key(const rlt_config *c) {
    return c->population.n > 0 ? "population" : c->train.seeds.n > 0 ? "train.seeds" : "train.num_seeds";
}

static int32_t ranks_of(const rlt_config *c) { return config_is_data_parallel(c) ? config_world(c) : 0; }

/* count(cfg) for a valid cfg, else 0; validated on a copy, since validate records its message in the config. */
static int32_t count_valid(const rlt_config *cfg, int32_t (*count)(const rlt_config *)) {
    if (!cfg) return 0;
    rlt_config *c = rlt_mem_alloc(sizeof *c, 64);
    if (!c) return 0;
    *c = *cfg;
    int32_t n = rlt_config_validate(c) == RLT_OK ? count(c) : 0;
    rlt_mem_free(c);
    return n;
}

int32_t rlt_group_count(const rlt_config *cfg) { return count_valid(cfg, group_members_of); }

int32_t rlt_config_ranks(const rlt_config *cfg) { return count_valid(cfg, ranks_of); }

/* ---- the members' threads ------------------------------------------------------------------------------ */

/* The member's own progress callback: its latest figures for the combined report, and a wake-up for the caller
 * after each evaluation (a group report follows when every member has made it). */
static int member_progress(void *user, const rlt_progress *p) {
    seed_member *m = user;
    rlt_group *g = m->g;
    pthread_mutex_lock(&g->mu);
    m->snap = *p;
    if (p->is_eval) {
        m->n_evals++;
        pthread_cond_broadcast(&g->cv_done);
    }
    pthread_mutex_unlock(&g->mu);
    return 0;
}

static int member_do(seed_member *m, member_cmd cmd) {
    rlt_group *g = m->g;
    switch (cmd) {
    case CMD_INIT:
        return m->env ? rlt_trainer_init_env(&m->cfg, m->env, &m->tr) : rlt_trainer_init(&m->cfg, &m->tr);
    case CMD_RESUME: {
        char path[700];
        snprintf(path, sizeof path, "%s/%s", m->cfg.out_dir, g->resume_name);
        return rlt_trainer_resume(m->tr, path);
    }
    case CMD_BATCH: { /* in the thread of the batch's leading member (member b): the capture is bound to it */
        const int32_t b = (int32_t)(m - g->m);
        rlt_agent *agents[SEED_BATCH_MAX]; /* more seeds than it holds: the capture refuses them */
        int32_t n = 0;
        for (int32_t k = b; k < g->n; k += g->batches, n++)
            if (n < SEED_BATCH_MAX) agents[n] = g->m[k].tr->agent;
        return seed_batch_capture(agents, n, m->tr->eval_rows, &g->ls[b], g->batch_why[b], sizeof g->batch_why[b]);
    }
    case CMD_RUN: {
        int rc = rlt_trainer_run(m->tr, member_progress, m);
        /* Its outputs are written: the other seeds stop waiting for this one's updates (its held transition stores,
         * if a failure left any, issued first: no later round runs them). */
        if (m->tr->agent->lockstep) {
            rlt_agent *ag = m->tr->agent;
            if (replay_settle(&ag->replay, &ag->bk) != RLT_OK) rlt_err_clear(&ag->err);
            ag->replay.defer = NULL;
            lockstep_leave(ag->lockstep);
        }
        return rc;
    }
    case CMD_EXIT:
        rlt_trainer_free(m->tr);
        m->tr = NULL;
        return RLT_OK;
    case CMD_NONE: break;
    }
    return RLT_OK;
}

static void *member_main(void *arg) {
    seed_member *m = arg;
    rlt_group *g = m->g;
    pthread_mutex_lock(&g->mu);
    for (;;) {
        while (m->cmd == CMD_NONE) pthread_cond_wait(&g->cv_cmd, &g->mu);
        member_cmd cmd = m->cmd;
        pthread_mutex_unlock(&g->mu);
        int rc = member_do(m, cmd);
        pthread_mutex_lock(&g->mu);
        m->cmd = CMD_NONE;
        m->rc = rc;
        /* A member that failed stops the others: each then ends after its current step, with its outputs. */
        if (cmd == CMD_RUN && rc != RLT_OK && rc != RLT_EINTERRUPTED)
            for (int32_t k = 0; k < g->n; k++) rlt_trainer_request_stop(g->m[k].tr);
        g->pending--;
        pthread_cond_broadcast(&g->cv_done);
        if (cmd == CMD_EXIT) break;
    }
    pthread_mutex_unlock(&g->mu);
    return NULL;
}

/* Posts cmd to members first .. first + count - 1. */
static void group_post(rlt_group *g, int32_t first, int32_t count, member_cmd cmd) {
    pthread_mutex_lock(&g->mu);
    for (int32_t k = first; k < first + count; k++) g->m[k].cmd = cmd;
    g->pending += count;
    pthread_cond_broadcast(&g->cv_cmd);
    pthread_mutex_unlock(&g->mu);
}

static void group_wait(rlt_group *g) {
    pthread_mutex_lock(&g->mu);
    while (g->pending > 0) pthread_cond_wait(&g->cv_done, &g->mu);
    pthread_mutex_unlock(&g->mu);
}

/* Runs cmd on member k, in its thread, and returns its status. */
static int group_one(rlt_group *g, int32_t k, member_cmd cmd) {
    group_post(g, k, 1, cmd);
    group_wait(g);
    return g->m[k].rc;
}

/* "seed S: <the member's message>" as the group's error. */
static int group_member_failed(rlt_group *g, int32_t k, int rc, const char *then) {
    const rlt_trainer *tr = g->m[k].tr;
    if (g->dp) {
        char dev[32];
        device_format(g->m[k].cfg.device, dev, sizeof dev);
        rlt_err_set(&g->err, rc, __FILE__, __LINE__, "%s (rank %d of %d of the data-parallel run): %s%s", dev,
                    (int)(g->first + k), (int)g->world, tr ? rlt_trainer_errmsg(tr) : "out of host memory for the trainer",
                    then);
        return rc;
    }
    rlt_err_set(&g->err, rc, __FILE__, __LINE__, "seed %llu (member %d of %d): %s%s", (unsigned long long)g->m[k].seed,
                (int)k + 1, (int)g->n, tr ? rlt_trainer_errmsg(tr) : "out of host memory for the trainer", then);
    return rc;
}

/* ---- init -------------------------------------------------------------------------------------------- */

/* The most seeds that fit a limit when `shared` bytes are taken once, the first seed takes `first` and each other
 * `per` (a batched group's leading seed holds the library workspace for all; otherwise first == per). */
static uint64_t seeds_within(uint64_t limit, uint64_t shared, uint64_t first, uint64_t per) {
    if (limit < shared || limit - shared < first) return 0;
    return per ? 1 + (limit - shared - first) / per : UINT64_MAX;
}

/* What n seeds take when the first takes `first` and each other `per`. */
static uint64_t seeds_total(uint64_t n, uint64_t first, uint64_t per) {
    return n ? plan_add_sat(first, plan_mul_sat(n - 1, per)) : 0;
}

/* In a batched group, the first member that leads no batch (member `batches`: 1 on one device, d with seeds spread
 * over d devices), initialised before the fit check for it; 0 when the group does not batch. */
static int32_t group_rest_index(const rlt_group *g) {
    return g->m[0].cfg.batch_seeds > 1 && g->batches < g->n ? g->batches : 0;
}

/* The member whose plan stands for the seeds after the first: in a batched group the first that leads no batch, whose
 * plan has no batched workspace; otherwise the shown member. */
static const rlt_agent *group_rest_agent(const rlt_group *g) {
    const int32_t r = group_rest_index(g);
    if (r > 0 && g->m[r].inited) return g->m[r].tr->agent;
    return g->m[g->shown].tr->agent;
}

/* The members planned as the first (the shown) one: each batch's leading seed (one per entry of devices that
 * batches), at least 1. */
static int32_t group_leads(const rlt_group *g) {
    int32_t leads = 0;
    for (int32_t b = 0; b < g->batches && b < g->n; b++) leads += g->m[b].cfg.batch_seeds > 1;
    return leads > 1 ? leads : 1;
}

/* What n members need when `leads` of them take `first` and the others `per`. */
static uint64_t group_total(uint64_t n, int32_t leads, uint64_t first, uint64_t per) {
    return plan_add_sat(plan_mul_sat((uint64_t)(leads - 1), first - per), seeds_total(n, first, per));
}

/* What the group's n members reserve of a size the leads (group_leads) plan as `first` and the others as `per`. */
static uint64_t group_sum(const rlt_group *g, uint64_t first, uint64_t per) {
    return group_total((uint64_t)g->n, first > per ? group_leads(g) : 1, first, per);
}

/* One limit's answer: how many seeds fit under it, and the words for the message when it is the tightest. */
typedef struct fit_limit {
    uint64_t fit;     /* seeds that fit (UINT64_MAX: no limit seen yet) */
    char need[200];   /* what n seeds need, "16 x 12.88 MiB (the host arena of one seed) = 206.04 MiB" */
    char why[320];    /* the limit, "memory.budget_mb allows 64.00 MiB for ..." */
    char hint[96];    /* another setting that fits them all, or "" */
} fit_limit;

/* Keeps this limit's answer when it allows fewer seeds than the tightest so far. */
static void fit_keep(fit_limit *f, uint64_t fit, const char *need, const char *why, const char *hint) {
    if (fit >= f->fit) return;
    f->fit = fit;
    snprintf(f->need, sizeof f->need, "%s", need);
    snprintf(f->why, sizeof f->why, "%s", why);
    snprintf(f->hint, sizeof f->hint, "%s", hint);
}

/* After the first member's init: do all N fit? Each member reserves its own arena of the first one's size, so
 * the budgets are held against N of them: memory.budget_mb (the budgeted arena: device on a GPU, host on the
 * CPU), the device's free memory before the first reservation, memory.process_budget_mb (on a GPU the
 * context once plus each member's arena and library handles; on the CPU the host arenas), the host's memory
 * limit (each member's host arena and the allowance for the rest of its run), and an address-space limit
 * (what each further member's thread maps besides). The tightest names the largest number that fits. */
static int group_fit(rlt_group *g) {
    const rlt_agent *ag = g->m[g->shown].tr->agent; /* the first member, or the largest of a population's shapes */
    const rlt_agent *rest = group_rest_agent(g);
    const rlt_plan_summary *s = &ag->summary;
    const rlt_plan *p = &ag->plan;
    const uint64_t n = (uint64_t)g->n, need = agent_plan_need(ag), host = p->arena_bytes[RLT_LOC_HOST];
    const uint64_t need_rest = agent_plan_need(rest);
    /* With several leads (several batches) the others' extra is taken beside the seeds that fit. */
    const int32_t leads = need > need_rest ? group_leads(g) : 1;
    const uint64_t more = plan_mul_sat((uint64_t)(leads - 1), need - need_rest);
    const uint64_t all_need = group_total(n, leads, need, need_rest);
    const char *arena = p->device_is_host ? "host" : "device";
    /* Seeds spread over several devices: the budget holds for all of them (as the plan table says); each device's
     * free memory and the process's contexts are each member's own init's to check. Several batches on one device
     * (train.seed_batches) share its free memory and the process: their leads' extra counts there too. */
    const int several = g->cfg.devices.n > 1;
    fit_limit f = {UINT64_MAX, "", "", ""};
    char a[200], b[320], h[96];
    if (need_rest == need)
        snprintf(a, sizeof a, "%d x %.2f MiB (the %s arena of one seed) = %.2f MiB", (int)n, need / MIB, arena,
                 all_need / MIB);
    else if (leads == 1)
        snprintf(a, sizeof a, "%.2f MiB (the leading seed's %s arena, with the batched library workspace) + %d x %.2f "
                 "MiB (each other seed's) = %.2f MiB", need / MIB, arena, (int)n - 1, need_rest / MIB, all_need / MIB);
    else
        snprintf(a, sizeof a, "%d x %.2f MiB (each batch's leading seed's %s arena, with the batched library "
                 "workspace) + %d x %.2f MiB (each other seed's) = %.2f MiB", (int)leads, need / MIB, arena,
                 (int)(n - (uint64_t)leads), need_rest / MIB, all_need / MIB);
    snprintf(b, sizeof b, "memory.budget_mb allows %.2f MiB for the %s arenas of all seeds", s->budget_bytes / MIB, arena);
    snprintf(h, sizeof h, ", or memory.budget_mb: %.0f", ceil(all_need / MIB));
    fit_keep(&f, seeds_within(s->budget_bytes, more, need, need_rest), a, b, h);
    if (s->device_total && !several) {
        snprintf(b, sizeof b, "the device had %.2f MiB free", s->device_free / MIB);
        fit_keep(&f, seeds_within(s->device_free, more, need, need_rest), a, b, "");
    }
    if (s->process_budget_bytes && !several) {
        uint64_t pb = s->process_budget_bytes;
        uint64_t shared = p->device_is_host ? 0 : s->context_bytes - s->handle_bytes;
        uint64_t per = p->device_is_host ? need : need + s->handle_bytes;
        uint64_t per_rest = p->device_is_host ? need_rest : need_rest + rest->summary.handle_bytes;
        /* The other batches' leads (train.seed_batches) hold a lead's arena and handles each. */
        const uint64_t extra = per > per_rest ? plan_mul_sat((uint64_t)(leads - 1), per - per_rest) : 0;
        uint64_t all = plan_add_sat(plan_add_sat(shared, extra), seeds_total(n, per, per_rest));
        if (p->device_is_host)
            snprintf(b, sizeof b, "memory.process_budget_mb allows %.2f MiB (on the CPU it caps the host arenas)", pb / MIB);
        else
            snprintf(b, sizeof b, "memory.process_budget_mb allows %.2f MiB for the process: the CUDA context once "
                     "(%.2f MiB), and each seed's device arena and library handles (%.2f MiB%s)", pb / MIB, shared / MIB,
                     per_rest / MIB, per_rest == per ? "" : leads > 1 ? ", each batch's leading seed's more" :
                     ", the leading seed's more");
        snprintf(h, sizeof h, ", or memory.process_budget_mb: %.0f", ceil(all / MIB));
        char pa[200];
        snprintf(pa, sizeof pa, "%.2f MiB in all", all / MIB);
        fit_keep(&f, seeds_within(pb, plan_add_sat(shared, extra), per, per_rest), p->device_is_host ? a : pa, b, h);
    }
    if (p->host.avail != UINT64_MAX) {
        uint64_t per = host + p->host_overhead;
        snprintf(a, sizeof a, "%d x %.2f MiB (each seed's host arena and %.0f MiB for the rest of its run) = %.2f MiB",
                 (int)n, per / MIB, p->host_overhead / MIB, plan_mul_sat(n, per) / MIB);
        snprintf(b, sizeof b, "%s leaves %.2f MiB", p->host.source, p->host.avail / MIB);
        fit_keep(&f, seeds_within(p->host.avail, 0, per, per), a, b, "");
    }
    /* Under an address-space or data limit each further seed maps more than its plan: its thread's malloc arena,
     * and on the CPU an OpenBLAS buffer, which OpenBLAS's pool takes during the run when two seeds call it at
     * once and retries forever without (a hang, not an error). Read now, after the first seed took its own. */
    rlt_host_limit vm;
    rlt_host_limit_read_vm(&vm);
    if (vm.avail != UINT64_MAX) {
        uint64_t per = host + p->host_overhead + GROUP_THREAD_ARENA_BYTES + (p->device_is_host ? GROUP_BLAS_BUFFER_BYTES : 0);
        snprintf(a, sizeof a, "%d more x %.2f MiB (a host arena, %.0f MiB for the rest of the run, %.0f MiB of malloc "
                 "arena for the thread%s) = %.2f MiB", (int)n - 1, per / MIB, p->host_overhead / MIB,
                 GROUP_THREAD_ARENA_BYTES / MIB, p->device_is_host ? ", an OpenBLAS buffer of 129 MiB" : "",
                 plan_mul_sat(n - 1, per) / MIB);
        snprintf(b, sizeof b, "%s leaves %.2f MiB after the first seed", vm.source, vm.avail / MIB);
        fit_keep(&f, plan_add_sat(seeds_within(vm.avail, 0, per, per), 1), a, b, "");
    }
    if (f.fit >= n) return RLT_OK;
    g->unfit_leads = leads;
    if (f.fit < 1) f.fit = 1; /* the first member fit on its own */
    char where[400], fewer[96];
    const char *key = group_key(&g->cfg);
    if (g->cfg.population.n > 0) snprintf(fewer, sizeof fewer, "%llu members in the population", (unsigned long long)f.fit);
    else if (g->cfg.train.seeds.n > 0) snprintf(fewer, sizeof fewer, "%llu entries in train.seeds", (unsigned long long)f.fit);
    else snprintf(fewer, sizeof fewer, "train.num_seeds: %llu", (unsigned long long)f.fit);
    if (g->cfg.population.n > 0) snprintf(where, sizeof where, "%s: population", g->cfg.source);
    else config_key_where(&g->cfg, key, where, sizeof where);
    RLT_FAIL(&g->err, RLT_ENOFIT, "%s: %d seeds need %s, but %s: at most %llu seed%s fit%s; hint: %s%s",
             where, (int)n, f.need, f.why, (unsigned long long)f.fit,
             f.fit == 1 ? "" : "s", f.fit == 1 ? "s" : "", fewer, f.hint);
}

/* A population member's directory under out_dir: its population.name, else member_<k>. */
static void member_dir_name(const rlt_group *g, int32_t k, char *buf, size_t cap) {
    if (g->cfg.population.named) snprintf(buf, cap, "%.*s", RLT_CFG_POP_NAME, g->cfg.population.name[k]);
    else snprintf(buf, cap, "member_%d", (int)k);
}

/* The ranks of a data-parallel run on the CPU (device: [cpu, cpu, ...]) share one process's address space as
 * seeds do: under an address-space or data limit each further rank's thread maps its host arena, the rest of
 * its run, a malloc arena and an OpenBLAS buffer, and OpenBLAS retries forever when its buffer does not fit (a
 * hang). So they are counted as group_fit counts seeds, after the first rank's init, and refused with exit 3
 * naming the limit when they do not fit. (Their budgets stay per device, as for GPUs.) */
static int group_fit_host_ranks(rlt_group *g) {
    const rlt_agent *ag = g->m[0].tr->agent;
    const rlt_plan *p = &ag->plan;
    if (!p->device_is_host) return RLT_OK;
    rlt_host_limit vm;
    rlt_host_limit_read_vm(&vm);
    if (vm.avail == UINT64_MAX) return RLT_OK;
    const uint64_t n = (uint64_t)g->n, host = p->arena_bytes[RLT_LOC_HOST];
    const uint64_t per = host + p->host_overhead + GROUP_THREAD_ARENA_BYTES + GROUP_BLAS_BUFFER_BYTES;
    uint64_t fit = plan_add_sat(seeds_within(vm.avail, 0, per, per), 1);
    if (fit >= n) return RLT_OK;
    char where[400];
    RLT_FAIL(&g->err, RLT_ENOFIT, "%s: a data-parallel run on %d CPU devices needs %d more x %.2f MiB (a host arena, "
             "%.0f MiB for the rest of the run, %.0f MiB of malloc arena for the rank's thread, an OpenBLAS buffer of "
             "129 MiB) = %.2f MiB, but %s leaves %.2f MiB after the first rank: at most %llu rank%s fit; hint: list "
             "fewer devices, or raise the limit (ulimit -v)", config_key_where(&g->cfg, "device", where, sizeof where),
             (int)n, (int)n - 1, per / MIB, p->host_overhead / MIB, GROUP_THREAD_ARENA_BYTES / MIB,
             plan_mul_sat(n - 1, per) / MIB, vm.source, vm.avail / MIB, (unsigned long long)fit, fit == 1 ? "" : "s");
}

/* Member k's config: the group's with its seed and out_dir/seed_<seed>, and no group keys (it is one run); with
 * several devices, seed k on devices[k mod n]. A data-parallel rank k instead keeps the seed and takes device k,
 * out_dir/rank_<k>, 1/R of the batch and of the replay, and the group's communicator. */
static int member_config(rlt_group *g, int32_t k) {
    seed_member *m = &g->m[k];
    m->cfg = g->cfg;
    m->cfg.seed = m->seed;
    /* A population's member k: its own values (its seed among them), in out_dir/<its name> or out_dir/member_<k>. */
    if (g->pop) {
        config_population_apply(&m->cfg, k);
        m->seed = m->cfg.seed;
    }
    m->cfg.train.num_seeds = 1;
    memset(&m->cfg.train.seeds, 0, sizeof m->cfg.train.seeds);
    m->cfg.train.seed_batching = 0; /* a group key: the member is one run (batch_seeds below carries it) */
    if (g->cfg.devices.n > 0) m->cfg.device = g->cfg.devices.d[k % g->cfg.devices.n];
    memset(&m->cfg.devices, 0, sizeof m->cfg.devices);
    /* Its lane and, batched, its slot in the group's graph and arena span (train/seed_batch.h). */
    if (seed_batch_member(&g->cfg, g->n, k, g->dp, !g->pop_differs[0], &m->cfg)) {
        rlt_arena_span *span = &g->span[k % g->batches];
        if (!span->va) span->n = m->cfg.batch_seeds;
        m->cfg.arena_span = span;
    }
    if (g->dp) {
        config_for_rank(&g->cfg, g->first + k, &m->cfg);
        m->cfg.comm = g->comm;
        snprintf(m->dir, sizeof m->dir, "rank_%d", (int)(g->first + k));
    } else if (g->pop) {
        member_dir_name(g, k, m->dir, sizeof m->dir);
    } else {
        snprintf(m->dir, sizeof m->dir, "seed_%llu", (unsigned long long)m->seed);
    }
    int len = snprintf(m->cfg.out_dir, sizeof m->cfg.out_dir, "%s/%s", g->cfg.out_dir, m->dir);
    if (len < 0 || (size_t)len >= sizeof m->cfg.out_dir) {
        char where[400];
        RLT_FAIL(&g->err, RLT_ECONFIG, "%s: '%s/%s' (%s's out_dir) is longer than %d bytes; use a shorter out_dir",
                 config_key_where(&g->cfg, "out_dir", where, sizeof where), g->cfg.out_dir, m->dir, m->dir,
                 (int)sizeof m->cfg.out_dir - 1);
    }
    return RLT_OK;
}

/* A data-parallel group's communicator: the host side (ranks as threads here, or as processes connected over TCP
 * for a launched run), and on GPUs one NCCL communicator per rank, made here before any rank opens its backend,
 * so that every rank captures its update with them. A launched run's NCCL id comes from rank 0 over the host
 * comm. Every wait is bounded by dist.timeout_s. */
static int group_comm_init(rlt_group *g) {
    rlt_err *e = &g->err;
    const int32_t n = g->n_ranks_here;
    if (g->launched) {
        rlt_comm_net d;
        RLT_TRY(launch_rendezvous(&g->cfg, &d, e));
        RLT_TRY(rlt_comm_connect(&d, &g->comm, e));
    } else {
        g->comm = rlt_comm_create(n);
        if (!g->comm) RLT_FAIL(e, RLT_ENOMEM, "out of host memory for the communicator of %d ranks", (int)n);
        rlt_comm_set_timeout(g->comm, g->cfg.dist.timeout_s);
    }
    rlt_config rc0;
    for (int32_t k = 0; k < n; k++) {
        char dev[32];
        config_for_rank(&g->cfg, g->first + k, &rc0);
        device_format(rc0.device, dev, sizeof dev);
        rlt_comm_set_name(g->comm, g->first + k, dev);
    }
    if (rc0.device.kind != RLT_DEVICE_CUDA) return RLT_OK;
    char why[512];
    g->dev_ops = rlt_backend_cuda_ops(why, sizeof why);
    if (!g->dev_ops) RLT_FAIL(e, RLT_EDEVICE, "a data-parallel run of %d GPUs, but the CUDA backend cannot be loaded: %s",
                              (int)g->world, why);
    if (!g->dev_ops->comm_init) RLT_FAIL(e, RLT_EDEVICE, "the CUDA backend has no collectives");
    int32_t idx[RLT_COMM_MAX_RANKS];
    for (int32_t k = 0; k < n; k++) {
        config_for_rank(&g->cfg, g->first + k, &rc0);
        idx[k] = device_cuda_index(rc0.device);
    }
    rlt_comm_init_desc d;
    memset(&d, 0, sizeof d);
    d.world = g->world;
    d.first_rank = g->first;
    d.n = n;
    d.devices = idx;
    d.timeout_s = g->cfg.dist.timeout_s;
    int rc = RLT_OK;
    if (g->launched) {
        if (g->first == 0) {
            d.mode = RLT_COMM_INIT_ID;
            rc = g->dev_ops->comm_init(&d, NULL, e);
        }
        /* A rank 0 that failed ends its process, and the others see its connection close. */
        if (rc == RLT_OK && rlt_comm_bcast(g->comm, g->first, d.id, sizeof d.id, "NCCL's unique id from rank 0") != RLT_OK)
            rc = rlt_err_set(e, RLT_ERUNTIME, __FILE__, __LINE__, "%s", rlt_comm_errmsg(g->comm));
        d.mode = RLT_COMM_INIT_RANKS;
    }
    void *mine[RLT_COMM_MAX_RANKS] = {0}, *comms[RLT_COMM_MAX_RANKS] = {0};
    if (rc == RLT_OK) rc = g->dev_ops->comm_init(&d, mine, e);
    if (d.note[0]) rlt_log(RLT_LOG_INFO, "data-parallel run: %s", d.note);
    if (rc != RLT_OK) {
        g->dev_ops = NULL;
        return rc;
    }
    for (int32_t k = 0; k < n; k++) comms[g->first + k] = mine[k];
    rlt_comm_set_device(g->comm, comms, g->dev_ops->comm_abort);
    return RLT_OK;
}

/* A launched run: every rank learns whether any rank failed at `what` (its own status rc), so that no process
 * goes on to wait for one that ended. A rank that failed keeps its own error; the others fail naming the step. */
static int group_agree(rlt_group *g, int rc, const char *what) {
    if (!g->launched || !g->comm) return rc;
    int32_t any = 0;
    int arc = rlt_comm_agree(g->comm, g->first, rc != RLT_OK, &any, what);
    if (rc != RLT_OK) return rc;
    if (arc != RLT_OK)
        RLT_FAIL(&g->err, RLT_ERUNTIME, "%s", rlt_comm_errmsg(g->comm)[0] ? rlt_comm_errmsg(g->comm) : "the ranks' "
                 "communicator was aborted");
    if (any)
        RLT_FAIL(&g->err, RLT_ERUNTIME, "rank %d of %d stops: another rank failed at %s (its own output says why)",
                 (int)g->first, (int)g->world, what);
    return RLT_OK;
}

/* 1 when member k's shape (its values of the population's shape keys) is none of members 0 .. k-1's. */
static int group_new_shape(const rlt_group *g, int32_t k) {
    const rlt_population *p = &g->cfg.population;
    size_t nk;
    const cfg_key *keys = config_schema_keys(&nk);
    char why[8];
    for (int32_t j = 0; j < k; j++) {
        int same = 1;
        for (int32_t i = 0; i < p->n_keys && same; i++) {
            const rlt_pop_key *pk = &p->key[i];
            if (pk->n > 1 && config_population_allows(keys[pk->row].key, why, sizeof why) == RLT_POP_SHAPE)
                same = pk->v[j] == pk->v[k];
        }
        if (same) return 0;
    }
    return 1;
}

/* The first population key whose members' values keep them from one batched update graph, into g->pop_differs
 * (learning rates, tau, gamma, noise and schedules do not: the graph reads each member's own). */
static void population_differs(rlt_group *g) {
    g->pop_why = "";
    const char *key = config_population_unbatched(&g->cfg, &g->pop_why);
    snprintf(g->pop_differs, sizeof g->pop_differs, "%s", key ? key : "");
}

/* Batch b's capture (member b leads it) and its lines in the log. */
static void group_batch_capture(rlt_group *g, int32_t b) {
    group_one(g, b, CMD_BATCH); /* on failure batch_why[b] says why, and each of its seeds keeps its own graphs */
    const int32_t n = g->m[b].cfg.batch_seeds;
    const rlt_arena_span *span = &g->span[b];
    char on[96] = "";
    if (g->batches > 1) snprintf(on, sizeof on, " on %s", g->m[b].tr->agent->bk.device_name);
    if (!g->ls[b]) {
        rlt_log(RLT_LOG_INFO, "seed group: each seed%s runs its own update graph: %s", on, g->batch_why[b]);
        return;
    }
    char hot[160] = "";
    if (span->hot_va && span->hot_users == n)
        snprintf(hot, sizeof hot, " (and read %.2f MiB apart: the part of each arena before its replay is mapped a "
                 "second time, packed)", (double)span->hot_stride / (1024.0 * 1024.0));
    if (span->va && !span->why[0])
        rlt_log(RLT_LOG_INFO, "seed group: the %d seeds' updates%s run as one batched graph (one launch for all); "
                "their device arenas lie %.2f MiB apart (each rounded up to the GPU's mapping granularity)%s, so "
                "the batched library products are strided, with the bias in their epilogue", (int)n, on,
                (double)span->stride / (1024.0 * 1024.0), hot);
    else
        rlt_log(RLT_LOG_INFO, "seed group: the %d seeds' updates%s run as one batched graph (one launch for all)%s%s%s",
                (int)n, on, span->why[0] ? "; their device arenas are not at one stride (" : "", span->why,
                span->why[0] ? "), so the batched library products take pointer arrays and a bias pass" : "");
    int32_t rows[SEED_BATCH_ACTS], n_act = lockstep_acts(g->ls[b], rows);
    const char *act_why = lockstep_act_why(g->ls[b]);
    char evals[64] = "";
    if (n_act > 1) snprintf(evals, sizeof evals, " (training) and %d row%s (evaluation)", (int)rows[1], rows[1] == 1 ? "" : "s");
    if (n_act > 0)
        rlt_log(RLT_LOG_INFO, "seed group: the %d seeds%s act as one batched graph (one launch and one sync per step "
                "for all) on %d row%s%s", (int)n, on, (int)rows[0], rows[0] == 1 ? "" : "s", evals);
    if (act_why[0]) rlt_log(RLT_LOG_INFO, "seed group: each seed%s acts on its own %s", on, act_why);
}

static int group_setup(rlt_group *g, const rlt_config *cfg, const rlt_env_callbacks *const *envs, int32_t n_envs) {
    rlt_err *e = &g->err;
    g->cfg = *cfg;
    if (rlt_config_validate(&g->cfg) != RLT_OK) {
        rlt_err_copy(e, &g->cfg.err);
        return e->status;
    }
    int32_t n = group_members_of(&g->cfg);
    g->dp = config_is_data_parallel(&g->cfg);
    g->launched = g->dp && g->cfg.launch.world > 1;
    g->world = g->dp ? config_world(&g->cfg) : n;
    g->first = g->launched ? g->cfg.launch.rank : 0;
    g->n_ranks_here = n;
    g->pop = g->cfg.population.n > 0;
    population_differs(g);
    if (n < 1)
        RLT_FAIL(e, RLT_ECONFIG, "config: train.num_seeds is 1 and train.seeds is []: no seed group; set train.num_seeds: "
                 "N or train.seeds: [a, b, ...] for several seeds, or run one trainer (rlt_trainer_init)");
    if (envs && n_envs != n)
        RLT_FAIL(e, RLT_EINVAL, "rlt_group_init_env: %d environments for %d members (%s): give one per member", (int)n_envs,
                 (int)n, group_key(&g->cfg));
    for (int32_t k = 0; envs && k < n; k++)
        if (!envs[k]) RLT_FAIL(e, RLT_EINVAL, "rlt_group_init_env: envs[%d] is NULL", (int)k);
    if (g->dp) RLT_TRY(group_comm_init(g));
    g->m = rlt_mem_alloc(sizeof *g->m * (uint64_t)n, 64);
    /* A population's rows also name the member's directory and its values. */
    g->csv_cap = (GROUP_CSV_ROW + (g->pop ? (size_t)(RLT_CFG_POP_NAME + 96 * (g->cfg.population.n_keys + 1)) : 0)) *
                 ((size_t)g->world + 1);
    g->csv = rlt_mem_alloc(g->csv_cap, 64);
    if (g->launched) g->rows = rlt_mem_alloc(GROUP_CSV_ROW * (uint64_t)g->world, 64);
    if (!g->m || !g->csv || (g->launched && !g->rows)) RLT_FAIL(e, RLT_ENOMEM, "out of host memory for a seed group of %d members", (int)n);
    g->n = n;
    /* train.seed_batches 0: the count the planner takes under memory.budget_mb (the other budgets are checked below:
     * group_init tries fewer when they refuse several leads). */
    const rlt_device_kind kind0 = g->cfg.devices.n > 0 ? g->cfg.devices.d[0].kind : g->cfg.device.kind;
    if (!g->dp && kind0 == RLT_DEVICE_CUDA && g->cfg.train.seed_batches == 0 && seed_batch_per_device(&g->cfg, n, 0) > 1) {
        g->batches_picked = 1;
        g->cfg.train.seed_batches = plan_group_batches(&g->cfg);
    }
    g->batches = seed_batch_count(&g->cfg, n, g->dp);
    for (int32_t k = 0; k < n; k++) {
        seed_member *m = &g->m[k];
        m->g = g;
        m->seed = group_seed_of(&g->cfg, k);
        m->env = envs ? envs[k] : NULL;
        RLT_TRY(member_config(g, k));
    }
    /* The caller waits with timeouts on the monotonic clock (rlt_group_run's reports). */
    pthread_condattr_t ca;
    if (pthread_mutex_init(&g->mu, NULL) != 0) RLT_FAIL(e, RLT_ERUNTIME, "could not create the seed group's mutex");
    int crc = pthread_condattr_init(&ca);
    if (crc == 0) crc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    int cv1 = crc == 0 ? pthread_cond_init(&g->cv_cmd, NULL) : -1;
    int cv2 = cv1 == 0 ? pthread_cond_init(&g->cv_done, &ca) : -1;
    if (crc == 0) pthread_condattr_destroy(&ca);
    if (cv2 != 0) {
        if (cv1 == 0) pthread_cond_destroy(&g->cv_cmd);
        pthread_mutex_destroy(&g->mu);
        RLT_FAIL(e, RLT_ERUNTIME, "could not create the seed group's condition variables");
    }
    g->sync_ready = 1;
    /* Several seeds on one GPU run their graphs from as many streams at once. The device gives a process 8 hardware
     * queues unless CUDA_DEVICE_MAX_CONNECTIONS (read when the process first initialises CUDA) says more, and
     * streams beyond them share queues, which serialises their work: 16 TD3 seeds on an H100 gain 1.2x with 8
     * queues and about twice that with 32 (bench/RESULTS.md). A value the user set is kept. */
    for (int32_t k = 0; k < n; k++)
        if (g->m[k].cfg.lanes == 1 && g->m[k].cfg.device.kind != RLT_DEVICE_CPU) {
            setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
            break;
        }
    for (int32_t k = 0; k < n; k++) {
        if (pthread_create(&g->m[k].thread, NULL, member_main, &g->m[k]) != 0)
            RLT_FAIL(e, RLT_ERUNTIME, "could not start the thread of seed %llu (member %d of %d)",
                     (unsigned long long)g->m[k].seed, (int)k + 1, (int)n);
        g->m[k].started = 1;
    }
    /* The first member (with a population of several shapes, the first of each shape; in a batched group the second
     * too, which has no batched workspace), then the check that N of it (of the largest) fit, then the rest: a
     * group that cannot fit stops before the others reserve anything. */
    int32_t inited = 0;
    for (int32_t k = 0; k < n; k++) {
        if (k > 0 && !group_new_shape(g, k) && k != group_rest_index(g)) continue;
        int rc = group_one(g, k, CMD_INIT);
        if (rc != RLT_OK) {
            g->shown = k;
            rc = group_member_failed(g, k, rc, "");
        }
        RLT_TRY(group_agree(g, rc, "start-up (planning and reserving each rank's memory)"));
        g->m[k].inited = 1;
        inited++;
        if (agent_plan_need(g->m[k].tr->agent) > agent_plan_need(g->m[g->shown].tr->agent)) g->shown = k;
    }
    /* Members on one device share its budgets; on several, each member's init holds its own device's. */
    if (!g->dp || g->cfg.devices.n <= 1) RLT_TRY(group_fit(g));
    else RLT_TRY(group_fit_host_ranks(g));
    for (int32_t k = 1; k < n; k++) {
        if (g->m[k].inited) continue;
        int rc = group_one(g, k, CMD_INIT);
        if (rc != RLT_OK) {
            g->shown = k;
            char then[160] = "";
            if (rc == RLT_ENOFIT)
                snprintf(then, sizeof then, "; the %d member%s before it fit", (int)inited, inited == 1 ? "" : "s");
            return group_member_failed(g, k, rc, then);
        }
        g->m[k].inited = 1;
        inited++;
    }
    /* Seeds sharing a GPU: their updates as one batched graph when the backend and the plan allow it. */
    int32_t batched = 0;
    for (int32_t b = 0; b < g->batches && b < n; b++)
        if (g->m[b].cfg.batch_seeds > 1) {
            batched = 1;
            group_batch_capture(g, b);
        }
    /* Batches the default picked (train.seed_batches 0): how many, and how to choose. */
    const int32_t per_gpu = seed_batch_per_device(&g->cfg, n, g->dp);
    if (batched && g->batches_picked && per_gpu > 1)
        rlt_log(RLT_LOG_INFO, "seed group: %d batches a GPU (train.seed_batches 0 picks a batch for every 4 seeds a GPU "
                "has, at most 4, or 2 for large updates, fewer where their leads exceed memory.budget_mb: one batch's "
                "update runs while another's seeds act; set it to choose, 1 for one batched graph)", (int)per_gpu);
    /* Each batch said how it runs (group_batch_capture); otherwise why nothing batches. */
    if (!batched && g->cfg.train.seed_batching) {
        if (g->pop_differs[0] && !g->dp && g->m[0].cfg.device.kind == RLT_DEVICE_CUDA)
            rlt_log(RLT_LOG_INFO, "seed group: each member runs its own update graph (train.seed_batching): the members' "
                    "%s differ: %s (learning rates, tau, gamma, target noise, clipping thresholds, exploration and "
                    "schedules may differ in one batched graph)", g->pop_differs, g->pop_why);
        else /* on by default: the CPU, where it never applies, says so only at debug level */
            rlt_log(g->m[0].cfg.device.kind == RLT_DEVICE_CUDA ? RLT_LOG_INFO : RLT_LOG_DEBUG,
                    "seed group: train.seed_batching has no effect here: it batches the seeds that share "
                    "one GPU (device: cuda or cuda:N, or an entry of devices) (%s)", g->dp ? "this is a data-parallel "
                    "run" : g->m[0].cfg.device.kind != RLT_DEVICE_CUDA ? "not a GPU" : "one seed for each device");
    }
    /* The group is sealed now: each member's count of allocations after init starts here, so the members
     * initialised after it (which allocate, before any run) do not count against the first. */
    uint64_t sealed = rlt_mem_alloc_count();
    for (int32_t k = 0; k < n; k++) {
        g->m[k].tr->agent->allocs_at_seal = sealed;
        rlt_trainer_progress(g->m[k].tr, &g->m[k].snap); /* no evaluation yet: NaN returns */
    }
    return RLT_OK;
}

static int group_init(const rlt_config *cfg, const rlt_env_callbacks *const *envs, int32_t n_envs, rlt_group **out) {
    if (!out) return RLT_EINVAL;
    *out = NULL;
    if (!cfg) return RLT_EINVAL;
    /* train.seed_batches 0: where the batches' leading seeds (each with its batch's library workspace) do not fit,
     * the group starts again with half as many batches a GPU, down to one, before it refuses. */
    rlt_config *fewer = NULL;
    const rlt_config *c = cfg;
    int rc;
    for (;;) {
        rlt_group *g = *out = rlt_mem_alloc(sizeof *g, 64);
        if (!g) {
            rc = RLT_ENOMEM;
            break;
        }
        g->lock_fd = -1;
        rc = group_setup(g, c, envs, n_envs);
        if (rc != RLT_ENOFIT || g->unfit_leads <= 1 || cfg->train.seed_batches != 0) break;
        if (!fewer && !(fewer = rlt_mem_alloc(sizeof *fewer, 64))) break;
        *fewer = g->cfg;
        const int32_t was = g->batches, per = seed_batch_fewer(fewer, g->n, g->dp, 1);
        if (per < 1) break;
        rlt_log(RLT_LOG_INFO, "seed group: %d batches' leading seeds do not fit (%s); train.seed_batches 0 tries %d "
                "batch%s a GPU", (int)was, g->err.msg, (int)per, per == 1 ? "" : "es");
        rlt_group_free(g);
        *out = NULL;
        c = fewer;
    }
    rlt_mem_free(fewer);
    return rc;
}

int rlt_group_init(const rlt_config *cfg, rlt_group **out) { return group_init(cfg, NULL, 0, out); }

int rlt_group_init_env(const rlt_config *cfg, const rlt_env_callbacks *const *envs, int32_t n_envs, rlt_group **out) {
    if (!envs) {
        if (out) *out = NULL;
        return RLT_EINVAL;
    }
    return group_init(cfg, envs, n_envs, out);
}

void rlt_group_free(rlt_group *g) {
    if (!g) return;
    /* Each thread frees its own trainer (its device objects belong to it), then ends. */
    int32_t started = 0;
    for (int32_t k = 0; k < g->n; k++) started += g->m[k].started;
    if (started) {
        pthread_mutex_lock(&g->mu);
        for (int32_t k = 0; k < g->n; k++)
            if (g->m[k].started) g->m[k].cmd = CMD_EXIT;
        g->pending += started;
        pthread_cond_broadcast(&g->cv_cmd);
        pthread_mutex_unlock(&g->mu);
        for (int32_t k = 0; k < g->n; k++)
            if (g->m[k].started) pthread_join(g->m[k].thread, NULL);
    }
    if (g->sync_ready) {
        pthread_cond_destroy(&g->cv_cmd);
        pthread_cond_destroy(&g->cv_done);
        pthread_mutex_destroy(&g->mu);
    }
    for (int32_t b = 0; b < RLT_CFG_MAX_DEVICES; b++) lockstep_free(g->ls[b]);
    if (g->comm) {
        for (int32_t k = 0; g->dev_ops && k < rlt_comm_size(g->comm); k++)
            if (rlt_comm_device(g->comm, k)) g->dev_ops->comm_destroy(rlt_comm_device(g->comm, k));
        rlt_comm_free(g->comm);
    }
    rlt_mem_free(g->m);
    rlt_mem_free(g->csv);
    rlt_mem_free(g->rows);
    out_unlock_dir(&g->lock_fd);
    rlt_mem_free(g);
}

/* ---- the plan table ---------------------------------------------------------------------------------- */

size_t rlt_group_plan_format(const rlt_group *g, char *buf, size_t cap) {
    if (cap) buf[0] = '\0';
    if (!g || !g->m || g->shown >= g->n) return 0;
    const rlt_trainer *tr = g->m[g->shown].tr;
    if (!tr || !tr->agent || tr->agent->summary.n_entries == 0) return 0;
    const rlt_agent *ag = tr->agent;
    const rlt_plan_summary *s = &ag->summary;
    rlt_text t = {buf, cap, plan_format(&ag->plan, s, buf, cap)};
    char a[32], b[32], c[32], d[32];
    if (g->dp) {
        /* Each rank's plan is its own device's; the table above is the shown rank's. */
        char dev[32];
        device_format(g->m[g->shown].cfg.device, dev, sizeof dev);
        plan_bytes_text(a, sizeof a, s->device_bytes);
        plan_bytes_text(b, sizeof b, s->host_bytes);
        rlt_text_add(&t, "data-parallel run: %d ranks (devices%s), one replica, arena and replay shard each (the table is "
                     "rank %d's, on %s: device arena %s, host arena %s); every rank takes batch %d of %d and averages "
                     "its gradients with the others'\n", (int)g->world, g->launched ? ", one process each" : "",
                     (int)(g->first + g->shown), dev, a, b,
                     (int)g->m[g->shown].cfg.train.batch_size, (int)g->cfg.train.batch_size);
        return t.len;
    }
    rlt_text_add(&t, "seed group: %d seeds (%s), one trainer and one arena each, all reserved at init\n", (int)g->n,
                 group_key(&g->cfg));
    if (config_population_has_shapes(&g->cfg))
        rlt_text_add(&t, "  members of several shapes: the table and the per-seed figures are the largest member's (%s), "
                     "and the totals hold it for every member\n", g->m[g->shown].dir);
    /* A batched group's leading seed (the table) holds the batched library workspace; the others plan as one run. */
    const rlt_agent *rest = group_rest_agent(g);
    const rlt_plan_summary *r = &rest->summary;
    plan_bytes_text(a, sizeof a, s->host_bytes);
    plan_bytes_text(b, sizeof b, s->device_bytes);
    plan_bytes_text(c, sizeof c, group_sum(g, s->host_bytes, r->host_bytes));
    plan_bytes_text(d, sizeof d, group_sum(g, s->device_bytes, r->device_bytes));
    rlt_text_add(&t, "  per seed: host arena %s, device arena %s", a, b);
    if (rest != ag) {
        plan_bytes_text(a, sizeof a, r->device_bytes);
        if (group_leads(g) > 1)
            rlt_text_add(&t, " (each of the %d batches' leading seeds, which runs its batch's graph; each other seed's "
                         "device arena %s)", (int)group_leads(g), a);
        else
            rlt_text_add(&t, " (the leading seed, which runs the batched graph; each other seed's device arena %s)", a);
    }
    rlt_text_add(&t, "; all %d seeds: host arenas %s, device arenas %s\n", (int)g->n, c, d);
    if (!ag->plan.device_is_host && g->cfg.devices.n <= 1) {
        plan_bytes_text(a, sizeof a, s->context_bytes - s->handle_bytes);
        plan_bytes_text(b, sizeof b, r->handle_bytes);
        plan_bytes_text(c, sizeof c, plan_add_sat(s->context_bytes - s->handle_bytes,
                                                  group_sum(g, s->device_bytes + s->handle_bytes,
                                                            r->device_bytes + r->handle_bytes)));
        rlt_text_add(&t, "  whole process on the device: context and kernels %s once + %d x (device arena + library "
                     "handles %s) = %s\n", a, (int)g->n, b, c);
    }
    const uint64_t all = group_sum(g, agent_plan_need(ag), agent_plan_need(rest));
    plan_bytes_text(a, sizeof a, s->budget_bytes);
    plan_bytes_text(b, sizeof b, all);
    rlt_text_add(&t, "  budget %s for the %s arenas of all seeds: needs %s -> %s\n", a,
                 ag->plan.device_is_host ? "host" : "device", b, all <= s->budget_bytes ? "fits" : "DOES NOT FIT");
    return t.len;
}

/* ---- resume and run ---------------------------------------------------------------------------------- */

/* One owner per out_dir (outputs.h): the group holds its top directory's lock, and each member its own
 * directory's (out_dir/seed_<seed>, out_dir/rank_<k>), all taken before anything there changes, so a second
 * group, a single run into a member's directory, or a resume of either is refused while this group lives. In a
 * launched run only rank 0's process takes the top directory's. */
static int group_lock(rlt_group *g, int create) {
    struct stat st;
    if (!create && (stat(g->cfg.out_dir, &st) != 0 || !S_ISDIR(st.st_mode))) return RLT_OK;
    RLT_TRY(out_mkdirs(&g->err, g->cfg.out_dir));
    /* A launched run (one process per rank) shares out_dir between its processes: rank 0's holds the top directory
     * (its summary.csv), every process its own rank_<k>/. */
    if (!g->launched || g->first == 0) RLT_TRY(out_lock_dir(&g->err, g->cfg.out_dir, &g->lock_fd));
    for (int32_t k = 0; k < g->n && create; k++) {
        int rc = trainer_lock_out_dir(g->m[k].tr);
        if (rc != RLT_OK) return group_member_failed(g, k, rc, "");
    }
    return RLT_OK;
}

int rlt_group_resume(rlt_group *g, const char *name) {
    if (!g || !name) return RLT_EINVAL;
    if (!g->m || g->n < 1 || !g->m[g->n - 1].tr || !g->m[g->n - 1].tr->agent ||
        !g->m[g->n - 1].tr->agent->plan.sealed)
        RLT_FAIL(&g->err, RLT_ESTATE, "rlt_group_resume after a failed init");
    if (g->ran) RLT_FAIL(&g->err, RLT_ESTATE, "rlt_group_resume after rlt_group_run");
    const char *slash = strrchr(name, '/');
    const char *base = slash ? slash + 1 : name;
    if (!base[0] || strlen(base) >= sizeof g->resume_name)
        RLT_FAIL(&g->err, RLT_EINVAL, "rlt_group_resume: '%s' names no checkpoint file: give its file name, like "
                 "final.ckpt or ckpt_<step>.ckpt (each seed resumes from its own out_dir/seed_<seed>/)", name);
    snprintf(g->resume_name, sizeof g->resume_name, "%s", base);
    RLT_TRY(group_lock(g, 0)); /* each member's rlt_trainer_resume takes its own directory's */
    for (int32_t k = 0; k < g->n; k++) {
        int rc = group_one(g, k, CMD_RESUME);
        if (rc != RLT_OK) rc = group_member_failed(g, k, rc, "");
        RLT_TRY(group_agree(g, rc, "the resume (each rank from its own rank_<k>/ checkpoint)"));
    }
    g->resumed = 1;
    return RLT_OK;
}

/* The combined figures from the members' latest reports (under mu). */
static void group_report_locked(const rlt_group *g, rlt_group_report *r) {
    memset(r, 0, sizeof *r);
    r->n_members = g->n;
    r->eval_mean = r->eval_min = r->eval_max = NAN;
    double sum = 0.0;
    for (int32_t k = 0; k < g->n; k++) {
        const rlt_progress *p = &g->m[k].snap;
        r->env_steps += p->env_steps;
        r->updates += p->updates;
        r->total_steps += g->m[k].cfg.train.total_steps;
        if (isnan(p->last_eval_return)) continue;
        if (!r->n_evaluated || p->last_eval_return < r->eval_min) r->eval_min = p->last_eval_return;
        if (!r->n_evaluated || p->last_eval_return > r->eval_max) r->eval_max = p->last_eval_return;
        sum += p->last_eval_return;
        r->n_evaluated++;
    }
    if (r->n_evaluated) r->eval_mean = sum / r->n_evaluated;
    double end = g->t_end > 0 ? g->t_end : rlt_now_s();
    r->elapsed_s = g->t0 > 0 ? end - g->t0 : 0.0;
    /* The members' own rates and ETAs (train/trainer.c: what this process did, the ETA from the steps since the
     * first update): a resumed group's earlier updates took another process's time. The group ends with its last
     * member; one that cannot tell yet leaves the group's ETA unknown. */
    r->eta_s = 0.0;
    r->device_free_mib = r->cotenants_mib = NAN; /* GPU members: the tightest of their devices */
    for (int32_t k = 0; k < g->n; k++) {
        const rlt_progress *p = &g->m[k].snap;
        r->updates_per_s += p->updates_per_s;
        r->env_steps_per_s += p->env_steps_per_s;
        if (isnan(p->eta_s) || isnan(r->eta_s)) r->eta_s = NAN;
        else if (p->eta_s > r->eta_s) r->eta_s = p->eta_s;
        if (!isnan(p->device_free_mib) && !(p->device_free_mib >= r->device_free_mib)) r->device_free_mib = p->device_free_mib;
        if (!isnan(p->cotenants_mib) && !(p->cotenants_mib <= r->cotenants_mib)) r->cotenants_mib = p->cotenants_mib;
    }
}

int rlt_group_progress(const rlt_group *g, rlt_group_report *out) {
    if (!g || !out || !g->sync_ready) return RLT_EINVAL;
    rlt_group *w = (rlt_group *)g; /* the mutex only */
    pthread_mutex_lock(&w->mu);
    group_report_locked(g, out);
    pthread_mutex_unlock(&w->mu);
    return RLT_OK;
}

/* Evaluations that every member has made (under mu). */
static int32_t group_eval_round(const rlt_group *g) {
    int32_t r = g->m[0].n_evals;
    for (int32_t k = 1; k < g->n; k++)
        if (g->m[k].n_evals < r) r = g->m[k].n_evals;
    return r;
}

/* Waits for the members' runs, reporting every train.progress_every_s seconds and after each evaluation round
 * (every member has made one more evaluation). Returns 1 when fn asked to stop. */
static int group_supervise(rlt_group *g, rlt_group_progress_fn fn, void *user) {
    double every = g->cfg.train.progress_every_s > 0.01 ? g->cfg.train.progress_every_s : 0.01;
    double next = rlt_now_s() + every;
    int32_t round = group_eval_round(g);
    int stopped = 0;
    pthread_mutex_lock(&g->mu);
    for (;;) {
        int32_t r = group_eval_round(g);
        double t = rlt_now_s();
        if (fn && !stopped && (r > round || t >= next)) {
            rlt_group_report rep;
            group_report_locked(g, &rep);
            rep.is_eval = r > round;
            round = r;
            next = t + every;
            pthread_mutex_unlock(&g->mu);
            if (fn(user, &rep)) {
                stopped = 1;
                rlt_group_request_stop(g);
            }
            pthread_mutex_lock(&g->mu);
            continue;
        }
        if (g->pending == 0) break;
        double wait = next - t;
        if (wait < 0.001) wait = 0.001;
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        long long ns = (long long)ts.tv_nsec + (long long)(wait * 1e9);
        ts.tv_sec += (time_t)(ns / 1000000000LL);
        ts.tv_nsec = (long)(ns % 1000000000LL);
        pthread_cond_timedwait(&g->cv_done, &g->mu, &ts);
    }
    pthread_mutex_unlock(&g->mu);
    return stopped;
}

static const char *member_status(int rc) { return rc == RLT_OK ? "finished" : rc == RLT_EINTERRUPTED ? "stopped" : "failed"; }

/* Member k's summary.csv row into b (at most GROUP_CSV_ROW bytes); its length. Short formats one at a time: glibc's
 * printf takes a heap buffer for formats with many conversions. */
static size_t group_row(const rlt_group *g, int32_t k, char *b, size_t cap) {
    const seed_member *m = &g->m[k];
    rlt_progress p;
    size_t o = 0;
    rlt_trainer_progress(m->tr, &p);
    if (g->pop) { /* a population's row names the member's directory, seed and values */
        const rlt_population *pop = &g->cfg.population;
        size_t nk;
        const cfg_key *keys = config_schema_keys(&nk);
        o += (size_t)snprintf(b + o, cap - o, "%d,%s,%llu,", (int)k, m->dir, (unsigned long long)m->seed);
        for (int32_t i = 0; i < pop->n_keys && o < cap; i++) {
            if (strcmp(keys[pop->key[i].row].key, "seed") == 0) continue;
            char v[160];
            config_population_format(&g->cfg, i, k, v, sizeof v);
            /* A list's commas: the field in double quotes (RFC 4180). */
            o += (size_t)snprintf(b + o, cap - o, strchr(v, ',') ? "\"%s\"," : "%s,", v);
        }
    } else {
        o += (size_t)snprintf(b + o, cap - o, "%llu,", g->dp ? (unsigned long long)(g->first + k) : (unsigned long long)m->seed);
    }
    if (o < cap) o += (size_t)snprintf(b + o, cap - o, "%s,", member_status(m->rc));
    if (o < cap) o += (size_t)snprintf(b + o, cap - o, "%lld,%lld,", (long long)p.env_steps, (long long)p.updates);
    if (o < cap && !isnan(p.last_eval_return)) o += (size_t)snprintf(b + o, cap - o, "%.6f", p.last_eval_return);
    if (o < cap) o += (size_t)snprintf(b + o, cap - o, ",");
    if (o < cap && !isnan(p.best_eval_return)) o += (size_t)snprintf(b + o, cap - o, "%.6f", p.best_eval_return);
    if (o < cap) o += (size_t)snprintf(b + o, cap - o, ",%.4f\n", p.elapsed_s);
    return o;
}

/* out_dir/summary.csv: one row per member (a launched run: one per rank, gathered to rank 0, which alone writes
 * it; a rank lost on the way is a "lost" row), written atomically into the buffer reserved at init. */
static int group_write_summary(rlt_group *g) {
    size_t o = 0, cap = g->csv_cap;
    char *b = g->csv;
    const rlt_population *pop = &g->cfg.population;
    size_t nk;
    const cfg_key *keys = config_schema_keys(&nk);
    if (g->pop) {
        o += (size_t)snprintf(b + o, cap - o, "member,dir,seed,");
        for (int32_t i = 0; i < pop->n_keys && o < cap; i++)
            if (strcmp(keys[pop->key[i].row].key, "seed") != 0)
                o += (size_t)snprintf(b + o, cap - o, "%s,", keys[pop->key[i].row].key);
    } else {
        o += (size_t)snprintf(b + o, cap - o, "%s,", g->dp ? "rank" : "seed");
    }
    if (o < cap) o += (size_t)snprintf(b + o, cap - o, "status,env_steps,updates,last_eval_return,best_eval_return,wall_s\n");
    if (g->launched) {
        char mine[GROUP_CSV_ROW];
        memset(mine, 0, sizeof mine);
        group_row(g, 0, mine, sizeof mine - 1);
        int grc = rlt_comm_allgather(g->comm, g->first, mine, GROUP_CSV_ROW, g->rows, "every rank's summary.csv row");
        if (g->first != 0) return RLT_OK;
        for (int32_t r = 0; r < g->world && o < cap; r++) {
            const char *row = g->rows + (size_t)r * GROUP_CSV_ROW;
            if (r == 0) row = mine;
            if (grc == RLT_OK || r == 0) o += (size_t)snprintf(b + o, cap - o, "%s", row);
            else o += (size_t)snprintf(b + o, cap - o, "%d,lost,,,,,\n", (int)r);
        }
    } else {
        for (int32_t k = 0; k < g->n && o < cap; k++) o += group_row(g, k, b + o, cap - o);
    }
    if (o >= cap) RLT_FAIL(&g->err, RLT_ERUNTIME, "summary.csv is longer than its buffer (%zu bytes)", cap);
    char path[600];
    snprintf(path, sizeof path, "%s/summary.csv", g->cfg.out_dir);
    return out_write_atomic(&g->err, path, b, o);
}

/* Before any member starts: an earlier group's summary.csv in out_dir is refused like an earlier run's outputs
 * (unless the group resumed or train.overwrite is set, which removes it), and so is every member's out_dir
 * that rlt_trainer_run would refuse, so a refusal leaves every member untouched. */
static int group_prepare(rlt_group *g) {
    char path[600], where[400];
    RLT_TRY(group_lock(g, 1));
    snprintf(path, sizeof path, "%s/summary.csv", g->cfg.out_dir);
    /* A launched run's summary.csv is rank 0's to check and write. */
    if (g->first == 0 && access(path, F_OK) == 0 && !g->resumed) {
        if (!g->cfg.train.overwrite)
            RLT_FAIL(&g->err, RLT_ECONFIG, "%s: '%s' holds the summary.csv of an earlier seed group, which this one would "
                     "replace; continue that group by resuming it (rltrain --resume final.ckpt), choose another out_dir, "
                     "or set train.overwrite: true (--set train.overwrite=true) to replace it",
                     config_key_where(&g->cfg, "out_dir", where, sizeof where), g->cfg.out_dir);
        unlink(path);
    }
    for (int32_t k = 0; k < g->n; k++) {
        int rc = trainer_check_out_dir(g->m[k].tr);
        if (rc != RLT_OK) return group_member_failed(g, k, rc, "");
    }
    return out_mkdirs(&g->err, g->cfg.out_dir);
}

/* Batched updates need the seeds in step: after a resume from checkpoints of different update counts (a seed
 * that stopped early) each seed of that batch runs its own graphs instead. */
static void group_lockstep_attach(rlt_group *g) {
    for (int32_t b = 0; b < g->batches; b++) {
        if (!g->ls[b]) continue;
        int32_t k = b + g->batches;
        while (k < g->n && g->m[k].tr->agent->updates == g->m[b].tr->agent->updates) k += g->batches;
        if (k < g->n) {
            rlt_log(RLT_LOG_INFO, "seed group: the seeds resumed at different update counts (%lld and %lld); each runs "
                    "its own update graph", (long long)g->m[b].tr->agent->updates, (long long)g->m[k].tr->agent->updates);
            continue;
        }
        lockstep_set_threads(g->ls[b], g->n); /* every seed of every batch has a thread */
        if (b == 0 && lockstep_sleeps(g->ls[b]))
            rlt_log(RLT_LOG_INFO, "seed group: %d seeds nearly fill this machine's cores: they sleep between batched "
                    "rounds instead of spinning (RLT_SEEDS_WAIT=spin to spin)", (int)g->n);
        if (b == 0 && lockstep_yields(g->ls[b]))
            rlt_log(RLT_LOG_INFO, "seed group: %d seeds %s: they yield between batched rounds, neither spinning nor "
                    "asleep (RLT_SEEDS_WAIT=sleep to sleep)", (int)g->n,
                    g->n <= LOCKSTEP_YIELD_MAX ? "leave this machine few spare cores, and are few"
                                               : "are twice this machine's cores or more");
        lockstep_attach(g->ls[b]);
    }
}

int rlt_group_run(rlt_group *g, rlt_group_progress_fn fn, void *user) {
    if (!g) return RLT_EINVAL;
    if (!g->m || g->n < 1 || !g->m[g->n - 1].tr || !g->m[g->n - 1].tr->agent || !g->m[g->n - 1].tr->agent->plan.sealed)
        RLT_FAIL(&g->err, RLT_ESTATE, "rlt_group_run after a failed init");
    if (g->ran) RLT_FAIL(&g->err, RLT_ESTATE, "rlt_group_run runs a group once");
    g->ran = 1;
    RLT_TRY(group_agree(g, group_prepare(g), "the check of the output directories"));
    pthread_mutex_lock(&g->mu);
    for (int32_t k = 0; k < g->n; k++) {
        rlt_trainer_progress(g->m[k].tr, &g->m[k].snap); /* a resumed member starts from its step */
        g->m[k].n_evals = 0;
    }
    g->t0 = rlt_now_s();
    pthread_mutex_unlock(&g->mu);
    if (g->stop)
        for (int32_t k = 0; k < g->n; k++) rlt_trainer_request_stop(g->m[k].tr);
    group_lockstep_attach(g);
    group_post(g, 0, g->n, CMD_RUN);
    int by_fn = group_supervise(g, fn, user);
    for (int32_t b = 0; b < g->batches; b++) {
        if (!g->ls[b]) continue;
        lockstep_detach(g->ls[b]);
        uint64_t act_rounds = 0, update_rounds = 0, store_rounds = 0;
        lockstep_rounds(g->ls[b], &act_rounds, &update_rounds, &store_rounds);
        char stores[96] = "", on[96] = "", beside[96] = "";
        if (store_rounds != UINT64_MAX)
            snprintf(stores, sizeof stores, "; %llu of them ran the seeds' transition stores in one launch",
                     (unsigned long long)store_rounds);
        const uint64_t aside_rounds = lockstep_aside_rounds(g->ls[b]);
        if (aside_rounds)
            snprintf(beside, sizeof beside, "; %llu acting rounds ran beside an update that left the policies as they "
                     "were", (unsigned long long)aside_rounds);
        if (g->batches > 1) snprintf(on, sizeof on, " on %s", g->m[b].tr->agent->bk.device_name);
        rlt_log(RLT_LOG_INFO, "seed group%s: %llu batched acting rounds and %llu batched update rounds%s%s", on,
                (unsigned long long)act_rounds, (unsigned long long)update_rounds, stores, beside);
        double first[2], gap[2], run[2];
        lockstep_times(g->ls[b], first, gap, run);
        const double na = act_rounds ? (double)act_rounds : 1.0, nu = update_rounds ? (double)update_rounds : 1.0;
        rlt_log(RLT_LOG_INFO, "seed group%s: a round's time: acting %.1f us from the round before to the last seed's "
                "arrival (the slowest seed's own work: its environment, staging; the first arrives after %.1f us) + "
                "%.1f us to launch and sync; update %.1f + %.1f us (first arrival %.1f us; launch, and its sync when it "
                "ran the transition stores); in all %.2f s waiting for seeds and %.2f s in launches", on,
                1e6 * gap[0] / na, 1e6 * first[0] / na, 1e6 * run[0] / na, 1e6 * gap[1] / nu, 1e6 * run[1] / nu,
                1e6 * first[1] / nu, gap[0] + gap[1], run[0] + run[1]);
    }
    pthread_mutex_lock(&g->mu);
    g->t_end = rlt_now_s();
    for (int32_t k = 0; k < g->n; k++) rlt_trainer_progress(g->m[k].tr, &g->m[k].snap);
    pthread_mutex_unlock(&g->mu);
    int src = group_write_summary(g);
    /* The first member that failed (the others were stopped because of it), else a stop, else success. */
    int rc = RLT_OK;
    for (int32_t k = 0; k < g->n; k++)
        if (g->m[k].rc != RLT_OK && g->m[k].rc != RLT_EINTERRUPTED) return group_member_failed(g, k, g->m[k].rc, "");
    for (int32_t k = 0; k < g->n; k++)
        if (g->m[k].rc == RLT_EINTERRUPTED) rc = RLT_EINTERRUPTED;
    if (src != RLT_OK) return src;
    if (rc == RLT_EINTERRUPTED)
        rlt_err_set(&g->err, rc, __FILE__, __LINE__, "stopped %s; every seed wrote its outputs and final.ckpt (resume "
                    "them with rltrain --resume final.ckpt)", by_fn ? "by the progress callback" : "on request");
    return rc;
}

void rlt_group_request_stop(rlt_group *g) {
    if (!g) return;
    g->stop = 1;
    for (int32_t k = 0; k < g->n; k++) rlt_trainer_request_stop(g->m[k].tr);
}

/* ---- accessors --------------------------------------------------------------------------------------- */

int32_t rlt_group_size(const rlt_group *g) { return g ? g->n : 0; }

int32_t rlt_group_ranks(const rlt_group *g) { return g && g->dp ? g->world : 0; }

int32_t rlt_group_rank(const rlt_group *g, int32_t k) { return g && g->dp && k >= 0 && k < g->n ? g->first + k : -1; }

rlt_trainer *rlt_group_member(rlt_group *g, int32_t k) { return g && k >= 0 && k < g->n ? g->m[k].tr : NULL; }

uint64_t rlt_group_seed(const rlt_group *g, int32_t k) { return g && k >= 0 && k < g->n ? g->m[k].seed : 0; }

const char *rlt_group_member_dir(const rlt_group *g, int32_t k) { return g && k >= 0 && k < g->n ? g->m[k].dir : NULL; }

int32_t rlt_group_population_keys(const rlt_group *g) { return g && g->pop ? g->cfg.population.n_keys : 0; }

const char *rlt_group_out_dir(const rlt_group *g) { return g ? g->cfg.out_dir : NULL; }

const char *rlt_group_errmsg(const rlt_group *g) { return g ? g->err.msg : "no seed group (allocation failed)"; }
