/* process_memory.c: how much device memory this process holds, for memory.process_budget_mb. The CUDA
 * context alone is hundreds of MiB on a recent GPU (527 MiB on an H100) and a cuBLAS handle tens more, so a
 * user sharing a small GPU needs the whole process measured, not only the arena.
 *
 * The runtime cannot measure its own context: asking it for free memory creates the context first. NVML can,
 * and is the ground truth nvidia-smi shows; it is loaded at run time (dlopen) like the module itself, so a
 * machine without it still trains. Three methods, best first, chosen once when the context is made:
 *   pid      NVML's usedGpuMemory for this process: everything the process holds on the GPU, other CUDA code
 *            in it included;
 *   device   NVML's free device memory read before the context and now: what this process added since, which
 *            is right as long as no other process allocates meanwhile (used where NVML lists no processes
 *            with our pid, as inside a container with its own pid namespace). The primary context outlives the
 *            backend that made it (the runtime keeps it until the process exits), so its cost is remembered per
 *            GPU for the backends opened after it; what other CUDA code in the process holds is not seen;
 *   runtime  total minus free memory from the runtime (NVML missing): other processes' memory counts too, so
 *            on a shared GPU the figure is an upper bound.
 * NVML is only read at init (open, plan, after capture): no call here allocates device memory. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda_ops.h"

/* The few NVML declarations used (nvml.h's, whose ABI NVIDIA keeps stable; the header is not needed). */
typedef struct nvml_device_st *nvml_device;
typedef struct {
    unsigned long long total, free, used;
} nvml_memory;
/* nvmlProcessInfo_v2_t (the _v2 and _v3 queries) and nvmlProcessInfo_v1_t (the unversioned one). */
typedef struct {
    unsigned int pid;
    unsigned long long used;
    unsigned int gpu_instance, compute_instance;
} nvml_process_v2;
typedef struct {
    unsigned int pid;
    unsigned long long used;
} nvml_process_v1;
#define NVML_OK 0
#define NVML_NOT_AVAILABLE 0xFFFFFFFFFFFFFFFFull /* usedGpuMemory where the driver does not account per process */
#define PROCMEM_MAX_PROCS 64                      /* processes read at once; more on one GPU: the pid method is skipped */

enum { PROCMEM_RUNTIME = 0, PROCMEM_DEVICE = 1, PROCMEM_PID = 2 };

/* The device method's memory of each GPU's primary context (see the file comment): the module's one piece of
 * process-wide state, because the context is one per process too. */
#define PROCMEM_MAX_GPUS 16
static pthread_mutex_t procmem_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    char pci[32];
    unsigned long long bytes;
} procmem_contexts[PROCMEM_MAX_GPUS];

struct cuda_procmem {
    void *lib;
    nvml_device dev;
    int32_t method;
    int32_t procs_v2; /* 1: procs takes nvml_process_v2 entries, 0: nvml_process_v1 */
    char pci[32];
    /* What the process held before this backend opened: NVML's figure for our pid, or (device method) the
     * remembered context; then the device's free memory at that time. */
    unsigned long long pid_before, free_before;
    int (*shutdown)(void);
    int (*memory)(nvml_device, nvml_memory *);
    int (*procs)(nvml_device, unsigned int *, void *);
};

/* This process's usedGpuMemory on the device, or 0 when NVML does not list it (or cannot say). */
static unsigned long long procmem_pid_used(const struct cuda_procmem *m) {
    if (!m->procs) return 0;
    nvml_process_v2 v2[PROCMEM_MAX_PROCS];
    nvml_process_v1 v1[PROCMEM_MAX_PROCS];
    unsigned int n = PROCMEM_MAX_PROCS;
    if (m->procs(m->dev, &n, m->procs_v2 ? (void *)v2 : (void *)v1) != NVML_OK) return 0;
    unsigned int self = (unsigned int)getpid();
    for (unsigned int i = 0; i < n && i < PROCMEM_MAX_PROCS; i++) {
        unsigned int pid = m->procs_v2 ? v2[i].pid : v1[i].pid;
        unsigned long long used = m->procs_v2 ? v2[i].used : v1[i].used;
        if (pid == self) return used == NVML_NOT_AVAILABLE ? 0 : used;
    }
    return 0;
}

static int procmem_free(const struct cuda_procmem *m, unsigned long long *free_b) {
    nvml_memory mem;
    if (m->memory(m->dev, &mem) != NVML_OK) return 0;
    *free_b = mem.free;
    return 1;
}

static void procmem_unload(struct cuda_procmem *m) {
    if (m->shutdown) m->shutdown();
    dlclose(m->lib);
    free(m);
}

