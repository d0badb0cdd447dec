/* outputs.h: run outputs without heap allocation: directories, atomic whole-file writes (temporary file,
 * fsync, rename, directory fsync), a buffered append-only text writer over a file descriptor, and a
 * directory listing. */
#ifndef RLT_OUTPUTS_H
#define RLT_OUTPUTS_H

#include <stddef.h>
#include "err.h"

/* mkdir -p. */
int out_mkdirs(rlt_err *e, const char *path);
int out_write_atomic(rlt_err *e, const char *path, const void *data, size_t len);
/* Fsyncs the directory holding path, so a rename in it survives a crash. */
int out_fsync_dir(rlt_err *e, const char *path);

/* Rows go to the file as they are completed (out_writer_flush after each row): a run killed at any moment
 * keeps every row it finished, and out_writer_sync makes them durable (at each checkpoint). */
typedef struct out_writer {
    int fd;
    size_t used;
    char path[512];
    char buf[16384];
} out_writer;

/* Opens path for writing: truncated (append 0) or to add to its end (append 1, created if missing). Anything
 * but a regular file at path (a FIFO, a device) is refused with RLT_EIO, never waited on. */
int out_writer_open(out_writer *w, rlt_err *e, const char *path, int append);
int out_writer_printf(out_writer *w, rlt_err *e, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Writes what is buffered to the file. */
int out_writer_flush(out_writer *w, rlt_err *e);
/* Flushes and fsyncs. */
int out_writer_sync(out_writer *w, rlt_err *e);
/* Flushes, fsyncs and closes. */
int out_writer_close(out_writer *w, rlt_err *e);

/* RLT_EIO with a message unless fd is a regular file (it is then made blocking again: opened O_NONBLOCK so
 * that a FIFO at the path could not block the open). */
int out_check_regular(rlt_err *e, int fd, const char *path);

/* One owner per out_dir: an exclusive flock on out_dir/.rltrain.lock, taken before a run changes anything in
 * the directory and held until out_unlock_dir (the trainer's or seed group's free). The kernel drops it when
 * the process ends, kill -9 included, so it is never stale. Held already (*lock_fd >= 0): RLT_OK. Held by
 * another process, or by another handle of this one: RLT_EBUSY naming the owner's pid, nothing changed. */
#define OUT_LOCK_NAME ".rltrain.lock"
int out_lock_dir(rlt_err *e, const char *dir, int *lock_fd);
void out_unlock_dir(int *lock_fd);

/* Calls fn for each entry of directory `dir` (not "." or ".."), without allocating (raw getdents64 into a
 * stack buffer; opendir would allocate during a run). fn returns nonzero to stop. A missing directory has
 * no entries. */
int out_dir_each(rlt_err *e, const char *dir, int (*fn)(void *user, const char *name), void *user);

#endif
