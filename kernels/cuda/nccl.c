/* nccl.c: the CUDA backend's data-parallel collectives (kernels/backend.h comm_*, allreduce_mean) through NCCL.
 * NCCL is loaded with dlopen when a group first asks for it (RLT_NCCL_LIBRARY, else libnccl.so.2 on the
 * loader's path, as PyTorch's nvidia-nccl wheel or the CUDA toolkit installs it), so the module builds and
 * runs without it; only a run on several GPUs needs it. The few declarations below are NCCL's stable C ABI
 * (nccl.h, 2.x): an opaque communicator, int results and enums whose values NCCL never renumbers, the 128-byte
 * unique id, and the first fields of ncclConfig_t as NCCL 2.14 defined them (NCCL reads a config by its size
 * and version, so the prefix of an older version is a valid config).
 *
 * Nothing here may wait forever (docs/data_parallel.md). Every communicator is made non-blocking
 * (ncclCommInitRankConfig with blocking = 0), so no NCCL call blocks: set-up and enqueue return
 * ncclInProgress and are polled with ncclCommGetAsyncError, with short sleeps, until done or until the run's
 * dist.timeout_s passes; a host wait on a rank's stream is polled the same way (cuda_comm_wait). Past the
 * timeout the communicator is aborted (ncclCommAbort, which releases NCCL's kernels) and the call fails with a
 * message naming the rank, its GPU, what it waited for and the NCCL settings to try. ncclCommAbort and
 * ncclCommDestroy themselves run in a helper thread that is waited for at most COMM_RELEASE_S: a release that
 * hangs is abandoned, never waited on.
 *
 * The ranks of one process (device: [cuda:0, cuda:1]) are made in one ncclGroupStart/End from one thread with
 * an id made here; the ranks of a launched run (one process per GPU) each make their own with the id rank 0
 * made (RLT_COMM_INIT_ID) and the host comm carried over. The gradient average is ncclAllReduce with ncclAvg,
 * in place on the current lane's stream: inside a graph capture it becomes a node of the update's graph (NCCL
 * >= 2.9.6 supports capture), so the whole data-parallel update is still one launch. */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda_ops.h"

typedef struct nccl_comm_opaque *nccl_comm_t;
typedef int nccl_result_t; /* ncclResult_t: 0 is ncclSuccess */
enum { NCCL_SUCCESS = 0, NCCL_IN_PROGRESS = 7, NCCL_FLOAT32 = 7, NCCL_AVG = 4 };
typedef struct nccl_unique_id {
    char internal[RLT_COMM_ID_BYTES];
} nccl_unique_id;
typedef struct nccl_config_v21400 {
    size_t size;
    unsigned int magic, version;
    int blocking, cga_cluster_size, min_ctas, max_ctas;
    const char *net_name;
} nccl_config;
#define NCCL_CONFIG_MAGIC 0xcafebeefu
#define NCCL_CONFIG_VERSION 21400u /* NCCL_VERSION(2, 14, 0): the fields above */
#define COMM_RELEASE_S 10.0        /* the longest ncclCommAbort or ncclCommDestroy is waited for */

static struct {
    pthread_once_t once;
    void *lib;
    int version;
    char why[256];
    char note[256]; /* what nccl_load set in the environment */
    nccl_result_t (*get_version)(int *version);
    nccl_result_t (*get_unique_id)(nccl_unique_id *id);
    nccl_result_t (*comm_init_rank_config)(nccl_comm_t *comm, int nranks, nccl_unique_id id, int rank,
                                           nccl_config *config);
    nccl_result_t (*comm_get_async_error)(nccl_comm_t comm, nccl_result_t *async_error);
    nccl_result_t (*group_start)(void);
    nccl_result_t (*group_end)(void);
    nccl_result_t (*comm_destroy)(nccl_comm_t comm);
    nccl_result_t (*comm_abort)(nccl_comm_t comm);
    nccl_result_t (*all_reduce)(const void *send, void *recv, size_t count, int dtype, int op, nccl_comm_t comm,
                                cudaStream_t stream);
    const char *(*error_string)(nccl_result_t r);
} g_nccl = {PTHREAD_ONCE_INIT};

