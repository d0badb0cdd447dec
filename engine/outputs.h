/* outputs.h: run outputs without heap allocation: directories, atomic whole-file writes (temporary file,
 * fsync, rename, directory fsync) and a buffered append-only text writer over a file descriptor. */
#ifndef RLT_OUTPUTS_H
#define RLT_OUTPUTS_H

#include <stddef.h>
#include "err.h"

/* mkdir -p. */
int out_mkdirs(rlt_err *e, const char *path);
int out_write_atomic(rlt_err *e, const char *path, const void *data, size_t len);
/* Fsyncs the directory holding path, so a rename in it survives a crash. */
int out_fsync_dir(rlt_err *e, const char *path);

typedef struct out_writer {
    int fd;
    size_t used;
    char path[512];     /* the final name */
    char tmp_path[520]; /* written here, renamed at close */
    char buf[16384];
} out_writer;

int out_writer_open(out_writer *w, rlt_err *e, const char *path);
int out_writer_printf(out_writer *w, rlt_err *e, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int out_writer_flush(out_writer *w, rlt_err *e);
/* Flushes, fsyncs and renames to the final name. */
int out_writer_close(out_writer *w, rlt_err *e);

#endif
