/* test_lockstep.c: the lock-step of batched seed groups (train/seed_batch.h), on the CPU with a stand-in backend
 * that counts the hand-over calls instead of touching a GPU.
 * - Four agents, 3,000 updates each: exactly one launch per round, of the round's variant, after every other agent
 *   marked its work, and every non-leading agent follows each launch; the leading agent never marks or follows.
 * - An agent that leaves early (its run over) stops being waited for: the others finish their rounds.
 * - Variants out of step in one round fail that round and every later call, for every agent, naming the cause.
 * - A failed launch fails every agent of that round and later ones, with the backend's message. No case hangs
 *   (a watchdog ends the test).
 * - lockstep_free never touches its agents, which a group has freed by then.
 * - Acting rounds between the updates (train/seed_batch.h): agents that act a different number of times between
 *   updates (evaluation episodes of different lengths), on two captured row counts and one that was not: every
 *   chunk of a captured count is run by exactly one launch of its slot, with the group's sync after it, while every
 *   agent still running is inside the lock-step; the agent reads its own output afterwards, never one a later round
 *   wrote over; an uncaptured count returns at once, not run; the updates still run once per round.
 * - Transition stores (lockstep_set_store): each agent holds one copy a round in its copy list (attach points its
 *   replay.defer at it); every round that finds copies held runs all the agents' lists in one call before its
 *   launch, syncs before letting the agents go (an update round too), and empties the lists: after its update each
 *   agent finds its value in place, its list empty, and no store call left unsynced; rounds with nothing held run
 *   no store.
 * - Acting beside the updates (lockstep_set_aside): agents alternating a policy-keeping update and one that changes
 *   the policies, acting once before each: every acting round after a policy-keeping update runs beside it
 *   (ASIDE_LAUNCH, no sync; counted by lockstep_aside_rounds), every other after its update with the group's sync; the
 *   lead's lane 0 is marked once before each policy-keeping update that follows a change; without lockstep_set_aside
 *   nothing runs beside.
 * - Where a round's time went (lockstep_times): with one agent slow before each update, the last arrivals trail the
 *   round before by at least its delay and the first arrivals come well before it.
 * - Who batches with whom (seed_batch_member): on one GPU every seed in one batch at slot k, member 0 leading on a
 *   single run's lanes; seeds spread over devices batch per entry (member k on devices[k mod d], slot k / d, the
 *   entry's first member leading), an entry with one seed or on the CPU not at all; nothing batches without
 *   train.seed_batching or in a data-parallel run; train.seed_batches splits each GPU's seeds into that many batches
 *   (member k in batch k mod the count, slot k / the count), at least two seeds a batch (seed_batch_count); 0, the
 *   default, a batch for every 4 seeds a GPU has (at most 4), halved while its leads do not fit (seed_batch_fewer).
 * - How the waiters wait (lockstep_set_threads): asleep once the seed threads leave fewer than an eighth of this
 *   machine's cores (at least 2) free, unless they are at most LOCKSTEP_YIELD_MAX (then yielding alone), spinning
 *   below that; RLT_SEEDS_WAIT=spin|sleep overrides.
 * Every case but the last two runs four times: with the waiters spinning and yielding (RLT_SEEDS_WAIT=spin, what few
 * seeds on many cores get), asleep on the futex at once (sleep), where a wake-up lost after a round or a failure would
 * hang the case, spinning and then asleep (spin_sleep), and as lockstep_new chooses for 4 agents on this machine
 * (yielding alone on 2 to 36 cores). */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "algo.h"
#include "harness.h"
#include "seed_batch.h"

#define N_AGENTS 4
#define ROUNDS 3000

static atomic_int g_marks[N_AGENTS], g_follows[N_AGENTS];
static int g_launches, g_fail_at = -1, g_marks_at_launch_ok = 1;
static int32_t g_slots[ROUNDS + 8];
static rlt_agent g_ag[N_AGENTS];

static int agent_index(const rlt_backend *bk) {
    for (int k = 0; k < N_AGENTS; k++)
        if (bk == &g_ag[k].bk) return k;
    return -1;
}

static int fake_mark(rlt_backend *bk) {
    atomic_fetch_add(&g_marks[agent_index(bk)], 1);
    return RLT_OK;
}

/* Called under the lock-step's mutex: plain counters suffice. */
static int fake_launch(rlt_backend *bk, int32_t slot, rlt_backend *const *members, int32_t n) {
    if (g_launches == g_fail_at) return rlt_err_set(bk->err, RLT_ERUNTIME, __FILE__, __LINE__, "the device fell over");
    /* Every other member has marked this round's work: its mark count is ahead of the launches. */
    for (int32_t i = 1; i < n; i++)
        if (atomic_load(&g_marks[agent_index(members[i])]) < g_launches + 1) g_marks_at_launch_ok = 0;
    if (g_launches < ROUNDS + 8) g_slots[g_launches] = slot;
    g_launches++;
    return RLT_OK;
}

static int fake_follow(rlt_backend *bk, rlt_backend *lead) {
    (void)lead;
    atomic_fetch_add(&g_follows[agent_index(bk)], 1);
    return RLT_OK;
}

/* Acting: the agents' staged inputs and outputs, whether each is inside the lock-step or gone, and the launches. */
#define ACT_SLOT_ROWS4 6
#define ACT_SLOT_ROWS1 7
static long g_staged[N_AGENTS], g_out[N_AGENTS];
static atomic_int g_inside[N_AGENTS], g_left[N_AGENTS];
static int g_act_launches, g_act_synced = 1, g_act_all_inside = 1, g_pending_sync;

