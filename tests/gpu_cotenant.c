/* gpu_cotenant.c: rltrain sharing a GPU with a simulator that holds most of its memory (the motivating
 * case: a 6 GB card, a 5.4 GB simulator). A helper process (this binary in "hog" mode, which reserves
 * memory through the CUDA backend module) takes all but a few hundred MiB and keeps allocating; then
 *  1. rltrain with a plan larger than what is left must exit 3 within 2 s of wall time, writing nothing;
 *  2. rltrain with a plan that fits must train thousands of updates while the hog keeps grabbing every
 *     byte that frees up, and finish with exit 0 and zero allocations after init;
 *  3. with memory.on_oom: cpu, the plan that cannot be reserved trains on the CPU instead (one log line);
 *  4. with memory.wait_s, it waits: the reservation is retried until the simulator lets go of its memory
 *     (the hog is killed two seconds in), then the run trains on the GPU.
 * Skipped (77) without a usable GPU. */
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backend_registry.h"
#include "harness.h"

#define MIB (1024.0 * 1024.0)

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static volatile sig_atomic_t grab_all;
static void on_usr1(int sig) { (void)sig; grab_all = 1; }

/* Hog: leave `leave_mib` free, tell the parent (one byte on fd 1 of the pipe); after SIGUSR1, keep taking
 * 8 MiB chunks whenever they can be had, until killed. */
static int hog(double leave_mib, int fd) {
    signal(SIGUSR1, on_usr1);
    rlt_backend bk;
    rlt_err e;
    if (rlt_backend_open(&bk, &e, "cuda:0", 1, NULL, 0) != RLT_OK) return 77;
    void *p;
    double take = (double)bk.device_free - leave_mib * MIB;
    /* The free figure was read before our own handles settled: take in 64 MiB steps down to the target. */
    while (take > 64 * MIB && bk.ops->reserve(&bk, RLT_LOC_DEVICE, (uint64_t)(64 * MIB), &p) == RLT_OK) take -= 64 * MIB;
    char ok = 1;
    if (write(fd, &ok, 1) != 1) return 1;
    for (;;) {
        if (!grab_all || bk.ops->reserve(&bk, RLT_LOC_DEVICE, (uint64_t)(8 * MIB), &p) != RLT_OK) usleep(2000);
    }
}

