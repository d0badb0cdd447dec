/* test_kill_save.c: a checkpoint survives SIGKILL at any moment of a save. A child process loads the
 * checkpoint (when there is one), then observes transitions and saves to the same path in a loop, nearly all
 * of its time inside rlt_agent_save (a few MB of replay, written and fsynced); the parent kills it with SIGKILL
 * after a random delay (fixed seed), 20 times. After every kill the path holds a complete checkpoint, the old
 * one or the new one: it loads (every CRC and value checked) and its step counter never goes back; the
 * directory holds nothing but the checkpoint and temporary files of killed saves, at most one per killed
 * process (each save has a name of its own, so no process truncates or renames another's).
 * The whole loop is bounded (20 s). */
#include <dirent.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "rltrain.h"
#include "text.h"

#define OBS 17
#define ACT 6
#define ROUNDS 20

static rlt_agent *make_agent(void) {
    rlt_config *cfg;
    rlt_config_init(&cfg);
    CHECK(rlt_config_load_string(cfg,
                                 "algo: td3\nseed: 9\ntrain: {start_steps: 1000000000, batch_size: 64}\n"
                                 "td3: {actor_hidden: [64, 64], critic_hidden: [64, 64]}\nreplay: {capacity: 20000}\n"
                                 "checkpoint: {include_replay: true}\n",
                                 "kill_save.yaml") == RLT_OK, "config: %s", rlt_config_errmsg(cfg));
    rlt_space obs = {RLT_SPACE_BOX, RLT_DTYPE_F32, 1, {OBS, 0, 0, 0}, 0, NULL, NULL};
    rlt_space act = {RLT_SPACE_BOX, RLT_DTYPE_F32, 1, {ACT, 0, 0, 0}, 0, NULL, NULL};
    rlt_agent *ag = NULL;
    int rc = rlt_agent_init(cfg, &obs, &act, &ag);
    CHECK(rc == RLT_OK, "agent init: %s", rlt_agent_errmsg(ag));
    rlt_config_free(cfg);
    return rc == RLT_OK ? ag : NULL;
}

/* The child: continue from the checkpoint, tell the parent, then observe and save until killed. */
static void child(const char *path, int ready_fd) {
    rlt_agent *ag = make_agent();
    if (!ag) _exit(2);
    struct stat st;
    if (stat(path, &st) == 0 && rlt_agent_load(ag, path) != RLT_OK) _exit(3); /* a partial file: the parent reports it */
    float o[16 * OBS], a[16 * ACT], r[16], o2[16 * OBS];
    uint8_t term[16] = {0}, trunc[16] = {0};
    int64_t steps, updates;
    rlt_agent_counters(ag, &steps, &updates);
    if (write(ready_fd, "r", 1) != 1) _exit(4);
    for (uint32_t k = (uint32_t)steps;; k++) {
        for (int i = 0; i < 16 * OBS; i++) o[i] = (float)((k * 31 + (uint32_t)i * 7) % 97) / 97.0f, o2[i] = -o[i];
        for (int i = 0; i < 16 * ACT; i++) a[i] = (float)((k + (uint32_t)i) % 13) / 13.0f - 0.5f;
        for (int i = 0; i < 16; i++) r[i] = (float)i / 16.0f;
        if (rlt_agent_observe(ag, o, a, r, o2, term, trunc, 16) != RLT_OK) _exit(5);
        if (rlt_agent_save(ag, path) != RLT_OK) _exit(6);
    }
}

/* Names in dir other than the checkpoint and temporary files of its saves (agent.ckpt.<pid>.<n>.tmp, counted
 * in *n_tmp). */
static int strangers(const char *dir, int *n_tmp) {
    DIR *d = opendir(dir);
    int n = 0;
    *n_tmp = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || !strcmp(e->d_name, "agent.ckpt")) continue;
        if (rlt_text_is_tmp_of(e->d_name, "agent.ckpt") && strcmp(e->d_name, "agent.ckpt.tmp")) (*n_tmp)++;
        else n++, fprintf(stderr, "unexpected file: %s\n", e->d_name);
    }
    if (d) closedir(d);
    return n;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(void) {
    const char *dir = test_tmpdir("kill_save");
    char path[600];
    snprintf(path, sizeof path, "%s/agent.ckpt", dir);
    rlt_agent *check = make_agent();
    if (!check) return test_summary("test_kill_save");
    uint64_t rng = 0x9e3779b97f4a7c15ull; /* fixed seed: the same kill delays every time */
    int64_t last_steps = -1;
    int mid_save = 0, saved = 0, tmp_before = 0;
    double t0 = now_s();
    for (int round = 0; round < ROUNDS && now_s() - t0 < 18.0; round++) {
        int fds[2];
        CHECK(pipe(fds) == 0, "pipe");
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
            close(fds[0]);
            child(path, fds[1]);
        }
        close(fds[1]);
        char c;
        int ready = read(fds[0], &c, 1) == 1;
        close(fds[0]);
        /* 0 to 40 ms after the child is ready: a few saves in, and most often inside one. */
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        struct timespec ts = {0, (long)(rng % 40000) * 1000};
        if (ready) nanosleep(&ts, NULL);
        kill(pid, SIGKILL);
        int st;
        CHECK(waitpid(pid, &st, 0) == pid, "waitpid");
        CHECK(ready && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL,
              "round %d: the child was killed while saving (exit status %d: 3 = it found a partial checkpoint)", round,
              WIFEXITED(st) ? WEXITSTATUS(st) : -1);
        /* Each save has a temporary name of its own (the process's pid and a counter): a killed process leaves at
         * most one, and never touches another's. */
        int n_tmp;
        CHECK(strangers(dir, &n_tmp) == 0, "round %d: only agent.ckpt and agent.ckpt.<pid>.<n>.tmp in the directory",
              round);
        CHECK(n_tmp <= tmp_before + 1, "round %d: %d temporary files after %d: a killed save leaves one at most", round,
              n_tmp, tmp_before);
        mid_save += n_tmp > tmp_before;
        tmp_before = n_tmp;
        struct stat sb;
        if (stat(path, &sb) != 0) {
            CHECK(last_steps < 0, "round %d: the checkpoint disappeared", round);
            continue;
        }
        int rc = rlt_agent_load(check, path);
        CHECK(rc == RLT_OK, "round %d: the checkpoint is complete: %s", round, rlt_agent_errmsg(check));
        int64_t steps, updates;
        rlt_agent_counters(check, &steps, &updates);
        CHECK(steps >= last_steps && steps % 16 == 0, "round %d: the step counter never goes back (%lld after %lld)", round,
              (long long)steps, (long long)last_steps);
        if (steps > last_steps && last_steps >= 0) saved++;
        last_steps = steps;
    }
    double took = now_s() - t0;
    printf("%d kills in %.1f s: %d inside a save (temporary file present), checkpoint at %lld transitions, "
           "%d rounds saved something new\n", ROUNDS, took, mid_save, (long long)last_steps, saved);
    CHECK(took < 20.0, "bounded time (%.1f s)", took);
    CHECK(last_steps > 0 && mid_save > 0, "the kills landed inside saves (%d) after some had completed", mid_save);
    rlt_agent_free(check);
    return test_summary("test_kill_save");
}
