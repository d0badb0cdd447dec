/* embed_trainer.c: the other way to embed rltrain: the simulator hands rltrain an environment (reset and
 * step callbacks) and the trainer drives it, with its evaluations, outputs and checkpoints, through
 * rlt_trainer_init_env and rlt_trainer_run. The simulator is a point mass on a line (written here, not
 * part of rltrain) that must be held near the origin; leaving the track ends an episode as terminated,
 * the 100-step limit as truncated. Build it like embed_pendulum.c:
 *
 *     cc embed_trainer.c $(pkg-config --cflags --libs rltrain) -lm -o embed_trainer
 *
 * Usage: embed_trainer [env_steps] [out_dir]   (defaults 8000 and runs/embed_trainer). Prints an
 * evaluation line every 1000 steps and the final evaluation; doing nothing scores about 35, a trained
 * policy above 95 (that takes about 4000 steps). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rltrain.h>

/* ---- the simulator: not part of rltrain ---- */
typedef struct { double x, v; uint64_t rng; } point_mass;

static double pm_rand(point_mass *p) { /* xorshift64*: the simulator's own generator */
    p->rng ^= p->rng >> 12; p->rng ^= p->rng << 25; p->rng ^= p->rng >> 27;
    return (double)((p->rng * 2685821657736338717ull) >> 11) / 9007199254740992.0;
}

/* ---- the callbacks: two instances, 0 for training and 1 for evaluation ---- */
static int pm_reset(void *user, int32_t instance, uint64_t seed, void *obs) {
    point_mass *p = &((point_mass *)user)[instance];
    p->rng = seed | 1; /* rltrain's per-episode seed makes the run repeatable */
    p->x = 2.0 * pm_rand(p) - 1.0;
    p->v = pm_rand(p) - 0.5;
    float *o = obs;
    o[0] = (float)p->x;
    o[1] = (float)p->v;
    return 0;
}

static int pm_step(void *user, int32_t instance, const void *action, void *obs, float *reward, uint8_t *terminated,
                   uint8_t *truncated) {
    (void)truncated; /* the trainer applies the time limit */
    point_mass *p = &((point_mass *)user)[instance];
    double u = ((const float *)action)[0]; /* within [-2, 2]: the trainer scales to the bounds */
    p->v += 0.1 * u;
    p->x += 0.1 * p->v;
    float *o = obs;
    o[0] = (float)p->x;
    o[1] = (float)p->v;
    *terminated = fabs(p->x) > 2.0;
    *reward = *terminated ? 0.0f : (float)(1.0 - 0.5 * p->x * p->x - 0.01 * u * u);
    return 0;
}

/* Optional: with these, checkpoints hold the simulator's state and rlt_trainer_resume works. */
static int pm_save(void *user, int32_t instance, void *state) {
    memcpy(state, &((point_mass *)user)[instance], sizeof(point_mass));
    return 0;
}
static int pm_load(void *user, int32_t instance, const void *state) {
    memcpy(&((point_mass *)user)[instance], state, sizeof(point_mass));
    return 0;
}

static int on_progress(void *user, const rlt_progress *p) {
    (void)user;
    if (p->is_eval) printf("step %6lld  eval %7.2f  best %7.2f\n", (long long)p->env_steps, p->last_eval_return, p->best_eval_return);
    return 0;
}

int main(int argc, char **argv) {
    long steps = argc > 1 ? strtol(argv[1], NULL, 10) : 8000;
    const char *out_dir = argc > 2 ? argv[2] : "runs/embed_trainer";
    if (steps < 1000) steps = 1000;
    printf("rltrain %s\n", rlt_version_string());

    rlt_config *cfg;
    if (rlt_config_init(&cfg) != RLT_OK) return 1;
    char yaml[512];
    snprintf(yaml, sizeof yaml,
             "algo: td3\nseed: 7\ndevice: cpu\n"
             "train: {total_steps: %ld, start_steps: 1000, batch_size: 100, eval_every: 1000, eval_episodes: 10}\n"
             "td3: {actor_hidden: [64, 64], critic_hidden: [64, 64]}\nreplay: {capacity: 20000}\n"
             "memory: {budget_mb: 64}\nout_dir: %s\n", steps, out_dir);
    int rc = rlt_config_load_string(cfg, yaml, "embed_trainer.yaml");
    if (rc != RLT_OK) {
        fprintf(stderr, "config: %s\n", rlt_config_errmsg(cfg));
        return 1;
    }

    point_mass sims[2] = {{0}};
    static const float low[1] = {-2.0f}, high[1] = {2.0f};
    rlt_env_callbacks env;
    memset(&env, 0, sizeof env);
    env.struct_size = sizeof env; /* the ABI check: later versions only append fields */
    env.name = "point_mass";
    env.obs = (rlt_space){RLT_SPACE_BOX, RLT_DTYPE_F32, 1, {2, 0, 0, 0}, 0, NULL, NULL};
    env.act = (rlt_space){RLT_SPACE_BOX, RLT_DTYPE_F32, 1, {1, 0, 0, 0}, 0, low, high};
    env.max_episode_steps = 100;
    env.state_bytes = (int32_t)sizeof(point_mass);
    env.user = sims;
    env.reset = pm_reset;
    env.step = pm_step;
    env.save_state = pm_save;
    env.load_state = pm_load;

    rlt_trainer *tr;
    rc = rlt_trainer_init_env(cfg, &env, &tr);
    if (rc == RLT_OK) rc = rlt_trainer_run(tr, on_progress, NULL);
    if (rc != RLT_OK) {
        fprintf(stderr, "%s: %s\n", rlt_status_name(rc), rlt_trainer_errmsg(tr));
        rlt_trainer_free(tr);
        rlt_config_free(cfg);
        return 1;
    }
    rlt_progress p;
    rlt_trainer_progress(tr, &p);
    printf("%lld env steps, %lld episodes, %lld updates, %llu allocations after init; outputs in %s\n",
           (long long)p.env_steps, (long long)p.episodes, (long long)p.updates,
           (unsigned long long)rlt_agent_allocations_after_init(rlt_trainer_agent(tr)), rlt_trainer_out_dir(tr));
    printf("final return %.2f (mean of 10 deterministic episodes)\n", p.last_eval_return);
    rlt_trainer_free(tr);
    rlt_config_free(cfg);
    return 0;
}
