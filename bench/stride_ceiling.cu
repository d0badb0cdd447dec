/* stride_ceiling.cu: whether where N agents' regions lie changes what a seed-batched product costs (issue #39). In
 * the batched TD3 update's kernel timeline (CUPTI) the 256 x 256 TF32 forwards take 13-15 us each, one at a time,
 * against 7.4 us in bench_seed_layer_ceiling, whose agents sit back to back in one cudaMalloc. A seed group's agents
 * sit at the span's stride (10 MiB for TD3 256-256), each mapped from its own physical allocation (CUDA virtual
 * memory management, kernels/cuda/cuda_backend.c). Each row times the same cuBLASLt strided products, the forward
 * with RELU_BIAS and the input gradient, as a graph of REPS dependent ops replayed, with the regions:
 *   packed     one cudaMalloc, the agents back to back (the ceiling benchmarks' layout)
 *   malloc S   one cudaMalloc, the agents S MiB apart
 *   vmm S      each agent its own physical allocation, mapped S MiB apart (a seed group's layout)
 *   bench_stride_ceiling [--reps 20] [--replays 200] [--agents 16,64]
 * Needs a GPU (exit 77 without one); built with the CUDA backend. */
#include <cuda.h>
#include <cudaTypedefs.h>

#include "seed_ceiling.cuh"

#define DCK(x)                                                                                                  \
    do {                                                                                                        \
        CUresult r_ = (x);                                                                                      \
        if (r_ != CUDA_SUCCESS) {                                                                               \
            fprintf(stderr, "%s:%d: %s failed (%d)\n", __FILE__, __LINE__, #x, (int)r_);                          \
            exit(1);                                                                                            \
        }                                                                                                       \
    } while (0)

__global__ void fill_kernel(float *p, int64_t n, int64_t per, int64_t stride) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t z = i / per, j = i % per;
        uint32_t v = (uint32_t)i * 2654435761u;
        v ^= v >> 15, v *= 2246822519u, v ^= v >> 13;
        p[z * stride + j] = (float)(v & 0xffff) / 65536.0f - 0.5f;
    }
}

typedef struct region {
    float *base;
    int64_t stride; /* floats */
    CUmemGenericAllocationHandle h[256];
    CUdeviceptr va;
    size_t bytes, va_bytes;
    int vmm;
} region;

/* The driver's virtual memory calls, through the runtime's entry points (as kernels/cuda/cuda_backend.c reaches them):
 * the program links no driver library, so on a machine without one it starts and exits 77. */
static struct {
    PFN_cuMemGetAllocationGranularity_v10020 granularity;
    PFN_cuMemAddressReserve_v10020 reserve;
    PFN_cuMemCreate_v10020 create;
    PFN_cuMemMap_v10020 map;
    PFN_cuMemSetAccess_v10020 access;
    PFN_cuMemUnmap_v10020 unmap;
    PFN_cuMemRelease_v10020 release;
    PFN_cuMemAddressFree_v10020 free;
} g_vmm;

static void vmm_load(void) {
    const char *names[8] = {"cuMemGetAllocationGranularity", "cuMemAddressReserve", "cuMemCreate", "cuMemMap",
                            "cuMemSetAccess", "cuMemUnmap", "cuMemRelease", "cuMemAddressFree"};
    void **fn[8] = {(void **)&g_vmm.granularity, (void **)&g_vmm.reserve, (void **)&g_vmm.create, (void **)&g_vmm.map,
                    (void **)&g_vmm.access, (void **)&g_vmm.unmap, (void **)&g_vmm.release, (void **)&g_vmm.free};
    for (int i = 0; i < 8; i++) {
        enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
        CK(cudaGetDriverEntryPointByVersion(names[i], fn[i], 12000, cudaEnableDefault, &q));
        if (q != cudaDriverEntryPointSuccess || !*fn[i]) {
            fprintf(stderr, "the driver offers no %s\n", names[i]);
            exit(1);
        }
    }
}

