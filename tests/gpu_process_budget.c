/* gpu_process_budget.c: the whole process's device memory (memory.process_budget_mb) against NVML, the source
 * nvidia-smi reads, loaded with dlopen as the backend loads it.
 *  1. td3_lowmem on cuda:0 fits its 16 MiB arena: no op of its 64-64 networks calls cuBLAS, so its plan has no
 *     cuBLAS workspace and the process no cuBLAS handle.
 *  2. The whole-process total that `rltrain plan` predicts (nothing reserved yet) and the one the trainer's table
 *     prints after init are both within 5% of what NVML reports for this process while it trains, and NVML's
 *     figure does not change from one progress report to the next (nothing is allocated after init).
 *  3. A plan with an op that calls cuBLAS (a 1536-wide critic layer) gets the cuBLAS workspace and handle, which
 *     the table counts as a library handle, and its printed total is within 5% of NVML's too.
 *  4. A process budget below the CUDA context's size exits 3 within 5 s, before anything is reserved, with a
 *     message naming memory.process_budget_mb and the hints, and writes nothing.
 * Why 5%: the figures are measurements of the same memory at different moments; what may differ is driver
 * bookkeeping of a few MiB against a total of about 540 MiB (the H100's context alone is ~527 MiB).
 * Each scenario runs in a child process of its own, which starts without a CUDA context. Skipped (77) only when
 * no GPU is usable; a GPU without a loadable NVML fails, so the comparison never passes vacuously. Where NVML
 * lists no process with our pid (a container with its own pid namespace), the process's usage is read as the
 * GPU's used memory taken since the scenario began, and the output says so. */
#include <dlfcn.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backend_registry.h"
#include "harness.h"

#define MIB (1024.0 * 1024.0)

/* ---- NVML, the few calls used (nvml.h's declarations, whose ABI is stable) ---- */
typedef struct {
    unsigned long long total, free, used;
} nvml_memory;
typedef struct {
    unsigned int pid;
    unsigned long long used;
    unsigned int gpu_instance, compute_instance;
} nvml_process; /* nvmlProcessInfo_v2_t, what the _v3 query fills */

typedef struct {
    void *lib;
    unsigned int n_dev;
    void *dev[8];
    int (*memory)(void *, nvml_memory *);
    int (*procs)(void *, unsigned int *, nvml_process *);
} nvml;

static int nvml_load(nvml *N) {
    memset(N, 0, sizeof *N);
    N->lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!N->lib) return 0;
    int (*init)(void) = (int (*)(void))dlsym(N->lib, "nvmlInit_v2");
    int (*count)(unsigned int *) = (int (*)(unsigned int *))dlsym(N->lib, "nvmlDeviceGetCount_v2");
    int (*by_index)(unsigned int, void **) = (int (*)(unsigned int, void **))dlsym(N->lib, "nvmlDeviceGetHandleByIndex_v2");
    N->memory = (int (*)(void *, nvml_memory *))dlsym(N->lib, "nvmlDeviceGetMemoryInfo");
    N->procs = (int (*)(void *, unsigned int *, nvml_process *))dlsym(N->lib, "nvmlDeviceGetComputeRunningProcesses_v3");
    if (!init || !count || !by_index || !N->memory || !N->procs || init() != 0 || count(&N->n_dev) != 0) return 0;
    if (N->n_dev > 8) N->n_dev = 8;
    for (unsigned int i = 0; i < N->n_dev; i++)
        if (by_index(i, &N->dev[i]) != 0) return 0;
    return N->n_dev > 0;
}

/* Used memory summed over the GPUs (which one is cuda:0 does not matter: the other GPUs do not change). */
static double nvml_used(const nvml *N) {
    double used = 0;
    for (unsigned int i = 0; i < N->n_dev; i++) {
        nvml_memory m;
        if (N->memory(N->dev[i], &m) == 0) used += (double)(m.total - m.free);
    }
    return used;
}

/* This process's usedGpuMemory over the GPUs; *listed = 0 when no GPU lists our pid. */
static double nvml_pid_used(const nvml *N, int *listed) {
    double used = 0;
    *listed = 0;
    for (unsigned int i = 0; i < N->n_dev; i++) {
        nvml_process p[64];
        unsigned int n = 64;
        if (N->procs(N->dev[i], &n, p) != 0) continue;
        for (unsigned int k = 0; k < n; k++)
            if (p[k].pid == (unsigned int)getpid() && p[k].used != ~0ull) {
                used += (double)p[k].used;
                *listed = 1;
            }
    }
    return used;
}

