/* ktrace.c: every kernel a process runs, with its start, end, stream and grid, from CUPTI's activity records, for
 * seeing where a graph's time goes (which kernels run side by side, how long each takes in place) on a machine
 * without Nsight Systems. A shared library to preload:
 *   KTRACE_OUT=trace.csv LD_PRELOAD=build/bench/librlt_ktrace.so build/bench/bench_td3_update ...
 *   python3 bench/ktrace_summary.py trace.csv 16
 * Writes start_ns,end_ns,stream,grid,block,name (one line a kernel, in the order CUPTI hands its buffers over, not
 * sorted). Built with the CUDA backend where CMake finds CUPTI; it links nothing of the project. */
#include <cupti.h>
#include <stdio.h>
#include <stdlib.h>

static FILE *ktrace_out;

static void CUPTIAPI ktrace_buffer(uint8_t **buf, size_t *size, size_t *max_records) {
    *size = 16u << 20;
    *buf = aligned_alloc(64, *size);
    *max_records = 0;
}

static void CUPTIAPI ktrace_done(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size, size_t valid) {
    (void)ctx, (void)stream, (void)size;
    CUpti_Activity *r = NULL;
    while (ktrace_out && cuptiActivityGetNextRecord(buf, valid, &r) == CUPTI_SUCCESS) {
        if (r->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) continue;
        const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)r;
        fprintf(ktrace_out, "%llu,%llu,%u,%ux%ux%u,%u,%s\n", (unsigned long long)k->start,
                (unsigned long long)k->end, k->streamId, k->gridX, k->gridY, k->gridZ, k->blockX, k->name);
    }
    free(buf);
}

__attribute__((constructor)) static void ktrace_start(void) {
    const char *path = getenv("KTRACE_OUT");
    ktrace_out = fopen(path ? path : "ktrace.csv", "w");
    if (!ktrace_out) return;
    fprintf(ktrace_out, "start,end,stream,grid,block,name\n");
    if (cuptiActivityRegisterCallbacks(ktrace_buffer, ktrace_done) != CUPTI_SUCCESS ||
        cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS) {
        fprintf(stderr, "ktrace: CUPTI refused the kernel activity; nothing traced\n");
        return;
    }
    cuptiActivityFlushPeriod(20); /* ms: buffers reach the file while the process runs */
}

__attribute__((destructor)) static void ktrace_stop(void) {
    cuptiActivityFlushAll(1);
    if (ktrace_out) fclose(ktrace_out);
    ktrace_out = NULL;
}
