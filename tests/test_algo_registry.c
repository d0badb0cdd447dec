/* test_algo_registry.c: the algorithm boundary (agents/algo.h, agents/registry.c).
 * - The registry lists td3 and dqn in order; lookup by name finds each; an unknown name fails with
 *   RLT_ECONFIG and a message that lists the registered names.
 * - A tiny third algorithm defined here registers at run time: lookup finds it, the name list grows,
 *   a second registration of the name and an incomplete table are refused, and an agent allocated for
 *   it carves exactly the state its table declares (64-aligned, zeroed, inside the agent's allocation).
 * - A TD3 and a DQN agent each run on the table the registry gives for their name, own their state
 *   through the accessor (the state block the agent carved), and describe their networks and loss
 *   columns through the hooks.
 * - Secondary: no run-layer engine source names td3 or dqn outside comments and strings (the config files,
 *   which hold the keys, aside). */
#include <ctype.h>
#include <stdint.h>
#include <string.h>

#include "../agents/dqn.h"
#include "../agents/td3.h"
#include "agent.h"
#include "harness.h"
#include "mem.h"

/* ---- a tiny third algorithm: enough of a table to register; its hooks are never run here ---- */
typedef struct tiny_state {
    double w[100];
    int64_t seen;
} tiny_state;
static int tiny_spaces(rlt_agent *ag, const rlt_space *o, const rlt_space *a) { (void)ag, (void)o, (void)a; return RLT_OK; }
static int tiny_agent(rlt_agent *ag) { (void)ag; return RLT_OK; }
static int tiny_ops(rlt_agent *ag, int32_t v) { (void)ag, (void)v; return RLT_OK; }
static int tiny_act(rlt_agent *ag, const void *o, int32_t n, int32_t x, void *a) { (void)ag, (void)o, (void)n, (void)x, (void)a; return RLT_OK; }
static int tiny_observe(rlt_agent *ag, const void *o, const void *a, const float *r, const void *o2, const uint8_t *t,
                        const uint8_t *tr, int32_t n) {
    (void)o, (void)a, (void)r, (void)o2, (void)t, (void)tr;
    ((tiny_state *)agent_algo_state(ag))->seen += n;
    return RLT_OK;
}
static int tiny_update(rlt_agent *ag, int32_t *done) { (void)ag, (void)done; return RLT_OK; }
static uint64_t tiny_params(const rlt_agent *ag) { (void)ag; return 100; }
static void tiny_losses(const float l[RLT_LOSS_COUNT], double *out) { out[0] = l[RLT_LOSS_Q1]; }
static void tiny_net(const rlt_agent *ag, rlt_text *o) { (void)ag; rlt_text_add(o, "linear: 100"); }

static const rlt_algo tiny = {
    .name = "tiny",
    .state_bytes = sizeof(tiny_state),
    .n_variants = 1,
    .min_replay_capacity = 1,
    .n_loss_columns = 1,
    .loss_columns = {"loss"},
    .loss_values = tiny_losses,
    .check_spaces = tiny_spaces,
    .plan = tiny_agent,
    .init_state = tiny_agent,
    .update_ops = tiny_ops,
    .act = tiny_act,
    .observe = tiny_observe,
    .update = tiny_update,
    .param_count = tiny_params,
    .network_text = tiny_net,
    .after_load = tiny_agent,
};

static void check_builtin(void) {
    CHECK(algo_registry_count() == 2, "two built-in algorithms, got %d", (int)algo_registry_count());
    CHECK(algo_registry_at(0) && !strcmp(algo_registry_at(0)->name, "td3"), "first: td3");
    CHECK(algo_registry_at(1) && !strcmp(algo_registry_at(1)->name, "dqn"), "second: dqn");
    CHECK(algo_registry_at(2) == NULL && algo_registry_at(-1) == NULL, "out of range");
    CHECK(algo_registry_find("td3") == algo_registry_at(0) && algo_registry_find("dqn") == algo_registry_at(1), "find");
    CHECK(algo_registry_find("TD3") == NULL && algo_registry_find("") == NULL && algo_registry_find(NULL) == NULL,
          "exact names only");
    char names[64];
    size_t n = algo_registry_names(names, sizeof names);
    CHECK(n == strlen("td3, dqn") && !strcmp(names, "td3, dqn"), "names '%s'", names);
    rlt_err e;
    rlt_err_clear(&e);
    const rlt_algo *a = NULL;
    CHECK(algo_registry_lookup("ppo", &a, &e) == RLT_ECONFIG && a == NULL, "unknown name refused");
    CHECK(strstr(e.msg, "'ppo'") && strstr(e.msg, "registered: td3, dqn"), "the message lists the names: %s", e.msg);
    CHECK(algo_registry_lookup("dqn", &a, &e) == RLT_OK && a == algo_registry_find("dqn"), "lookup dqn");
    /* Every built-in table has the hooks the run layer calls without checking. */
    for (int32_t i = 0; i < algo_registry_count(); i++) {
        const rlt_algo *t = algo_registry_at(i);
        CHECK(t->state_bytes > 0 && t->network_text && t->after_load && t->loss_values && t->n_loss_columns == 2 &&
                  !strcmp(t->loss_columns[0], "critic_loss") && !strcmp(t->loss_columns[1], "actor_loss"),
              "%s: hooks and metrics columns", t->name);
    }
    CHECK(algo_registry_find("td3")->state_bytes == sizeof(rlt_td3), "td3 declares its state");
    CHECK(algo_registry_find("dqn")->state_bytes == sizeof(rlt_dqn), "dqn declares its state");
    CHECK(algo_registry_find("dqn")->min_replay_capacity == 3 && algo_registry_find("td3")->min_replay_capacity == 1,
          "replay needs");
}

