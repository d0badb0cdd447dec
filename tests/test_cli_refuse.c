/* test_cli_refuse.c: the CLI refuses what would silently do the wrong thing, with a message and an exit code:
 * - an empty config (/dev/null, or a file of comments and empty sections) is a config error (2), not a
 *   20,000-step run of defaults;
 * - memory.budget_mb (and --budget-mb, process_budget_mb) above 0 but below one byte is a range error (2);
 * - --set, --budget-mb and --device values reach the config whole, however long (a value of 600 bytes that
 *   is valid only whole is accepted; one too long for its key is refused, not cut);
 * - --resume on a FIFO is refused at once (2) instead of blocking, and so are a FIFO planted as metrics.csv
 *   before a resume (1) and --config naming a FIFO with no writer (2, after 5 s);
 * - --dry-run --resume loads the checkpoint (a damaged one fails, 2); --config or --resume given twice, or
 *   --config without its value, are refused (2) with what was wrong;
 * - a second run into an out_dir holding outputs is refused (2) unless train.overwrite is set;
 * - a run whose checkpoint saves fail (here past `ulimit -f`: SIGXFSZ is ignored, the write fails) exits 1 with
 *   the message, does not print that its outputs were written, and leaves config.yaml whole and no partial file;
 * - errors found after parsing name the key and where it was set (file:line:column, or the --set). */
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "harness.h"

static char out_text[1 << 17];