/* kind 0 packed, 1 malloc at stride_mb, 2 vmm at stride_mb. need: floats an agent uses. */
static void region_make(region *R, int kind, int n, int64_t need, int stride_mb) {
    memset(R, 0, sizeof *R);
    if (kind == 0) R->stride = (need + 63) / 64 * 64;
    else R->stride = (int64_t)stride_mb << 18; /* MiB in floats */
    R->bytes = (size_t)R->stride * 4;
    if (kind < 2) {
        CK(cudaMalloc((void **)&R->base, R->bytes * n));
        return;
    }
    R->vmm = 1;
    CUmemAllocationProp p;
    memset(&p, 0, sizeof p);
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p.location.id = 0;
    size_t gran = 0;
    DCK(g_vmm.granularity(&gran, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    R->va_bytes = R->bytes * n;
    DCK(g_vmm.reserve(&R->va, R->va_bytes, gran, 0, 0));
    CUmemAccessDesc acc;
    memset(&acc, 0, sizeof acc);
    acc.location = p.location;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    for (int z = 0; z < n; z++) {
        DCK(g_vmm.create(&R->h[z], R->bytes, &p, 0));
        DCK(g_vmm.map(R->va + (size_t)z * R->bytes, R->bytes, 0, R->h[z], 0));
        DCK(g_vmm.access(R->va + (size_t)z * R->bytes, R->bytes, &acc, 1));
    }
    R->base = (float *)R->va;
}

static void region_free(region *R, int n) {
    if (!R->vmm) {
        cudaFree(R->base);
        return;
    }
    for (int z = 0; z < n; z++) {
        g_vmm.unmap(R->va + (size_t)z * R->bytes, R->bytes);
        g_vmm.release(R->h[z]);
    }
    g_vmm.free(R->va, R->va_bytes);
}

static double time_kind(bench *B, int lkind, int reps, int replays) {
    lt_plan P = lt_make(B, lkind);
    return P.ok ? lt_chain_us(B, &P, lkind, reps, replays) : -1.0;
}

static void bench_case(int n, int tf32, int kind, int stride_mb, int reps, int replays) {
    bench B;
    bench_shape(&B, n, 256, tf32);
    const int64_t o = bench_plain_layout(&B);
    region R;
    region_make(&R, kind, n, o, stride_mb);
    B.stride = R.stride;
    bench_open(&B, R.base);
    fill_kernel<<<1024, 256, 0, B.s>>>(B.base, o * n, o, B.stride);
    CK(cudaStreamSynchronize(B.s));
    const double f = time_kind(&B, LT_FWD, reps, replays), d = time_kind(&B, LT_DGRAD, reps, replays);
    char what[32];
    if (kind == 0) snprintf(what, sizeof what, "packed (%.2f MiB)", R.stride / 262144.0);
    else snprintf(what, sizeof what, "%s %d MiB", kind == 1 ? "malloc" : "vmm", stride_mb);
    printf("%6d  %s  %-20s  fwd lt-fused %6.2f  dgrad lt %6.2f  (us per op, all agents)\n", n, tf32 ? "tf32" : "fp32",
           what, f, d);
    fflush(stdout);
    bench_close(&B, 0);
    region_free(&R, n);
}

int main(int argc, char **argv) {
    ceiling_opts o;
    int rc = ceiling_start(argc, argv, "a seed-batched 256 x 256 x 256 product by where the agents' regions lie", "ops",
                           0, &o);
    if (rc) return rc;
    CK(cudaFree(0)); /* the context the driver's virtual memory calls need */
    vmm_load();
    const int mb[] = {2, 8, 10, 12, 64};
    for (int a = 0; a < o.n_agents; a++)
        for (int tf32 = 1; tf32 >= 0; tf32--) {
            bench_case(o.agents[a], tf32, 0, 0, o.reps, o.replays);
            for (int i = 0; i < 5; i++) bench_case(o.agents[a], tf32, 1, mb[i], o.reps, o.replays);
            for (int i = 0; i < 5; i++) bench_case(o.agents[a], tf32, 2, mb[i], o.reps, o.replays);
        }
    return 0;
}