/* An acting graph computes every agent, those that did not ask for it too (as the batched graph does). */
static int fake_graph(rlt_backend *bk, rlt_graph_mode mode, int32_t slot) {
    (void)bk;
    if (mode != RLT_GRAPH_LAUNCH || (slot != ACT_SLOT_ROWS4 && slot != ACT_SLOT_ROWS1)) return RLT_EINVAL;
    for (int z = 0; z < N_AGENTS; z++) {
        if (!atomic_load(&g_left[z]) && !atomic_load(&g_inside[z])) g_act_all_inside = 0;
        g_out[z] = g_staged[z] * 16 + slot;
    }
    if (g_pending_sync) g_act_synced = 0; /* the previous acting launch was not followed by its sync */
    g_pending_sync = 1;
    g_act_launches++;
    return RLT_OK;
}

static int fake_sync(rlt_backend *bk) {
    (void)bk;
    g_pending_sync = 0;
    return RLT_OK;
}

/* Transition stores: the lists run (each entry's bytes) but not emptied, which the lock-step does after its sync. */
static int g_store_calls, g_store_unsynced, g_store_before_launch = 1, g_store_launch_seen;
static rlt_copy_list g_lists[N_AGENTS];

static int fake_copy_lists(rlt_backend *bk, const rlt_copy_list *lead_list, const int64_t *host_delta, int32_t n) {
    (void)bk, (void)host_delta;
    if (lead_list != &g_lists[0] || n != N_AGENTS) return RLT_EINVAL;
    for (int z = 0; z < n; z++)
        for (int64_t i = 0; i < g_lists[z].n; i++)
            memcpy((void *)(uintptr_t)g_lists[z].e[i].dst, (const void *)(uintptr_t)g_lists[z].e[i].src,
                   g_lists[z].e[i].bytes);
    g_store_calls++;
    g_store_unsynced = 1;
    g_store_launch_seen = g_launches;
    return RLT_OK;
}

static int fake_sync_store(rlt_backend *bk) {
    g_store_unsynced = 0;
    return fake_sync(bk);
}

static int fake_launch_store(rlt_backend *bk, int32_t slot, rlt_backend *const *members, int32_t n) {
    if (g_store_unsynced && g_store_launch_seen != g_launches) g_store_before_launch = 0;
    return fake_launch(bk, slot, members, n);
}

static const rlt_backend_ops k_ops = {.name = "lockstep-test", .seed_mark = fake_mark, .graph_launch_seeds = fake_launch,
                                      .seed_follow = fake_follow, .graph = fake_graph, .sync = fake_sync};
static const rlt_backend_ops k_store_ops = {.name = "lockstep-store-test", .seed_mark = fake_mark,
                                            .graph_launch_seeds = fake_launch_store, .seed_follow = fake_follow,
                                            .graph = fake_graph, .sync = fake_sync_store, .copy_lists = fake_copy_lists};

/* Fresh stand-in agents on backend table ops (their hand-over counters and acting flags cleared) into agents[]. */
static void agents_fresh(const rlt_backend_ops *ops, rlt_agent **agents) {
    for (int k = 0; k < N_AGENTS; k++) {
        atomic_store(&g_marks[k], 0);
        atomic_store(&g_follows[k], 0);
        atomic_store(&g_inside[k], 0);
        atomic_store(&g_left[k], 0);
        memset(&g_ag[k], 0, sizeof g_ag[k]);
        g_ag[k].bk.ops = ops;
        g_ag[k].bk.err = &g_ag[k].err;
        agents[k] = &g_ag[k];
    }
}

typedef struct worker {
    rlt_lockstep *ls;
    int k, rounds, odd_round; /* odd_round: the round in which this agent asks for variant 1 (-1: never) */
    int sleep_us;             /* this agent's own work before each update */
    int ok, first_err;
    char msg[512];
} worker;

static void *worker_main(void *arg) {
    worker *w = arg;
    rlt_agent *ag = &g_ag[w->k];
    w->first_err = -1;
    for (int i = 0; i < w->rounds; i++) {
        int variant = i == w->odd_round ? 1 : 0;
        if (w->sleep_us) usleep((useconds_t)w->sleep_us);
        if (lockstep_update(w->ls, ag, variant) != RLT_OK) {
            w->first_err = i;
            snprintf(w->msg, sizeof w->msg, "%s", ag->err.msg);
            break;
        }
        w->ok++;
    }
    lockstep_leave(w->ls);
    return NULL;
}

/* The last run's lockstep_times: first arrivals, last arrivals (update rounds [1]). */
static double g_first_s[2], g_gap_s[2];

/* Runs the agents with rounds[k] updates each (agent k asks for variant 1 in round odd[k], sleeps sleep_us[k] before
 * each update when sleep_us is given); fills w. */
static void run_slow(const int *rounds, const int *odd, const int *sleep_us, worker *w) {
    g_launches = 0;
    g_marks_at_launch_ok = 1;
    rlt_agent *agents[N_AGENTS];
    agents_fresh(&k_ops, agents);
    rlt_lockstep *ls = lockstep_new(agents, N_AGENTS);
    CHECK(ls != NULL, "lockstep_new");
    if (!ls) return;
    lockstep_attach(ls);
    CHECK(g_ag[2].lockstep == ls, "attach sets every agent's lock-step");
    pthread_t th[N_AGENTS];
    for (int k = 0; k < N_AGENTS; k++) {
        w[k] = (worker){.ls = ls, .k = k, .rounds = rounds[k], .odd_round = odd[k], .sleep_us = sleep_us ? sleep_us[k] : 0};
        pthread_create(&th[k], NULL, worker_main, &w[k]);
    }
    for (int k = 0; k < N_AGENTS; k++) pthread_join(th[k], NULL);
    double run_s[2];
    lockstep_times(ls, g_first_s, g_gap_s, run_s);
    lockstep_detach(ls);
    CHECK(g_ag[2].lockstep == NULL, "detach clears every agent's lock-step");
    lockstep_free(ls);
}