static void check_third(void) {
    rlt_algo broken = tiny;
    broken.name = "broken";
    broken.observe = NULL;
    CHECK(algo_registry_add(&broken) == RLT_EINVAL && !algo_registry_find("broken"), "an incomplete table is refused");
    CHECK(algo_registry_add(&tiny) == RLT_OK, "a third algorithm registers");
    CHECK(algo_registry_add(&tiny) == RLT_EINVAL, "a name registers once");
    CHECK(algo_registry_find("tiny") == &tiny && algo_registry_count() == 3, "lookup finds it");
    char names[64];
    algo_registry_names(names, sizeof names);
    CHECK(!strcmp(names, "td3, dqn, tiny"), "names '%s'", names);
    rlt_err e;
    rlt_err_clear(&e);
    const rlt_algo *a;
    CHECK(algo_registry_lookup("sac", &a, &e) == RLT_ECONFIG && strstr(e.msg, "registered: td3, dqn, tiny"),
          "the error lists it too: %s", e.msg);

    /* An agent allocated for it carries exactly its state, zeroed and 64-aligned, inside the allocation. */
    rlt_config *cfg;
    rlt_config_init(&cfg);
    memset(cfg->algo, 0, sizeof cfg->algo);
    memcpy(cfg->algo, "tiny", 4);
    rlt_agent *ag = agent_alloc(cfg);
    CHECK(ag != NULL, "allocated");
    if (ag) {
        CHECK(ag->algo_state && ag->algo_state_cap >= sizeof(tiny_state) && ag->algo_state_cap < sizeof(tiny_state) + 64,
              "state of %llu bytes for %zu", (unsigned long long)ag->algo_state_cap, sizeof(tiny_state));
        CHECK(((uintptr_t)ag->algo_state & 63) == 0, "aligned");
        const unsigned char *s = ag->algo_state;
        int zero = 1;
        for (size_t i = 0; i < sizeof(tiny_state); i++) zero &= s[i] == 0;
        CHECK(zero, "zeroed");
        CHECK(s > (const unsigned char *)ag && (const void *)ag->ckpt_w > (const void *)ag &&
                  (const void *)ag->ckpt_r > (const void *)ag->ckpt_w && s > (const unsigned char *)ag->ckpt_r,
              "carved after the agent and its checkpoint I/O state");
        /* Its hooks reach the state through the accessor. */
        ag->algo = &tiny;
        uint8_t t = 0;
        CHECK(tiny.observe(ag, NULL, NULL, NULL, NULL, &t, &t, 5) == RLT_OK &&
                  ((tiny_state *)agent_algo_state(ag))->seen == 5, "the state is the algorithm's");
        rlt_mem_free(ag);
    }
    /* An unknown name allocates no state; agent init then names the algorithms. */
    memcpy(cfg->algo, "nope", 4);
    ag = agent_alloc(cfg);
    CHECK(ag && ag->algo_state == NULL && ag->algo_state_cap == 0, "no state for an unknown name");
    rlt_mem_free(ag);
    rlt_config_free(cfg);
}

static rlt_agent *make(const char *algo) {
    rlt_config *cfg;
    rlt_config_init(&cfg);
    char set[64];
    snprintf(set, sizeof set, "algo=%s", algo);
    rlt_config_set(cfg, set);
    rlt_config_set(cfg, "device=cpu");
    rlt_config_set(cfg, "train.batch_size=8");
    rlt_config_set(cfg, "replay.capacity=64");
    rlt_config_set(cfg, "network.hidden=[8]");
    rlt_config_set(cfg, "td3.actor_hidden=[8]");
    rlt_config_set(cfg, "td3.critic_hidden=[8]");
    int dqn = !strcmp(algo, "dqn");
    rlt_space obs = {RLT_SPACE_BOX, RLT_DTYPE_F32, 1, {3, 0, 0, 0}, 0, NULL, NULL};
    rlt_space act = dqn ? (rlt_space){RLT_SPACE_DISCRETE, RLT_DTYPE_I32, 1, {1, 0, 0, 0}, 3, NULL, NULL}
                        : (rlt_space){RLT_SPACE_BOX, RLT_DTYPE_F32, 1, {1, 0, 0, 0}, 0, NULL, NULL};
    rlt_agent *ag = NULL;
    CHECK(rlt_agent_init(cfg, &obs, &act, &ag) == RLT_OK, "init %s: %s", algo, rlt_agent_errmsg(ag));
    rlt_config_free(cfg);
    return ag;
}

