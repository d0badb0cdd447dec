/* test_obs_scale.c: DQN scales uint8 observations by 1 / the space's largest value (rlt_space.high, one value
 * per channel; NULL means 255). 0/1 planes such as MinAtar's must reach the network as 0 and 1, as MinAtar's
 * own DQN feeds them: a uint8 agent whose space declares high = 1 must act exactly as a float32 agent given the
 * same 0/1 values, and one without high (1/255) must not. */
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "rltrain.h"

#define D 16
#define N_OBS 256

static rlt_agent *make_agent(rlt_config *cfg, int32_t dtype, const float *high) {
    rlt_space obs = {RLT_SPACE_BOX, dtype, 1, {D, 0, 0, 0}, 0, NULL, high};
    rlt_space act = {RLT_SPACE_DISCRETE, RLT_DTYPE_I32, 1, {1, 0, 0, 0}, 4, NULL, NULL};
    rlt_agent *ag = NULL;
    int rc = rlt_agent_init(cfg, &obs, &act, &ag);
    CHECK(rc == RLT_OK, "init: %s", ag ? rlt_agent_errmsg(ag) : rlt_strerror(rc));
    return ag;
}

/* The same for a dict observation's u8 part: network.inputs[p].high sets its scale (255 when not given). */
static rlt_agent *dict_agent(const char *part, rlt_config **cfg_out) {
    char yaml[512];
    snprintf(yaml, sizeof yaml,
             "algo: dqn\nseed: 5\ndqn: {eval_epsilon: 0.0}\nreplay: {capacity: 1000}\ntrain: {batch_size: 32}\n"
             "network: {hidden: [64, 64], conv: none, inputs: [%s]}\n", part);
    rlt_config *cfg;
    rlt_config_init(&cfg);
    CHECK(rlt_config_load_string(cfg, yaml, "dict_scale.yaml") == RLT_OK, "load: %s", rlt_config_errmsg(cfg));
    rlt_space obs, act = {RLT_SPACE_DISCRETE, RLT_DTYPE_I32, 1, {1, 0, 0, 0}, 4, NULL, NULL};
    CHECK(rlt_config_dict_space(cfg, &obs) == RLT_OK, "dict space");
    rlt_agent *ag = NULL;
    CHECK(rlt_agent_init(cfg, &obs, &act, &ag) == RLT_OK, "init: %s", ag ? rlt_agent_errmsg(ag) : "");
    *cfg_out = cfg;
    return ag;
}

static void dict_part_scale(void) {
    rlt_config *c1, *c2, *c3;
    rlt_agent *f32 = dict_agent("{name: planes, shape: [16], dtype: f32}", &c1);
    rlt_agent *planes = dict_agent("{name: planes, shape: [16], dtype: u8, high: 1}", &c2);
    rlt_agent *frames = dict_agent("{name: planes, shape: [16], dtype: u8}", &c3);
    char dump[4096];
    rlt_config_dump(c2, dump, sizeof dump);
    CHECK(strstr(dump, "high: 1") != NULL, "the dump keeps high: 1");
    rlt_config_dump(c3, dump, sizeof dump);
    CHECK(strstr(dump, "high") == NULL, "no high written when not given (older dumps and checkpoints unchanged)");
    uint8_t ob8[N_OBS][D];
    float obf[N_OBS][D];
    uint64_t s = 777;
    for (int k = 0; k < N_OBS; k++)
        for (int i = 0; i < D; i++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            ob8[k][i] = (uint8_t)(s >> 63);
            obf[k][i] = ob8[k][i];
        }
    int32_t a_f32[N_OBS], a_planes[N_OBS], a_frames[N_OBS];
    int same_planes = 0, same_frames = 0;
    if (f32 && planes && frames) {
        CHECK(rlt_agent_act(f32, obf, N_OBS, 0, a_f32) == RLT_OK, "act f32");
        CHECK(rlt_agent_act(planes, ob8, N_OBS, 0, a_planes) == RLT_OK, "act u8 high 1");
        CHECK(rlt_agent_act(frames, ob8, N_OBS, 0, a_frames) == RLT_OK, "act u8");
        for (int k = 0; k < N_OBS; k++) same_planes += a_planes[k] == a_f32[k], same_frames += a_frames[k] == a_f32[k];
    }
    CHECK(same_planes == N_OBS, "dict part with high 1 acts as the float part (%d of %d)", same_planes, N_OBS);
    CHECK(same_frames < N_OBS, "dict part without high is scaled by 1/255 (%d of %d same)", same_frames, N_OBS);
    rlt_agent_free(f32), rlt_agent_free(planes), rlt_agent_free(frames);
    rlt_config_free(c1), rlt_config_free(c2), rlt_config_free(c3);
    /* Refusals: out of range, or on a float part. */
    const char *bad[] = {"high: 0", "high: 256", "high: x"};
    for (int i = 0; i < 3; i++) {
        char yaml[256];
        snprintf(yaml, sizeof yaml, "algo: dqn\nnetwork: {inputs: [{name: p, shape: [4], dtype: u8, %s}]}\n", bad[i]);
        rlt_config *cfg;
        rlt_config_init(&cfg);
        CHECK(rlt_config_load_string(cfg, yaml, "bad.yaml") == RLT_ECONFIG, "%s refused", bad[i]);
        CHECK(strstr(rlt_config_errmsg(cfg), "high") != NULL, "message names the key: %s", rlt_config_errmsg(cfg));
        rlt_config_free(cfg);
    }
    rlt_config *cfg;
    rlt_config_init(&cfg);
    CHECK(rlt_config_load_string(cfg, "algo: dqn\nnetwork: {inputs: [{name: p, shape: [4], dtype: f32, high: 1}]}\n",
                                 "f32high.yaml") != RLT_OK || rlt_config_validate(cfg) == RLT_ECONFIG, "high on f32 refused");
    rlt_config_free(cfg);
}