/* A group frees its members before the lock-step: lockstep_free must not touch them (it used to detach them,
 * a use-after-free in every batched seed group). The agents here are a heap block filled with a pattern and
 * freed before the lock-step; under ASan (build-asan) a write to them stops the test, and without it the
 * pattern, checked while the block is still live in the first round, shows any write. */
static void free_after_agents(void) {
    for (int round = 0; round < 2; round++) {
        rlt_agent *a = calloc(N_AGENTS, sizeof *a);
        CHECK(a != NULL, "out of memory");
        if (!a) return;
        rlt_agent *agents[N_AGENTS];
        for (int k = 0; k < N_AGENTS; k++) agents[k] = &a[k];
        rlt_lockstep *ls = lockstep_new(agents, N_AGENTS);
        CHECK(ls != NULL, "lockstep_new");
        lockstep_attach(ls);
        lockstep_detach(ls);
        memset(a, 0xa5, N_AGENTS * sizeof *a);
        if (round == 0) {
            lockstep_free(ls); /* the agents still live: any write shows in the pattern */
            int clean = 1;
            for (size_t i = 0; i < N_AGENTS * sizeof *a; i++) clean &= ((unsigned char *)a)[i] == 0xa5;
            CHECK(clean, "lockstep_free wrote into its agents");
            free(a);
        } else {
            free(a);
            lockstep_free(ls); /* as a group frees: the agents are gone */
        }
    }
}

static void run(const int *rounds, const int *odd, worker *w) { run_slow(rounds, odd, NULL, w); }

/* The group's log of where a round's time went (lockstep_times): one agent working 5 ms before each update, the
 * others none. The last arrivals come at least 5 ms after each round (the first round has none before it); the first
 * arrivals, the agents that do nothing, well before. */
static void times(void) {
    enum { R = 40, SLEEP_US = 5000 };
    worker w[N_AGENTS];
    const int rounds[N_AGENTS] = {R, R, R, R}, odd[N_AGENTS] = {-1, -1, -1, -1}, sleep_us[N_AGENTS] = {0, 0, 0, SLEEP_US};
    run_slow(rounds, odd, sleep_us, w);
    CHECK(g_launches == R, "%d launches for %d rounds", g_launches, R);
    CHECK(g_gap_s[1] >= (R - 1) * SLEEP_US * 1e-6, "the last arrivals wait for the slow agent: %.1f ms over %d rounds",
          1e3 * g_gap_s[1], R - 1);
    CHECK(g_first_s[1] >= 0.0 && g_first_s[1] < 0.5 * g_gap_s[1],
          "the first arrivals come before the slow agent's: %.1f ms against %.1f ms", 1e3 * g_first_s[1], 1e3 * g_gap_s[1]);
}

static void in_step(void) {
    worker w[N_AGENTS];
    const int rounds[N_AGENTS] = {ROUNDS, ROUNDS, ROUNDS, ROUNDS}, odd[N_AGENTS] = {-1, -1, -1, -1};
    run(rounds, odd, w);
    CHECK(g_launches == ROUNDS, "one launch per round: %d launches for %d rounds", g_launches, ROUNDS);
    CHECK(g_marks_at_launch_ok, "every launch comes after every other agent's mark of that round");
    int slots_ok = 1;
    for (int i = 0; i < ROUNDS; i++) slots_ok &= g_slots[i] == SEED_BATCH_SLOT0;
    CHECK(slots_ok, "each launch runs the batched slot of the round's variant");
    for (int k = 0; k < N_AGENTS; k++) {
        CHECK(w[k].ok == ROUNDS && w[k].first_err < 0, "agent %d: %d of %d updates (%s)", k, w[k].ok, ROUNDS, w[k].msg);
        int want = k == 0 ? 0 : ROUNDS;
        CHECK(atomic_load(&g_marks[k]) == want && atomic_load(&g_follows[k]) == want,
              "agent %d marked %d and followed %d times, want %d", k, atomic_load(&g_marks[k]),
              atomic_load(&g_follows[k]), want);
    }
}

static void one_leaves(void) {
    worker w[N_AGENTS];
    const int rounds[N_AGENTS] = {ROUNDS, ROUNDS, 700, ROUNDS}, odd[N_AGENTS] = {-1, -1, -1, -1};
    run(rounds, odd, w);
    CHECK(g_launches == ROUNDS, "after an agent left the others still run every round: %d launches", g_launches);
    for (int k = 0; k < N_AGENTS; k++)
        CHECK(w[k].ok == rounds[k], "agent %d: %d of %d updates (%s)", k, w[k].ok, rounds[k], w[k].msg);
}

static void out_of_step(void) {
    worker w[N_AGENTS];
    const int rounds[N_AGENTS] = {ROUNDS, ROUNDS, ROUNDS, ROUNDS}, odd[N_AGENTS] = {-1, 500, -1, -1};
    run(rounds, odd, w);
    CHECK(g_launches == 500, "the rounds before the mismatch ran, none after: %d launches", g_launches);
    for (int k = 0; k < N_AGENTS; k++)
        CHECK(w[k].first_err == 500 && strstr(w[k].msg, "out of step"),
              "agent %d fails in round 500 naming the cause: round %d, '%s'", k, w[k].first_err, w[k].msg);
}

