/* text.h: appending formatted text to a caller's buffer, counting what would be needed past its end (the
 * snprintf contract, extended over many appends). Used by the plan table and the config dump. */
#ifndef RLT_TEXT_H
#define RLT_TEXT_H

#include <stddef.h>

typedef struct rlt_text {
    char *buf;
    size_t cap, len; /* len may exceed cap: then buf holds the first cap - 1 bytes */
} rlt_text;

void rlt_text_add(rlt_text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The temporary name a save writes before its rename: "<path>.<pid>.<n>.tmp", with n counting this process's
 * temporary names. Two processes (or two saves of one process) never share one, so none can truncate or
 * rename another's file. Returns what snprintf returns (the length needed). */
int rlt_text_tmp_path(char *dst, size_t cap, const char *path);
/* 1 when name ends like a name rlt_text_tmp_path makes of `base` (base followed by ".<digits>.<digits>.tmp"),
 * or is base followed by ".tmp" (the one temporary name of earlier versions). */
int rlt_text_is_tmp_of(const char *name, const char *base);

#endif