/* A rank's device communicator as the host comm keeps it (comm_init's comms[k]). */
typedef struct cuda_dcomm {
    pthread_mutex_t mu;   /* held around every NCCL call on nccl, so that an abort never frees it mid-call */
    nccl_comm_t nccl;     /* NULL once aborted or destroyed */
    int32_t rank, world, device;
    double timeout_s;
    int32_t abort_requested; /* set by cuda_comm_abort from any thread (atomic) */
} cuda_dcomm;

static void sleep_s(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The NCCL settings to try, in every message about a wait that did not end. */
static const char k_nccl_hint[] =
    "; to see where it waits run with NCCL_DEBUG=INFO; settings that avoid the set-ups known to hang: "
    "NCCL_CUMEM_ENABLE=0 and NCCL_RUNTIME_CONNECT=0 (rltrain sets both when unset), NCCL_P2P_DISABLE=1; a slow "
    "start may need a larger dist.timeout_s (docs/data_parallel.md)";

static void nccl_load(void) {
    /* NCCL reads its environment when first used; rltrain sets two variables the user left unset, and says so.
     * - NCCL_RUNTIME_CONNECT=0: the communicator connects its peers in its set-up, not at its first collective
     *   (NCCL's default since 2.22). rltrain's first collective is a node of a graph capture, and a connection made
     *   there failed or hung with NCCL's cuMem buffers on (bench/nccl_diag.c's `captured` case). What NCCL still
     *   takes at its first launch (188 MiB a GPU on an H200 pair) comes during the start-up's capture, before the
     *   whole-process memory check after it (train/agent.c).
     * - NCCL_CUMEM_ENABLE=0: the older cudaMalloc-based buffers; the first two-GPU machine's set-up hung with cuMem
     *   on (docs/data_parallel.md), and rltrain's all-reduces use nothing only cuMem offers (NVLS, registration). */
    static const struct { const char *name, *value; } k_set[] = {{"NCCL_RUNTIME_CONNECT", "0"},
                                                                 {"NCCL_CUMEM_ENABLE", "0"}};
    size_t at = 0;
    for (size_t i = 0; i < sizeof k_set / sizeof k_set[0]; i++) {
        if (getenv(k_set[i].name)) continue;
        setenv(k_set[i].name, k_set[i].value, 0);
        at += (size_t)snprintf(g_nccl.note + at, sizeof g_nccl.note - at, "%s%s=%s", at ? ", " : "rltrain set ",
                               k_set[i].name, k_set[i].value);
        if (at >= sizeof g_nccl.note) at = sizeof g_nccl.note - 1;
    }
    if (at) snprintf(g_nccl.note + at, sizeof g_nccl.note - at, " for NCCL, where the environment left it unset "
                     "(docs/data_parallel.md says why; set a value yourself to choose)");
    const char *rc_set = getenv("NCCL_RUNTIME_CONNECT"), *cumem_set = getenv("NCCL_CUMEM_ENABLE");
    if (strcmp(rc_set, "0") != 0 && strcmp(cumem_set, "0") != 0)
        snprintf(g_nccl.note, sizeof g_nccl.note, "NCCL_RUNTIME_CONNECT=%.8s and NCCL_CUMEM_ENABLE=%.8s, as set: "
                 "NCCL then connects the ranks inside rltrain's first graph capture, which failed with cuMem "
                 "buffers on a 2 x H200 machine (docs/data_parallel.md); unset either to let rltrain set 0", rc_set,
                 cumem_set);
    const char *path = getenv("RLT_NCCL_LIBRARY");
    if (!path || !*path) path = "libnccl.so.2";
    g_nccl.lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!g_nccl.lib) {
        snprintf(g_nccl.why, sizeof g_nccl.why, "%s", dlerror());
        return;
    }
    *(void **)&g_nccl.get_version = dlsym(g_nccl.lib, "ncclGetVersion");
    *(void **)&g_nccl.get_unique_id = dlsym(g_nccl.lib, "ncclGetUniqueId");
    *(void **)&g_nccl.comm_init_rank_config = dlsym(g_nccl.lib, "ncclCommInitRankConfig");
    *(void **)&g_nccl.comm_get_async_error = dlsym(g_nccl.lib, "ncclCommGetAsyncError");
    *(void **)&g_nccl.group_start = dlsym(g_nccl.lib, "ncclGroupStart");
    *(void **)&g_nccl.group_end = dlsym(g_nccl.lib, "ncclGroupEnd");
    *(void **)&g_nccl.comm_destroy = dlsym(g_nccl.lib, "ncclCommDestroy");
    *(void **)&g_nccl.comm_abort = dlsym(g_nccl.lib, "ncclCommAbort");
    *(void **)&g_nccl.all_reduce = dlsym(g_nccl.lib, "ncclAllReduce");
    *(void **)&g_nccl.error_string = dlsym(g_nccl.lib, "ncclGetErrorString");
    int version = 0;
    if (!g_nccl.get_version || !g_nccl.get_unique_id || !g_nccl.comm_init_rank_config ||
        !g_nccl.comm_get_async_error || !g_nccl.group_start || !g_nccl.group_end || !g_nccl.comm_destroy ||
        !g_nccl.comm_abort || !g_nccl.all_reduce || !g_nccl.error_string) {
        snprintf(g_nccl.why, sizeof g_nccl.why, "%s lacks one of the NCCL functions rltrain calls", path);
    } else if (g_nccl.get_version(&version) != 0 || version < 21400) {
        /* Non-blocking communicators (ncclConfig_t.blocking) came with 2.14 (version code 21400). */
        snprintf(g_nccl.why, sizeof g_nccl.why, "%s is NCCL version code %d; rltrain needs 2.14 or later "
                 "(non-blocking communicators)", path, version);
    } else {
        g_nccl.version = version;
        return;
    }
    dlclose(g_nccl.lib);
    g_nccl.lib = NULL;
}

