/* test_signal_resume.c: every catchable signal that ends a terminal session or a job stops the CLI cleanly, at
 * any moment, and what it leaves resumes bit-exactly.
 * - SIGINT, SIGTERM and SIGHUP, each sent at random moments (fixed seed) from the first microseconds of the
 *   process (its startup: the handlers are installed before main) to after its end: the run exits 5 (stopped,
 *   outputs and final.ckpt written) or 0 (it had finished). A run killed by the signal is allowed only before
 *   the handler exists, and then must have written nothing.
 * - SIGPIPE: stdout is a pipe whose reader goes away at a random moment; the progress lines stop, the run
 *   does not (exit 0).
 * - Whatever was left is continued (--resume final.ckpt when there is one, else a fresh run) and must end with
 *   the final.ckpt (byte for byte) and metrics.csv (but wall_s) of a run that was never interrupted. */
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

static const char *config_path;

/* Starts the CLI on the test config into out_dir (resumed from out_dir/final.ckpt when resume is set), its
 * stdout into fd_out (or /dev/null with -1) and stderr into log. */
static pid_t spawn(const char *out_dir, int resume, int fd_out, const char *log) {
    char out_set[600], ckpt[640];
    snprintf(out_set, sizeof out_set, "out_dir=%s", out_dir);
    snprintf(ckpt, sizeof ckpt, "%s/final.ckpt", out_dir);
    fflush(NULL);
    pid_t pid = fork();
    if (pid != 0) return pid;
    int err = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int out = fd_out >= 0 ? fd_out : open("/dev/null", O_WRONLY);
    dup2(out, 1);
    dup2(err, 2);
    const char *exe = RLT_BINARY_DIR "/rltrain";
    if (resume) execl(exe, exe, "--config", config_path, "--set", out_set, "--resume", ckpt, (char *)NULL);
    else execl(exe, exe, "--config", config_path, "--set", out_set, (char *)NULL);
    _exit(127);
}

static int wait_status(pid_t pid) {
    int st = 0;
    while (waitpid(pid, &st, 0) < 0) {
    }
    return st;
}

static int file_exists(const char *dir, const char *name) {
    char path[700];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return stat(path, &st) == 0;
}

static uint64_t rng = 0x2545f4914f6cdd1dull; /* fixed seed: the same moments every time */
static uint64_t next_rand(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return rng;
}

static void sleep_us(long us) {
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

static char log_text[1 << 16];

/* Continues what the interrupted run left in dir and compares it with the reference run. */
static void finish_and_compare(const char *ref, const char *dir, const char *what) {
    char log[700];
    snprintf(log, sizeof log, "%s.resume.log", dir);
    int resume = file_exists(dir, "final.ckpt");
    int st = wait_status(spawn(dir, resume, -1, log));
    test_read_text(log, log_text, sizeof log_text);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: the %s exits 0 (status %d): %s", what,
          resume ? "resume" : "fresh run", st, log_text);
    test_same_run(ref, dir, what);
}

