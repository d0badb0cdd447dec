/* outputs.c: see outputs.h. Only system calls and caller-owned buffers: no stdio FILE, no malloc, so
 * writing metrics during training keeps the no-allocation promise. */
#include "outputs.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "text.h"

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
    char tmp[560];
    if (rlt_text_tmp_path(tmp, sizeof tmp, path) >= (int)sizeof tmp) RLT_FAIL(e, RLT_EIO, "path too long: %s", path);
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

int out_check_regular(rlt_err *e, int fd, const char *path) {
    struct stat st;
    if (fstat(fd, &st) != 0) RLT_FAIL(e, RLT_EIO, "cannot stat %s: %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode))
        RLT_FAIL(e, RLT_EIO, "%s is not a regular file (a FIFO, a device, a socket or a directory), which a run would "
                 "block on or could not write whole; remove it or choose another out_dir", path);
    /* The descriptor was opened with O_NONBLOCK only to get this far: regular files ignore the flag. */
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    return RLT_OK;
}

int out_writer_open(out_writer *w, rlt_err *e, const char *path, int append) {
    w->used = 0;
    snprintf(w->path, sizeof w->path, "%s", path);
    /* O_NONBLOCK: a FIFO planted at the path would block the open (no reader) or every write (a slow one). */
    w->fd = open(path, O_WRONLY | O_CREAT | O_NONBLOCK | O_CLOEXEC | (append ? O_APPEND : O_TRUNC), 0644);
    if (w->fd < 0) RLT_FAIL(e, RLT_EIO, "cannot %s %s: %s", append ? "open" : "create", path, strerror(errno));
    if (out_check_regular(e, w->fd, path) != RLT_OK) {
        close(w->fd);
        w->fd = -1;
        return RLT_EIO;
    }
    return RLT_OK;
}

int out_writer_flush(out_writer *w, rlt_err *e) {
    if (w->fd < 0) return RLT_OK;
    if (w->used && write_all(w->fd, w->buf, w->used) != 0) RLT_FAIL(e, RLT_EIO, "cannot write %s: %s", w->path, strerror(errno));
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

int out_writer_sync(out_writer *w, rlt_err *e) {
    if (w->fd < 0) return RLT_OK;
    RLT_TRY(out_writer_flush(w, e));
    if (fsync(w->fd) != 0) RLT_FAIL(e, RLT_EIO, "fsync %s: %s", w->path, strerror(errno));
    return RLT_OK;
}

int out_writer_close(out_writer *w, rlt_err *e) {
    if (w->fd < 0) return RLT_OK;
    int rc = out_writer_sync(w, e);
    close(w->fd);
    w->fd = -1;
    return rc;
}

/* getdents64's record; glibc declares no type for it before 2.30. */
struct out_dirent64 {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

int out_dir_each(rlt_err *e, const char *dir, int (*fn)(void *user, const char *name), void *user) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) return RLT_OK;
        RLT_FAIL(e, RLT_EIO, "cannot open the directory %s: %s", dir, strerror(errno));
    }
    _Alignas(8) char buf[4096];
    for (;;) {
        long n = syscall(SYS_getdents64, fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            int err = errno;
            close(fd);
            RLT_FAIL(e, RLT_EIO, "cannot list the directory %s: %s", dir, strerror(err));
        }
        if (n == 0) break;
        for (long off = 0; off < n;) {
            const struct out_dirent64 *d = (const struct out_dirent64 *)(const void *)(buf + off);
            off += d->d_reclen;
            if (!strcmp(d->d_name, ".") || !strcmp(d->d_name, "..")) continue;
            if (fn(user, d->d_name)) {
                close(fd);
                return RLT_OK;
            }
        }
    }
    close(fd);
    return RLT_OK;
}

int out_lock_dir(rlt_err *e, const char *dir, int *lock_fd) {
    if (*lock_fd >= 0) return RLT_OK;
    char path[600];
    if (snprintf(path, sizeof path, "%s/" OUT_LOCK_NAME, dir) >= (int)sizeof path)
        RLT_FAIL(e, RLT_EIO, "path too long: %s", dir);
    /* O_NOFOLLOW and O_NONBLOCK: a link or a FIFO planted as the lock file is refused, not followed or waited on. */
    int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
    if (fd < 0) RLT_FAIL(e, RLT_EIO, "cannot open the lock file %s: %s", path, strerror(errno));
    if (out_check_regular(e, fd, path) != RLT_OK) {
        close(fd);
        return RLT_EIO;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int err = errno;
        char pid[24] = "";
        ssize_t n = pread(fd, pid, sizeof pid - 1, 0);
        close(fd);
        if (err != EWOULDBLOCK) RLT_FAIL(e, RLT_EIO, "cannot lock %s: %s", path, strerror(err));
        pid[n > 0 ? n : 0] = '\0';
        pid[strcspn(pid, "\n")] = '\0';
        RLT_FAIL(e, RLT_EBUSY, "'%s' belongs to a live run (process %s holds %s): one run at a time writes an "
                 "out_dir; wait for that run to end (or stop it: it then writes its outputs and can be resumed), or "
                 "choose another out_dir. Nothing was changed", dir, pid[0] ? pid : "of unknown pid", path);
    }
    /* The owner's pid, for the message of a refused run. The lock is the flock, which the kernel drops when the
     * process ends however it ends: a stale pid in the file never blocks anyone. */
    char text[24];
    int len = snprintf(text, sizeof text, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, text, (size_t)len, 0) != len)
        rlt_log(RLT_LOG_WARN, "could not write the pid into %s: %s (the lock holds anyway)", path, strerror(errno));
    *lock_fd = fd;
    return RLT_OK;
}

void out_unlock_dir(int *lock_fd) {
    if (*lock_fd < 0) return;
    close(*lock_fd); /* closing the last descriptor releases the flock */
    *lock_fd = -1;
}
