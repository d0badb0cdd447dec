/* nccl_diag.c: why does the set-up of two NCCL ranks in one process hang on some machines (issue 38: the
 * system's NCCL 2.28.3, two H200s, driver 580; both ranks log "Init START", never "Init COMPLETE", unless
 * NCCL_CUMEM_ENABLE=0)? One case per run, in a fresh process, each under `timeout 20` (bench/gpu2_check.sh runs
 * them all, with and without NCCL_CUMEM_ENABLE and CUDA_DEVICE_MAX_CONNECTIONS):
 *
 *   bench_nccl_diag CASE [NGPUS]
 *   info         NCCL's version, the driver's and runtime's, the GPUs, peer access between them, the environment
 *   initall      ncclCommInitAll over the GPUs (what rltrain called before), then one ncclAllReduce each
 *   arena        the same after cudaMalloc of 80% of each GPU's free memory (rltrain reserves its arena, though
 *                after the communicators: this says whether a full device changes the set-up)
 *   contexts     a context on every GPU first (cudaFree(0) in each), then ncclCommInitAll
 *   capture      ncclCommInitAll while another thread holds a stream of GPU 0 in a global-mode graph capture
 *   group        ncclGetUniqueId, then ncclCommInitRank per rank inside ncclGroupStart/End, blocking
 *   nonblocking  the same with ncclCommInitRankConfig (blocking = 0) polled with ncclCommGetAsyncError: what rltrain
 *                does now; prints how long the set-up took
 *   captured     ncclCommInitAll, then on a thread per rank an all-reduce of 2M floats (a critic block's gradient)
 *                captured into a CUDA graph (thread-local mode), the graph launched and its sum checked: what
 *                rltrain's update does, whose first all-reduce's enqueue hung with NCCL_CUMEM_ENABLE=1 (2026-11-29)
 *   captured_warm  the same after one uncaptured all-reduce of that size on each rank (NCCL connects its peers at
 *                a communicator's first collective: outside the capture here)
 *   connect      ncclCommInitAll, then captured_warm's all-reduces, printing each GPU's free memory after the set-up
 *                and after the all-reduces: what NCCL allocates after its set-up (with NCCL_RUNTIME_CONNECT=1, its
 *                default, the connections' buffers come at the first collective; rltrain sets 0)
 *
 * Prints one line "case <name>: OK in <s> s" or "case <name>: FAILED: <why>"; a hang shows as the timeout's exit
 * (124) in the script. NCCL comes from RLT_NCCL_LIBRARY or libnccl.so.2, declared here as kernels/cuda/nccl.c
 * declares it. */
#define _GNU_SOURCE
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct nccl_comm_opaque *nccl_comm_t;
typedef struct {
    char internal[128];
} nccl_id;
typedef struct {
    size_t size;
    unsigned int magic, version;
    int blocking, cga, min_ctas, max_ctas;
    const char *net_name;
} nccl_config;
enum { MAXG = 8 };

static struct {
    int (*get_version)(int *);
    const char *(*err)(int);
    int (*init_all)(nccl_comm_t *, int, const int *);
    int (*get_id)(nccl_id *);
    int (*init_rank)(nccl_comm_t *, int, nccl_id, int);
    int (*init_rank_config)(nccl_comm_t *, int, nccl_id, int, nccl_config *);
    int (*async_error)(nccl_comm_t, int *);
    int (*group_start)(void);
    int (*group_end)(void);
    int (*all_reduce)(const void *, void *, size_t, int, int, nccl_comm_t, cudaStream_t);
    int (*destroy)(nccl_comm_t);
} N;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int load(void) {
    const char *path = getenv("RLT_NCCL_LIBRARY");
    void *lib = dlopen(path && *path ? path : "libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        printf("NCCL not loaded: %s\n", dlerror());
        return -1;
    }
    Dl_info info;
    *(void **)&N.get_version = dlsym(lib, "ncclGetVersion");
    if (N.get_version && dladdr((void *)N.get_version, &info)) printf("NCCL library: %s\n", info.dli_fname);
    *(void **)&N.err = dlsym(lib, "ncclGetErrorString");
    *(void **)&N.init_all = dlsym(lib, "ncclCommInitAll");
    *(void **)&N.get_id = dlsym(lib, "ncclGetUniqueId");
    *(void **)&N.init_rank = dlsym(lib, "ncclCommInitRank");
    *(void **)&N.init_rank_config = dlsym(lib, "ncclCommInitRankConfig");
    *(void **)&N.async_error = dlsym(lib, "ncclCommGetAsyncError");
    *(void **)&N.group_start = dlsym(lib, "ncclGroupStart");
    *(void **)&N.group_end = dlsym(lib, "ncclGroupEnd");
    *(void **)&N.all_reduce = dlsym(lib, "ncclAllReduce");
    *(void **)&N.destroy = dlsym(lib, "ncclCommDestroy");
    return N.get_version && N.err && N.init_all && N.get_id && N.init_rank && N.init_rank_config && N.async_error &&
                   N.group_start && N.group_end && N.all_reduce && N.destroy
               ? 0 : -1;
}

