/* test_ckpt_validate.c: a checkpoint is untrusted input, so every value in it is checked before anything is
 * loaded. Short runs of TD3 on pendulum and DQN on cartpole and MinAtar Breakout (rings that wrap, episodes
 * that end) write valid checkpoints; then one value at a time is altered (a negative counter, an RNG stream,
 * a NaN parameter, a negative Adam second moment, replay actions, flags and `next` slots out of range, an
 * environment state out of its range, a NaN observation, inconsistent loop counters) and both CRCs are
 * recomputed, so only the value checks can catch the edit. Each must be refused with RLT_ECHECKPOINT and a
 * message naming the file and the tensor (by rlt_trainer_resume, and by rlt_agent_load for the agent's own
 * tensors), and must leave the trainer as it was (its saved state is byte-identical before and after all the
 * refusals). Every tensor's header altered to another dtype of the same element size, or another shape of the
 * same element count (CRCs recomputed), is refused too. Before the checks, several of these files crashed
 * the process (replay.next and the Breakout ball's position index memory). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "harness.h"
#include "rltrain.h"
#include "checkpoint.h"
#include "envs/envs_internal.h"

#define MAX_FILE (8u << 20)

/* agent.host's int64 words (train/agent_io.c) and trainer.state's (train/trainer_ckpt.c). */
enum { H_ENV_STEPS, H_UPDATES, H_REPLAY_POS, H_REPLAY_SIZE, H_DQN_ADVANCES, H_DQN_PREV_ENDED, H_SEED, H_CTR, H_STREAM };
enum {
    TS_ENV_STEPS, TS_EPISODES, TS_EP_LEN, TS_ENV_T, TS_ENV_SEED, TS_ENV_CTR, TS_ENV_STREAM, TS_EVAL_SEED, TS_EVAL_CTR,
    TS_EVAL_STREAM, TS_EP_RET, TS_LAST_EVAL, TS_BEST_EVAL, TS_LAST_EP_RET, TS_ENV_MAX_STEPS
};

static unsigned char orig[MAX_FILE], work[MAX_FILE], before[MAX_FILE], after[MAX_FILE];
static long orig_n;

static uint64_t get64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

static void put32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* Where a tensor's record and data are (the layout of checkpoint.h), or -1. */
typedef struct where {
    long rec, data, bytes;
} where;

static int find(const unsigned char *buf, long n, const char *name, where *w) {
    long pos = 32 + (long)get64(buf + 24);
    while (pos + 16 <= n && memcmp(buf + pos, "RLTEND", 6) != 0) {
        long data = (pos + 120 + 63) / 64 * 64, bytes = (long)get64(buf + pos + 108);
        if (strcmp((const char *)buf + pos + 4, name) == 0) {
            w->rec = pos;
            w->data = data;
            w->bytes = bytes;
            return 0;
        }
        pos = data + bytes;
    }
    return -1;
}

/* Recomputes the tensor's CRC and the whole-file CRC after an edit of its data. */
static void refresh_crcs(unsigned char *buf, long n, const where *w) {
    put32(buf + w->rec + 116, ckpt_crc32(0, buf + w->data, (size_t)w->bytes));
    put32(buf + n - 4, ckpt_crc32(0, buf, (size_t)n - 16));
}

/* The first replay row whose transition is valid (DQN), so edits land on rows the sampler can draw. */
static long first_valid_row(void) {
    where v;
    if (find(orig, orig_n, "replay.valid", &v) != 0) return 0;
    for (long i = 0; i < v.bytes; i++)
        if (orig[v.data + i] == 1) return i;
    return 0;
}

enum { K_I64, K_F64, K_F32, K_I32, K_U8 };
typedef struct edit {
    const char *tensor;
    long offset; /* bytes into the tensor; with row_of_valid, bytes into the first valid row */
    int kind;
    double value;
    const char *want; /* also in the message */
    int row_of_valid; /* 0, or the row size in bytes to offset by the first valid row */
} edit;

static void apply(unsigned char *buf, long at, int kind, double value) {
    if (kind == K_I64) {
        int64_t v = (int64_t)value;
        memcpy(buf + at, &v, 8);
    } else if (kind == K_F64) {
        memcpy(buf + at, &value, 8);
    } else if (kind == K_F32) {
        float v = (float)value;
        memcpy(buf + at, &v, 4);
    } else if (kind == K_I32) {
        int32_t v = (int32_t)value;
        memcpy(buf + at, &v, 4);
    } else {
        buf[at] = (unsigned char)value;
    }
}

