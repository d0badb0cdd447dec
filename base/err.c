/* err.c: the error record and the log callback (see err.h). */
#include "err.h"

#include <stdio.h>
#include <string.h>

static rlt_log_fn g_log_fn;   /* process-wide by design: set once by the host program */
static void *g_log_user;

int rlt_err_set(rlt_err *e, int status, const char *file, int line, const char *fmt, ...) {
    if (!e) return status;
    char text[sizeof e->msg - 256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    const char *base = strrchr(file, '/');
    e->status = status;
    snprintf(e->msg, sizeof e->msg, "%s [%s, %.64s:%d]", text, rlt_status_name(status), base ? base + 1 : file, line);
    return status;
}

void rlt_err_clear(rlt_err *e) {
    e->status = RLT_OK;
    e->msg[0] = '\0';
}

void rlt_err_copy(rlt_err *dst, const rlt_err *src) {
    if (dst == src) return;
    dst->status = src->status;
    memcpy(dst->msg, src->msg, sizeof dst->msg);
}

const char *rlt_strerror(int status) {
    switch (status) {
#define RLT_STATUS_TEXT_(name, code, text) case code: return text;
        RLT_STATUS_MAP(RLT_STATUS_TEXT_)
#undef RLT_STATUS_TEXT_
    }
    return "unknown status";
}

const char *rlt_status_name(int status) {
    switch (status) {
#define RLT_STATUS_NAME_(name, code, text) case code: return "RLT_" #name;
        RLT_STATUS_MAP(RLT_STATUS_NAME_)
#undef RLT_STATUS_NAME_
    }
    return "RLT_UNKNOWN";
}

const char *rlt_version_string(void) { return "0.1.0"; }

void rlt_log_set_callback(rlt_log_fn fn, void *user) {
    g_log_fn = fn;
    g_log_user = user;
}

void rlt_log(int level, const char *fmt, ...) {
    if (!g_log_fn) return;
    char text[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    g_log_fn(g_log_user, level, text);
}
