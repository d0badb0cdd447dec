/* host_limits.h: the memory limits the host puts on this process, read when a plan is made, so a plan that
 * cannot fit is refused with a message instead of ending in a hang or the OOM killer. Three limits count:
 * the address-space limit (RLIMIT_AS, `ulimit -v`), the data limit (RLIMIT_DATA, `ulimit -d`; private
 * writable mappings count against it since Linux 4.7) and the memory cgroup's limit (v2 memory.max, v1
 * memory.limit_in_bytes, on this cgroup and every ancestor). Each leaves its limit less what already counts
 * against it; the tightest one is the answer. */
#ifndef RLT_HOST_LIMITS_H
#define RLT_HOST_LIMITS_H

#include <stddef.h>
#include <stdint.h>

/* What the process may still take. avail is UINT64_MAX when nothing limits it. */
typedef struct rlt_host_limit {
    uint64_t avail;   /* limit - used (0 when used is over the limit) */
    uint64_t limit;   /* the tightest limit, bytes */
    uint64_t used;    /* what already counts against it: mapped bytes (RLIMIT_AS, RLIMIT_DATA), or the cgroup's
                       * usage less its file cache, which the kernel reclaims before it kills */
    char source[192]; /* which limit: "the address-space limit (RLIMIT_AS, ulimit -v)", "the cgroup memory limit
                       * (/sys/fs/cgroup/a/memory.max)"; empty when none */
} rlt_host_limit;

/* Every limit above for this process; *out gets the tightest. Never fails: a limit that cannot be read is
 * taken as absent. */
void rlt_host_limit_read(rlt_host_limit *out);

/* The address-space and data limits alone: the room left for new mappings (what OpenBLAS's buffers need). */
void rlt_host_limit_read_vm(rlt_host_limit *out);

/* The cgroup limit alone, from a mount table and a /proc/<pid>/cgroup file (tests point both at a fake tree).
 * Handles cgroup v2 (memory.max, memory.current, memory.stat) and v1 (memory.limit_in_bytes,
 * memory.usage_in_bytes, memory.stat), walking from the process's cgroup up to the mount's root. Returns 1
 * and fills *out when a limit applies, 0 when none does (out->avail is UINT64_MAX then). */
int rlt_host_limit_read_cgroup(rlt_host_limit *out, const char *mountinfo_path, const char *proc_cgroup_path);

#endif
