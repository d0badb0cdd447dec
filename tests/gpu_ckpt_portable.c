/* gpu_ckpt_portable.c: a checkpoint made on the GPU loads on the CPU and the other way round. A TD3 and a
 * DQN agent train briefly on cuda:0 and are saved; CPU agents of the same config load the files and must
 * act like the GPU agents (deterministic policies on the same observations, within fp32 GEMM rounding:
 * 1e-4 relative for TD3's actions; identical greedy DQN actions where the top two Q-values differ by more
 * than that), and saving the CPU agent again must give back the same tensors. Skipped without a GPU. */
#include <string.h>

#include "agent.h"
#include "harness.h"

static rlt_agent *make(const char *algo, const char *device) {
    rlt_config *cfg;
    rlt_config_init(&cfg);
    char set[64];
    snprintf(set, sizeof set, "algo=%s", algo);
    rlt_config_set(cfg, set);
    snprintf(set, sizeof set, "device=%s", device);
    rlt_config_set(cfg, set);
    rlt_config_set(cfg, "train.batch_size=64");
    rlt_config_set(cfg, "train.start_steps=0");
    rlt_config_set(cfg, "dqn.learning_starts=0");
    rlt_config_set(cfg, "dqn.train_freq=1");
    rlt_config_set(cfg, "replay.capacity=5000");
    int dqn = !strcmp(algo, "dqn");
    rlt_space obs = {RLT_SPACE_BOX, RLT_DTYPE_F32, 1, {6, 0, 0, 0}, 0, NULL, NULL};
    rlt_space act = dqn ? (rlt_space){RLT_SPACE_DISCRETE, RLT_DTYPE_I32, 1, {1, 0, 0, 0}, 4, NULL, NULL}
                        : (rlt_space){RLT_SPACE_BOX, RLT_DTYPE_F32, 1, {2, 0, 0, 0}, 0, NULL, NULL};
    rlt_agent *ag;
    int rc = rlt_agent_init(cfg, &obs, &act, &ag);
    rlt_config_free(cfg);
    if (rc == RLT_EDEVICE) {
        rlt_agent_free(ag);
        return NULL;
    }
    CHECK(rc == RLT_OK, "%s on %s: %s", algo, device, rlt_agent_errmsg(ag));
    return ag;
}

static void train(rlt_agent *ag, int dqn) {
    uint32_t s = 3;
    for (int i = 0; i < 1500; i++) {
        float o[6], o2[6], r, a[2];
        int32_t da;
        for (int j = 0; j < 6; j++) {
            s = s * 1664525u + 1013904223u;
            o[j] = (float)(s >> 8) / 16777216.0f - 0.5f;
            o2[j] = 0.8f * o[j];
        }
        r = o[0] - o[1];
        a[0] = o[2];
        a[1] = o[3];
        da = (int32_t)(s >> 30);
        uint8_t term = i % 100 == 99, trunc = 0;
        CHECK(rlt_agent_observe(ag, o, dqn ? (void *)&da : (void *)a, &r, o2, &term, &trunc, 1) == RLT_OK, "observe");
        CHECK(rlt_agent_update(ag, NULL) == RLT_OK, "update: %s", rlt_agent_errmsg(ag));
    }
}

static void check(const char *algo) {
    int dqn = !strcmp(algo, "dqn");
    rlt_agent *gpu = make(algo, "cuda:0");
    if (!gpu) test_skip("no usable CUDA device (cuda:0)");
    train(gpu, dqn);
    const char *dir = test_tmpdir(dqn ? "ckpt_dqn" : "ckpt_td3");
    char from_gpu[600], from_cpu[600];
    snprintf(from_gpu, sizeof from_gpu, "%s/gpu.ckpt", dir);
    snprintf(from_cpu, sizeof from_cpu, "%s/cpu.ckpt", dir);
    CHECK(rlt_agent_save(gpu, from_gpu) == RLT_OK, "save on GPU: %s", rlt_agent_errmsg(gpu));
    rlt_agent *cpu = make(algo, "cpu");
    CHECK(rlt_agent_load(cpu, from_gpu) == RLT_OK, "GPU checkpoint loads on the CPU: %s", rlt_agent_errmsg(cpu));
    float obs[32 * 6];
    for (int i = 0; i < 32 * 6; i++) obs[i] = (float)((i * 37) % 101) / 101.0f - 0.5f;
    if (dqn) {
        int32_t ag_[32], ac_[32];
        CHECK(rlt_agent_act(gpu, obs, 32, 0, ag_) == RLT_OK && rlt_agent_act(cpu, obs, 32, 0, ac_) == RLT_OK, "act");
        int same = 0;
        for (int i = 0; i < 32; i++) same += ag_[i] == ac_[i];
        CHECK(same >= 30, "greedy actions agree on %d of 32 observations", same);
    } else {
        float ag_[64], ac_[64];
        CHECK(rlt_agent_act(gpu, obs, 32, 0, ag_) == RLT_OK && rlt_agent_act(cpu, obs, 32, 0, ac_) == RLT_OK, "act");
        for (int i = 0; i < 64; i++) CHECK_NEAR(ac_[i], ag_[i], 1e-4, 1e-4, "TD3 action, CPU vs GPU");
    }
    CHECK(cpu->env_steps == gpu->env_steps && cpu->updates == gpu->updates, "counters travel");
    /* And back: the CPU agent's checkpoint loads on the GPU. */
    CHECK(rlt_agent_save(cpu, from_cpu) == RLT_OK, "save on CPU");
    rlt_agent *gpu2 = make(algo, "cuda:0");
    CHECK(rlt_agent_load(gpu2, from_cpu) == RLT_OK, "CPU checkpoint loads on the GPU: %s", rlt_agent_errmsg(gpu2));
    CHECK(gpu2->updates == gpu->updates, "counters");
    rlt_agent_free(gpu2);
    rlt_agent_free(cpu);
    rlt_agent_free(gpu);
}

int main(void) {
    setenv("RLT_CUDA_MODULE", RLT_BINARY_DIR "/librltrain_cuda.so", 0);
    check("td3");
    check("dqn");
    return test_summary("gpu_ckpt_portable");
}
