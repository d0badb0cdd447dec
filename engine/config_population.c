/* config_population.c: a config's population (config.h, rlt_population): which keys may differ between the
 * members of one seed group, the checks of the values the reader (config.c) stored, each member's own config, and
 * the population written back as YAML.
 *
 * Most keys a population varies leave every shape alone (learning rates, discount, Polyak rate, noise, schedules,
 * seeds): its members then share one memory plan, and a batched update graph (train/seed_batch.c) can move one
 * member's pointers by each arena's offset, reading each member's scalars from its hparams block
 * (engine/agent_core.h); config_members_unbatched names the few member keys it still cannot take. tests/test_population.c plans a config with each such key changed and
 * requires the identical plan, so a key listed with them that does change a shape fails that test. A few shape keys
 * (batch size, replay capacity, hidden sizes) may differ too: each member is then planned with its own values,
 * train/seed_group.c holds the largest plan against the budgets, and members of different shapes keep their own
 * update graphs. */
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "config_schema.h"
#include "mem.h"
#include "text.h"

/* The keys whose values may differ between members: scalars that no plan reads. */
static const char *const member_keys[] = {
    "seed",
    "train.start_steps", "train.updates_per_step",
    "td3.actor_lr", "td3.critic_lr", "td3.gamma", "td3.tau", "td3.policy_noise", "td3.noise_clip",
    "td3.policy_delay", "td3.exploration_noise",
    "dqn.lr", "dqn.gamma", "dqn.double", "dqn.loss", "dqn.target_update_every", "dqn.tau", "dqn.eps_start",
    "dqn.eps_end", "dqn.eps_fraction", "dqn.learning_starts", "dqn.train_freq", "dqn.gradient_steps",
    "dqn.max_grad_norm", "dqn.eval_epsilon",
};

/* Keys that change the plan's shapes and may still differ: each member is planned with its own values (the group
 * checks the largest against the budgets), and members of different shapes run their own update graphs. */
static const char *const shape_keys[] = {
    "train.batch_size", "train.grad_accum_steps", "replay.capacity", "td3.actor_hidden", "td3.critic_hidden",
    "network.hidden",
};

/* Keys (or sections, ending in '.') that change the device, the environment or the kind of plan. */
static const char *const fixed_keys[] = {
    "algo", "env.", "device", "devices", "precision", "replay.", "network.", "memory.", "cpu.threads",
};

int config_population_allows(const char *key, char *buf, size_t cap) {
    for (size_t i = 0; i < sizeof member_keys / sizeof member_keys[0]; i++)
        if (strcmp(key, member_keys[i]) == 0) return RLT_POP_MEMBER;
    for (size_t i = 0; i < sizeof shape_keys / sizeof shape_keys[0]; i++)
        if (strcmp(key, shape_keys[i]) == 0) return RLT_POP_SHAPE;
    for (size_t i = 0; i < sizeof fixed_keys / sizeof fixed_keys[0]; i++) {
        size_t n = strlen(fixed_keys[i]);
        int sec = fixed_keys[i][n - 1] == '.';
        if (sec ? strncmp(key, fixed_keys[i], n) == 0 : strcmp(key, fixed_keys[i]) == 0) {
            snprintf(buf, cap, "it changes the device, the environment or the kind of memory plan, which one group "
                     "shares; run each value as a group of its own (one config each), or vary a hyperparameter "
                     "instead (learning rates, tau, gamma, noise, schedules, seed, batch size, hidden sizes)");
            return 0;
        }
    }
    snprintf(buf, cap, "it is a setting of the whole group (its length, outputs, evaluations or checkpoints), not a "
             "hyperparameter of one member; set it once for the group");
    return 0;
}

const char *config_members_differ(const rlt_config *a, const rlt_config *b) {
    for (size_t i = 0; i < sizeof member_keys / sizeof member_keys[0]; i++) {
        if (strcmp(member_keys[i], "seed") == 0) continue;
        const cfg_key *k = config_schema_find(member_keys[i], strlen(member_keys[i]));
        if (k && memcmp((const char *)a + k->offset, (const char *)b + k->offset, k->size) != 0) return k->key;
    }
    return NULL;
}

