/* cuda_backend.c: the CUDA backend's table and lifecycle (device selection, the lanes' streams and cuBLAS
 * handles, the one device reservation, pinned host memory, copies, the lanes and graph capture). This file and the
 * kernels beside it build librltrain_cuda.so, which engine/backend_registry.c loads with dlopen, so
 * librltrain itself never links CUDA. The module carries its own copy of base/err.c and depends on no
 * symbol of librltrain (it is linked with --no-undefined), because it is loaded by the shared and the
 * static library alike.
 *
 * State lives in bk->impl (one cuda_impl per backend): no globals, so two backends on two devices can
 * live in one process. The CUDA runtime's "current device" is per thread, so every entry point that
 * creates or frees device objects first makes this backend's device current. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda.h>

#include "cuda_ops.h"

#define MIB (1024.0 * 1024.0)

static const char *const k_device_hint =
    "check that the NVIDIA driver is loaded (nvidia-smi) and that CUDA_VISIBLE_DEVICES does not hide the GPU, "
    "or use device: cpu";

/* cuBLAS workspace sizes NVIDIA recommends in the cublasSetWorkspace documentation: 32 MiB on Hopper
 * (compute capability 9.x) and later, 4 MiB before. With a workspace of our own, cuBLAS never allocates
 * behind our back, which the sealed arena and graph capture both need. Lane 0 gets the recommended size;
 * each side lane gets 4 MiB of its own (two GEMMs running at once on two lanes must never share a
 * workspace). Side lanes rarely call cuBLAS: the dense layers run in our own kernels. cuBLASLt (gemm_lt.c)
 * takes its workspace per call from the first 4 MiB of the current lane's slice, on every lane alike. That is
 * the workspace for ops of any shape (the workspace op's query); an agent's plan has one only when some op of it calls
 * cuBLAS (plan_workspace), and no cuBLAS handle at all otherwise. */
static uint64_t cuda_lane0_workspace(const cuda_impl *c) { return cuda_rule_lane0_workspace(c ? c->cc_major : 0); }

static uint64_t cuda_workspace_bytes(rlt_backend *bk) {
    cuda_impl *c = cuda_get(bk);
    return cuda_rule_workspace_bytes(c ? c->cc_major : 0, c ? c->n_lanes : 1);
}

static int cuda_measure_memory(rlt_backend *bk);

static void cuda_close(rlt_backend *bk) {
    cuda_impl *c = cuda_get(bk);
    if (!c) return;
    /* Errors are ignored on the way out: there is nobody left to report them to, and each release below
     * must still run. */
    cudaSetDevice(c->device);
    if (c->capturing >= 0 && c->streams[0]) {
        cudaGraph_t g = NULL;
        if (cudaStreamEndCapture(c->streams[0], &g) == cudaSuccess && g) cudaGraphDestroy(g);
    }
    /* After an NCCL abort a stream may hold work that never ends: each gets a bounded wait, and if one still
     * runs, the device objects are left to the process's end rather than freed (cudaFree would wait forever). */
    int stuck = 0;
    const int released = cuda_comm_released(bk);
    for (int32_t k = 0; k <= RLT_BACKEND_MAX_LANES + 1; k++) {
        cudaStream_t s = k < RLT_BACKEND_MAX_LANES    ? c->streams[k]
                         : k == RLT_BACKEND_MAX_LANES ? c->comm_stream
                                                      : c->aside_stream;
        if (!s) continue;
        if (!released) {
            cudaStreamSynchronize(s);
            continue;
        }
        struct timespec nap = {0, 1000000};
        for (int i = 0; i < 10000 && cudaStreamQuery(s) == cudaErrorNotReady; i++) nanosleep(&nap, NULL);
        stuck |= cudaStreamQuery(s) == cudaErrorNotReady;
    }
    if (stuck) {
        cudaGetLastError();
        free(c);
        bk->impl = NULL;
        return;
    }
    for (int32_t i = 0; i < RLT_BACKEND_MAX_GRAPHS; i++)
        if (c->graphs[i]) cudaGraphExecDestroy(c->graphs[i]);
    cuda_conv_close(bk);
    if (c->scratch) cudaFree(c->scratch);
    if (c->seed_ptrs) cudaFree(c->seed_ptrs);
    free(c->seed_ptrs_host);
    if (c->seed_event) cudaEventDestroy(c->seed_event);
    cuda_lt_close(bk);
    if (c->blas) cublasDestroy(c->blas);
    for (int32_t k = 0; k < RLT_BACKEND_MAX_LANES; k++) {
        if (c->join_event[k]) cudaEventDestroy(c->join_event[k]);
        if (c->streams[k]) cudaStreamDestroy(c->streams[k]);
    }
    if (c->fork_event) cudaEventDestroy(c->fork_event);
    if (c->aside_event) cudaEventDestroy(c->aside_event);
    if (c->aside_stream) cudaStreamDestroy(c->aside_stream);
    if (c->comm_fork) cudaEventDestroy(c->comm_fork);
    if (c->comm_join) cudaEventDestroy(c->comm_join);
    if (c->comm_stream) cudaStreamDestroy(c->comm_stream);
    cudaGetLastError(); /* leave no stale error for whoever uses the runtime next */
    cuda_procmem_close(c);
    free(c);
    bk->impl = NULL;
}

/* Forces every kernel of the module to load now (see cuda_ops.h). */
static cudaError_t cuda_preload_all(void) {
    cudaError_t (*const preload[])(void) = {cuda_preload_bias_act, cuda_preload_fill,   cuda_preload_adam,
                                            cuda_preload_polyak,   cuda_preload_replay, cuda_preload_losses,
                                            cuda_preload_td3,      cuda_preload_dqn,    cuda_preload_conv_bias,
                                            cuda_preload_linear,   cuda_preload_linear_chain, cuda_preload_lowp,
                                            cuda_preload_conv_gemm, cuda_preload_seed_copy};
    for (size_t i = 0; i < sizeof preload / sizeof preload[0]; i++) {
        cudaError_t rc = preload[i]();
        if (rc != cudaSuccess) return rc;
    }
    return cudaSuccess;
}

