/* backend_registry.c: turns the config's `device` into an open backend (see backend_registry.h).
 *
 * The CPU backend is linked in. The CUDA backend is the module librltrain_cuda.so, loaded with dlopen
 * only when a CUDA device is asked for, so that librltrain and every program linked with it start on
 * machines with no GPU, driver or CUDA libraries. This file and the build are the only places that know a
 * CUDA backend exists; nothing here is conditionally compiled: a build without the module simply finds
 * no module at run time and says so. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_registry.h"

static const char *const k_no_module_hint =
    "this build has no CUDA backend module; rebuild with nvcc available, or use device: cpu";

/* An object of this file, so dladdr can tell which file (librltrain.so, or the program librltrain.a was
 * linked into) holds the registry. */
static const char registry_anchor = 0;

static void append(char *buf, size_t cap, const char *fmt, const char *a, const char *b) {
    size_t len = strlen(buf);
    if (len + 1 < cap) snprintf(buf + len, cap - len, fmt, a, b);
}

/* Tries one candidate path; on success *handle is the module's handle. */
static int try_dlopen(const char *path, void **handle, char *why, size_t cap) {
    /* RTLD_LOCAL: the module's private copy of err.c must not become visible to anything loaded later.
     * RTLD_NODELETE: dlclose leaves the module (and through it the CUDA runtime) mapped. Unloading the
     * runtime while the process lives would run its teardown early, and any object it registered (exit
     * handlers, the primary context) would point into unmapped code. */
    dlerror();
    *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (*handle) return 1;
    const char *err = dlerror();
    append(why, cap, "%s%s", why[0] ? "; " : "", err ? err : path);
    return 0;
}

/* Finds and loads the CUDA module and checks its table. Search order: $RLT_CUDA_MODULE (alone, when set:
 * an explicit choice should not silently fall back); the directory of the file holding this registry
 * (librltrain.so's directory, where the build and the install put the module); the dynamic loader's own
 * search (LD_LIBRARY_PATH, RUNPATH, ld.so.cache). */
static const rlt_backend_ops *load_cuda_module(void **handle_out, char *why, size_t cap) {
    void *h = NULL;
    *handle_out = NULL;
    if (cap) why[0] = '\0';
    const char *env = getenv("RLT_CUDA_MODULE");
    if (env && env[0]) {
        try_dlopen(env, &h, why, cap);
    } else {
        Dl_info info;
        if (dladdr(&registry_anchor, &info) && info.dli_fname && strchr(info.dli_fname, '/')) {
            char path[4096];
            snprintf(path, sizeof path, "%s", info.dli_fname);
            char *slash = strrchr(path, '/');
            size_t room = sizeof path - (size_t)(slash + 1 - path);
            if ((size_t)snprintf(slash + 1, room, "%s", RLT_CUDA_MODULE_NAME) < room) try_dlopen(path, &h, why, cap);
        }
        if (!h) try_dlopen(RLT_CUDA_MODULE_NAME, &h, why, cap);
    }
    if (!h) return NULL;

    dlerror();
    /* dlsym returns an object pointer; ISO C has no cast from it to a function pointer, so copy the
     * bits (POSIX guarantees the two have the same representation). */
    void *sym = dlsym(h, RLT_CUDA_ENTRY_SYMBOL);
    rlt_backend_entry_fn entry = NULL;
    if (sym) memcpy(&entry, &sym, sizeof entry);
    const rlt_backend_ops *ops = entry ? entry() : NULL;
    if (!ops) {
        const char *err = dlerror();
        if (cap) snprintf(why, cap, "the CUDA module has no usable %s: %s", RLT_CUDA_ENTRY_SYMBOL,
                          err ? err : "it returned no table");
        dlclose(h);
        return NULL;
    }
    if (ops->abi_version != RLT_BACKEND_ABI) {
        if (cap) snprintf(why, cap, "the CUDA module was built for backend ABI %d but this library uses %d; "
                                    "rebuild both from the same source tree", (int)ops->abi_version, RLT_BACKEND_ABI);
        dlclose(h);
        return NULL;
    }
    *handle_out = h;
    return ops;
}

const rlt_backend_ops *rlt_backend_cuda_ops(char *why, size_t cap) {
    char local[1024];
    void *h = NULL;
    /* The handle is deliberately kept: the table points into the module, which must stay loaded for as
     * long as the caller may read it (the module is never unloaded anyway, see try_dlopen). */
    const rlt_backend_ops *ops = load_cuda_module(&h, why && cap ? why : local, why && cap ? cap : sizeof local);
    return ops;
}

static int open_cpu(rlt_backend *bk, int32_t cpu_threads) {
    bk->ops = rlt_cpu_backend_ops();
    int rc = bk->ops->open(bk, -1, cpu_threads);
    if (rc != RLT_OK) bk->ops = NULL;
    return rc;
}