/* Member keys whose differing values change the update's ops, so that one batched update graph cannot run the
 * members (train/seed_batch.c), and why. Every other member key batches: the update reads its scalars from each
 * agent's hparams block (td3.actor_lr, critic_lr, tau, gamma, policy_noise, noise_clip; dqn.lr, gamma,
 * max_grad_norm), and the rest is host code around the update (seed, exploration, epsilon, start_steps,
 * learning_starts, the update schedules, DQN's target update with dqn.tau, which runs on each agent's own stream). */
static const struct {
    const char *key, *why;
} graph_keys[] = {
    {"td3.policy_delay", "it decides which updates also step the actor, and the batched graph runs one update variant "
                         "for all members at a time"},
    {"dqn.double", "it changes the update's forward passes and target"},
    {"dqn.loss", "it changes the update's loss kernel"},
};

const char *config_members_unbatched(const rlt_config *a, const rlt_config *b, const char **why) {
    static const char *shape_why = "it changes the memory plan's shapes, and the batched graph runs one plan";
    for (size_t i = 0; i < sizeof graph_keys / sizeof graph_keys[0]; i++) {
        const cfg_key *k = config_schema_find(graph_keys[i].key, strlen(graph_keys[i].key));
        if (k && memcmp((const char *)a + k->offset, (const char *)b + k->offset, k->size) != 0) {
            if (why) *why = graph_keys[i].why;
            return k->key;
        }
    }
    /* The clipping threshold is read from the block; whether the update clips at all is part of the graph. */
    if ((a->dqn.max_grad_norm > 0) != (b->dqn.max_grad_norm > 0)) {
        if (why)
            *why = "it switches gradient clipping off (0) for some members only, which changes the update's kernels";
        return "dqn.max_grad_norm";
    }
    for (size_t i = 0; i < sizeof shape_keys / sizeof shape_keys[0]; i++) {
        const cfg_key *k = config_schema_find(shape_keys[i], strlen(shape_keys[i]));
        if (k && memcmp((const char *)a + k->offset, (const char *)b + k->offset, k->size) != 0) {
            if (why) *why = shape_why;
            return k->key;
        }
    }
    return NULL;
}

const char *config_population_unbatched(const rlt_config *cfg, const char **why) {
    const rlt_population *p = &cfg->population;
    if (p->n < 2) return NULL;
    rlt_config *m = rlt_mem_alloc(2 * sizeof *m, 64);
    if (!m) {
        if (why) *why = "out of host memory to compare the members";
        return "population";
    }
    const char *key = NULL;
    m[0] = *cfg;
    config_population_apply(&m[0], 0);
    for (int32_t k = 1; k < p->n && !key; k++) {
        m[1] = *cfg;
        config_population_apply(&m[1], k);
        key = config_members_unbatched(&m[0], &m[1], why);
    }
    rlt_mem_free(m);
    return key;
}

static const cfg_key *pop_row(const rlt_pop_key *pk) {
    size_t n;
    const cfg_key *keys = config_schema_keys(&n);
    return pk->row >= 0 && (size_t)pk->row < n ? &keys[pk->row] : NULL;
}

static int is_list(const cfg_key *k) { return k && k->type == CFG_INT_LIST; }

int config_population_has_shapes(const rlt_config *cfg) {
    char why[8];
    for (int32_t i = 0; i < cfg->population.n_keys; i++) {
        const cfg_key *k = pop_row(&cfg->population.key[i]);
        if (k && config_population_allows(k->key, why, sizeof why) == RLT_POP_SHAPE) return 1;
    }
    return 0;
}

/* "FILE:LINE:COL: key 'population.KEY'" where key i was written (as config_key_where). */
static const char *pop_where(const rlt_config *cfg, int32_t i, char *buf, size_t cap) {
    const rlt_pop_key *pk = &cfg->population.key[i];
    const cfg_key *k = pop_row(pk);
    const char *name = k ? k->key : "?";
    uint32_t src = pk->src;
    if (src && cfg->n_sources - (src - 1) <= RLT_CFG_ORIGINS)
        snprintf(buf, cap, "%.300s:%d:%d: key 'population.%s'", cfg->source_names[(src - 1) % RLT_CFG_ORIGINS],
                 (int)pk->line, (int)pk->col, name);
    else
        snprintf(buf, cap, "config: key 'population.%s'", name);
    return buf;
}