static void info(int n) {
    int v = 0, drv = 0, rt = 0, count = 0;
    N.get_version(&v);
    cudaDriverGetVersion(&drv);
    cudaRuntimeGetVersion(&rt);
    cudaGetDeviceCount(&count);
    printf("NCCL version code %d (%d.%d.%d), CUDA driver %d, runtime %d, %d GPUs\n", v, v / 10000, (v / 100) % 100,
           v % 100, drv, rt, count);
    for (int d = 0; d < count && d < MAXG; d++) {
        struct cudaDeviceProp p;
        cudaGetDeviceProperties(&p, d);
        printf("  cuda:%d %s, cc %d.%d, %.1f GiB, PCI %02x:%02x\n", d, p.name, p.major, p.minor,
               p.totalGlobalMem / 1073741824.0, p.pciBusID, p.pciDeviceID);
        for (int e = 0; e < count && e < n; e++) {
            int can = 0;
            if (e != d && cudaDeviceCanAccessPeer(&can, d, e) == cudaSuccess)
                printf("    peer access cuda:%d -> cuda:%d: %s\n", d, e, can ? "yes" : "no");
        }
    }
    const char *vars[] = {"NCCL_CUMEM_ENABLE", "NCCL_P2P_DISABLE", "NCCL_NVLS_ENABLE", "NCCL_SHM_DISABLE",
                          "CUDA_DEVICE_MAX_CONNECTIONS", "CUDA_VISIBLE_DEVICES", "NCCL_DEBUG", NULL};
    for (int i = 0; vars[i]; i++) printf("  %s=%s\n", vars[i], getenv(vars[i]) ? getenv(vars[i]) : "(unset)");
}

/* Polls non-blocking communicators until none is in progress (7); their first error, or 0. */
static int wait_ready(nccl_comm_t *c, int n) {
    for (;;) {
        int busy = 0, rc = 0;
        for (int k = 0; k < n; k++) {
            int st = 0;
            N.async_error(c[k], &st);
            if (st == 7) busy = 1;
            else if (st != 0 && rc == 0) rc = st;
        }
        if (rc || !busy) return rc;
        usleep(1000);
    }
}

/* One in-place all-reduce of 1024 floats on every rank (a group of calls), checked on the host. With
 * non-blocking communicators the group may end in progress (7): the calls are enqueued only once polled so. */
static int all_reduce(nccl_comm_t *c, int n, int nb, char *why, size_t cap) {
    float *buf[MAXG];
    cudaStream_t st[MAXG];
    for (int k = 0; k < n; k++) {
        cudaSetDevice(k);
        cudaMalloc((void **)&buf[k], 1024 * sizeof(float));
        float h[1024];
        for (int i = 0; i < 1024; i++) h[i] = (float)(k + 1);
        cudaMemcpy(buf[k], h, sizeof h, cudaMemcpyHostToDevice);
        cudaStreamCreate(&st[k]);
    }
    N.group_start();
    for (int k = 0; k < n; k++) N.all_reduce(buf[k], buf[k], 1024, 7 /* float */, 0 /* sum */, c[k], st[k]);
    int rc = N.group_end();
    if (nb && rc == 7) rc = wait_ready(c, n);
    float want = (float)(n * (n + 1) / 2), got = -1;
    for (int k = 0; k < n; k++) {
        cudaSetDevice(k);
        cudaStreamSynchronize(st[k]);
        float h[1024];
        cudaMemcpy(h, buf[k], sizeof h, cudaMemcpyDeviceToHost);
        if (k == 0 || h[0] != want) got = h[0];
        cudaFree(buf[k]);
        cudaStreamDestroy(st[k]);
    }
    if (rc != 0 || got != want) {
        snprintf(why, cap, "the all-reduce gave %g, want %g (%s)", got, want, N.err(rc));
        return -1;
    }
    return 0;
}

