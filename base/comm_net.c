/* comm_net.c: the communicator of ranks that are processes (comm.h, rlt_comm_connect): rank 0 listens, every
 * other rank connects to it over TCP, and each collective is a star through rank 0. Rank 0 sums every rank's
 * part in rank order, chunk by chunk, exactly as the in-process mean does, so two processes give the same bits
 * as two threads. Every socket is non-blocking and every wait is a poll with the collective's deadline, so a rank
 * that never answers fails the call after the timeout and a process that ended fails it at once (its connection
 * closes); either way the comm is aborted, which closes this process's connections and so fails the others too.
 * Only host work goes through here: on GPUs NCCL does every reduction, and this carries only the agreements, the
 * NCCL unique id and the summary rows. */
#include "comm_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "mem.h"
#include "text.h"

#define NET_MAGIC 0x524c5443u /* "RLTC" */
#define NET_VERSION 1u

enum { OP_HELLO = 1, OP_AGREE, OP_REDUCE, OP_BCAST, OP_GATHER };

typedef struct net_hdr {
    uint32_t magic, op;
    int32_t rank, world;
    uint64_t n; /* the collective's size: floats, bytes, or the flag */
} net_hdr;

static const char *op_name(uint32_t op) {
    switch (op) {
    case OP_HELLO: return "the connection set-up";
    case OP_AGREE: return "an agreement";
    case OP_REDUCE: return "a gradient average";
    case OP_BCAST: return "a broadcast from rank 0";
    case OP_GATHER: return "a gather of every rank's row";
    }
    return "an unknown call";
}