/* Everything after the device checks; a failure leaves cleanup to cuda_open. */
static int cuda_open_device(rlt_backend *bk, cuda_impl *c) {
    struct cudaDeviceProp prop;
    /* NVML's figures before the context exists: the context's cost is what they show afterwards. */
    cuda_procmem_open(c);
    CUDA_CHECK(bk, cudaSetDevice(c->device));
    /* cudaFree(0) is the customary way to make the runtime create the primary context now rather than
     * at some later call, so that failures (device busy in exclusive mode, out of memory) surface here. */
    CUDA_CHECK(bk, cudaFree(0));
    cuda_procmem_context_made(c);
    CUDA_CHECK(bk, cudaGetDeviceProperties(&prop, c->device));
    c->cc_major = prop.major;
    c->cc_minor = prop.minor;
    c->sm_count = prop.multiProcessorCount > 0 ? prop.multiProcessorCount : 1;
    c->smem_optin = (int32_t)prop.sharedMemPerBlockOptin;
    snprintf(bk->device_name, sizeof bk->device_name, "cuda:%d (%.48s)", (int)c->device, prop.name);

    /* Non-blocking: our streams never synchronise with the legacy default stream, which other code in the
     * process (a simulator, a framework) may be using. Lanes 0 and 1 get the highest priority and lanes 2
     * and 3 the lowest (see branch in kernels/backend.h): when lanes compete for SMs, the critical path goes
     * first. The priorities are captured into the graph's kernel nodes. */
    int prio_lo = 0, prio_hi = 0;
    CUDA_CHECK(bk, cudaDeviceGetStreamPriorityRange(&prio_lo, &prio_hi));
    for (int32_t k = 0; k < c->n_lanes; k++) {
        int prio = k < 2 ? prio_hi : prio_lo;
        CUDA_CHECK(bk, cudaStreamCreateWithPriority(&c->streams[k], cudaStreamNonBlocking, prio));
        CUDA_CHECK(bk, cudaEventCreateWithFlags(&c->join_event[k], cudaEventDisableTiming));
    }
    CUDA_CHECK(bk, cudaEventCreateWithFlags(&c->fork_event, cudaEventDisableTiming));
    CUDA_CHECK(bk, cudaEventCreateWithFlags(&c->seed_event, cudaEventDisableTiming));
    /* The aside stream (acting beside an update; the graph op's ASIDE modes), at the highest priority: the host waits
     * for what runs there. Not where the caller asked for one lane (a seed group's members but its lead): streams cost
     * the device hardware queues, and those members never act aside. */
    if (bk->lanes != 1) {
        CUDA_CHECK(bk, cudaStreamCreateWithPriority(&c->aside_stream, cudaStreamNonBlocking, prio_hi));
        CUDA_CHECK(bk, cudaEventCreateWithFlags(&c->aside_event, cudaEventDisableTiming));
    }
    /* No cuBLAS handle yet: it costs tens of MiB of device memory (64 MiB on an H100), and a plan whose ops
     * never call cuBLAS (every dense layer within linear.cu's kernels) never creates one (cuda_blas_ensure). */
    /* Reduction scratch now, before the seal (and before the memory measurement below, so it counts as
     * context): ops must never allocate. */
    c->max_seeds = bk->seeds > 1 ? bk->seeds : 1; /* a batched op keeps each agent's partial sums apart */
    CUDA_CHECK(bk, cudaMalloc((void **)&c->scratch, (size_t)c->max_seeds * CUDA_SCRATCH_FLOATS * sizeof(float)));
    if (c->max_seeds > 1) {
        /* The batched library products' pointer arrays (cuda_gemm_seeds), device and host mirror, also now. */
        size_t ptr_bytes = (size_t)3 * CUDA_SEED_GEMMS * c->max_seeds * sizeof(void *);
        CUDA_CHECK(bk, cudaMalloc((void **)&c->seed_ptrs, ptr_bytes));
        c->seed_ptrs_host = (void **)calloc(1, ptr_bytes);
        if (!c->seed_ptrs_host) return rlt_err_set(bk->err, RLT_ENOMEM, __FILE__, __LINE__, "out of host memory");
    }
    CUDA_CHECK(bk, cuda_preload_all());
    CUDA_CHECK(bk, cudaDeviceSynchronize());

    /* What the context, streams, scratch and our kernels hold, by the best measure this machine has (see
     * process_memory.c); a library handle created later adds its own cost. */
    size_t free_b = 0, total_b = 0;
    CUDA_CHECK(bk, cudaMemGetInfo(&free_b, &total_b));
    bk->device_total = total_b;
    return cuda_measure_memory(bk);
}

int cuda_blas_ensure(rlt_backend *bk) {
    cuda_impl *c = cuda_get(bk);
    if (c->blas) return RLT_OK;
    if (c->capturing >= 0)
        return rlt_err_set(bk->err, RLT_ESTATE, __FILE__, __LINE__,
                           "an op needs cuBLAS during the capture of graph slot %d, but the plan did not ask for it "
                           "(plan_workspace's rule missed this op's shape: a bug)",
                           (int)c->capturing);
    CUDA_CHECK(bk, cudaSetDevice(c->device));
    uint64_t before = 0, after = 0;
    RLT_TRY(cuda_procmem_now(bk, &before));
    CUBLAS_CHECK(bk, cublasCreate(&c->blas));
    CUBLAS_CHECK(bk, cublasSetStream(c->blas, c->streams[0]));
    c->blas_lane = 0;
    /* Set even when there is none yet (NULL, 0): cuBLAS then picks algorithms that need no workspace rather than
     * allocating a pool of its own. */
    CUBLAS_CHECK(bk, cublasSetWorkspace(c->blas, c->lane_ws[0], (size_t)c->lane_ws_bytes[0]));
    /* alpha and beta are host floats (constants of each call, captured by value in a graph). */
    CUBLAS_CHECK(bk, cublasSetPointerMode(c->blas, CUBLAS_POINTER_MODE_HOST));
    /* Pure fp32: CUBLAS_DEFAULT_MATH never uses TF32 for SGEMM, whose 10-bit mantissa would break parity
     * with the CPU backend (about 1e-3 relative instead of 1e-7). A faster mode belongs behind an option. */
    CUBLAS_CHECK(bk, cublasSetMathMode(c->blas, CUBLAS_DEFAULT_MATH));
    CUDA_CHECK(bk, cudaDeviceSynchronize());
    RLT_TRY(cuda_procmem_now(bk, &after));
    c->blas_bytes = after > before ? after - before : 0;
    c->handle_bytes += c->blas_bytes;
    return RLT_OK;
}

/* Which ops call cuBLAS, decided from shapes and types alone: a 16-bit dense layer (its products are cuBLAS
 * GEMMs, gemm.c), a dense layer beyond linear.cu's kernels, and an fp32 convolution (its input gradient is a
 * cuBLAS GEMM, conv_gemm.cu; the first layer needs none, but conv_prepare's trial run computes one). 16-bit
 * convolutions run on cuDNN, which has its own handle and its workspace in the conv slots'. */
/* Dense layers whose products go to the library: the 16-bit ones and those beyond linear.cu's kernels. They run on
 * cuBLASLt (gemm_lt.c), with cuBLAS as its fallback. */
static int cuda_plan_dense_library(const cuda_impl *c, const rlt_op_use *use) {
    return cuda_rule_dense_library(use, c->max_seeds);
}

static int cuda_plan_calls_blas(const cuda_impl *c, const rlt_op_use *use) {
    if (cuda_plan_dense_library(c, use)) return 1;
    for (int32_t i = 0; i < RLT_BACKEND_MAX_CONVS; i++)
        if (c->conv_slots[i].ready && c->conv_slots[i].gemm) return 1;
    return 0;
}

static int cuda_plan_workspace(rlt_backend *bk, const rlt_op_use *use, uint64_t *bytes) {
    cuda_impl *c = cuda_get(bk);
    *bytes = 0;
    /* precision: tf32 (read by linear.cu and gemm_lt.c for the products they send to the library). */
    c->tf32 = use->dense_tf32 != 0;
    c->planned = 1;
    if (cuda_plan_calls_blas(c, use)) {
        RLT_TRY(cuda_blas_ensure(bk));
        if (cuda_plan_dense_library(c, use)) RLT_TRY(cuda_lt_ensure(bk));
        *bytes = cuda_workspace_bytes(bk);
    } else if (c->blas && c->capturing < 0 && !c->workspace) {
        /* An earlier plan of this backend needed cuBLAS (memory.auto_fit or `rltrain plan` trying a larger batch)
         * and this one does not: give the handles back. What they leave behind (loaded kernels) is measured as
         * context from here on. */
        cuda_lt_close(bk);
        cublasDestroy(c->blas);
        c->blas = NULL;
        c->handle_bytes -= c->blas_bytes;
        c->blas_bytes = 0;
    }
    return cuda_measure_memory(bk);
}

static int cuda_measure_memory(rlt_backend *bk) {
    cuda_impl *c = cuda_get(bk);
    CUDA_CHECK(bk, cudaSetDevice(c->device));
    uint64_t held = 0;
    RLT_TRY(cuda_procmem_now(bk, &held));
    /* The device's free memory now, also while training (the trainer's watch of a shared GPU); the plan keeps its
     * own figure from before the reservation. */
    size_t free_b = 0, total_b = 0;
    CUDA_CHECK(bk, cudaMemGetInfo(&free_b, &total_b));
    bk->device_free = free_b;
    /* cudaMalloc rounds the arena up to its page size: what the rounding takes counts as context. */
    bk->context_bytes = held > c->reserved_bytes ? held - c->reserved_bytes : 0;
    bk->handle_bytes = c->handle_bytes < bk->context_bytes ? c->handle_bytes : bk->context_bytes;
    const char *handles = c->blas && c->lt && c->conv ? "cuBLAS, cuBLASLt, cuDNN"
                          : c->blas && c->lt          ? "cuBLAS, cuBLASLt"
                          : c->blas && c->conv        ? "cuBLAS, cuDNN"
                          : c->blas                   ? "cuBLAS"
                          : c->conv                   ? "cuDNN"
                                                      : NULL;
    snprintf(bk->memory_note, sizeof bk->memory_note, "process memory measured %s; library handles: %s",
             cuda_procmem_method(c), handles ? handles : "none (no op of this plan calls cuBLAS or cuDNN)");
    return RLT_OK;
}