/* What this process holds on its GPUs: NVML's figure for our pid, or the GPUs' used memory since `base`. */
static double process_held(const nvml *N, double base, const char **how) {
    int listed = 0;
    double used = nvml_pid_used(N, &listed);
    *how = listed ? "NVML usedGpuMemory of this pid"
                  : "NVML used memory since the scenario began (no process with this pid is listed: pid namespace)";
    return listed ? used : nvml_used(N) - base;
}

/* The GPUs' used memory once the previous scenario's process has been cleaned up (it changes no more). */
static double nvml_settled(const nvml *N) {
    double last = nvml_used(N);
    for (int i = 0, same = 0; i < 100 && same < 3; i++) {
        usleep(20000);
        double now = nvml_used(N);
        same = now == last ? same + 1 : 0;
        last = now;
    }
    return last;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* "540.20 MiB" after `key` ... " = " on the table's whole-process line, in bytes (-1: not there). */
static double printed_total(const char *table) {
    const char *line = strstr(table, "whole process on the device:");
    const char *eq = line ? strstr(line, " = ") : NULL;
    if (!eq) return -1;
    char *end = NULL;
    double v = strtod(eq + 3, &end);
    while (end && *end == ' ') end++;
    if (!end) return -1;
    if (!strncmp(end, "GiB", 3)) return v * 1024 * MIB;
    if (!strncmp(end, "MiB", 3)) return v * MIB;
    if (!strncmp(end, "KiB", 3)) return v * 1024;
    return v;
}

static rlt_config *lowmem_cuda(const char *const *sets, const char *out_dir) {
    rlt_config *cfg = NULL;
    CHECK(rlt_config_init(&cfg) == RLT_OK, "config");
    CHECK(rlt_config_load_file(cfg, RLT_SOURCE_DIR "/configs/td3_lowmem.yaml") == RLT_OK, "load: %s",
          rlt_config_errmsg(cfg));
    char od[700];
    snprintf(od, sizeof od, "out_dir=%s", out_dir);
    const char *base[] = {"device=cuda:0", "train.total_steps=3000", "train.eval_every=0", "train.eval_episodes=1",
                          "train.progress_every_s=0.05", od, NULL};
    for (int i = 0; base[i]; i++) CHECK(rlt_config_set(cfg, base[i]) == RLT_OK, "%s", base[i]);
    for (; sets && *sets; sets++) CHECK(rlt_config_set(cfg, *sets) == RLT_OK, "%s: %s", *sets, rlt_config_errmsg(cfg));
    return cfg;
}

typedef struct {
    const nvml *N;
    double base, first, lo, hi;
    int reports;
    const char *how;
} watch;

/* Each progress report once updates run: NVML's figure for the process, whose spread must be nil. */
static int on_progress(void *user, const rlt_progress *p) {
    watch *w = user;
    if (p->updates < 1) return 0;
    double held = process_held(w->N, w->base, &w->how);
    if (!w->reports++) w->first = w->lo = w->hi = held;
    w->lo = held < w->lo ? held : w->lo;
    w->hi = held > w->hi ? held : w->hi;
    return 0;
}

/* The scenario the next child runs (set before the fork, so the child inherits it). */
static const char *g_name;
static const char *const *g_sets;
static int g_expect_blas;
static double g_planned;
static int g_pipe[2];

/* The prediction, as `rltrain plan` makes it (the configured plan's table; nothing reserved), in a process of its
 * own: the planner's probes may create a cuBLAS handle, whose loaded kernels would stay in the process. */
static void scenario_plan(void) {
    static char table[1 << 16];
    rlt_config *cfg = lowmem_cuda(g_sets, "unused");
    rlt_fit_report f;
    char err[2048] = "";
    CHECK(rlt_plan_fit(cfg, &f, table, sizeof table, err, sizeof err) == RLT_OK, "%s: plan: %s", g_name, err);
    double planned = printed_total(table);
    printf("%s: rltrain plan's table:\n%s\n", g_name, table);
    CHECK(write(g_pipe[1], &planned, sizeof planned) == (ssize_t)sizeof planned, "pipe");
    rlt_config_free(cfg);
}

/* Trains g_sets on cuda:0 and compares the printed and the planned totals with NVML. */
static void scenario_train(void) {
    const char *name = g_name;
    const char *const *sets = g_sets;
    int expect_blas = g_expect_blas;
    double planned = g_planned;
    nvml N;
    CHECK(nvml_load(&N), "NVML loads in the scenario");
    watch w = {&N, nvml_settled(&N), 0, 0, 0, 0, ""};
    const char *dir = test_tmpdir(name);
    char out_dir[700];
    snprintf(out_dir, sizeof out_dir, "%s/run", dir);
    rlt_config *cfg = lowmem_cuda(sets, out_dir);
    static char table[1 << 16];

    rlt_trainer *tr = NULL;
    int rc = rlt_trainer_init(cfg, &tr);
    CHECK(rc == RLT_OK, "%s: init: %s", name, tr ? rlt_trainer_errmsg(tr) : "no trainer");
    if (rc != RLT_OK) {
        rlt_trainer_free(tr);
        rlt_config_free(cfg);
        return;
    }
    rlt_plan_summary s;
    const rlt_plan_entry *en = NULL;
    rlt_trainer_memory_plan(tr, &s, &en);
    rlt_trainer_plan_format(tr, table, sizeof table);
    printf("%s: the plan after init:\n%s\n", name, table);
    double printed = printed_total(table);
    uint64_t ws = 0;
    for (int i = 0; i < s.n_entries; i++)
        if (!strcmp(en[i].name, "backend.workspace")) ws = en[i].bytes;
    if (expect_blas) {
        CHECK(ws > 0 && s.handle_bytes > 0 && strstr(table, "library handles: cuBLAS"),
              "%s: an op calls cuBLAS: workspace %llu, handles %llu", name, (unsigned long long)ws,
              (unsigned long long)s.handle_bytes);
    } else {
        CHECK(s.fits && s.device_bytes <= 16ull << 20, "%s: fits the 16 MiB arena: %.2f MiB", name, s.device_bytes / MIB);
        CHECK(ws == 0 && s.handle_bytes == 0 && strstr(table, "library handles: none"),
              "%s: no op calls cuBLAS, so no workspace (%llu) and no handle (%llu)", name, (unsigned long long)ws,
              (unsigned long long)s.handle_bytes);
    }
    CHECK(printed > 0 && fabs(printed - (double)s.process_bytes) <= 0.01 * MIB + 0.005 * s.process_bytes,
          "%s: the table prints the summary's total (%.2f vs %.2f MiB)", name, printed / MIB, s.process_bytes / MIB);

    rc = rlt_trainer_run(tr, on_progress, &w);
    CHECK(rc == RLT_OK, "%s: run: %s", name, rlt_trainer_errmsg(tr));
    double held = process_held(&N, w.base, &w.how);
    printf("%s: NVML (%s) %.2f MiB while training (%d reports, spread %.2f MiB), %.2f MiB at the end; printed total "
           "%.2f MiB (context and kernels %.2f + handles %.2f + arena %.2f); rltrain plan predicted %.2f MiB\n",
           name, w.how, w.first / MIB, w.reports, (w.hi - w.lo) / MIB, held / MIB, printed / MIB,
           (s.context_bytes - s.handle_bytes) / MIB, s.handle_bytes / MIB, s.device_bytes / MIB, planned / MIB);
    CHECK(w.reports >= 3, "%s: progress reports during training (%d)", name, w.reports);
    CHECK(w.hi == w.lo, "%s: the process's device memory does not change during training (spread %.0f bytes)", name,
          w.hi - w.lo);
    CHECK(fabs(printed - w.first) <= 0.05 * w.first, "%s: printed total %.2f MiB within 5%% of NVML's %.2f MiB", name,
          printed / MIB, w.first / MIB);
    if (!expect_blas)
        CHECK(fabs(planned - w.first) <= 0.05 * w.first, "%s: planned total %.2f MiB within 5%% of NVML's %.2f MiB",
              name, planned / MIB, w.first / MIB);
    rlt_trainer_free(tr);
    rlt_config_free(cfg);
}

/* A process budget below the context: exit 3, fast, with the key and hints, nothing written. */
static void scenario_fail_fast(void) {
    const char *dir = test_tmpdir("process_failfast");
    char cmd[2048], out_dir[700];
    snprintf(out_dir, sizeof out_dir, "%s/run", dir);
    snprintf(cmd, sizeof cmd,
             "'%s/rltrain' --config %s/configs/td3_lowmem.yaml --set device=cuda:0 --set memory.process_budget_mb=64 "
             "--set out_dir=%s > process_failfast.txt 2>&1",
             RLT_BINARY_DIR, RLT_SOURCE_DIR, out_dir);
    double t0 = now_s();
    int st = system(cmd);
    double wall = now_s() - t0;
    static char out[1 << 16];
    FILE *f = fopen("process_failfast.txt", "r");
    size_t n = f ? fread(out, 1, sizeof out - 1, f) : 0;
    out[n] = '\0';
    if (f) fclose(f);
    int code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    printf("process budget of 64 MiB: exit %d after %.2f s:\n%s\n", code, wall, out);
    CHECK(code == 3, "exit 3 when the context alone is over the process budget, got %d", code);
    CHECK(wall < 5.0, "fail-fast took %.2f s (must be under 5 s)", wall);
    const char *msg = strstr(out, "memory.process_budget_mb allows 64.00 MiB");
    CHECK(msg && strstr(msg, "hint: the CUDA context") && strstr(msg, "hint: memory.process_budget_mb: "),
          "message names the key, the context and the budget that fits");
    CHECK(strstr(out, "process budget 64.00 MiB -> DOES NOT FIT") != NULL, "the table says the process does not fit");
    struct stat sb;
    CHECK(stat(out_dir, &sb) != 0, "nothing written");
}

/* Runs fn in a child (no CUDA context in this process, ever); returns the child's exit code. */
static int in_child(void (*fn)(void), const char *name) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        fn();
        _exit(test_summary(name));
    }
    int st;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void probe(void) {
    rlt_backend bk;
    rlt_err e;
    if (rlt_backend_open(&bk, &e, "cuda:0", 1, NULL, 0) != RLT_OK) _exit(77);
    rlt_backend_close(&bk);
    nvml N;
    if (!nvml_load(&N)) {
        fprintf(stderr, "a GPU is usable but NVML (libnvidia-ml.so.1) is not: the comparison cannot be made\n");
        _exit(3);
    }
}

