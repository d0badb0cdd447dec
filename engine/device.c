/* device.c: the `device` value's parser and writer (see device.h). */
#include "device.h"

#include <stdio.h>
#include <string.h>

#define RLT_DEVICE_NAME(c, name) [c] = name,
static const char *const device_kind_names[] = {RLT_DEVICE_MAP(RLT_DEVICE_NAME)};
#undef RLT_DEVICE_NAME
static const int32_t device_kind_count = (int32_t)(sizeof device_kind_names / sizeof device_kind_names[0]);

int device_parse(const char *t, size_t n, rlt_device *out) {
    for (int32_t k = 0; k < device_kind_count; k++)
        if (strlen(device_kind_names[k]) == n && memcmp(device_kind_names[k], t, n) == 0) {
            out->kind = (rlt_device_kind)k;
            out->index = -1;
            return 0;
        }
    static const char prefix[] = "cuda:";
    size_t np = sizeof prefix - 1;
    if (n <= np || n > np + RLT_DEVICE_INDEX_DIGITS || memcmp(t, prefix, np) != 0) return -1;
    int32_t v = 0;
    for (size_t i = np; i < n; i++) {
        if (t[i] < '0' || t[i] > '9') return -1;
        v = v * 10 + (t[i] - '0');
    }
    out->kind = RLT_DEVICE_CUDA;
    out->index = v;
    return 0;
}

int device_check(rlt_device d) {
    if ((int32_t)d.kind < 0 || (int32_t)d.kind >= device_kind_count) return -1;
    if (d.kind != RLT_DEVICE_CUDA) return d.index == -1 ? 0 : -1;
    return d.index >= -1 && d.index <= RLT_DEVICE_MAX_INDEX ? 0 : -1;
}

size_t device_format(rlt_device d, char *buf, size_t cap) {
    int n;
    if (device_check(d) != 0) n = snprintf(buf, cap, "<invalid device %d:%d>", (int)d.kind, (int)d.index);
    else if (d.index >= 0) n = snprintf(buf, cap, "cuda:%d", (int)d.index);
    else n = snprintf(buf, cap, "%s", device_kind_names[d.kind]);
    return n < 0 ? 0 : (size_t)n;
}

int32_t device_cuda_index(rlt_device d) { return d.index < 0 ? 0 : d.index; }