/* ---- release with a time limit ------------------------------------------------------------------------ */

typedef struct release_job {
    nccl_comm_t comm;
    int destroy;   /* ncclCommDestroy, else ncclCommAbort */
    int32_t state; /* 0 running, 1 done, 2 abandoned by the waiter (atomic) */
} release_job;

static void *release_main(void *arg) {
    release_job *j = arg;
    if (j->destroy) g_nccl.comm_destroy(j->comm);
    else g_nccl.comm_abort(j->comm);
    if (__atomic_exchange_n(&j->state, 1, __ATOMIC_ACQ_REL) == 2) free(j);
    return NULL;
}

/* ncclCommAbort or ncclCommDestroy of comm, waited for at most COMM_RELEASE_S: 0 when it returned, -1 when it was
 * abandoned (it may still finish in its thread; nothing waits for it). */
static int nccl_release(nccl_comm_t comm, int destroy) {
    release_job *j = calloc(1, sizeof *j);
    pthread_t t;
    pthread_attr_t a;
    if (!j || pthread_attr_init(&a) != 0) {
        free(j);
        return -1;
    }
    j->comm = comm;
    j->destroy = destroy;
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&t, &a, release_main, j);
    pthread_attr_destroy(&a);
    if (rc != 0) {
        free(j);
        return -1;
    }
    double dl = now_s() + COMM_RELEASE_S;
    while (__atomic_load_n(&j->state, __ATOMIC_ACQUIRE) == 0 && now_s() < dl) sleep_s(0.002);
    if (__atomic_load_n(&j->state, __ATOMIC_ACQUIRE) == 1 || __atomic_exchange_n(&j->state, 2, __ATOMIC_ACQ_REL) == 1) {
        free(j);
        return 0;
    }
    return -1;
}

