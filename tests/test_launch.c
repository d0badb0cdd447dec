/* test_launch.c: data-parallel ranks as processes (one process per device, as torchrun, srun and mpirun launch
 * them) on the CPU, and the timeouts that keep every wait on another rank bounded. Only loopback addresses.
 * - The communicator over TCP (base/comm_net.c), three ranks as threads of this process each connected as a
 *   process would be: the mean is the same bits as the in-process communicator's (over more than one chunk, with
 *   signed zeros), the agreement is an OR, rank 0's bytes reach every rank, every rank's row reaches every rank.
 * - The in-process communicator: a rank that never arrives fails the waiting rank after the timeout (RLT_ERUNTIME,
 *   a message naming both ranks and dist.timeout_s), not later, and every later call fails.
 * - The CLI launched twice with RANK/WORLD_SIZE/MASTER_ADDR=127.0.0.1/MASTER_PORT (as torchrun does) trains the
 *   same bits as devices: [cpu, cpu] in one process (every rank's final.ckpt), rank 0 alone writes summary.csv; and
 *   likewise through a rendezvous file (dist.rendezvous: file:PATH) with Open MPI's variables.
 * - SIGINT to rank 0 alone stops both ranks at the same step (exit 5); resuming both from final.ckpt ends with the
 *   final.ckpt of the run never stopped.
 * - A plan over budget: both processes exit 3, each naming its rank and device.
 * - The launch settings' refusals: a rank out of range, dist.timeout_s 0, a device list, a seed group or device: auto
 *   in a launched process, a tcp:// address without a port, env without MASTER_ADDR.
 * - A rank that never starts: rank 0 exits 1 within dist.timeout_s (2 s) naming rank 1; a rank killed mid-run
 *   (rank 1, then rank 0): the other exits 1 at once naming it; a rank that stops answering (SIGSTOP): the other exits 1 after
 *   dist.timeout_s. Never a hang: every child is killed if it outlives its limit, which fails the test. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "comm.h"
#include "harness.h"
#include "rltrain.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int port = fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && getsockname(fd, (struct sockaddr *)&a, &len) == 0
                   ? ntohs(a.sin_port) : -1;
    if (fd >= 0) close(fd);
    return port;
}

/* ---- the communicator over TCP, ranks as threads ------------------------------------------------------ */

enum { NR = 3, NX = 40000 }; /* NX: more than two of the TCP all-reduce's chunks */

typedef struct net_arg {
    int32_t rank, port;
    rlt_comm *c;  /* the in-process comm for the reference (net: made by the thread) */
    float *x;
    int32_t any;
    uint8_t id[128];
    char rows[NR][16];
    int rc;
    char msg[2048];
} net_arg;

static void fill(float *x, int32_t rank) {
    for (int i = 0; i < NX; i++) x[i] = sinf((float)(i * (rank + 1))) * (float)(rank + 1) * 1e3f / (float)(i + 1);
    x[7] = rank == 0 ? -0.0f : 0.0f;
    x[8] = -0.0f; /* -0 everywhere: +0 from a sum that starts at 0.0f as the in-process one does, -0 from one that does not */
}

static void collectives(net_arg *a, rlt_comm *c) {
    fill(a->x, a->rank);
    a->rc = rlt_comm_allreduce_mean(c, a->rank, a->x, NX);
    if (a->rc == RLT_OK) a->rc = rlt_comm_agree(c, a->rank, a->rank == 1, &a->any, "a test agreement");
    if (a->rank == 0)
        for (int i = 0; i < 128; i++) a->id[i] = (uint8_t)(i * 7 + 1);
    if (a->rc == RLT_OK) a->rc = rlt_comm_bcast(c, a->rank, a->id, sizeof a->id, "a test id");
    char mine[16];
    snprintf(mine, sizeof mine, "row %d", (int)a->rank);
    if (a->rc == RLT_OK) a->rc = rlt_comm_allgather(c, a->rank, mine, sizeof mine, a->rows, "test rows");
}

static void *net_rank(void *p) {
    net_arg *a = p;
    rlt_comm_net d = {.rank = a->rank, .world = NR, .host = "127.0.0.1", .port = a->port, .timeout_s = 20};
    rlt_err e = {0};
    a->rc = rlt_comm_connect(&d, &a->c, &e);
    snprintf(a->msg, sizeof a->msg, "%s", e.msg);
    if (a->rc == RLT_OK) collectives(a, a->c);
    return NULL;
}