static void launch_fails(void) {
    worker w[N_AGENTS];
    const int rounds[N_AGENTS] = {ROUNDS, ROUNDS, ROUNDS, ROUNDS}, odd[N_AGENTS] = {-1, -1, -1, -1};
    g_fail_at = 100;
    run(rounds, odd, w);
    g_fail_at = -1;
    for (int k = 0; k < N_AGENTS; k++)
        CHECK(w[k].first_err == 100 && strstr(w[k].msg, "the device fell over"),
              "agent %d fails in round 100 with the backend's message: round %d, '%s'", k, w[k].first_err, w[k].msg);
}

typedef struct act_worker {
    rlt_lockstep *ls;
    int k, rounds;
    int acts, served, wrong, unserved_ok, updates, err;
    char msg[512];
} act_worker;

static void *act_main(void *arg) {
    act_worker *w = arg;
    rlt_agent *ag = &g_ag[w->k];
    long token = (long)w->k << 32;
    for (int i = 0; i < w->rounds && !w->err; i++) {
        /* Agent k acts (i + k) % 5 times before this update (0 .. 4), alternating the two captured row counts, and
         * once on 2 rows, which the group did not capture. */
        int n_acts = (i + w->k) % 5;
        for (int a = 0; a <= n_acts && !w->err; a++) {
            int rows = a == n_acts ? 2 : (a + w->k) % 2 ? 1 : 4;
            int slot = rows == 4 ? ACT_SLOT_ROWS4 : ACT_SLOT_ROWS1, served = -1;
            g_staged[w->k] = ++token;
            atomic_store(&g_inside[w->k], 1);
            int rc = lockstep_act(w->ls, ag, rows, &served);
            atomic_store(&g_inside[w->k], 0);
            if (rc != RLT_OK) {
                w->err = 1;
                snprintf(w->msg, sizeof w->msg, "%s", ag->err.msg);
                break;
            }
            if (rows == 2) {
                w->unserved_ok += served == 0;
                continue;
            }
            w->acts++;
            w->served += served == 1;
            w->wrong += g_out[w->k] != token * 16 + slot;
        }
        atomic_store(&g_inside[w->k], 1);
        if (!w->err && lockstep_update(w->ls, ag, 0) != RLT_OK) {
            w->err = 1;
            snprintf(w->msg, sizeof w->msg, "%s", ag->err.msg);
        }
        atomic_store(&g_inside[w->k], 0);
        if (!w->err) w->updates++;
    }
    atomic_store(&g_left[w->k], 1);
    lockstep_leave(w->ls);
    return NULL;
}

static void act_rounds(void) {
    g_launches = 0;
    g_act_launches = 0;
    g_act_synced = g_act_all_inside = 1;
    g_pending_sync = 0;
    rlt_agent *agents[N_AGENTS];
    agents_fresh(&k_ops, agents);
    rlt_lockstep *ls = lockstep_new(agents, N_AGENTS);
    CHECK(ls != NULL, "lockstep_new");
    if (!ls) return;
    CHECK(lockstep_add_act(ls, 4, ACT_SLOT_ROWS4) == RLT_OK && lockstep_add_act(ls, 1, ACT_SLOT_ROWS1) == RLT_OK,
          "two acting graphs");
    int32_t rows[SEED_BATCH_ACTS];
    CHECK(lockstep_acts(ls, rows) == 2 && rows[0] == 4 && rows[1] == 1, "the captured row counts");
    lockstep_attach(ls);
    act_worker w[N_AGENTS];
    pthread_t th[N_AGENTS];
    /* Agent 3 leaves early, in the middle of the others' acting. */
    for (int k = 0; k < N_AGENTS; k++) {
        w[k] = (act_worker){.ls = ls, .k = k, .rounds = k == 3 ? 120 : 300};
        pthread_create(&th[k], NULL, act_main, &w[k]);
    }
    for (int k = 0; k < N_AGENTS; k++) pthread_join(th[k], NULL);
    int acts = 0;
    for (int k = 0; k < N_AGENTS; k++) {
        CHECK(!w[k].err && w[k].updates == w[k].rounds, "agent %d: %d of %d updates (%s)", k, w[k].updates, w[k].rounds,
              w[k].msg);
        CHECK(w[k].served == w[k].acts && w[k].wrong == 0,
              "agent %d: %d of %d acting chunks run, %d read another round's output", k, w[k].served, w[k].acts,
              w[k].wrong);
        CHECK(w[k].unserved_ok == w[k].rounds, "agent %d: an uncaptured row count is returned unserved at once (%d of %d)",
              k, w[k].unserved_ok, w[k].rounds);
        acts += w[k].acts;
    }
    uint64_t act_rounds = 0, update_rounds = 0;
    lockstep_rounds(ls, &act_rounds, &update_rounds, NULL);
    CHECK(g_launches == 300 && update_rounds == 300, "one update launch per round: %d launches, %llu rounds", g_launches,
          (unsigned long long)update_rounds);
    CHECK(g_act_launches > 0 && g_act_launches <= acts && (uint64_t)g_act_launches == act_rounds,
          "acting rounds: %d launches for %d chunks (%llu counted)", g_act_launches, acts, (unsigned long long)act_rounds);
    CHECK(g_act_synced && !g_pending_sync, "every acting launch is followed by the group's sync");
    CHECK(g_act_all_inside, "acting launches only while every running agent is inside the lock-step");
    lockstep_detach(ls);
    lockstep_free(ls);
}

/* Acting beside the updates that leave the policies as they were (lockstep_set_aside; the lead's graph op, ASIDE
 * modes): the stand-in algorithm's variant 0 keeps the policy, variant 1 changes it. */