/* Aborts d's communicator (under d->mu); RLT_OK-free: returns 1 when the abort returned in time. */
static int dcomm_abort_locked(cuda_dcomm *d) {
    if (!d->nccl) return 1;
    int ok = nccl_release(d->nccl, 0) == 0;
    d->nccl = NULL;
    return ok;
}

/* ---- set-up ------------------------------------------------------------------------------------------ */

/* Polls comms[0..n) until none is in progress, or the deadline: RLT_OK, or the message in e. */
static int nccl_wait_ready(cuda_dcomm **w, int32_t n, double deadline, rlt_err *e) {
    double nap = 0.0005;
    for (;;) {
        int32_t busy = 0;
        for (int32_t k = 0; k < n; k++) {
            nccl_result_t st = NCCL_SUCCESS;
            nccl_result_t rc = g_nccl.comm_get_async_error(w[k]->nccl, &st);
            if (rc != NCCL_SUCCESS) st = rc;
            if (st == NCCL_IN_PROGRESS) {
                busy++;
                continue;
            }
            if (st != NCCL_SUCCESS)
                return rlt_err_set(e, RLT_EDEVICE, __FILE__, __LINE__,
                                   "rank %d (cuda:%d) of %d: NCCL's communicator set-up (ncclCommInitRankConfig) "
                                   "failed: %s%s", (int)w[k]->rank, (int)w[k]->device, (int)w[k]->world,
                                   g_nccl.error_string(st), k_nccl_hint);
        }
        if (!busy) return RLT_OK;
        if (now_s() >= deadline) {
            for (int32_t k = 0; k < n; k++) {
                nccl_result_t st = NCCL_SUCCESS;
                g_nccl.comm_get_async_error(w[k]->nccl, &st);
                if (st == NCCL_IN_PROGRESS)
                    return rlt_err_set(e, RLT_ERUNTIME, __FILE__, __LINE__,
                                       "rank %d (cuda:%d) of %d waited %.0f s (dist.timeout_s) for NCCL's communicator "
                                       "set-up (ncclCommInitRankConfig, NCCL %d) to complete: it never did (another "
                                       "rank never arrived, or NCCL's connection set-up is stuck); aborted the "
                                       "communicators%s", (int)w[k]->rank, (int)w[k]->device, (int)w[k]->world,
                                       w[k]->timeout_s, g_nccl.version, k_nccl_hint);
            }
        }
        sleep_s(nap);
        if (nap < 0.01) nap *= 2;
    }
}