static int try_resume(rlt_trainer *tr, const char *path, int want_rc, const char *tensor, const char *want) {
    int rc = rlt_trainer_resume(tr, path);
    const char *msg = rlt_trainer_errmsg(tr);
    int ok = rc == want_rc &&
             (rc == RLT_OK || (strstr(msg, path) && strstr(msg, tensor) && (!want || strstr(msg, want))));
    CHECK(ok, "resume %s: want %s naming '%s' and '%s', got %s: %s", path, rlt_status_name(want_rc), tensor,
          want ? want : "", rlt_status_name(rc), msg);
    if (rc != RLT_OK && ok) printf("  refused: %s\n", msg);
    return rc;
}

static rlt_config *make_config(const char *yaml, const char *out_dir) {
    rlt_config *cfg;
    rlt_config_init(&cfg);
    CHECK(rlt_config_load_string(cfg, yaml, "ckpt_validate.yaml") == RLT_OK, "config: %s", rlt_config_errmsg(cfg));
    char set[600];
    snprintf(set, sizeof set, "out_dir=%s", out_dir);
    CHECK(rlt_config_set(cfg, set) == RLT_OK, "out_dir");
    return cfg;
}

static void run_case(const char *dir, const char *tag, const char *yaml, const edit *edits, int n_edits) {
    char out[600], ckpt[700], path[700], state_a[700], state_b[700];
    printf("%s\n", tag);
    /* A short run writes final.ckpt. */
    snprintf(out, sizeof out, "%s/%s_run", dir, tag);
    rlt_config *cfg = make_config(yaml, out);
    rlt_trainer *tr = NULL;
    CHECK(rlt_trainer_init(cfg, &tr) == RLT_OK, "%s init: %s", tag, rlt_trainer_errmsg(tr));
    CHECK(rlt_trainer_run(tr, NULL, NULL) == RLT_OK, "%s run: %s", tag, rlt_trainer_errmsg(tr));
    rlt_trainer_free(tr);
    rlt_config_free(cfg);
    snprintf(ckpt, sizeof ckpt, "%s/final.ckpt", out);
    orig_n = test_read_file(ckpt, orig, sizeof orig);
    CHECK(orig_n > 0 && orig_n < (long)sizeof orig, "%s: final.ckpt read (%ld bytes)", tag, orig_n);
    if (orig_n <= 0 || orig_n >= (long)sizeof orig) return;

    /* A fresh trainer takes every altered file; none may change it. */
    snprintf(out, sizeof out, "%s/%s_load", dir, tag);
    cfg = make_config(yaml, out);
    CHECK(rlt_trainer_init(cfg, &tr) == RLT_OK, "%s init: %s", tag, rlt_trainer_errmsg(tr));
    rlt_agent *ag = rlt_trainer_agent(tr);
    snprintf(state_a, sizeof state_a, "%s/%s_before.ckpt", dir, tag);
    snprintf(state_b, sizeof state_b, "%s/%s_after.ckpt", dir, tag);
    CHECK(rlt_agent_save(ag, state_a) == RLT_OK, "save before: %s", rlt_agent_errmsg(ag));

    long row_valid = first_valid_row();
    for (int i = 0; i < n_edits; i++) {
        const edit *ed = &edits[i];
        where w;
        CHECK(find(orig, orig_n, ed->tensor, &w) == 0, "%s: tensor %s is in the file", tag, ed->tensor);
        long at = ed->offset + (ed->row_of_valid ? row_valid * ed->row_of_valid : 0);
        if (at < 0 || at >= w.bytes) {
            CHECK(0, "%s: edit %d is inside tensor %s (%ld of %ld bytes)", tag, i, ed->tensor, at, w.bytes);
            continue;
        }
        memcpy(work, orig, (size_t)orig_n);
        apply(work, w.data + at, ed->kind, ed->value);
        refresh_crcs(work, orig_n, &w);
        snprintf(path, sizeof path, "%s/%s_edit%02d.ckpt", dir, tag, i);
        CHECK(test_write_file(path, work, (size_t)orig_n) == 0, "write %s", path);
        try_resume(tr, path, RLT_ECHECKPOINT, ed->tensor, ed->want);
        /* The agent's own tensors are refused by the agent API's load too. */
        if (strncmp(ed->tensor, "trainer.", 8) != 0) {
            int rc = rlt_agent_load(ag, path);
            const char *msg = rlt_agent_errmsg(ag);
            CHECK(rc == RLT_ECHECKPOINT && strstr(msg, path) && strstr(msg, ed->tensor),
                  "rlt_agent_load %s: want RLT_ECHECKPOINT naming '%s', got %s: %s", path, ed->tensor,
                  rlt_status_name(rc), msg);
        }
    }
    /* Headers that declare another dtype (of the same element size) or another shape (the same number of
     * elements): the size alone matches, the meaning does not. Every tensor of the file, each refused. */
    int n_headers = 0, refused = 0;
    for (long pos = 32 + (long)get64(orig + 24); pos + 16 <= orig_n && memcmp(orig + pos, "RLTEND", 6) != 0;) {
        long data = (pos + 120 + 63) / 64 * 64, bytes = (long)get64(orig + pos + 108);
        const char *name = (const char *)orig + pos + 4;
        uint32_t dtype = (uint32_t)orig[pos + 68], ndim = (uint32_t)orig[pos + 72];
        for (int kind = 0; kind < 2 && bytes > 0; kind++) {
            memcpy(work, orig, (size_t)orig_n);
            if (kind == 0) {
                static const int32_t partner[] = {RLT_DTYPE_I32, -1, RLT_DTYPE_F32, RLT_DTYPE_BF16, RLT_DTYPE_F16, -1};
                if (dtype > 5 || partner[dtype] < 0) continue;
                put32(work + pos + 68, (uint32_t)partner[dtype]);
            } else if (ndim == 1) { /* [n] as [1, n] */
                put32(work + pos + 72, 2);
                memcpy(work + pos + 84, orig + pos + 76, 8);
                uint64_t one = 1;
                memcpy(work + pos + 76, &one, 8);
            } else if (ndim == 2) { /* [a, b] as [a * b] */
                uint64_t n = get64(orig + pos + 76) * get64(orig + pos + 84), zero = 0;
                put32(work + pos + 72, 1);
                memcpy(work + pos + 76, &n, 8);
                memcpy(work + pos + 84, &zero, 8);
            } else {
                continue;
            }
            put32(work + orig_n - 4, ckpt_crc32(0, work, (size_t)orig_n - 16));
            snprintf(path, sizeof path, "%s/%s_header%02d.ckpt", dir, tag, n_headers);
            CHECK(test_write_file(path, work, (size_t)orig_n) == 0, "write %s", path);
            n_headers++;
            int rc = rlt_trainer_resume(tr, path);
            const char *msg = rlt_trainer_errmsg(tr);
            /* A replay tensor may be named as its field ("replay field 'action'"). */
            int ok = rc == RLT_ECHECKPOINT && (strstr(msg, name) || (!strncmp(name, "replay.", 7) && strstr(msg, name + 7)));
            refused += ok;
            CHECK(ok, "%s: tensor '%s' with another %s: want RLT_ECHECKPOINT naming it, got %s: %s", tag, name,
                  kind == 0 ? "dtype" : "shape", rlt_status_name(rc), msg);
        }
        pos = data + bytes;
    }
    printf("  %d of %d altered tensor headers refused\n", refused, n_headers);
    CHECK(n_headers >= 10, "%s: the headers were altered (%d)", tag, n_headers);

    CHECK(rlt_agent_save(ag, state_b) == RLT_OK, "save after: %s", rlt_agent_errmsg(ag));
    long na = test_read_file(state_a, before, sizeof before), nb = test_read_file(state_b, after, sizeof after);
    CHECK(na > 0 && na == nb && memcmp(before, after, (size_t)na) == 0,
          "%s: refused checkpoints changed nothing (%ld vs %ld bytes)", tag, na, nb);

    /* The untouched file, with its CRCs recomputed, loads. */
    where w;
    if (find(orig, orig_n, "agent.host", &w) == 0) {
        memcpy(work, orig, (size_t)orig_n);
        refresh_crcs(work, orig_n, &w);
        snprintf(path, sizeof path, "%s/%s_same.ckpt", dir, tag);
        test_write_file(path, work, (size_t)orig_n);
        try_resume(tr, path, RLT_OK, "", NULL);
    }
    rlt_trainer_free(tr);
    rlt_config_free(cfg);
}

