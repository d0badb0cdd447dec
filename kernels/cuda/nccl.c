/* nccl.c: the CUDA backend's data-parallel collectives (kernels/backend.h comm_*, allreduce_mean) through NCCL.
 * NCCL is loaded with dlopen when a group first asks for it (RLT_NCCL_LIBRARY, else libnccl.so.2 on the
 * loader's path, as PyTorch's nvidia-nccl wheel or the CUDA toolkit installs it), so the module builds and
 * runs without it; only a run on several GPUs needs it. The few declarations below are NCCL's stable C ABI
 * (nccl.h, 2.x): an opaque communicator, int results and enums whose values NCCL never renumbers.
 *
 * One process drives every rank (one thread each), so the communicators come from ncclCommInitAll. The
 * gradient average is ncclAllReduce with ncclAvg, in place on the current lane's stream: inside a graph capture it
 * becomes a node of the update's graph (NCCL >= 2.9.6 supports capture), so the whole data-parallel update
 * is still one launch. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "cuda_ops.h"

typedef struct nccl_comm_opaque *nccl_comm_t;
typedef int nccl_result_t; /* ncclResult_t: 0 is ncclSuccess */
enum { NCCL_FLOAT32 = 7, NCCL_AVG = 4 };

static struct {
    pthread_once_t once;
    void *lib;
    char why[256];
    nccl_result_t (*get_version)(int *version);
    nccl_result_t (*comm_init_all)(nccl_comm_t *comms, int ndev, const int *devlist);
    nccl_result_t (*comm_destroy)(nccl_comm_t comm);
    nccl_result_t (*comm_abort)(nccl_comm_t comm);
    nccl_result_t (*all_reduce)(const void *send, void *recv, size_t count, int dtype, int op, nccl_comm_t comm,
                                cudaStream_t stream);
    const char *(*error_string)(nccl_result_t r);
} g_nccl = {PTHREAD_ONCE_INIT};

static void nccl_load(void) {
    const char *path = getenv("RLT_NCCL_LIBRARY");
    if (!path || !*path) path = "libnccl.so.2";
    g_nccl.lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!g_nccl.lib) {
        snprintf(g_nccl.why, sizeof g_nccl.why, "%s", dlerror());
        return;
    }
    *(void **)&g_nccl.get_version = dlsym(g_nccl.lib, "ncclGetVersion");
    *(void **)&g_nccl.comm_init_all = dlsym(g_nccl.lib, "ncclCommInitAll");
    *(void **)&g_nccl.comm_destroy = dlsym(g_nccl.lib, "ncclCommDestroy");
    *(void **)&g_nccl.comm_abort = dlsym(g_nccl.lib, "ncclCommAbort");
    *(void **)&g_nccl.all_reduce = dlsym(g_nccl.lib, "ncclAllReduce");
    *(void **)&g_nccl.error_string = dlsym(g_nccl.lib, "ncclGetErrorString");
    int version = 0;
    if (!g_nccl.get_version || !g_nccl.comm_init_all || !g_nccl.comm_destroy || !g_nccl.comm_abort ||
        !g_nccl.all_reduce || !g_nccl.error_string) {
        snprintf(g_nccl.why, sizeof g_nccl.why, "%s lacks one of the NCCL functions rltrain calls", path);
    } else if (g_nccl.get_version(&version) != 0 || version < 21000) {
        /* ncclAvg came with 2.10 (version code 21000). */
        snprintf(g_nccl.why, sizeof g_nccl.why, "%s is NCCL version code %d; rltrain needs 2.10 or later (ncclAvg)",
                 path, version);
    } else {
        return;
    }
    dlclose(g_nccl.lib);
    g_nccl.lib = NULL;
}

int cuda_comm_init(int32_t n, const int32_t *devices, void **comms, rlt_err *e) {
    /* The devices first: NCCL's own message for a missing one is "unhandled cuda error". */
    int count = 0;
    cudaError_t crc = cudaGetDeviceCount(&count);
    if (crc != cudaSuccess)
        return rlt_err_set(e, RLT_EDEVICE, __FILE__, __LINE__, "devices lists %d GPUs, but CUDA finds none: %s", (int)n,
                           cudaGetErrorString(crc));
    for (int32_t k = 0; k < n; k++)
        if (devices[k] < 0 || devices[k] >= count)
            return rlt_err_set(e, RLT_EDEVICE, __FILE__, __LINE__,
                               "devices lists cuda:%d, but this machine has %d GPU%s (cuda:0 .. cuda:%d)", (int)devices[k],
                               count, count == 1 ? "" : "s", count - 1);
    pthread_once(&g_nccl.once, nccl_load);
    if (!g_nccl.lib)
        return rlt_err_set(e, RLT_EDEVICE, __FILE__, __LINE__,
                           "training on %d GPUs needs NCCL, which could not be loaded: %s; install it (the CUDA "
                           "toolkit's libnccl2, or pip's nvidia-nccl-cu13) or point RLT_NCCL_LIBRARY at libnccl.so.2",
                           (int)n, g_nccl.why);
    int devs[RLT_COMM_MAX_RANKS];
    for (int32_t k = 0; k < n && k < RLT_COMM_MAX_RANKS; k++) devs[k] = devices[k];
    nccl_comm_t made[RLT_COMM_MAX_RANKS] = {0};
    nccl_result_t rc = g_nccl.comm_init_all(made, (int)n, devs);
    if (rc != 0)
        return rlt_err_set(e, RLT_EDEVICE, __FILE__, __LINE__, "ncclCommInitAll over %d GPUs failed: %s", (int)n,
                           g_nccl.error_string(rc));
    for (int32_t k = 0; k < n; k++) comms[k] = made[k];
    return RLT_OK;
}

void cuda_comm_destroy(void *comm) {
    if (comm && g_nccl.lib) g_nccl.comm_destroy((nccl_comm_t)comm);
}

void cuda_comm_abort(void *comm) {
    if (comm && g_nccl.lib) g_nccl.comm_abort((nccl_comm_t)comm);
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
    return RLT_OK;
}

int cuda_allreduce_mean(rlt_backend *bk, float *x, uint64_t n) {
    cuda_impl *im = cuda_get(bk);
    /* A communicator of one rank still goes through NCCL (an identity), so one GPU can check the captured path. */
    if (!im->nccl || n == 0) return RLT_OK;
    /* Batched over seeds (cuda_seeds), a collective would reduce the leading agent's buffer only; with one rank it
     * is the identity on it, and the other agents need none. */
    if (im->nranks > 1) RLT_TRY(cuda_seeds_refuse(bk, "allreduce_mean"));
    nccl_result_t rc = g_nccl.all_reduce(x, x, (size_t)n, NCCL_FLOAT32, NCCL_AVG, (nccl_comm_t)im->nccl,
                                         cuda_stream(bk));
    if (rc != 0)
        return rlt_err_set(bk->err, RLT_ERUNTIME, __FILE__, __LINE__, "ncclAllReduce of %llu floats failed: %s",
                           (unsigned long long)n, g_nccl.error_string(rc));
    return RLT_OK;
}
