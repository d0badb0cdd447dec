/* test_population.c: populations (the config's `population:` section, engine/config_population.c, run by
 * train/seed_group.c) on the CPU.
 * - Each member trained with its own values: member k of a 3-member TD3 population (actor_lr, tau and seed
 *   differing, critic_lr one value for all) ends with the final.ckpt (byte for byte) and metrics.csv (all but
 *   wall_s) of the single run with those values; members 0 and 1 share a seed and end differently (the values
 *   matter, so a member run with member 0's values would fail the comparison). summary.csv names each member's directory, seed and values; each member's
 *   config.yaml holds its resolved values and no population.
 * - Every key the population allows as a member key leaves the memory plan identical (TD3 and DQN, plan --json
 *   byte for byte), so a key that changes a shape cannot be added to that list without this test failing.
 * - Members of different shapes (hidden sizes as lists of lists, batch size): the lists dump and read back, the
 *   plan table says whose plan it shows (the largest), summary.csv quotes list values, each member is its single
 *   run byte for byte, and the budgets are held against the largest member (RLT_ENOFIT where the small ones fit).
 * - Config: the dump reads back to the same config; --set population.KEY adds one key; unknown keys (with a
 *   suggestion), shape keys, group keys, lists of different lengths, values out of range, population.name errors
 *   and train.num_seeds beside a population are refused with FILE:LINE:COL; each member's config is validated
 *   (dqn.eps_end above one member's dqn.eps_start).
 * - config_members_differ names a differing tau, not a differing seed; config_members_unbatched and
 *   config_population_unbatched, the check that keeps members from one batched update graph (train.seed_batching),
 *   pass learning rates, tau, gamma, target noise, clipping thresholds, exploration and schedules (the graph reads
 *   each member's scalars from its hparams block) and name td3.policy_delay, dqn.double, dqn.loss, clipping switched
 *   off for some members, and shape keys.
 * - A population stopped by its progress callback resumes per member to the bits of one never stopped. */
#include <string.h>
#include <sys/stat.h>

#include "config.h"
#include "config_schema.h"
#include "harness.h"
#include "rltrain.h"

static const char *const k_base =
    "algo: td3\n"
    "train: {total_steps: 2000, start_steps: 500, batch_size: 64, eval_every: 1000, eval_episodes: 2, "
    "progress_every_s: 0}\n"
    "td3: {actor_hidden: [32, 32], critic_hidden: [32, 32]}\nreplay: {capacity: 3000}\n";

static const char *const k_pop =
    "population:\n"
    "  td3.actor_lr: [1e-4, 3e-4, 1e-3]\n"
    "  td3.tau: [0.005, 0.01, 0.002]\n"
    "  td3.critic_lr: 2e-3\n"
    "  seed: [4, 4, 7]\n";

static char a_buf[1 << 20], b_buf[1 << 20];

static rlt_config *config_of(const char *yaml, const char *out_dir) {
    rlt_config *cfg;
    CHECK(rlt_config_init(&cfg) == RLT_OK, "config");
    CHECK(rlt_config_load_string(cfg, k_base, "base.yaml") == RLT_OK, "%s", rlt_config_errmsg(cfg));
    if (yaml) CHECK(rlt_config_load_string(cfg, yaml, "pop.yaml") == RLT_OK, "%s", rlt_config_errmsg(cfg));
    char set[700];
    snprintf(set, sizeof set, "out_dir=%s", out_dir);
    CHECK(rlt_config_set(cfg, set) == RLT_OK, "%s", rlt_config_errmsg(cfg));
    return cfg;
}

/* One plain run with the given assignments. */
static void single_run(const char *out_dir, const char *const *sets) {
    rlt_config *cfg = config_of(NULL, out_dir);
    for (int i = 0; sets[i]; i++) CHECK(rlt_config_set(cfg, sets[i]) == RLT_OK, "%s: %s", sets[i], rlt_config_errmsg(cfg));
    rlt_trainer *tr;
    CHECK(rlt_trainer_init(cfg, &tr) == RLT_OK, "single init: %s", rlt_trainer_errmsg(tr));
    CHECK(rlt_trainer_run(tr, NULL, NULL) == RLT_OK, "single run: %s", rlt_trainer_errmsg(tr));
    rlt_trainer_free(tr);
    rlt_config_free(cfg);
}

