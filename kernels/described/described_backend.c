/* described_backend.c: the backend of a described GPU (described.h): it plans as the CUDA backend plans on that
 * GPU and runs nothing. Its workspace follows the CUDA backend's own rules (cuda_plan_rules.h), so the arena is
 * the one that GPU would get byte for byte; the context and the library handles come from the table below. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda_plan_rules.h"
#include "described.h"
#include "err.h"

#define MIB(x) ((uint64_t)((x) * 1048576.0))

/* Context (the CUDA context with librltrain_cuda.so's kernels loaded, measured by measure_memory as the process's
 * memory less its arena) and the cuBLAS and cuBLASLt handles' memory, per architecture. Measured rows come from
 * tests/gpu_described_plan.c on a GPU of that architecture (it prints the figures to put here); the others are
 * estimates from the measured ones, scaled by the architecture's usual SM counts, and the plan's note says so.
 * docs/described_gpu.md has how each was had. */
static const described_arch k_archs[] = {
    {75, 0, "T4, RTX 20xx", MIB(300), MIB(40), MIB(2)},
    {80, 0, "A100, A30", MIB(450), MIB(64), MIB(2)},
    {86, 0, "A10, A40, RTX 30xx", MIB(330), MIB(48), MIB(2)},
    {89, 0, "L4, L40, RTX 40xx", MIB(360), MIB(48), MIB(2)},
    {90, 1, "H100, H200", MIB(526.70), MIB(64), MIB(2)},
};

const described_arch *described_arch_find(int32_t arch) {
    for (size_t i = 0; i < sizeof k_archs / sizeof k_archs[0]; i++)
        if (k_archs[i].arch == arch) return &k_archs[i];
    return NULL;
}

const char *described_arch_names(void) { return "sm_75, sm_80, sm_86, sm_89, sm_90"; }

typedef struct described_impl {
    rlt_gpu_desc d;
    const described_arch *row;
    int32_t lanes;
    int32_t blas, lt; /* the handles the current plan has (created at plan time, as the CUDA backend does) */
} described_impl;

static described_impl *impl_of(rlt_backend *bk) { return bk->impl; }

static void described_close(rlt_backend *bk) {
    free(bk->impl);
    bk->impl = NULL;
}

static uint64_t described_workspace_bytes(rlt_backend *bk) {
    described_impl *c = impl_of(bk);
    return cuda_rule_workspace_bytes(c->d.arch / 10, c->lanes);
}

/* What the described GPU shows: the context and handles of the table, the others' memory, the rest free. */
static int described_measure_memory(rlt_backend *bk) {
    described_impl *c = impl_of(bk);
    bk->handle_bytes = (c->blas ? c->row->cublas_bytes : 0) + (c->lt ? c->row->cublaslt_bytes : 0);
    bk->context_bytes = c->row->context_bytes + bk->handle_bytes;
    uint64_t taken = c->d.others_bytes + bk->context_bytes;
    bk->device_free = c->d.memory_bytes > taken ? c->d.memory_bytes - taken : 0;
    snprintf(bk->memory_note, sizeof bk->memory_note, "described GPU, not measured: context and handles from the "
             "sm_%d row of docs/described_gpu.md (%s); library handles: %s", (int)c->d.arch,
             c->row->measured ? "measured on an H100" : "estimates", c->blas ? "cuBLAS, cuBLASLt" : "none");
    return RLT_OK;
}

/* The CUDA backend's plan_workspace (cuda_backend.c) without the device: the same rule for which plans call the
 * library, the same workspace for them. */
static int described_plan_workspace(rlt_backend *bk, const rlt_op_use *use, uint64_t *bytes) {
    described_impl *c = impl_of(bk);
    c->blas = c->lt = cuda_rule_dense_library(use, bk->seeds);
    *bytes = c->blas ? described_workspace_bytes(bk) : 0;
    return described_measure_memory(bk);
}

static int described_conv_prepare(rlt_backend *bk, int32_t slot, const rlt_conv_shape *shape, uint64_t *ws_bytes) {
    (void)slot, (void)shape, (void)ws_bytes;
    RLT_FAIL(bk->err, RLT_EDEVICE, "a described GPU (rltrain plan --arch) plans dense networks only: a convolution's "
             "workspace comes from the device (cuDNN's algorithm search, the CUDA module's trial run); plan this "
             "config on the GPU itself");
}

/* The workspace op: the size asked for (need), or the hand-over of one, which a plan never makes here. */
static int described_workspace(rlt_backend *bk, void *ptr, uint64_t bytes, uint64_t *need) {
    (void)ptr, (void)bytes;
    if (need) *need = described_workspace_bytes(bk);
    return RLT_OK;
}

static int described_reserve(rlt_backend *bk, rlt_location loc, uint64_t bytes, void **base) {
    (void)loc, (void)bytes;
    *base = NULL;
    RLT_FAIL(bk->err, RLT_EDEVICE, "a described GPU (rltrain plan --arch, --gpu-memory) only plans: it has no memory "
             "to reserve and cannot train");
}

/* What freeing an agent calls: nothing was reserved and nothing runs. */
static void described_release(rlt_backend *bk, rlt_location loc, void *base) { (void)bk, (void)loc, (void)base; }
static int described_sync(rlt_backend *bk) {
    (void)bk;
    return RLT_OK;
}

static const rlt_backend_ops k_described_ops = {
    .name = "described-cuda",
    .abi_version = RLT_BACKEND_ABI,
    .close = described_close,
    .workspace = described_workspace,
    .reserve = described_reserve,
    .release = described_release,
    .sync = described_sync,
    .conv_prepare = described_conv_prepare,
    .plan_workspace = described_plan_workspace,
    .measure_memory = described_measure_memory,
};

int described_open(rlt_backend *bk, const rlt_gpu_desc *d) {
    const described_arch *row = described_arch_find(d->arch);
    if (!row)
        RLT_FAIL(bk->err, RLT_EINVAL, "no row for sm_%d in the described-GPU table; it has %s (docs/described_gpu.md)",
                 (int)d->arch, described_arch_names());
    if (d->memory_bytes == 0) RLT_FAIL(bk->err, RLT_EINVAL, "a described GPU needs its memory (--gpu-memory)");
    described_impl *c = calloc(1, sizeof *c);
    if (!c) RLT_FAIL(bk->err, RLT_ENOMEM, "out of host memory for the described GPU");
    c->d = *d;
    c->row = row;
    c->lanes = cuda_rule_lanes(getenv("RLT_CUDA_LANES"), bk->lanes);
    bk->ops = &k_described_ops;
    bk->impl = c;
    bk->device_is_host = 0;
    bk->device_index = 0;
    bk->device_total = d->memory_bytes;
    snprintf(bk->device_name, sizeof bk->device_name, "cuda (described: sm_%d, %.2f GiB)", (int)d->arch,
             (double)d->memory_bytes / (1u << 30));
    return described_measure_memory(bk);
}