static void sleep_s(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

static int set_nonblocking(int fd) {
    int fl = fcntl(fd, F_GETFL, 0);
    return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

static void set_nodelay(int fd) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static const char *me(const rlt_comm *c, char *buf, size_t cap) {
    if (c->names[c->rank][0]) snprintf(buf, cap, "rank %d (%s)", (int)c->rank, c->names[c->rank]);
    else snprintf(buf, cap, "rank %d", (int)c->rank);
    return buf;
}

/* Moves n bytes to (out) or from peer's socket by the deadline. RLT_OK, or the comm failed (timeout, the peer
 * ended, a socket error) or was aborted. */
static int net_io(rlt_comm *c, int32_t peer, void *buf, size_t n, int out, double deadline, const char *what) {
    int fd = c->fds[peer];
    char *p = buf, who[48];
    while (n > 0) {
        if (__atomic_load_n(&c->aborted, __ATOMIC_ACQUIRE)) return comm_aborted_status(c);
        ssize_t k = out ? send(fd, p, n, MSG_NOSIGNAL) : recv(fd, p, n, 0);
        if (k > 0) {
            p += k;
            n -= (size_t)k;
            continue;
        }
        if (k < 0 && errno == EINTR) continue;
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            double left = deadline - comm_now();
            if (left <= 0) {
                comm_fail(c, "%s waited %.0f s (dist.timeout_s) for %s from rank %d, which never came: that process "
                          "hangs (on its device, in an evaluation), takes longer than dist.timeout_s, or stopped "
                          "answering; the run is aborted%s", me(c, who, sizeof who), c->timeout_s, what, (int)peer,
                          comm_device_hint(c));
                return RLT_ERUNTIME;
            }
            /* At most 100 ms per poll, so that an abort from another thread is seen soon. */
            struct pollfd pf = {fd, (short)(out ? POLLOUT : POLLIN), 0};
            int ms = left > 0.1 ? 100 : (int)(left * 1000.0) + 1;
            poll(&pf, 1, ms);
            continue;
        }
        if (__atomic_load_n(&c->aborted, __ATOMIC_ACQUIRE)) return comm_aborted_status(c);
        if (k == 0 || errno == ECONNRESET || errno == EPIPE)
            comm_fail(c, "%s lost rank %d while waiting for %s: that process ended (a failure, a stop or a crash; "
                      "its own output says why)", me(c, who, sizeof who), (int)peer, what);
        else
            comm_fail(c, "%s: the connection to rank %d failed during %s: %s", me(c, who, sizeof who), (int)peer, what,
                      strerror(errno));
        return RLT_ERUNTIME;
    }
    return RLT_OK;
}

static int net_send_hdr(rlt_comm *c, int32_t peer, uint32_t op, uint64_t n, double dl, const char *what) {
    net_hdr h = {NET_MAGIC, op, c->rank, c->n, n};
    return net_io(c, peer, &h, sizeof h, 1, dl, what);
}

/* Rank 0: rank r's header for the collective op of size n; a rank in another collective fails the comm. */
static int net_recv_hdr(rlt_comm *c, int32_t r, uint32_t op, uint64_t n, uint64_t *got, double dl, const char *what) {
    net_hdr h;
    RLT_TRY(net_io(c, r, &h, sizeof h, 0, dl, what));
    if (h.magic != NET_MAGIC || h.op != op || (got == NULL && h.n != n)) {
        char who[48];
        comm_fail(c, "%s is in %s (size %llu) while rank %d is in %s (size %llu): the ranks run different configs or "
                  "versions of rltrain", me(c, who, sizeof who), op_name(op), (unsigned long long)n, (int)r,
                  op_name(h.op), (unsigned long long)h.n);
        return RLT_ERUNTIME;
    }
    if (got) *got = h.n;
    return RLT_OK;
}

int comm_net_agree(rlt_comm *c, int32_t flag, int32_t *any, const char *what) {
    double dl = comm_now() + c->timeout_s;
    uint64_t v = flag != 0;
    if (c->rank != 0) {
        RLT_TRY(net_send_hdr(c, 0, OP_AGREE, v, dl, what));
        net_hdr h;
        RLT_TRY(net_io(c, 0, &h, sizeof h, 0, dl, what));
        *any = h.n != 0;
        return RLT_OK;
    }
    for (int32_t r = 1; r < c->n; r++) {
        uint64_t f = 0;
        RLT_TRY(net_recv_hdr(c, r, OP_AGREE, 0, &f, dl, what));
        v |= f != 0;
    }
    for (int32_t r = 1; r < c->n; r++) RLT_TRY(net_send_hdr(c, r, OP_AGREE, v, dl, what));
    *any = (int32_t)v;
    return RLT_OK;
}

int comm_net_allreduce_mean(rlt_comm *c, float *x, uint64_t n) {
    static const char what[] = "the gradient average (all-reduce)";
    double dl = comm_now() + c->timeout_s;
    if (c->rank != 0) {
        /* One chunk out, its mean back: neither side ever waits on a send the other is not reading. */
        RLT_TRY(net_send_hdr(c, 0, OP_REDUCE, n, dl, what));
        for (uint64_t o = 0; o < n; o += COMM_CHUNK_FLOATS) {
            size_t m = (size_t)(n - o < COMM_CHUNK_FLOATS ? n - o : COMM_CHUNK_FLOATS);
            RLT_TRY(net_io(c, 0, x + o, m * sizeof(float), 1, dl, what));
            RLT_TRY(net_io(c, 0, x + o, m * sizeof(float), 0, dl, what));
        }
        return RLT_OK;
    }
    for (int32_t r = 1; r < c->n; r++) RLT_TRY(net_recv_hdr(c, r, OP_REDUCE, n, NULL, dl, what));
    float *sum = c->chunk, *part = c->chunk + COMM_CHUNK_FLOATS;
    const float inv = 1.0f / (float)c->n;
    for (uint64_t o = 0; o < n; o += COMM_CHUNK_FLOATS) {
        size_t m = (size_t)(n - o < COMM_CHUNK_FLOATS ? n - o : COMM_CHUNK_FLOATS);
        /* The in-process mean's order: 0 + rank 0 + rank 1 + ..., then times 1/n. */
        for (size_t j = 0; j < m; j++) sum[j] = 0.0f + x[o + j];
        for (int32_t r = 1; r < c->n; r++) {
            RLT_TRY(net_io(c, r, part, m * sizeof(float), 0, dl, what));
            for (size_t j = 0; j < m; j++) sum[j] += part[j];
        }
        for (size_t j = 0; j < m; j++) x[o + j] = sum[j] * inv;
        for (int32_t r = 1; r < c->n; r++) RLT_TRY(net_io(c, r, x + o, m * sizeof(float), 1, dl, what));
    }
    return RLT_OK;
}

int comm_net_bcast(rlt_comm *c, void *buf, uint32_t bytes, const char *what) {
    double dl = comm_now() + c->timeout_s;
    if (c->rank != 0) {
        net_hdr h;
        RLT_TRY(net_io(c, 0, &h, sizeof h, 0, dl, what));
        if (h.op != OP_BCAST || h.n != bytes) {
            char who[48];
            comm_fail(c, "%s expected %s of %u bytes, and rank 0 sent %s (size %llu): the ranks run different configs "
                      "or versions of rltrain", me(c, who, sizeof who), op_name(OP_BCAST), (unsigned)bytes,
                      op_name(h.op), (unsigned long long)h.n);
            return RLT_ERUNTIME;
        }
        return net_io(c, 0, buf, bytes, 0, dl, what);
    }
    for (int32_t r = 1; r < c->n; r++) {
        RLT_TRY(net_send_hdr(c, r, OP_BCAST, bytes, dl, what));
        RLT_TRY(net_io(c, r, buf, bytes, 1, dl, what));
    }
    return RLT_OK;
}

int comm_net_allgather(rlt_comm *c, const void *mine, uint32_t bytes, void *all, const char *what) {
    double dl = comm_now() + c->timeout_s;
    if (c->rank != 0) {
        RLT_TRY(net_send_hdr(c, 0, OP_GATHER, bytes, dl, what));
        RLT_TRY(net_io(c, 0, (void *)mine, bytes, 1, dl, what));
        return net_io(c, 0, all, (size_t)bytes * (size_t)c->n, 0, dl, what);
    }
    memmove(all, mine, bytes);
    for (int32_t r = 1; r < c->n; r++) {
        RLT_TRY(net_recv_hdr(c, r, OP_GATHER, bytes, NULL, dl, what));
        RLT_TRY(net_io(c, r, (char *)all + (size_t)r * bytes, bytes, 0, dl, what));
    }
    for (int32_t r = 1; r < c->n; r++) RLT_TRY(net_io(c, r, all, (size_t)bytes * (size_t)c->n, 1, dl, what));
    return RLT_OK;
}

void comm_net_shutdown(rlt_comm *c) {
    for (int32_t r = 0; r < c->n; r++)
        if (c->fds[r] >= 0) shutdown(c->fds[r], SHUT_RDWR);
}

void comm_net_close(rlt_comm *c) {
    for (int32_t r = 0; r < c->n; r++)
        if (c->fds[r] >= 0) {
            close(c->fds[r]);
            c->fds[r] = -1;
        }
    if (c->file[0]) unlink(c->file);
}

/* ---- connecting ------------------------------------------------------------------------------------------ */

/* host:port resolved for TCP, or RLT_ERUNTIME with the reason. */
static int net_resolve(const char *host, int32_t port, int passive, struct addrinfo **out, rlt_err *e) {
    char sport[16];
    snprintf(sport, sizeof sport, "%d", (int)port);
    struct addrinfo hints;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = passive ? AI_PASSIVE : 0;
    int rc = getaddrinfo(host, sport, &hints, out);
    if (rc != 0)
        RLT_FAIL(e, RLT_ERUNTIME, "data-parallel rendezvous: cannot resolve rank 0's address '%s': %s; set MASTER_ADDR "
                 "(or dist.rendezvous: tcp://HOST:PORT) to rank 0's host", host, gai_strerror(rc));
    return RLT_OK;
}

static int is_loopback(const struct sockaddr *sa) {
    if (sa->sa_family == AF_INET) return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
    if (sa->sa_family == AF_INET6) {
        static const unsigned char lo[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
        return memcmp(&((const struct sockaddr_in6 *)sa)->sin6_addr, lo, 16) == 0;
    }
    return 0;
}

/* Rank 0's listening socket: on rank 0's address when it is a loopback one (so a test never listens beyond its
 * host), else on every address of this host. *port becomes the port taken when it was 0. */
static int net_listen(rlt_comm *c, const char *host, int32_t *port, int *fd_out, rlt_err *e) {
    struct addrinfo *ai = NULL;
    RLT_TRY(net_resolve(host, *port, 1, &ai, e));
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    socklen_t len = (socklen_t)ai->ai_addrlen;
    memcpy(&ss, ai->ai_addr, ai->ai_addrlen);
    int family = ai->ai_family;
    freeaddrinfo(ai);
    if (!is_loopback((struct sockaddr *)&ss)) {
        if (family == AF_INET) ((struct sockaddr_in *)&ss)->sin_addr.s_addr = htonl(INADDR_ANY);
        else ((struct sockaddr_in6 *)&ss)->sin6_addr = in6addr_any;
    }
    int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(fd, (struct sockaddr *)&ss, len) != 0 || listen(fd, RLT_COMM_MAX_RANKS) != 0 || set_nonblocking(fd) != 0) {
        int err = errno;
        if (fd >= 0) close(fd);
        RLT_FAIL(e, RLT_ERUNTIME, "rank 0 of %d cannot listen on %s:%d for the other ranks: %s; choose a free port "
                 "(MASTER_PORT, or dist.rendezvous: tcp://HOST:PORT)", (int)c->n, host, (int)*port, strerror(err));
    }
    if (*port == 0) {
        getsockname(fd, (struct sockaddr *)&ss, &len);
        *port = ntohs(family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port : ((struct sockaddr_in6 *)&ss)->sin6_port);
    }
    *fd_out = fd;
    return RLT_OK;
}

/* Rank 0: accepts the other ranks until each said hello, or the deadline. A connection that does not speak the
 * protocol is dropped (another program on the port); a rank that comes twice, or of another world size, fails. */
static int net_accept_all(rlt_comm *c, int lfd, const char *host, int32_t port, rlt_err *e) {
    double dl = comm_now() + c->timeout_s;
    int32_t have = 1;
    while (have < c->n) {
        double left = dl - comm_now();
        if (left <= 0) {
            char missing[160] = "";
            rlt_text m = {missing, sizeof missing, 0};
            for (int32_t r = 1, k = 0; r < c->n; r++)
                if (c->fds[r] < 0) rlt_text_add(&m, "%s%d", k++ ? ", " : "", (int)r);
            RLT_FAIL(e, RLT_ERUNTIME, "rank 0 waited %.0f s (dist.timeout_s) for rank%s %s of %d to connect to %s:%d: "
                     "they did not start, use another MASTER_ADDR/MASTER_PORT or rendezvous file, or cannot reach this "
                     "host", c->timeout_s, c->n - have > 1 ? "s" : "", missing, (int)c->n, host, (int)port);
        }
        struct pollfd pf = {lfd, POLLIN, 0};
        if (poll(&pf, 1, left > 0.2 ? 200 : (int)(left * 1000.0) + 1) <= 0) continue;
        int fd = accept(lfd, NULL, NULL);
        if (fd < 0) continue;
        set_nonblocking(fd);
        set_nodelay(fd);
        /* The hello within 5 s of connecting (or by the deadline). */
        net_hdr h;
        memset(&h, 0, sizeof h);
        double hdl = comm_now() + 5.0 < dl ? comm_now() + 5.0 : dl;
        size_t got = 0;
        while (got < sizeof h && comm_now() < hdl) {
            ssize_t k = recv(fd, (char *)&h + got, sizeof h - got, 0);
            if (k > 0) got += (size_t)k;
            else if (k == 0) break;
            else if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
                struct pollfd p2 = {fd, POLLIN, 0};
                poll(&p2, 1, 50);
            } else break;
        }
        if (got < sizeof h || h.magic != NET_MAGIC || h.op != OP_HELLO || h.n != NET_VERSION) {
            close(fd);
            continue;
        }
        if (h.world != c->n || h.rank < 1 || h.rank >= c->n || c->fds[h.rank] >= 0) {
            close(fd);
            RLT_FAIL(e, RLT_ERUNTIME, "rank 0 of %d ranks was reached by a process that says it is rank %d of %d%s: the "
                     "launcher's variables (RANK/WORLD_SIZE, SLURM_PROCID/SLURM_NTASKS, OMPI_COMM_WORLD_*) disagree "
                     "between the processes, or two runs share MASTER_PORT", (int)c->n, (int)h.rank, (int)h.world,
                     h.rank >= 1 && h.rank < c->n && c->fds[h.rank] >= 0 ? " a second time" : "");
        }
        c->fds[h.rank] = fd;
        have++;
    }
    for (int32_t r = 1; r < c->n; r++) {
        net_hdr w = {NET_MAGIC, OP_HELLO, 0, c->n, NET_VERSION};
        if (net_io(c, r, &w, sizeof w, 1, dl, "the connection set-up") != RLT_OK)
            RLT_FAIL(e, RLT_ERUNTIME, "%s", c->msg);
    }
    return RLT_OK;
}