static void members_train_with_their_values(const char *dir) {
    char group_dir[600], path[700], single[700];
    snprintf(group_dir, sizeof group_dir, "%s/pop", dir);
    rlt_config *cfg = config_of(k_pop, group_dir);
    CHECK(rlt_group_count(cfg) == 3, "rlt_group_count: %d", rlt_group_count(cfg));
    rlt_trainer *tr = NULL;
    CHECK(rlt_trainer_init(cfg, &tr) == RLT_ECONFIG, "rlt_trainer_init refuses a population");
    rlt_trainer_free(tr);
    rlt_group *g;
    int rc = rlt_group_init(cfg, &g);
    CHECK(rc == RLT_OK, "group init: %s", rlt_group_errmsg(g));
    if (rc != RLT_OK) {
        rlt_group_free(g);
        rlt_config_free(cfg);
        return;
    }
    CHECK(rlt_group_size(g) == 3 && rlt_group_seed(g, 0) == 4 && rlt_group_seed(g, 2) == 7 &&
          strcmp(rlt_group_member_dir(g, 1), "member_1") == 0 && rlt_group_population_keys(g) == 4,
          "members, seeds and directories");
    CHECK(rlt_group_run(g, NULL, NULL) == RLT_OK, "group run: %s", rlt_group_errmsg(g));
    rlt_progress p[3];
    for (int k = 0; k < 3; k++) rlt_trainer_progress(rlt_group_member(g, k), &p[k]);
    rlt_group_free(g);
    rlt_config_free(cfg);

    snprintf(path, sizeof path, "%s/summary.csv", group_dir);
    test_read_text(path, a_buf, sizeof a_buf);
    const char *header = "member,dir,seed,td3.actor_lr,td3.tau,td3.critic_lr,status,env_steps,updates,last_eval_return,"
                         "best_eval_return,wall_s\n";
    CHECK(strncmp(a_buf, header, strlen(header)) == 0, "summary.csv header:\n%s", a_buf);
    const char *rows[3] = {"0,member_0,4,0.0001,0.005,0.002,finished,2000,", "1,member_1,4,0.0003,0.01,0.002,finished,2000,",
                           "2,member_2,7,0.001,0.002,0.002,finished,2000,"};
    for (int k = 0; k < 3; k++) {
        char row[256];
        snprintf(row, sizeof row, "%s%lld,%.6f,", rows[k], (long long)p[k].updates, p[k].last_eval_return);
        CHECK(strstr(a_buf, row) != NULL, "summary.csv names member %d's values: '%s' in\n%s", k, row, a_buf);
    }
    snprintf(path, sizeof path, "%s/member_2/config.yaml", group_dir);
    test_read_text(path, a_buf, sizeof a_buf);
    CHECK(strstr(a_buf, "\nseed: 7\n") && strstr(a_buf, "actor_lr: 0.001\n") && strstr(a_buf, "critic_lr: 0.002\n") &&
          strstr(a_buf, "  tau: 0.002\n") && !strstr(a_buf, "\npopulation:") && strstr(a_buf, "/pop/member_2\""),
          "member_2/config.yaml holds its resolved values:\n%.900s", a_buf);

    /* Each member against the single run with its values. */
    const char *vals[3][4] = {{"td3.actor_lr=1e-4", "td3.tau=0.005", "seed=4", "td3.critic_lr=2e-3"},
                              {"td3.actor_lr=3e-4", "td3.tau=0.01", "seed=4", "td3.critic_lr=2e-3"},
                              {"td3.actor_lr=1e-3", "td3.tau=0.002", "seed=7", "td3.critic_lr=2e-3"}};
    for (int k = 0; k < 3; k++) {
        const char *sets[5] = {vals[k][0], vals[k][1], vals[k][2], vals[k][3], NULL};
        snprintf(single, sizeof single, "%s/single_%d", dir, k);
        single_run(single, sets);
        snprintf(path, sizeof path, "%s/member_%d", group_dir, k);
        char what[64];
        snprintf(what, sizeof what, "population member %d", k);
        test_same_run(path, single, what);
    }
    /* Members 0 and 1 share the seed: their checkpoints differ only through their values. */
    char a[700], b[700];
    snprintf(a, sizeof a, "%s/member_0/final.ckpt", group_dir);
    snprintf(b, sizeof b, "%s/member_1/final.ckpt", group_dir);
    CHECK(test_files_differ(a, b) > 0, "members with one seed and different values end differently");
}

