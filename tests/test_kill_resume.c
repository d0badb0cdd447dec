/* test_kill_resume.c: a run killed hard keeps its metrics, and a resumed run continues them exactly.
 * - metrics.csv rows reach the file as they happen: a run that dies (_exit in its progress callback, and
 *   SIGKILL from outside) leaves every row it finished, with no summary.json or final.ckpt;
 * - resuming from its last periodic checkpoint into the same out_dir keeps the rows up to that step, drops the
 *   later ones of the killed run, and ends with the metrics.csv (except wall_s) and final.ckpt of a run that
 *   was never interrupted; temporary files of a save the kill cut short are removed;
 * - a new run into an out_dir that holds outputs is refused (RLT_ECONFIG, naming out_dir and
 *   train.overwrite) and changes nothing; train.overwrite replaces them, stale periodic checkpoints included;
 * - a failed final save is reported (RLT_EIO, summary.json status "failed" with the error), not "finished". */
#include <dirent.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "rltrain.h"

static rlt_config *config(const char *out_dir, const char *extra) {
    rlt_config *cfg;
    rlt_config_init(&cfg);
    CHECK(rlt_config_load_string(cfg,
                                 "algo: td3\nseed: 5\ntrain: {total_steps: 3000, start_steps: 500, batch_size: 64,"
                                 " eval_every: 500, eval_episodes: 2, progress_every_s: 0}\n"
                                 "td3: {actor_hidden: [64, 64], critic_hidden: [64, 64]}\nreplay: {capacity: 2500}\n"
                                 "checkpoint: {every: 1000, keep: 1, include_replay: true}\n",
                                 "kill.yaml") == RLT_OK, "config: %s", rlt_config_errmsg(cfg));
    char set[600];
    snprintf(set, sizeof set, "out_dir=%s", out_dir);
    CHECK(rlt_config_set(cfg, set) == RLT_OK, "%s", rlt_config_errmsg(cfg));
    if (extra) CHECK(rlt_config_load_string(cfg, extra, "extra.yaml") == RLT_OK, "%s: %s", extra, rlt_config_errmsg(cfg));
    return cfg;
}

static char errmsg[4096];

/* Trains into out_dir (resumed from `resume` when given) with progress callback fn; returns the status and
 * keeps the message in errmsg. */
static int run(const char *out_dir, const char *resume, rlt_progress_fn fn, const char *extra) {
    rlt_config *cfg = config(out_dir, extra);
    rlt_trainer *tr;
    int rc = rlt_trainer_init(cfg, &tr);
    CHECK(rc == RLT_OK, "init: %s", rlt_trainer_errmsg(tr));
    if (resume) CHECK(rlt_trainer_resume(tr, resume) == RLT_OK, "resume %s: %s", resume, rlt_trainer_errmsg(tr));
    rc = rlt_trainer_run(tr, fn, NULL);
    snprintf(errmsg, sizeof errmsg, "%s", rlt_trainer_errmsg(tr));
    rlt_trainer_free(tr);
    rlt_config_free(cfg);
    return rc;
}

static char a_buf[1 << 20], b_buf[1 << 20];

/* Rows of kind `kind` in dir/metrics.csv, and the largest env_step of any row. */
static int count_rows(const char *dir, const char *kind, long *last_step) {
    char path[700];
    snprintf(path, sizeof path, "%s/metrics.csv", dir);
    test_read_text(path, a_buf, sizeof a_buf);
    int n = 0;
    *last_step = -1;
    for (char *line = strchr(a_buf, '\n'); line && line[1]; line = strchr(line + 1, '\n')) {
        const char *comma = strchr(line + 1, ',');
        if (!comma) break;
        long step = strtol(comma + 1, NULL, 10);
        if (step > *last_step) *last_step = step;
        if (!strncmp(line + 1, kind, strlen(kind)) && line[1 + strlen(kind)] == ',') n++;
    }
    return n;
}

static int exists(const char *dir, const char *name) {
    char path[700];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return stat(path, &st) == 0;
}

/* Files in dir whose name ends with ".tmp". */
static int count_tmp(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (len > 4 && !strcmp(e->d_name + len - 4, ".tmp")) n++;
    }
    if (d) closedir(d);
    return n;
}

/* Dies, as a process killed at that moment would, right after the evaluation at step 2500 is reported. */
static int die_at_2500(void *user, const rlt_progress *p) {
    (void)user;
    if (p->is_eval && p->env_steps == 2500) _exit(0);
    return 0;
}

/* Slows the run down after step 2000, so that a SIGKILL sent once ckpt_2000 exists lands inside the run. */
static int slow_after_2000(void *user, const rlt_progress *p) {
    (void)user;
    if (p->env_steps > 2000) { /* 2 ms a step: the last 1,000 steps take over 2 s */
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    return 0;
}

static pid_t start_child(const char *out_dir, rlt_progress_fn fn) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        run(out_dir, NULL, fn, NULL);
        _exit(3); /* it was to die first */
    }
    return pid;
}

