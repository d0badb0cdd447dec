/* gpu_watch_memory.c: a run watching the GPU it shares with a simulator (issue 41, item 4). A helper process
 * ("hog" mode of this binary, through the CUDA backend module) holds 2 GiB of cuda:0; then the CLI trains a short
 * TD3 run on cuda:0 with memory.warn_free_mb set above the free memory, and
 *  - the progress lines carry "GPU free N MiB, others M MiB", with M at least the hog's 2 GiB (and below the GPU's
 *    memory less the free), N below the device's memory;
 *  - metrics.csv has the columns device_free_mib and cotenants_mib, filled on every row with the same figures;
 *  - the low-memory warning is printed exactly once.
 * The CPU's metrics.csv keeps its columns (tests/test_cli_papercuts.c). Skipped (77) without a usable GPU. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend_registry.h"
#include "harness.h"

#define MIB (1024.0 * 1024.0)
#define HOG_MIB 2048.0

static int hog(int fd) {
    rlt_backend bk;
    rlt_err e;
    if (rlt_backend_open(&bk, &e, "cuda:0", 1, NULL, 0) != RLT_OK) return 77;
    void *p;
    char ok = bk.ops->reserve(&bk, RLT_LOC_DEVICE, (uint64_t)(HOG_MIB * MIB), &p) == RLT_OK;
    if (write(fd, &ok, 1) != 1) return 1;
    for (;;) pause();
}

static int count(const char *text, const char *what) {
    int n = 0;
    for (const char *at = text; (at = strstr(at, what)); at += strlen(what)) n++;
    return n;
}

int main(int argc, char **argv) {
    setenv("RLT_CUDA_MODULE", RLT_BINARY_DIR "/librltrain_cuda.so", 0);
    if (argc == 2 && strcmp(argv[1], "hog") == 0) return hog(1);
    pid_t probe = fork();
    if (probe == 0) {
        rlt_backend bk;
        rlt_err e;
        _exit(rlt_backend_open(&bk, &e, "cuda:0", 1, NULL, 0) == RLT_OK ? 0 : 77);
    }
    int st;
    waitpid(probe, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) test_skip("no usable CUDA device (cuda:0)");

    int fds[2];
    CHECK(pipe(fds) == 0, "pipe");
    pid_t child = fork();
    if (child == 0) {
        dup2(fds[1], 1);
        execl("/proc/self/exe", argv[0], "hog", (char *)NULL);
        _exit(1);
    }
    char ready = 0;
    CHECK(read(fds[0], &ready, 1) == 1 && ready == 1, "the hog holds %.0f MiB", HOG_MIB);

    const char *dir = test_tmpdir("watch_memory");
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s/rltrain' --config %s/configs/td3_pendulum_fast.yaml --set device=cuda:0 "
             "--set train.total_steps=3000 --set train.eval_every=1000 --set train.progress_every_s=0.5 "
             "--set memory.warn_free_mb=16000000 --set out_dir=%s/run 2>&1", RLT_BINARY_DIR, RLT_SOURCE_DIR, dir);
    static char out[1 << 18];
    FILE *p = popen(cmd, "r");
    size_t n = p ? fread(out, 1, sizeof out - 1, p) : 0;
    out[n] = '\0';
    int rc = p ? pclose(p) : -1;
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 0, "the run: %s", out);

    /* The progress lines. */
    const char *line = strstr(out, " | GPU free ");
    double free_mib = -1, others = -1;
    CHECK(line && sscanf(line, " | GPU free %lf MiB, others %lf MiB", &free_mib, &others) == 2, "progress: %s", out);
    printf("progress: GPU free %.0f MiB, others %.0f MiB (the hog holds %.0f MiB)\n", free_mib, others, HOG_MIB);
    CHECK(others >= HOG_MIB && others < HOG_MIB + 1024, "others %.0f MiB: the hog's %.0f and its context", others, HOG_MIB);
    CHECK(free_mib > 0, "free %.0f MiB", free_mib);
    CHECK(count(out, "under memory.warn_free_mb") == 1, "one warning: %d", count(out, "under memory.warn_free_mb"));

    /* metrics.csv: the two columns on every row. */
    char path[700];
    snprintf(path, sizeof path, "%s/run/metrics.csv", dir);
    FILE *f = fopen(path, "r");
    CHECK(f != NULL, "%s", path);
    if (f) {
        char row[1024];
        int rows = 0, filled = 0;
        CHECK(fgets(row, sizeof row, f) && strstr(row, ",loss_scale,amp_skipped,device_free_mib,cotenants_mib\n"),
              "header: %s", row);
        while (fgets(row, sizeof row, f)) {
            rows++;
            const char *end = strrchr(row, ',');
            const char *prev = end;
            while (prev > row && prev[-1] != ',') prev--;
            double a = atof(prev), b = atof(end + 1);
            filled += a > 0 && b >= HOG_MIB;
        }
        fclose(f);
        CHECK(rows > 10 && filled == rows, "%d of %d rows with the device's figures", filled, rows);
    }
    return test_summary("gpu_watch_memory");
}