int cuda_comm_init(rlt_comm_init_desc *d, void **comms, rlt_err *e) {
    /* The devices first: NCCL's own message for a missing one is "unhandled cuda error". */
    int count = 0;
    cudaError_t crc = cudaGetDeviceCount(&count);
    if (crc != cudaSuccess)
        return rlt_err_set(e, RLT_EDEVICE, __FILE__, __LINE__, "a data-parallel run of %d GPUs, but CUDA finds none: %s",
                           (int)d->world, cudaGetErrorString(crc));
    if (d->world < 1 || d->world > RLT_COMM_MAX_RANKS || d->n < 0 || d->n > d->world || d->first_rank < 0 ||
        d->first_rank + d->n > d->world)
        return rlt_err_set(e, RLT_EINVAL, __FILE__, __LINE__, "comm_init: ranks %d .. %d of %d", (int)d->first_rank,
                           (int)(d->first_rank + d->n - 1), (int)d->world);
    for (int32_t k = 0; k < d->n; k++)
        if (d->devices[k] < 0 || d->devices[k] >= count)
            return rlt_err_set(e, RLT_EDEVICE, __FILE__, __LINE__,
                               "rank %d asks for cuda:%d, but this machine has %d GPU%s (cuda:0 .. cuda:%d)%s",
                               (int)(d->first_rank + k), (int)d->devices[k], count, count == 1 ? "" : "s", count - 1,
                               getenv("CUDA_VISIBLE_DEVICES") ? " visible (CUDA_VISIBLE_DEVICES)" : "");
    pthread_once(&g_nccl.once, nccl_load);
    snprintf(d->note, sizeof d->note, "%s", g_nccl.note);
    g_nccl.note[0] = '\0'; /* logged once */
    if (!g_nccl.lib)
        return rlt_err_set(e, RLT_EDEVICE, __FILE__, __LINE__,
                           "training on %d GPUs needs NCCL, which could not be loaded: %s; install it (the CUDA "
                           "toolkit's libnccl2, or pip's nvidia-nccl-cu13) or point RLT_NCCL_LIBRARY at libnccl.so.2",
                           (int)d->world, g_nccl.why);
    nccl_unique_id id;
    if (d->mode == RLT_COMM_INIT_ID || d->world == d->n) {
        nccl_result_t rc = g_nccl.get_unique_id(&id);
        if (rc != NCCL_SUCCESS)
            return rlt_err_set(e, RLT_EDEVICE, __FILE__, __LINE__, "ncclGetUniqueId failed: %s (NCCL_DEBUG=INFO says why; "
                               "NCCL_SOCKET_IFNAME picks the network interface)", g_nccl.error_string(rc));
        memcpy(d->id, id.internal, sizeof id.internal);
        if (d->mode == RLT_COMM_INIT_ID) return RLT_OK;
    } else {
        memcpy(id.internal, d->id, sizeof id.internal);
    }
    cuda_dcomm *w[RLT_COMM_MAX_RANKS] = {0};
    for (int32_t k = 0; k < d->n; k++) {
        w[k] = calloc(1, sizeof *w[k]);
        if (!w[k] || pthread_mutex_init(&w[k]->mu, NULL) != 0) {
            free(w[k]);
            for (int32_t j = 0; j < k; j++) pthread_mutex_destroy(&w[j]->mu), free(w[j]);
            return rlt_err_set(e, RLT_ENOMEM, __FILE__, __LINE__, "out of host memory for %d NCCL communicators", (int)d->n);
        }
        w[k]->rank = d->first_rank + k;
        w[k]->world = d->world;
        w[k]->device = d->devices[k];
        w[k]->timeout_s = d->timeout_s > 0 ? d->timeout_s : 300.0;
    }
    int prev = 0;
    cudaGetDevice(&prev);
    /* RLT_NCCL_BLOCKING=1: blocking communicators, for a NCCL whose non-blocking mode misbehaves; the set-up then
     * cannot be timed out (it returns when done), every later wait still is. */
    const char *blocking = getenv("RLT_NCCL_BLOCKING");
    nccl_config cfg = {sizeof(nccl_config), NCCL_CONFIG_MAGIC, NCCL_CONFIG_VERSION, blocking && !strcmp(blocking, "1"),
                       INT_MIN, INT_MIN, INT_MIN, NULL};
    /* Several ranks of one thread are made together (ncclCommInitAll's way); each returns at once (blocking = 0). */
    nccl_result_t rc = NCCL_SUCCESS, grc = NCCL_SUCCESS;
    int32_t made = 0;
    if (d->n > 1) g_nccl.group_start();
    for (int32_t k = 0; k < d->n && (rc == NCCL_SUCCESS || rc == NCCL_IN_PROGRESS); k++) {
        cudaSetDevice(d->devices[k]);
        rc = g_nccl.comm_init_rank_config(&w[k]->nccl, (int)d->world, id, (int)w[k]->rank, &cfg);
        if (w[k]->nccl) made = k + 1;
    }
    if (d->n > 1) grc = g_nccl.group_end();
    cudaSetDevice(prev);
    int status = RLT_OK;
    if ((rc != NCCL_SUCCESS && rc != NCCL_IN_PROGRESS) || (grc != NCCL_SUCCESS && grc != NCCL_IN_PROGRESS) || made < d->n)
        status = rlt_err_set(e, RLT_EDEVICE, __FILE__, __LINE__, "ncclCommInitRankConfig for ranks %d .. %d of %d failed: "
                             "%s%s", (int)d->first_rank, (int)(d->first_rank + d->n - 1), (int)d->world,
                             g_nccl.error_string(rc != NCCL_SUCCESS && rc != NCCL_IN_PROGRESS ? rc : grc), k_nccl_hint);
    if (status == RLT_OK) status = nccl_wait_ready(w, d->n, now_s() + w[0]->timeout_s, e);
    if (status != RLT_OK) {
        for (int32_t k = 0; k < d->n; k++) {
            if (w[k]->nccl) dcomm_abort_locked(w[k]);
            pthread_mutex_destroy(&w[k]->mu);
            free(w[k]);
        }
        return status;
    }
    for (int32_t k = 0; k < d->n; k++) comms[k] = w[k];
    return RLT_OK;
}