int config_population_settle(rlt_config *cfg) {
    rlt_population *p = &cfg->population;
    char where[400], other[400];
    if (p->n_keys < 0 || p->n_keys > RLT_CFG_POP_KEYS || p->named < 0 || p->named > RLT_CFG_MAX_SEEDS)
        RLT_FAIL(&cfg->err, RLT_ECONFIG, "config: population holds %d keys and %d names; code wrote it directly",
                 (int)p->n_keys, (int)p->named);
    if (p->n_keys == 0 && !p->named) {
        p->n = 0;
        return RLT_OK;
    }
    /* Members: the longest list; every other list has that length or one value for all. */
    int32_t n = p->named, first = -1;
    for (int32_t i = 0; i < p->n_keys; i++) {
        const rlt_pop_key *pk = &p->key[i];
        if (!pop_row(pk) || pk->n < 1 || pk->n > RLT_CFG_MAX_SEEDS)
            RLT_FAIL(&cfg->err, RLT_ECONFIG, "%s: holds %d values; code wrote the population directly",
                     pop_where(cfg, i, where, sizeof where), (int)pk->n);
        if (pk->n > 1 && (first < 0 || pk->n > p->key[first].n)) first = i;
    }
    if (first >= 0 && p->key[first].n > n) n = p->key[first].n;
    if (n < 1) n = 1;
    for (int32_t i = 0; i < p->n_keys; i++) {
        const rlt_pop_key *pk = &p->key[i];
        if (pk->n != 1 && pk->n != n)
            RLT_FAIL(&cfg->err, RLT_ECONFIG, "%s: has %d values, but the population has %d members (%s%s); give each "
                     "key one value per member, or one value for all", pop_where(cfg, i, where, sizeof where),
                     (int)pk->n, (int)n, p->named == n ? "population.name lists them" : "",
                     p->named == n ? "" : pop_where(cfg, first, other, sizeof other));
    }
    if (p->named && p->named != n)
        RLT_FAIL(&cfg->err, RLT_ECONFIG, "config: key 'population.name' lists %d names, but the population has %d "
                 "members (%s); give one name per member", (int)p->named, (int)n,
                 pop_where(cfg, first, other, sizeof other));
    p->n = n;
    return RLT_OK;
}

size_t config_population_format(const rlt_config *cfg, int32_t i, int32_t k, char *buf, size_t cap) {
    if (cap) buf[0] = '\0';
    const rlt_population *p = &cfg->population;
    if (i < 0 || i >= p->n_keys || k < 0 || k >= RLT_CFG_MAX_SEEDS) return 0;
    const rlt_pop_key *pk = &p->key[i];
    const cfg_key *key = pop_row(pk);
    if (!key) return 0;
    uint64_t v = pk->v[pk->n == 1 ? 0 : k];
    if (is_list(key)) return v < (uint64_t)p->n_lists ? config_schema_format_list(key, &p->lists[v], buf, cap) : 0;
    return config_schema_format_bits(key, v, buf, cap);
}

void config_population_apply(rlt_config *cfg, int32_t k) {
    rlt_population *p = &cfg->population;
    for (int32_t i = 0; i < p->n_keys; i++) {
        const rlt_pop_key *pk = &p->key[i];
        const cfg_key *key = pop_row(pk);
        if (!key) continue;
        uint64_t bits = pk->v[pk->n == 1 ? 0 : k];
        if (is_list(key)) {
            if (bits < (uint64_t)p->n_lists) memcpy((char *)cfg + key->offset, &p->lists[bits], sizeof p->lists[bits]);
        } else {
            memcpy((char *)cfg + key->offset, &bits, key->size);
        }
        /* The member's messages about this key point at the population's line. */
        cfg->origin[pk->row].line = pk->line;
        cfg->origin[pk->row].col = pk->col;
        cfg->origin[pk->row].src = pk->src;
    }
    memset(p, 0, sizeof *p);
}