/* A value of k other than its default, in range: for the plan test. */
static void other_value(const cfg_key *k, const rlt_config *base, char *buf, size_t cap) {
    const char *f = (const char *)base + k->offset;
    switch (k->type) {
    case CFG_DOUBLE: {
        double v = *(const double *)(const void *)f;
        snprintf(buf, cap, "%.17g", v > 0 ? v * 0.5 : (k->hi < 1 ? k->hi : 0.5));
        break;
    }
    case CFG_INT32: {
        int32_t v = *(const int32_t *)(const void *)f;
        snprintf(buf, cap, "%d", (int)(v + 1 <= k->hi ? v + 1 : v - 1));
        break;
    }
    case CFG_INT64: {
        int64_t v = *(const int64_t *)(const void *)f;
        snprintf(buf, cap, "%lld", (long long)(v + 7 <= k->hi ? v + 7 : v - 1));
        break;
    }
    case CFG_UINT64: snprintf(buf, cap, "%llu", (unsigned long long)*(const uint64_t *)(const void *)f + 3); break;
    case CFG_BOOL: snprintf(buf, cap, "%s", *(const int32_t *)(const void *)f ? "false" : "true"); break;
    case CFG_ENUM: snprintf(buf, cap, "%s", k->names[(*(const int32_t *)(const void *)f + 1) % k->n_names]); break;
    default: snprintf(buf, cap, "?"); break;
    }
}

static void allowed_keys_leave_the_plan_alone(void) {
    static const char *const bases[2] = {
        "algo: td3\nenv: {name: pendulum}\ntrain: {batch_size: 64}\ntd3: {actor_hidden: [32, 32], critic_hidden: [32, 32]}\n",
        "algo: dqn\nenv: {name: cartpole}\ntrain: {batch_size: 64}\nnetwork: {hidden: [32, 32]}\n"};
    static char plan0[1 << 17], plan1[1 << 17];
    size_t n;
    const cfg_key *keys = config_schema_keys(&n);
    int tried = 0;
    for (int b = 0; b < 2; b++) {
        rlt_config *cfg;
        rlt_config_init(&cfg);
        CHECK(rlt_config_load_string(cfg, bases[b], "plan.yaml") == RLT_OK, "%s", rlt_config_errmsg(cfg));
        size_t len0 = 0, len1 = 0;
        char err[512];
        CHECK(rlt_plan_fit_json(cfg, plan0, sizeof plan0, &len0, NULL, err, sizeof err) == RLT_OK, "plan: %s", err);
        for (size_t i = 0; i < n; i++) {
            char why[400], set[200], v[64];
            if (config_population_allows(keys[i].key, why, sizeof why) != RLT_POP_MEMBER) continue;
            CHECK(config_schema_is_scalar(&keys[i]), "%s: a population key is a scalar", keys[i].key);
            rlt_config *c = rlt_config_clone(cfg);
            other_value(&keys[i], c, v, sizeof v);
            snprintf(set, sizeof set, "%s=%s", keys[i].key, v);
            CHECK(rlt_config_set(c, set) == RLT_OK, "%s: %s", set, rlt_config_errmsg(c));
            int rc = rlt_plan_fit_json(c, plan1, sizeof plan1, &len1, NULL, err, sizeof err);
            CHECK(rc == RLT_OK && len0 == len1 && memcmp(plan0, plan1, len0) == 0,
                  "%s (%s): a population key must leave the plan identical (rc %d: %s)", set, b ? "dqn" : "td3", rc, err);
            rlt_config_free(c);
            tried++;
        }
        rlt_config_free(cfg);
    }
    CHECK(tried >= 40, "every allowed key tried on both algorithms: %d", tried);
    char why[400];
    CHECK(config_population_allows("train.batch_size", why, sizeof why) == RLT_POP_SHAPE, "batch size");
    CHECK(config_population_allows("td3.critic_hidden", why, sizeof why) == RLT_POP_SHAPE, "hidden sizes");
    CHECK(config_population_allows("replay.capacity", why, sizeof why) == RLT_POP_SHAPE, "replay capacity");
    CHECK(!config_population_allows("replay.location", why, sizeof why) && strstr(why, "device"), "replay: %s", why);
    CHECK(!config_population_allows("env.name", why, sizeof why) && strstr(why, "environment"), "env: %s", why);
    CHECK(!config_population_allows("precision", why, sizeof why) && strstr(why, "kind of memory plan"), "%s", why);
    CHECK(!config_population_allows("train.total_steps", why, sizeof why) && strstr(why, "whole group"), "steps: %s", why);
}