static int g_aside_marks, g_aside_launches, g_aside_wrong, g_plain_wrong, g_mark_wrong, g_last_variant = -1;

static int fake_act_beside(const rlt_agent *ag, int32_t variant) {
    (void)ag;
    return variant == 0;
}
static const rlt_algo k_aside_algo = {.name = "aside-test", .act_beside = fake_act_beside};

static int fake_launch_aside(rlt_backend *bk, int32_t slot, rlt_backend *const *members, int32_t n) {
    g_last_variant = slot - SEED_BATCH_SLOT0;
    return fake_launch(bk, slot, members, n);
}

static int fake_graph_aside(rlt_backend *bk, rlt_graph_mode mode, int32_t slot) {
    switch (mode) {
    case RLT_GRAPH_ASIDE_MARK:
        /* Before the first policy-keeping update after one that changed the policies (or before any). */
        g_mark_wrong += g_last_variant == 0;
        g_aside_marks++;
        return RLT_OK;
    case RLT_GRAPH_ASIDE_LAUNCH:
        /* Waits for itself: no sync of lane 0 follows. */
        g_aside_wrong += g_last_variant != 0;
        g_aside_launches++;
        for (int z = 0; z < N_AGENTS; z++) g_out[z] = g_staged[z] * 16 + slot;
        return RLT_OK;
    case RLT_GRAPH_LAUNCH:
        g_plain_wrong += g_last_variant == 0; /* after a policy-keeping update acting goes aside */
        return fake_graph(bk, mode, slot);
    default:
        return RLT_EINVAL;
    }
}

static const rlt_backend_ops k_aside_ops = {.name = "lockstep-aside-test", .seed_mark = fake_mark,
                                            .graph_launch_seeds = fake_launch_aside, .seed_follow = fake_follow,
                                            .graph = fake_graph_aside, .sync = fake_sync};

/* Round i: act on one row, then update with variant i mod 2 (an act_worker: its k, rounds, wrong, err and msg). */
static void *aside_main(void *arg) {
    act_worker *w = arg;
    rlt_agent *ag = &g_ag[w->k];
    long token = (long)w->k << 32;
    for (int i = 0; i < w->rounds && !w->err; i++) {
        int served = -1;
        g_staged[w->k] = ++token;
        if (lockstep_act(w->ls, ag, 1, &served) != RLT_OK || served != 1 ||
            lockstep_update(w->ls, ag, i % 2) != RLT_OK) {
            w->err = 1;
            snprintf(w->msg, sizeof w->msg, "round %d: %s", i, ag->err.msg);
        }
        w->wrong += g_out[w->k] != token * 16 + ACT_SLOT_ROWS1;
    }
    lockstep_leave(w->ls);
    return NULL;
}

/* Four agents alternate a policy-keeping update (variant 0) and one that changes the policies (1), acting once before
 * each: the acting round after each variant-0 update runs beside it (ASIDE_LAUNCH, no sync), every other acting round
 * after its update (LAUNCH and the group's sync); the lead's lane 0 is marked once before each variant-0 update, never
 * twice in a row; each agent reads its own output; lockstep_aside_rounds counts the rounds beside. Without
 * lockstep_set_aside nothing runs beside. */
static void aside_rounds(void) {
    enum { R = 200 };
    for (int on = 0; on < 2; on++) {
        g_launches = g_act_launches = g_aside_marks = g_aside_launches = 0;
        g_aside_wrong = g_plain_wrong = g_mark_wrong = g_pending_sync = 0;
        g_act_synced = 1;
        g_last_variant = -1;
        rlt_agent *agents[N_AGENTS];
        agents_fresh(&k_aside_ops, agents);
        for (int k = 0; k < N_AGENTS; k++) g_ag[k].algo = &k_aside_algo;
        rlt_lockstep *ls = lockstep_new(agents, N_AGENTS);
        CHECK(ls != NULL && lockstep_add_act(ls, 1, ACT_SLOT_ROWS1) == RLT_OK, "lockstep_new");
        if (!ls) return;
        lockstep_set_aside(ls, on);
        lockstep_attach(ls);
        act_worker w[N_AGENTS];
        pthread_t th[N_AGENTS];
        for (int k = 0; k < N_AGENTS; k++) {
            w[k] = (act_worker){.ls = ls, .k = k, .rounds = R};
            pthread_create(&th[k], NULL, aside_main, &w[k]);
        }
        for (int k = 0; k < N_AGENTS; k++) pthread_join(th[k], NULL);
        for (int k = 0; k < N_AGENTS; k++)
            CHECK(!w[k].err && w[k].wrong == 0, "aside %d, agent %d: %s, %d outputs of another round", on, k, w[k].msg,
                  w[k].wrong);
        const int beside = on ? R / 2 : 0; /* the acting rounds after updates 0, 2, ..., R - 2 */
        CHECK(g_launches == R && g_aside_launches == beside && g_act_launches == R - beside &&
                  lockstep_aside_rounds(ls) == (uint64_t)beside,
              "aside %d: %d updates, %d acting rounds beside (want %d; counted %llu) and %d after their update", on,
              g_launches, g_aside_launches, beside, (unsigned long long)lockstep_aside_rounds(ls), g_act_launches);
        CHECK(g_aside_marks == (on ? R / 2 : 0) && g_mark_wrong == 0,
              "aside %d: %d marks (want one before each variant-0 update: %d), %d after a variant-0 update", on,
              g_aside_marks, on ? R / 2 : 0, g_mark_wrong);
        CHECK(g_aside_wrong == 0 && (on ? g_plain_wrong == 0 : 1) && g_act_synced && !g_pending_sync,
              "aside %d: %d rounds beside a policy change, %d plain rounds after a policy-keeping update, every plain "
              "launch synced", on, g_aside_wrong, g_plain_wrong);
        lockstep_detach(ls);
        lockstep_free(ls);
    }
}