static void *mem_rank(void *p) {
    net_arg *a = p;
    collectives(a, a->c);
    return NULL;
}

static void net_collectives(void) {
    static float xs[2][NR][NX];
    net_arg net[NR], mem[NR];
    pthread_t t[NR];
    rlt_comm *c = rlt_comm_create(NR);
    int port = free_port();
    for (int r = 0; r < NR; r++) {
        memset(&net[r], 0, sizeof net[r]);
        memset(&mem[r], 0, sizeof mem[r]);
        net[r].rank = mem[r].rank = r;
        net[r].port = port;
        net[r].x = xs[0][r];
        mem[r].x = xs[1][r];
        mem[r].c = c;
        pthread_create(&t[r], NULL, net_rank, &net[r]);
    }
    for (int r = 0; r < NR; r++) pthread_join(t[r], NULL);
    for (int r = 0; r < NR; r++) pthread_create(&t[r], NULL, mem_rank, &mem[r]);
    for (int r = 0; r < NR; r++) pthread_join(t[r], NULL);
    for (int r = 0; r < NR; r++) {
        CHECK(net[r].rc == RLT_OK && mem[r].rc == RLT_OK, "rank %d: collectives over TCP and in memory (%s)", r, net[r].msg);
        CHECK(memcmp(xs[0][r], xs[1][0], sizeof xs[0][r]) == 0, "rank %d: the TCP mean is the in-process mean, bit for bit",
              r);
        CHECK(signbit(xs[0][r][7]) == 0 && signbit(xs[0][r][8]) == 0, "rank %d: signed zeros as the in-process sum gives",
              r);
        CHECK(net[r].any == 1, "rank %d: the agreement is the OR (rank 1 raised its flag)", r);
        CHECK(net[r].id[0] == 1 && net[r].id[127] == (uint8_t)(127 * 7 + 1), "rank %d: rank 0's bytes arrived", r);
        CHECK(!strcmp(net[r].rows[0], "row 0") && !strcmp(net[r].rows[2], "row 2"), "rank %d: every rank's row", r);
    }
    for (int r = 0; r < NR; r++) rlt_comm_free(net[r].c);
    /* A rank that never comes: the waiting rank fails after the timeout, naming both. */
    rlt_comm_set_timeout(c, 0.3);
    rlt_comm_set_name(c, 0, "cpu");
    rlt_comm_set_name(c, 2, "cpu");
    int32_t any = 0;
    float x[2] = {1, 2};
    double t0 = now_s();
    int rc = rlt_comm_any(c, 0, 0, &any); /* ranks 1 and 2 never call */
    double took = now_s() - t0;
    CHECK(rc == RLT_ERUNTIME && took >= 0.29 && took < 2.0, "a rank that never arrives: RLT_ERUNTIME after the timeout "
          "(rc %d after %.2f s)", rc, took);
    CHECK(strstr(rlt_comm_errmsg(c), "rank 0 (cpu) waited") && strstr(rlt_comm_errmsg(c), "rank 1, rank 2 (cpu) never "
          "arrived") && strstr(rlt_comm_errmsg(c), "dist.timeout_s"), "the message names the ranks: %s", rlt_comm_errmsg(c));
    CHECK(rlt_comm_allreduce_mean(c, 1, x, 2) == RLT_ERUNTIME && rlt_comm_aborted(c), "later collectives fail");
    rlt_comm_free(c);
    /* TCP: rank 0 alone fails its set-up after the timeout, naming the missing rank and the address. */
    rlt_comm_net d = {.rank = 0, .world = 2, .host = "127.0.0.1", .port = free_port(), .timeout_s = 0.5};
    rlt_err e = {0};
    rlt_comm *alone = NULL;
    t0 = now_s();
    rc = rlt_comm_connect(&d, &alone, &e);
    took = now_s() - t0;
    CHECK(rc == RLT_ERUNTIME && !alone && took < 3.0 && strstr(e.msg, "rank 1 of 2") && strstr(e.msg, "127.0.0.1"),
          "rank 0 alone: fails after %.2f s: %s", took, e.msg);
}

/* ---- the CLI as two processes -------------------------------------------------------------------------- */

static const char *const k_cfg =
    "algo: td3\ndevice: cpu\n"
    "train: {total_steps: 2000, start_steps: 500, batch_size: 64, eval_every: 1000, eval_episodes: 2, "
    "progress_every_s: 0}\n"
    "td3: {actor_hidden: [32, 32], critic_hidden: [32, 32]}\nreplay: {capacity: 3000}\n"
    "checkpoint: {every: 0}\n";