/* Loads base + text as "pop.yaml" and expects a refusal whose message holds each of the NULL-terminated parts. */
static void refused(const char *text, const char *const *parts) {
    rlt_config *cfg;
    rlt_config_init(&cfg);
    rlt_config_load_string(cfg, k_base, "base.yaml");
    int rc = rlt_config_load_string(cfg, text, "pop.yaml");
    if (rc == RLT_OK) rc = rlt_config_validate(cfg);
    CHECK(rc == RLT_ECONFIG, "refused: %s", text);
    for (int i = 0; parts[i]; i++)
        CHECK(strstr(rlt_config_errmsg(cfg), parts[i]) != NULL, "'%s' in the message: %s", parts[i], rlt_config_errmsg(cfg));
    rlt_config_free(cfg);
}

static void config_rules(void) {
    /* The dump reads back to the same config. */
    rlt_config *cfg = config_of(k_pop, "/tmp/x");
    CHECK(rlt_config_validate(cfg) == RLT_OK && cfg->population.n == 3 && cfg->population.n_keys == 4, "valid: %s",
          rlt_config_errmsg(cfg));
    rlt_config_dump(cfg, a_buf, sizeof a_buf);
    CHECK(strstr(a_buf, "population:\n  td3.actor_lr: [0.0001, 0.0003, 0.001]\n") &&
          strstr(a_buf, "  td3.critic_lr: [0.002]\n") && strstr(a_buf, "  seed: [4, 4, 7]\n"), "dump:\n%s", a_buf);
    rlt_config *back;
    rlt_config_init(&back);
    CHECK(rlt_config_load_string(back, a_buf, "dump.yaml") == RLT_OK, "%s", rlt_config_errmsg(back));
    rlt_config_dump(back, b_buf, sizeof b_buf);
    CHECK(strcmp(a_buf, b_buf) == 0, "the dump reads back:\n%s\n---\n%s", a_buf, b_buf);
    int same = back->population.n == 3 && back->population.n_keys == 4;
    for (int i = 0; same && i < 4; i++)
        same = back->population.key[i].row == cfg->population.key[i].row && back->population.key[i].n ==
               cfg->population.key[i].n && memcmp(back->population.key[i].v, cfg->population.key[i].v,
                                                  sizeof back->population.key[i].v) == 0;
    CHECK(same, "the population's values read back exactly");
    rlt_config_free(back);
    /* --set adds one key, and a later population section replaces the whole population. */
    CHECK(rlt_config_set(cfg, "population.td3.gamma=[0.9, 0.95, 0.99]") == RLT_OK && cfg->population.n_keys == 5,
          "--set population.KEY: %s", rlt_config_errmsg(cfg));
    CHECK(rlt_config_set(cfg, "population.td3.gamma=[0.9, 0.95]") == RLT_ECONFIG &&
          strstr(rlt_config_errmsg(cfg), "has 2 values, but the population has 3 members"), "%s", rlt_config_errmsg(cfg));
    CHECK(rlt_config_load_string(cfg, "population: {td3.tau: [0.1, 0.2]}\n", "p2.yaml") == RLT_OK &&
          cfg->population.n == 2 && cfg->population.n_keys == 1, "a later population replaces the earlier");
    CHECK(rlt_config_set(cfg, "population={}") == RLT_OK && cfg->population.n == 0 && rlt_group_count(cfg) == 0,
          "population={} clears it: %s", rlt_config_errmsg(cfg));
    rlt_config_free(cfg);

    {
        const char *p[] = {"pop.yaml:2:3:", "unknown key 'td3.actr_lr'", "did you mean 'td3.actor_lr'", NULL};
        refused("population:\n  td3.actr_lr: [1e-4, 3e-4]\n", p);
    }
    {
        const char *p[] = {"pop.yaml:3:3:", "population.env.name", "environment", NULL};
        refused("population:\n  td3.tau: [0.1, 0.2]\n  env.name: [pendulum, cartpole]\n", p);
    }
    {
        const char *p[] = {"pop.yaml:1:14:", "population.precision", "device", NULL};
        refused("population: {precision: [fp32, bf16]}\n", p);
    }
    {
        const char *p[] = {"pop.yaml:2:37:", "population.td3.actor_hidden", "entry 2: 0 is out of range", NULL};
        refused("population:\n  td3.actor_hidden: [[64, 64], [64, 0]]\n", p);
    }
    {
        const char *p[] = {"population member 1 of 2", "train.grad_accum_steps", "does not divide train.batch_size", NULL};
        refused("population:\n  train.batch_size: [64, 50]\n  train.grad_accum_steps: 4\n", p);
    }
    {
        const char *p[] = {"pop.yaml:2:3:", "population.train.eval_every", "whole group", NULL};
        refused("population:\n  train.eval_every: [100, 200]\n", p);
    }
    {
        const char *p[] = {"pop.yaml:3:3: key 'population.td3.tau': has 2 values, but the population has 3 members",
                           "pop.yaml:2:3: key 'population.td3.actor_lr'", NULL};
        refused("population:\n  td3.actor_lr: [1e-4, 2e-4, 3e-4]\n  td3.tau: [0.1, 0.2]\n", p);
    }
    {
        const char *p[] = {"pop.yaml:2:24:", "entry 2: 3 is out of range", "(0, 1]", NULL};
        refused("population:\n  td3.actor_lr: [1e-4, 3, 3e-4]\n", p);
    }
    {
        const char *p[] = {"pop.yaml:3:3:", "duplicate key (first given on line 2)", NULL};
        refused("population:\n  td3.tau: [0.1, 0.2]\n  td3.tau: [0.1, 0.2]\n", p);
    }
    {
        const char *p[] = {"population.name", "entry 2 is not a directory name", NULL};
        refused("population:\n  name: [a, ../b]\n  td3.tau: [0.1, 0.2]\n", p);
    }
    {
        const char *p[] = {"pop.yaml:3:3: key 'population.td3.tau': has 2 values, but the population has 3 members "
                           "(population.name lists them)", NULL};
        refused("population:\n  name: [a, b, c]\n  td3.tau: [0.1, 0.2]\n", p);
    }
    {
        const char *p[] = {"train.num_seeds", "population: {seed: [1, 2, 3]}", NULL};
        refused("train: {num_seeds: 2}\npopulation:\n  td3.tau: [0.1, 0.2]\n", p);
    }
    {
        /* Validate's rules across keys hold for every member: member 1's eps_start is below eps_end. */
        rlt_config *c;
        rlt_config_init(&c);
        CHECK(rlt_config_load_string(c, "algo: dqn\nenv: {name: cartpole}\ndqn: {eps_end: 0.1}\npopulation:\n  "
                                        "dqn.eps_start: [1.0, 0.05]\n", "dqn.yaml") == RLT_OK, "%s", rlt_config_errmsg(c));
        CHECK(rlt_config_validate(c) == RLT_ECONFIG && strstr(rlt_config_errmsg(c), "population member 1 of 2") &&
              strstr(rlt_config_errmsg(c), "dqn.yaml:3:7: key 'dqn.eps_end'"), "%s", rlt_config_errmsg(c));
        rlt_config_free(c);
    }
    /* The batched graph's check: a differing tau is named, a differing seed is not. */
    rlt_config *a = config_of(NULL, "/tmp/a"), *b = rlt_config_clone(a);
    CHECK(config_members_differ(a, b) == NULL, "one config: no difference");
    rlt_config_set(b, "seed=99");
    CHECK(config_members_differ(a, b) == NULL, "seeds may differ in one batched graph");
    rlt_config_set(b, "td3.tau=0.05");
    CHECK(config_members_differ(a, b) && strcmp(config_members_differ(a, b), "td3.tau") == 0, "tau differs");
    /* What one batched graph still cannot take: the scalars it reads from each agent's hparams block and the host
     * schedules may differ; policy_delay, the DQN variant keys, clipping on for some members only and shapes not. */
    const char *why = NULL;
    const char *const batch[] = {"td3.actor_lr=1e-4", "td3.critic_lr=3e-3", "td3.gamma=0.9", "td3.policy_noise=0.1",
                                 "td3.noise_clip=0.2", "td3.exploration_noise=0.3", "train.start_steps=77",
                                 "train.updates_per_step=2", "dqn.lr=1e-2", "dqn.gamma=0.5", "dqn.max_grad_norm=3",
                                 "dqn.tau=0.5", "dqn.target_update_every=7", "dqn.learning_starts=9",
                                 "dqn.train_freq=3", "dqn.gradient_steps=2", "dqn.eps_end=0.2", NULL};
    for (int i = 0; batch[i]; i++) {
        CHECK(rlt_config_set(b, batch[i]) == RLT_OK, "%s", rlt_config_errmsg(b));
        CHECK(config_members_unbatched(a, b, &why) == NULL, "%s batches: %s", batch[i],
              config_members_unbatched(a, b, &why));
    }
    const struct {
        const char *set, *key;
    } split[] = {{"td3.policy_delay=3", "td3.policy_delay"}, {"dqn.double=false", "dqn.double"},
                 {"dqn.loss=mse", "dqn.loss"}, {"dqn.max_grad_norm=0", "dqn.max_grad_norm"},
                 {"train.batch_size=128", "train.batch_size"}, {"td3.actor_hidden=[48, 48]", "td3.actor_hidden"}};
    for (size_t i = 0; i < sizeof split / sizeof split[0]; i++) {
        rlt_config *c = rlt_config_clone(b);
        CHECK(rlt_config_set(c, split[i].set) == RLT_OK, "%s", rlt_config_errmsg(c));
        const char *key = config_members_unbatched(b, c, &why);
        CHECK(key && strcmp(key, split[i].key) == 0 && why && why[0], "%s splits the batched graph: %s", split[i].set,
              key ? key : "(none)");
        rlt_config_free(c);
    }
    rlt_config_free(a);
    rlt_config_free(b);
    /* A population's check, member 0 against each other member. */
    rlt_config *p = config_of("population:\n  td3.actor_lr: [1e-4, 1e-3, 3e-4]\n  td3.tau: [0.005, 0.01, 0.002]\n"
                              "  td3.gamma: [0.99, 0.98, 0.95]\n  train.start_steps: [100, 200, 300]\n", "/tmp/p");
    CHECK(rlt_config_validate(p) == RLT_OK && config_population_unbatched(p, &why) == NULL,
          "a population of learning rates, tau, gamma and schedules batches: %s", rlt_config_errmsg(p));
    rlt_config_free(p);
    p = config_of("population:\n  td3.actor_lr: [1e-4, 1e-3, 3e-4]\n  td3.policy_delay: [2, 2, 3]\n", "/tmp/p");
    CHECK(rlt_config_validate(p) == RLT_OK && config_population_unbatched(p, &why) &&
              strcmp(config_population_unbatched(p, &why), "td3.policy_delay") == 0 && strstr(why, "variant"),
          "policy_delay splits a population (its last member)");
    rlt_config_free(p);
}