/* Plans, then trains, each in a child; 0 when both passed. */
static int scenario(const char *name, const char *const *sets, int expect_blas) {
    g_name = name;
    g_sets = sets;
    g_expect_blas = expect_blas;
    g_planned = -1;
    CHECK(pipe(g_pipe) == 0, "pipe");
    int code = in_child(scenario_plan, name);
    if (read(g_pipe[0], &g_planned, sizeof g_planned) != (ssize_t)sizeof g_planned) g_planned = -1;
    close(g_pipe[0]);
    close(g_pipe[1]);
    CHECK(code == 0 && g_planned > 0, "%s: planned (exit %d, total %.2f MiB)", name, code, g_planned / MIB);
    return code | in_child(scenario_train, name);
}

int main(void) {
    setenv("RLT_CUDA_MODULE", RLT_BINARY_DIR "/librltrain_cuda.so", 0);
    setvbuf(stdout, NULL, _IOLBF, 0);
    int code = in_child(probe, "probe");
    if (code == 77) test_skip("no usable CUDA device (cuda:0)");
    CHECK(code == 0, "the probe: GPU usable and NVML loadable (exit %d)", code);
    if (code != 0) return test_summary("gpu_process_budget");
    CHECK(scenario("td3_lowmem", NULL, 0) == 0, "td3_lowmem scenario");
    const char *wide[] = {"td3.critic_hidden=[64,1536]", "memory.budget_mb=256", NULL};
    CHECK(scenario("with_cublas", wide, 1) == 0, "cuBLAS scenario");
    CHECK(in_child(scenario_fail_fast, "gpu_process_budget: fail fast") == 0, "fail-fast scenario");
    return test_summary("gpu_process_budget");
}
