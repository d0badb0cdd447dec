/* outputs.c: see outputs.h. Only system calls and caller-owned buffers: no stdio FILE, no malloc, so
 * writing metrics during training keeps the no-allocation promise. */
#include "outputs.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int out_mkdirs(rlt_err *e, const char *path) {
    char p[512];
    if (snprintf(p, sizeof p, "%s", path) >= (int)sizeof p) RLT_FAIL(e, RLT_EIO, "path too long: %s", path);
    for (char *s = p + 1; *s; s++) {
        if (*s != '/') continue;
        *s = '\0';
        if (mkdir(p, 0755) != 0 && errno != EEXIST) RLT_FAIL(e, RLT_EIO, "cannot create directory %s: %s", p, strerror(errno));
        *s = '/';
    }
    if (mkdir(p, 0755) != 0 && errno != EEXIST) RLT_FAIL(e, RLT_EIO, "cannot create directory %s: %s", p, strerror(errno));
    return RLT_OK;
}

int out_fsync_dir(rlt_err *e, const char *path) {
    char p[512];
    snprintf(p, sizeof p, "%s", path);
    int fd = open(dirname(p), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) RLT_FAIL(e, RLT_EIO, "cannot open the directory of %s: %s", path, strerror(errno));
    int rc = fsync(fd);
    close(fd);
    if (rc != 0 && errno != EINVAL) RLT_FAIL(e, RLT_EIO, "fsync of the directory of %s failed: %s", path, strerror(errno));
    return RLT_OK;
}

static int write_all(int fd, const void *data, size_t len) {
    const char *p = data;
    while (len) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int out_write_atomic(rlt_err *e, const char *path, const void *data, size_t len) {
    char tmp[520];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) RLT_FAIL(e, RLT_EIO, "cannot create %s: %s", tmp, strerror(errno));
    if (write_all(fd, data, len) != 0 || fsync(fd) != 0) {
        int err = errno;
        close(fd);
        unlink(tmp);
        RLT_FAIL(e, RLT_EIO, "cannot write %s: %s", tmp, strerror(err));
    }
    close(fd);
    if (rename(tmp, path) != 0) {
        int err = errno;
        unlink(tmp);
        RLT_FAIL(e, RLT_EIO, "cannot rename %s to %s: %s", tmp, path, strerror(err));
    }
    return out_fsync_dir(e, path);
}

int out_writer_open(out_writer *w, rlt_err *e, const char *path) {
    w->used = 0;
    snprintf(w->path, sizeof w->path, "%s", path);
    snprintf(w->tmp_path, sizeof w->tmp_path, "%s.tmp", path);
    w->fd = open(w->tmp_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w->fd < 0) RLT_FAIL(e, RLT_EIO, "cannot create %s: %s", w->tmp_path, strerror(errno));
    return RLT_OK;
}

int out_writer_flush(out_writer *w, rlt_err *e) {
    if (w->fd < 0) return RLT_OK;
    if (w->used && write_all(w->fd, w->buf, w->used) != 0) RLT_FAIL(e, RLT_EIO, "cannot write %s: %s", w->tmp_path, strerror(errno));
    w->used = 0;
    return RLT_OK;
}

int out_writer_printf(out_writer *w, rlt_err *e, const char *fmt, ...) {
    for (int attempt = 0; attempt < 2; attempt++) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(w->buf + w->used, sizeof w->buf - w->used, fmt, ap);
        va_end(ap);
        if (n < 0) RLT_FAIL(e, RLT_ERUNTIME, "formatting a line of %s failed", w->path);
        if ((size_t)n < sizeof w->buf - w->used) {
            w->used += (size_t)n;
            return RLT_OK;
        }
        RLT_TRY(out_writer_flush(w, e));
    }
    RLT_FAIL(e, RLT_ERUNTIME, "a line of %s is longer than its buffer", w->path);
}

int out_writer_close(out_writer *w, rlt_err *e) {
    if (w->fd < 0) return RLT_OK;
    int rc = out_writer_flush(w, e);
    if (rc == RLT_OK && fsync(w->fd) != 0) rc = rlt_err_set(e, RLT_EIO, __FILE__, __LINE__, "fsync %s: %s", w->tmp_path, strerror(errno));
    close(w->fd);
    w->fd = -1;
    if (rc != RLT_OK) return rc;
    if (rename(w->tmp_path, w->path) != 0) RLT_FAIL(e, RLT_EIO, "cannot rename %s: %s", w->tmp_path, strerror(errno));
    return out_fsync_dir(e, w->path);
}