/* Members of different shapes (hidden sizes, batch size): each is its single run; the budget holds the largest. */
static void members_of_different_shapes(const char *dir) {
    char group_dir[600], path[700], single[700];
    snprintf(group_dir, sizeof group_dir, "%s/shapes", dir);
    const char *pop = "population:\n  td3.actor_hidden: [[32, 32], [48, 48], [32, 32]]\n"
                      "  train.batch_size: [32, 64, 32]\n  td3.critic_hidden: [24, 40]\n";
    rlt_config *cfg = config_of(pop, group_dir);
    CHECK(rlt_config_validate(cfg) == RLT_OK && cfg->population.n == 3 && config_population_has_shapes(cfg),
          "valid: %s", rlt_config_errmsg(cfg));
    rlt_config_dump(cfg, a_buf, sizeof a_buf);
    CHECK(strstr(a_buf, "  td3.actor_hidden: [[32, 32], [48, 48], [32, 32]]\n") &&
          strstr(a_buf, "  td3.critic_hidden: [[24, 40]]\n"), "the lists dump back:\n%s", a_buf);
    rlt_config *back;
    rlt_config_init(&back);
    CHECK(rlt_config_load_string(back, a_buf, "dump.yaml") == RLT_OK, "%s", rlt_config_errmsg(back));
    rlt_config_dump(back, b_buf, sizeof b_buf);
    CHECK(strcmp(a_buf, b_buf) == 0, "the dump reads back:\n%s\n---\n%s", a_buf, b_buf);
    rlt_config_free(back);
    rlt_group *g;
    int rc = rlt_group_init(cfg, &g);
    CHECK(rc == RLT_OK, "group init: %s", rlt_group_errmsg(g));
    static char table[1 << 16];
    rlt_group_plan_format(g, table, sizeof table);
    CHECK(strstr(table, "members of several shapes") && strstr(table, "largest member's (member_1)"), "%s", table);
    if (rc == RLT_OK) CHECK(rlt_group_run(g, NULL, NULL) == RLT_OK, "group run: %s", rlt_group_errmsg(g));
    rlt_group_free(g);
    snprintf(path, sizeof path, "%s/summary.csv", group_dir);
    test_read_text(path, a_buf, sizeof a_buf);
    CHECK(strstr(a_buf, "member,dir,seed,td3.actor_hidden,train.batch_size,td3.critic_hidden,status,") &&
          strstr(a_buf, "\n1,member_1,1,\"[48, 48]\",64,\"[24, 40]\",finished,"), "summary.csv quotes lists:\n%s", a_buf);
    const char *vals[3][3] = {{"td3.actor_hidden=[32, 32]", "train.batch_size=32", "td3.critic_hidden=[24, 40]"},
                              {"td3.actor_hidden=[48, 48]", "train.batch_size=64", "td3.critic_hidden=[24, 40]"},
                              {"td3.actor_hidden=[32, 32]", "train.batch_size=32", "td3.critic_hidden=[24, 40]"}};
    for (int k = 0; k < 3; k++) {
        const char *sets[4] = {vals[k][0], vals[k][1], vals[k][2], NULL};
        snprintf(single, sizeof single, "%s/shape_single_%d", dir, k);
        single_run(single, sets);
        snprintf(path, sizeof path, "%s/member_%d", group_dir, k);
        char what[64];
        snprintf(what, sizeof what, "shape member %d", k);
        test_same_run(path, single, what);
    }
    /* The budget holds the largest member for all (conservative: 2 small + 1 large would fit summed): room for three
     * of the small plan and one large, not three large. */
    rlt_fit_report fr;
    char err[256];
    uint64_t need[2];
    for (int i = 0; i < 2; i++) {
        rlt_config *one = config_of(NULL, "/tmp/unused");
        rlt_config_set(one, i ? "td3.actor_hidden=[256, 256]" : "td3.actor_hidden=[32, 32]");
        rlt_config_set(one, "td3.critic_hidden=[24, 40]");
        rlt_config_set(one, "train.batch_size=32");
        CHECK(rlt_plan_fit(one, &fr, NULL, 0, err, sizeof err) == RLT_OK, "plan: %s", err);
        need[i] = fr.need_bytes;
        rlt_config_free(one);
    }
    double budget = 1.5 * (double)need[1];
    CHECK(budget >= 3.0 * (double)need[0], "the sizes suit the test: %llu, %llu",
          (unsigned long long)need[0], (unsigned long long)need[1]);
    char set[96];
    snprintf(set, sizeof set, "memory.budget_mb=%.6f", budget / 1048576.0);
    rlt_config_set(cfg, "population.td3.actor_hidden=[[32, 32], [32, 32], [256, 256]]");
    rlt_config_set(cfg, "population.train.batch_size=32");
    rlt_config_set(cfg, set);
    snprintf(path, sizeof path, "%s/shapes_nofit", dir);
    char od[720];
    snprintf(od, sizeof od, "out_dir=%s", path);
    rlt_config_set(cfg, od);
    rc = rlt_group_init(cfg, &g);
    CHECK(rc == RLT_ENOFIT && strstr(rlt_group_errmsg(g), "members in the population"), "the largest shape is held "
          "against the budget: %s", rlt_group_errmsg(g));
    rlt_group_free(g);
    rlt_config_free(cfg);
}