/* Loads the module and opens device `index`. Every failure is RLT_EDEVICE with the reason in bk->err. */
static int open_cuda(rlt_backend *bk, const char *device, int32_t index, int32_t cpu_threads) {
    char why[1024];
    void *h = NULL;
    const rlt_backend_ops *ops = load_cuda_module(&h, why, sizeof why);
    const char *env = getenv("RLT_CUDA_MODULE");
    /* An explicit RLT_CUDA_MODULE that fails is that path's problem, not a build without the module. */
    if (!ops && env && env[0])
        return rlt_err_set(bk->err, RLT_EDEVICE, __FILE__, __LINE__,
                           "device '%s' needs the CUDA backend module, and RLT_CUDA_MODULE names '%.300s', which could "
                           "not be loaded: %s. Hint: point RLT_CUDA_MODULE at the %s that the build or the install "
                           "made (next to librltrain.so), or unset it to search there", device, env, why,
                           RLT_CUDA_MODULE_NAME);
    if (!ops)
        return rlt_err_set(bk->err, RLT_EDEVICE, __FILE__, __LINE__,
                           "device '%s' needs the CUDA backend module, which could not be loaded: %s. Hint: %s",
                           device, why, k_no_module_hint);
    bk->ops = ops;
    bk->module = h;
    int rc = ops->open(bk, index, cpu_threads);
    if (rc != RLT_OK) {
        /* The module's open cleans up after itself; it reports device trouble as RLT_EDEVICE, and anything
         * else it returns also means this device cannot be used. */
        if (bk->err && bk->err->status != RLT_EDEVICE) {
            char inner[1024];
            snprintf(inner, sizeof inner, "%.1000s", bk->err->msg);
            rlt_err_set(bk->err, RLT_EDEVICE, __FILE__, __LINE__, "device '%s' could not be opened: %s", device, inner);
        }
        dlclose(h);
        bk->ops = NULL;
        bk->module = NULL;
        bk->impl = NULL;
        return RLT_EDEVICE;
    }
    return RLT_OK;
}

/* The fields a caller sets before an open (lanes, seeds, the arena span), kept through the open's resets. */
typedef struct caller_fields {
    int32_t lanes, seeds, span_slot;
    rlt_arena_span *span;
} caller_fields;

static caller_fields caller_keep(const rlt_backend *bk) {
    return (caller_fields){bk->lanes, bk->seeds, bk->span_slot, bk->span};
}

/* Zeroes bk but for the caller's fields. */
static void caller_reset(rlt_backend *bk, caller_fields f) {
    memset(bk, 0, sizeof *bk);
    bk->lanes = f.lanes;
    bk->seeds = f.seeds;
    bk->span = f.span;
    bk->span_slot = f.span_slot;
}

int rlt_backend_open_described(rlt_backend *bk, rlt_err *e, const rlt_gpu_desc *d) {
    if (!bk || !d) return rlt_err_set(e, RLT_EINVAL, __FILE__, __LINE__, "rlt_backend_open_described: no backend given");
    caller_reset(bk, caller_keep(bk)); /* the caller's fields, as rlt_backend_open_device keeps them */
    bk->err = e;
    if (e) rlt_err_clear(e);
    return described_open(bk, d);
}

int rlt_backend_open_device(rlt_backend *bk, rlt_err *e, rlt_device device, int32_t cpu_threads, char *why_cpu,
                            size_t cap) {
    if (why_cpu && cap) why_cpu[0] = '\0';
    if (!bk) return rlt_err_set(e, RLT_EINVAL, __FILE__, __LINE__, "rlt_backend_open: no backend given");
    const caller_fields keep = caller_keep(bk); /* the caller's, kept through the resets below */
    caller_reset(bk, keep);
    bk->err = e;
    bk->device_index = -1;
    if (e) rlt_err_clear(e);
    char name[32];
    device_format(device, name, sizeof name);
    if (device_check(device) != 0)
        return rlt_err_set(e, RLT_EINVAL, __FILE__, __LINE__, "rlt_backend_open_device: %s is not a device value", name);

    if (device.kind == RLT_DEVICE_CPU) return open_cpu(bk, cpu_threads);

    if (device.kind == RLT_DEVICE_AUTO) {
        /* Try the first GPU with a scratch error record, so a missing GPU leaves no error behind. */
        rlt_err scratch;
        rlt_err_clear(&scratch);
        bk->err = &scratch;
        int rc = open_cuda(bk, "cuda:0", 0, cpu_threads);
        bk->err = e;
        if (rc == RLT_OK) return RLT_OK;
        if (why_cpu && cap) snprintf(why_cpu, cap, "%s", scratch.msg);
        caller_reset(bk, keep);
        bk->err = e;
        bk->device_index = -1;
        return open_cpu(bk, cpu_threads);
    }
    return open_cuda(bk, name, device_cuda_index(device), cpu_threads);
}

int rlt_backend_open(rlt_backend *bk, rlt_err *e, const char *device, int32_t cpu_threads, char *why_cpu, size_t cap) {
    rlt_device d = {RLT_DEVICE_AUTO, -1};
    if (bk && device && device[0] && device_parse(device, strlen(device), &d) != 0) {
        if (why_cpu && cap) why_cpu[0] = '\0';
        memset(bk, 0, sizeof *bk);
        bk->err = e;
        bk->device_index = -1;
        return rlt_err_set(e, RLT_ECONFIG, __FILE__, __LINE__,
                           "device '%s' is not one of: cpu, cuda, cuda:N (N = 0, 1, ...), auto", device);
    }
    if (bk) caller_reset(bk, (caller_fields){0, 0, 0, NULL}); /* callers of the text form (tests, tools) may hand in
                                                                 * an uninitialised backend */
    return rlt_backend_open_device(bk, e, d, cpu_threads, why_cpu, cap);
}

void rlt_backend_close(rlt_backend *bk) {
    if (!bk || !bk->ops) return;
    bk->ops->close(bk);
    if (bk->module) dlclose(bk->module);
    bk->ops = NULL;
    bk->module = NULL;
    bk->impl = NULL;
}
