/* gpu_described_plan.c: the plan for a described GPU (rlt_config_describe_gpu, `rltrain plan --arch`) against the
 * real plan on this GPU, described with this GPU's architecture (nvidia-smi's compute capability) and memory:
 * - the device arena the same to the byte, for plans with and without library layers (the workspace rule);
 * - the context and kernels, and the library handles, within 5% of what this GPU measures, when the table's row
 *   for this architecture is a measured one (an estimate row is only reported);
 * and prints the measured figures, the line to put into kernels/described/described_backend.c's table.
 * Skipped (77) without a usable GPU. Run: ctest --test-dir build -R gpu_described_plan --output-on-failure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "described/described.h"
#include "harness.h"
#include "rltrain.h"

#define MIB (1024.0 * 1024.0)

/* A number after "key": in the JSON document; 0 when absent. */
static unsigned long long json_u64(const char *json, const char *key) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\": ", key);
    const char *at = strstr(json, pat);
    return at ? strtoull(at + strlen(pat), NULL, 10) : 0;
}

/* This GPU's compute capability as 75, 80, ... (nvidia-smi); 0 when it cannot be read. */
static int32_t gpu_arch(void) {
    FILE *p = popen("nvidia-smi --query-gpu=compute_cap --format=csv,noheader -i 0 2>/dev/null", "r");
    if (!p) return 0;
    double cc = 0;
    int ok = fscanf(p, "%lf", &cc) == 1;
    pclose(p);
    return ok ? (int32_t)(cc * 10 + 0.5) : 0;
}

typedef struct figures {
    unsigned long long need, total, free_b, context;
    double handles;
    int rc;
} figures;

/* "library handles 66.00 MiB" of the table's whole-process line, in bytes. */
static double handles_of(const char *table) {
    const char *at = strstr(table, "library handles ");
    if (!at) return 0;
    char unit[8] = "";
    double v = 0;
    sscanf(at + strlen("library handles "), "%lf %7s", &v, unit);
    return !strcmp(unit, "MiB") ? v * MIB : !strcmp(unit, "KiB") ? v * 1024 : !strcmp(unit, "GiB") ? v * 1024 * MIB : v;
}

static int plan(const char *const *sets, int n, const rlt_gpu_desc *d, figures *out, char *table, size_t cap) {
    rlt_config *cfg;
    rlt_config_init(&cfg);
    CHECK(rlt_config_load_file(cfg, RLT_SOURCE_DIR "/configs/td3_pendulum.yaml") == RLT_OK, "config");
    CHECK(rlt_config_set(cfg, "device=cuda:0") == RLT_OK, "device");
    for (int i = 0; i < n; i++) CHECK(rlt_config_set(cfg, sets[i]) == RLT_OK, "%s", sets[i]);
    if (d) CHECK(rlt_config_describe_gpu(cfg, d->memory_bytes, d->arch, d->others_bytes) == RLT_OK, "%s",
                 rlt_config_errmsg(cfg));
    static char json[1 << 18];
    char err[2048];
    size_t len = 0;
    int32_t fits = 0;
    int rc = rlt_plan_fit_json(cfg, json, sizeof json, &len, &fits, err, sizeof err);
    if (rc == RLT_OK) {
        out->need = json_u64(json, "need_bytes");
        out->total = json_u64(json, "total_bytes");
        out->free_b = json_u64(json, "free_bytes");
        out->context = json_u64(json, "context_bytes");
        rlt_fit_report f;
        rlt_plan_fit(cfg, &f, table, cap, err, sizeof err);
        out->handles = handles_of(table);
    } else if (rc != RLT_EDEVICE) {
        fprintf(stderr, "plan: %s\n", err);
    }
    rlt_config_free(cfg);
    return rc;
}

/* The real plan in a process of its own: the CUDA context is the process's, and a plan that created library handles
 * (the planner's probes of larger batches do) leaves their kernels loaded, which a later plan would count as its
 * context. The parent never starts CUDA. */
