/* pdl_ceiling.cu: what programmatic dependent launch (PDL, sm_90) would save on a seed-batched update's chain of
 * small kernels, measured before building it (issue #39). A kernel launched with
 * cudaLaunchAttributeProgrammaticStreamSerialization may start while the kernel before it on the stream still runs;
 * it waits for that kernel's completion and memory at `griddepcontrol.wait`, so what overlaps is the launch, the
 * block scheduling and the tail of the one before. The library's products take no part (cuBLASLt offers no PDL
 * launch), so the route that counts is a product followed by our pass, as the update's backward runs them.
 * Each route is a graph of REPS dependent ops captured from one stream and replayed; microseconds per op:
 *   tiny        a one-block kernel that adds 1 to one float (the floor of a node)
 *   pass        the ReLU-gradient pass over N agents' 256 x 256 activations (the update's most common small kernel)
 *   dgrad+pass  a TF32 cuBLASLt input gradient (N agents, 256 x 256 x 256) followed by that pass
 * each plain and with PDL on our kernels.
 *   bench_pdl_ceiling [--reps 20] [--replays 200] [--agents 16,64]
 * Needs a GPU (exit 77 without one); built with the CUDA backend. */
#include "seed_ceiling.cuh"

static __device__ __forceinline__ void pdl_wait(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;");
#endif
}

__global__ void tiny_kernel(float *x, int pdl) {
    if (pdl) pdl_wait();
    if (threadIdx.x == 0) x[0] += 1.0f;
}

/* dx[z][i] = x[z][i] > 0 ? dx[z][i] : 0, agents z at `stride` floats (cuda_act_grad's work). */
__global__ void pass_kernel(float *dx, const float *x, int64_t n, int64_t stride, int pdl) {
    if (pdl) pdl_wait();
    float *d = dx + (int64_t)blockIdx.z * stride;
    const float *xz = x + (int64_t)blockIdx.z * stride;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        d[i] = xz[i] > 0.0f ? d[i] : 0.0f;
}

/* Launches k's kernel on B->s, with the PDL attribute when pdl. */
static void launch(bench *B, int tiny, int pdl) {
    cudaLaunchConfig_t c;
    memset(&c, 0, sizeof c);
    cudaLaunchAttribute a[1];
    a[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    a[0].val.programmaticStreamSerializationAllowed = 1;
    c.stream = B->s;
    c.attrs = a;
    c.numAttrs = pdl ? 1 : 0;
    if (tiny) {
        c.gridDim = dim3(1), c.blockDim = dim3(32);
        CK(cudaLaunchKernelEx(&c, tiny_kernel, B->base + B->ob, pdl));
    } else {
        c.gridDim = dim3(64, 1, B->n), c.blockDim = dim3(256);
        CK(cudaLaunchKernelEx(&c, pass_kernel, B->base + B->odx, (const float *)(B->base + B->ox),
                              (int64_t)B->rows * B->fi, B->stride, pdl));
    }
}

/* route 0 tiny, 1 pass, 2 dgrad+pass. */
typedef struct pdl_route {
    lt_plan *dg;
    int route, pdl;
} pdl_route;

static void route_op(bench *B, const void *ctx) {
    const pdl_route *r = (const pdl_route *)ctx;
    if (r->route == 2) lt_run(B, r->dg, LT_DGRAD);
    launch(B, r->route == 0, r->pdl);
}

static double time_route(bench *B, lt_plan *dg, int route, int pdl, int reps, int replays) {
    const pdl_route r = {dg, route, pdl};
    return chain_us(B, route_op, &r, reps, replays);
}

static void bench_case(int n, int reps, int replays) {
    bench B;
    bench_shape(&B, n, 256, 1);
    B.stride = bench_plain_layout(&B);
    bench_open(&B, NULL);
    lt_plan dg = lt_make(&B, LT_DGRAD);
    double t[3][2];
    for (int r = 0; r < 3; r++)
        for (int p = 0; p < 2; p++) t[r][p] = r == 2 && !dg.ok ? -1.0 : time_route(&B, &dg, r, p, reps, replays);
    printf("%6d  tf32  tiny: plain %6.2f  pdl %6.2f   pass: plain %6.2f  pdl %6.2f   dgrad+pass: plain %6.2f  pdl %6.2f"
           "  (us per op, all agents)\n",
           n, t[0][0], t[0][1], t[1][0], t[1][1], t[2][0], t[2][1]);
    fflush(stdout);
    bench_close(&B, 1);
}

int main(int argc, char **argv) {
    ceiling_opts o;
    int rc = ceiling_start(argc, argv, "programmatic dependent launch on a chain of small kernels in a CUDA graph",
                           "ops", 0, &o);
    if (rc) return rc;
    for (int a = 0; a < o.n_agents; a++) bench_case(o.agents[a], o.reps, o.replays);
    return 0;
}