int main(void) {
    dict_part_scale();
    rlt_config *cfg;
    CHECK(rlt_config_init(&cfg) == RLT_OK, "config");
    CHECK(rlt_config_load_string(cfg,
                                 "algo: dqn\nseed: 5\ndqn: {eval_epsilon: 0.0}\nnetwork: {hidden: [64, 64], conv: none}\n"
                                 "replay: {capacity: 1000}\ntrain: {batch_size: 32}\n",
                                 "obs_scale.yaml") == RLT_OK, "load: %s", rlt_config_errmsg(cfg));
    float ones[D], bad[D];
    for (int i = 0; i < D; i++) ones[i] = 1, bad[i] = 1;
    bad[3] = 300; /* not a uint8 value */
    rlt_agent *f32 = make_agent(cfg, RLT_DTYPE_F32, NULL);
    rlt_agent *u8_planes = make_agent(cfg, RLT_DTYPE_U8, ones);
    rlt_agent *u8_frames = make_agent(cfg, RLT_DTYPE_U8, NULL);

    uint8_t ob8[N_OBS][D];
    float obf[N_OBS][D];
    uint64_t s = 12345;
    for (int k = 0; k < N_OBS; k++)
        for (int i = 0; i < D; i++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            ob8[k][i] = (uint8_t)(s >> 63);
            obf[k][i] = ob8[k][i];
        }
    int32_t a_f32[N_OBS], a_planes[N_OBS], a_frames[N_OBS];
    CHECK(rlt_agent_act(f32, obf, N_OBS, 0, a_f32) == RLT_OK, "act f32");
    CHECK(rlt_agent_act(u8_planes, ob8, N_OBS, 0, a_planes) == RLT_OK, "act u8 high 1");
    CHECK(rlt_agent_act(u8_frames, ob8, N_OBS, 0, a_frames) == RLT_OK, "act u8 high 255");
    int same_planes = 0, same_frames = 0, distinct_f32 = 0;
    for (int k = 0; k < N_OBS; k++) {
        same_planes += a_planes[k] == a_f32[k];
        same_frames += a_frames[k] == a_f32[k];
        distinct_f32 += a_f32[k] != a_f32[0];
    }
    CHECK(distinct_f32 > 0, "the float agent's greedy action depends on the observation (else nothing is tested)");
    CHECK(same_planes == N_OBS, "high = 1: the uint8 agent acts as the float agent on 0/1 values (%d of %d)",
          same_planes, N_OBS);
    CHECK(same_frames < N_OBS, "no high: frames are scaled by 1/255, so some greedy actions differ (%d of %d same)",
          same_frames, N_OBS);

    rlt_space obs_bad = {RLT_SPACE_BOX, RLT_DTYPE_U8, 1, {D, 0, 0, 0}, 0, NULL, bad};
    rlt_space act = {RLT_SPACE_DISCRETE, RLT_DTYPE_I32, 1, {1, 0, 0, 0}, 4, NULL, NULL};
    rlt_agent *ag = NULL;
    CHECK(rlt_agent_init(cfg, &obs_bad, &act, &ag) == RLT_EINVAL, "high above 255 refused");
    CHECK(ag && strstr(rlt_agent_errmsg(ag), "high[3] = 300") != NULL, "message names the channel: %s",
          ag ? rlt_agent_errmsg(ag) : "(none)");
    rlt_agent_free(ag);
    rlt_agent_free(f32);
    rlt_agent_free(u8_planes);
    rlt_agent_free(u8_frames);
    rlt_config_free(cfg);
    return test_summary("test_obs_scale");
}
