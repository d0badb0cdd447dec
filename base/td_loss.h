/* td_loss.h: the per-sample TD loss of DQN and its derivative, shared by the CPU op and the CUDA kernels
 * so both compute the same bits. delta > 0: Huber, d^2 / 2 within delta, delta (|d| - delta / 2) beyond
 * (PyTorch's smooth_l1_loss for delta 1); delta == 0: squared error d^2. */
#ifndef RLT_TD_LOSS_H
#define RLT_TD_LOSS_H

#include "philox.h" /* RLT_HD */

/* Returns l(d) and writes l'(d) to *g. */
RLT_HD float rlt_td_loss(float d, float delta, float *g) {
    if (delta == 0.0f) {
        *g = 2.0f * d;
        return d * d;
    }
    if (fabsf(d) <= delta) {
        *g = d;
        return 0.5f * d * d;
    }
    *g = d > 0.0f ? delta : -delta;
    return delta * (fabsf(d) - 0.5f * delta);
}

#endif
