/* test_host_limits.c: the host's memory limits reach the plan, and no limit makes rltrain hang.
 * - The CLI under an address-space limit (setrlimit(RLIMIT_AS) in the child, as `ulimit -v` does) of 50, 100,
 *   150, 200, 250 and 400 MiB, for `--dry-run`, `plan` and a run: each ends within seconds (OpenBLAS used
 *   to retry its buffer allocation forever), with exit 3 and a message naming the address-space limit, or
 *   0 where everything fits (400 MiB must fit, 50 and 100 MiB must not).
 * - A data-parallel run on two CPU devices under 150 and 300 MiB is refused (3) instead of hanging, and runs
 *   under 800 MiB.
 * - At the smallest limit the dry run accepts, a real run (updates, evaluation, checkpoint) finishes: the
 *   plan's estimate of the rest of the process holds.
 * - rlt_host_limit_read_vm reports a limit set in the process, with its source.
 * - The cgroup reader on fake trees (a mount table and /proc/self/cgroup pointing at a temporary
 *   directory): v2 memory.max/current/stat with the tightest level winning over its parent, "max" as no
 *   limit, file cache not counted as used; v1 memory.limit_in_bytes with a container's mount root; a
 *   hybrid host whose v2 mount has no memory controller; no memory cgroup at all; an escaped space in the
 *   mount point.
 * Under AddressSanitizer the CLI cases are skipped: ASan reserves terabytes of address space for its shadow
 * memory and cannot run under RLIMIT_AS at all. */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "host_limits.h"

#if defined(__SANITIZE_ADDRESS__)
#define RLT_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RLT_TEST_ASAN 1
#endif
#endif

#define MIB (1024ull * 1024ull)

#ifndef RLT_TEST_ASAN
static char out_text[1 << 16];

