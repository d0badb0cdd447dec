/* cpu_backend.c: the CPU backend's table and lifecycle. "Device" memory is host memory here, so the plan
 * puts every entry in one host arena; copies are memmove and there is nothing to synchronise. */
#include <cblas.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host_limits.h"
#include "mem.h"
#include "cpu_ops.h"

/* OpenBLAS gives each of its threads a GEMM buffer of this much address space (BUFFER_SIZE, 128 MiB on
 * x86-64 and arm64, plus a page of header), taken with mmap or malloc when the thread starts or makes its
 * first level-3 call; when both fail it retries forever. So where an address-space or data limit would make
 * them fail, we refuse before OpenBLAS tries. */
#define CPU_BLAS_BUFFER_BYTES ((uint64_t)129 << 20)
/* Room kept for what the process maps besides (stacks, stdio, the loader): a limit this close is refused. */
#define CPU_BLAS_SLACK_BYTES ((uint64_t)8 << 20)

/* OpenBLAS threads (the caller's included) known to hold their buffer: OpenBLAS's state is per process. */
static _Atomic int g_blas_buffers;

static double cpu_mib(uint64_t b) { return (double)b / (1024.0 * 1024.0); }

/* RLT_OK when `threads` OpenBLAS threads can hold their buffers under the address-space limits. */
static int cpu_blas_room(rlt_backend *bk, int32_t threads) {
    int have = atomic_load(&g_blas_buffers);
    if (threads <= have) return RLT_OK;
    rlt_host_limit vm;
    rlt_host_limit_read_vm(&vm);
    uint64_t need = (uint64_t)(threads - have) * CPU_BLAS_BUFFER_BYTES + CPU_BLAS_SLACK_BYTES;
    if (vm.avail >= need) return RLT_OK;
    char what[96];
    if (threads - have == 1) snprintf(what, sizeof what, "a GEMM buffer of %.0f MiB", cpu_mib(CPU_BLAS_BUFFER_BYTES));
    else snprintf(what, sizeof what, "a GEMM buffer of %.0f MiB for each of %d threads", cpu_mib(CPU_BLAS_BUFFER_BYTES),
                  threads - have);
    return rlt_err_set(bk->err, RLT_ENOFIT, __FILE__, __LINE__,
                       "%s is %.0f MiB and the process maps %.0f MiB already, which leaves %.0f MiB; OpenBLAS needs "
                       "%.0f MiB of it (%s, and room to run) and would retry forever without it, so the CPU backend "
                       "does not start: raise the limit to at least %.0f MiB (the memory plan comes on top)",
                       vm.source, cpu_mib(vm.limit), cpu_mib(vm.used), cpu_mib(vm.avail), cpu_mib(need), what,
                       cpu_mib(vm.used + need));
}

static void cpu_blas_note(int32_t threads) {
    int have = atomic_load(&g_blas_buffers);
    while (have < threads && !atomic_compare_exchange_weak(&g_blas_buffers, &have, threads)) {}
}