/* Whether the developer switch `name` (cuda_ops.h) is set to exactly `value`. */
static int cuda_env_is(const char *name, const char *value) {
    const char *v = getenv(name);
    return v && strcmp(v, value) == 0;
}

static int cuda_open(rlt_backend *bk, int32_t device_index, int32_t cpu_threads) {
    (void)cpu_threads; /* host threads are the CPU backend's concern */
    int count = 0;
    cudaError_t rc = cudaGetDeviceCount(&count);
    if (rc != cudaSuccess) {
        /* No driver, a driver older than this runtime, or no device: all mean "no usable GPU here". */
        const char *why = cudaGetErrorString(rc), *name = cudaGetErrorName(rc);
        cudaGetLastError();
        /* The runtime says "driver version is insufficient" both for an old driver and for none at all;
         * the runtime loads the driver library when there is one, so its absence tells them apart. */
        if (rc == cudaErrorInsufficientDriver) {
            void *drv = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
            if (drv) dlclose(drv);
            else why = "no NVIDIA driver is installed (libcuda.so.1 was not found)";
        }
        return rlt_err_set(bk->err, RLT_EDEVICE, __FILE__, __LINE__, "no usable CUDA device: %s (%s); %s", why, name,
                           k_device_hint);
    }
    if (count <= 0)
        return rlt_err_set(bk->err, RLT_EDEVICE, __FILE__, __LINE__, "no CUDA device is visible; %s", k_device_hint);
    int32_t index = device_index < 0 ? 0 : device_index;
    if (index >= count) {
        /* Never fall back to another device: the user asked for this one, and silently training on cuda:0
         * next to another job there is worse than stopping. */
        char range[48];
        if (count == 1) snprintf(range, sizeof range, "cuda:0");
        else snprintf(range, sizeof range, "cuda:0 to cuda:%d", count - 1);
        return rlt_err_set(bk->err, RLT_EDEVICE, __FILE__, __LINE__,
                           "cuda:%d requested but this machine has %d CUDA device%s (%s); pick one of those, check "
                           "CUDA_VISIBLE_DEVICES, or use device: cpu",
                           (int)index, count, count == 1 ? "" : "s", range);
    }

    cuda_impl *c = calloc(1, sizeof *c);
    if (!c) return rlt_err_set(bk->err, RLT_ENOMEM, __FILE__, __LINE__, "out of host memory for the CUDA backend");
    c->device = index;
    c->capturing = -1;
    /* The developer switches, read once here (see cuda_ops.h), and the caller's limit (bk->lanes, a seed group's
     * members sharing the GPU). */
    c->n_lanes = cuda_rule_lanes(getenv("RLT_CUDA_LANES"), bk->lanes);
    c->seeds_blas = !cuda_env_is("RLT_CUDA_SEEDS_BLAS", "0");
    c->seeds_lt = !cuda_env_is("RLT_CUDA_SEEDS_LT", "0");
    c->seeds_rule = cuda_rule_seeds_env(getenv("RLT_CUDA_SEEDS_RULE"));
    c->seeds_rows = !cuda_env_is("RLT_CUDA_SEEDS_ROWS", "1");
    c->span_hot = !cuda_env_is("RLT_CUDA_SPAN_HOT", "0");
    c->gather_rows = !cuda_env_is("RLT_CUDA_GATHER_ROWS", "0");
    c->seeds_conv = cuda_env_is("RLT_CUDA_SEEDS_CONV", "1");
    c->conv_tf32 = !cuda_env_is("RLT_CUDA_CONV_TF32", "0");
    bk->impl = c;
    bk->device_is_host = 0;
    bk->device_index = index;
    int orc = cuda_open_device(bk, c);
    if (orc != RLT_OK) {
        /* A failure here is about the device (busy, in exclusive mode, out of memory, broken install):
         * report it as such, keeping the library's message. */
        char inner[sizeof bk->err->msg / 2] = "";
        if (bk->err) snprintf(inner, sizeof inner, "%.1000s", bk->err->msg);
        cuda_close(bk);
        return rlt_err_set(bk->err, RLT_EDEVICE, __FILE__, __LINE__, "could not open cuda:%d: %s", (int)index, inner);
    }
    return RLT_OK;
}

static int cuda_set_workspace(rlt_backend *bk, void *ptr, uint64_t bytes) {
    cuda_impl *c = cuda_get(bk);
    /* cuBLAS requires a 256-byte aligned workspace. */
    if (((uintptr_t)ptr & 255u) != 0)
        return rlt_err_set(bk->err, RLT_EINVAL, __FILE__, __LINE__,
                           "cuBLAS workspace at %p is not 256-byte aligned", ptr);
    if (ptr && bytes < cuda_workspace_bytes(bk))
        return rlt_err_set(bk->err, RLT_EINVAL, __FILE__, __LINE__,
                           "cuBLAS workspace of %llu bytes, but the workspace query asked for %llu", (unsigned long long)bytes,
                           (unsigned long long)cuda_workspace_bytes(bk));
    /* A caller that runs ops without a plan hands over the query's bytes: its ops may call cuBLAS, and cuBLASLt (with
     * a plan, plan_workspace created what its shapes need). */
    if (ptr) RLT_TRY(cuda_blas_ensure(bk));
    if (ptr && !c->planned) RLT_TRY(cuda_lt_ensure(bk));
    /* NULL/0 means no workspace: cuBLAS then picks algorithms that need none (and allocates nothing), and a
     * plan without cuBLAS has no handle to tell. cuda_blas_bind (gemm.c) sets the lane's slice again after each
     * cublasSetStream, which resets it to cuBLAS's own pool. Lane 0's slice comes first, then the side lanes'
     * (each a multiple of 256 bytes, so every slice stays aligned). */
    unsigned char *at = ptr;
    for (int32_t k = 0; k < c->n_lanes; k++) {
        uint64_t part = k == 0 ? cuda_lane0_workspace(c) : CUDA_SIDE_WORKSPACE;
        c->lane_ws[k] = at;
        c->lane_ws_bytes[k] = at ? part : 0;
        if (at) at += part;
    }
    if (c->blas)
        CUBLAS_CHECK(bk, cublasSetWorkspace(c->blas, c->lane_ws[c->blas_lane], (size_t)c->lane_ws_bytes[c->blas_lane]));
    c->workspace = ptr;
    c->workspace_bytes = ptr ? bytes : 0;
    return RLT_OK;
}

/* The table's workspace op: the query (need non-NULL), or the hand-over. */
static int cuda_workspace(rlt_backend *bk, void *ptr, uint64_t bytes, uint64_t *need) {
    if (need) {
        *need = cuda_workspace_bytes(bk);
        return RLT_OK;
    }
    return cuda_set_workspace(bk, ptr, bytes);
}

/* ---- the seed group's span (rlt_backend.span) ----
 * Agent z's device arena is mapped at span->va + z * stride through CUDA's virtual memory management: agent 0
 * reserves an address range of n strides (no memory), each agent creates its own physical allocation of its arena
 * rounded up to the granularity and maps it at its slot. Every agent still holds exactly its own arena (cudaMalloc
 * rounds a block this large to the same 2 MiB pages), but the deltas of a batched launch become z * stride, which
 * strided library products need. The driver's entry points come through the runtime (no link to libcuda). Any
 * failure but out-of-memory leaves the arena to cudaMalloc: batching then runs over pointer arrays as before. */
typedef CUresult (*span_granularity_fn)(size_t *, const CUmemAllocationProp *, CUmemAllocationGranularity_flags);
typedef CUresult (*span_reserve_fn)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
typedef CUresult (*span_create_fn)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
                                   unsigned long long);
