/* rltrain.c: the command-line tool, a thin client of include/rltrain.h. It is the only place that exits:
 * 0 success, 1 runtime failure, 2 usage or config error, 3 the memory plan does not fit, 4 the requested
 * device is not usable.
 *
 * Output order: tables and progress go to stdout, errors and the library's log lines to stderr. Both often
 * end up in one pipe or log file (2>&1), where a buffered stdout would be written after a later error, in
 * the middle of a table row. So stdout is line-buffered and everything written to stderr goes through
 * say_error or log_to_stderr, which flush stdout first: lines come out in the order they were printed. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "rltrain.h"

enum { EXIT_OK = 0, EXIT_RUNTIME = 1, EXIT_USAGE = 2, EXIT_NOFIT = 3, EXIT_DEVICE = 4, EXIT_INTERRUPTED = 5 };

static const char *usage_text =
    "usage: rltrain --config FILE [--set key.path=value]... [--resume CKPT] [--dry-run] [--quiet|-q|-qq]\n"
    "       rltrain plan --config FILE [--set key.path=value]... [--budget-mb N] [--device D] [--json]\n"
    "                    [--arch sm_XX --gpu-memory SIZE | --gpu NAME] [--others SIZE]\n"
    "\n"
    "Trains a TD3 agent (algo: td3, continuous actions) or a DQN agent (algo: dqn, discrete actions, MLP or\n"
    "convolutional networks) on a built-in environment (env.name) as the YAML config says. Every byte the\n"
    "run will use is planned, printed and reserved at startup; if it does not fit, rltrain says what to\n"
    "change and exits 3 before writing anything.\n"
    "\n"
    "options:\n"
    "  --config FILE         the YAML config (see configs/)\n"
    "  --set key.path=value  override one key (repeatable), e.g. --set train.total_steps=5000\n"
    "  --resume CKPT         continue the run saved in CKPT (final.ckpt or ckpt_<step>.ckpt of this config); with\n"
    "                        several seeds (train.num_seeds, train.seeds) each resumes from its\n"
    "                        out_dir/seed_<seed>/ file of that name\n"
    "  --dry-run             print the resolved config and the memory plan, then exit (0, or 3 if it does not fit)\n"
    "  --quiet, -q           no progress lines (the resolved config, the memory plan and the closing lines stay)\n"
    "  -qq (--quiet twice)   only errors, warnings and the closing lines\n"
    "  --help, --version\n"
    "  plan                  the memory plan only (same as --dry-run) and what fits; --budget-mb and --device\n"
    "                        override those keys; --json prints one JSON document instead (docs/plan_json.md);\n"
    "                        --arch sm_75 --gpu-memory 6GiB [--others 5.4GiB] (or --gpu t4, a10, l4, a100-40,\n"
    "                        h100, ...) plans for that GPU without one: the arena exactly, the context and\n"
    "                        library handles from a table (docs/described_gpu.md)\n"
    "\n"
    "One process per GPU: under torchrun (RANK, WORLD_SIZE, LOCAL_RANK), srun (SLURM_PROCID, SLURM_NTASKS,\n"
    "SLURM_LOCALID) or mpirun (OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK) with device: cuda, each process is one\n"
    "rank of one data-parallel run on GPU LOCAL_RANK; the ranks meet as dist.rendezvous says (MASTER_ADDR and\n"
    "MASTER_PORT by default). RLT_LAUNCH=none ignores those variables. docs/data_parallel.md has the recipes.\n"
    "\n"
    "SIGINT, SIGTERM or SIGHUP finishes the current step (or stops the evaluation in progress), writes the outputs and\n"
    "final.ckpt, and exits 5. A run into an out_dir that holds an earlier run's outputs is refused (exit 2) unless\n"
    "it resumes from a checkpoint in that out_dir or sets train.overwrite=true, and so is a run or resume into an\n"
    "out_dir that another live run owns (exit 2, naming its pid). A closed stdout stops the progress lines, not\n"
    "the run.\n"
    "\n"
    "exit codes: 0 success, 1 runtime failure, 2 usage or config error, 3 memory plan does not fit,\n"
    "            4 requested device not usable, 5 interrupted (outputs and final.ckpt written)\n";

static int exit_code_for(int status) {
    switch (status) {
    case RLT_OK: return EXIT_OK;
    case RLT_ECONFIG: case RLT_EINVAL: case RLT_EBUSY: return EXIT_USAGE;
    case RLT_ENOFIT: return EXIT_NOFIT;
    case RLT_EDEVICE: return EXIT_DEVICE;
    case RLT_EINTERRUPTED: return EXIT_INTERRUPTED;
    default: return EXIT_RUNTIME;
    }
}

/* The exit code of a run that started: bad input found before anything ran (an out_dir holding an earlier
 * run's outputs, RLT_ECONFIG; one owned by a live run, RLT_EBUSY) is 2, and every other failure, an invalid
 * value met during training included, is 1. */
static int exit_code_for_run(int status) {
    switch (status) {
    case RLT_OK: case RLT_EINTERRUPTED: case RLT_ENOFIT: case RLT_EDEVICE: case RLT_ECONFIG: case RLT_EBUSY:
        return exit_code_for(status);
    default: return EXIT_RUNTIME;
    }
}