/* Each agent holds one 8-byte copy before every other update (none on odd rounds): its staged value into its slot. */
#define STORE_ROUNDS 400
static int64_t g_store_src[N_AGENTS], g_store_dst[N_AGENTS][STORE_ROUNDS];

typedef struct store_worker {
    rlt_lockstep *ls;
    int k, ok, found, empty, synced;
} store_worker;

static void *store_main(void *arg) {
    store_worker *w = arg;
    rlt_agent *ag = &g_ag[w->k];
    for (int i = 0; i < STORE_ROUNDS; i++) {
        const int hold = i % 2 == 0;
        if (hold) {
            rlt_copy_list *l = ag->replay.defer;
            g_store_src[w->k] = 1000000 * (int64_t)w->k + i;
            l->e[l->n++] = (rlt_copy_entry){(uint64_t)(uintptr_t)&g_store_dst[w->k][i],
                                            (uint64_t)(uintptr_t)&g_store_src[w->k], sizeof(int64_t)};
        }
        if (lockstep_update(w->ls, ag, 0) != RLT_OK) break;
        w->ok++;
        w->found += !hold || g_store_dst[w->k][i] == 1000000 * (int64_t)w->k + i;
        w->empty += g_lists[w->k].n == 0;
        w->synced += !g_store_unsynced;
    }
    lockstep_leave(w->ls);
    return NULL;
}

static void stores(void) {
    g_launches = 0;
    g_store_calls = 0;
    memset(g_store_dst, 0, sizeof g_store_dst);
    rlt_agent *agents[N_AGENTS];
    agents_fresh(&k_store_ops, agents);
    for (int k = 0; k < N_AGENTS; k++) {
        g_ag[k].copy_list = &g_lists[k];
        g_lists[k].n = 5; /* stale: attach empties it */
    }
    rlt_lockstep *ls = lockstep_new(agents, N_AGENTS);
    CHECK(ls != NULL, "lockstep_new");
    if (!ls) return;
    static const int64_t fake_delta[N_AGENTS];
    lockstep_set_store(ls, fake_delta);
    lockstep_attach(ls);
    CHECK(g_ag[1].replay.defer == &g_lists[1] && g_lists[1].n == 0, "attach points replay.defer at the emptied list");
    store_worker w[N_AGENTS];
    pthread_t th[N_AGENTS];
    for (int k = 0; k < N_AGENTS; k++) {
        w[k] = (store_worker){.ls = ls, .k = k};
        pthread_create(&th[k], NULL, store_main, &w[k]);
    }
    for (int k = 0; k < N_AGENTS; k++) pthread_join(th[k], NULL);
    for (int k = 0; k < N_AGENTS; k++)
        CHECK(w[k].ok == STORE_ROUNDS && w[k].found == STORE_ROUNDS && w[k].empty == STORE_ROUNDS &&
                  w[k].synced == STORE_ROUNDS,
              "agent %d: %d updates, its held value in place after %d, its list empty after %d, synced after %d (of %d)",
              k, w[k].ok, w[k].found, w[k].empty, w[k].synced, STORE_ROUNDS);
    uint64_t act_rounds = 0, update_rounds = 0, store_rounds = 0;
    lockstep_rounds(ls, &act_rounds, &update_rounds, &store_rounds);
    CHECK(g_store_calls == STORE_ROUNDS / 2 && store_rounds == (uint64_t)g_store_calls && update_rounds == STORE_ROUNDS,
          "one store launch for each round with copies held: %d calls, %llu counted, %llu update rounds", g_store_calls,
          (unsigned long long)store_rounds, (unsigned long long)update_rounds);
    CHECK(g_store_before_launch, "the stores run before the round's launch");
    lockstep_detach(ls);
    CHECK(g_ag[1].replay.defer == NULL, "detach leaves each agent issuing its own copies");
    lockstep_free(ls);
}

/* Member k of n under the given devices ("" for device cuda:0 alone) and train.seed_batches: batched or not, and its
 * batch and slot. */
static void member_in(const char *devices, int32_t batches, int32_t n, int32_t k, int batching, int want, int32_t batch,
                      int32_t slot) {
    rlt_config *c;
    CHECK(rlt_config_init(&c) == RLT_OK, "config");
    char set[200];
    snprintf(set, sizeof set, "%s", devices[0] ? devices : "device=cuda:0");
    CHECK(rlt_config_set(c, set) == RLT_OK, "%s: %s", set, rlt_config_errmsg(c));
    snprintf(set, sizeof set, "train.seed_batches=%d", (int)batches);
    CHECK(rlt_config_set(c, set) == RLT_OK, "%s: %s", set, rlt_config_errmsg(c));
    snprintf(set, sizeof set, "train.seed_batching=%s", batching ? "true" : "false");
    CHECK(rlt_config_set(c, set) == RLT_OK, "%s", rlt_config_errmsg(c));
    rlt_config *m = malloc(sizeof *m);
    *m = *c;
    int got = seed_batch_member(c, n, k, 0, 1, m);
    CHECK(got == want, "%s, %d seeds, member %d: batched %d, want %d", set, (int)n, (int)k, got, want);
    if (got && want)
        CHECK(m->batch_seeds == batch && m->arena_slot == slot && m->lanes == (slot == 0 ? 0 : 1),
              "%s, %d seeds, member %d: batch of %d, slot %d, lanes %d; want %d, %d, %d", devices, (int)n, (int)k,
              (int)m->batch_seeds, (int)m->arena_slot, (int)m->lanes, (int)batch, (int)slot, slot == 0 ? 0 : 1);
    free(m);
    rlt_config_free(c);
}

