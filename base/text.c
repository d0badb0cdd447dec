/* text.c: see text.h. */
#include "text.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

void rlt_text_add(rlt_text *t, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *dst = t->len < t->cap ? t->buf + t->len : NULL;
    int n = vsnprintf(dst, dst ? t->cap - t->len : 0, fmt, ap);
    va_end(ap);
    if (n > 0) t->len += (size_t)n;
}

int rlt_text_tmp_path(char *dst, size_t cap, const char *path) {
    static unsigned long counter; /* atomically: seed-group members save from their own threads */
    unsigned long n = __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
    return snprintf(dst, cap, "%s.%ld.%lu.tmp", path, (long)getpid(), n);
}

/* Skips one run of digits; NULL when there is none. */
static const char *skip_digits(const char *s) {
    if (!isdigit((unsigned char)*s)) return NULL;
    while (isdigit((unsigned char)*s)) s++;
    return s;
}

int rlt_text_is_tmp_of(const char *name, const char *base) {
    size_t n = strlen(base);
    if (strncmp(name, base, n) != 0) return 0;
    const char *s = name + n;
    if (!strcmp(s, ".tmp")) return 1;
    if (*s++ != '.' || !(s = skip_digits(s)) || *s++ != '.' || !(s = skip_digits(s))) return 0;
    return !strcmp(s, ".tmp");
}