typedef CUresult (*span_map_fn)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
typedef CUresult (*span_access_fn)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
typedef CUresult (*span_unmap_fn)(CUdeviceptr, size_t);
typedef CUresult (*span_release_fn)(CUmemGenericAllocationHandle);
typedef CUresult (*span_free_fn)(CUdeviceptr, size_t);

typedef struct span_api {
    span_granularity_fn granularity;
    span_reserve_fn reserve;
    span_create_fn create;
    span_map_fn map;
    span_access_fn access;
    span_unmap_fn unmap;
    span_release_fn release;
    span_free_fn free;
} span_api;

/* The entry points, or 0 when the driver lacks one. */
static int span_api_get(span_api *a) {
    static const char *const names[8] = {"cuMemGetAllocationGranularity", "cuMemAddressReserve", "cuMemCreate",
                                         "cuMemMap", "cuMemSetAccess", "cuMemUnmap", "cuMemRelease",
                                         "cuMemAddressFree"};
    void *fn[8];
    for (int i = 0; i < 8; i++) {
        enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
        fn[i] = NULL;
        if (cudaGetDriverEntryPointByVersion(names[i], &fn[i], 12000, cudaEnableDefault, &q) != cudaSuccess ||
            q != cudaDriverEntryPointSuccess || !fn[i]) {
            cudaGetLastError();
            return 0;
        }
    }
    memcpy(&a->granularity, &fn[0], sizeof fn[0]);
    memcpy(&a->reserve, &fn[1], sizeof fn[1]);
    memcpy(&a->create, &fn[2], sizeof fn[2]);
    memcpy(&a->map, &fn[3], sizeof fn[3]);
    memcpy(&a->access, &fn[4], sizeof fn[4]);
    memcpy(&a->unmap, &fn[5], sizeof fn[5]);
    memcpy(&a->release, &fn[6], sizeof fn[6]);
    memcpy(&a->free, &fn[7], sizeof fn[7]);
    return 1;
}

static CUmemAllocationProp span_prop(int device) {
    CUmemAllocationProp p;
    memset(&p, 0, sizeof p);
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p.location.id = device;
    return p;
}

/* Records the first reason a slot was not mapped (the group logs it); returns RLT_OK: the caller uses cudaMalloc. */
static int span_skip(rlt_arena_span *sp, int32_t slot, const char *what, int code) {
    if (!sp->why[0]) snprintf(sp->why, sizeof sp->why, "slot %d: %s (%d)", (int)slot, what, code);
    return RLT_OK;
}

/* Creates a physical allocation of `bytes` (a multiple of the granularity) and maps it read-write at `at`: RLT_OK with
 * *h set; RLT_OK with *h 0 when it could not be mapped (span_skip says why); RLT_ENOFIT when out of memory. */
static int span_map_new(rlt_backend *bk, const span_api *a, const CUmemAllocationProp *prop, CUdeviceptr at,
                        uint64_t bytes, uint64_t arena, CUmemGenericAllocationHandle *h) {
    rlt_arena_span *sp = bk->span;
    *h = 0;
    CUresult r = a->create(h, (size_t)bytes, prop, 0);
    if (r == CUDA_ERROR_OUT_OF_MEMORY) {
        size_t free_b = 0, total_b = 0;
        *h = 0;
        cudaMemGetInfo(&free_b, &total_b);
        return rlt_err_set(bk->err, RLT_ENOFIT, __FILE__, __LINE__,
                           "the device arena (%.1f MiB, %.1f MiB mapped) does not fit on %s: %.1f MiB free of %.1f "
                           "MiB now; lower memory.budget_mb or replay.capacity, or free the GPU",
                           arena / MIB, bytes / MIB, bk->device_name, free_b / MIB, total_b / MIB);
    }
    if (r != CUDA_SUCCESS) {
        *h = 0;
        return span_skip(sp, bk->span_slot, "cuMemCreate failed", (int)r);
    }
    CUmemAccessDesc acc;
    memset(&acc, 0, sizeof acc);
    acc.location = prop->location;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    r = a->map(at, (size_t)bytes, 0, *h, 0);
    if (r == CUDA_SUCCESS) {
        r = a->access(at, (size_t)bytes, &acc, 1);
        if (r == CUDA_SUCCESS) return RLT_OK;
        a->unmap(at, (size_t)bytes);
    }
    a->release(*h);
    *h = 0;
    return span_skip(sp, bk->span_slot, "cuMemMap or cuMemSetAccess failed", (int)r);
}

/* Maps the physical allocation h (hot bytes, the arena's first part) a second time, at this slot of the span's hot
 * range; agent 0 reserves that range and fixes its stride. Returns the address, or 0 when it is not mapped there (the
 * batched products then read the arenas themselves, in shorter runs). */
static uint64_t span_alias(rlt_backend *bk, const span_api *a, const CUmemAllocationProp *prop,
                           CUmemGenericAllocationHandle h, uint64_t hot, size_t gran) {
    rlt_arena_span *sp = bk->span;
    const int32_t slot = bk->span_slot;
    if (slot == 0 && sp->hot_va == 0) {
        CUdeviceptr va = 0;
        if (a->reserve(&va, (size_t)(hot * (uint64_t)sp->n), gran, 0, 0) != CUDA_SUCCESS || !va) return 0;
        sp->hot_va = (uint64_t)va;
        sp->hot_stride = hot;
    }
    if (sp->hot_va == 0 || hot != sp->hot_stride) return 0;
    CUdeviceptr at = (CUdeviceptr)(sp->hot_va + (uint64_t)slot * sp->hot_stride);
    CUmemAccessDesc acc;
    memset(&acc, 0, sizeof acc);
    acc.location = prop->location;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    if (a->map(at, (size_t)hot, 0, h, 0) != CUDA_SUCCESS) return 0;
    if (a->access(at, (size_t)hot, &acc, 1) != CUDA_SUCCESS) {
        a->unmap(at, (size_t)hot);
        return 0;
    }
    __atomic_add_fetch(&sp->hot_users, 1, __ATOMIC_ACQ_REL);
    return (uint64_t)at;
}

/* Maps a `bytes` arena at this backend's slot of its span: RLT_OK with *base set; RLT_OK with *base NULL when the span
 * cannot take it (the caller then uses cudaMalloc); RLT_ENOFIT when the device is out of memory.
 * When the plan says where the replay starts (bk->arena_hot) and the part before it rounds to less than the arena,
 * the arena is two physical allocations mapped back to back at the slot, the first also at the span's hot slot
 * (span_alias): the same memory, no more of it, at two addresses. */
static int span_reserve(rlt_backend *bk, uint64_t bytes, void **base) {
    cuda_impl *c = cuda_get(bk);
    rlt_arena_span *sp = bk->span;
    const int32_t slot = bk->span_slot;
    *base = NULL;
    span_api a;
    if (!sp || sp->n < 2) return RLT_OK;
    if (slot < 0 || slot >= sp->n) return span_skip(sp, slot, "no such slot", sp->n);
    if (!span_api_get(&a)) return span_skip(sp, slot, "the driver offers no virtual memory management", 0);
    CUmemAllocationProp prop = span_prop(c->device);
    size_t gran = 0;
    CUresult r = a.granularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    if (r != CUDA_SUCCESS || gran == 0) return span_skip(sp, slot, "cuMemGetAllocationGranularity failed", (int)r);
    uint64_t mapped = (bytes + gran - 1) / gran * gran;
    if (slot == 0 && sp->va == 0) {
        /* Agent 0 fixes the stride: its arena is the group's largest (it keeps the lanes of a single run). */
        CUdeviceptr va = 0;
        r = a.reserve(&va, (size_t)(mapped * (uint64_t)sp->n), gran, 0, 0);
        if (r != CUDA_SUCCESS || !va) return span_skip(sp, slot, "cuMemAddressReserve failed", (int)r);
        sp->va = (uint64_t)va;
        sp->stride = mapped;
    }
    if (sp->va == 0) return span_skip(sp, slot, "agent 0 has not reserved the span", 0);
    if (mapped > sp->stride) return span_skip(sp, slot, "its arena is larger than agent 0's", (int)(mapped >> 20));
    const CUdeviceptr at = (CUdeviceptr)(sp->va + (uint64_t)slot * sp->stride);
    uint64_t hot = (bk->arena_hot + gran - 1) / gran * gran;
    if (!c->span_hot || bk->arena_hot == 0 || hot >= mapped) hot = mapped; /* one allocation, no hot slot */
    CUmemGenericAllocationHandle h = 0, h2 = 0;
    RLT_TRY(span_map_new(bk, &a, &prop, at, hot, bytes, &h));
    if (!h) return RLT_OK;
    if (hot < mapped) {
        int rc = span_map_new(bk, &a, &prop, at + hot, mapped - hot, bytes, &h2);
        if (rc != RLT_OK || !h2) {
            a.unmap(at, (size_t)hot);
            a.release(h);
            return rc;
        }
        c->span_alias = span_alias(bk, &a, &prop, h, hot, gran);
    }
    __atomic_add_fetch(&sp->users, 1, __ATOMIC_ACQ_REL);
    c->span_handle = (unsigned long long)h;
    c->span_handle2 = (unsigned long long)h2;
    c->span_hot_bytes = hot;
    c->span_bytes = mapped;
    *base = (void *)(uintptr_t)at;
    return RLT_OK;
}

