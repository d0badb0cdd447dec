/* test_out_dir_owner.c: one owner per out_dir, as a property over random start orders (fixed seed).
 * - Fresh rounds: three CLI runs with different seeds start into one new out_dir within a few milliseconds of
 *   each other. Exactly one exits 0; every other is refused with exit 2 (the directory belongs to a live run,
 *   naming its pid, or holds the outputs of an earlier run), and every output in the directory is the winner's:
 *   config.yaml, summary.json and final.ckpt of its seed, metrics.csv its whole run, no temporary file.
 * - Resume rounds: three CLI resumes of the same run from its ckpt_<step>.ckpt start into its out_dir at random
 *   moments. Each either runs (alone: exit 0) or is refused at once (exit 2, naming the live owner's pid), and
 *   the directory ends as a run that was never interrupted (final.ckpt byte for byte, metrics.csv row for
 *   row): no row lost to an unlinked file, none written twice, no file of two runs. */
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

#define N_PROC 3

static const char *config_path;

/* Starts the CLI into out_dir with seed `seed` (resumed from ckpt when not NULL), stderr into log. */
static pid_t spawn(const char *out_dir, int seed, const char *ckpt, const char *log, long delay_us) {
    char out_set[600], seed_set[64];
    snprintf(out_set, sizeof out_set, "out_dir=%s", out_dir);
    snprintf(seed_set, sizeof seed_set, "seed=%d", seed);
    fflush(NULL);
    pid_t pid = fork();
    if (pid != 0) return pid;
    struct timespec ts = {delay_us / 1000000, (delay_us % 1000000) * 1000};
    nanosleep(&ts, NULL);
    int err = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644), out = open("/dev/null", O_WRONLY);
    dup2(out, 1);
    dup2(err, 2);
    const char *exe = RLT_BINARY_DIR "/rltrain";
    if (ckpt) execl(exe, exe, "--config", config_path, "--set", out_set, "--set", seed_set, "--resume", ckpt, "--quiet",
                    (char *)NULL);
    else execl(exe, exe, "--config", config_path, "--set", out_set, "--set", seed_set, "--quiet", (char *)NULL);
    _exit(127);
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next_rand(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return rng;
}

static char text[1 << 18];