/* "host port" from the rendezvous file, when rank 0 has written it. */
static int net_read_file(const char *path, char *host, size_t cap, int32_t *port) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[400] = "";
    int ok = fgets(line, sizeof line, f) != NULL;
    fclose(f);
    char *sp = ok ? strrchr(line, ' ') : NULL;
    if (!sp) return 0;
    *sp = '\0';
    long p = strtol(sp + 1, NULL, 10);
    if (p <= 0 || p > 65535 || strlen(line) >= cap) return 0;
    snprintf(host, cap, "%s", line);
    *port = (int32_t)p;
    return 1;
}

static int net_write_file(rlt_comm *c, const char *path, const char *host, int32_t port, rlt_err *e) {
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    int ok = f && fprintf(f, "%s %d\n", host, (int)port) > 0;
    if (f) ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
        int err = errno;
        unlink(tmp);
        RLT_FAIL(e, RLT_ERUNTIME, "rank 0 cannot write the rendezvous file %s: %s; dist.rendezvous: file:PATH needs a "
                 "directory every rank can see and rank 0 can write", path, strerror(err));
    }
    snprintf(c->file, sizeof c->file, "%s", path);
    return RLT_OK;
}

/* One non-blocking connect attempt by the deadline: the socket, or -1 (refused, unreachable, too slow). */
static int net_try_connect(const char *host, int32_t port, double dl, rlt_err *e, int *resolve_failed) {
    struct addrinfo *ai = NULL;
    if (net_resolve(host, port, 0, &ai, e) != RLT_OK) {
        *resolve_failed = 1;
        return -1;
    }
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && set_nonblocking(fd) == 0) {
        int rc = connect(fd, ai->ai_addr, ai->ai_addrlen);
        if (rc != 0 && errno == EINPROGRESS) {
            double left = dl - comm_now();
            struct pollfd pf = {fd, POLLOUT, 0};
            int err = 0;
            socklen_t el = sizeof err;
            if (left > 0 && poll(&pf, 1, left > 1.0 ? 1000 : (int)(left * 1000.0) + 1) == 1 &&
                getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) == 0 && err == 0)
                rc = 0;
        }
        if (rc == 0) {
            freeaddrinfo(ai);
            set_nodelay(fd);
            return fd;
        }
    }
    if (fd >= 0) close(fd);
    freeaddrinfo(ai);
    return -1;
}