static void check_agents(void) {
    rlt_agent *t = make("td3"), *d = make("dqn");
    if (!t || !d || !t->plan.sealed || !d->plan.sealed) {
        rlt_agent_free(t);
        rlt_agent_free(d);
        return;
    }
    CHECK(t->algo == algo_registry_find("td3") && d->algo == algo_registry_find("dqn"), "the registry's tables");
    CHECK((void *)td3_state(t) == t->algo_state && (void *)dqn_state(d) == d->algo_state, "one accessor each");
    CHECK(t->algo_state_cap >= sizeof(rlt_td3) && d->algo_state_cap >= sizeof(rlt_dqn), "room for the state");
    CHECK(td3_state(t)->n_total == t->algo->param_count(t) && td3_state(t)->params != NULL, "td3's state was planned");
    CHECK(dqn_state(d)->n_params == d->algo->param_count(d) && dqn_state(d)->n_actions == 3, "dqn's state was planned");
    char buf[256];
    rlt_text o = {buf, sizeof buf, 0};
    t->algo->network_text(t, &o);
    CHECK(!strcmp(buf, "actor_hidden: [8]; critic_hidden: [8]"), "td3 network '%s'", buf);
    o = (rlt_text){buf, sizeof buf, 0};
    d->algo->network_text(d, &o);
    CHECK(!strncmp(buf, "conv: ", 6) && strstr(buf, "hidden: [8]"), "dqn network '%s'", buf);
    float l[RLT_LOSS_COUNT] = {1.0f, 3.0f, -2.0f, 0.0f};
    double v[RLT_ALGO_MAX_LOSS_COLUMNS];
    t->algo->loss_values(l, v);
    CHECK(v[0] == 2.0 && v[1] == -2.0, "td3: the twin critics' mean and the actor's loss");
    d->algo->loss_values(l, v);
    CHECK(v[0] == 1.0 && v[1] == -2.0, "dqn: its TD loss");
    rlt_agent_free(t);
    rlt_agent_free(d);
}

/* Source text with comments, string and character literals blanked out. */
static void strip(char *s) {
    for (char *p = s; *p; p++) {
        if (p[0] == '/' && p[1] == '*') {
            char *end = strstr(p + 2, "*/");
            char *stop = end ? end + 2 : p + strlen(p);
            memset(p, ' ', (size_t)(stop - p));
            p = stop - 1;
        } else if (p[0] == '/' && p[1] == '/') {
            while (*p && *p != '\n') *p++ = ' ';
            p--;
        } else if (*p == '"' || *p == '\'') {
            char q = *p;
            *p++ = ' ';
            while (*p && *p != q) {
                if (*p == '\\' && p[1]) *p++ = ' ';
                *p++ = ' ';
            }
            if (*p) *p = ' ';
        }
    }
}

static void check_engine_is_algorithm_free(void) {
    static const char *files[] = {"train/agent.c", "train/agent_io.c", "train/trainer.c", "train/trainer_ckpt.c",
                                  "train/planner.c", "engine/plan.c", "train/plan_json.c", "engine/replay.c",
                                  "engine/checkpoint.c", "train/outputs.c", "engine/device.c",
                                  "engine/backend_registry.c"};
    static char text[1 << 20];
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", RLT_SOURCE_DIR, files[i]);
        FILE *f = fopen(path, "rb");
        CHECK(f != NULL, "open %s", path);
        if (!f) continue;
        size_t n = fread(text, 1, sizeof text - 1, f);
        fclose(f);
        text[n] = '\0';
        strip(text);
        for (char *p = text; *p; p++) *p = (char)tolower((unsigned char)*p);
        const char *hit = strstr(text, "td3");
        if (!hit) hit = strstr(text, "dqn");
        CHECK(!hit, "%s names an algorithm in code: '%.40s'", files[i], hit ? hit : "");
    }
    /* And the run layer's header does not pull the algorithms in. */
    char path[512];
    snprintf(path, sizeof path, "%s/train/agent.h", RLT_SOURCE_DIR);
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
    if (f) fclose(f);
    text[n] = '\0';
    CHECK(n > 0 && !strstr(text, "agents/"), "train/agent.h includes nothing from agents/");
}

int main(void) {
    check_builtin();
    check_agents();
    check_third();
    check_engine_is_algorithm_free();
    return test_summary("test_algo_registry");
}