static volatile int g_capturing;
static void *capture_thread(void *arg) {
    (void)arg;
    cudaSetDevice(0);
    cudaStream_t s;
    cudaStreamCreate(&s);
    cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
    g_capturing = 1;
    sleep(30); /* past the case's timeout: the capture stays open during the whole set-up */
    return NULL;
}

/* One rank of the captured cases: its all-reduce captured into a graph (after an uncaptured one when warm), launched,
 * and checked. */
typedef struct {
    nccl_comm_t c;
    int k, n, warm, rc;
    char why[200];
} cap_rank;

static void *captured_rank(void *arg) {
    cap_rank *r = arg;
    const size_t cnt = (size_t)2 << 20;
    float *buf = NULL, *h = malloc(cnt * sizeof(float));
    cudaStream_t st;
    cudaGraph_t g = NULL;
    cudaGraphExec_t ge = NULL;
    cudaSetDevice(r->k);
    if (!h || cudaMalloc((void **)&buf, cnt * sizeof(float)) != cudaSuccess ||
        cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) != cudaSuccess) {
        snprintf(r->why, sizeof r->why, "rank %d: no memory or stream", r->k);
        r->rc = -1;
        free(h);
        return NULL;
    }
    for (size_t i = 0; i < cnt; i++) h[i] = (float)(r->k + 1);
    int rc = 0;
    if (r->warm) {
        cudaMemcpy(buf, h, cnt * sizeof(float), cudaMemcpyHostToDevice);
        rc = N.all_reduce(buf, buf, cnt, 7 /* float */, 0 /* sum */, r->c, st);
        cudaStreamSynchronize(st);
    }
    cudaMemcpy(buf, h, cnt * sizeof(float), cudaMemcpyHostToDevice);
    cudaError_t e = cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal);
    if (rc == 0 && e == cudaSuccess) rc = N.all_reduce(buf, buf, cnt, 7, 0, r->c, st);
    if (e == cudaSuccess) e = cudaStreamEndCapture(st, &g);
    if (e == cudaSuccess) e = cudaGraphInstantiate(&ge, g, 0);
    if (e == cudaSuccess) e = cudaGraphLaunch(ge, st);
    if (e == cudaSuccess) e = cudaStreamSynchronize(st);
    if (e == cudaSuccess) e = cudaMemcpy(h, buf, cnt * sizeof(float), cudaMemcpyDeviceToHost);
    const float want = (float)(r->n * (r->n + 1) / 2);
    if (rc != 0 || e != cudaSuccess || h[0] != want || h[cnt - 1] != want) {
        snprintf(r->why, sizeof r->why, "rank %d: %s, %s, got %g and %g, want %g", r->k, N.err(rc),
                 cudaGetErrorString(e), h[0], h[cnt - 1], want);
        r->rc = -1;
    }
    free(h);
    return NULL;
}

static int captured(nccl_comm_t *c, int n, int warm, char *why, size_t cap) {
    pthread_t t[MAXG];
    cap_rank r[MAXG];
    for (int k = 0; k < n; k++) {
        r[k] = (cap_rank){.c = c[k], .k = k, .n = n, .warm = warm};
        pthread_create(&t[k], NULL, captured_rank, &r[k]);
    }
    int rc = 0;
    for (int k = 0; k < n; k++) {
        pthread_join(t[k], NULL);
        if (r[k].rc && !rc) {
            snprintf(why, cap, "%s", r[k].why);
            rc = -1;
        }
    }
    return rc;
}