static int stop_early(void *user, const rlt_group_report *r) {
    (void)user;
    return r->env_steps >= 1500;
}

static void stop_and_resume(const char *dir) {
    char whole[600], cut[600], a[700], b[700];
    snprintf(whole, sizeof whole, "%s/whole", dir);
    snprintf(cut, sizeof cut, "%s/cut", dir);
    const char *pop = "population:\n  name: [fast, slow]\n  td3.actor_lr: [1e-3, 1e-4]\n";
    rlt_config *cfg = config_of(pop, whole);
    rlt_group *g;
    CHECK(rlt_group_init(cfg, &g) == RLT_OK && rlt_group_run(g, NULL, NULL) == RLT_OK, "whole: %s", rlt_group_errmsg(g));
    rlt_group_free(g);
    rlt_config_free(cfg);

    cfg = config_of(pop, cut);
    CHECK(rlt_group_init(cfg, &g) == RLT_OK, "cut init: %s", rlt_group_errmsg(g));
    CHECK(rlt_group_run(g, stop_early, NULL) == RLT_EINTERRUPTED, "stopped: %s", rlt_group_errmsg(g));
    rlt_group_free(g);
    CHECK(rlt_group_init(cfg, &g) == RLT_OK, "resume init: %s", rlt_group_errmsg(g));
    CHECK(rlt_group_resume(g, "final.ckpt") == RLT_OK, "resume: %s", rlt_group_errmsg(g));
    CHECK(rlt_group_run(g, NULL, NULL) == RLT_OK, "resumed run: %s", rlt_group_errmsg(g));
    rlt_group_free(g);
    rlt_config_free(cfg);
    const char *names[2] = {"fast", "slow"};
    for (int k = 0; k < 2; k++) {
        snprintf(a, sizeof a, "%s/%s", cut, names[k]);
        snprintf(b, sizeof b, "%s/%s", whole, names[k]);
        char what[64];
        snprintf(what, sizeof what, "member %s stopped and resumed", names[k]);
        test_same_run(a, b, what);
    }
}

int main(void) {
    const char *dir = test_tmpdir("population");
    config_rules();
    allowed_keys_leave_the_plan_alone();
    members_train_with_their_values(dir);
    members_of_different_shapes(dir);
    stop_and_resume(dir);
    return test_summary("test_population");
}
