/* host_limits.c: reads the address-space, data and memory-cgroup limits of this process (see host_limits.h). */
#include "host_limits.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

/* v1 reports "no limit" as the largest page-aligned signed 64-bit value; anything this large is no limit. */
#define CGROUP_NO_LIMIT (1ull << 60)

static void limit_none(rlt_host_limit *out) {
    memset(out, 0, sizeof *out);
    out->avail = UINT64_MAX;
}

/* Keeps the candidate when it leaves less than what *best leaves. */
static void limit_keep_tighter(rlt_host_limit *best, const rlt_host_limit *cand) {
    if (cand->avail < best->avail) *best = *cand;
}

static void limit_set(rlt_host_limit *out, uint64_t limit, uint64_t used) {
    out->limit = limit;
    out->used = used;
    out->avail = used < limit ? limit - used : 0;
}

/* "VmSize:" and the like from /proc/self/status, in bytes; 0 when it cannot be read. */
static uint64_t proc_status_bytes(const char *key) {
    FILE *f = fopen("/proc/self/status", "re");
    if (!f) return 0;
    char line[256];
    size_t klen = strlen(key);
    unsigned long long kib = 0;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, key, klen) == 0) {
            kib = strtoull(line + klen, NULL, 10);
            break;
        }
    }
    fclose(f);
    return (uint64_t)kib * 1024u;
}

void rlt_host_limit_read_vm(rlt_host_limit *out) {
    limit_none(out);
    struct rlimit rl;
    /* RLIMIT_AS counts every mapping (VmSize); RLIMIT_DATA private writable ones (VmData), which is where
     * malloc and anonymous mmap land. */
    if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
        rlt_host_limit c;
        limit_none(&c);
        limit_set(&c, (uint64_t)rl.rlim_cur, proc_status_bytes("VmSize:"));
        snprintf(c.source, sizeof c.source, "the address-space limit (RLIMIT_AS, ulimit -v %llu)",
                 (unsigned long long)(rl.rlim_cur / 1024));
        limit_keep_tighter(out, &c);
    }
    if (getrlimit(RLIMIT_DATA, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
        rlt_host_limit c;
        limit_none(&c);
        limit_set(&c, (uint64_t)rl.rlim_cur, proc_status_bytes("VmData:"));
        snprintf(c.source, sizeof c.source, "the data-segment limit (RLIMIT_DATA, ulimit -d %llu)",
                 (unsigned long long)(rl.rlim_cur / 1024));
        limit_keep_tighter(out, &c);
    }
}

/* The first number in a file ("max" and unreadable files give 0 with *ok 0). */
static uint64_t file_number(const char *path, int *ok) {
    *ok = 0;
    FILE *f = fopen(path, "re");
    if (!f) return 0;
    char buf[64] = "";
    char *got = fgets(buf, sizeof buf, f);
    fclose(f);
    if (!got || buf[0] < '0' || buf[0] > '9') return 0;
    *ok = 1;
    return strtoull(buf, NULL, 10);
}

/* The sum of the named counters in a memory.stat file (0 when absent). */
static uint64_t stat_sum(const char *path, const char *k1, const char *k2) {
    FILE *f = fopen(path, "re");
    if (!f) return 0;
    char line[256], name[128];
    unsigned long long v, sum = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "%127s %llu", name, &v) == 2 && (!strcmp(name, k1) || !strcmp(name, k2))) sum += v;
    fclose(f);
    return (uint64_t)sum;
}

/* Undoes mountinfo's octal escapes (\040 for a space) in place. */
static void unescape(char *s) {
    char *w = s;
    for (char *r = s; *r; r++) {
        if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' && r[2] <= '7' && r[3] >= '0' && r[3] <= '7') {
            *w++ = (char)((r[1] - '0') * 64 + (r[2] - '0') * 8 + (r[3] - '0'));
            r += 3;
        } else {
            *w++ = *r;
        }
    }
    *w = '\0';
}

/* The cgroup line's path for one hierarchy: v2 (the "0::" line) or v1 with the memory controller. */
static int own_cgroup(const char *proc_cgroup_path, int v2, char *out, size_t cap) {
    FILE *f = fopen(proc_cgroup_path, "re");
    if (!f) return 0;
    char line[4096];
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char *c1 = strchr(line, ':');
        char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2) continue;
        *c1 = *c2 = '\0';
        const char *ctrls = c1 + 1, *path = c2 + 1;
        if (v2) {
            found = !strcmp(line, "0") && !ctrls[0];
        } else {
            char tmp[512];
            snprintf(tmp, sizeof tmp, ",%s,", ctrls);
            found = strstr(tmp, ",memory,") != NULL;
        }
        if (found) snprintf(out, cap, "%s", path);
    }
    fclose(f);
    return found;
}

