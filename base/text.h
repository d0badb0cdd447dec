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

#endif