int config_population_check(rlt_config *cfg) {
    RLT_TRY(config_population_settle(cfg));
    rlt_population *p = &cfg->population;
    if (p->n == 0) return RLT_OK;
    char where[400], why[400];
    for (int32_t i = 0; i < p->n_keys; i++) {
        const rlt_pop_key *pk = &p->key[i];
        const cfg_key *k = pop_row(pk);
        if (!(config_schema_is_scalar(k) || is_list(k)) || !config_population_allows(k->key, why, sizeof why))
            RLT_FAIL(&cfg->err, RLT_ECONFIG, "%s: cannot differ between the members of a population: %s",
                     pop_where(cfg, i, where, sizeof where), config_schema_is_scalar(k) ? why : "it is not one value");
        if (p->n_lists < 0 || p->n_lists > RLT_CFG_POP_LISTS)
            RLT_FAIL(&cfg->err, RLT_ECONFIG, "config: the population holds %d lists; code wrote it directly",
                     (int)p->n_lists);
        for (int32_t j = 0; j < pk->n; j++) {
            cfg_why w;
            if (is_list(k) && pk->v[j] >= (uint64_t)p->n_lists)
                RLT_FAIL(&cfg->err, RLT_ECONFIG, "%s: entry %d names list %llu of %d; code wrote the population "
                         "directly", pop_where(cfg, i, where, sizeof where), (int)j + 1,
                         (unsigned long long)pk->v[j], (int)p->n_lists);
            if (is_list(k) ? config_schema_check_list(k, &p->lists[pk->v[j]], &w) != 0
                           : config_schema_check_bits(k, pk->v[j], &w) != 0)
                RLT_FAIL(&cfg->err, RLT_ECONFIG, "%s: entry %d %s; %s", pop_where(cfg, i, where, sizeof where),
                         (int)j + 1, w.what, w.hint);
        }
    }
    /* The members are named by the population: train.seeds and train.num_seeds would name them a second time. */
    if (cfg->train.seeds.n > 0 || cfg->train.num_seeds > 1)
        RLT_FAIL(&cfg->err, RLT_ECONFIG, "%s: set beside a population of %d members, which names the members itself; "
                 "give the members' seeds in the population (population: {seed: [1, 2, 3]}; one value, or none, gives "
                 "every member the same seed) and leave train.seeds: [] and train.num_seeds: 1",
                 config_key_where(cfg, cfg->train.seeds.n > 0 ? "train.seeds" : "train.num_seeds", where, sizeof where),
                 (int)p->n);
    /* Each member's own config passes validate's rules across keys (dqn.eps_end below dqn.eps_start, ...). */
    rlt_config *m = rlt_mem_alloc(sizeof *m, 64);
    if (!m) RLT_FAIL(&cfg->err, RLT_ENOMEM, "out of host memory to check the population's members");
    int rc = RLT_OK;
    for (int32_t k = 0; k < p->n && rc == RLT_OK; k++) {
        *m = *cfg;
        config_population_apply(m, k);
        if (rlt_config_validate(m) != RLT_OK)
            rc = rlt_err_set(&cfg->err, m->err.status, __FILE__, __LINE__, "population member %d of %d: %s", (int)k,
                             (int)p->n, m->err.msg);
    }
    rlt_mem_free(m);
    return rc;
}

void config_population_dump(const rlt_config *cfg, rlt_text *out) {
    rlt_text o = *out;
    const rlt_population *p = &cfg->population;
    if (p->n == 0) return;
    rlt_text_add(&o, "population:\n");
    if (p->named) {
        rlt_text_add(&o, "  name: [");
        for (int32_t k = 0; k < p->named; k++) rlt_text_add(&o, "%s%.*s", k ? ", " : "", RLT_CFG_POP_NAME, p->name[k]);
        rlt_text_add(&o, "]\n");
    }
    for (int32_t i = 0; i < p->n_keys; i++) {
        const cfg_key *k = pop_row(&p->key[i]);
        if (!k) continue;
        rlt_text_add(&o, "  %s: [", k->key);
        for (int32_t j = 0; j < p->key[i].n; j++) {
            char v[160];
            config_population_format(cfg, i, j, v, sizeof v);
            rlt_text_add(&o, "%s%s", j ? ", " : "", v);
        }
        rlt_text_add(&o, "]\n");
    }
    *out = o;
}
