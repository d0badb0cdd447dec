/* launch.c: dist.rendezvous read into the address where the processes of a launched data-parallel run meet
 * (launch.h). The launchers' own variables (rank, world size, local rank) are read by the CLI, which hands them to
 * rlt_config_set_launch; this reads only what says where rank 0 listens. */
#include "launch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "HOST:PORT" (the port after the last colon; [v6]:PORT keeps its brackets out) into host and *port. */
static int launch_host_port(const char *s, char *host, size_t cap, int32_t *port) {
    const char *colon = strrchr(s, ':');
    if (!colon || colon == s) return -1;
    char *end = NULL;
    long p = strtol(colon + 1, &end, 10);
    if (!end || *end || p < 1 || p > 65535) return -1;
    size_t n = (size_t)(colon - s);
    if (s[0] == '[' && n >= 2 && s[n - 1] == ']') s++, n -= 2;
    if (n == 0 || n >= cap) return -1;
    memcpy(host, s, n);
    host[n] = '\0';
    *port = (int32_t)p;
    return 0;
}

static const char *env_or(const char *name, const char *dflt) {
    const char *v = getenv(name);
    return v && *v ? v : dflt;
}

int launch_rendezvous(const rlt_config *cfg, rlt_comm_net *out, rlt_err *e) {
    memset(out, 0, sizeof *out);
    out->rank = cfg->launch.rank;
    out->world = cfg->launch.world;
    out->timeout_s = cfg->dist.timeout_s;
    const char *rv = cfg->dist.rendezvous;
    char where[400];
    if (strncmp(rv, "file:", 5) == 0) {
        if (!rv[5] || strlen(rv + 5) >= sizeof out->file)
            RLT_FAIL(e, RLT_ECONFIG, "%s: '%s' names no file; write file:/a/shared/dir/NAME",
                     config_key_where(cfg, "dist.rendezvous", where, sizeof where), rv);
        snprintf(out->file, sizeof out->file, "%s", rv + 5);
        snprintf(out->host, sizeof out->host, "%s", env_or("MASTER_ADDR", ""));
        return RLT_OK;
    }
    if (strncmp(rv, "tcp://", 6) == 0) {
        if (launch_host_port(rv + 6, out->host, sizeof out->host, &out->port) != 0)
            RLT_FAIL(e, RLT_ECONFIG, "%s: '%s' is not tcp://HOST:PORT (a port 1 .. 65535)",
                     config_key_where(cfg, "dist.rendezvous", where, sizeof where), rv);
        return RLT_OK;
    }
    if (strcmp(rv, "env") != 0)
        RLT_FAIL(e, RLT_ECONFIG, "%s: '%s' is none of env, tcp://HOST:PORT, file:PATH",
                 config_key_where(cfg, "dist.rendezvous", where, sizeof where), rv);
    const char *addr = env_or("MASTER_ADDR", env_or("SLURM_LAUNCH_NODE_IPADDR", NULL));
    const char *port = env_or("MASTER_PORT", NULL);
    long p = 0;
    if (port) {
        char *end = NULL;
        p = strtol(port, &end, 10);
        if (!end || *end || p < 1 || p > 65535)
            RLT_FAIL(e, RLT_ECONFIG, "%s: env, and MASTER_PORT is '%s', not a port (1 .. 65535)",
                     config_key_where(cfg, "dist.rendezvous", where, sizeof where), port);
        /* torchrun's agent serves its own store on MASTER_PORT: under torchrun (which sets TORCHELASTIC_RUN_ID in
         * every worker) the next port is ours. */
        if (getenv("TORCHELASTIC_RUN_ID") || strcmp(env_or("TORCHELASTIC_USE_AGENT_STORE", ""), "True") == 0)
            p = p < 65535 ? p + 1 : p - 1;
    } else if (getenv("SLURM_JOB_ID")) {
        /* One port per Slurm job, the same on every task: 20000 .. 29999. */
        p = 20000 + strtol(getenv("SLURM_JOB_ID"), NULL, 10) % 10000;
    }
    if (!addr || p == 0)
        RLT_FAIL(e, RLT_ECONFIG, "%s: env, but %s is not set: this process is rank %d of %d and must learn where rank 0 "
                 "listens; set MASTER_ADDR and MASTER_PORT (torchrun sets both), or dist.rendezvous: tcp://HOST:PORT or "
                 "file:/a/shared/dir/NAME", config_key_where(cfg, "dist.rendezvous", where, sizeof where),
                 !addr ? "MASTER_ADDR" : "MASTER_PORT", (int)cfg->launch.rank, (int)cfg->launch.world);
    snprintf(out->host, sizeof out->host, "%s", addr);
    out->port = (int32_t)p;
    return RLT_OK;
}