int main(void) {
    const char *root = test_tmpdir("signal_resume");
    char path[600], ref[600], dir[600], log[700], what[160];
    snprintf(path, sizeof path, "%s/tiny.yaml", root);
    FILE *f = fopen(path, "w");
    if (!f) return test_summary("test_signal_resume");
    /* About 0.15 s of training on one core: 3,000 steps of small networks, a checkpoint and an evaluation every
     * 500 steps, progress lines at every step (for SIGPIPE). */
    fputs("algo: td3\nseed: 3\ntrain: {total_steps: 3000, start_steps: 100, batch_size: 32, eval_every: 500,"
          " eval_episodes: 1, progress_every_s: 0}\ntd3: {actor_hidden: [64, 64], critic_hidden: [64, 64]}\n"
          "replay: {capacity: 4000}\ncheckpoint: {every: 500, keep: 1, include_replay: true}\ncpu: {threads: 1}\n", f);
    fclose(f);
    config_path = path;
    snprintf(ref, sizeof ref, "%s/ref", root);
    snprintf(log, sizeof log, "%s/ref.log", root);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int st = wait_status(spawn(ref, 0, -1, log));
    clock_gettime(CLOCK_MONOTONIC, &t1);
    test_read_text(log, log_text, sizeof log_text);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the reference run (status %d): %s", st, log_text);
    long run_us = (t1.tv_sec - t0.tv_sec) * 1000000L + (t1.tv_nsec - t0.tv_nsec) / 1000;
    printf("reference run: %.3f s\n", run_us / 1e6);

    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    static const char *names[] = {"SIGINT", "SIGTERM", "SIGHUP"};
    /* How long a run takes now: the reference's time, lowered by every later run that finished before its signal.
     * The reference may have run beside heavier tests (CI runs two at once), and a signal drawn past a faster run's
     * end tests nothing. */
    long fastest_us = run_us;
    int stopped = 0, finished = 0, early = 0;
    /* Four rounds of the three signals, then (if fewer than 4 landed mid-run) up to 6 more within the first half of
     * the fastest run. */
    for (int k = 0; k < 12 + 6 && (k < 12 || stopped < 4); k++) {
        const int round = k / 3, s = k % 3;
        /* Round 0 sends within the first 3 ms (startup), rounds 1-3 anywhere in 1.2 times the run's length, the
         * extra ones in its first half. */
        long delay = round == 0  ? (long)(next_rand() % 3000)
                     : k < 12    ? (long)(next_rand() % (uint64_t)(fastest_us * 6 / 5 + 1))
                                 : (long)(next_rand() % (uint64_t)(fastest_us / 2 + 1));
        snprintf(dir, sizeof dir, "%s/%s_%d", root, names[s], round);
        snprintf(log, sizeof log, "%s.log", dir);
        snprintf(what, sizeof what, "%s after %ld us", names[s], delay);
        clock_gettime(CLOCK_MONOTONIC, &t0);
        pid_t pid = spawn(dir, 0, -1, log);
        sleep_us(delay);
        kill(pid, sigs[s]);
        st = wait_status(pid);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        test_read_text(log, log_text, sizeof log_text);
        if (WIFSIGNALED(st)) {
            /* Only before the handler exists (the dynamic loader's time): nothing may have been written. */
            CHECK(WTERMSIG(st) == sigs[s] && !file_exists(dir, "config.yaml") && !file_exists(dir, "metrics.csv"),
                  "%s: killed by signal %d with outputs written", what, WTERMSIG(st));
            early++;
        } else {
            int code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
            CHECK(code == 5 || code == 0, "%s: exit %d (want 5: stopped, or 0: finished): %s", what, code, log_text);
            CHECK(code != 5 || (file_exists(dir, "final.ckpt") && file_exists(dir, "summary.json")),
                  "%s: stopped without final.ckpt and summary.json", what);
            stopped += code == 5;
            finished += code == 0;
            long took_us = (t1.tv_sec - t0.tv_sec) * 1000000L + (t1.tv_nsec - t0.tv_nsec) / 1000;
            if (code == 0 && took_us < fastest_us) fastest_us = took_us;
        }
        finish_and_compare(ref, dir, what);
    }
    printf("SIGINT/SIGTERM/SIGHUP: %d stopped (exit 5), %d had finished, %d before the handler (fastest run %.3f s)\n",
           stopped, finished, early, fastest_us / 1e6);
    CHECK(stopped >= 4, "signals arrive during the run (%d stopped it; 7 to 10 of the first 12 do on an idle machine)",
          stopped);

    /* SIGPIPE: the reader of stdout goes away while the run prints a line per step. */
    for (int round = 0; round < 3; round++) {
        long delay = (long)(next_rand() % (uint64_t)(run_us / 2 + 1));
        snprintf(dir, sizeof dir, "%s/SIGPIPE_%d", root, round);
        snprintf(log, sizeof log, "%s.log", dir);
        snprintf(what, sizeof what, "stdout closed after %ld us", delay);
        int fds[2];
        CHECK(pipe2(fds, O_CLOEXEC) == 0, "pipe"); /* the child holds only its stdout end */
        pid_t pid = spawn(dir, 0, fds[1], log);
        close(fds[1]);
        char buf[4096];
        (void)!read(fds[0], buf, sizeof buf); /* the first lines */
        sleep_us(delay);
        close(fds[0]);
        st = wait_status(pid);
        test_read_text(log, log_text, sizeof log_text);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: the run goes on to the end (status %d): %s", what, st,
              log_text);
        test_same_run(ref, dir, what);
    }
    return test_summary("test_signal_resume");
}