int main(void) {
    const char *dir = test_tmpdir("kill_resume");
    char a[512], k[512], l[512], f[512], path[700];
    snprintf(a, sizeof a, "%s/A", dir);
    snprintf(k, sizeof k, "%s/K", dir);
    snprintf(l, sizeof l, "%s/L", dir);
    snprintf(f, sizeof f, "%s/F", dir);
    CHECK(run(a, NULL, NULL, NULL) == RLT_OK, "A: %s", errmsg);
    long last;
    int a_evals = count_rows(a, "eval", &last), a_episodes = count_rows(a, "episode", &last);
    CHECK(a_evals == 6 && a_episodes == 15, "A: 6 evaluations and 15 episodes (%d, %d)", a_evals, a_episodes);

    /* K: the process ends without returning (as if killed) right after the evaluation at step 2500. */
    int st;
    pid_t pid = start_child(k, die_at_2500);
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0, "K died in its callback");
    int evals = count_rows(k, "eval", &last), episodes = count_rows(k, "episode", &last);
    printf("K killed at 2500: %d eval rows, %d episode rows, last row at step %ld\n", evals, episodes, last);
    CHECK(evals == 5 && episodes == 12 && last == 2500, "K kept every row up to step 2500 (%d evals, %d episodes, %ld)",
          evals, episodes, last);
    CHECK(!exists(k, "summary.json") && !exists(k, "final.ckpt") && exists(k, "ckpt_2000.ckpt"),
          "K: no summary.json or final.ckpt, ckpt_2000.ckpt kept");
    /* A save the kill cut short leaves its temporary file; the resumed run removes it. */
    snprintf(path, sizeof path, "%s/ckpt_3000.ckpt.tmp", k);
    FILE *tmp = fopen(path, "w");
    if (tmp) fclose(tmp);
    snprintf(path, sizeof path, "%s/ckpt_2000.ckpt", k);
    CHECK(run(k, path, NULL, NULL) == RLT_OK, "K resumed: %s", errmsg);
    test_same_run(a, k, "K");
    CHECK(count_tmp(k) == 0, "K: no temporary files are left");

    /* L: SIGKILL from outside, at a moment after ckpt_2000 was written. */
    pid = start_child(l, slow_after_2000);
    for (int i = 0; i < 20000 && !exists(l, "ckpt_2000.ckpt"); i++) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    struct timespec ts = {0, 700000000};
    nanosleep(&ts, NULL);
    kill(pid, SIGKILL);
    CHECK(waitpid(pid, &st, 0) == pid && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "L was killed (status %d)", st);
    evals = count_rows(l, "eval", &last);
    printf("L killed: %d eval rows, last row at step %ld\n", evals, last);
    CHECK(evals >= 4 && last >= 2000 && last < 3000, "L kept its rows up to the kill (%d evals, last at %ld)", evals, last);
    CHECK(!exists(l, "final.ckpt"), "L: no final.ckpt");
    snprintf(path, sizeof path, "%s/ckpt_2000.ckpt", l);
    CHECK(run(l, path, NULL, NULL) == RLT_OK, "L resumed: %s", errmsg);
    test_same_run(a, l, "L");

    /* A new run into A is refused and changes nothing. */
    snprintf(path, sizeof path, "%s/metrics.csv", a);
    struct stat before, after;
    CHECK(stat(path, &before) == 0, "A/metrics.csv");
    CHECK(run(a, NULL, NULL, NULL) == RLT_ECONFIG, "a second run into A is refused");
    CHECK(strstr(errmsg, "key 'out_dir'") && strstr(errmsg, "train.overwrite") && strstr(errmsg, "earlier run"),
          "the message names out_dir and train.overwrite: %s", errmsg);
    CHECK(stat(path, &after) == 0 && after.st_mtim.tv_sec == before.st_mtim.tv_sec &&
              after.st_mtim.tv_nsec == before.st_mtim.tv_nsec && after.st_size == before.st_size,
          "A/metrics.csv untouched");
    /* Resuming A's checkpoint into K, which holds another run's outputs, is refused too. */
    snprintf(path, sizeof path, "%s/ckpt_2000.ckpt", a);
    CHECK(run(k, path, NULL, NULL) == RLT_ECONFIG, "a resume from elsewhere into K is refused: %s", errmsg);
    /* train.overwrite replaces them, and the earlier run's periodic checkpoint goes too. */
    CHECK(exists(a, "ckpt_2000.ckpt"), "A has a periodic checkpoint");
    CHECK(run(a, NULL, NULL, "checkpoint: {every: 0}\n") == RLT_ECONFIG, "refused without train.overwrite");
    CHECK(run(a, NULL, NULL, "checkpoint: {every: 0}\ntrain: {overwrite: true}\n") == RLT_OK, "train.overwrite: %s",
          errmsg);
    CHECK(!exists(a, "ckpt_2000.ckpt") && exists(a, "final.ckpt"), "the earlier run's ckpt_2000.ckpt is gone");
    CHECK(count_rows(a, "eval", &last) == 6 && last == 3000, "the new run's metrics alone");

    /* F: final.ckpt cannot be written (its name is a directory that train.overwrite cannot remove, so the rename
     * fails): an I/O error, and summary.json says the run failed and why, instead of "finished". */
    snprintf(path, sizeof path, "mkdir -p '%s/final.ckpt/keep'", f);
    CHECK(system(path) == 0, "%s", path);
    CHECK(run(f, NULL, NULL, "train: {overwrite: true}\n") == RLT_EIO, "a failed final save is an I/O error: %s", errmsg);
    CHECK(strstr(errmsg, "final.ckpt") && strstr(errmsg, "not all written"), "message: %s", errmsg);
    snprintf(path, sizeof path, "%s/summary.json", f);
    test_read_text(path, b_buf, sizeof b_buf);
    CHECK(strstr(b_buf, "\"status\": \"failed\"") && strstr(b_buf, "\"error\": \"") && strstr(b_buf, "final.ckpt"),
          "summary.json reports the failure: %.300s", b_buf);
    return test_summary("test_kill_resume");
}
