/* test_failfast.c: the CLI's promises at the process level: a plan over budget exits 3 in well under a
 * second with the table and hints and creates nothing; config errors exit 2 with file:line:column;
 * a CUDA device that cannot be used exits 4 (on machines without one); --dry-run exits 0 and writes
 * nothing. */
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

static char out_text[1 << 16];

/* Runs the CLI with args; returns its exit code, its wall time and its output (stdout + stderr). */
static int run_cli(const char *args, double *wall_s) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s/rltrain' %s > cli_out.txt 2>&1", RLT_BINARY_DIR, args);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    int st = system(cmd);
    clock_gettime(CLOCK_MONOTONIC, &b);
    if (wall_s) *wall_s = (double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec);
    FILE *f = fopen("cli_out.txt", "r");
    size_t n = f ? fread(out_text, 1, sizeof out_text - 1, f) : 0;
    out_text[n] = '\0';
    if (f) fclose(f);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int exists(const char *path) {
    struct stat s;
    return stat(path, &s) == 0;
}

int main(void) {
    const char *dir = test_tmpdir("failfast");
    CHECK(dir != NULL, "tmpdir");
    char args[1024], out_dir[600];
    snprintf(out_dir, sizeof out_dir, "%s/run_out", dir);
    double wall;

    /* Over budget: the default config needs ~11.3 MiB, 3.4 MiB of it replay, so 10 MiB fails but a smaller
     * replay would fit. */
    snprintf(args, sizeof args, "--config %s/configs/td3_pendulum.yaml --set memory.budget_mb=10 --set out_dir=%s",
             RLT_SOURCE_DIR, out_dir);
    int code = run_cli(args, &wall);
    CHECK(code == 3, "over budget exits 3, got %d: %s", code, out_text);
    CHECK(wall < 1.0, "fail-fast took %.3f s (must be well under 1 s)", wall);
    CHECK(!exists(out_dir), "nothing written on failure");
    CHECK(strstr(out_text, "DOES NOT FIT") && strstr(out_text, "replay.obs"), "plan table printed: %s", out_text);
    CHECK(strstr(out_text, "hint: replay.capacity") != NULL, "capacity hint: %s", out_text);
    CHECK(strstr(out_text, "memory.budget_mb") != NULL, "names the budget key");
    /* The groups that set the size, largest first (here activations 4.8 MiB, then the weights' 3.9, then replay). */
    const char *lg = strstr(out_text, "largest: ");
    double mib[3] = {0, 0, 0};
    for (int i = 0; lg && i < 3; i++) {
        const char *num = strpbrk(lg + (i ? 1 : 9), "0123456789");
        mib[i] = num ? strtod(num, NULL) : 0;
        lg = num ? strstr(num, "MiB") : NULL;
    }
    CHECK(lg && mib[2] > 0 && mib[0] >= mib[1] && mib[1] >= mib[2], "largest groups in order: %.2f %.2f %.2f: %s",
          mib[0], mib[1], mib[2], out_text);
    CHECK(strstr(out_text, "largest: activations"), "activations named first: %s", out_text);
    printf("fail-fast exit 3 after %.1f ms\n", wall * 1000);

    /* The capacity the hint proposes fits. */
    const char *h = strstr(out_text, "hint: replay.capacity");
    if (h) h = strstr(h, "-> ");
    long cap = h ? strtol(h + 3, NULL, 10) : 0;
    CHECK(cap > 0, "hint has a number");
    snprintf(args, sizeof args, "--config %s/configs/td3_pendulum.yaml --set memory.budget_mb=10 --set replay.capacity=%ld "
             "--set out_dir=%s --dry-run", RLT_SOURCE_DIR, cap, out_dir);
    code = run_cli(args, NULL);
    CHECK(code == 0, "the hinted capacity %ld fits, got %d: %s", cap, code, out_text);
    CHECK(!exists(out_dir), "dry run writes nothing");

    /* Config errors: exit 2 with file:line:column. */
    FILE *f = fopen("bad.yaml", "w");
    fputs("algo: td3\ntrain:\n  bach_size: 64\n", f);
    fclose(f);
    code = run_cli("--config bad.yaml", NULL);
    CHECK(code == 2, "config error exits 2, got %d", code);
    CHECK(strstr(out_text, "bad.yaml:3:3") && strstr(out_text, "batch_size"), "file:line:col and suggestion: %s", out_text);
    code = run_cli("--config does_not_exist.yaml", NULL);
    CHECK(code == 2, "missing file exits 2, got %d", code);
    code = run_cli("--frobnicate", NULL);
    CHECK(code == 2, "unknown argument exits 2");
    code = run_cli("--help", NULL);
    CHECK(code == 0 && strstr(out_text, "exit codes"), "--help documents exit codes");

    /* A CUDA device that is not usable: exit 4 with the reason (skipped where a GPU works). */
    snprintf(args, sizeof args, "--config %s/configs/td3_pendulum.yaml --set device=cuda:0 --set out_dir=%s --dry-run",
             RLT_SOURCE_DIR, out_dir);
    code = run_cli(args, NULL);
    if (code == 0) printf("cuda:0 is usable here; the exit-4 check is covered by gpu_device_select\n");
    else CHECK(code == 4, "unusable device exits 4, got %d: %s", code, out_text);
    return test_summary("test_failfast");
}