/* Another rank: connects to rank 0 (read from the rendezvous file when there is one), says hello and waits for
 * rank 0's answer, retrying until the deadline: rank 0 may start later than this process. */
static int net_join(rlt_comm *c, const rlt_comm_net *d, rlt_err *e) {
    double dl = comm_now() + c->timeout_s;
    char host[256];
    int32_t port = d->port;
    snprintf(host, sizeof host, "%s", d->host);
    int tried = 0;
    while (comm_now() < dl) {
        if (d->file[0] && !net_read_file(d->file, host, sizeof host, &port)) {
            sleep_s(0.05);
            continue;
        }
        int resolve_failed = 0;
        int fd = net_try_connect(host, port, dl, e, &resolve_failed);
        if (resolve_failed) return e->status;
        tried = 1;
        if (fd < 0) {
            sleep_s(0.05);
            continue;
        }
        c->fds[0] = fd;
        net_hdr h = {NET_MAGIC, OP_HELLO, c->rank, c->n, NET_VERSION};
        int rc = net_io(c, 0, &h, sizeof h, 1, dl, "the connection set-up");
        if (rc == RLT_OK) rc = net_io(c, 0, &h, sizeof h, 0, dl, "the connection set-up");
        if (rc != RLT_OK) RLT_FAIL(e, RLT_ERUNTIME, "%s", c->msg);
        if (h.magic != NET_MAGIC || h.op != OP_HELLO || h.world != c->n)
            RLT_FAIL(e, RLT_ERUNTIME, "rank %d reached %s:%d, but what answered is not rank 0 of this run of %d ranks",
                     (int)c->rank, host, (int)port, (int)c->n);
        return RLT_OK;
    }
    if (d->file[0] && !tried)
        RLT_FAIL(e, RLT_ERUNTIME, "rank %d of %d waited %.0f s (dist.timeout_s) for rank 0 to write the rendezvous file "
                 "%s: rank 0 did not start, or sees another file system", (int)c->rank, (int)c->n, c->timeout_s, d->file);
    RLT_FAIL(e, RLT_ERUNTIME, "rank %d of %d waited %.0f s (dist.timeout_s) to reach rank 0 at %s:%d: rank 0 did not "
             "start, listens elsewhere (MASTER_ADDR/MASTER_PORT), or a firewall blocks the port", (int)c->rank, (int)c->n,
             c->timeout_s, host, (int)port);
}

