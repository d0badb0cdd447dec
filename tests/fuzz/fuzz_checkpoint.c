/* fuzz_checkpoint.c: the checkpoint reader and the state loaders over arbitrary bytes. The bytes go into an
 * in-memory file (memfd; a temporary file where there is none), which the reader's API walks (open, find,
 * expect, read, read_range on every tensor) and rlt_trainer_resume loads into three small trainers: TD3 on
 * pendulum, DQN on cartpole (float frames) and on MinAtar Breakout (uint8 frames, a grid-indexing game
 * state). A trainer that accepts the file then takes one step (act, environment step, observe, update), so
 * a value the checks let through and the engine cannot take shows up as a crash here, not in a user's run.
 * Random bytes almost never carry valid CRCs, so every input is tried twice: as it is, and with both CRCs
 * recomputed (fuzz_fix_crcs), which lets mutated values reach the value checks. Nothing may crash, hang,
 * leak or read out of bounds. With RLT_LIBFUZZER this file is a libFuzzer target. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "checkpoint.h"
#include "env.h"
#include "fuzz_targets.h"
#include "rltrain.h"
#include "trainer.h"

/* The trainers' configs; the seed writer runs each for a few steps (train.total_steps set lower), and the
 * fuzz target loads into them with this total, so that the seeds load. Small networks and rings keep the
 * seed files under 64 KiB and each input fast. */
static const struct {
    const char *name, *yaml;
} configs[] = {
    {"pendulum_td3",
     "algo: td3\nseed: 1\ndevice: cpu\nenv: {name: pendulum}\n"
     "train: {total_steps: 1000000, start_steps: 10, batch_size: 4, eval_every: 0, eval_episodes: 1, progress_every_s: 0}\n"
     "td3: {actor_hidden: [8], critic_hidden: [8]}\nreplay: {capacity: 32}\ncheckpoint: {include_replay: true}\n"},
    {"cartpole_dqn",
     "algo: dqn\nseed: 2\ndevice: cpu\nenv: {name: cartpole}\n"
     "train: {total_steps: 1000000, batch_size: 4, eval_every: 0, eval_episodes: 1, progress_every_s: 0}\n"
     "dqn: {learning_starts: 10, train_freq: 1, gradient_steps: 1, target_update_every: 20}\n"
     "network: {hidden: [8], conv: none}\nreplay: {capacity: 32}\ncheckpoint: {include_replay: true}\n"},
    {"breakout_dqn",
     "algo: dqn\nseed: 3\ndevice: cpu\nenv: {name: minatar_breakout, max_episode_steps: 100}\n"
     "train: {total_steps: 1000000, batch_size: 4, eval_every: 0, eval_episodes: 1, progress_every_s: 0}\n"
     "dqn: {learning_starts: 10, train_freq: 1, gradient_steps: 1, target_update_every: 20}\n"
     "network: {hidden: [4], conv: none}\nreplay: {capacity: 32}\ncheckpoint: {include_replay: true}\n"},
};
#define N_TRAINERS ((int)(sizeof configs / sizeof configs[0]))
#define SEED_STEPS 60

static void quiet(void *user, int level, const char *message) {
    (void)user;
    (void)level;
    (void)message;
}

static rlt_trainer *make_trainer(int i, const char *out_dir, long total_steps) {
    rlt_config *cfg = NULL;
    rlt_trainer *tr = NULL;
    char set[700];
    if (rlt_config_init(&cfg) != RLT_OK) return NULL;
    int rc = rlt_config_load_string(cfg, configs[i].yaml, configs[i].name);
    snprintf(set, sizeof set, "out_dir=%s", out_dir);
    if (rc == RLT_OK) rc = rlt_config_set(cfg, set);
    snprintf(set, sizeof set, "train.total_steps=%ld", total_steps);
    if (rc == RLT_OK && total_steps > 0) rc = rlt_config_set(cfg, set);
    if (rc == RLT_OK) rc = rlt_trainer_init(cfg, &tr);
    if (rc != RLT_OK) {
        fprintf(stderr, "fuzz_checkpoint: trainer %s: %s\n", configs[i].name,
                tr ? rlt_trainer_errmsg(tr) : rlt_config_errmsg(cfg));
        rlt_trainer_free(tr);
        tr = NULL;
    }
    rlt_config_free(cfg);
    return tr;
}

/* ---- the input as a file ---------------------------------------------------------------------- */
static int file_fd = -1;
static char file_path[64];

static int put_file(const uint8_t *data, size_t size) {
    if (file_fd < 0) {
        file_fd = memfd_create("fuzz_checkpoint", MFD_CLOEXEC);
        if (file_fd >= 0) {
            snprintf(file_path, sizeof file_path, "/proc/self/fd/%d", file_fd);
            if (access(file_path, R_OK) != 0) {
                close(file_fd);
                file_fd = -1;
            }
        }
        if (file_fd < 0) {
            snprintf(file_path, sizeof file_path, "/tmp/fuzz_checkpoint_XXXXXX");
            file_fd = mkstemp(file_path);
            if (file_fd < 0) return -1;
        }
    }
    if (ftruncate(file_fd, 0) != 0) return -1;
    size_t done = 0;
    while (done < size) {
        ssize_t n = pwrite(file_fd, data + done, size - done, (off_t)done);
        if (n <= 0) return -1;
        done += (size_t)n;
    }
    return 0;
}

/* ---- the reader's own API --------------------------------------------------------------------- */
static ckpt_reader reader;
static unsigned char read_buf[1 << 20];