void cuda_procmem_open(cuda_impl *c) {
    c->procmem = NULL;
    /* The GPU's PCI address names it to NVML whatever CUDA_VISIBLE_DEVICES renumbered; reading attributes does
     * not create the context. */
    int domain = 0, bus = 0, slot = 0;
    if (cudaDeviceGetAttribute(&domain, cudaDevAttrPciDomainId, c->device) != cudaSuccess ||
        cudaDeviceGetAttribute(&bus, cudaDevAttrPciBusId, c->device) != cudaSuccess ||
        cudaDeviceGetAttribute(&slot, cudaDevAttrPciDeviceId, c->device) != cudaSuccess) {
        cudaGetLastError();
        return;
    }
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return;
    struct cuda_procmem *m = calloc(1, sizeof *m);
    if (!m) {
        dlclose(lib);
        return;
    }
    m->lib = lib;
    int (*init)(void) = (int (*)(void))dlsym(lib, "nvmlInit_v2");
    int (*by_pci)(const char *, nvml_device *) =
        (int (*)(const char *, nvml_device *))dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2");
    m->memory = (int (*)(nvml_device, nvml_memory *))dlsym(lib, "nvmlDeviceGetMemoryInfo");
    if (!init || !by_pci || !m->memory || init() != NVML_OK) {
        m->shutdown = NULL;
        procmem_unload(m);
        return;
    }
    m->shutdown = (int (*)(void))dlsym(lib, "nvmlShutdown");
    snprintf(m->pci, sizeof m->pci, "%08x:%02x:%02x.0", (unsigned)domain, (unsigned)bus, (unsigned)slot);
    if (by_pci(m->pci, &m->dev) != NVML_OK || !procmem_free(m, &m->free_before)) {
        procmem_unload(m);
        return;
    }
    const char *names[] = {"nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2",
                           "nvmlDeviceGetComputeRunningProcesses"};
    for (int i = 0; i < 3 && !m->procs; i++) {
        m->procs = (int (*)(nvml_device, unsigned int *, void *))dlsym(lib, names[i]);
        m->procs_v2 = i < 2;
    }
    m->pid_before = procmem_pid_used(m);
    c->procmem = m;
}

void cuda_procmem_context_made(cuda_impl *c) {
    struct cuda_procmem *m = c->procmem;
    if (!m) return;
    /* A listing of our pid that grew with our context is ours (not a namesake from another pid namespace). */
    m->method = procmem_pid_used(m) > m->pid_before ? PROCMEM_PID : PROCMEM_DEVICE;
    if (m->method == PROCMEM_PID) return;
    /* The first backend on this GPU made the context now and records its cost; a later one finds it. */
    unsigned long long free_now = 0;
    if (!procmem_free(m, &free_now)) free_now = m->free_before;
    pthread_mutex_lock(&procmem_lock);
    int i = 0;
    while (i < PROCMEM_MAX_GPUS && procmem_contexts[i].pci[0] && strcmp(procmem_contexts[i].pci, m->pci) != 0) i++;
    if (i < PROCMEM_MAX_GPUS && procmem_contexts[i].pci[0]) {
        m->pid_before = procmem_contexts[i].bytes;
    } else if (i < PROCMEM_MAX_GPUS) {
        snprintf(procmem_contexts[i].pci, sizeof procmem_contexts[i].pci, "%s", m->pci);
        procmem_contexts[i].bytes = m->free_before > free_now ? m->free_before - free_now : 0;
    }
    pthread_mutex_unlock(&procmem_lock);
}

int cuda_procmem_now(rlt_backend *bk, uint64_t *bytes) {
    cuda_impl *c = cuda_get(bk);
    struct cuda_procmem *m = c->procmem;
    if (m && m->method == PROCMEM_PID) {
        unsigned long long used = procmem_pid_used(m);
        if (used) {
            *bytes = used;
            return RLT_OK;
        }
    }
    unsigned long long free_now = 0;
    if (m && procmem_free(m, &free_now)) {
        *bytes = m->pid_before + (m->free_before > free_now ? m->free_before - free_now : 0);
        return RLT_OK;
    }
    size_t free_b = 0, total_b = 0;
    CUDA_CHECK(bk, cudaMemGetInfo(&free_b, &total_b));
    *bytes = total_b - free_b;
    return RLT_OK;
}

const char *cuda_procmem_method(const cuda_impl *c) {
    const struct cuda_procmem *m = c->procmem;
    if (!m) return "as the GPU's used memory (no NVML: other processes count too)";
    return m->method == PROCMEM_PID ? "by NVML for this process" : "by NVML (the GPU's free memory since open)";
}

void cuda_procmem_close(cuda_impl *c) {
    if (c->procmem) procmem_unload(c->procmem);
    c->procmem = NULL;
}
