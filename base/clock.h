/* clock.h: the monotonic clock in seconds, for timeouts, rates and the lock-step's round times. */
#ifndef RLT_CLOCK_H
#define RLT_CLOCK_H

#include <time.h>

static inline double rlt_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#endif
