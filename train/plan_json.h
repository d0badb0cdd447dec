/* plan_json.h: the plan and its fit report as the JSON document of `rltrain plan --json`
 * (rlt_plan_fit_json); the schema, its version and what stays stable are in docs/plan_json.md. */
#ifndef RLT_PLAN_JSON_H
#define RLT_PLAN_JSON_H

#include <stddef.h>

#include "config.h"
#include "plan.h"

/* Writes the document for the configured plan p (with its summary s), the planner's answers f and the
 * config they came from into buf (the snprintf contract: always NUL-terminated when cap > 0; returns the
 * length the whole document needs). Allocates nothing. */
size_t plan_json_format(const rlt_plan *p, const rlt_plan_summary *s, const rlt_fit_report *f, const rlt_config *cfg,
                        char *buf, size_t cap);

#endif