/* Walks one hierarchy's mounts: every mount of that type whose view holds our cgroup, every level from
 * our cgroup up to the mount's root. */
static void cgroup_walk(rlt_host_limit *best, const char *mountinfo_path, const char *cg, int v2) {
    FILE *f = fopen(mountinfo_path, "re");
    if (!f) return;
    char line[4096];
    while (fgets(line, sizeof line, f)) {
        /* id parent major:minor root mountpoint options [optional...] - fstype source superoptions */
        char *fields[6] = {0}, *save = NULL, *tok = strtok_r(line, " \n", &save);
        int n = 0;
        while (tok && n < 6 && strcmp(tok, "-") != 0) {
            fields[n++] = tok;
            tok = strtok_r(NULL, " \n", &save);
        }
        while (tok && strcmp(tok, "-") != 0) tok = strtok_r(NULL, " \n", &save);
        if (n < 5 || !tok) continue;
        const char *fstype = strtok_r(NULL, " \n", &save);
        strtok_r(NULL, " \n", &save); /* source */
        const char *super = strtok_r(NULL, " \n", &save);
        if (!fstype) continue;
        if (v2 ? strcmp(fstype, "cgroup2") != 0 : strcmp(fstype, "cgroup") != 0) continue;
        if (!v2) {
            char tmp[512];
            snprintf(tmp, sizeof tmp, ",%s,", super ? super : "");
            if (!strstr(tmp, ",memory,")) continue;
        }
        char *root = fields[3], *mnt = fields[4];
        unescape(root);
        unescape(mnt);
        /* Our cgroup as this mount shows it: the mount may show a subtree (a container's), whose root is
         * then a prefix of our path. */
        const char *rel = cg;
        size_t rlen = strlen(root);
        if (strcmp(root, "/") != 0) {
            if (strncmp(cg, root, rlen) == 0 && (cg[rlen] == '/' || cg[rlen] == '\0')) rel = cg + rlen;
            else rel = ""; /* not under this view: its root is the nearest level we can see */
        }
        char dir[4096];
        if ((size_t)snprintf(dir, sizeof dir, "%s%s", mnt, rel) >= sizeof dir) continue;
        size_t mlen = strlen(mnt);
        while (strlen(dir) > 1 && dir[strlen(dir) - 1] == '/') dir[strlen(dir) - 1] = '\0';
        for (;;) {
            char path[4200], stat[4200];
            int ok = 0, ok_used = 0;
            snprintf(path, sizeof path, "%s/%s", dir, v2 ? "memory.max" : "memory.limit_in_bytes");
            uint64_t limit = file_number(path, &ok);
            if (ok && limit < CGROUP_NO_LIMIT) {
                char upath[4200];
                snprintf(upath, sizeof upath, "%s/%s", dir, v2 ? "memory.current" : "memory.usage_in_bytes");
                uint64_t used = file_number(upath, &ok_used);
                snprintf(stat, sizeof stat, "%s/memory.stat", dir);
                /* Page cache is given back before the OOM killer acts: it is not in the way. */
                uint64_t file = v2 ? stat_sum(stat, "active_file", "inactive_file")
                                   : stat_sum(stat, "total_active_file", "total_inactive_file");
                rlt_host_limit c;
                limit_none(&c);
                limit_set(&c, limit, used > file ? used - file : 0);
                snprintf(c.source, sizeof c.source, "the cgroup memory limit (%.160s)", path);
                limit_keep_tighter(best, &c);
            }
            /* Up one level, not above the mount point. */
            char *slash = strrchr(dir, '/');
            if (!slash || (size_t)(slash - dir) < mlen || strlen(dir) <= mlen) break;
            *slash = '\0';
        }
    }
    fclose(f);
}

int rlt_host_limit_read_cgroup(rlt_host_limit *out, const char *mountinfo_path, const char *proc_cgroup_path) {
    limit_none(out);
    char cg[4096];
    if (own_cgroup(proc_cgroup_path, 1, cg, sizeof cg)) cgroup_walk(out, mountinfo_path, cg, 1);
    if (own_cgroup(proc_cgroup_path, 0, cg, sizeof cg)) cgroup_walk(out, mountinfo_path, cg, 0);
    return out->avail != UINT64_MAX;
}

void rlt_host_limit_read(rlt_host_limit *out) {
    rlt_host_limit cg;
    rlt_host_limit_read_vm(out);
    if (rlt_host_limit_read_cgroup(&cg, "/proc/self/mountinfo", "/proc/self/cgroup")) limit_keep_tighter(out, &cg);
}