static int run_cli(const char *args, double *wall_s, char *out, size_t cap) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s/rltrain' %s > cotenant_out.txt 2>&1", RLT_BINARY_DIR, args);
    double t0 = now_s();
    int st = system(cmd);
    *wall_s = now_s() - t0;
    FILE *f = fopen("cotenant_out.txt", "r");
    size_t n = f ? fread(out, 1, cap - 1, f) : 0;
    out[n] = '\0';
    if (f) fclose(f);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int main(int argc, char **argv) {
    setenv("RLT_CUDA_MODULE", RLT_BINARY_DIR "/librltrain_cuda.so", 0);
    if (argc == 3 && strcmp(argv[1], "hog") == 0) return hog(atof(argv[2]), 1);
    /* Probe in a child so this process never creates a CUDA context of its own. */
    pid_t probe = fork();
    if (probe == 0) {
        rlt_backend bk;
        rlt_err e;
        _exit(rlt_backend_open(&bk, &e, "cuda:0", 1, NULL, 0) == RLT_OK ? 0 : 77);
    }
    int st;
    waitpid(probe, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) test_skip("no usable CUDA device (cuda:0)");

    const double leave = 1200; /* MiB left free: room for rltrain's context (~600 MiB) and a small arena */
    int fds[2];
    CHECK(pipe(fds) == 0, "pipe");
    pid_t child = fork();
    if (child == 0) {
        dup2(fds[1], 1);
        char arg[32];
        snprintf(arg, sizeof arg, "%.0f", leave);
        execl("/proc/self/exe", argv[0], "hog", arg, (char *)NULL);
        _exit(1);
    }
    char ready = 0;
    CHECK(read(fds[0], &ready, 1) == 1 && ready == 1, "hog ready");
    printf("hog holds all but %.0f MiB of cuda:0\n", leave);

    const char *dir = test_tmpdir("cotenant");
    static char out[1 << 16];
    char args[1024], out_dir[600];
    double wall;
    /* 1. A plan of ~1.4 GiB (replay of 40M transitions of 36 bytes) cannot be reserved: exit 3, fast. */
    snprintf(out_dir, sizeof out_dir, "%s/big", dir);
    snprintf(args, sizeof args,
             "--config %s/configs/td3_pendulum_fast.yaml --set device=cuda:0 --set replay.location=device "
             "--set replay.capacity=40000000 --set memory.budget_mb=4096 --set out_dir=%s",
             RLT_SOURCE_DIR, out_dir);
    int code = run_cli(args, &wall, out, sizeof out);
    printf("plan larger than the free memory: exit %d after %.3f s\n", code, wall);
    CHECK(code == 3, "exit 3 when the device arena cannot be reserved, got %d: %s", code, out);
    CHECK(wall < 2.0, "fail-fast took %.3f s (must be under 2 s)", wall);
    struct stat sb;
    CHECK(stat(out_dir, &sb) != 0, "nothing written");

    /* 2. A plan that fits: once rltrain is training (its first progress line), the hog starts taking
     * every byte it can; rltrain must not notice. */
    snprintf(out_dir, sizeof out_dir, "%s/fits", dir);
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "exec '%s/rltrain' --config %s/configs/td3_pendulum_fast.yaml --set device=cuda:0 "
             "--set train.total_steps=8000 --set train.progress_every_s=0.2 --set out_dir=%s > cotenant_fit.txt 2>&1",
             RLT_BINARY_DIR, RLT_SOURCE_DIR, out_dir);
    /* A file left by an earlier run of this test would show its progress line before this trainer has started. */
    unlink("cotenant_fit.txt");
    double t0 = now_s();
    pid_t trainer = fork();
    if (trainer == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    int signalled = 0;
    while (waitpid(trainer, &st, WNOHANG) == 0) {
        if (!signalled) {
            FILE *f = fopen("cotenant_fit.txt", "r");
            size_t n = f ? fread(out, 1, sizeof out - 1, f) : 0;
            out[n] = '\0';
            if (f) fclose(f);
            if (strstr(out, "updates/s")) {
                kill(child, SIGUSR1);
                signalled = 1;
                printf("rltrain is training after %.2f s; the hog now takes every free byte\n", now_s() - t0);
            }
        }
        usleep(20000);
    }
    code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    printf("plan that fits, beside the hog: exit %d after %.2f s\n", code, now_s() - t0);
    CHECK(signalled, "the hog was let loose during training");
    CHECK(code == 0, "trained beside the hog, got %d", code);
    char path[700], text[4096] = "";
    snprintf(path, sizeof path, "%s/summary.json", out_dir);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
    text[n] = '\0';
    if (f) fclose(f);
    CHECK(strstr(text, "\"allocations_after_init\": 0") != NULL, "no allocation after init: %s", text);
    const char *u = strstr(text, "\"updates\": ");
    long updates = u ? strtol(u + 11, NULL, 10) : 0;
    CHECK(updates >= 4000, "thousands of updates: %ld", updates);
    printf("updates beside the hog: %ld\n", updates);
    kill(child, SIGKILL);
    waitpid(child, &st, 0);

    /* A fresh hog that leaves room for rltrain's context but not for the big plan. */
    CHECK(pipe(fds) == 0, "pipe");
    child = fork();
    if (child == 0) {
        dup2(fds[1], 1);
        char arg[32];
        snprintf(arg, sizeof arg, "%.0f", leave);
        execl("/proc/self/exe", argv[0], "hog", arg, (char *)NULL);
        _exit(1);
    }
    CHECK(read(fds[0], &ready, 1) == 1 && ready == 1, "second hog ready");
    /* 3. memory.on_oom: cpu. */
    snprintf(out_dir, sizeof out_dir, "%s/on_oom", dir);
    snprintf(args, sizeof args,
             "--config %s/configs/td3_pendulum_fast.yaml --set device=cuda:0 --set replay.location=device "
             "--set replay.capacity=40000000 --set memory.budget_mb=4096 --set memory.on_oom=cpu "
             "--set train.total_steps=1500 --set out_dir=%s",
             RLT_SOURCE_DIR, out_dir);
    code = run_cli(args, &wall, out, sizeof out);
    printf("memory.on_oom cpu beside the hog: exit %d after %.2f s\n", code, wall);
    CHECK(code == 0 && strstr(out, "memory.on_oom cpu") != NULL, "on_oom cpu trains on the CPU, got %d: %.600s", code, out);
    snprintf(path, sizeof path, "%s/summary.json", out_dir);
    f = fopen(path, "r");
    n = f ? fread(text, 1, sizeof text - 1, f) : 0;
    text[n] = '\0';
    if (f) fclose(f);
    CHECK(strstr(text, "\"device\": \"cpu") != NULL, "the summary names the CPU: %s", text);
    /* 4. memory.wait_s: the simulator exits two seconds after rltrain starts waiting. */
    snprintf(out_dir, sizeof out_dir, "%s/wait", dir);
    snprintf(cmd, sizeof cmd,
             "exec '%s/rltrain' --config %s/configs/td3_pendulum_fast.yaml --set device=cuda:0 "
             "--set replay.location=device --set replay.capacity=40000000 --set memory.budget_mb=4096 "
             "--set memory.wait_s=30 --set train.total_steps=1500 --set out_dir=%s > cotenant_wait.txt 2>&1",
             RLT_BINARY_DIR, RLT_SOURCE_DIR, out_dir);
    t0 = now_s();
    trainer = fork();
    if (trainer == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    usleep(2000000);
    int still_waiting = waitpid(trainer, &st, WNOHANG) == 0;
    kill(child, SIGKILL);
    waitpid(child, &st, 0);
    double killed_at = now_s() - t0;
    waitpid(trainer, &st, 0);
    code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    f = fopen("cotenant_wait.txt", "r");
    n = f ? fread(out, 1, sizeof out - 1, f) : 0;
    out[n] = '\0';
    if (f) fclose(f);
    printf("memory.wait_s: the simulator let go after %.2f s; rltrain exit %d after %.2f s\n", killed_at, code,
           now_s() - t0);
    CHECK(still_waiting, "rltrain was still waiting when the memory was released");
    CHECK(code == 0 && strstr(out, "memory.wait_s") != NULL, "wait_s reserved once the memory was free, got %d: %.600s",
          code, out);
    snprintf(path, sizeof path, "%s/summary.json", out_dir);
    f = fopen(path, "r");
    n = f ? fread(text, 1, sizeof text - 1, f) : 0;
    text[n] = '\0';
    if (f) fclose(f);
    CHECK(strstr(text, "\"device\": \"cuda") != NULL, "the waiting run trained on the GPU: %s", text);
    return test_summary("gpu_cotenant");
}