/* Every write to stderr: stdout first, so a pipe or file holding both gets them in order. */
static void say_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say_error(const char *fmt, ...) {
    fflush(stdout);
    char text[16384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    /* Messages can quote config values and paths: a control character (an escape sequence in a YAML string)
     * is shown as \xNN, never sent to the terminal raw. Line breaks and tabs of the messages stay. */
    for (const unsigned char *c = (const unsigned char *)text; *c; c++) {
        if ((*c < 0x20 && *c != '\n' && *c != '\t') || *c == 0x7f) fprintf(stderr, "\\x%02x", *c);
        else fputc(*c, stderr);
    }
    fflush(stderr);
}

static void log_to_stderr(void *user, int level, const char *msg) {
    static const char *names[] = {"error", "warning", "info", "debug"};
    (void)user;
    if (level <= RLT_LOG_INFO) say_error("rltrain: %s: %s\n", names[level & 3], msg);
}

static void fmt_time(char *out, size_t cap, double s) {
    if (isnan(s) || s < 0) snprintf(out, cap, "?");
    else if (s < 120) snprintf(out, cap, "%.1fs", s);
    else snprintf(out, cap, "%dm%02ds", (int)(s / 60), (int)fmod(s, 60));
}

/* Progress output must never end the run: SIGPIPE is ignored (main), and once stdout fails (a closed pipe:
 * `rltrain ... | head`, a full disk) the progress lines stop and training goes on. */
static int g_stdout_gone;

static void stdout_check(void) {
    if (fflush(stdout) != 0 || ferror(stdout)) g_stdout_gone = 1;
}

static int print_progress(void *user, const rlt_progress *p) {
    (void)user;
    if (g_stdout_gone) return 0;
    char el[32], eta[32], ev[48];
    fmt_time(el, sizeof el, p->elapsed_s);
    fmt_time(eta, sizeof eta, p->eta_s);
    if (isnan(p->last_eval_return)) snprintf(ev, sizeof ev, "-");
    else snprintf(ev, sizeof ev, "%.1f (best %.1f)", p->last_eval_return, p->best_eval_return);
    char gpu[96] = ""; /* GPU runs: the device's free memory and the co-tenants' (a simulator beside the run) */
    if (!isnan(p->device_free_mib))
        snprintf(gpu, sizeof gpu, " | GPU free %.0f MiB, others %.0f MiB", p->device_free_mib, p->cotenants_mib);
    printf("%s step %lld/%lld | episodes %lld | last return %.1f | eval %s | %.0f updates/s | %.0f steps/s | %s | ETA %s%s\n",
           p->is_eval ? "[eval]" : "      ", (long long)p->env_steps, (long long)p->total_steps, (long long)p->episodes,
           isnan(p->last_episode_return) ? 0.0 : p->last_episode_return, ev, p->updates_per_s, p->env_steps_per_s, el, eta,
           gpu);
    stdout_check();
    return 0;
}

/* One argument as a POSIX shell reads it back: as it is when it holds only safe characters, else in single quotes. */
static void print_shell_word(const char *a) {
    int plain = *a != '\0';
    for (const char *c = a; *c && plain; c++)
        plain = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || strchr("_-./=:,+@%", *c);
    if (plain) {
        fputs(a, stdout);
        return;
    }
    putchar('\'');
    for (const char *c = a; *c; c++)
        if (*c == '\'') fputs("'\\''", stdout);
        else putchar(*c);
    putchar('\'');
}

/* The command that continues this run: the same arguments (every --set), --resume RESUME in place of any other. */
static void print_resume_command(int argc, char **argv, const char *resume) {
    print_shell_word(argv[0]);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--resume")) {
            i++;
            continue;
        }
        putchar(' ');
        print_shell_word(argv[i]);
    }
    fputs(" --resume ", stdout);
    print_shell_word(resume);
}

/* SIGINT, SIGTERM and SIGHUP (a closed terminal or ssh session) ask the run to stop: it finishes the current
 * step, writes its outputs and final.ckpt and exits 5. The handler is installed before main (see
 * install_signals_at_load), so a signal during startup is kept in g_stop and the run stops at its first step. */
static volatile sig_atomic_t g_stop;
static rlt_trainer *volatile g_running; /* the trainer a signal asks to stop */
static rlt_group *volatile g_group;     /* or the seed group */
static int g_argc;             /* the command line, for the command that resumes */
static char **g_argv;

static void on_signal(int sig) {
    (void)sig;
    g_stop = 1;
    if (g_group) rlt_group_request_stop(g_group);
    else if (g_running) rlt_trainer_request_stop(g_running);
}

/* Installed from .preinit_array, before any library's constructor and before main. SIGPIPE is ignored, so a
 * closed stdout makes writes fail (stdout_check) instead of killing the process; SIGXFSZ is ignored, so a
 * write past `ulimit -f` fails with EFBIG and ends the run like any failed write (exit 1, a message, earlier
 * files intact). */
static void install_signals_at_load(int argc, char **argv, char **envp) {
    (void)argc, (void)argv, (void)envp;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    sa.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &sa, NULL);
    sigaction(SIGXFSZ, &sa, NULL);
}

/* A signal that came before the handle existed asks it to stop now. */
static void watch_trainer(rlt_trainer *tr) {
    g_running = tr;
    if (g_stop) rlt_trainer_request_stop(tr);
}

static void watch_group(rlt_group *g) {
    g_group = g;
    if (g_stop) rlt_group_request_stop(g);
}

/* A seed group's progress line: all seeds' steps together and their latest evaluation returns. */
static int print_group_progress(void *user, const rlt_group_report *r) {
    const char *members = user; /* "seeds" or "ranks" */
    char el[32], eta[32], ev[96];
    fmt_time(el, sizeof el, r->elapsed_s);
    fmt_time(eta, sizeof eta, r->eta_s);
    if (!r->n_evaluated) snprintf(ev, sizeof ev, "-");
    else snprintf(ev, sizeof ev, "mean %.1f min %.1f max %.1f (%d of %d)", r->eval_mean, r->eval_min, r->eval_max,
                  r->n_evaluated, r->n_members);
    char gpu[96] = "";
    if (!isnan(r->device_free_mib))
        snprintf(gpu, sizeof gpu, " | GPU free %.0f MiB, others %.0f MiB", r->device_free_mib, r->cotenants_mib);
    printf("%s step %lld/%lld (%d %s) | eval %s | %.0f updates/s | %.0f steps/s | %s | ETA %s%s\n",
           r->is_eval ? "[eval]" : "      ", (long long)r->env_steps, (long long)r->total_steps, r->n_members, members, ev,
           r->updates_per_s, r->env_steps_per_s, el, eta, gpu);
    fflush(stdout);
    return 0;
}