/* Unmaps this backend's slot (and its hot slot); the last slot out frees the address ranges. */
static void span_release(rlt_backend *bk, void *base) {
    cuda_impl *c = cuda_get(bk);
    span_api a;
    if (!span_api_get(&a)) return;
    cudaSetDevice(c->device);
    cudaDeviceSynchronize(); /* as cudaFree would: nothing still running may touch the arena afterwards */
    rlt_arena_span *sp = bk->span;
    const uint64_t hot = c->span_hot_bytes;
    if (c->span_alias) {
        a.unmap((CUdeviceptr)c->span_alias, (size_t)hot);
        if (sp) __atomic_sub_fetch(&sp->hot_users, 1, __ATOMIC_ACQ_REL);
    }
    a.unmap((CUdeviceptr)(uintptr_t)base, (size_t)hot);
    a.release((CUmemGenericAllocationHandle)c->span_handle);
    if (c->span_handle2) {
        a.unmap((CUdeviceptr)(uintptr_t)base + hot, (size_t)(c->span_bytes - hot));
        a.release((CUmemGenericAllocationHandle)c->span_handle2);
    }
    c->span_handle = c->span_handle2 = 0;
    c->span_bytes = c->span_hot_bytes = c->span_alias = 0;
    if (sp && __atomic_sub_fetch(&sp->users, 1, __ATOMIC_ACQ_REL) == 0) {
        a.free((CUdeviceptr)sp->va, (size_t)(sp->stride * (uint64_t)sp->n));
        if (sp->hot_va) a.free((CUdeviceptr)sp->hot_va, (size_t)(sp->hot_stride * (uint64_t)sp->n));
        sp->va = sp->stride = 0;
        sp->hot_va = sp->hot_stride = 0;
    }
}

static int cuda_mem_reserve(rlt_backend *bk, uint64_t bytes, void **base) {
    cuda_impl *c = cuda_get(bk);
    *base = NULL;
    if (bytes == 0) return RLT_OK;
    CUDA_CHECK(bk, cudaSetDevice(c->device));
    RLT_TRY(span_reserve(bk, bytes, base));
    cudaError_t rc = *base ? cudaSuccess : cudaMalloc(base, bytes);
    if (rc != cudaSuccess) {
        cudaGetLastError(); /* out-of-memory is not sticky: clear it so later calls do not see it */
        size_t free_b = 0, total_b = 0;
        cudaMemGetInfo(&free_b, &total_b);
        *base = NULL;
        return rlt_err_set(bk->err, RLT_ENOFIT, __FILE__, __LINE__,
                           "cudaMalloc of the device arena (%.1f MiB) failed on %s: %s; %.1f MiB free of %.1f MiB "
                           "now; lower memory.budget_mb or replay.capacity, or free the GPU",
                           bytes / MIB, bk->device_name, cudaGetErrorString(rc), free_b / MIB, total_b / MIB);
    }
    /* What the process holds beyond these reservations is context (measure_memory). */
    c->reserved_bytes += bytes;
    c->reserved_last = *base;
    c->reserved_last_bytes = bytes;
    /* Zeroed like the CPU backend's arena, so both start from the same bits. */
    CUDA_CHECK(bk, cudaMemsetAsync(*base, 0, bytes, c->streams[0]));
    CUDA_CHECK(bk, cudaStreamSynchronize(c->streams[0]));
    return RLT_OK;
}

static void cuda_mem_release(rlt_backend *bk, void *base) {
    if (!base) return;
    cuda_impl *c = cuda_get(bk);
    /* The arena is the one reservation released before close (plan_commit's rollback): it is the last one. */
    if (base == c->reserved_last) {
        c->reserved_bytes -= c->reserved_last_bytes;
        c->reserved_last = NULL;
        c->reserved_last_bytes = 0;
    }
    if (c->span_bytes) {
        span_release(bk, base);
        return;
    }
    cudaSetDevice(c->device);
    cudaFree(base); /* synchronises the device: no op still running can touch the block afterwards */
}

static int cuda_host_reserve(rlt_backend *bk, uint64_t bytes, void **base) {
    *base = NULL;
    if (bytes == 0) return RLT_OK;
    CUDA_CHECK(bk, cudaSetDevice(cuda_get(bk)->device));
    /* Pinned: copies from it are truly asynchronous, and page-locked memory is resident by construction. */
    cudaError_t rc = cudaHostAlloc(base, bytes, cudaHostAllocDefault);
    if (rc != cudaSuccess) {
        cudaGetLastError();
        *base = NULL;
        return rlt_err_set(bk->err, RLT_ENOFIT, __FILE__, __LINE__,
                           "cudaHostAlloc of the pinned host arena (%.1f MiB) failed: %s; lower replay.capacity or "
                           "memory.budget_mb, or raise the locked-memory limit (ulimit -l)",
                           bytes / MIB, cudaGetErrorString(rc));
    }
    memset(*base, 0, bytes); /* zeroed like the CPU backend's host arena */
    return RLT_OK;
}

static void cuda_host_release(rlt_backend *bk, void *base) {
    (void)bk;
    if (base) cudaFreeHost(base);
}

static int cuda_reserve(rlt_backend *bk, rlt_location loc, uint64_t bytes, void **base) {
    if (loc == RLT_LOC_DEVICE) return cuda_mem_reserve(bk, bytes, base);
    if (loc == RLT_LOC_HOST) return cuda_host_reserve(bk, bytes, base);
    *base = NULL;
    return rlt_err_set(bk->err, RLT_EINVAL, __FILE__, __LINE__, "reserve: unknown location %d", (int)loc);
}

static void cuda_release(rlt_backend *bk, rlt_location loc, void *base) {
    if (loc == RLT_LOC_DEVICE) cuda_mem_release(bk, base);
    else if (loc == RLT_LOC_HOST) cuda_host_release(bk, base);
}

static int cuda_copy(rlt_backend *bk, void *dst, const void *src, uint64_t bytes, rlt_copy_kind kind) {
    static const enum cudaMemcpyKind kinds[] = {cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost,
                                                cudaMemcpyDeviceToDevice};
    if (kind < RLT_COPY_H2D || kind > RLT_COPY_D2D)
        return rlt_err_set(bk->err, RLT_EINVAL, __FILE__, __LINE__, "copy: unknown copy kind %d", (int)kind);
    if (bytes == 0) return RLT_OK;
    cuda_impl *c = cuda_get(bk);
    if (c->seeds.n > 1) {
        /* Batched: a copy between the lead's host and device arenas, for every agent (rlt_seeds_desc.host_delta). */
        uint64_t h = (uint64_t)(uintptr_t)(kind == RLT_COPY_H2D ? src : dst), dv = (uint64_t)(uintptr_t)(kind == RLT_COPY_H2D ? dst : src);
        if (kind == RLT_COPY_D2D || !c->seeds_host_delta || h < c->seeds_host_lo || h + bytes > c->seeds_host_hi ||
            dv < c->seeds_lo || dv + bytes > c->seeds_hi)
            return cuda_seeds_refuse(bk, "copy");
        return cuda_seed_copy(bk, dst, src, bytes, kind == RLT_COPY_H2D);
    }
    CUDA_CHECK(bk, cudaMemcpyAsync(dst, src, bytes, kinds[kind], cuda_stream(bk)));
    return RLT_OK;
}

