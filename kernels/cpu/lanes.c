/* lanes.c: the CPU backend's lanes (the lane op's branches and joins, kernels/backend.h). With one thread every op runs to completion
 * in call order, which satisfies any schedule of branches and joins. With the worker (cpu.threads >= 2), an update's
 * independent chains run side by side, as they do on CUDA streams: ops issued on a side lane (1..3) go to the
 * worker's queue, each lane in order (worker.c); ops on lane 0 run on the calling thread, split with the worker
 * when it is free; join runs what is still queued on both threads and returns when all of it has run.
 *
 * Where each op runs. At RL sizes an op lasts microseconds, so what costs is handing work over and moving data
 * between the cores' caches, more than arithmetic. TD3's schedule puts the twin critics' chains on odd lanes
 * (Q1: 3 and 1) and even ones (Q2: 2 and 0): the worker prefers odd lanes and the calling thread, when it
 * joins, even ones, so each critic's weights, activations and gradients mostly stay in one core's cache, and
 * Adam's split (flat.c) follows the same line. An op of at least 2 x CPU_SPLIT_MIN_MACS on a side lane is queued
 * as two halves that may run at once, so that at a join whichever thread is free takes one.
 *
 * Why results do not change. The side lanes' jobs keep each lane's order; a side lane waits for lane 0's ops
 * issued before it, and the calling thread has finished those by the time it queues anything; lane 0 reads
 * nothing a side lane writes before join (the schedule's promise, as for streams). An op that cannot go to the
 * queue (a CBLAS call, an op that can fail as it runs) runs on the calling thread after the queue has drained
 * (cpu_lane_fence). Every op computes each element with the same code whichever thread runs it, so results are
 * the same bits on one thread or two.
 *
 * When another process takes the second core, the worker asks the calling thread to run alone for a while
 * (worker.c); each join reads that request, and until the next join no op leaves the calling thread. */
#include "cpu_ops.h"

int cpu_branch(rlt_backend *bk, int32_t lane) {
    CPU_REQUIRE(bk, lane >= 0 && lane < RLT_BACKEND_MAX_LANES, "lane");
    cpu_impl *im = bk->impl;
    if (im) im->lane = lane;
    return RLT_OK;
}

int cpu_join(rlt_backend *bk) {
    cpu_impl *im = bk->impl;
    if (im && im->worker) {
        cpu_worker_drain(im->worker);
        im->solo = cpu_worker_contended(im->worker);
    }
    if (im) im->lane = 0;
    return RLT_OK;
}

int cpu_lane(rlt_backend *bk, int32_t lane) { return lane == RLT_LANE_JOIN ? cpu_join(bk) : cpu_branch(bk, lane); }

int cpu_lane_side(rlt_backend *bk) {
    cpu_impl *im = bk->impl;
    return im && im->worker && !im->solo && im->lane != 0;
}

int cpu_lane_defer(rlt_backend *bk, void (*fn)(void *), const void *arg, size_t bytes) {
    cpu_impl *im = bk->impl;
    cpu_worker_post(im->worker, im->lane, 0, fn, arg, bytes);
    return RLT_OK;
}

int cpu_lane_defer_beside(rlt_backend *bk, void (*fn)(void *), const void *arg, size_t bytes) {
    cpu_impl *im = bk->impl;
    cpu_worker_post(im->worker, im->lane, 1, fn, arg, bytes);
    return RLT_OK;
}

void cpu_lane_fence(rlt_backend *bk) {
    cpu_impl *im = bk->impl;
    if (im && im->worker && im->lane != 0) cpu_worker_drain(im->worker);
}

int cpu_lane_can_split(rlt_backend *bk, int big) {
    cpu_impl *im = bk->impl;
    return im && im->worker && !im->solo && (big || cpu_worker_idle(im->worker));
}

float *cpu_lane_panel(const cpu_impl *im) { return cpu_worker_self(im->worker) ? im->pack2 : im->pack; }