static void walk_reader(void) {
    rlt_err e;
    rlt_err_clear(&e);
    if (ckpt_reader_open(&reader, &e, file_path) != RLT_OK) return;
    size_t meta_len;
    (void)ckpt_reader_meta(&reader, &meta_len);
    for (int32_t i = 0; i < reader.n_tensors; i++) {
        ckpt_tensor_info t = reader.tensors[i];
        const ckpt_tensor_info *found = NULL;
        ckpt_reader_find(&reader, t.name, &found);
        ckpt_reader_expect(&reader, t.name, t.dtype, t.ndim, t.shape);
        int64_t other[CKPT_MAX_NDIM] = {1, 2, 3, 4};
        ckpt_reader_expect(&reader, t.name, RLT_DTYPE_F32, 2, other);
        if (t.bytes <= sizeof read_buf) ckpt_reader_read(&reader, t.name, read_buf, t.bytes);
        uint64_t k = t.bytes < 100 ? t.bytes : 100;
        ckpt_reader_read_range(&reader, t.name, t.bytes - k, read_buf, k);
        ckpt_reader_read_range(&reader, t.name, t.bytes, read_buf, 1); /* past the end: refused */
    }
    ckpt_reader_find(&reader, "no such tensor", NULL);
    ckpt_reader_close(&reader);
}

/* ---- the loaders ------------------------------------------------------------------------------ */
static rlt_trainer *trainers[N_TRAINERS];
static int initialised;

static void init_trainers(void) {
    if (initialised) return;
    initialised = 1;
    rlt_log_set_callback(quiet, NULL);
    for (int i = 0; i < N_TRAINERS; i++) trainers[i] = make_trainer(i, "/nonexistent/fuzz_checkpoint", 0);
}

/* One step of the loop (trainer.c's, without its outputs) on what was loaded. */
static void take_step(rlt_trainer *tr) {
    rlt_agent *ag = tr->agent;
    float r = 0.0f;
    uint8_t term = 0, trunc = 0;
    if (rlt_agent_act(ag, tr->obs, 1, 1, tr->action) != RLT_OK) return;
    if (rlt_env_step(&tr->envs[0], tr->action, tr->next_obs, &r, &term, &trunc) != RLT_OK) return;
    if (rlt_agent_observe(ag, tr->obs, tr->action, &r, tr->next_obs, &term, &trunc, 1) != RLT_OK) return;
    int32_t done = 0;
    rlt_agent_update(ag, &done);
    if (term || trunc) rlt_env_reset(&tr->envs[0], tr->obs);
}

static int load_all(const uint8_t *data, size_t size) {
    if (put_file(data, size) != 0) return 0;
    walk_reader();
    int accepted = 0;
    for (int i = 0; i < N_TRAINERS; i++) {
        if (!trainers[i] || rlt_trainer_resume(trainers[i], file_path) != RLT_OK) continue;
        accepted++;
        take_step(trainers[i]);
    }
    return accepted;
}

static uint64_t get64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

static void put32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

void fuzz_fix_crcs(uint8_t *b, size_t n) {
    if (n < 48 || memcmp(b, "RLTCKPT1", 8) != 0) return;
    uint64_t meta = get64(b + 24);
    if (meta > n - 48) return;
    uint64_t pos = 32 + meta;
    for (int k = 0; k <= CKPT_MAX_TENSORS && pos + 16 <= n; k++) {
        if (memcmp(b + pos, "RLTEND\0\0", 8) == 0) {
            put32(b + pos + 12, ckpt_crc32(0, b, (size_t)pos));
            return;
        }
        if (pos + 120 > n) return;
        uint64_t data = (pos + 120 + CKPT_DATA_ALIGN - 1) / CKPT_DATA_ALIGN * CKPT_DATA_ALIGN, bytes = get64(b + pos + 108);
        if (data > n || bytes > n - data) return;
        put32(b + pos + 116, ckpt_crc32(0, b + data, (size_t)bytes));
        pos = data + bytes;
    }
}

int fuzz_checkpoint_one(const uint8_t *data, size_t size) {
    init_trainers();
    int accepted = load_all(data, size);
    uint8_t *fixed = malloc(size ? size : 1);
    if (!fixed) return accepted;
    memcpy(fixed, data, size);
    fuzz_fix_crcs(fixed, size);
    if (memcmp(fixed, data, size) != 0) load_all(fixed, size);
    free(fixed);
    return accepted;
}

int fuzz_write_checkpoint_seeds(const char *dir, const char *work_dir) {
    rlt_log_set_callback(quiet, NULL);
    int failed = 0;
    for (int i = 0; i < N_TRAINERS; i++) {
        char out[600], src[700], dst[700];
        snprintf(out, sizeof out, "%s/%s", work_dir, configs[i].name);
        rlt_trainer *tr = make_trainer(i, out, SEED_STEPS);
        int rc = tr ? rlt_trainer_run(tr, NULL, NULL) : RLT_ERUNTIME;
        if (tr && rc != RLT_OK) fprintf(stderr, "fuzz_checkpoint: run %s: %s\n", configs[i].name, rlt_trainer_errmsg(tr));
        rlt_trainer_free(tr);
        snprintf(src, sizeof src, "%s/final.ckpt", out);
        snprintf(dst, sizeof dst, "%s/%s.ckpt", dir, configs[i].name);
        FILE *in = rc == RLT_OK ? fopen(src, "rb") : NULL, *to = in ? fopen(dst, "wb") : NULL;
        size_t n, total = 0;
        while (to && (n = fread(read_buf, 1, sizeof read_buf, in)) > 0) total += fwrite(read_buf, 1, n, to);
        if (in) fclose(in);
        if (!to || fclose(to) != 0 || total == 0) {
            fprintf(stderr, "fuzz_checkpoint: could not write %s\n", dst);
            failed = 1;
        }
    }
    return failed;
}

#ifdef RLT_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_checkpoint_one(data, size);
    return 0;
}
#endif
