/* err.h: the error record every handle carries (SQLite's errmsg idea) and the check macros that fill it.
 * A failure records status, file:line of the failing statement, a message and, where we know one, a hint
 * that tells the user what to change. */
#ifndef RLT_ERR_H
#define RLT_ERR_H

#include <stdarg.h>
#include "rltrain.h"

typedef struct rlt_err {
    int status;
    char msg[2048];
} rlt_err;

/* Records the error (printf-style message) and returns status, so `return rlt_err_set(...)` reads well. */
int rlt_err_set(rlt_err *e, int status, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
void rlt_err_clear(rlt_err *e);
void rlt_err_copy(rlt_err *dst, const rlt_err *src);

#define RLT_FAIL(e, status, ...) return rlt_err_set((e), (status), __FILE__, __LINE__, __VA_ARGS__)
#define RLT_TRY(expr)                      \
    do {                                   \
        int rlt_rc_ = (expr);              \
        if (rlt_rc_ != RLT_OK) return rlt_rc_; \
    } while (0)

/* Library logging, routed to the callback set with rlt_log_set_callback. */
void rlt_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
