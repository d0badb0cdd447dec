/* test_cli_papercuts.c: what a user meets in the first week of the CLI (issue 41), each once:
 * - `--set key value` (a space for '='): says so in one line, not "unknown argument" and the whole help;
 * - a config for a Gymnasium task (configs/td3_mujoco.yaml) is refused by the native CLI, naming python -m rltrain.gym,
 *   instead of training the built-in pendulum without a word;
 * - train.total_steps not above train.start_steps: a warning that the run makes no update;
 * - -qq: only the warnings, errors and the closing lines (no config, no plan);
 * - `rltrain plan` with a seed group that does not fit: the seed count that fits;
 * - Ctrl-C: the resume hint is the whole command (its --set overrides, shell-quoted) and works; after the resume
 *   updates/s counts only the resumed process's updates;
 * - the ETA is unknown (NaN, printed "?") during the random-action phase, where it used to be a fraction of the
 *   time the run took, and known once updates run. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "harness.h"
#include "rltrain.h"

static char out_text[1 << 17];

/* Runs a shell command line with stdout and stderr in one pipe; returns its exit code, output in out_text. */
static int run_sh(const char *cmd) {
    char full[4096];
    snprintf(full, sizeof full, "%s 2>&1", cmd);
    FILE *p = popen(full, "r");
    if (!p) return -1;
    size_t n = fread(out_text, 1, sizeof out_text - 1, p);
    out_text[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int run_cli(const char *args) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s/rltrain' %s", RLT_BINARY_DIR, args);
    return run_sh(cmd);
}

static int count_lines(const char *s) {
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

#define FAST "--config " RLT_SOURCE_DIR "/configs/td3_pendulum_fast.yaml"

static void test_set_with_a_space(void) {
    int rc = run_cli(FAST " --set train.batch_size 64");
    CHECK(rc == 2, "exit 2, got %d", rc);
    CHECK(strstr(out_text, "--set train.batch_size=64") && strstr(out_text, "not a space"), "%s", out_text);
    CHECK(count_lines(out_text) == 1, "one line, not the help: %s", out_text);
}

static void test_gymnasium_config_refused(void) {
    int rc = run_cli("--config " RLT_SOURCE_DIR "/configs/td3_mujoco.yaml --dry-run");
    CHECK(rc == 2, "exit 2, got %d: %s", rc, out_text);
    CHECK(strstr(out_text, "python -m rltrain.gym") && strstr(out_text, "Hopper-v5"), "%s", out_text);
}

static void test_no_update_warning_and_qq(void) {
    int rc = run_cli(FAST " -qq --set train.total_steps=300 --set train.eval_every=0 --set out_dir=tmp_papercuts/qq "
                     "--set train.overwrite=true");
    CHECK(rc == 0, "exit 0, got %d: %s", rc, out_text);
    CHECK(strstr(out_text, "train.total_steps 300 is not above train.start_steps 1000: the run makes no update"), "%s",
          out_text);
    CHECK(!strstr(out_text, "resolved config") && !strstr(out_text, "memory plan"), "-qq: %s", out_text);
    CHECK(strstr(out_text, "finished: 300 env steps") && count_lines(out_text) <= 4, "%s", out_text);
    /* A CPU run's metrics.csv keeps its columns: the device ones are a GPU run's (tests/gpu_watch_memory.c). */
    FILE *f = fopen("tmp_papercuts/qq/metrics.csv", "r");
    char header[512] = "";
    CHECK(f && fgets(header, sizeof header, f), "metrics.csv");
    if (f) fclose(f);
    CHECK(!strcmp(header, "kind,env_step,episode,return,length,updates,wall_s,critic_loss,actor_loss,loss_scale,"
                          "amp_skipped\n"), "CPU header: %s", header);
}

static void test_plan_seed_hint(void) {
    int rc = run_cli("plan --config " RLT_SOURCE_DIR "/configs/td3_pendulum.yaml --set train.num_seeds=16 --budget-mb 64");
    CHECK(rc == 3, "exit 3, got %d", rc);
    CHECK(strstr(out_text, "train.num_seeds          4 fit (hint: train.num_seeds: 4"), "%s", out_text);
}

/* Ctrl-C after a moment, the printed command run as printed (sh reads the quotes), and the closing line's rate. */
static void test_resume_hint(void) {
    if (system("rm -rf 'tmp_papercuts/a dir'") != 0) {} /* best effort: a leftover directory only costs disk */
    char cmd[2048];
    /* The signal once the run has begun (config.yaml is written by the run, after the CLI's handler is in place). */
    snprintf(cmd, sizeof cmd, "'%s/rltrain' " FAST " --quiet --set 'out_dir=tmp_papercuts/a dir' --set train.total_steps=8000 "
             "--set train.eval_every=4000 & pid=$!; i=0; while [ ! -f 'tmp_papercuts/a dir/config.yaml' ] && [ $i -lt 3000 ]; "
             "do sleep 0.02; i=$((i+1)); done; "
             "sleep 0.2; kill -INT $pid; wait $pid", RLT_BINARY_DIR);
    int rc = run_sh(cmd);
    CHECK(rc == 5, "interrupted: exit 5, got %d: %s", rc, out_text);
    const char *hint = strstr(out_text, "interrupted: continue with  ");
    CHECK(hint != NULL, "%s", out_text);
    if (!hint) return;
    char again[2048];
    hint += strlen("interrupted: continue with  ");
    size_t n = strcspn(hint, "\n");
    snprintf(again, sizeof again, "%.*s", (int)n, hint);
    CHECK(strstr(again, "'out_dir=tmp_papercuts/a dir'") && strstr(again, "--set train.total_steps=8000") &&
          strstr(again, "--resume 'tmp_papercuts/a dir/final.ckpt'"), "the whole command: %s", again);
    rc = run_sh(again);
    CHECK(rc == 0, "the printed command resumes: %d: %s", rc, out_text);
    long long total = 0, mine = 0, at = 0;
    double secs = 0, rate = 0;
    const char *fin = strstr(out_text, "finished: ");
    int got = fin ? sscanf(fin, "finished: %*d env steps, %lld updates (%lld of them in %lfs since the resume at step "
                           "%lld, %lf updates/s)", &total, &mine, &secs, &at, &rate) : 0;
    CHECK(got == 5, "closing line: %s", fin ? fin : out_text);
    CHECK(at > 0 && mine < total && mine == total - (at - 1000), "this process's updates: %lld of %lld (resumed at %lld)",
          mine, total, at);
    /* The rate is this process's updates over its time (rounded in print), not the run's. */
    CHECK(secs > 0 && fabs(rate * secs - (double)mine) <= 0.06 * (double)mine + 100, "rate %.0f x %.1fs vs %lld", rate,
          secs, mine);
}

typedef struct eta_log {
    int n_random, n_random_known, n_learning_known, n_device_figures;
} eta_log;

static int record_eta(void *user, const rlt_progress *p) {
    eta_log *l = user;
    l->n_device_figures += !isnan(p->device_free_mib) || !isnan(p->cotenants_mib); /* NaN on the CPU */
    if (p->updates == 0) {
        l->n_random++;
        l->n_random_known += !isnan(p->eta_s);
    } else {
        l->n_learning_known += !isnan(p->eta_s) && p->eta_s >= 0;
    }
    return 0;
}

static void test_eta_in_random_phase(void) {
    rlt_config *cfg;
    rlt_config_init(&cfg);
    CHECK(rlt_config_load_file(cfg, RLT_SOURCE_DIR "/configs/td3_pendulum_fast.yaml") == RLT_OK, "config");
    const char *sets[] = {"train.total_steps=3000", "train.start_steps=1500", "train.progress_every_s=0",
                          "train.eval_every=0", "out_dir=tmp_papercuts/eta", "train.overwrite=true", "cpu.threads=1"};
    for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++) CHECK(rlt_config_set(cfg, sets[i]) == RLT_OK, "%s", sets[i]);
    rlt_trainer *tr = NULL;
    CHECK(rlt_trainer_init(cfg, &tr) == RLT_OK, "init: %s", rlt_trainer_errmsg(tr));
    eta_log l = {0, 0, 0, 0};
    CHECK(rlt_trainer_run(tr, record_eta, &l) == RLT_OK, "run: %s", rlt_trainer_errmsg(tr));
    CHECK(l.n_random > 100 && l.n_random_known == 0, "random phase: %d reports, %d with an ETA", l.n_random,
          l.n_random_known);
    CHECK(l.n_learning_known > 100, "an ETA once updates run: %d reports", l.n_learning_known);
    CHECK(l.n_device_figures == 0, "no GPU figures on the CPU: %d reports", l.n_device_figures);
    rlt_trainer_free(tr);
    rlt_config_free(cfg);
}

int main(void) {
    rlt_log_set_callback(NULL, NULL);
    if (system("mkdir -p tmp_papercuts") != 0) {} /* a failed mkdir shows in the checks that follow */
    test_set_with_a_space();
    test_gymnasium_config_refused();
    test_no_update_warning_and_qq();
    test_plan_seed_hint();
    test_resume_hint();
    test_eta_in_random_phase();
    if (system("rm -rf tmp_papercuts") != 0) {} /* best effort: a leftover directory only costs disk */
    return test_summary("test_cli_papercuts");
}
