/* adam.h: one Adam step (Kingma and Ba 2015, in PyTorch's form: eps outside the square root, bias
 * corrections in float), written once for the CPU backend and the CUDA kernels, so both compute the same
 * expressions term by term (with FMA contraction off on both, m and v agree bit for bit).
 *   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;  p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps) */
#ifndef RLT_ADAM_H
#define RLT_ADAM_H

#include <math.h>
#include <stdint.h>
#include "philox.h" /* RLT_HD */

/* Adam hyper-parameters (PyTorch's defaults for beta and eps are the agents' choice). */
typedef struct rlt_adam_hp {
    float lr, beta1, beta2, eps;
} rlt_adam_hp;

/* The step's factors: lr / (1 - b1^t) and sqrt(1 - b2^t), for step count t >= 1. */
typedef struct rlt_adam_coef {
    float step_size, bc2_sqrt;
} rlt_adam_coef;

RLT_HD rlt_adam_coef rlt_adam_coefs(rlt_adam_hp hp, int64_t step) {
    float t = (float)step;
    rlt_adam_coef c;
    c.step_size = hp.lr / (1.0f - powf(hp.beta1, t));
    c.bc2_sqrt = sqrtf(1.0f - powf(hp.beta2, t));
    return c;
}

/* The moments of one element, updated in place. */
RLT_HD void rlt_adam_moments(rlt_adam_hp hp, float g, float *m, float *v) {
    *m = hp.beta1 * *m + (1.0f - hp.beta1) * g;
    *v = hp.beta2 * *v + (1.0f - hp.beta2) * g * g;
}

/* One element's whole step: updates m and v and returns the new parameter. */
RLT_HD float rlt_adam_elem(rlt_adam_hp hp, rlt_adam_coef c, float p, float g, float *m, float *v) {
    rlt_adam_moments(hp, g, m, v);
    return p - c.step_size * *m / (sqrtf(*v) / c.bc2_sqrt + hp.eps);
}

#endif
