/* cpu_backend.c: the CPU backend's table and lifecycle. "Device" memory is host memory here, so the plan
 * puts every entry in one host arena; copies are memmove and there is nothing to synchronise. */
#include <cblas.h>
#include <stdio.h>
#include <string.h>

#include "mem.h"
#include "cpu_ops.h"

static int cpu_open(rlt_backend *bk, int32_t device_index, int32_t cpu_threads) {
    /* OpenBLAS's own threading costs more than it gains at RL sizes (networks of 64-256 units): it runs
     * one thread. `cpu.threads` >= 2 starts our own worker instead (below), which splits each large dense
     * layer op in two; without the fast kernels it raises OpenBLAS's threads, as before. */
    /* OpenBLAS takes its GEMM buffers on the first level-3 call: make that call now, before the arena
     * is sealed, so training never triggers an allocation. */
    float a[4] = {1, 2, 3, 4}, b[4] = {1, 0, 0, 1}, c[4] = {0};
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 2, 2, 2, 1.0f, a, 2, b, 2, 0.0f, c, 2);
    /* The private state (convolution slots) is taken through the engine's allocation hook, before the
     * seal, so allocation-failure tests reach it too. */
    cpu_impl *impl = rlt_mem_alloc(sizeof(cpu_impl), 64);
    if (!impl) return rlt_err_set(bk->err, RLT_ENOMEM, __FILE__, __LINE__, "out of host memory for the CPU backend");
    /* The dense layers run on the fastest kernels this CPU has (tests/test_dense.c checks each against the
     * reference ops through cpu_dense_select). */
    impl->dense = cpu_dense_select(NULL);
    openblas_set_num_threads(impl->dense || cpu_threads < 1 ? 1 : cpu_threads);
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

static int cpu_host_reserve(rlt_backend *bk, uint64_t bytes, void **base) {
    /* rlt_mem_alloc zero-fills, which touches every page: the arena is resident, not a promise. */
    *base = rlt_mem_alloc(bytes, 4096);
    if (!*base)
        return rlt_err_set(bk->err, RLT_ENOFIT, __FILE__, __LINE__,
                           "could not reserve the host arena of %llu bytes", (unsigned long long)bytes);
    return RLT_OK;
}

static void cpu_host_release(rlt_backend *bk, void *base) { rlt_mem_free(base); }

static int cpu_copy(rlt_backend *bk, void *dst, const void *src, uint64_t bytes, rlt_copy_kind kind) {
    if (bytes) memmove(dst, src, bytes);
    return RLT_OK;
}

static int cpu_sync(rlt_backend *bk) { return RLT_OK; }
static int cpu_graph_supported(rlt_backend *bk) { return 0; }

static int cpu_graph_unsupported(rlt_backend *bk, int32_t slot) {
    return rlt_err_set(bk->err, RLT_ESTATE, __FILE__, __LINE__, "the CPU backend does not capture graphs");
}

static const rlt_backend_ops cpu_ops = {
    .name = "cpu",
    .abi_version = RLT_BACKEND_ABI,
    .open = cpu_open,
    .close = cpu_close,
    .workspace_bytes = cpu_workspace_bytes,
    .set_workspace = cpu_set_workspace,
    .mem_reserve = cpu_host_reserve,
    .mem_release = cpu_host_release,
    .host_reserve = cpu_host_reserve,
    .host_release = cpu_host_release,
    .copy = cpu_copy,
    .sync = cpu_sync,
    .graph_supported = cpu_graph_supported,
    .graph_begin = cpu_graph_unsupported,
    .graph_end = cpu_graph_unsupported,
    .graph_launch = cpu_graph_unsupported,
    .fill = cpu_fill,
    .copy_f32 = cpu_copy_f32,
    .polyak = cpu_polyak,
    .counter_add = cpu_counter_add,
    .adam = cpu_adam,
    .linear_forward = cpu_linear_forward,
    .linear_backward = cpu_linear_backward,
    .act_grad = cpu_act_grad,
    .conv_prepare = cpu_conv_prepare,
    .conv_forward = cpu_conv_forward,
    .conv_backward = cpu_conv_backward,
    .sample_indices = cpu_sample_indices,
    .gather_fields = cpu_gather_fields,
    .gather_u8_f32 = cpu_gather_u8_f32,
    .sum = cpu_sum,
    .td3_target_action = cpu_td3_target_action,
    .td3_critic_loss = cpu_td3_critic_loss,
    .dqn_loss = cpu_dqn_loss,
    .branch = cpu_branch,
    .join = cpu_join,
    .cast = cpu_cast,
    .amp_unscale = cpu_amp_unscale,
    .amp_update = cpu_amp_update,
};

const rlt_backend_ops *rlt_cpu_backend_ops(void) { return &cpu_ops; }