/* 1 when the boolean key is true in cfg. */
static int config_flag(rlt_config *cfg, const char *key) {
    char v[16] = "";
    rlt_config_get(cfg, key, v, sizeof v);
    return strcmp(v, "true") == 0;
}

/* A data-parallel run that failed may leave a GPU's work or NCCL's threads stuck, and freeing them would then wait
 * forever: this thread ends the process with `code` if the clean-up after the failure takes longer than 30 s. */
static int g_watchdog_code;
static void *watchdog_main(void *arg) {
    (void)arg;
    struct timespec ts = {30, 0};
    while (nanosleep(&ts, &ts) != 0) {}
    say_error("rltrain: the clean-up after the failure above did not end in 30 s (a device or NCCL wait that never "
              "ends); exiting without it\n");
    fflush(NULL);
    _exit(g_watchdog_code);
}
static void watchdog_start(int code) {
    pthread_t t;
    g_watchdog_code = code;
    if (pthread_create(&t, NULL, watchdog_main, NULL) == 0) pthread_detach(t);
}

/* A data-parallel run that failed has written its outputs by the time it returns; what is left is freeing devices
 * whose communicators may still be in an abort that was given up on in another thread (kernels/cuda/nccl.c). Freeing
 * them under it, or the CUDA runtime's exit handlers, crashed a rank whose peer was killed (exit 139 on two H200s):
 * the process ends here instead, with its exit code, leaving the rest to the kernel. */
static void dp_failed_exit(int code) {
    fflush(NULL);
    _exit(code);
}

/* An integer environment variable, or -1 when it is unset or not a number 0 .. 65535. */
static long env_int(const char *name) {
    const char *v = getenv(name);
    char *end = NULL;
    if (!v || !*v) return -1;
    long x = strtol(v, &end, 10);
    return *end || x < 0 || x > 65535 ? -1 : x;
}

/* The launchers' variables: this process as one rank of a data-parallel run, one process per device. torchrun's
 * first (RANK, WORLD_SIZE, LOCAL_RANK), then Open MPI's, then Slurm's (srun sets SLURM_STEP_NUM_TASKS for the step;
 * a batch script alone has no step of several tasks). The GPU is the local rank's, or the one GPU left visible
 * (CUDA_VISIBLE_DEVICES of one entry, as srun --gpus-per-task=1 sets it). Returns the world size (0: not launched),
 * or -1 after printing why the variables do not make sense. */