#define F64_AT(i) ((long)(i) * 8)

int main(void) {
    const char *dir = test_tmpdir("ckpt_validate");
    CHECK(dir != NULL, "tmpdir");
    if (!dir) return test_summary("test_ckpt_validate");

    /* TD3 on pendulum: 300 steps into a 256-row replay (it wraps), one finished episode, a final evaluation. */
    static const char td3_yaml[] =
        "algo: td3\nseed: 3\nenv: {name: pendulum}\ndevice: cpu\n"
        "train: {total_steps: 300, start_steps: 100, batch_size: 16, eval_every: 0, eval_episodes: 1,"
        " progress_every_s: 0}\n"
        "td3: {actor_hidden: [16], critic_hidden: [16]}\nreplay: {capacity: 256}\n"
        "checkpoint: {include_replay: true}\n";
    static const edit td3_edits[] = {
        {"agent.host", F64_AT(H_ENV_STEPS), K_I64, -1, "env_steps", 0},
        {"agent.host", F64_AT(H_UPDATES), K_I64, -3, "updates", 0},
        {"agent.host", F64_AT(H_REPLAY_POS), K_I64, 256, "replay", 0},
        {"agent.host", F64_AT(H_REPLAY_SIZE), K_I64, -5, "replay", 0},
        {"agent.host", F64_AT(H_STREAM), K_I64, 99, "stream", 0},
        {"params", 4 * 10, K_F32, NAN, "nan", 0},
        {"target", 4 * 3, K_F32, INFINITY, "inf", 0},
        {"adam_m", 4 * 7, K_F32, -NAN, "nan", 0},
        {"adam_v", 4 * 5, K_F32, -0.25, "-0.25", 0},
        {"counters", 8 * 1, K_I64, -1, "counters", 0},
        {"counters", 8 * 0, K_I64, 123456, "updates", 0},
        {"replay.obs", 4 * 7, K_F32, NAN, "nan", 0},
        /* Finite but absurd: -3.3e38 made the actor act NaN after the resume (issue 37). */
        {"replay.obs", 4 * 4, K_F32, -3.3e38, "beyond 1e18", 0},
        {"replay.reward", 4 * 5, K_F32, 2e18, "beyond 1e18", 0},
        {"replay.action", 4 * 3, K_F32, 3.0, "3", 0},
        {"replay.reward", 4 * 2, K_F32, -INFINITY, "inf", 0},
        {"replay.terminated", 4 * 1, K_F32, 0.5, "0.5", 0},
        {"replay.next_obs", 4 * 2, K_F32, INFINITY, "inf", 0},
        {"trainer.state", F64_AT(TS_EPISODES), K_I64, -1, "episodes", 0},
        {"trainer.state", F64_AT(TS_EPISODES), K_I64, 1000, "episodes", 0},
        {"trainer.state", F64_AT(TS_EP_LEN), K_I64, -2, "ep_len", 0},
        {"trainer.state", F64_AT(TS_ENV_T), K_I64, 201, "env_t", 0},
        {"trainer.state", F64_AT(TS_ENV_T), K_I64, -1, "env_t", 0},
        {"trainer.state", F64_AT(TS_ENV_STREAM), K_I64, 7, "stream", 0},
        {"trainer.state", F64_AT(TS_EVAL_STREAM), K_I64, 1ll << 40, "stream", 0},
        {"trainer.state", F64_AT(TS_EP_RET), K_F64, NAN, "ep_ret", 0},
        {"trainer.state", F64_AT(TS_BEST_EVAL), K_F64, -1e30, "best", 0},
        {"trainer.state", F64_AT(TS_LAST_EP_RET), K_F64, INFINITY, "last_episode_return", 0},
        {"trainer.state", F64_AT(TS_ENV_MAX_STEPS), K_I64, -1, "max_steps", 0},
        {"trainer.state", F64_AT(TS_ENV_MAX_STEPS), K_I64, 1ll << 33, "max_steps", 0},
        {"trainer.state", F64_AT(TS_ENV_STEPS), K_I64, 299, "env_steps", 0},
        {"trainer.env_state", 0, K_F64, NAN, "th", 0},
        {"trainer.env_state", 8, K_F64, 9.5, "thdot", 0},
        {"trainer.env_state", 0, K_F64, 1e9, "th", 0},
        {"trainer.obs", 4 * 1, K_F32, NAN, "nan", 0},
        {"trainer.obs", 4 * 2, K_F32, 3e37, "at most 1e18", 0},
    };
    run_case(dir, "td3_pendulum", td3_yaml, td3_edits, (int)(sizeof td3_edits / sizeof td3_edits[0]));

    /* DQN on cartpole: episodes end every few dozen steps (invalid rows), and the 128-row ring wraps. */
    static const char dqn_yaml[] =
        "algo: dqn\nseed: 4\nenv: {name: cartpole}\ndevice: cpu\n"
        "train: {total_steps: 300, batch_size: 16, eval_every: 0, eval_episodes: 1, progress_every_s: 0}\n"
        "dqn: {learning_starts: 100, train_freq: 4, gradient_steps: 1, target_update_every: 50}\n"
        "network: {hidden: [16], conv: none}\nreplay: {capacity: 128}\ncheckpoint: {include_replay: true}\n";
    static const edit dqn_edits[] = {
        {"replay.next", 0, K_I32, 1000000, "next", 4},
        {"replay.next", 0, K_I32, -7, "next", 4},
        {"replay.next", 0, K_I32, 0, "next", 4},
        {"replay.action", 0, K_I32, 7, "action", 4},
        {"replay.action", 0, K_I32, -1, "action", 4},
        {"replay.valid", 0, K_U8, 2, "valid", 1},
        {"replay.terminated", 0, K_F32, 2.0, "terminated", 4},
        {"replay.reward", 0, K_F32, NAN, "reward", 4},
        {"replay.frame", 4 * 2, K_F32, INFINITY, "inf", 0},
        {"agent.host", F64_AT(H_DQN_ADVANCES), K_I64, -1, "advances", 0},
        {"agent.host", F64_AT(H_DQN_PREV_ENDED), K_I64, 3, "prev_ended", 0},
        {"agent.host", F64_AT(H_DQN_ADVANCES), K_I64, 0, "advances", 0},
        {"trainer.env_state", 0, K_F64, INFINITY, "x", 0},
        {"trainer.env_state", 24, K_F64, NAN, "theta_dot", 0},
        {"trainer.env_state", 32, K_I32, -5, "steps_beyond_terminated", 0},
    };
    run_case(dir, "dqn_cartpole", dqn_yaml, dqn_edits, (int)(sizeof dqn_edits / sizeof dqn_edits[0]));

    /* DQN on MinAtar Breakout (uint8 frames): the game's fields index arrays, so a value out of range crashed. */
    static const char brk_yaml[] =
        "algo: dqn\nseed: 5\nenv: {name: minatar_breakout, max_episode_steps: 300}\ndevice: cpu\n"
        "train: {total_steps: 120, batch_size: 8, eval_every: 0, eval_episodes: 1, progress_every_s: 0}\n"
        "dqn: {learning_starts: 60, train_freq: 4, gradient_steps: 1, target_update_every: 50}\n"
        "network: {hidden: [8], conv: none}\nreplay: {capacity: 64}\ncheckpoint: {include_replay: true}\n";
    long g_ball_x = (long)offsetof(rlt_breakout_game, ball_x), g_ball_y = (long)offsetof(rlt_breakout_game, ball_y);
    long g_dir = (long)offsetof(rlt_breakout_game, ball_dir), g_pos = (long)offsetof(rlt_breakout_game, pos);
    long g_last_x = (long)offsetof(rlt_breakout_game, last_x), g_strike = (long)offsetof(rlt_breakout_game, strike);
    long g_term = (long)offsetof(rlt_breakout_game, terminal), g_act = (long)offsetof(rlt_breakout_game, last_action);
    long g_bricks = (long)offsetof(rlt_breakout_game, brick_map), g_sticky = (long)((sizeof(rlt_breakout_game) + 7) / 8 * 8);
    const edit brk_edits[] = {
        {"trainer.env_state", g_ball_x, K_I32, 12, "ball_x", 0},
        {"trainer.env_state", g_ball_y, K_I32, -100000, "ball_y", 0},
        {"trainer.env_state", g_dir, K_I32, 9, "ball_dir", 0},
        {"trainer.env_state", g_pos, K_I32, 10, "pos", 0},
        {"trainer.env_state", g_last_x, K_I32, -1, "last_x", 0},
        {"trainer.env_state", g_strike, K_I32, 2, "strike", 0},
        {"trainer.env_state", g_term, K_I32, 5, "terminal", 0},
        {"trainer.env_state", g_act, K_I32, 2, "last_action", 0},
        {"trainer.env_state", g_bricks + 37, K_U8, 7, "brick", 0},
        {"trainer.env_state", g_sticky, K_F64, 1.5, "sticky", 0},
        {"replay.action", 0, K_I32, 3, "action", 4},
    };
    run_case(dir, "dqn_breakout", brk_yaml, brk_edits, (int)(sizeof brk_edits / sizeof brk_edits[0]));
    return test_summary("test_ckpt_validate");
}