static int cpu_open(rlt_backend *bk, int32_t device_index, int32_t cpu_threads) {
    /* OpenBLAS's own threading costs more than it gains at RL sizes (networks of 64-256 units): it runs
     * one thread. `cpu.threads` >= 2 starts our own worker instead (below), which runs an update's side lanes
     * and halves of large ops (lanes.c); without the fast kernels it raises OpenBLAS's threads, as before. */
    /* OpenBLAS takes its GEMM buffer on the first level-3 call that needs it: make that call now, before
     * the arena is sealed, so training never triggers an allocation (and a limit that leaves no room for it
     * is found here, not in the middle of a run). Small products and alpha 1, beta 0 ones go to kernels that
     * need no buffer (the small-matrix and "direct" paths), so this one is 128 x 128 x 128 with beta 1. */
    RLT_TRY(cpu_blas_room(bk, 1));
    enum { W = 128 };
    float *warm = rlt_mem_alloc(3 * W * W * sizeof(float), 64);
    if (!warm) return rlt_err_set(bk->err, RLT_ENOMEM, __FILE__, __LINE__, "out of host memory for the CPU backend");
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, W, W, W, 1.0f, warm, W, warm + W * W, W, 1.0f,
                warm + 2 * W * W, W);
    rlt_mem_free(warm);
    cpu_blas_note(1);
    /* The private state (convolution slots) is taken through the engine's allocation hook, before the
     * seal, so allocation-failure tests reach it too. */
    cpu_impl *impl = rlt_mem_alloc(sizeof(cpu_impl), 64);
    if (!impl) return rlt_err_set(bk->err, RLT_ENOMEM, __FILE__, __LINE__, "out of host memory for the CPU backend");
    /* The dense layers run on the fastest kernels this CPU has (tests/test_dense.c checks each against the
     * reference ops through cpu_dense_select). One developer switch, for benchmarks: RLT_CPU_DENSE=avx2 (or
     * avx512, or reference) picks that set where this CPU has it (each agrees with the reference to the GEMM bound,
     * not bit for bit with the others); a name it lacks leaves the default. */
    const char *want = getenv("RLT_CPU_DENSE");
    impl->dense = cpu_dense_select(want);
    if (!impl->dense && want && *want && strcmp(want, "reference")) impl->dense = cpu_dense_select(NULL);
    int32_t blas_threads = impl->dense || cpu_threads < 1 ? 1 : cpu_threads;
    int rc = cpu_blas_room(bk, blas_threads);
    if (rc != RLT_OK) {
        rlt_mem_free(impl);
        return rc;
    }
    openblas_set_num_threads(blas_threads);
    cpu_blas_note(blas_threads);
    if (impl->dense && cpu_threads >= 2 && cpu_worker_start(&impl->worker) != RLT_OK) {
        rlt_mem_free(impl);
        return rlt_err_set(bk->err, RLT_ENOMEM, __FILE__, __LINE__,
                           "could not start the CPU backend's worker thread (cpu.threads: %d); use cpu.threads: 1",
                           cpu_threads);
    }
    bk->impl = impl;
    bk->device_is_host = 1;
    bk->device_index = -1;
    snprintf(bk->device_name, sizeof bk->device_name, "cpu");
    bk->device_total = bk->device_free = bk->context_bytes = bk->handle_bytes = 0;
    bk->memory_note[0] = '\0';
    return RLT_OK;
}

static void cpu_close(rlt_backend *bk) {
    cpu_impl *im = bk->impl;
    if (im) cpu_worker_stop(im->worker);
    rlt_mem_free(bk->impl);
    bk->impl = NULL;
}
/* The workspace is the fast forward's panel of W^T, one per thread (none for the reference ops). */
static uint64_t cpu_workspace_bytes(rlt_backend *bk) {
    cpu_impl *im = bk->impl;
    return im && im->dense ? (im->worker ? 2u : 1u) * CPU_DENSE_PACK_FLOATS * sizeof(float) : 0;
}

static int cpu_set_workspace(rlt_backend *bk, void *ptr, uint64_t bytes) {
    cpu_impl *im = bk->impl;
    if (!im) return RLT_OK;
    uint64_t one = CPU_DENSE_PACK_FLOATS * sizeof(float);
    im->pack = bytes >= one ? ptr : NULL;
    im->pack2 = bytes >= 2 * one ? (float *)ptr + CPU_DENSE_PACK_FLOATS : NULL;
    return RLT_OK;
}

/* The table's workspace op: the query (need non-NULL), or the hand-over. */
static int cpu_workspace(rlt_backend *bk, void *ptr, uint64_t bytes, uint64_t *need) {
    if (need) {
        *need = cpu_workspace_bytes(bk);
        return RLT_OK;
    }
    return cpu_set_workspace(bk, ptr, bytes);
}

static int cpu_host_reserve(rlt_backend *bk, uint64_t bytes, void **base) {
    /* rlt_mem_alloc zero-fills, which touches every page: the arena is resident, not a promise. */
    *base = rlt_mem_alloc(bytes, 4096);
    if (!*base)
        return rlt_err_set(bk->err, RLT_ENOFIT, __FILE__, __LINE__,
                           "could not reserve the host arena of %llu bytes", (unsigned long long)bytes);
    return RLT_OK;
}

static void cpu_host_release(rlt_backend *bk, void *base) { rlt_mem_free(base); }

/* "Device" memory is host memory here: both locations are the same kind of block. */
static int cpu_reserve(rlt_backend *bk, rlt_location loc, uint64_t bytes, void **base) {
    *base = NULL;
    if (loc != RLT_LOC_HOST && loc != RLT_LOC_DEVICE)
        return rlt_err_set(bk->err, RLT_EINVAL, __FILE__, __LINE__, "reserve: unknown location %d", (int)loc);
    return cpu_host_reserve(bk, bytes, base);
}