static void member_is(const char *devices, int32_t n, int32_t k, int batching, int want, int32_t batch, int32_t slot) {
    member_in(devices, 1, n, k, batching, want, batch, slot);
}

static void members(void) {
    rlt_config *c;
    for (int32_t k = 0; k < 4; k++) member_is("", 4, k, 1, 1, 4, k);
    member_is("", 4, 2, 0, 0, 0, 0);
    /* 5 seeds over two GPUs: members 0, 2, 4 on cuda:0 (slots 0, 1, 2), 1 and 3 on cuda:1 (slots 0, 1). */
    const int32_t batch[5] = {3, 2, 3, 2, 3};
    for (int32_t k = 0; k < 5; k++) member_is("devices=[cuda:0, cuda:1]", 5, k, 1, 1, batch[k], k / 2);
    member_is("devices=[cuda:0, cuda:1]", 2, 1, 1, 0, 0, 0); /* one seed a GPU */
    member_is("devices=[cpu, cuda:1]", 4, 0, 1, 0, 0, 0);    /* the CPU's seeds never batch */
    member_is("devices=[cpu, cuda:1]", 4, 3, 1, 1, 2, 1);    /* cuda:1's do */
    /* train.seed_batches: 8 seeds in 2 batches on one GPU (k mod 2: slots k / 2, members 0 and 1 leading), in 4 over
     * two GPUs (2 a GPU: member k in batch k mod 4 on devices[k mod 2], slot k / 4); 3 seeds asking for 2 batches get
     * one (at least two seeds a batch); without train.seed_batching nothing batches. */
    for (int32_t k = 0; k < 8; k++) member_in("", 2, 8, k, 1, 1, 4, k / 2);
    for (int32_t k = 0; k < 8; k++) member_in("devices=[cuda:0, cuda:1]", 2, 8, k, 1, 1, 2, k / 4);
    for (int32_t k = 0; k < 3; k++) member_in("", 2, 3, k, 1, 1, 3, k);
    member_in("", 4, 8, 5, 0, 0, 0, 0);
    CHECK(rlt_config_init(&c) == RLT_OK && rlt_config_set(c, "train.seed_batches=4") == RLT_OK &&
              rlt_config_set(c, "train.seed_batching=true") == RLT_OK, "config");
    CHECK(seed_batch_count(c, 16, 0) == 4 && seed_batch_count(c, 6, 0) == 3 && seed_batch_count(c, 3, 0) == 1 &&
              seed_batch_count(c, 16, 1) == 1,
          "seed_batch_count: 16 seeds in 4, 6 in 3, 3 in 1, a data-parallel run 1 (got %d, %d, %d, %d)",
          (int)seed_batch_count(c, 16, 0), (int)seed_batch_count(c, 6, 0), (int)seed_batch_count(c, 3, 0),
          (int)seed_batch_count(c, 16, 1));
    /* train.seed_batches 0 (the default): a batch for every 4 seeds a GPU has, at most 4 (a DQN CartPole MLP), or 2
     * where a seed's update is large (TD3 256-256 at batch 256, not at 64-64); fewer, halved, while its leads do not
     * fit (seed_batch_fewer), and never for a count the user set. */
    CHECK(rlt_config_set(c, "train.seed_batches=0") == RLT_OK && rlt_config_set(c, "algo=dqn") == RLT_OK &&
              rlt_config_set(c, "network.hidden=[120, 84]") == RLT_OK && rlt_config_set(c, "train.batch_size=128") == RLT_OK,
          "dqn: %s", rlt_config_errmsg(c));
    const int32_t seeds[6] = {3, 7, 8, 16, 64, 256}, want[6] = {1, 1, 2, 4, 4, 4}, want_td3[6] = {1, 1, 2, 2, 2, 2};
    for (int i = 0; i < 6; i++)
        CHECK(seed_batch_count(c, seeds[i], 0) == want[i], "automatic, DQN 120-84: %d seeds in %d batches, got %d",
              (int)seeds[i], (int)want[i], (int)seed_batch_count(c, seeds[i], 0));
    CHECK(rlt_config_set(c, "algo=td3") == RLT_OK && rlt_config_set(c, "td3.actor_hidden=[256, 256]") == RLT_OK &&
              rlt_config_set(c, "td3.critic_hidden=[256, 256]") == RLT_OK &&
              rlt_config_set(c, "train.batch_size=256") == RLT_OK,
          "td3: %s", rlt_config_errmsg(c));
    for (int i = 0; i < 6; i++)
        CHECK(seed_batch_count(c, seeds[i], 0) == want_td3[i], "automatic, TD3 256-256: %d seeds in %d batches, got %d",
              (int)seeds[i], (int)want_td3[i], (int)seed_batch_count(c, seeds[i], 0));
    CHECK(rlt_config_set(c, "td3.actor_hidden=[64, 64]") == RLT_OK && rlt_config_set(c, "td3.critic_hidden=[64, 64]") ==
              RLT_OK && seed_batch_count(c, 64, 0) == 4,
          "automatic, TD3 64-64: 64 seeds in 4 batches, got %d", (int)seed_batch_count(c, 64, 0));
    CHECK(seed_batch_fewer(c, 16, 0, 1) == 2 && c->train.seed_batches == 2 && seed_batch_count(c, 16, 0) == 2 &&
              seed_batch_fewer(c, 16, 0, 1) == 1 && seed_batch_count(c, 16, 0) == 1 && seed_batch_fewer(c, 16, 0, 1) == 0,
          "automatic, not fitting: 16 seeds in 4 -> 2 -> 1 batches, then nothing fewer (at %d)", (int)c->train.seed_batches);
    CHECK(rlt_config_set(c, "train.seed_batches=4") == RLT_OK && seed_batch_fewer(c, 16, 0, 0) == 0 &&
              c->train.seed_batches == 4,
          "train.seed_batches 4 as the user set it: never fewer");
    CHECK(rlt_config_set(c, "devices=[cuda:0, cuda:1]") == RLT_OK && rlt_config_set(c, "train.seed_batches=0") == RLT_OK &&
              seed_batch_count(c, 16, 0) == 4 && seed_batch_count(c, 64, 0) == 8 && seed_batch_count(c, 16, 1) == 1,
          "automatic over two GPUs: 16 seeds in 2 x 2 batches, 64 in 2 x 4, data-parallel 1 (got %d, %d)",
          (int)seed_batch_count(c, 16, 0), (int)seed_batch_count(c, 64, 0));
    rlt_config_free(c);
    CHECK(rlt_config_init(&c) == RLT_OK && rlt_config_set(c, "devices=[cuda:0, cuda:1]") == RLT_OK &&
          rlt_config_set(c, "train.seed_batching=true") == RLT_OK, "config");
    rlt_config *m = malloc(sizeof *m);
    *m = *c;
    CHECK(seed_batch_member(c, 4, 2, 1, 1, m) == 0, "a data-parallel rank batches nothing");
    free(m);
    rlt_config_free(c);
}