static char g_cfg[600];

/* Starts `rltrain --config g_cfg --quiet --set out_dir=dir [sets...]` as rank `rank` of `world` (env: torchrun's
 * variables, or Open MPI's when ompi), output into dir_rank<k>.log. world 0: no launcher variables. */
static pid_t start_cli(const char *dir, int rank, int world, int port, int ompi, const char *const *sets) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid != 0) return pid;
    char log[700], v[32], out[700];
    snprintf(log, sizeof log, "%s_rank%d.log", dir, rank);
    int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) dup2(fd, 1), dup2(fd, 2);
    unsetenv("RANK"), unsetenv("WORLD_SIZE"), unsetenv("SLURM_PROCID"), unsetenv("OMPI_COMM_WORLD_SIZE");
    unsetenv("TORCHELASTIC_USE_AGENT_STORE"), unsetenv("TORCHELASTIC_RUN_ID");
    if (world > 0) {
        snprintf(v, sizeof v, "%d", rank);
        setenv(ompi ? "OMPI_COMM_WORLD_RANK" : "RANK", v, 1);
        setenv(ompi ? "OMPI_COMM_WORLD_LOCAL_RANK" : "LOCAL_RANK", v, 1);
        snprintf(v, sizeof v, "%d", world);
        setenv(ompi ? "OMPI_COMM_WORLD_SIZE" : "WORLD_SIZE", v, 1);
        setenv("MASTER_ADDR", "127.0.0.1", 1);
        snprintf(v, sizeof v, "%d", port);
        if (port > 0) setenv("MASTER_PORT", v, 1);
    }
    snprintf(out, sizeof out, "out_dir=%s", dir);
    const char *argv[24] = {RLT_BINARY_DIR "/rltrain", "--config", g_cfg, "--quiet", "--set", out};
    int n = 6;
    for (int i = 0; sets && sets[i] && n < 22; i++) argv[n++] = "--set", argv[n++] = sets[i];
    argv[n] = NULL;
    execv(argv[0], (char *const *)argv);
    _exit(127);
}