int rlt_comm_connect(const rlt_comm_net *d, rlt_comm **out, rlt_err *e) {
    *out = NULL;
    if (!d || d->world < 2 || d->world > RLT_COMM_MAX_RANKS || d->rank < 0 || d->rank >= d->world)
        RLT_FAIL(e, RLT_EINVAL, "data-parallel ranks as processes: rank %d of %d ranks (2 .. %d ranks)", d ? (int)d->rank : -1,
                 d ? (int)d->world : 0, RLT_COMM_MAX_RANKS);
    if (!d->file[0] && (d->port <= 0 || d->port > 65535 || !d->host[0]))
        RLT_FAIL(e, RLT_EINVAL, "data-parallel ranks as processes: rank 0's address is '%s', port %d: set MASTER_ADDR and "
                 "MASTER_PORT, or dist.rendezvous", d->host, (int)d->port);
    rlt_comm *c = rlt_comm_create(d->world);
    if (!c) RLT_FAIL(e, RLT_ENOMEM, "out of host memory for the communicator of %d ranks", (int)d->world);
    c->net = 1;
    c->rank = d->rank;
    rlt_comm_set_timeout(c, d->timeout_s);
    int rc;
    if (d->rank == 0) {
        c->chunk = rlt_mem_alloc(2 * COMM_CHUNK_FLOATS * sizeof(float), 64);
        char host[256];
        snprintf(host, sizeof host, "%s", d->host);
        if (!host[0] && gethostname(host, sizeof host) != 0) snprintf(host, sizeof host, "localhost");
        int32_t port = d->port;
        int lfd = -1;
        rc = c->chunk ? net_listen(c, host, &port, &lfd, e)
                      : rlt_err_set(e, RLT_ENOMEM, __FILE__, __LINE__, "out of host memory for the communicator");
        if (rc == RLT_OK && d->file[0]) rc = net_write_file(c, d->file, host, port, e);
        if (rc == RLT_OK) rc = net_accept_all(c, lfd, host, port, e);
        if (lfd >= 0) close(lfd);
    } else {
        rc = net_join(c, d, e);
    }
    if (rc != RLT_OK) {
        rlt_comm_free(c);
        return rc;
    }
    *out = c;
    return RLT_OK;
}