static int real_plan(const char *const *sets, int n, figures *out) {
    int fd[2];
    if (pipe(fd) != 0) return RLT_ERUNTIME;
    pid_t pid = fork();
    if (pid == 0) {
        static char table[1 << 16];
        figures f;
        memset(&f, 0, sizeof f);
        f.rc = plan(sets, n, NULL, &f, table, sizeof table);
        ssize_t w = write(fd[1], &f, sizeof f);
        _exit(w == (ssize_t)sizeof f ? 0 : 1);
    }
    close(fd[1]);
    memset(out, 0, sizeof *out);
    out->rc = RLT_ERUNTIME;
    ssize_t r = read(fd[0], out, sizeof *out);
    close(fd[0]);
    waitpid(pid, NULL, 0);
    return r == (ssize_t)sizeof *out ? out->rc : RLT_ERUNTIME;
}

int main(void) {
    static char desc_table[1 << 16];
    figures probe;
    if (real_plan(NULL, 0, &probe) == RLT_EDEVICE) {
        printf("gpu_described_plan: no usable GPU; skipped\n");
        return 77;
    }
    const int32_t arch = gpu_arch();
    CHECK(arch > 0, "nvidia-smi gives the compute capability");
    const described_arch *row = described_arch_find(arch);
    CHECK(row != NULL, "the table has a row for sm_%d: add one", (int)arch);
    if (!row) return test_summary("gpu_described_plan");
    const char *small[] = {"replay.capacity=100000"};
    const char *big[] = {"td3.actor_hidden=[1024,1024]", "td3.critic_hidden=[1024,1024]", "train.batch_size=4096",
                         "replay.capacity=10000", "memory.budget_mb=4096"};
    const char *bf16[] = {"td3.actor_hidden=[512,512]", "td3.critic_hidden=[512,512]", "precision=bf16"};
    struct { const char *what; const char *const *sets; int n; int library; } cases[] = {
        {"256-256 (our kernels only)", small, 1, 0},
        {"1024-1024 at batch 4096 (cuBLASLt)", big, 5, 1},
        {"512-512 in bf16 (cuBLASLt)", bf16, 3, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        figures real, desc;
        CHECK(real_plan(cases[i].sets, cases[i].n, &real) == RLT_OK, "real plan");
        rlt_gpu_desc d = {real.total, 0, arch, 0};
        CHECK(plan(cases[i].sets, cases[i].n, &d, &desc, desc_table, sizeof desc_table) == RLT_OK, "described plan");
        const double real_h = real.handles, desc_h = desc.handles;
        const double real_ctx = (double)real.context - real_h, desc_ctx = (double)desc.context - desc_h;
        printf("sm_%d %-36s arena real %llu described %llu | context real %.2f MiB described %.2f MiB | handles real "
               "%.2f MiB described %.2f MiB\n", (int)arch, cases[i].what, real.need, desc.need, real_ctx / MIB,
               desc_ctx / MIB, real_h / MIB, desc_h / MIB);
        CHECK(real.need == desc.need, "%s: the same device arena (%llu against %llu bytes)", cases[i].what, real.need,
              desc.need);
        if (row->measured) {
            CHECK(desc_ctx >= 0.95 * real_ctx && desc_ctx <= 1.05 * real_ctx, "%s: context within 5%% (%.2f against "
                  "%.2f MiB)", cases[i].what, desc_ctx / MIB, real_ctx / MIB);
            if (cases[i].library)
                CHECK(desc_h >= 0.95 * real_h - 1 * MIB && desc_h <= 1.05 * real_h + 1 * MIB,
                      "%s: handles within 5%% (%.2f against %.2f MiB)", cases[i].what, desc_h / MIB, real_h / MIB);
        }
        if (i == 1)
            printf("table row for sm_%d, measured here: {%d, 1, \"...\", MIB(%.2f), MIB(<cuBLAS>), MIB(<cuBLASLt>)}; "
                   "library handles together %.2f MiB\n", (int)arch, (int)arch, real_ctx / MIB, real_h / MIB);
    }
    if (!row->measured) printf("sm_%d's row is an estimate: the figures above are the ones to put in the table\n", (int)arch);
    return test_summary("gpu_described_plan");
}