/* The lanes (see kernels/backend.h). A side lane's stream waits for an event recorded on lane 0; lane 0 waits
 * for each side lane with work pending. During a capture the same calls become the graph's fork and join
 * edges, so the lanes turn into parallel branches of one graph; outside a capture they order real streams.
 * An event can be recorded again as soon as the wait that used it was issued: a wait takes the event's state
 * at the time of the call. With RLT_CUDA_LANES=1 branch only checks its argument, and everything runs on
 * lane 0 in call order. */
static int cuda_branch(rlt_backend *bk, int32_t lane) {
    cuda_impl *c = cuda_get(bk);
    if (lane < 0 || lane >= RLT_BACKEND_MAX_LANES)
        return rlt_err_set(bk->err, RLT_EINVAL, __FILE__, __LINE__, "lane: lane %d is outside 0..%d", (int)lane,
                           RLT_BACKEND_MAX_LANES - 1);
    if (lane >= c->n_lanes || lane == 0) {
        c->lane = 0;
        return RLT_OK;
    }
    CUDA_CHECK(bk, cudaEventRecord(c->fork_event, c->streams[0]));
    CUDA_CHECK(bk, cudaStreamWaitEvent(c->streams[lane], c->fork_event, 0));
    c->lane = lane;
    c->pending |= 1 << lane;
    return RLT_OK;
}

static int cuda_join(rlt_backend *bk) {
    cuda_impl *c = cuda_get(bk);
    c->lane = 0;
    for (int32_t k = 1; k < c->n_lanes; k++) {
        if (!(c->pending & (1 << k))) continue;
        CUDA_CHECK(bk, cudaEventRecord(c->join_event[k], c->streams[k]));
        CUDA_CHECK(bk, cudaStreamWaitEvent(c->streams[0], c->join_event[k], 0));
        c->pending &= ~(1 << k);
    }
    /* The comm lane's averages (allreduce_mean with async) are joined like a side lane. */
    if (c->comm_pending) {
        CUDA_CHECK(bk, cudaEventRecord(c->comm_join, c->comm_stream));
        CUDA_CHECK(bk, cudaStreamWaitEvent(c->streams[0], c->comm_join, 0));
        c->comm_pending = 0;
    }
    return RLT_OK;
}

/* The table's lane op: a join for RLT_LANE_JOIN, a branch otherwise. */
static int cuda_lane(rlt_backend *bk, int32_t lane) {
    RLT_TRY(cuda_aside_refuse(bk, "lane"));
    return lane == RLT_LANE_JOIN ? cuda_join(bk) : cuda_branch(bk, lane);
}

/* A fork and a join inside one op (cuda_ops.h). */
int cuda_fork_side(rlt_backend *bk, int32_t side[2]) {
    cuda_impl *c = cuda_get(bk);
    side[0] = side[1] = c->lane;
    /* On the aside stream an op's parts run in order there (the side lanes are lane 0's). */
    if (c->n_lanes < 3 || c->aside) return RLT_OK;
    for (int32_t i = 0, k = 1; i < 2; k++)
        if (k != c->lane) side[i++] = k;
    CUDA_CHECK(bk, cudaEventRecord(c->fork_event, c->streams[c->lane]));
    CUDA_CHECK(bk, cudaStreamWaitEvent(c->streams[side[0]], c->fork_event, 0));
    CUDA_CHECK(bk, cudaStreamWaitEvent(c->streams[side[1]], c->fork_event, 0));
    return RLT_OK;
}

/* A batched seed group's side lane for the current one (the weight gradients of its backward, linear.cu): lane k's
 * is n_lanes - 1 - k, so the two lanes a TD3 update's twin critics run their backward on (0 and 1) get two lanes of
 * their own (3 and 2) and no false dependency on each other's chain. It waits for everything issued on the current
 * lane so far. The current lane itself when the backend runs fewer than two lanes; -1 on an error (in bk->err). */
int32_t cuda_fork_seeds(rlt_backend *bk) {
    cuda_impl *c = cuda_get(bk);
    const int32_t side = c->n_lanes - 1 - c->lane;
    if (c->n_lanes < 2 || side < 0 || side == c->lane || c->aside) return c->lane;
    cudaError_t rc = cudaEventRecord(c->fork_event, c->streams[c->lane]);
    if (rc == cudaSuccess) rc = cudaStreamWaitEvent(c->streams[side], c->fork_event, 0);
    if (rc != cudaSuccess) {
        rlt_err_set(bk->err, RLT_ERUNTIME, __FILE__, __LINE__, "fork to side lane %d: %s", (int)side,
                    cudaGetErrorString(rc));
        return -1;
    }
    return side;
}

int cuda_merge_side(rlt_backend *bk, int32_t lane, const int32_t side[2]) {
    cuda_impl *c = cuda_get(bk);
    c->lane = lane;
    for (int i = 0; i < 2; i++) {
        if (side[i] == lane) continue;
        CUDA_CHECK(bk, cudaEventRecord(c->join_event[side[i]], c->streams[side[i]]));
        CUDA_CHECK(bk, cudaStreamWaitEvent(c->streams[lane], c->join_event[side[i]], 0));
    }
    return RLT_OK;
}

static int cuda_sync(rlt_backend *bk) {
    RLT_TRY(cuda_join(bk));
    /* A data-parallel rank's work includes NCCL's collectives: its wait is watched (nccl.c). */
    if (cuda_get(bk)->nranks > 1) return cuda_comm_wait(bk, cuda_get(bk)->streams[0], "its work on the GPU");
    cudaError_t rc = cudaStreamSynchronize(cuda_get(bk)->streams[0]);
    if (rc != cudaSuccess)
        return rlt_err_set(bk->err, RLT_ERUNTIME, __FILE__, __LINE__,
                           "an operation on %s failed: %s (%s); errors of earlier kernels surface at this sync, "
                           "run with CUDA_LAUNCH_BLOCKING=1 to find the failing one",
                           bk->device_name, cudaGetErrorString(rc), cudaGetErrorName(rc));
    return RLT_OK;
}

static int cuda_check_slot(rlt_backend *bk, int32_t slot, const char *what) {
    if (slot < 0 || slot >= RLT_BACKEND_MAX_GRAPHS)
        return rlt_err_set(bk->err, RLT_EINVAL, __FILE__, __LINE__, "%s: graph slot %d is outside 0..%d", what,
                           (int)slot, RLT_BACKEND_MAX_GRAPHS - 1);
    return RLT_OK;
}

static int cuda_graph_begin(rlt_backend *bk, int32_t slot) {
    cuda_impl *c = cuda_get(bk);
    RLT_TRY(cuda_check_slot(bk, slot, "graph BEGIN"));
    if (c->capturing >= 0)
        return rlt_err_set(bk->err, RLT_ESTATE, __FILE__, __LINE__,
                           "graph BEGIN of slot %d while slot %d is still being captured", (int)slot, (int)c->capturing);
    /* Everything issued so far on any lane is ordered before the capture: the graph starts from lane 0. */
    RLT_TRY(cuda_join(bk));
    /* Thread-local mode: only this thread's potentially unsafe calls (cudaMalloc, a sync) invalidate the
     * capture, so another thread using CUDA at the same time cannot break it. */
    CUDA_CHECK(bk, cudaStreamBeginCapture(c->streams[0], cudaStreamCaptureModeThreadLocal));
    c->capturing = slot;
    return RLT_OK;
}

