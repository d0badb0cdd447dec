/* test_size_limits.c: sizes that do not fit are refused, never overflowed or wrapped.
 * - Space sizes: four int32 dimensions multiply to 2^124. rlt_space_elems returns RLT_EINVAL past 2^60;
 *   rlt_agent_init refuses an observation space of more than RLT_ENV_MAX_OBS_ELEMS elements with
 *   RLT_EINVAL, whatever the dimensions (the product used to overflow int64: undefined behaviour that UBSan
 *   reports); a user environment with such a space is refused before the trainer allocates for it.
 * - Plan sizes saturate: a replay of 2^40 rows of 2^24 bytes (2^64 bytes, which wrapped to 0) makes a plan
 *   of UINT64_MAX bytes that is refused for the budget and for the arena reservation, not a tiny arena.
 * - rlt_mem_alloc of sizes near SIZE_MAX fails instead of rounding up to a small block. */
#include <stdint.h>
#include <string.h>

#include "agent.h"
#include "backend_registry.h"
#include "env.h"
#include "harness.h"
#include "mem.h"
#include "replay.h"

static rlt_config *config(const char *yaml) {
    rlt_config *cfg = NULL;
    CHECK(rlt_config_init(&cfg) == RLT_OK, "config init");
    CHECK(rlt_config_load_string(cfg, yaml, "test") == RLT_OK, "config: %s", rlt_config_errmsg(cfg));
    return cfg;
}

static void check_space_elems(void) {
    rlt_space s = {.kind = RLT_SPACE_BOX, .dtype = RLT_DTYPE_F32, .ndim = 4,
                   .shape = {INT32_MAX, INT32_MAX, INT32_MAX, INT32_MAX}};
    CHECK(rlt_space_elems(&s) == RLT_EINVAL, "2^124 elements: RLT_EINVAL, got %lld", (long long)rlt_space_elems(&s));
    CHECK(rlt_space_bytes(&s) == RLT_EINVAL, "2^124 elements: bytes RLT_EINVAL");
    s.ndim = 2;
    CHECK(rlt_space_elems(&s) == RLT_EINVAL, "2^62 elements: past 2^60, RLT_EINVAL");
    s.shape[1] = 8;
    CHECK(rlt_space_elems(&s) == (int64_t)INT32_MAX * 8, "2 dimensions: the exact product");
    s.shape[0] = 65536;
    s.shape[1] = 65536;
    s.shape[2] = 65536;
    s.ndim = 3;
    CHECK(rlt_space_elems(&s) == (int64_t)1 << 48, "2^48 elements counted exactly");
}

static void check_agent_spaces(void) {
    rlt_config *cfg = config("algo: dqn\nnetwork: {hidden: [8]}\nreplay: {capacity: 100}\n");
    rlt_space act = {.kind = RLT_SPACE_DISCRETE, .dtype = RLT_DTYPE_I32, .ndim = 1, .shape = {1}, .n = 2};
    const int32_t shapes[][4] = {
        {INT32_MAX, INT32_MAX, INT32_MAX, INT32_MAX}, /* the product overflows int64 at the third factor */
        {65536, 65536, 65536, 1},
        {4, 2048, 2048, 2},                           /* one element over the limit */
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        rlt_space obs = {.kind = RLT_SPACE_BOX, .dtype = RLT_DTYPE_U8, .ndim = 4};
        memcpy(obs.shape, shapes[i], sizeof obs.shape);
        rlt_agent *ag = NULL;
        int rc = rlt_agent_init(cfg, &obs, &act, &ag);
        CHECK(rc == RLT_EINVAL, "obs %d x %d x %d x %d: RLT_EINVAL, got %d", shapes[i][0], shapes[i][1], shapes[i][2],
              shapes[i][3], rc);
        CHECK(ag && strstr(rlt_agent_errmsg(ag), "too large"), "the message says the space is too large: %s",
              ag ? rlt_agent_errmsg(ag) : "(no agent)");
        rlt_agent_free(ag);
    }
    rlt_config_free(cfg);
}

static int pm_reset(void *user, int32_t instance, uint64_t seed, void *obs) { return 0; }
static int pm_step(void *user, int32_t instance, const void *action, void *obs, float *reward, uint8_t *terminated,
                   uint8_t *truncated) {
    return 0;
}

