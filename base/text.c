/* text.c: see text.h. */
#include "text.h"

#include <stdarg.h>
#include <stdio.h>

void rlt_text_add(rlt_text *t, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *dst = t->len < t->cap ? t->buf + t->len : NULL;
    int n = vsnprintf(dst, dst ? t->cap - t->len : 0, fmt, ap);
    va_end(ap);
    if (n > 0) t->len += (size_t)n;
}