void cuda_comm_destroy(void *comm) {
    cuda_dcomm *d = comm;
    if (!d) return;
    pthread_mutex_lock(&d->mu);
    if (d->nccl && g_nccl.lib) nccl_release(d->nccl, 1);
    d->nccl = NULL;
    pthread_mutex_unlock(&d->mu);
    pthread_mutex_destroy(&d->mu);
    free(d);
}

/* From any thread (rlt_comm_abort): the rank's waits end at their next poll, and NCCL's kernels are released.
 * The owner may be inside an NCCL call; the abort then waits for that call (which never blocks: the comm is
 * non-blocking) for at most COMM_RELEASE_S, and otherwise leaves the abort to the owner's next poll. */
void cuda_comm_abort(void *comm) {
    cuda_dcomm *d = comm;
    if (!d) return;
    __atomic_store_n(&d->abort_requested, 1, __ATOMIC_RELEASE);
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += (time_t)COMM_RELEASE_S;
    if (pthread_mutex_timedlock(&d->mu, &dl) != 0) return;
    dcomm_abort_locked(d);
    pthread_mutex_unlock(&d->mu);
}

int cuda_comm_attach(rlt_backend *bk, rlt_comm *c, void *device_comm, int32_t rank, int32_t n_ranks) {
    cuda_impl *im = cuda_get(bk);
    (void)c; /* the module keeps no host-comm code of its own: everything it needs comes as arguments */
    RLT_TRY(cuda_seeds_refuse(bk, "comm_attach"));
    if (rank < 0 || rank >= n_ranks || n_ranks > RLT_COMM_MAX_RANKS)
        return rlt_err_set(bk->err, RLT_EINVAL, __FILE__, __LINE__, "comm_attach: rank %d of %d ranks", (int)rank,
                           (int)n_ranks);
    if (n_ranks > 1 && !device_comm)
        return rlt_err_set(bk->err, RLT_EINVAL, __FILE__, __LINE__,
                           "comm_attach: rank %d has no NCCL communicator (comm_init makes them)", (int)rank);
    im->nccl = device_comm;
    im->nranks = n_ranks;
    /* The comm lane for the buckets of an average that overlaps the backward (allreduce_mean with async): the
     * highest priority, so NCCL's few blocks start beside a long GEMM instead of after its last wave. */
    if (device_comm && !im->comm_stream) {
        int prio_lo = 0, prio_hi = 0;
        CUDA_CHECK(bk, cudaSetDevice(im->device));
        CUDA_CHECK(bk, cudaDeviceGetStreamPriorityRange(&prio_lo, &prio_hi));
        CUDA_CHECK(bk, cudaStreamCreateWithPriority(&im->comm_stream, cudaStreamNonBlocking, prio_hi));
        CUDA_CHECK(bk, cudaEventCreateWithFlags(&im->comm_fork, cudaEventDisableTiming));
        CUDA_CHECK(bk, cudaEventCreateWithFlags(&im->comm_join, cudaEventDisableTiming));
    }
    return RLT_OK;
}