/* Runs the CLI with args (stdout and stderr together, 20 s at most); returns its exit code. */
static int run_cli(const char *args) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "timeout 20 '%s/rltrain' %s 2>&1", RLT_BINARY_DIR, args);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    size_t n = fread(out_text, 1, sizeof out_text - 1, p);
    out_text[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Runs a shell command line (its own redirections), output into out_text; returns its exit code. */
static int run_shell(const char *line) {
    FILE *p = popen(line, "r");
    if (!p) return -1;
    size_t n = fread(out_text, 1, sizeof out_text - 1, p);
    out_text[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

int main(void) {
    const char *dir = test_tmpdir("cli_refuse");
    char args[3072], path[600], spaces[601];
    memset(spaces, ' ', 600);
    spaces[600] = '\0';
    const char *cfg = RLT_SOURCE_DIR "/configs/td3_pendulum.yaml";

    /* Empty configs. */
    int code = run_cli("--config /dev/null --dry-run");
    CHECK(code == 2 && strstr(out_text, "/dev/null:1:1: the config file sets no key"), "/dev/null (%d): %s", code, out_text);
    snprintf(path, sizeof path, "%s/comments.yaml", dir);
    write_file(path, "# algo: td3\n\ntrain:\n  # total_steps: 100\n");
    snprintf(args, sizeof args, "--config %s --dry-run", path);
    code = run_cli(args);
    CHECK(code == 2 && strstr(out_text, "sets no key"), "comments only (%d): %s", code, out_text);

    /* Budgets below one byte. */
    snprintf(args, sizeof args, "plan --config %s --budget-mb 0.0000001", cfg);
    code = run_cli(args);
    CHECK(code == 2 && strstr(out_text, "key 'memory.budget_mb'") && strstr(out_text, "less than one byte"),
          "--budget-mb 1e-7 (%d): %s", code, out_text);
    snprintf(args, sizeof args, "--config %s --set memory.process_budget_mb=1e-12 --dry-run", cfg);
    code = run_cli(args);
    CHECK(code == 2 && strstr(out_text, "key 'memory.process_budget_mb'") && strstr(out_text, "less than one byte"),
          "process_budget_mb 1e-12 (%d): %s", code, out_text);
    snprintf(args, sizeof args, "--config %s --set memory.budget_mb=0.00000095367431640625 --dry-run", cfg);
    code = run_cli(args);
    CHECK(code == 3, "exactly one byte is a budget (that nothing fits): %d: %s", code, out_text);

    /* Long values reach the config whole: 600 spaces then the value (YAML drops the spaces). */
    snprintf(args, sizeof args, "--config %s --set 'train.total_steps=%s1234' --budget-mb '%s64' --device '%scpu' --dry-run",
             cfg, spaces, spaces, spaces);
    code = run_cli(args);
    CHECK(code == 0 && strstr(out_text, "total_steps: 1234") && strstr(out_text, "budget_mb: 64"),
          "600-byte values are read whole (%d): %.300s", code, out_text);
    snprintf(args, sizeof args, "--config %s --set 'out_dir=%s/%.590s' --dry-run", cfg, dir, spaces);
    for (char *c = strstr(args, "out_dir="); *c != '\''; c++)
        if (*c == ' ') *c = 'a';
    code = run_cli(args);
    CHECK(code == 2 && strstr(out_text, "key 'out_dir': is too long"), "a too-long out_dir is refused (%d): %.400s", code,
          out_text);

    /* --resume on a FIFO. */
    snprintf(path, sizeof path, "%s/fifo.ckpt", dir);
    CHECK(mkfifo(path, 0644) == 0, "mkfifo");
    snprintf(args, sizeof args, "--config %s --set out_dir=%s/fifo_run --resume %s --quiet", cfg, dir, path);
    code = run_cli(args);
    CHECK(code == 2 && strstr(out_text, "not a regular file"), "--resume FIFO (%d): %s", code, out_text);

    /* A second run into an out_dir with outputs; train.overwrite. */
    const char *small = "--set train.total_steps=300 --set train.start_steps=100 --set train.eval_episodes=1 "
                        "--set td3.actor_hidden=[32] --set td3.critic_hidden=[32] --quiet";
    snprintf(args, sizeof args, "--config %s %s --set out_dir=%s/run", cfg, small, dir);
    code = run_cli(args);
    CHECK(code == 0 && strstr(out_text, "outputs written to"), "first run (%d): %s", code, out_text);
    code = run_cli(args);
    CHECK(code == 2 && strstr(out_text, "holds the outputs of an earlier run") && strstr(out_text, "train.overwrite") &&
              !strstr(out_text, "outputs written to"), "second run refused (%d): %s", code, out_text);
    snprintf(args, sizeof args, "--config %s %s --set out_dir=%s/run --set train.overwrite=true", cfg, small, dir);
    code = run_cli(args);
    CHECK(code == 0 && strstr(out_text, "outputs written to"), "train.overwrite=true (%d): %s", code, out_text);
    snprintf(args, sizeof args, "--config %s %s --set out_dir=%s/run --resume %s/run/final.ckpt", cfg, small, dir, dir);
    code = run_cli(args);
    CHECK(code == 0, "resuming from a checkpoint in out_dir is allowed (%d): %s", code, out_text);
    /* --dry-run --resume loads the checkpoint: a damaged one fails there, not only in the real run. */
    snprintf(path, sizeof path, "%s/run/final.ckpt", dir);
    char ck[600];
    snprintf(ck, sizeof ck, "%s/damaged.ckpt", dir);
    {
        static char bytes[1 << 20];
        long n = test_read_file(path, bytes, sizeof bytes);
        if (n > 200) bytes[n / 2] ^= 0x40;
        CHECK(n > 200 && test_write_file(ck, bytes, (size_t)n) == 0, "a damaged copy of final.ckpt");
    }
    snprintf(args, sizeof args, "--config %s %s --set out_dir=%s/run --resume %s --dry-run", cfg, small, dir, ck);
    code = run_cli(args);
    CHECK(code == 2 && strstr(out_text, "damaged.ckpt") && !strstr(out_text, "dry run: the plan fits"),
          "--dry-run --resume of a damaged checkpoint fails (%d): %.300s", code, out_text);
    snprintf(args, sizeof args, "--config %s %s --set out_dir=%s/run --resume %s --dry-run", cfg, small, dir, path);
    code = run_cli(args);
    CHECK(code == 0 && strstr(out_text, "and the checkpoint loads"), "--dry-run --resume of a good one (%d): %.300s",
          code, out_text);
    /* A FIFO planted as metrics.csv before a resume: refused, not read forever. */
    snprintf(path, sizeof path, "%s/run/metrics.csv", dir);
    unlink(path);
    mkfifo(path, 0644);
    snprintf(args, sizeof args, "--config %s %s --set out_dir=%s/run --resume %s/run/final.ckpt", cfg, small, dir, dir);
    code = run_cli(args);
    CHECK(code == 1 && strstr(out_text, "metrics.csv is not a regular file"), "metrics.csv FIFO (%d): %.600s", code,
          out_text);
    unlink(path);
    /* --config naming a FIFO that no process writes: refused after CFG_PIPE_WAIT_S (5 s), not waited on forever. */
    snprintf(path, sizeof path, "%s/config.fifo", dir);
    mkfifo(path, 0644);
    snprintf(args, sizeof args, "--config %s --dry-run", path);
    code = run_cli(args);
    CHECK(code == 2 && strstr(out_text, "no config text arrived"), "--config FIFO (%d): %.300s", code, out_text);
    /* Repeated or valueless --config / --resume. */
    snprintf(args, sizeof args, "--config %s --config %s --dry-run", cfg, cfg);
    code = run_cli(args);
    CHECK(code == 2 && strstr(out_text, "--config is given twice"), "--config twice (%d): %.300s", code, out_text);
    snprintf(args, sizeof args, "--config %s --resume a.ckpt --resume b.ckpt --dry-run", cfg);
    code = run_cli(args);
    CHECK(code == 2 && strstr(out_text, "--resume is given twice"), "--resume twice (%d): %.300s", code, out_text);
    /* Values found wrong after parsing name the key and where it was set; a TD3 config on a Discrete environment
     * is a config error (2). */
    snprintf(args, sizeof args, "--config %s --set env.name=mujoco --dry-run", cfg);
    code = run_cli(args);
    CHECK(code == 2 && strstr(out_text, "--set env.name=mujoco:1:1: key 'env.name': unknown environment"),
          "env.name=mujoco (%d): %.300s", code, out_text);
    snprintf(args, sizeof args, "--config %s --set env.name=cartpole --dry-run", cfg);
    code = run_cli(args);
    CHECK(code == 2 && strstr(out_text, "td3_pendulum.yaml:") && strstr(out_text, "key 'algo': td3 needs"),
          "td3 on cartpole (%d): %.300s", code, out_text);
    /* An RLT_CUDA_MODULE that does not load is named, not taken for a build without the module. */
    snprintf(args, sizeof args, "--config %s --set device=cuda --dry-run", cfg);
    setenv("RLT_CUDA_MODULE", "/nonexistent/librltrain_cuda.so", 1);
    code = run_cli(args);
    unsetenv("RLT_CUDA_MODULE");
    CHECK(code == 4 && strstr(out_text, "RLT_CUDA_MODULE names '/nonexistent/librltrain_cuda.so'"),
          "a bad RLT_CUDA_MODULE (%d): %.400s", code, out_text);
    code = run_cli("--dry-run --config");
    CHECK(code == 2 && strstr(out_text, "--config needs a value") && !strstr(out_text, "unknown argument"),
          "--config without a value (%d): %.300s", code, out_text);
    /* The key's place: the --set that gave it, or the file's line and column. */
    snprintf(args, sizeof args, "--config %s %s --set out_dir=%s/run", cfg, small, dir);
    code = run_cli(args);
    char want[700];
    snprintf(want, sizeof want, "--set out_dir=%s/run:1:1: key 'out_dir'", dir);
    CHECK(code == 2 && strstr(out_text, want), "the refusal names the --set (%d): %s", code, out_text);
    snprintf(path, sizeof path, "%s/run.yaml", dir);
    write_file(path, "algo: td3\n");
    FILE *f = fopen(path, "a");
    if (f) {
        fprintf(f, "# a comment\n\nout_dir: %s/run\n", dir);
        fclose(f);
    }
    snprintf(args, sizeof args, "--config %s %s", path, small);
    code = run_cli(args);
    snprintf(want, sizeof want, "%s:4:1: key 'out_dir'", path);
    CHECK(code == 2 && strstr(out_text, want), "the refusal names the file, line and column (%d): %s", code, out_text);
    write_file(path, "algo: dqn\nenv: {name: cartpole}\ndqn:\n  eps_start: 0.5\n  eps_end: 0.9\n");
    snprintf(args, sizeof args, "--config %s --dry-run", path);
    code = run_cli(args);
    snprintf(want, sizeof want, "%s:5:3: key 'dqn.eps_end': 0.9 is above dqn.eps_start", path);
    CHECK(code == 2 && strstr(out_text, want), "validation names the file, line and column (%d): %s", code, out_text);

    /* The checkpoint saves fail: `ulimit -f` (in the shell's blocks of 512 or 1024 bytes) leaves room for
     * config.yaml and metrics.csv, not for final.ckpt (25 KB). SIGXFSZ is ignored, so the write fails with
     * EFBIG: exit 1 with the message, not a death by signal, and the earlier files stay whole. */
    snprintf(args, sizeof args, "ulimit -f 16; timeout 20 '%s/rltrain' --config %s %s --set out_dir=%s/nosave 2>&1",
             RLT_BINARY_DIR, cfg, small, dir);
    code = run_shell(args);
    CHECK(code == 1 && strstr(out_text, ".ckpt") && strstr(out_text, "File too large") &&
              !strstr(out_text, "outputs written to") && !strstr(out_text, "finished:"),
          "a failed final save exits 1 without 'outputs written' (%d): %s", code, out_text);
    snprintf(path, sizeof path, "%s/nosave/config.yaml", dir);
    char yaml[8192];
    test_read_text(path, yaml, sizeof yaml);
    CHECK(strstr(yaml, "total_steps: 300"), "config.yaml is whole: %.200s", yaml);
    snprintf(path, sizeof path, "%s/nosave/final.ckpt", dir);
    struct stat st;
    CHECK(stat(path, &st) != 0, "no partial final.ckpt");
    snprintf(args, sizeof args, "ls %s/nosave | grep -c tmp", dir);
    run_shell(args);
    CHECK(atoi(out_text) == 0, "no temporary file is left: %s", out_text);
    return test_summary("test_cli_refuse");
}