/* Waits for pid at most `limit` seconds (then kills it: a hang fails the test); its exit code, -1 if killed. */
static int wait_cli(pid_t pid, double limit, double *took) {
    double t0 = now_s();
    int st = 0;
    pid_t w;
    while ((w = waitpid(pid, &st, WNOHANG)) == 0 && now_s() - t0 < limit) usleep(10000);
    if (took) *took = now_s() - t0;
    if (w == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
        return -1;
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int file_exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0;
}

static void log_of(const char *dir, int rank, char *buf, size_t cap) {
    char path[700];
    snprintf(path, sizeof path, "%s_rank%d.log", dir, rank);
    test_read_text(path, buf, cap);
}

/* The two ranks' final.ckpt in dir_a and dir_b are the same bytes. */
static void same_ckpts(const char *a_dir, const char *b_dir, const char *what) {
    for (int r = 0; r < 2; r++) {
        char a[700], b[700];
        snprintf(a, sizeof a, "%s/rank_%d/final.ckpt", a_dir, r);
        snprintf(b, sizeof b, "%s/rank_%d/final.ckpt", b_dir, r);
        long d = test_files_differ(a, b);
        CHECK(d == 0, "%s: rank %d's final.ckpt is the in-process run's (%ld bytes differ)", what, r, d);
    }
}

static char g_text[1 << 16];

static void two_processes(const char *base) {
    char one[600], two[600], file[600], path[700];
    snprintf(one, sizeof one, "%s/one", base);
    snprintf(two, sizeof two, "%s/two", base);
    snprintf(file, sizeof file, "%s/file", base);
    /* The reference: both ranks in one process. */
    const char *inproc[] = {"devices=[cpu, cpu]", NULL};
    CHECK(wait_cli(start_cli(one, 0, 0, 0, 0, inproc), 60, NULL) == 0, "devices: [cpu, cpu] in one process");
    int port = free_port();
    pid_t p0 = start_cli(two, 0, 2, port, 0, NULL), p1 = start_cli(two, 1, 2, port, 0, NULL);
    int rc0 = wait_cli(p0, 60, NULL), rc1 = wait_cli(p1, 60, NULL);
    log_of(two, 1, g_text, sizeof g_text);
    CHECK(rc0 == 0 && rc1 == 0, "two processes (torchrun's variables): exit %d and %d: %s", rc0, rc1, g_text);
    CHECK(strstr(g_text, "launched by torchrun: rank 1 of 2"), "rank 1 says how it was launched");
    same_ckpts(one, two, "two processes");
    char a[4096], b[4096];
    snprintf(path, sizeof path, "%s/summary.csv", two);
    test_read_text(path, a, sizeof a);
    snprintf(path, sizeof path, "%s/summary.csv", one);
    test_read_text(path, b, sizeof b);
    test_strip_wall(a);
    test_strip_wall(b);
    CHECK(a[0] && !strcmp(a, b), "rank 0's summary.csv has both ranks' rows, as in one process:\n%s\n%s", a, b);
    /* A rendezvous file and Open MPI's variables (no MASTER_PORT: rank 0 takes any port and writes it). */
    char rv[700];
    snprintf(rv, sizeof rv, "dist.rendezvous=file:%s/rdzv", base);
    const char *sets[] = {rv, NULL};
    p0 = start_cli(file, 0, 2, 0, 1, sets);
    p1 = start_cli(file, 1, 2, 0, 1, sets);
    rc0 = wait_cli(p0, 60, NULL);
    rc1 = wait_cli(p1, 60, NULL);
    log_of(file, 0, g_text, sizeof g_text);
    CHECK(rc0 == 0 && rc1 == 0, "two processes through a rendezvous file (mpirun's variables): exit %d and %d: %s", rc0,
          rc1, g_text);
    same_ckpts(one, file, "a rendezvous file");
}

/* Waits until path exists (the run has started training), at most 30 s. */
static int wait_file(const char *path) {
    for (double t0 = now_s(); now_s() - t0 < 30; usleep(5000))
        if (file_exists(path)) return 1;
    return 0;
}

static void stop_and_resume(const char *base) {
    char whole[600], dir[600], path[700];
    snprintf(whole, sizeof whole, "%s/whole", base);
    snprintf(dir, sizeof dir, "%s/stopped", base);
    const char *longer[] = {"train.total_steps=20000", "replay.capacity=20000", NULL};
    const char *inproc[] = {"train.total_steps=20000", "replay.capacity=20000", "devices=[cpu, cpu]", NULL};
    CHECK(wait_cli(start_cli(whole, 0, 0, 0, 0, inproc), 120, NULL) == 0, "the run never stopped");
    int port = free_port();
    pid_t p0 = start_cli(dir, 0, 2, port, 0, longer), p1 = start_cli(dir, 1, 2, port, 0, longer);
    snprintf(path, sizeof path, "%s/rank_1/metrics.csv", dir);
    CHECK(wait_file(path), "rank 1 started training");
    usleep(200000);
    kill(p0, SIGINT); /* rank 0 only: the agreement stops rank 1 at the same step */
    int rc0 = wait_cli(p0, 60, NULL), rc1 = wait_cli(p1, 60, NULL);
    log_of(dir, 1, g_text, sizeof g_text);
    CHECK(rc0 == 5 && rc1 == 5, "SIGINT to rank 0: both ranks stop (exit %d and %d): %s", rc0, rc1, g_text);
    port = free_port();
    const char *resume_sets[] = {"train.total_steps=20000", "replay.capacity=20000", NULL};
    fflush(NULL);
    /* Resume: the same launch with --resume final.ckpt (as a set cannot carry it, through the environment-free argv). */
    pid_t r[2];
    for (int k = 0; k < 2; k++) {
        r[k] = fork();
        if (r[k] == 0) {
            char log[700], v[16], out[700];
            snprintf(log, sizeof log, "%s_resume%d.log", dir, k);
            int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
            if (fd >= 0) dup2(fd, 1), dup2(fd, 2);
            snprintf(v, sizeof v, "%d", k);
            setenv("RANK", v, 1), setenv("LOCAL_RANK", v, 1), setenv("WORLD_SIZE", "2", 1);
            setenv("MASTER_ADDR", "127.0.0.1", 1);
            snprintf(v, sizeof v, "%d", port);
            setenv("MASTER_PORT", v, 1);
            snprintf(out, sizeof out, "out_dir=%s", dir);
            const char *argv[] = {RLT_BINARY_DIR "/rltrain", "--config", g_cfg, "--quiet", "--set", out, "--set",
                                  resume_sets[0], "--set", resume_sets[1], "--resume", "final.ckpt", NULL};
            execv(argv[0], (char *const *)argv);
            _exit(127);
        }
    }
    rc0 = wait_cli(r[0], 120, NULL);
    rc1 = wait_cli(r[1], 120, NULL);
    CHECK(rc0 == 0 && rc1 == 0, "both ranks resumed to the end (exit %d and %d)", rc0, rc1);
    same_ckpts(whole, dir, "stopped by SIGINT to rank 0, then resumed");
}

/* A rank that does not fit its device: exit 3 naming the rank and its device, before any rank trains. */
static void no_fit(const char *base) {
    char dir[600];
    snprintf(dir, sizeof dir, "%s/nofit", base);
    const char *sets[] = {"memory.budget_mb=0.05", NULL};
    int port = free_port();
    pid_t p0 = start_cli(dir, 0, 2, port, 0, sets), p1 = start_cli(dir, 1, 2, port, 0, sets);
    int rc0 = wait_cli(p0, 60, NULL), rc1 = wait_cli(p1, 60, NULL);
    log_of(dir, 1, g_text, sizeof g_text);
    CHECK(rc0 == 3 && rc1 == 3, "a plan over budget: both ranks exit 3 (%d, %d)", rc0, rc1);
    CHECK(strstr(g_text, "cpu (rank 1 of 2 of the data-parallel run)"), "rank 1 names itself and its device: %s", g_text);
}

static void lost_ranks(const char *base) {
    char dir[600];
    const char *quick[] = {"dist.timeout_s=2", NULL};
    const char *slow[] = {"dist.timeout_s=2", "train.total_steps=2000000", "replay.capacity=20000", NULL};
    double took;
    /* Rank 1 never starts. */
    snprintf(dir, sizeof dir, "%s/never", base);
    int rc = wait_cli(start_cli(dir, 0, 2, free_port(), 0, quick), 30, &took);
    log_of(dir, 0, g_text, sizeof g_text);
    CHECK(rc == 1 && took < 15, "rank 1 never starts: rank 0 exits 1 (exit %d after %.1f s)", rc, took);
    CHECK(strstr(g_text, "rank 1 of 2") && strstr(g_text, "dist.timeout_s"), "and says whom it waited for: %s", g_text);
    /* Rank 1 killed mid-run. */
    snprintf(dir, sizeof dir, "%s/killed", base);
    int port = free_port();
    pid_t p0 = start_cli(dir, 0, 2, port, 0, slow), p1 = start_cli(dir, 1, 2, port, 0, slow);
    char path[700];
    snprintf(path, sizeof path, "%s/rank_0/metrics.csv", dir);
    CHECK(wait_file(path), "the run started");
    usleep(100000);
    kill(p1, SIGKILL);
    waitpid(p1, NULL, 0);
    double t0 = now_s();
    rc = wait_cli(p0, 30, NULL);
    took = now_s() - t0;
    log_of(dir, 0, g_text, sizeof g_text);
    CHECK(rc == 1 && took < 10, "rank 1 killed: rank 0 exits 1 (exit %d after %.1f s)", rc, took);
    CHECK(strstr(g_text, "lost rank 1"), "and names it: %s", g_text);
    /* Rank 0 killed mid-run: rank 1 learns it from its connection to rank 0. */
    snprintf(dir, sizeof dir, "%s/killed0", base);
    port = free_port();
    p0 = start_cli(dir, 0, 2, port, 0, slow);
    p1 = start_cli(dir, 1, 2, port, 0, slow);
    snprintf(path, sizeof path, "%s/rank_1/metrics.csv", dir);
    CHECK(wait_file(path), "the run started");
    usleep(100000);
    kill(p0, SIGKILL);
    waitpid(p0, NULL, 0);
    t0 = now_s();
    rc = wait_cli(p1, 30, NULL);
    took = now_s() - t0;
    log_of(dir, 1, g_text, sizeof g_text);
    CHECK(rc == 1 && took < 10 && strstr(g_text, "rank 1 (cpu) lost rank 0"), "rank 0 killed: rank 1 exits 1 naming it "
          "(exit %d after %.1f s): %s", rc, took, g_text);
    /* Rank 1 stops answering. */
    snprintf(dir, sizeof dir, "%s/hung", base);
    port = free_port();
    p0 = start_cli(dir, 0, 2, port, 0, slow);
    p1 = start_cli(dir, 1, 2, port, 0, slow);
    snprintf(path, sizeof path, "%s/rank_0/metrics.csv", dir);
    CHECK(wait_file(path), "the run started");
    usleep(100000);
    kill(p1, SIGSTOP);
    t0 = now_s();
    rc = wait_cli(p0, 30, NULL);
    took = now_s() - t0;
    kill(p1, SIGKILL);
    waitpid(p1, NULL, 0);
    log_of(dir, 0, g_text, sizeof g_text);
    CHECK(rc == 1 && took >= 1.9 && took < 15, "rank 1 hangs: rank 0 exits 1 after dist.timeout_s (exit %d after %.1f s)",
          rc, took);
    CHECK(strstr(g_text, "from rank 1, which never came"), "and names it: %s", g_text);
}

/* ---- the launch settings' refusals ---------------------------------------------------------------------- */

static rlt_config *launch_config(int rank, int world, const char *set) {
    rlt_config *cfg;
    rlt_config_init(&cfg);
    CHECK(rlt_config_load_string(cfg, k_cfg, "launch.yaml") == RLT_OK, "%s", rlt_config_errmsg(cfg));
    CHECK(rlt_config_set_launch(cfg, rank, world, rank) == RLT_OK, "set_launch: %s", rlt_config_errmsg(cfg));
    if (set) CHECK(rlt_config_set(cfg, set) == RLT_OK, "%s: %s", set, rlt_config_errmsg(cfg));
    return cfg;
}

static void refusals(void) {
    rlt_config *cfg = launch_config(0, 0, NULL);
    CHECK(rlt_config_set_launch(cfg, 2, 2, 0) == RLT_EINVAL && strstr(rlt_config_errmsg(cfg), "rank 2 of 2"),
          "rank 2 of 2 ranks is refused: %s", rlt_config_errmsg(cfg));
    CHECK(rlt_config_set(cfg, "dist.timeout_s=0") == RLT_ECONFIG, "dist.timeout_s 0 is refused");
    rlt_config_free(cfg);
    cfg = launch_config(1, 2, "devices=[cpu, cpu]");
    CHECK(rlt_config_validate(cfg) == RLT_ECONFIG && strstr(rlt_config_errmsg(cfg), "devices"),
          "a device list in a launched process is refused: %s", rlt_config_errmsg(cfg));
    rlt_config_free(cfg);
    cfg = launch_config(1, 2, "train.num_seeds=4");
    CHECK(rlt_config_validate(cfg) == RLT_ECONFIG && strstr(rlt_config_errmsg(cfg), "train.num_seeds"),
          "a seed group in a launched process is refused: %s", rlt_config_errmsg(cfg));
    rlt_config_free(cfg);
    cfg = launch_config(1, 2, "device=auto");
    CHECK(rlt_config_validate(cfg) == RLT_ECONFIG, "device: auto in a launched process is refused");
    rlt_config_free(cfg);
    /* Where rank 0 listens: a bad tcp:// address, and env without MASTER_ADDR, fail at init naming the key. */
    cfg = launch_config(1, 2, "dist.rendezvous=tcp://localhost");
    CHECK(rlt_config_ranks(cfg) == 2 && rlt_group_count(cfg) == 1, "a launched process: 2 ranks, one member here");
    rlt_group *g = NULL;
    CHECK(rlt_group_init(cfg, &g) == RLT_ECONFIG && strstr(rlt_group_errmsg(g), "dist.rendezvous"),
          "tcp:// without a port is refused: %s", rlt_group_errmsg(g));
    rlt_group_free(g);
    rlt_config_free(cfg);
    unsetenv("MASTER_ADDR"), unsetenv("SLURM_LAUNCH_NODE_IPADDR");
    cfg = launch_config(1, 2, NULL);
    CHECK(rlt_group_init(cfg, &g) == RLT_ECONFIG && strstr(rlt_group_errmsg(g), "MASTER_ADDR"),
          "env without MASTER_ADDR says to set it: %s", rlt_group_errmsg(g));
    rlt_group_free(g);
    rlt_config_free(cfg);
}

int main(void) {
    net_collectives();
    refusals();
    char base[256];
    snprintf(base, sizeof base, "%s", test_tmpdir("tmp_launch"));
    snprintf(g_cfg, sizeof g_cfg, "%s/cfg.yaml", base);
    test_write_file(g_cfg, k_cfg, strlen(k_cfg));
    if (!file_exists(RLT_BINARY_DIR "/rltrain")) {
        printf("test_launch: no CLI at %s: the process tests did not run\n", RLT_BINARY_DIR "/rltrain");
        return test_summary("test_launch");
    }
    two_processes(base);
    stop_and_resume(base);
    no_fit(base);
    lost_ranks(base);
    return test_summary("test_launch");
}