/* The end of the output, where the error is. */
static const char *tail(void) {
    size_t n = strlen(out_text);
    return n > 700 ? out_text + n - 700 : out_text;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Runs the CLI with argv under an address-space limit of limit_kib (0: none), stdout and stderr into one
 * file, killing it after deadline_s. Returns the exit code, 128 + signal when killed, or -2 when it hung. */
static int run_cli_limited(const char *const *args, uint64_t limit_kib, double deadline_s, double *took) {
    const char *log = "host_limits_log.txt";
    char exe[1024];
    snprintf(exe, sizeof exe, "%s/rltrain", RLT_BINARY_DIR);
    const char *argv[32];
    int n = 0;
    argv[n++] = exe;
    for (int i = 0; args[i] && n < 31; i++) argv[n++] = args[i];
    argv[n] = NULL;
    double t0 = now_s();
    fflush(stdout); /* the child must not write our buffered lines again */
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        FILE *f = freopen(log, "w", stdout);
        if (!f || dup2(fileno(stdout), 2) < 0) _exit(126);
        if (limit_kib) {
            struct rlimit rl;
            getrlimit(RLIMIT_AS, &rl);
            rl.rlim_cur = (rlim_t)(limit_kib * 1024);
            if (setrlimit(RLIMIT_AS, &rl) != 0) _exit(125);
        }
        execv(exe, (char *const *)argv);
        _exit(127);
    }
    int st = 0, hung = 0;
    for (;;) {
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid) break;
        if (w < 0 && errno != EINTR) break;
        if (now_s() - t0 > deadline_s) {
            hung = 1;
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            break;
        }
        struct timespec ms = {0, 10 * 1000 * 1000};
        nanosleep(&ms, NULL);
    }
    *took = now_s() - t0;
    long len = test_read_file(log, out_text, sizeof out_text - 1);
    out_text[len > 0 ? len : 0] = '\0';
    if (hung) return -2;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void check_cli_limits(void) {
    const char *config = RLT_SOURCE_DIR "/configs/td3_pendulum.yaml";
    const char *dry[] = {"--config", config, "--dry-run", NULL};
    const char *plan[] = {"plan", "--config", config, NULL};
    const char *run[] = {"--config", config, "--set", "train.total_steps=1200", "--set", "train.start_steps=1000",
                         "--set", "train.eval_every=600", "--set", "train.eval_episodes=1", "--set",
                         "out_dir=tmp_host_limits_run", "--set", "train.overwrite=true", "--quiet", NULL};
    const char *const *cmds[] = {dry, plan, run};
    const char *names[] = {"--dry-run", "plan", "run"};
    const uint64_t limits_mib[] = {50, 100, 150, 200, 250, 400};
    for (int c = 0; c < 3; c++) {
        for (size_t i = 0; i < sizeof limits_mib / sizeof limits_mib[0]; i++) {
            uint64_t lim = limits_mib[i];
            double took;
            int code = run_cli_limited(cmds[c], lim * 1024, 60.0, &took);
            printf("%-9s under ulimit -v %4llu MiB: exit %d in %.2f s\n", names[c], (unsigned long long)lim, code, took);
            CHECK(code != -2, "%s at %llu MiB: hung (killed after 60 s): %s", names[c], (unsigned long long)lim, tail());
            CHECK(code == 0 || code == 3, "%s at %llu MiB: exit 0 or 3, got %d: %s", names[c], (unsigned long long)lim,
                  code, tail());
            /* Refusing is quick: no retry loop, no waiting. */
            if (code == 3) CHECK(took < 20.0, "%s at %llu MiB: refused in %.1f s", names[c], (unsigned long long)lim, took);
            if (code == 3)
                CHECK(strstr(out_text, "address-space limit (RLIMIT_AS, ulimit -v ") != NULL,
                      "%s at %llu MiB: the message names the address-space limit: %s", names[c],
                      (unsigned long long)lim, tail());
            if (lim <= 100) CHECK(code == 3, "%s at %llu MiB: does not fit, exit 3, got %d", names[c],
                                  (unsigned long long)lim, code);
            if (lim >= 400) CHECK(code == 0, "%s at %llu MiB: fits, exit 0, got %d: %s", names[c],
                                  (unsigned long long)lim, code, tail());
            CHECK(!strstr(out_text, "OpenBLAS blas_") && !strstr(out_text, "BLAS : "),
                  "%s at %llu MiB: no OpenBLAS failure lines: %s", names[c],
                  (unsigned long long)lim, tail());
        }
    }
    /* A data-parallel run on two CPU devices: each further rank's thread maps an OpenBLAS buffer too (at 300 MiB
     * rank 1 used to spin in OpenBLAS's allocation forever); counted like seeds, it is refused with exit 3. */
    const char *dp[] = {"--config", config, "--set", "train.total_steps=600", "--set", "device=[cpu, cpu]", "--set",
                        "out_dir=tmp_host_limits_dp", "--set", "train.overwrite=true", "--quiet", NULL};
    const uint64_t dp_mib[] = {150, 300, 800};
    for (size_t i = 0; i < sizeof dp_mib / sizeof dp_mib[0]; i++) {
        double took;
        int code = run_cli_limited(dp, dp_mib[i] * 1024, 60.0, &took);
        printf("dp run    under ulimit -v %4llu MiB: exit %d in %.2f s\n", (unsigned long long)dp_mib[i], code, took);
        CHECK(code == (dp_mib[i] <= 300 ? 3 : 0), "data-parallel CPU run at %llu MiB: exit %d: %s",
              (unsigned long long)dp_mib[i], code, tail());
        if (code == 3) CHECK(took < 20.0 && strstr(out_text, "address-space limit (RLIMIT_AS, ulimit -v "),
                             "refused quickly (%.1f s), naming the limit: %s", took, tail());
    }
    /* The smallest limit (to 1 MiB) that the dry run accepts: a real run there finishes. */
    uint64_t lo = 50, hi = 400;
    while (hi - lo > 1) {
        uint64_t mid = (lo + hi) / 2;
        double took;
        int code = run_cli_limited(dry, mid * 1024, 60.0, &took);
        CHECK(code == 0 || code == 3, "--dry-run at %llu MiB: exit %d", (unsigned long long)mid, code);
        if (code == 0) hi = mid;
        else lo = mid;
    }
    double took;
    int code = run_cli_limited(run, hi * 1024, 120.0, &took);
    printf("smallest accepted limit %llu MiB: a run there exits %d in %.2f s\n", (unsigned long long)hi, code, took);
    CHECK(code == 0, "a run at the smallest limit the plan accepts (%llu MiB) finishes, got %d: %s",
          (unsigned long long)hi, code, tail());
    CHECK(strstr(out_text, "host memory: the address-space limit") != NULL, "the table shows the limit: %s", tail());
}

