/* described.h: a GPU described rather than present, for `rltrain plan --device cuda --arch sm_75 --gpu-memory 6GiB`
 * on a machine without it (CI). The described backend plans exactly as the CUDA backend does on that GPU (the
 * arena: its workspace from the plan's shapes and the architecture by the same rules, kernels/cuda/
 * cuda_plan_rules.h), takes the CUDA context and the library handles from a table per architecture (measured
 * where a GPU of it was at hand, the others estimates, and said so in the plan's note), and cannot run: it
 * reserves nothing and refuses every op. docs/described_gpu.md has the table and how it was measured. */
#ifndef RLT_DESCRIBED_H
#define RLT_DESCRIBED_H

#include <stdint.h>

#include "backend.h"

/* What the caller says about the GPU (rlt_config_describe_gpu). arch 0: none described. */
typedef struct rlt_gpu_desc {
    uint64_t memory_bytes; /* the GPU's memory, as nvidia-smi's total shows it */
    uint64_t others_bytes; /* what other processes hold on it (a simulator beside the run) */
    int32_t arch;          /* compute capability as major * 10 + minor: 75, 80, 86, 89, 90 */
    int32_t reserved_;
} rlt_gpu_desc;

/* One architecture's row of the table. */
typedef struct described_arch {
    int32_t arch;
    int32_t measured;       /* 1: context and handles measured on a GPU of this architecture; 0: estimates */
    const char *gpus;       /* examples, for messages */
    uint64_t context_bytes; /* the CUDA context with this module's kernels loaded, as measure_memory reports it */
    uint64_t cublas_bytes;  /* the cuBLAS handle (created when a dense layer goes to the library) */
    uint64_t cublaslt_bytes;/* the cuBLASLt handle (the same plans) */
} described_arch;

/* The row for arch, or NULL when the table has none. */
const described_arch *described_arch_find(int32_t arch);
/* The architectures of the table, as text for messages ("sm_75, sm_80, ..."). */
const char *described_arch_names(void);
/* Opens the described GPU into bk (device_name, device_total, device_free, context_bytes as that GPU would show
 * them). Fails with RLT_EINVAL for an architecture the table does not have. */
int described_open(rlt_backend *bk, const rlt_gpu_desc *d);

#endif