static int cuda_graph_end(rlt_backend *bk, int32_t slot) {
    cuda_impl *c = cuda_get(bk);
    RLT_TRY(cuda_check_slot(bk, slot, "graph END"));
    if (c->capturing != slot)
        return rlt_err_set(bk->err, RLT_ESTATE, __FILE__, __LINE__, "graph END of slot %d but the capture in progress is %d",
                           (int)slot, (int)c->capturing);
    cudaGraph_t graph = NULL;
    c->capturing = -1;
    /* Side lanes still open are joined first: a capture must end with every forked stream joined back. A
     * failing join still leaves the capture to be ended below. */
    int jrc = cuda_join(bk);
    /* Ending the capture is attempted even after a failed op, so the stream leaves capture mode. */
    CUDA_CHECK(bk, cudaStreamEndCapture(c->streams[0], &graph));
    if (jrc != RLT_OK) {
        cudaGraphDestroy(graph);
        return jrc;
    }
    if (c->graphs[slot]) {
        cudaGraphExecDestroy(c->graphs[slot]);
        c->graphs[slot] = NULL;
    }
    /* Kernel nodes keep the priority of the lane they were captured on. */
    cudaError_t rc = cudaGraphInstantiateWithFlags(&c->graphs[slot], graph, cudaGraphInstantiateFlagUseNodePriority);
    cudaGraphDestroy(graph); /* the executable graph keeps its own copy */
    if (rc != cudaSuccess) {
        c->graphs[slot] = NULL;
        return rlt_err_set(bk->err, RLT_ERUNTIME, __FILE__, __LINE__, "cudaGraphInstantiate for slot %d failed: %s",
                           (int)slot, cudaGetErrorString(rc));
    }
    /* The pointer arrays of batched library products this capture added, before anything can launch it. */
    RLT_TRY(cuda_seed_ptrs_upload(bk));
    /* Uploading now moves the graph's setup cost out of the first training step. */
    CUDA_CHECK(bk, cudaGraphUpload(c->graphs[slot], c->streams[0]));
    return RLT_OK;
}

static int cuda_graph_launch(rlt_backend *bk, int32_t slot) {
    cuda_impl *c = cuda_get(bk);
    RLT_TRY(cuda_check_slot(bk, slot, "graph LAUNCH"));
    if (!c->graphs[slot])
        return rlt_err_set(bk->err, RLT_ESTATE, __FILE__, __LINE__, "graph LAUNCH of slot %d: nothing was captured there",
                           (int)slot);
    CUDA_CHECK(bk, cudaGraphLaunch(c->graphs[slot], c->aside ? c->aside_stream : c->streams[0]));
    return RLT_OK;
}

static int cuda_aside(rlt_backend *bk, rlt_graph_mode mode, int32_t slot);

/* The graph op: one entry point for its modes (see kernels/backend.h). */
static int cuda_graph(rlt_backend *bk, rlt_graph_mode mode, int32_t slot) {
    switch (mode) {
    case RLT_GRAPH_ASIDE_MARK:
    case RLT_GRAPH_ASIDE_BEGIN:
    case RLT_GRAPH_ASIDE_END:
    case RLT_GRAPH_ASIDE_LAUNCH: return cuda_aside(bk, mode, slot);
    case RLT_GRAPH_SUPPORTED: return 1;
    case RLT_GRAPH_BEGIN: return cuda_graph_begin(bk, slot);
    case RLT_GRAPH_END: return cuda_graph_end(bk, slot);
    case RLT_GRAPH_LAUNCH: return cuda_graph_launch(bk, slot);
    }
    return rlt_err_set(bk->err, RLT_EINVAL, __FILE__, __LINE__, "graph: unknown mode %d", (int)mode);
}

/* ---- acting beside an update (the graph op's ASIDE modes, kernels/backend.h) ---- */

int cuda_aside_refuse(rlt_backend *bk, const char *op) {
    if (!cuda_get(bk)->aside) return RLT_OK;
    return rlt_err_set(bk->err, RLT_ESTATE, __FILE__, __LINE__,
                       "%s cannot run on the aside stream: it uses what lane 0's work shares", op);
}

/* Waits for the aside stream's work, naming what failed there. */
static int cuda_aside_wait(rlt_backend *bk) {
    cudaError_t rc = cudaStreamSynchronize(cuda_get(bk)->aside_stream);
    if (rc != cudaSuccess)
        return rlt_err_set(bk->err, RLT_ERUNTIME, __FILE__, __LINE__, "acting beside an update on %s failed: %s (%s)",
                           bk->device_name, cudaGetErrorString(rc), cudaGetErrorName(rc));
    return RLT_OK;
}

static int cuda_aside(rlt_backend *bk, rlt_graph_mode mode, int32_t slot) {
    cuda_impl *c = cuda_get(bk);
    if (mode == RLT_GRAPH_ASIDE_END) {
        int was = c->aside;
        c->aside = 0; /* ops issue on lane 0 again whatever the wait finds */
        return was ? cuda_aside_wait(bk) : RLT_OK;
    }
    if (!c->aside_stream || c->capturing >= 0 || c->nranks > 1 || c->aside)
        return rlt_err_set(bk->err, RLT_ESTATE, __FILE__, __LINE__,
                           "aside %d: %s", (int)mode, !c->aside_stream ? "this backend has no aside stream (one lane)" :
                           c->capturing >= 0 ? "during a capture" : c->nranks > 1 ? "in a data-parallel rank" :
                           "already on the aside stream");
    switch (mode) {
    case RLT_GRAPH_ASIDE_MARK:
        CUDA_CHECK(bk, cudaEventRecord(c->aside_event, c->streams[0]));
        c->aside_marked = 1;
        return RLT_OK;
    case RLT_GRAPH_ASIDE_BEGIN:
    case RLT_GRAPH_ASIDE_LAUNCH:
        if (!c->aside_marked)
            return rlt_err_set(bk->err, RLT_ESTATE, __FILE__, __LINE__, "aside %d before any mark", (int)mode);
        if (mode == RLT_GRAPH_ASIDE_LAUNCH) {
            RLT_TRY(cuda_check_slot(bk, slot, "aside LAUNCH"));
            if (!c->graphs[slot])
                return rlt_err_set(bk->err, RLT_ESTATE, __FILE__, __LINE__, "aside LAUNCH of slot %d: nothing was "
                                   "captured there", (int)slot);
        }
        CUDA_CHECK(bk, cudaStreamWaitEvent(c->aside_stream, c->aside_event, 0));
        if (mode == RLT_GRAPH_ASIDE_BEGIN) {
            c->aside = 1;
            return RLT_OK;
        }
        CUDA_CHECK(bk, cudaGraphLaunch(c->graphs[slot], c->aside_stream));
        return cuda_aside_wait(bk);
    default:
        return rlt_err_set(bk->err, RLT_EINVAL, __FILE__, __LINE__, "aside: unknown mode %d", (int)mode);
    }
}

/* ---- seed batching ---- */

int cuda_seeds_check(rlt_backend *bk, const char *op, int32_t n, ...) {
    cuda_impl *c = cuda_get(bk);
    if (c->seeds.n <= 1) return RLT_OK;
    va_list ap;
    va_start(ap, n);
    int rc = RLT_OK;
    uint64_t s_lo = (uint64_t)(uintptr_t)c->scratch, s_hi = s_lo + CUDA_SCRATCH_FLOATS * sizeof(float);
    for (int32_t i = 0; i < n && rc == RLT_OK; i++) {
        uint64_t p = (uint64_t)(uintptr_t)va_arg(ap, const void *);
        if (p && !(p >= c->seeds_lo && p < c->seeds_hi) && !(p >= s_lo && p < s_hi))
            rc = rlt_err_set(bk->err, RLT_ESTATE, __FILE__, __LINE__,
                             "%s cannot run for several seeds at once: its pointer %d is outside the agent's arena",
                             op, (int)i);
    }
    va_end(ap);
    return rc;
}

int cuda_seeds_refuse(rlt_backend *bk, const char *op) {
    if (cuda_get(bk)->seeds.n <= 1) return RLT_OK;
    return rlt_err_set(bk->err, RLT_ESTATE, __FILE__, __LINE__, "%s cannot run for several seeds at once", op);
}