/* rlt_host_limit_read_vm in a child that set its own RLIMIT_AS. */
static void check_read_vm(void) {
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        struct rlimit rl;
        getrlimit(RLIMIT_AS, &rl);
        rl.rlim_cur = (rlim_t)(8ull << 30);
        if (setrlimit(RLIMIT_AS, &rl) != 0) _exit(2);
        rlt_host_limit h;
        rlt_host_limit_read_vm(&h);
        int ok = h.limit == (8ull << 30) && h.used > 0 && h.used < h.limit && h.avail == h.limit - h.used &&
                 strstr(h.source, "RLIMIT_AS") != NULL;
        _exit(ok ? 0 : 1);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "rlt_host_limit_read_vm reports RLIMIT_AS (child status %d)", st);
}

#endif

static void put(const char *dir, const char *name, const char *text) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    CHECK(test_write_file(path, text, strlen(text)) == 0, "write %s", path);
}

static void mkdirs(const char *path) {
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            mkdir(tmp, 0755);
            *p = '/';
        }
    mkdir(tmp, 0755);
}

static void check_cgroup_fakes(void) {
    char base[1024], mnt[1100], dir[1200], mountinfo[1100], cgfile[1100], text[4096];
    const char *tmp = test_tmpdir("tmp_host_limits_cgroup");
    if (tmp[0] == '/') snprintf(base, sizeof base, "%s", tmp);
    else {
        char cwd[512];
        if (!getcwd(cwd, sizeof cwd)) cwd[0] = '\0';
        snprintf(base, sizeof base, "%s/%s", cwd, tmp);
    }
    snprintf(mountinfo, sizeof mountinfo, "%s/mountinfo", base);
    snprintf(cgfile, sizeof cgfile, "%s/cgroup", base);
    rlt_host_limit h;

    /* v2: /a has 100 MiB with 50 MiB used, 15 MiB of it page cache; /a/b has no limit of its own. */
    snprintf(mnt, sizeof mnt, "%s/v2", base);
    snprintf(dir, sizeof dir, "%s/a/b", mnt);
    mkdirs(dir);
    snprintf(text, sizeof text, "25 1 0:22 / /proc rw - proc proc rw\n30 20 0:26 / %s rw,nosuid shared:4 - cgroup2 cgroup2 rw\n", mnt);
    put(base, "mountinfo", text);
    put(base, "cgroup", "0::/a/b\n");
    snprintf(dir, sizeof dir, "%s/a", mnt);
    put(dir, "memory.max", "104857600\n");
    put(dir, "memory.current", "52428800\n");
    put(dir, "memory.stat", "anon 36700160\nfile 15728640\nactive_file 10485760\ninactive_file 5242880\nshmem 0\n");
    snprintf(dir, sizeof dir, "%s/a/b", mnt);
    put(dir, "memory.max", "max\n");
    put(dir, "memory.current", "4096\n");
    CHECK(rlt_host_limit_read_cgroup(&h, mountinfo, cgfile) == 1, "v2: a limit on the parent applies");
    CHECK(h.limit == 100 * MIB && h.used == 35 * MIB && h.avail == 65 * MIB,
          "v2: limit 100 MiB, used 35 MiB (page cache not counted), 65 MiB left; got %llu %llu %llu",
          (unsigned long long)h.limit, (unsigned long long)h.used, (unsigned long long)h.avail);
    CHECK(strstr(h.source, "cgroup memory limit") && strstr(h.source, "/v2/a/memory.max"), "v2: source names the file: %s",
          h.source);

    /* The child's own, tighter limit wins. */
    put(dir, "memory.max", "62914560\n");
    put(dir, "memory.current", "41943040\n");
    CHECK(rlt_host_limit_read_cgroup(&h, mountinfo, cgfile) == 1 && h.avail == 20 * MIB && h.limit == 60 * MIB,
          "v2: the tightest level wins (20 MiB left), got %llu", (unsigned long long)h.avail);
    CHECK(strstr(h.source, "/v2/a/b/memory.max") != NULL, "v2: source is the child's file: %s", h.source);

    /* Used above the limit leaves nothing (not a wrapped huge number). */
    put(dir, "memory.current", "73400320\n");
    CHECK(rlt_host_limit_read_cgroup(&h, mountinfo, cgfile) == 1 && h.avail == 0, "v2: over the limit leaves 0, got %llu",
          (unsigned long long)h.avail);

    /* No limits anywhere ("max"): none. */
    put(dir, "memory.max", "max\n");
    snprintf(dir, sizeof dir, "%s/a", mnt);
    put(dir, "memory.max", "max\n");
    CHECK(rlt_host_limit_read_cgroup(&h, mountinfo, cgfile) == 0 && h.avail == UINT64_MAX, "v2: 'max' is no limit");

    /* v1 in a container: the memory hierarchy's mount shows the subtree /docker/x, our cgroup is
     * /docker/x/y; the mount's root (the container) has 80 MiB with 30 MiB used, 10 MiB of it page cache;
     * y reports v1's "unlimited". A v2 mount with no memory controller files (a hybrid host) adds nothing. */
    snprintf(mnt, sizeof mnt, "%s/v1 mem", base);
    snprintf(dir, sizeof dir, "%s/y", mnt);
    mkdirs(dir);
    char mnt_esc[1200];
    snprintf(mnt_esc, sizeof mnt_esc, "%s/v1\\040mem", base);
    snprintf(text, sizeof text,
             "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
             "35 31 0:32 /docker/x %s rw,relatime - cgroup cgroup rw,memory\n"
             "36 31 0:33 / %s/cpu rw,relatime - cgroup cgroup rw,cpu\n"
             "41 31 0:38 / %s/unified rw,relatime - cgroup2 cgroup2 rw\n",
             mnt_esc, base, base);
    put(base, "mountinfo", text);
    put(base, "cgroup", "9:name=systemd:/\n5:cpu,cpuacct:/docker/x/y\n4:memory:/docker/x/y\n0::/docker/x/y\n");
    put(dir, "memory.limit_in_bytes", "9223372036854771712\n");
    put(dir, "memory.usage_in_bytes", "1048576\n");
    put(mnt, "memory.limit_in_bytes", "83886080\n");
    put(mnt, "memory.usage_in_bytes", "31457280\n");
    put(mnt, "memory.stat", "cache 10485760\nrss 20971520\ntotal_active_file 6291456\ntotal_inactive_file 4194304\n");
    CHECK(rlt_host_limit_read_cgroup(&h, mountinfo, cgfile) == 1 && h.limit == 80 * MIB && h.used == 20 * MIB &&
              h.avail == 60 * MIB,
          "v1: limit 80 MiB, 20 MiB used, 60 MiB left; got %llu %llu %llu", (unsigned long long)h.limit,
          (unsigned long long)h.used, (unsigned long long)h.avail);
    CHECK(strstr(h.source, "/v1 mem/memory.limit_in_bytes") != NULL, "v1: source names the file: %s", h.source);

    /* No memory line in /proc/self/cgroup: no limit. */
    put(base, "cgroup", "9:name=systemd:/\n5:cpu,cpuacct:/\n");
    CHECK(rlt_host_limit_read_cgroup(&h, mountinfo, cgfile) == 0 && h.avail == UINT64_MAX && !h.source[0],
          "no memory cgroup: no limit");
    /* Files that do not exist: no limit, no crash. */
    CHECK(rlt_host_limit_read_cgroup(&h, "/nonexistent/mountinfo", "/nonexistent/cgroup") == 0, "missing files: none");
}

int main(void) {
    check_cgroup_fakes();
#ifdef RLT_TEST_ASAN
    printf("AddressSanitizer build: the cases under RLIMIT_AS are skipped (ASan cannot run under it)\n");
#else
    check_read_vm();
    check_cli_limits();
#endif
    return test_summary("test_host_limits");
}
