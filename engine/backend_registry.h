/* backend_registry.h: chooses and opens a backend from the config's `device` (device.h). The CPU backend is
 * always there; the CUDA backend is the module librltrain_cuda.so, loaded with dlopen only when a CUDA
 * device is asked for (or `auto`), so binaries start on machines with no GPU, driver or CUDA libraries. */
#ifndef RLT_BACKEND_REGISTRY_H
#define RLT_BACKEND_REGISTRY_H

#include "backend.h"
#include "described/described.h"
#include "device.h"

/* Opens `device`. On success bk is open and bk->err = e. bk->lanes is the caller's (rlt_backend), read here; the
 * rest of *bk is overwritten.
 * cuda / cuda:N that cannot be used: RLT_EDEVICE with the reason (module missing, no driver, no such
 * device index, ...). auto never fails for lack of a GPU: it opens the CPU backend and writes the reason
 * into why_cpu (cap bytes) so the caller can log one line. */
int rlt_backend_open_device(rlt_backend *bk, rlt_err *e, rlt_device device, int32_t cpu_threads, char *why_cpu,
                            size_t cap);
/* The same from the device's text, "cpu" | "cuda" | "cuda:N" | "auto" (NULL or "": auto), for tests and
 * tools; text that is none of them is RLT_ECONFIG. */
int rlt_backend_open(rlt_backend *bk, rlt_err *e, const char *device, int32_t cpu_threads, char *why_cpu, size_t cap);
void rlt_backend_close(rlt_backend *bk);
/* Opens the described GPU d (kernels/described/): it plans as that GPU would and reserves nothing. */
int rlt_backend_open_described(rlt_backend *bk, rlt_err *e, const rlt_gpu_desc *d);
/* The CUDA module's table, or NULL with the dlopen/dlsym reason in why (for tests and `rltrain plan`). */
const rlt_backend_ops *rlt_backend_cuda_ops(char *why, size_t cap);

#endif