static int launch_from_env(rlt_config *cfg) {
    const char *off = getenv("RLT_LAUNCH");
    if (off && !strcmp(off, "none")) return 0;
    static const char *const names[3][4] = {{"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
                                            {"mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
                                            {"srun", "SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_LOCALID"}};
    for (int i = 0; i < 3; i++) {
        long rank = env_int(names[i][1]), world = env_int(names[i][2]), local = env_int(names[i][3]);
        if (world < 0 && i == 2 && getenv("SLURM_STEP_ID")) world = env_int("SLURM_NTASKS");
        if (rank < 0 || world <= 1) continue;
        if (rank >= world || world > 16) {
            say_error("rltrain: %s says this process is rank %ld of %ld (%s, %s): ranks run 0 .. %ld, at most 16 of them; "
                      "set RLT_LAUNCH=none to run it on its own\n", names[i][0], rank, world, names[i][1], names[i][2],
                      world - 1);
            return -1;
        }
        const char *vis = getenv("CUDA_VISIBLE_DEVICES");
        long gpu = vis && *vis && !strchr(vis, ',') ? 0 : local >= 0 ? local : rank;
        if (rlt_config_set_launch(cfg, (int32_t)rank, (int32_t)world, (int32_t)gpu) != RLT_OK) {
            say_error("rltrain: %s\n", rlt_config_errmsg(cfg));
            return -1;
        }
        printf("launched by %s: rank %ld of %ld (%s=%ld, %s=%ld, %s=%ld); with device: cuda this process takes cuda:%ld\n",
               names[i][0], rank, world, names[i][1], rank, names[i][2], world, names[i][3], local, gpu);
        return (int)world;
    }
    return 0;
}

/* A config with train.num_seeds N > 1 or train.seeds: N trainers in one process (rlt_group_*), each writing
 * out_dir/seed_<seed>/, then out_dir/summary.csv and the mean, min and max of their final evaluations. */
static int group_command(rlt_config *cfg, const char *config_path, const char *resume_path, int dry_run, int quiet,
                         char *text, size_t cap) {
    rlt_group *g = NULL;
    int rc = rlt_group_init(cfg, &g);
    if (g && (quiet < 2 || rc == RLT_ENOFIT) && rlt_group_plan_format(g, text, cap) > 0) printf("%s\n", text);
    /* A data-parallel run is a group whose members are ranks (one per device) of one run, in out_dir/rank_<k>/. */
    const int dp = g && rlt_group_ranks(g) > 0;
    const int pop = g && rlt_group_population_keys(g) > 0;
    const char *members = dp ? "ranks" : pop ? "members" : "seeds";
    const char *member_dir = dp ? "rank_<k>" : pop ? "<member>" : "seed_<seed>";
    if (g && rc == RLT_OK) watch_group(g);
    /* A dry run checks the checkpoints too: it reads them (and changes nothing). */
    if (rc == RLT_OK && resume_path) {
        rc = rlt_group_resume(g, resume_path);
        if (rc != RLT_OK) {
            say_error("rltrain: %s: %s\n", rlt_strerror(rc), rlt_group_errmsg(g));
            g_group = NULL;
            rlt_group_free(g);
            rlt_config_free(cfg);
            free(text);
            return rc == RLT_ECHECKPOINT || rc == RLT_EIO ? EXIT_USAGE : exit_code_for(rc);
        }
    }
    if (rc == RLT_OK && dry_run)
        printf("dry run: the plan fits (%d %s)%s; nothing was written\n", rlt_group_size(g), members,
               resume_path ? " and every checkpoint loads" : "");
    if (rc == RLT_OK && !dry_run) {
        rc = rlt_group_run(g, quiet ? NULL : print_group_progress, (void *)members);
        if (dp && rc != RLT_OK && rc != RLT_EINTERRUPTED) watchdog_start(exit_code_for(rc));
        int32_t n = rlt_group_size(g);
        rlt_group_report r;
        rlt_group_progress(g, &r);
        if (rc != RLT_OK) say_error("rltrain: %s: %s\n", rlt_strerror(rc), rlt_group_errmsg(g));
        if (dp && rc != RLT_OK && rc != RLT_EINTERRUPTED) dp_failed_exit(exit_code_for(rc));
        if (rc == RLT_OK || rc == RLT_EINTERRUPTED) {
            for (int32_t k = 0; k < n; k++) {
                rlt_progress p;
                rlt_trainer_progress(rlt_group_member(g, k), &p);
                if (pop)
                    printf("%s (seed %llu): %lld env steps, %lld updates in %.1fs; final eval %.1f, best %.1f\n",
                           rlt_group_member_dir(g, k), (unsigned long long)rlt_group_seed(g, k), (long long)p.env_steps,
                           (long long)p.updates, p.elapsed_s, p.last_eval_return, p.best_eval_return);
                else
                    printf("%s %llu: %lld env steps, %lld updates in %.1fs; final eval %.1f, best %.1f\n",
                           dp ? "rank" : "seed", dp ? (unsigned long long)rlt_group_rank(g, k) : (unsigned long long)rlt_group_seed(g, k),
                           (long long)p.env_steps, (long long)p.updates, p.elapsed_s, p.last_eval_return,
                           p.best_eval_return);
            }
            if (dp) {
                rlt_progress p0;
                rlt_trainer_progress(rlt_group_member(g, 0), &p0);
                printf("finished a data-parallel run on %d devices: %lld env steps, %lld updates of the whole batch in "
                       "%.1fs (%.0f/s); final eval %.1f\n", (int)rlt_group_ranks(g), (long long)r.env_steps, (long long)p0.updates,
                       r.elapsed_s, r.elapsed_s > 0 ? p0.updates / r.elapsed_s : 0.0, r.eval_mean);
            } else {
                printf("finished %d %s: %lld env steps, %lld updates in %.1fs (%.0f updates/s together); final eval "
                       "mean %.1f, min %.1f, max %.1f\n", n, members, (long long)r.env_steps, (long long)r.updates, r.elapsed_s,
                       r.updates_per_s, r.eval_mean, r.eval_min, r.eval_max);
            }
            const int best_ckpt = config_flag(cfg, "checkpoint.best");
            printf("outputs written to %s/%s/ (config.yaml, metrics.csv, summary.json, final.ckpt%s each) and "
                   "%s/summary.csv\n", rlt_group_out_dir(g), member_dir, best_ckpt ? ", best.ckpt" : "",
                   rlt_group_out_dir(g));
        }
        if (rc == RLT_EINTERRUPTED) {
            printf("interrupted: continue with  ");
            print_resume_command(g_argc, g_argv, "final.ckpt");
            printf("  (each %s from its %s/%s/final.ckpt)\n", dp ? "rank" : "seed", rlt_group_out_dir(g), member_dir);
        }
        g_group = NULL;
        rlt_group_free(g);
        rlt_config_free(cfg);
        free(text);
        return exit_code_for_run(rc);
    } else if (rc != RLT_OK) {
        say_error("rltrain: %s: %s\n", rlt_strerror(rc), g ? rlt_group_errmsg(g) : "out of memory");
        if (rlt_config_ranks(cfg) > 0) {
            watchdog_start(exit_code_for(rc));
            dp_failed_exit(exit_code_for(rc));
        }
    }
    g_group = NULL;
    rlt_group_free(g);
    rlt_config_free(cfg);
    free(text);
    return exit_code_for(rc);
}

static char *text_buffer(size_t n) {
    char *b = malloc(n);
    if (!b) {
        say_error("rltrain: out of memory\n");
        exit(EXIT_RUNTIME);
    }
    return b;
}

static double mib(uint64_t b) { return (double)b / (1024.0 * 1024.0); }

/* `rltrain plan`: the table and the answers; exit 0 when the configured plan fits, 3 when not. */
static int plan_command(rlt_config *cfg, char *text, size_t cap) {
    rlt_fit_report f;
    char err[2048];
    int rc = rlt_plan_fit(cfg, &f, text, cap, err, sizeof err);
    if (rc != RLT_OK) {
        say_error("rltrain: %s: %s\n", rlt_strerror(rc), err);
        rlt_config_free(cfg);
        free(text);
        return exit_code_for(rc);
    }
    char batch[32], capacity[32];
    rlt_config_get(cfg, "train.batch_size", batch, sizeof batch);
    rlt_config_get(cfg, "replay.capacity", capacity, sizeof capacity);
    printf("%s\n", text);
    printf("what fits in %.2f MiB (memory.budget_mb, or the device's free memory or the host's memory limit if smaller):\n",
           mib(f.limit_bytes));
    printf("  this config needs        %.2f MiB -> %s\n", mib(f.need_bytes), f.fits ? "fits" : "DOES NOT FIT");
    /* A seed group reserves one arena per seed: the budget holds them all (rlt_group_init checks the same). */
    /* A data-parallel run's plan is one rank's (its device, its share of the batch and replay); the device list and
     * seed group lines say so. With several devices the budget holds each device's arena on its own. */
    int32_t ranks = rlt_config_ranks(cfg);
    if (ranks > 0)
        printf("  (per device: a data-parallel run on %d devices, each rank with batch_size / %d and replay.capacity / "
               "%d; the answers below are one rank's)\n", ranks, ranks, ranks);
    int32_t seeds = ranks > 0 ? 0 : rlt_group_count(cfg);
    /* The group's members as it makes them: with train.seed_batching on a GPU the leading seed's arena also holds the
     * batched library workspace (rlt_plan_group), which rlt_group_init's check counts too. */
    uint64_t first = f.need_bytes, each = f.need_bytes;
    if (seeds > 0 && rlt_plan_group(cfg, &first, &each, err, sizeof err) != RLT_OK) first = each = f.need_bytes;
    const int32_t leads = seeds > 0 && first != each ? rlt_plan_group_leads(cfg) : 1;
    double group_mib = seeds > 0 ? mib(first) * leads + mib(each) * (seeds - leads) : 0.0;
    int group_fits = seeds < 1 || group_mib <= mib(f.limit_bytes);
    if (seeds > 0 && first == each)
        printf("  %d seeds (a seed group)  %.2f MiB (%d x %.2f MiB) -> %s\n", seeds, group_mib, seeds, mib(each),
               group_fits ? "fits" : "DOES NOT FIT");
    else if (seeds > 0 && leads == 1)
        printf("  %d seeds (a seed group)  %.2f MiB (%.2f MiB for the leading seed, which holds the batched library "
               "workspace, + %d x %.2f MiB) -> %s\n", seeds, group_mib, mib(first), seeds - 1, mib(each),
               group_fits ? "fits" : "DOES NOT FIT");
    else if (seeds > 0)
        printf("  %d seeds (a seed group)  %.2f MiB (%d x %.2f MiB for each batch's leading seed, which holds its "
               "batch's library workspace, + %d x %.2f MiB) -> %s\n", seeds, group_mib, (int)leads, mib(first),
               seeds - leads, mib(each), group_fits ? "fits" : "DOES NOT FIT");
    /* The seed count that fits, as --dry-run's refusal says it (the other leads counted as taken); the answers below
     * are for one seed. */
    if (seeds > 0 && !group_fits && each > 0) {
        const uint64_t taken = (uint64_t)(leads - 1) * (first - each);
        long long most = f.limit_bytes < first + taken ? 0 : 1 + (long long)((f.limit_bytes - first - taken) / each);
        if (most > 0)
            printf("  train.num_seeds          %lld fit (hint: train.num_seeds: %lld, or memory.budget_mb: %.0f for %d)\n",
                   most, most, ceil(group_mib), seeds);
        else
            printf("  train.num_seeds          none: not even 1 seed fits (the answers below are for one seed)\n");
    }
    /* 0 means that not even the smallest value fits: say so instead of proposing 0. */
    if (f.max_batch_size > 0) printf("  largest train.batch_size %d (one micro-batch)\n", f.max_batch_size);
    else printf("  largest train.batch_size none: not even 1 fits (with replay.capacity %s)\n", capacity);
    if (f.max_replay_capacity > 0) printf("  largest replay.capacity  %lld (with this batch)\n", (long long)f.max_replay_capacity);
    else printf("  largest replay.capacity  none: not even %lld fits (with train.batch_size %s)\n",
                (long long)f.min_replay_capacity, batch);
    if (f.min_grad_accum_steps)
        printf("  train.grad_accum_steps   %d (micro-batches of %d) makes this batch fit; memory.auto_fit: true picks it\n",
               f.min_grad_accum_steps, f.micro_batch);
    else
        printf("  no micro-batch size makes this batch fit: shrink the replay or the networks\n");
    if (!f.fits) {
        /* Nothing to shrink alone: the need at the smallest sizes says whether shrinking both is enough. */
        if (f.max_batch_size <= 0 && f.max_replay_capacity <= 0 && !f.min_grad_accum_steps)
            printf("  nothing fits by changing train.batch_size or replay.capacity alone: with train.batch_size 1 and "
                   "replay.capacity %lld the plan needs %.2f MiB%s\n",
                   (long long)f.min_replay_capacity, mib(f.min_need_bytes),
                   f.min_need_bytes <= f.limit_bytes ? " and fits" : "");
        /* The smallest budget that fits: the config as given, and the least that batch and replay can reach. */
        if (f.fit_budget_bytes) {
            printf("  memory.budget_mb         %.0f fits this config as given", mib(f.fit_budget_bytes));
            if (f.min_need_bytes > f.limit_bytes && f.min_fit_budget_bytes)
                printf(" (%.0f with train.batch_size 1 and replay.capacity %lld)", mib(f.min_fit_budget_bytes),
                       (long long)f.min_replay_capacity);
            printf("\n");
        } else {
            printf("  no memory.budget_mb fits: the device's free memory or the host's memory limit (see the table) is "
                   "the limit; free some, raise the limit or use another device\n");
        }
    }
    rlt_config_free(cfg);
    free(text);
    return f.fits && group_fits ? EXIT_OK : EXIT_NOFIT;
}

/* ---- a described GPU for `rltrain plan` (--arch, --gpu-memory, --others, --gpu) ---------------------- */

/* "6GiB", "5.4 GiB", "6144MiB", "6GB", "512M", plain bytes: bytes into *out; 0 when the text is none of them. */
static int parse_size(const char *text, uint64_t *out) {
    char *end;
    double v = strtod(text, &end);
    while (*end == ' ') end++;
    double unit = !*end || !strcmp(end, "B") ? 1.0
                  : !strcmp(end, "KiB") || !strcmp(end, "K") ? 1024.0
                  : !strcmp(end, "MiB") || !strcmp(end, "M") ? 1048576.0
                  : !strcmp(end, "GiB") || !strcmp(end, "G") ? 1073741824.0
                  : !strcmp(end, "KB") ? 1e3 : !strcmp(end, "MB") ? 1e6 : !strcmp(end, "GB") ? 1e9 : 0.0;
    if (end == text || unit == 0.0 || !(v >= 0) || v * unit > 1e15) return 0;
    *out = (uint64_t)(v * unit + 0.5);
    return 1;
}

/* Named GPUs for --gpu: the architecture and the memory nvidia-smi shows as the total (MiB). */
static const struct { const char *name; int32_t arch; uint64_t mib; } k_gpus[] = {
    {"t4", 75, 15360},       {"rtx2080", 75, 8192},  {"rtx3060", 86, 12288}, {"a10", 86, 23028},
    {"l4", 89, 23034},       {"rtx4090", 89, 24564}, {"a100-40", 80, 40960}, {"a100-80", 80, 81920},
    {"h100", 90, 81559},     {"h200", 90, 143771},
};

/* --arch sm_75 (or 75, 7.5): the compute capability as major * 10 + minor; 0 when it is none. */
static int32_t parse_arch(const char *text) {
    if (!strncmp(text, "sm_", 3)) text += 3;
    char *end;
    double v = strtod(text, &end);
    if (end == text || *end) return 0;
    return strchr(text, '.') ? (int32_t)(v * 10 + 0.5) : (int32_t)v;
}

/* Applies --gpu / --arch / --gpu-memory / --others to cfg (rlt_config_describe_gpu); EXIT_OK or a usage error. */
static int describe_gpu(rlt_config *cfg, const char *gpu, const char *arch, const char *memory, const char *others) {
    int32_t a = 0;
    uint64_t mem = 0, oth = 0;
    if (gpu) {
        size_t i = 0;
        while (i < sizeof k_gpus / sizeof k_gpus[0] && strcmp(k_gpus[i].name, gpu)) i++;
        if (i == sizeof k_gpus / sizeof k_gpus[0]) {
            say_error("rltrain: --gpu %s: not a known GPU; known: t4, rtx2080, rtx3060, a10, l4, rtx4090, a100-40, "
                      "a100-80, h100, h200 (or give --arch and --gpu-memory)\n", gpu);
            return EXIT_USAGE;
        }
        a = k_gpus[i].arch, mem = k_gpus[i].mib << 20;
    }
    if (arch && !(a = parse_arch(arch))) {
        say_error("rltrain: --arch %s: give the compute capability, such as sm_75, sm_86 or sm_90\n", arch);
        return EXIT_USAGE;
    }
    if (memory && !parse_size(memory, &mem)) {
        say_error("rltrain: --gpu-memory %s: give a size such as 6GiB or 6144MiB\n", memory);
        return EXIT_USAGE;
    }
    if (others && !parse_size(others, &oth)) {
        say_error("rltrain: --others %s: give a size such as 5.4GiB\n", others);
        return EXIT_USAGE;
    }
    if (!a || !mem) {
        say_error("rltrain: a described GPU needs --arch and --gpu-memory (or --gpu NAME)\n");
        return EXIT_USAGE;
    }
    char device[32] = "";
    rlt_config_get(cfg, "device", device, sizeof device);
    if (!strcmp(device, "cpu")) {
        say_error("rltrain: the described GPU is for device cuda; add --device cuda\n");
        return EXIT_USAGE;
    }
    if (rlt_config_describe_gpu(cfg, mem, a, oth) != RLT_OK) {
        say_error("rltrain: %s\n", rlt_config_errmsg(cfg));
        return EXIT_USAGE;
    }
    return EXIT_OK;
}

/* `rltrain plan --json`: the same answers as one JSON document on stdout (docs/plan_json.md), nothing else
 * there; exit 0 when the configured plan fits, 3 when not. */
static int plan_json_command(rlt_config *cfg) {
    char err[2048];
    size_t cap = 1 << 16, len = 0;
    int32_t fits = 0;
    char *json = text_buffer(cap);
    int rc = rlt_plan_fit_json(cfg, json, cap, &len, &fits, err, sizeof err);
    if (rc == RLT_EINVAL && len >= cap) { /* a larger plan than usual: once more with the size it needs */
        free(json);
        cap = len + 1;
        json = text_buffer(cap);
        rc = rlt_plan_fit_json(cfg, json, cap, &len, &fits, err, sizeof err);
    }
    if (rc != RLT_OK) say_error("rltrain: %s: %s\n", rlt_strerror(rc), err);
    else fputs(json, stdout);
    free(json);
    rlt_config_free(cfg);
    return rc != RLT_OK ? exit_code_for(rc) : fits ? EXIT_OK : EXIT_NOFIT;
}

/* OpenBLAS starts its threads when it is loaded, before main, and each takes 128 MiB of address space for its
 * buffer, retrying forever when it cannot (or exiting when the thread cannot start). So under an address-space
 * or data limit (ulimit -v, ulimit -d) the CLI runs with OPENBLAS_NUM_THREADS=1, which starts none: the library
 * sets OpenBLAS's thread count itself when it opens the CPU backend, after checking that the limit leaves room
 * (kernels/cpu/cpu_backend.c), so the variable decides nothing else. It has to be in the environment before
 * OpenBLAS's constructor runs. Functions in .preinit_array run before any shared library's constructor, but
 * libc's own constructor then resets the environment to the one the process started with, so a setenv here
 * would be lost: the process executes itself again with the variable added, once (it is then present). */
static void limit_blas_threads_at_load(int argc, char **argv, char **envp) {
    (void)argc;
    struct rlimit as, data;
    int limited = (getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY) ||
                  (getrlimit(RLIMIT_DATA, &data) == 0 && data.rlim_cur != RLIM_INFINITY);
    if (!limited || !envp) return;
    static const char want[] = "OPENBLAS_NUM_THREADS=1", key[] = "OPENBLAS_NUM_THREADS=";
    size_t n = 0;
    for (; envp[n]; n++)
        if (!strcmp(envp[n], want)) return;
    char *env[n + 2];
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(envp[i], key, sizeof key - 1) != 0) env[m++] = envp[i];
    env[m++] = (char *)want;
    env[m] = NULL;
    execve("/proc/self/exe", argv, env); /* returns only on failure: then go on as before */
}
__attribute__((section(".preinit_array"), used)) static void (*const preinit_signals)(int, char **, char **) =
    install_signals_at_load;
__attribute__((section(".preinit_array"), used)) static void (*const preinit_blas_threads)(int, char **, char **) =
    limit_blas_threads_at_load;

int main(int argc, char **argv) {
    const char *config_path = NULL, *resume_path = NULL;
    const char *gpu = NULL, *gpu_arch = NULL, *gpu_memory = NULL, *gpu_others = NULL; /* a described GPU (plan) */
    int dry_run = 0, quiet = 0, json = 0, argi = 1;
    setvbuf(stdout, NULL, _IOLBF, 0); /* whole lines, in order with stderr (see the top of this file) */
    g_argc = argc;
    g_argv = argv;
    if (argc > 1 && strcmp(argv[1], "plan") == 0) {
        dry_run = 1;
        argi = 2;
    }
    rlt_log_set_callback(log_to_stderr, NULL);
    rlt_config *cfg = NULL;
    if (rlt_config_init(&cfg) != RLT_OK) {
        say_error("rltrain: out of memory\n");
        return EXIT_RUNTIME;
    }
    /* First pass: options that do not depend on the config file. */
    for (int i = argi; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(usage_text, stdout);
            rlt_config_free(cfg);
            return EXIT_OK;
        } else if (!strcmp(argv[i], "--version")) {
            printf("rltrain %s\n", rlt_version_string());
            rlt_config_free(cfg);
            return EXIT_OK;
        } else if (!strcmp(argv[i], "--config") || !strcmp(argv[i], "--resume")) {
            const char **slot = argv[i][2] == 'c' ? &config_path : &resume_path;
            if (i + 1 >= argc) {
                say_error("rltrain: %s needs a value (%s)\n\n%s", argv[i], argv[i][2] == 'c' ? "FILE" : "CKPT", usage_text);
                rlt_config_free(cfg);
                return EXIT_USAGE;
            }
            /* A second one would silently win over (or lose to) the first: say which were given. */
            if (*slot) {
                say_error("rltrain: %s is given twice ('%s' and '%s'); give it once\n", argv[i], *slot, argv[i + 1]);
                rlt_config_free(cfg);
                return EXIT_USAGE;
            }
            *slot = argv[++i];
        } else if (!strcmp(argv[i], "--set") || !strcmp(argv[i], "--budget-mb") || !strcmp(argv[i], "--device")) {
            if (i + 1 >= argc) {
                say_error("rltrain: %s needs a value\n\n%s", argv[i], usage_text);
                rlt_config_free(cfg);
                return EXIT_USAGE;
            }
            /* `--set train.batch_size 64`: the value went into an argument of its own. */
            if (!strcmp(argv[i], "--set") && !strchr(argv[i + 1], '=')) {
                int spaced = i + 2 < argc && strncmp(argv[i + 2], "--", 2) != 0;
                say_error("rltrain: --set takes key=value as one argument, such as --set %s=%s%s\n", argv[i + 1],
                          spaced ? argv[i + 2] : "VALUE", spaced ? " (with '=', not a space)" : "");
                rlt_config_free(cfg);
                return EXIT_USAGE;
            }
            i++;
        } else if (argi == 2 && (!strcmp(argv[i], "--gpu") || !strcmp(argv[i], "--arch") ||
                                 !strcmp(argv[i], "--gpu-memory") || !strcmp(argv[i], "--others"))) {
            if (i + 1 >= argc) {
                say_error("rltrain: %s needs a value\n\n%s", argv[i], usage_text);
                rlt_config_free(cfg);
                return EXIT_USAGE;
            }
            const char **slot = !strcmp(argv[i], "--gpu") ? &gpu : !strcmp(argv[i], "--arch") ? &gpu_arch
                                : !strcmp(argv[i], "--gpu-memory") ? &gpu_memory : &gpu_others;
            *slot = argv[++i];
        } else if (!strcmp(argv[i], "--dry-run")) {
            dry_run = 1;
        } else if (!strcmp(argv[i], "--quiet") || !strcmp(argv[i], "-q")) {
            quiet++;
        } else if (!strcmp(argv[i], "-qq")) {
            quiet += 2;
        } else if (!strcmp(argv[i], "--json") && argi == 2) {
            json = 1;
        } else if (!strcmp(argv[i], "--json")) {
            say_error("rltrain: --json is an option of `rltrain plan`\n\n%s", usage_text);
            rlt_config_free(cfg);
            return EXIT_USAGE;
        } else {
            say_error("rltrain: unknown argument '%s'\n\n%s", argv[i], usage_text);
            rlt_config_free(cfg);
            return EXIT_USAGE;
        }
    }
    if (!config_path) {
        say_error("rltrain: --config FILE is required\n\n%s", usage_text);
        rlt_config_free(cfg);
        return EXIT_USAGE;
    }
    int rc = rlt_config_load_file(cfg, config_path);
    /* Second pass: overrides, in order, over the file. Each value goes to the library whole (a copy of its
     * length, not a fixed buffer that would cut it): the key's own limits refuse what is too long. */
    for (int i = argi; rc == RLT_OK && i < argc; i++) {
        const char *key;
        if (!strcmp(argv[i], "--set")) key = "";
        else if (!strcmp(argv[i], "--budget-mb")) key = "memory.budget_mb=";
        else if (!strcmp(argv[i], "--device")) key = "device=";
        else {
            if (!strcmp(argv[i], "--config") || !strcmp(argv[i], "--resume") || !strcmp(argv[i], "--gpu") ||
                !strcmp(argv[i], "--arch") || !strcmp(argv[i], "--gpu-memory") || !strcmp(argv[i], "--others"))
                i++;
            continue;
        }
        const char *value = argv[++i];
        char *assign = text_buffer(strlen(key) + strlen(value) + 1);
        snprintf(assign, strlen(key) + strlen(value) + 1, "%s%s", key, value);
        rc = rlt_config_set(cfg, assign);
        free(assign);
    }
    if (rc == RLT_OK && argi == 1 && launch_from_env(cfg) < 0) {
        rlt_config_free(cfg);
        return EXIT_USAGE;
    }
    if (rc == RLT_OK) rc = rlt_config_validate(cfg);
    if (rc != RLT_OK) {
        say_error("rltrain: %s\n", rlt_config_errmsg(cfg));
        rlt_config_free(cfg);
        return exit_code_for(rc == RLT_EIO ? RLT_ECONFIG : rc);
    }
    if (gpu || gpu_arch || gpu_memory || gpu_others) {
        int urc = describe_gpu(cfg, gpu, gpu_arch, gpu_memory, gpu_others);
        if (urc != EXIT_OK) {
            rlt_config_free(cfg);
            return urc;
        }
    }
    if (json) return plan_json_command(cfg);
    size_t cap = 1 << 16;
    char *text = text_buffer(cap);
    rlt_config_dump(cfg, text, cap);
    if (quiet < 2 || argi == 2) printf("resolved config (%s):\n%s\n", config_path, text);
    if (argi == 2) return plan_command(cfg, text, cap);
    if (rlt_group_count(cfg) > 0) return group_command(cfg, config_path, resume_path, dry_run, quiet, text, cap);

    rlt_trainer *tr = NULL;
    rc = rlt_trainer_init(cfg, &tr);
    rlt_plan_summary ps;
    if (tr && rlt_trainer_memory_plan(tr, &ps, NULL) == RLT_OK && ps.n_entries > 0 && (quiet < 2 || rc == RLT_ENOFIT)) {
        rlt_trainer_plan_format(tr, text, cap);
        printf("%s\n", text);
    }
    if (rc != RLT_OK) {
        say_error("rltrain: %s: %s\n", rlt_strerror(rc), tr ? rlt_trainer_errmsg(tr) : "out of memory");
        rlt_trainer_free(tr);
        rlt_config_free(cfg);
        free(text);
        return exit_code_for(rc);
    }
    watch_trainer(tr);
    /* A dry run checks the checkpoint too: it reads it (and changes nothing). */
    if (resume_path) {
        rc = rlt_trainer_resume(tr, resume_path);
        if (rc != RLT_OK) {
            say_error("rltrain: %s: %s\n", rlt_strerror(rc), rlt_trainer_errmsg(tr));
            g_running = NULL;
            rlt_trainer_free(tr);
            rlt_config_free(cfg);
            free(text);
            return rc == RLT_ECHECKPOINT || rc == RLT_EIO ? EXIT_USAGE : exit_code_for(rc);
        }
    }
    if (dry_run) {
        printf("dry run: the plan fits%s; nothing was written\n", resume_path ? " and the checkpoint loads" : "");
        g_running = NULL;
        rlt_trainer_free(tr);
        rlt_config_free(cfg);
        free(text);
        return EXIT_OK;
    }
    rlt_progress p0;
    rlt_trainer_progress(tr, &p0); /* a resumed run's counts at its start */
    rc = rlt_trainer_run(tr, quiet ? NULL : print_progress, NULL);
    rlt_progress p;
    rlt_trainer_progress(tr, &p);
    if (rc != RLT_OK) say_error("rltrain: %s: %s\n", rlt_strerror(rc), rlt_trainer_errmsg(tr));
    /* The library returns OK or EINTERRUPTED only when every output was written; after another failure it
     * logs what it wrote. */
    if (rc == RLT_OK || rc == RLT_EINTERRUPTED) {
        if (resume_path) /* the rate is this process's: its updates over its time */
            printf("finished: %lld env steps, %lld updates (%lld of them in %.1fs since the resume at step %lld, %.0f "
                   "updates/s); final eval %.1f, best %.1f\n", (long long)p.env_steps, (long long)p.updates,
                   (long long)(p.updates - p0.updates), p.elapsed_s, (long long)p0.env_steps, p.updates_per_s,
                   p.last_eval_return, p.best_eval_return);
        else
            printf("finished: %lld env steps, %lld updates in %.1fs (%.0f updates/s); final eval %.1f, best %.1f\n",
                   (long long)p.env_steps, (long long)p.updates, p.elapsed_s, p.updates_per_s, p.last_eval_return,
                   p.best_eval_return);
        const int best_ckpt = config_flag(cfg, "checkpoint.best");
        printf("outputs written to %s/ (config.yaml, metrics.csv, summary.json, final.ckpt%s)\n", rlt_trainer_out_dir(tr),
               best_ckpt ? ", best.ckpt" : "");
    }
    if (rc == RLT_EINTERRUPTED) {
        char resume[1100];
        snprintf(resume, sizeof resume, "%s/final.ckpt", rlt_trainer_out_dir(tr));
        printf("interrupted: continue with  ");
        print_resume_command(g_argc, g_argv, resume);
        printf("\n");
    }
    g_running = NULL;
    rlt_trainer_free(tr);
    rlt_config_free(cfg);
    free(text);
    return exit_code_for_run(rc);
}
