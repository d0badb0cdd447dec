/* test_cli.c: the CLI's text as a user or a CI log sees it, with stdout and stderr in one pipe or file:
 * - order: the resolved config, the library's log lines, the whole plan table, then the fail-fast message
 *   with its hints as the last thing printed (exit 3); a buffered stdout used to be written after the
 *   error, which then landed in the middle of a table row;
 * - `rltrain plan` when nothing fits: no "largest ... 0" answers, but "nothing fits", and the smallest
 *   budget that fits (the config as given, and at the smallest sizes), each checked to be the smallest;
 * - --help names both algorithms; --json belongs to `rltrain plan` only. */
#include <string.h>
#include <sys/wait.h>

#include "harness.h"

static char out_text[1 << 17];

/* Runs the CLI with args, stdout and stderr into one pipe (to_file 0) or one file (1); returns its exit
 * code and leaves its output in out_text. */
static int run_cli(const char *args, int to_file) {
    char cmd[2048];
    size_t n = 0;
    int st;
    if (to_file) {
        snprintf(cmd, sizeof cmd, "'%s/rltrain' %s > cli_log.txt 2>&1", RLT_BINARY_DIR, args);
        st = system(cmd);
        FILE *f = fopen("cli_log.txt", "r");
        if (f) {
            n = fread(out_text, 1, sizeof out_text - 1, f);
            fclose(f);
        }
    } else {
        snprintf(cmd, sizeof cmd, "'%s/rltrain' %s 2>&1", RLT_BINARY_DIR, args);
        FILE *p = popen(cmd, "r");
        if (!p) return -1;
        n = fread(out_text, 1, sizeof out_text - 1, p);
        st = pclose(p);
    }
    out_text[n] = '\0';
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* 1 when every line in [from, to) starts with one of the prefixes (a table row, the table's heading). */
static int lines_start_with(const char *from, const char *to, const char *a, const char *b) {
    for (const char *line = from; line < to;) {
        const char *end = strchr(line, '\n');
        if (!end) end = line + strlen(line);
        if (end > line && strncmp(line, a, strlen(a)) != 0 && (!b || strncmp(line, b, strlen(b)) != 0)) {
            fprintf(stderr, "unexpected line: %.*s\n", (int)(end - line), line);
            return 0;
        }
        line = *end ? end + 1 : end;
    }
    return 1;
}

/* The fail-fast run: the table whole, then the error and its hints, and nothing after them. */
static void check_order(const char *what, int code) {
    CHECK(code == 3, "%s: over budget exits 3, got %d: %s", what, code, out_text);
    const char *resolved = strstr(out_text, "resolved config (");
    const char *table = strstr(out_text, "memory plan on ");
    const char *budget = strstr(out_text, "  budget 1.00 MiB for the host arena");
    const char *err = strstr(out_text, "rltrain: memory plan does not fit:");
    CHECK(resolved == out_text, "%s: the output starts with the resolved config: %.200s", what, out_text);
    CHECK(table && budget && err && table < budget && budget < err, "%s: config, table, error in this order: %s", what,
          out_text);
    if (!table || !budget || !err || budget < table || err < budget) return;
    const char *table_end = strchr(budget, '\n');
    CHECK(table_end && table_end < err, "%s: the table's last line ends before the error", what);
    /* Every line of the table is whole: a heading or a row (two spaces), no error spliced into one. */
    CHECK(lines_start_with(table, table_end, "memory plan on ", "  "), "%s: table rows are whole", what);
    /* After the error line only its hint lines; the last thing printed is a hint. */
    const char *err_end = strchr(err, '\n');
    CHECK(err_end && lines_start_with(err_end + 1, err + strlen(err), "  ", NULL), "%s: only hints follow the error",
          what);
    CHECK(strstr(err, "hint: memory.budget_mb") != NULL, "%s: the error has its hints: %s", what, err);
    size_t len = strlen(out_text);
    const char *last = out_text + len - 1;
    while (last > out_text && last[-1] != '\n') last--;
    CHECK(strstr(last, "hint:") != NULL, "%s: the last line is a hint: %s", what, last);
}

/* The number after `key` in out_text (0 when missing). */
static long number_after(const char *key) {
    const char *k = strstr(out_text, key);
    return k ? strtol(k + strlen(key), NULL, 10) : 0;
}

int main(void) {
    const char *dir = test_tmpdir("cli");
    CHECK(dir != NULL, "tmpdir");
    char args[1024];

    /* Order in a pipe and in a log file (both buffer stdout fully unless the CLI says otherwise). */
    snprintf(args, sizeof args, "--config %s/configs/td3_pendulum.yaml --set memory.budget_mb=1 --set out_dir=%s/run",
             RLT_SOURCE_DIR, dir);
    check_order("pipe", run_cli(args, 0));
    check_order("file", run_cli(args, 1));

    /* A log line from the library (bf16 falls back to fp32 on the CPU during init) comes where it happened:
     * after the resolved config printed before init, before the table printed after it. */
    snprintf(args, sizeof args, "--config %s/configs/td3_pendulum.yaml --set precision=bf16 --set memory.budget_mb=1 "
             "--set out_dir=%s/run", RLT_SOURCE_DIR, dir);
    int code = run_cli(args, 0);
    CHECK(code == 3, "bf16 over budget exits 3, got %d", code);
    const char *cfg_end = strstr(out_text, "out_dir:");
    const char *log = strstr(out_text, "rltrain: info: precision bf16 requested");
    const char *table = strstr(out_text, "memory plan on ");
    const char *err = strstr(out_text, "rltrain: memory plan does not fit:");
    CHECK(cfg_end && log && table && err && cfg_end < log && log < table && table < err,
          "config, log line, table, error in this order: %s", out_text);

    /* `rltrain plan` when nothing fits by batch or replay: say so, and the smallest budget that fits. */
    snprintf(args, sizeof args, "plan --config %s/configs/td3_pendulum.yaml --budget-mb 4", RLT_SOURCE_DIR);
    code = run_cli(args, 0);
    CHECK(code == 3, "plan over budget exits 3, got %d", code);
    CHECK(!strstr(out_text, "largest train.batch_size 0") && !strstr(out_text, "largest replay.capacity  0"),
          "no answer proposes 0: %s", out_text);
    CHECK(strstr(out_text, "largest train.batch_size none") && strstr(out_text, "largest replay.capacity  none"),
          "says that none fits: %s", out_text);
    CHECK(strstr(out_text, "nothing fits by changing train.batch_size or replay.capacity alone") != NULL,
          "nothing fits by those alone: %s", out_text);
    long given = number_after("memory.budget_mb         ");
    const char *paren = strstr(out_text, "fits this config as given (");
    long smallest = paren ? strtol(paren + strlen("fits this config as given ("), NULL, 10) : 0;
    long min_cap = number_after("with train.batch_size 1 and replay.capacity ");
    printf("plan at 4 MiB: budget %ld MiB fits as given, %ld MiB with batch 1 and capacity %ld\n", given, smallest, min_cap);
    CHECK(given > 4 && smallest > 4 && smallest < given && min_cap >= 1, "budgets %ld, %ld, capacity %ld: %s", given,
          smallest, min_cap, out_text);
    /* Each budget is the smallest whole MiB that fits: it fits and one less does not. */
    for (int less = 0; less <= 1; less++) {
        snprintf(args, sizeof args, "plan --config %s/configs/td3_pendulum.yaml --budget-mb %ld", RLT_SOURCE_DIR,
                 given - less);
        code = run_cli(args, 0);
        CHECK(code == (less ? 3 : 0), "budget %ld: exit %d", given - less, code);
        snprintf(args, sizeof args, "plan --config %s/configs/td3_pendulum.yaml --budget-mb %ld --set train.batch_size=1 "
                 "--set replay.capacity=%ld", RLT_SOURCE_DIR, smallest - less, min_cap);
        code = run_cli(args, 0);
        CHECK(code == (less ? 3 : 0), "smallest sizes at budget %ld: exit %d", smallest - less, code);
    }

    /* --help describes what the tool trains: both algorithms. */
    code = run_cli("--help", 0);
    CHECK(code == 0, "--help exits 0, got %d", code);
    CHECK(strstr(out_text, "TD3") && strstr(out_text, "DQN"), "--help names TD3 and DQN: %s", out_text);
    CHECK(strstr(out_text, "--json") != NULL, "--help documents plan --json");

    /* --json is an option of `rltrain plan` only. */
    snprintf(args, sizeof args, "--config %s/configs/td3_pendulum.yaml --json", RLT_SOURCE_DIR);
    code = run_cli(args, 0);
    CHECK(code == 2 && strstr(out_text, "rltrain plan"), "--json outside plan is a usage error (%d): %s", code, out_text);
    return test_summary("test_cli");
}