/* The failure of a rank whose wait ended without its work: the comm aborted here or by another rank. */
static int dcomm_fail(rlt_backend *bk, cuda_dcomm *d, const char *what, int timed_out) {
    if (timed_out) {
        pthread_mutex_lock(&d->mu);
        dcomm_abort_locked(d);
        pthread_mutex_unlock(&d->mu);
        return rlt_err_set(bk->err, RLT_ERUNTIME, __FILE__, __LINE__,
                           "rank %d (cuda:%d) of %d waited %.0f s (dist.timeout_s) for %s, which includes NCCL's "
                           "all-reduce with the other ranks: it never completed (a rank that hangs, failed without "
                           "telling, or never arrived; or NCCL's transport is stuck); aborted the NCCL communicator%s",
                           (int)d->rank, (int)d->device, (int)d->world, d->timeout_s, what, k_nccl_hint);
    }
    return rlt_err_set(bk->err, RLT_EINTERRUPTED, __FILE__, __LINE__,
                       "rank %d (cuda:%d): %s was abandoned: another rank of the data-parallel run failed or stopped, "
                       "and the NCCL communicator was aborted", (int)d->rank, (int)d->device, what);
}

/* NCCL's own verdict on d: RLT_OK while it is healthy (or still working), else the failure. */
static int dcomm_check(rlt_backend *bk, cuda_dcomm *d, const char *what) {
    nccl_result_t st = NCCL_SUCCESS;
    pthread_mutex_lock(&d->mu);
    if (d->nccl) {
        nccl_result_t rc = g_nccl.comm_get_async_error(d->nccl, &st);
        if (rc != NCCL_SUCCESS) st = rc;
    }
    pthread_mutex_unlock(&d->mu);
    if (st == NCCL_SUCCESS || st == NCCL_IN_PROGRESS) return RLT_OK;
    pthread_mutex_lock(&d->mu);
    dcomm_abort_locked(d);
    pthread_mutex_unlock(&d->mu);
    return rlt_err_set(bk->err, RLT_ERUNTIME, __FILE__, __LINE__,
                       "rank %d (cuda:%d) of %d: NCCL reported %s during %s; aborted the NCCL communicator%s",
                       (int)d->rank, (int)d->device, (int)d->world, g_nccl.error_string(st), what, k_nccl_hint);
}

int cuda_comm_wait(rlt_backend *bk, cudaStream_t stream, const char *what) {
    cuda_impl *im = cuda_get(bk);
    cuda_dcomm *d = im->nccl;
    if (!d || im->nranks <= 1) {
        cudaError_t rc = cudaStreamSynchronize(stream);
        return rc == cudaSuccess ? RLT_OK : rlt_err_set(bk->err, RLT_ERUNTIME, __FILE__, __LINE__, "%s on %s failed: %s",
                                                        what, bk->device_name, cudaGetErrorString(rc));
    }
    /* The first millisecond polls without sleeping, as cudaStreamSynchronize itself would spin: most waits of a
     * step end there, with no added latency. Then naps of 1/50 of the time waited so far (at least 20 us, at most
     * 1 ms), so a long update ends at most about 2% later than it would under cudaStreamSynchronize, and a wait
     * that never ends costs a query per millisecond, not a core. After an abort the released kernels still get
     * COMM_RELEASE_S to finish, then the wait gives up rather than hang. */
    const double t0 = now_s();
    double limit = d->timeout_s, check_at = t0 + 1.0;
    int aborted = 0;
    for (;;) {
        cudaError_t rc = cudaStreamQuery(stream);
        /* Done, even after an abort: the device is usable (the host comm reports why the run ends). */
        if (rc == cudaSuccess) return RLT_OK;
        if (rc != cudaErrorNotReady)
            return rlt_err_set(bk->err, RLT_ERUNTIME, __FILE__, __LINE__, "%s on %s failed: %s (%s)", what,
                               bk->device_name, cudaGetErrorString(rc), cudaGetErrorName(rc));
        double t = now_s();
        if (!aborted && __atomic_load_n(&d->abort_requested, __ATOMIC_ACQUIRE)) {
            aborted = 1;
            limit = t - t0 + COMM_RELEASE_S;
            pthread_mutex_lock(&d->mu);
            dcomm_abort_locked(d);
            pthread_mutex_unlock(&d->mu);
        }
        if (t - t0 >= limit) return dcomm_fail(bk, d, what, !aborted);
        if (!aborted && t >= check_at) {
            RLT_TRY(dcomm_check(bk, d, what));
            check_at = t + 1.0;
        }
        double waited = t - t0;
        if (waited < 0.001) continue;
        double nap = waited / 50.0;
        sleep_s(nap < 0.00002 ? 0.00002 : nap > 0.001 ? 0.001 : nap);
    }
}