/* Exit code of pid, or -1 when it did not exit normally. */
static int wait_code(pid_t pid) {
    int st = 0;
    while (waitpid(pid, &st, 0) < 0) {
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Files in dir whose name ends with ".tmp". */
static int count_tmp(const char *dir) {
    char cmd[700];
    snprintf(cmd, sizeof cmd, "ls -a '%s' | grep -c '\\.tmp$'", dir);
    FILE *p = popen(cmd, "r");
    int n = -1;
    if (p && fscanf(p, "%d", &n) != 1) n = -1;
    if (p) pclose(p);
    return n;
}

/* Checks the log of a refused process: exit 2 and one of the two refusals. */
static void check_refusal(int code, const char *log, const char *what) {
    test_read_text(log, text, sizeof text);
    int busy = strstr(text, "belongs to a live run (process ") != NULL;
    CHECK(code == 2 && (busy || strstr(text, "holds the outputs of an earlier run")),
          "%s: exit %d, want 0 or a refusal (2): %.600s", what, code, text);
}

int main(void) {
    const char *root = test_tmpdir("out_dir_owner");
    char cfg_path[600], path[1400], dir[500], log[N_PROC][700], what[128], ckpt[700], ref[500];
    snprintf(cfg_path, sizeof cfg_path, "%s/tiny.yaml", root);
    FILE *f = fopen(cfg_path, "w");
    if (!f) return test_summary("test_out_dir_owner");
    fputs("algo: td3\ntrain: {total_steps: 3000, start_steps: 100, batch_size: 32, eval_every: 1000,"
          " eval_episodes: 1}\ntd3: {actor_hidden: [64, 64], critic_hidden: [64, 64]}\n"
          "replay: {capacity: 4000}\ncheckpoint: {every: 1000, keep: 2, include_replay: true}\ncpu: {threads: 1}\n", f);
    fclose(f);
    config_path = cfg_path;
    int busy_seen = 0;

    for (int round = 0; round < 4; round++) {
        snprintf(dir, sizeof dir, "%s/fresh_%d", root, round);
        pid_t pid[N_PROC];
        for (int i = 0; i < N_PROC; i++) {
            snprintf(log[i], sizeof log[i], "%s.%d.log", dir, i);
            pid[i] = spawn(dir, 100 + i, NULL, log[i], (long)(next_rand() % 30000)); /* within 30 ms */
        }
        int winner = -1, wins = 0;
        for (int i = 0; i < N_PROC; i++) {
            int code = wait_code(pid[i]);
            snprintf(what, sizeof what, "fresh round %d, process %d (seed %d)", round, i, 100 + i);
            if (code == 0) {
                winner = i;
                wins++;
                continue;
            }
            check_refusal(code, log[i], what);
            busy_seen += strstr(text, "belongs to a live run") != NULL;
        }
        CHECK(wins == 1, "fresh round %d: %d runs finished, want exactly one", round, wins);
        if (winner < 0) continue;
        char want[64];
        snprintf(path, sizeof path, "%s/config.yaml", dir);
        test_read_text(path, text, sizeof text);
        snprintf(want, sizeof want, "\nseed: %d\n", 100 + winner);
        CHECK(strstr(text, want), "fresh round %d: config.yaml is the winner's (seed %d)", round, 100 + winner);
        snprintf(path, sizeof path, "%s/summary.json", dir);
        test_read_text(path, text, sizeof text);
        snprintf(want, sizeof want, "\"seed\": %d,", 100 + winner);
        CHECK(strstr(text, want) && strstr(text, "\"status\": \"finished\"") && strstr(text, "\"env_steps\": 3000,"),
              "fresh round %d: summary.json is the winner's finished run: %.300s", round, text);
        /* final.ckpt's metadata names its seed. */
        snprintf(path, sizeof path, "%s/final.ckpt", dir);
        long n = test_read_file(path, text, sizeof text - 1);
        text[n > 0 ? n : 0] = '\0';
        snprintf(want, sizeof want, "seed: %d\n", 100 + winner);
        CHECK(n > 0 && memmem(text, (size_t)n, want, strlen(want)), "fresh round %d: final.ckpt is of seed %d", round,
              100 + winner);
        snprintf(path, sizeof path, "%s/metrics.csv", dir);
        test_read_text(path, text, sizeof text);
        int evals = 0;
        for (char *l = strstr(text, "\neval,"); l; l = strstr(l + 1, "\neval,")) evals++;
        CHECK(evals == 3 && strstr(text, "\neval,3000,"), "fresh round %d: metrics.csv holds one whole run (%d evals)",
              round, evals);
        CHECK(count_tmp(dir) == 0, "fresh round %d: no temporary file left", round);
    }

    /* The reference: fresh_0's run, copied before the resume rounds change it. */
    snprintf(dir, sizeof dir, "%s/fresh_0", root);
    snprintf(ref, sizeof ref, "%s/ref", root);
    snprintf(path, sizeof path, "cp -r '%s' '%s'", dir, ref);
    CHECK(system(path) == 0, "%s", path);
    snprintf(path, sizeof path, "%s/config.yaml", dir);
    test_read_text(path, text, sizeof text);
    const char *s = strstr(text, "\nseed: ");
    int seed = s ? atoi(s + 7) : 100;
    for (int round = 0; round < 4; round++) {
        snprintf(ckpt, sizeof ckpt, "%s/ckpt_%d.ckpt", dir, round % 2 ? 1000 : 2000);
        pid_t pid[N_PROC];
        for (int i = 0; i < N_PROC; i++) {
            snprintf(log[i], sizeof log[i], "%s/resume_%d.%d.log", root, round, i);
            pid[i] = spawn(dir, seed, ckpt, log[i], (long)(next_rand() % 150000)); /* within 150 ms */
        }
        int ran = 0;
        for (int i = 0; i < N_PROC; i++) {
            int code = wait_code(pid[i]);
            snprintf(what, sizeof what, "resume round %d, process %d", round, i);
            if (code == 0) {
                ran++;
                continue;
            }
            check_refusal(code, log[i], what);
            CHECK(strstr(text, "belongs to a live run"), "%s: a resume is refused only by a live owner", what);
            busy_seen++;
        }
        CHECK(ran >= 1, "resume round %d: at least one resume ran", round);
        snprintf(what, sizeof what, "resume round %d", round);
        test_same_run(ref, dir, what);
        CHECK(count_tmp(dir) == 0, "resume round %d: no temporary file left", round);
    }
    printf("refusals by a live owner: %d\n", busy_seen);
    CHECK(busy_seen >= 4, "the processes overlapped (%d refusals by a live owner): the test exercised the lock",
          busy_seen);
    return test_summary("test_out_dir_owner");
}
