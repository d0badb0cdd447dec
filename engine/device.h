/* device.h: the device a run asks for, the config's `device` key (auto, cpu, cuda or cuda:N), as a typed
 * value with its one parser and one writer. The config schema reads it once at load time; the backend
 * registry opens it; messages write it back with device_format. */
#ifndef RLT_DEVICE_H
#define RLT_DEVICE_H

#include <stddef.h>
#include <stdint.h>

/* Each kind with the name configs use for it. */
#define RLT_DEVICE_MAP(X)          \
    X(RLT_DEVICE_AUTO, "auto")     \
    X(RLT_DEVICE_CPU, "cpu")       \
    X(RLT_DEVICE_CUDA, "cuda")

#define RLT_DEVICE_ENUM_CONST(c, name) c,
typedef enum { RLT_DEVICE_MAP(RLT_DEVICE_ENUM_CONST) } rlt_device_kind;
#undef RLT_DEVICE_ENUM_CONST

/* cuda:N takes 1 to 6 digits: cuda:0 .. cuda:999999. */
#define RLT_DEVICE_INDEX_DIGITS 6
#define RLT_DEVICE_MAX_INDEX 999999

typedef struct rlt_device {
    rlt_device_kind kind;
    /* cuda:N's N (leading zeros dropped); -1 when no index was written, for every kind but cuda:N.
     * A bare "cuda" means GPU 0 but keeps -1, so that the config writes it back as "cuda". */
    int32_t index;
} rlt_device;

/* "auto", "cpu", "cuda" or "cuda:N" (n bytes, no NUL) into *out: 0, or -1 when the text is none of them. */
int device_parse(const char *text, size_t n, rlt_device *out);
/* 0 when d is a value device_parse could have made, else -1. */
int device_check(rlt_device d);
/* d as device_parse reads it ("cuda:3"); snprintf's contract. */
size_t device_format(rlt_device d, char *buf, size_t cap);
/* The CUDA device index to open: N for cuda:N, 0 for a bare "cuda" (and for auto's first try). */
int32_t device_cuda_index(rlt_device d);

#endif