int cuda_comm_released(rlt_backend *bk) {
    cuda_impl *im = cuda_get(bk);
    cuda_dcomm *d = im ? im->nccl : NULL;
    return d && im->nranks > 1 && (__atomic_load_n(&d->abort_requested, __ATOMIC_ACQUIRE) || !d->nccl);
}

int cuda_allreduce_mean(rlt_backend *bk, float *x, uint64_t n, int32_t async) {
    cuda_impl *im = cuda_get(bk);
    cuda_dcomm *d = im->nccl;
    /* A communicator of one rank still goes through NCCL (an identity), so one GPU can check the captured path. */
    if (!d || n == 0) return RLT_OK;
    /* Batched over seeds (cuda_seeds), a collective would reduce the leading agent's buffer only; with one rank it
     * is the identity on it, and the other agents need none. */
    if (im->nranks > 1) RLT_TRY(cuda_seeds_refuse(bk, "allreduce_mean"));
    static const char what[] = "enqueueing the gradient average (ncclAllReduce)";
    /* async: on the comm lane, after the current lane's work so far (during a capture, a fork edge of the graph);
     * the next join waits for it (cuda_join). One stream, so the buckets reach NCCL one at a time in call order. */
    cudaStream_t stream = cuda_stream(bk);
    if (async && im->comm_stream) {
        CUDA_CHECK(bk, cudaEventRecord(im->comm_fork, stream));
        CUDA_CHECK(bk, cudaStreamWaitEvent(im->comm_stream, im->comm_fork, 0));
        stream = im->comm_stream;
        im->comm_pending = 1;
    }
    pthread_mutex_lock(&d->mu);
    nccl_result_t rc = d->nccl && !__atomic_load_n(&d->abort_requested, __ATOMIC_ACQUIRE)
                           ? g_nccl.all_reduce(x, x, (size_t)n, NCCL_FLOAT32, NCCL_AVG, d->nccl, stream)
                           : -1;
    pthread_mutex_unlock(&d->mu);
    if (rc == -1) return dcomm_fail(bk, d, what, 0);
    /* A non-blocking communicator may still be enqueueing: wait for it like any wait on the other ranks. */
    double t0 = now_s(), nap = 0.00002;
    while (rc == NCCL_IN_PROGRESS) {
        if (__atomic_load_n(&d->abort_requested, __ATOMIC_ACQUIRE)) return dcomm_fail(bk, d, what, 0);
        if (now_s() - t0 >= d->timeout_s) return dcomm_fail(bk, d, what, 1);
        sleep_s(nap);
        if (nap < 0.001) nap *= 2;
        pthread_mutex_lock(&d->mu);
        nccl_result_t st = NCCL_SUCCESS;
        if (d->nccl) g_nccl.comm_get_async_error(d->nccl, &st);
        pthread_mutex_unlock(&d->mu);
        rc = st;
    }
    if (rc != NCCL_SUCCESS)
        return rlt_err_set(bk->err, RLT_ERUNTIME, __FILE__, __LINE__, "rank %d (cuda:%d): ncclAllReduce of %llu floats "
                           "failed: %s%s", (int)d->rank, (int)d->device, (unsigned long long)n, g_nccl.error_string(rc),
                           k_nccl_hint);
    return RLT_OK;
}