static void check_user_env_space(void) {
    rlt_config *cfg = config("algo: dqn\nnetwork: {hidden: [8]}\nreplay: {capacity: 100}\nout_dir: tmp_size_limits\n");
    rlt_env_callbacks cb;
    memset(&cb, 0, sizeof cb);
    cb.struct_size = sizeof cb;
    cb.obs = (rlt_space){.kind = RLT_SPACE_BOX, .dtype = RLT_DTYPE_F32, .ndim = 4,
                         .shape = {INT32_MAX, INT32_MAX, INT32_MAX, 3}};
    cb.act = (rlt_space){.kind = RLT_SPACE_DISCRETE, .dtype = RLT_DTYPE_I32, .ndim = 1, .shape = {1}, .n = 2};
    cb.reset = pm_reset;
    cb.step = pm_step;
    rlt_trainer *tr = NULL;
    uint64_t before = rlt_mem_alloc_count();
    int rc = rlt_trainer_init_env(cfg, &cb, &tr);
    CHECK(rc == RLT_EINVAL, "user env with a 2^93-element observation: RLT_EINVAL, got %d: %s", rc,
          tr ? rlt_trainer_errmsg(tr) : "");
    CHECK(tr && strstr(rlt_trainer_errmsg(tr), "too large"), "message: %s", tr ? rlt_trainer_errmsg(tr) : "");
    CHECK(rlt_mem_alloc_count() - before < 8, "refused before the observation buffers were allocated");
    rlt_trainer_free(tr);
    rlt_config_free(cfg);
}

static void check_plan_saturates(void) {
    rlt_backend bk;
    rlt_err e;
    memset(&e, 0, sizeof e);
    CHECK(rlt_backend_open(&bk, &e, "cpu", 1, NULL, 0) == RLT_OK, "open: %s", e.msg);
    rlt_plan p;
    plan_init(&p, 1);
    p.host.avail = UINT64_MAX;
    rlt_replay rp;
    memset(&rp, 0, sizeof rp);
    CHECK(replay_add_obs_field(&rp, &e, "obs", RLT_DTYPE_U8, (uint64_t)1 << 24) == RLT_OK, "field: %s", e.msg);
    CHECK(replay_plan(&rp, &p, &e, (int64_t)1 << 40, RLT_LOC_HOST, 4) == RLT_OK, "replay plan: %s", e.msg);
    plan_layout(&p);
    CHECK(p.arena_bytes[RLT_LOC_HOST] == UINT64_MAX, "2^64 bytes of replay saturate (got %llu, which wrapped before)",
          (unsigned long long)p.arena_bytes[RLT_LOC_HOST]);
    CHECK(plan_region_bytes(&p, "replay", -1) == UINT64_MAX, "the region sum saturates");
    CHECK(plan_commit(&p, &e, &bk, (uint64_t)512 << 20) == RLT_ENOFIT, "refused for the budget");
    /* With no budget the reservation itself is refused, not rounded to a few bytes. */
    plan_init(&p, 1);
    memset(&rp, 0, sizeof rp);
    CHECK(replay_add_obs_field(&rp, &e, "obs", RLT_DTYPE_U8, (uint64_t)1 << 24) == RLT_OK, "field");
    CHECK(replay_plan(&rp, &p, &e, (int64_t)1 << 40, RLT_LOC_HOST, 4) == RLT_OK, "replay plan");
    CHECK(plan_commit(&p, &e, &bk, 0) != RLT_OK, "a UINT64_MAX arena is not reserved");
    CHECK(p.base[RLT_LOC_HOST] == NULL, "nothing reserved");
    rlt_backend_close(&bk);
}

static void check_mem_alloc(void) {
    CHECK(rlt_mem_alloc(SIZE_MAX, 64) == NULL, "SIZE_MAX bytes: NULL");
    CHECK(rlt_mem_alloc(SIZE_MAX - 10, 4096) == NULL, "SIZE_MAX - 10 bytes: NULL (it rounded up to 0 before)");
    void *p = rlt_mem_alloc(100, 64);
    CHECK(p != NULL, "a small allocation still works");
    rlt_mem_free(p);
}

int main(void) {
    check_space_elems();
    check_agent_spaces();
    check_user_env_space();
    check_plan_saturates();
    check_mem_alloc();
    return test_summary("test_size_limits");
}