static void cpu_release(rlt_backend *bk, rlt_location loc, void *base) {
    (void)loc;
    cpu_host_release(bk, base);
}

static int cpu_copy(rlt_backend *bk, void *dst, const void *src, uint64_t bytes, rlt_copy_kind kind) {
    cpu_lane_fence(bk);
    if (bytes) memmove(dst, src, bytes);
    return RLT_OK;
}

/* Everything issued has run once the worker's queue is empty (sync joins first). */
static int cpu_sync(rlt_backend *bk) { return cpu_join(bk); }
/* The CPU runs ops as they are called: there is nothing to capture. */
static int cpu_graph(rlt_backend *bk, rlt_graph_mode mode, int32_t slot) {
    (void)slot;
    if (mode == RLT_GRAPH_SUPPORTED) return 0;
    if (mode < RLT_GRAPH_SUPPORTED || mode > RLT_GRAPH_ASIDE_LAUNCH)
        return rlt_err_set(bk->err, RLT_EINVAL, __FILE__, __LINE__, "graph: unknown mode %d", (int)mode);
    return rlt_err_set(bk->err, RLT_ESTATE, __FILE__, __LINE__, "the CPU backend does not capture graphs");
}

/* A data-parallel rank on the CPU: the gradients average through the host comm, in the calling thread. */
static int cpu_comm_attach(rlt_backend *bk, rlt_comm *c, void *device_comm, int32_t rank, int32_t n_ranks) {
    cpu_impl *im = bk->impl;
    (void)device_comm;
    if (!im || !c || rank < 0 || rank >= n_ranks || n_ranks != rlt_comm_size(c))
        return rlt_err_set(bk->err, RLT_EINVAL, __FILE__, __LINE__, "comm_attach: rank %d of a comm of %d ranks",
                           (int)rank, (int)n_ranks);
    im->comm = c;
    im->rank = rank;
    return RLT_OK;
}

/* async or not, in call order in the calling thread, after the side lanes' work (the CPU has no comm lane). */
static int cpu_allreduce_mean(rlt_backend *bk, float *x, uint64_t n, int32_t async) {
    cpu_impl *im = bk->impl;
    (void)async;
    cpu_lane_fence(bk);
    if (!im || !im->comm || rlt_comm_size(im->comm) == 1) return RLT_OK;
    if (rlt_comm_allreduce_mean(im->comm, im->rank, x, n) != RLT_OK) {
        if (rlt_comm_errmsg(im->comm)[0]) /* a timeout or a lost process: the run fails (exit 1) */
            return rlt_err_set(bk->err, RLT_ERUNTIME, __FILE__, __LINE__, "%s", rlt_comm_errmsg(im->comm));
        return rlt_err_set(bk->err, RLT_EINTERRUPTED, __FILE__, __LINE__,
                           "the gradient average was abandoned: another rank of the data-parallel group stopped");
    }
    return RLT_OK;
}

static const rlt_backend_ops cpu_ops = {
    .name = "cpu",
    .abi_version = RLT_BACKEND_ABI,
    .open = cpu_open,
    .close = cpu_close,
    .workspace = cpu_workspace,
    .reserve = cpu_reserve,
    .release = cpu_release,
    .copy = cpu_copy,
    .sync = cpu_sync,
    .graph = cpu_graph,
    .flat = cpu_flat,
    .counter_add = cpu_counter_add,
    .adam = cpu_adam,
    .linear_forward = cpu_linear_forward,
    .linear_chain_forward = cpu_linear_chain_forward,
    .linear_backward = cpu_linear_backward,
    .act_grad = cpu_act_grad,
    .conv_prepare = cpu_conv_prepare,
    .conv_forward = cpu_conv_forward,
    .conv_backward = cpu_conv_backward,
    .gather_fields = cpu_gather_fields,
    .gather_u8_f32 = cpu_gather_u8_f32,
    .sum = cpu_sum,
    .td3_target_action = cpu_td3_target_action,
    .td3_critic_loss = cpu_td3_critic_loss,
    .dqn_loss = cpu_dqn_loss,
    .lane = cpu_lane,
    .cast = cpu_cast,
    .amp = cpu_amp,
    .comm_attach = cpu_comm_attach,
    .allreduce_mean = cpu_allreduce_mean,
};

const rlt_backend_ops *rlt_cpu_backend_ops(void) { return &cpu_ops; }