/* How waiters wait (lockstep_set_threads): spinning while the seed threads leave an eighth of the cores (at least 2)
 * free; past that asleep, or yielding alone for groups of at most LOCKSTEP_YIELD_MAX threads; yielding alone from twice
 * as many threads as cores; RLT_SEEDS_WAIT forces a way. */
static void wait_expect(rlt_lockstep *ls, long threads, long cores) {
    long spare = cores / 8 > 2 ? cores / 8 : 2;
    const int crowded = threads >= 2 * cores, band = threads + spare > cores && !crowded;
    const int sleeps = band && threads > LOCKSTEP_YIELD_MAX, yields = crowded || (band && !sleeps);
    lockstep_set_threads(ls, (int32_t)threads);
    CHECK(lockstep_sleeps(ls) == sleeps && lockstep_yields(ls) == yields, "%ld seed threads on %ld cores %s", threads,
          cores, sleeps ? "sleep" : yields ? "yield alone" : "spin, then yield");
}

static void wait_rule(void) {
    rlt_agent a[2];
    memset(a, 0, sizeof a);
    rlt_agent *agents[2] = {&a[0], &a[1]};
    rlt_lockstep *ls = lockstep_new(agents, 2);
    CHECK(ls != NULL, "lockstep_new");
    if (!ls) return;
    unsetenv("RLT_SEEDS_WAIT");
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) cores = CPU_COUNT(&set);
    lockstep_set_threads(ls, 100000);
    CHECK(!lockstep_sleeps(ls) && lockstep_yields(ls), "100,000 seed threads on %ld cores yield", cores);
    const long spare = cores / 8 > 2 ? cores / 8 : 2;
    const long counts[] = {2 * cores, 2 * cores - 1, cores, cores - spare, cores - spare + 1, LOCKSTEP_YIELD_MAX,
                           LOCKSTEP_YIELD_MAX + 1, 1};
    for (int i = 0; i < (int)(sizeof counts / sizeof counts[0]); i++)
        if (counts[i] >= 1) wait_expect(ls, counts[i], cores);
    /* This machine's own cases of the rule (the counts above fall where its core count puts them). */
    lockstep_set_threads(ls, LOCKSTEP_YIELD_MAX);
    CHECK(!lockstep_sleeps(ls), "a group of %d seed threads never sleeps", LOCKSTEP_YIELD_MAX);
    if (2 * cores - 1 > LOCKSTEP_YIELD_MAX && 2 * cores - 1 + spare > cores) {
        lockstep_set_threads(ls, (int32_t)(2 * cores - 1));
        CHECK(lockstep_sleeps(ls), "%ld seed threads on %ld cores sleep", 2 * cores - 1, cores);
    }
    setenv("RLT_SEEDS_WAIT", "spin", 1);
    lockstep_set_threads(ls, 100000);
    CHECK(!lockstep_sleeps(ls) && !lockstep_yields(ls), "RLT_SEEDS_WAIT=spin: no sleep, spins first");
    setenv("RLT_SEEDS_WAIT", "sleep", 1);
    lockstep_set_threads(ls, 1);
    CHECK(lockstep_sleeps(ls), "RLT_SEEDS_WAIT=sleep: asleep");
    unsetenv("RLT_SEEDS_WAIT");
    lockstep_free(ls);
}

int main(void) {
    alarm(120); /* a lock-step that hangs fails the test instead of the CI job */
    const char *modes[] = {"spin", "sleep", "spin_sleep", NULL};
    for (int i = 0; i < 4; i++) {
        if (modes[i]) setenv("RLT_SEEDS_WAIT", modes[i], 1);
        else unsetenv("RLT_SEEDS_WAIT");
        in_step();
        one_leaves();
        out_of_step();
        launch_fails();
        free_after_agents();
        act_rounds();
        stores();
        aside_rounds();
    }
    unsetenv("RLT_SEEDS_WAIT");
    wait_rule();
    members();
    times();
    return test_summary("test_lockstep");
}