static int run_case(const char *name, int n, char *why, size_t cap) {
    nccl_comm_t c[MAXG] = {0};
    int devs[MAXG];
    for (int k = 0; k < n; k++) devs[k] = k;
    int rc = 0;
    if (!strcmp(name, "arena")) {
        for (int k = 0; k < n; k++) {
            size_t fr = 0, tot = 0;
            void *p = NULL;
            cudaSetDevice(k);
            cudaMemGetInfo(&fr, &tot);
            cudaError_t e = cudaMalloc(&p, fr / 10 * 8);
            printf("  cuda:%d: reserved %.1f GiB of %.1f free: %s\n", k, fr / 10 * 8 / 1073741824.0, fr / 1073741824.0,
                   cudaGetErrorString(e));
        }
    }
    if (!strcmp(name, "contexts"))
        for (int k = 0; k < n; k++) cudaSetDevice(k), cudaFree(0);
    if (!strcmp(name, "capture")) {
        pthread_t t;
        pthread_create(&t, NULL, capture_thread, NULL);
        while (!g_capturing) usleep(1000);
        printf("  a global-mode capture is open on cuda:0\n");
    }
    if (!strcmp(name, "captured") || !strcmp(name, "captured_warm") || !strcmp(name, "connect")) {
        double t0 = now_s();
        rc = N.init_all(c, n, devs);
        if (rc != 0) {
            snprintf(why, cap, "set-up failed: %s", N.err(rc));
            return -1;
        }
        int connect = !strcmp(name, "connect");
        size_t fr[MAXG], tot = 0;
        for (int k = 0; connect && k < n; k++) cudaSetDevice(k), cudaMemGetInfo(&fr[k], &tot);
        if (connect) printf("  set-up %.2f s (NCCL_RUNTIME_CONNECT=%s)\n", now_s() - t0,
                            getenv("NCCL_RUNTIME_CONNECT") ? getenv("NCCL_RUNTIME_CONNECT") : "unset");
        rc = captured(c, n, strcmp(name, "captured") != 0, why, cap);
        for (int k = 0; connect && k < n; k++) {
            size_t after = 0;
            cudaSetDevice(k);
            cudaMemGetInfo(&after, &tot);
            /* captured_rank keeps its buffer (2M floats, counted out here), its stream and its graph. */
            printf("  cuda:%d free after the set-up %.1f MiB, after the all-reduces %.1f MiB (8.0 MiB of it the "
                   "case's buffer, and a graph): NCCL took %.1f MiB after its set-up\n", k, fr[k] / 1048576.0,
                   after / 1048576.0, ((double)fr[k] - (double)after) / 1048576.0 - 8.0);
        }
        return rc;
    }
    if (!strcmp(name, "initall") || !strcmp(name, "arena") || !strcmp(name, "contexts") || !strcmp(name, "capture")) {
        rc = N.init_all(c, n, devs);
    } else if (!strcmp(name, "group") || !strcmp(name, "nonblocking")) {
        nccl_id id;
        rc = N.get_id(&id);
        nccl_config cfg = {sizeof cfg, 0xcafebeef, 21400, 0, INT_MIN, INT_MIN, INT_MIN, NULL};
        int nb = !strcmp(name, "nonblocking");
        if (rc == 0) {
            N.group_start();
            for (int k = 0; k < n; k++) {
                cudaSetDevice(k);
                int r = nb ? N.init_rank_config(&c[k], n, id, k, &cfg) : N.init_rank(&c[k], n, id, k);
                if (r != 0 && r != 7) rc = r;
            }
            int g = N.group_end();
            if (rc == 0 && g != 0 && g != 7) rc = g;
        }
        /* Non-blocking: poll until every rank is ready (the case's timeout ends a hang). */
        if (nb && rc == 0) rc = wait_ready(c, n);
    } else {
        snprintf(why, cap, "unknown case '%s'", name);
        return -1;
    }
    if (rc != 0) {
        snprintf(why, cap, "set-up failed: %s", N.err(rc));
        return -1;
    }
    if (!strcmp(name, "capture")) return 0; /* the capture forbids the all-reduce's cudaMalloc */
    rc = all_reduce(c, n, !strcmp(name, "nonblocking"), why, cap);
    for (int k = 0; k < n; k++) N.destroy(c[k]);
    return rc;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *name = argc > 1 ? argv[1] : "info";
    int n = argc > 2 ? atoi(argv[2]) : 2;
    if (n < 1 || n > MAXG) n = 2;
    if (load() != 0) {
        printf("case %s: FAILED: NCCL could not be loaded with every function this diagnostic calls\n", name);
        return 1;
    }
    if (!strcmp(name, "info")) {
        info(n);
        return 0;
    }
    char why[512] = "";
    double t0 = now_s();
    int rc = run_case(name, n, why, sizeof why);
    if (rc == 0) printf("case %s: OK in %.2f s (%d GPUs, NCCL_CUMEM_ENABLE=%s, CUDA_DEVICE_MAX_CONNECTIONS=%s)\n", name,
                        now_s() - t0, n, getenv("NCCL_CUMEM_ENABLE") ? getenv("NCCL_CUMEM_ENABLE") : "unset",
                        getenv("CUDA_DEVICE_MAX_CONNECTIONS") ? getenv("CUDA_DEVICE_MAX_CONNECTIONS") : "unset");
    else printf("case %s: FAILED after %.2f s: %s\n", name, now_s() - t0, why);
    fflush(stdout);
    _exit(rc == 0 ? 0 : 1); /* no teardown: a stuck capture or NCCL thread must not turn a result into a hang */
}