static int cuda_seed_batch(rlt_backend *bk, const rlt_seeds_desc *d) {
    cuda_impl *c = cuda_get(bk);
    if (!d || d->n <= 1) {
        int was_exact = c->seeds_exact, gemm = c->seed_slots != c->seed_slots_at_begin;
        if (was_exact) c->seeds_blas = c->seeds_blas_saved;
        c->seeds = (cuda_seeds){NULL, NULL, 0};
        c->seeds_stride = 0;
        c->seeds_hot_delta = c->seeds_hot_stride = 0;
        c->seeds_hot_hi = 0;
        c->seeds_host_delta = NULL;
        c->seeds_exact = 0;
        if (was_exact && gemm)
            return rlt_err_set(bk->err, RLT_ESTATE, __FILE__, __LINE__,
                               "a dense layer of the batch runs on the library's batched GEMM, whose sums differ from "
                               "a single agent's");
        return RLT_OK;
    }
    int32_t n = d->n;
    if (n > c->max_seeds || n > CUDA_SEEDS_MAX || !d->delta || !d->seed || !d->delta_host || !c->reserved_last)
        return rlt_err_set(bk->err, RLT_EINVAL, __FILE__, __LINE__,
                           "seed_batch(%d): this backend was opened for at most %d seeds%s", (int)n,
                           (int)c->max_seeds, c->reserved_last ? "" : " and has no device arena");
    if (d->host_delta) {
        /* The kernels reach the host arena through unified addressing: pinned memory whose device address is its
         * host address (cudaHostAlloc's on every 64-bit platform CUDA supports); anything else is refused. */
        struct cudaPointerAttributes at;
        cudaError_t rc = cudaPointerGetAttributes(&at, d->host_base);
        if (rc != cudaSuccess || at.type != cudaMemoryTypeHost || at.devicePointer != d->host_base) {
            cudaGetLastError();
            return rlt_err_set(bk->err, RLT_ESTATE, __FILE__, __LINE__,
                               "seed_batch: the host arena is not pinned memory the GPU reaches at its host address, "
                               "so copies cannot run for several seeds at once");
        }
    }
    c->seeds = (cuda_seeds){d->delta, d->seed, n};
    memcpy(c->seeds_delta_host, d->delta_host, (size_t)n * sizeof *d->delta_host);
    /* One stride between consecutive agents (a span's arenas): strided library products can address them. */
    const int64_t *dh = d->delta_host;
    c->seeds_stride = dh[0] == 0 && dh[1] > 0 && dh[1] % 256 == 0 ? dh[1] : 0;
    for (int32_t z = 2; z < n && c->seeds_stride; z++)
        if (dh[z] != (int64_t)z * c->seeds_stride) c->seeds_stride = 0;
    c->seeds_lo = (uint64_t)(uintptr_t)c->reserved_last;
    c->seeds_hi = c->seeds_lo + c->reserved_last_bytes;
    /* Every agent's hot part mapped at the span's hot slots (span_alias), the batch being the span's agents at its
     * stride: operands there can be read at the shorter stride. */
    const rlt_arena_span *sp = bk->span;
    c->seeds_hot_delta = c->seeds_hot_stride = 0;
    c->seeds_hot_hi = 0;
    if (c->seeds_stride && sp && c->span_alias && (uint64_t)c->seeds_stride == sp->stride && n <= sp->n &&
        __atomic_load_n(&sp->hot_users, __ATOMIC_ACQUIRE) == __atomic_load_n(&sp->users, __ATOMIC_ACQUIRE)) {
        c->seeds_hot_delta = (int64_t)(c->span_alias - c->seeds_lo);
        c->seeds_hot_stride = (int64_t)sp->hot_stride;
        c->seeds_hot_hi = c->seeds_lo + bk->arena_hot;
    }
    c->seeds_host_delta = d->host_delta;
    c->seeds_host_lo = (uint64_t)(uintptr_t)d->host_base;
    c->seeds_host_hi = c->seeds_host_lo + d->host_bytes;
    c->seeds_exact = d->exact != 0;
    c->seed_slots_at_begin = c->seed_slots;
    if (c->seeds_exact) {
        /* linear.cu then keeps every product a single agent runs on our kernels there; one beyond them (fi above
         * CUDA_LIN_MAX_K, a big or wide product) still goes to the batched library GEMM, which the end refuses. */
        c->seeds_blas_saved = c->seeds_blas;
        c->seeds_blas = 0;
    }
    return RLT_OK;
}

static int cuda_seed_mark(rlt_backend *bk) {
    cuda_impl *c = cuda_get(bk);
    CUDA_CHECK(bk, cudaEventRecord(c->seed_event, c->streams[0]));
    return RLT_OK;
}

static int cuda_graph_launch_seeds(rlt_backend *bk, int32_t slot, rlt_backend *const *members, int32_t n) {
    cuda_impl *c = cuda_get(bk);
    RLT_TRY(cuda_check_slot(bk, slot, "graph_launch_seeds"));
    if (!c->graphs[slot])
        return rlt_err_set(bk->err, RLT_ESTATE, __FILE__, __LINE__, "graph_launch_seeds(%d): nothing was captured there",
                           (int)slot);
    for (int32_t i = 0; i < n; i++) {
        cuda_impl *m = cuda_get(members[i]);
        if (m != c) CUDA_CHECK(bk, cudaStreamWaitEvent(c->streams[0], m->seed_event, 0));
    }
    CUDA_CHECK(bk, cudaGraphLaunch(c->graphs[slot], c->streams[0]));
    CUDA_CHECK(bk, cudaEventRecord(c->seed_event, c->streams[0]));
    return RLT_OK;
}

static int cuda_seed_follow(rlt_backend *bk, rlt_backend *lead) {
    cuda_impl *c = cuda_get(bk), *l = cuda_get(lead);
    if (c != l) CUDA_CHECK(bk, cudaStreamWaitEvent(c->streams[0], l->seed_event, 0));
    return RLT_OK;
}

static const rlt_backend_ops cuda_ops = {
    .name = "cuda",
    .abi_version = RLT_BACKEND_ABI,
    .open = cuda_open,
    .close = cuda_close,
    .workspace = cuda_workspace,
    .reserve = cuda_reserve,
    .release = cuda_release,
    .copy = cuda_copy,
    .sync = cuda_sync,
    .graph = cuda_graph,
    .seed_batch = cuda_seed_batch,
    .seed_mark = cuda_seed_mark,
    .graph_launch_seeds = cuda_graph_launch_seeds,
    .seed_follow = cuda_seed_follow,
    .copy_lists = cuda_copy_lists,
    .flat = cuda_flat,
    .counter_add = cuda_counter_add,
    .adam = cuda_adam,
    .linear_forward = cuda_linear_forward,
    .linear_chain_forward = cuda_linear_chain_forward,
    .linear_backward = cuda_linear_backward,
    .act_grad = cuda_act_grad,
    .conv_prepare = cuda_conv_prepare,
    .conv_forward = cuda_conv_forward,
    .conv_backward = cuda_conv_backward,
    .gather_fields = cuda_gather_fields,
    .gather_u8_f32 = cuda_gather_u8_f32,
    .sum = cuda_sum,
    .td3_target_action = cuda_td3_target_action,
    .td3_critic_loss = cuda_td3_critic_loss,
    .dqn_loss = cuda_dqn_loss,
    .lane = cuda_lane,
    .cast = cuda_cast,
    .amp = cuda_amp,
    .plan_workspace = cuda_plan_workspace,
    .measure_memory = cuda_measure_memory,
    .comm_init = cuda_comm_init,
    .comm_destroy = cuda_comm_destroy,
    .comm_abort = cuda_comm_abort,
    .comm_attach = cuda_comm_attach,
    .allreduce_mean = cuda_allreduce_mean,
};

/* The module's one exported symbol (everything else is hidden; see cuda_module.cmake), resolved by the
 * registry with dlsym(RLT_CUDA_ENTRY_SYMBOL). */
__attribute__((visibility("default"))) const rlt_backend_ops *rlt_cuda_backend_ops(void) { return &cuda_ops; }
