/* config.c: the public configuration API. YAML files, strings and --set overrides are read with libyaml's
 * event API into a copy of the config, checked key by key against the schema table (config_schema.c),
 * and committed only when the whole input is good, so a failed load leaves the config as it was. Every
 * error names FILE:LINE:COLUMN, the key, what is wrong and what to write instead. */
#include "config.h"
#include "text.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#include "config_conv.h"
#include "config_inputs.h"
#include "config_schema.h"
#include "mem.h"

/* A config is at most section: key: [list of mappings] (network.conv); deeper nesting is refused before the
 * reader (which recurses once per mapping level) sees it, so a hostile file cannot run it out of stack. */
#define CFG_MAX_DEPTH 8
#define CFG_MAX_PATH 200

/* Where the text came from, for messages. */
typedef struct cfg_src {
    const char *name;          /* file path, string name, or "--set key=value" */
    const unsigned char *text;
    size_t len;
    size_t col_offset;         /* added to columns of the first line: a --set value starts after "key=" */
} cfg_src;

typedef struct cfg_reader {
    yaml_parser_t parser;
    const cfg_src *src;
    rlt_config *dst;           /* the copy being filled */
    rlt_err *e;
    int leaf_line[CFG_MAX_KEYS];    /* 1-based line where each key was set; 0 = not yet */
    int section_line[CFG_MAX_KEYS]; /* the same for sections, indexed by their first row */
    int n_leaves;                   /* keys set by this input */
    int population_seen;            /* line of this input's population mapping; 0 = none yet */
    int population_line[RLT_CFG_POP_KEYS]; /* line where this input set each population key; 0 = not yet */
} cfg_reader;

/* ---- messages ---------------------------------------------------------------------------------------- */

static int report_at(rlt_err *e, int src_line, const cfg_src *src, yaml_mark_t m, const char *key, const char *what,
                     const char *hint) {
    size_t line = m.line + 1, col = m.column + 1 + (m.line == 0 ? src->col_offset : 0);
    if (key)
        return rlt_err_set(e, RLT_ECONFIG, __FILE__, src_line, "%.300s:%zu:%zu: key '%s': %s; %s", src->name, line, col,
                           key, what, hint);
    return rlt_err_set(e, RLT_ECONFIG, __FILE__, src_line, "%.300s:%zu:%zu: %s; %s", src->name, line, col, what, hint);
}
#define REPORT(e, src, mark, key, what, hint) report_at((e), __LINE__, (src), (mark), (key), (what), (hint))

/* Reader errors carry a byte offset, not a mark: count lines up to it. */
static yaml_mark_t mark_of_offset(const cfg_src *src, size_t offset) {
    yaml_mark_t m = {0, 0, 0};
    for (size_t i = 0; i < offset && i < src->len; i++) {
        if (src->text[i] == '\n') m.line++, m.column = 0;
        else m.column++;
    }
    m.index = offset;
    return m;
}

static int syntax_error(rlt_err *e, int src_line, const cfg_src *src, const yaml_parser_t *p) {
    if (p->error == YAML_MEMORY_ERROR)
        return rlt_err_set(e, RLT_ENOMEM, __FILE__, src_line, "%.300s: libyaml ran out of memory", src->name);
    char what[512];
    yaml_mark_t m = p->error == YAML_READER_ERROR ? mark_of_offset(src, p->problem_offset) : p->problem_mark;
    if (p->context)
        snprintf(what, sizeof what, "YAML syntax error: %s (%s at line %zu, column %zu)",
                 p->problem ? p->problem : "unknown problem", p->context, p->context_mark.line + 1,
                 p->context_mark.column + 1 + (p->context_mark.line == 0 ? src->col_offset : 0));
    else
        snprintf(what, sizeof what, "YAML syntax error: %s", p->problem ? p->problem : "unknown problem");
    return report_at(e, src_line, src, m, NULL, what,
                     "check the indentation (spaces, not tabs), the space after each ':', and that quotes and "
                     "brackets are closed");
}

/* The libyaml check: records the parser's error with its position and returns. */
#define YAML_TRY(e, src, parser, call)                                           \
    do {                                                                         \
        if (!(call)) return syntax_error((e), __LINE__, (src), (parser));        \
    } while (0)

static const char *node_kind(const yaml_event_t *ev) {
    switch (ev->type) {
    case YAML_SEQUENCE_START_EVENT: return "a list";
    case YAML_MAPPING_START_EVENT: return "a mapping";
    case YAML_SCALAR_EVENT: return "a single value";
    default: return "something else";
    }
}

static const char *type_text(const cfg_key *k, char *buf, size_t cap) {
    switch (k->type) {
    case CFG_INT32:
    case CFG_INT64:
    case CFG_UINT64: return "an integer";
    case CFG_DOUBLE: return "a number";
    case CFG_BOOL: return "true or false";
    case CFG_ENUM:
    case CFG_DEVICE:
    case CFG_NAME: {
        char c[160];
        snprintf(buf, cap, "one of %s", config_schema_choices(k, c, sizeof c));
        return buf;
    }
    case CFG_STRING: return "a string";
    case CFG_INT_LIST: return "a list of integers like [256, 256]";
    case CFG_CONV_LIST: return "a preset (" CONV_PRESET_NAMES ") or a list of layers";
    case CFG_SEED_LIST: return "a list of seeds like [1, 2, 3]";
    case CFG_DEVICE_LIST: return "a list of devices like [cuda:0, cuda:1]";
    case CFG_INPUT_LIST: return "none or a list of inputs";
    }
    return "a value";
}

static int is_plain_null(const yaml_event_t *ev) {
    if (ev->type != YAML_SCALAR_EVENT || ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE) return 0;
    const char *v = (const char *)ev->data.scalar.value;
    size_t n = ev->data.scalar.length;
    return n == 0 || (n == 1 && v[0] == '~') || (n == 4 && (!memcmp(v, "null", 4) || !memcmp(v, "Null", 4) ||
                                                            !memcmp(v, "NULL", 4)));
}

/* ---- pass 1: structure ------------------------------------------------------------------------------- */

/* Aliases, anchors, tags, a second document and deep nesting are refused in a first pass over the whole
 * input, before any key is looked at, so that the reader in pass 2 only ever sees plain trees. */
static int scan_structure(const cfg_src *src, rlt_err *e) {
    yaml_parser_t p;
    if (!yaml_parser_initialize(&p)) RLT_FAIL(e, RLT_ENOMEM, "%.300s: libyaml could not allocate a parser", src->name);
    yaml_parser_set_input_string(&p, src->text, src->len);
    int depth = 0, docs = 0, rc = RLT_OK;
    for (;;) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&p, &ev)) {
            rc = syntax_error(e, __LINE__, src, &p);
            break;
        }
        const yaml_char_t *anchor = NULL, *tag = NULL;
        if (ev.type == YAML_SCALAR_EVENT) anchor = ev.data.scalar.anchor, tag = ev.data.scalar.tag;
        if (ev.type == YAML_SEQUENCE_START_EVENT) anchor = ev.data.sequence_start.anchor, tag = ev.data.sequence_start.tag;
        if (ev.type == YAML_MAPPING_START_EVENT) anchor = ev.data.mapping_start.anchor, tag = ev.data.mapping_start.tag;
        char what[200];
        if (ev.type == YAML_ALIAS_EVENT) {
            snprintf(what, sizeof what, "aliases (*%.60s) are not allowed", (const char *)ev.data.alias.anchor);
            rc = REPORT(e, src, ev.start_mark, NULL, what, "write the value out in full where it is used");
        } else if (anchor) {
            snprintf(what, sizeof what, "anchors (&%.60s) are not allowed", (const char *)anchor);
            rc = REPORT(e, src, ev.start_mark, NULL, what, "remove the anchor and write each value out in full");
        } else if (tag) {
            snprintf(what, sizeof what, "tags (%.60s) are not allowed", (const char *)tag);
            rc = REPORT(e, src, ev.start_mark, NULL, what, "remove the tag: each key's type comes from the schema");
        } else if (ev.type == YAML_DOCUMENT_START_EVENT && ++docs > 1) {
            rc = REPORT(e, src, ev.start_mark, NULL, "multiple documents: a second YAML document starts here",
                        "one config per file: remove the '---' and merge the documents, or load a second file");
        } else if ((ev.type == YAML_MAPPING_START_EVENT || ev.type == YAML_SEQUENCE_START_EVENT) &&
                   ++depth > CFG_MAX_DEPTH) {
            snprintf(what, sizeof what, "nesting is deeper than %d levels", CFG_MAX_DEPTH);
            rc = REPORT(e, src, ev.start_mark, NULL, what,
                        "a config is at most 'section: key: [list]'; check the indentation and brackets");
        } else if (ev.type == YAML_MAPPING_END_EVENT || ev.type == YAML_SEQUENCE_END_EVENT) {
            depth--;
        }
        int done = ev.type == YAML_STREAM_END_EVENT;
        yaml_event_delete(&ev);
        if (rc != RLT_OK || done) break;
    }
    yaml_parser_delete(&p);
    return rc;
}

/* ---- pass 2: keys and values ------------------------------------------------------------------------- */

static int next_event(cfg_reader *r, yaml_event_t *ev) {
    YAML_TRY(r->e, r->src, &r->parser, yaml_parser_parse(&r->parser, ev));
    return RLT_OK;
}

static int read_scalar(cfg_reader *r, const cfg_key *k, const yaml_event_t *ev) {
    char what[256], hint[512], tbuf[96];
    if (ev->type != YAML_SCALAR_EVENT) {
        snprintf(what, sizeof what, "expected %s, got %s", type_text(k, tbuf, sizeof tbuf), node_kind(ev));
        const char *leaf = strrchr(k->key, '.') ? strrchr(k->key, '.') + 1 : k->key;
        if (k->type == CFG_STRING)
            snprintf(hint, sizeof hint, "write one value, in double quotes if it holds ': ' or ' #' or starts with "
                     "[ or { (%s)", k->doc);
        else
            snprintf(hint, sizeof hint, "write one value on the key's line, like '%s: %s' (%s)", leaf, k->def, k->doc);
        return REPORT(r->e, r->src, ev->start_mark, k->key, what, hint);
    }
    cfg_why why;
    if (config_schema_set_scalar(k, r->dst, (const char *)ev->data.scalar.value, ev->data.scalar.length,
                                 ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE, 0, &why) != 0)
        return REPORT(r->e, r->src, ev->start_mark, k->key, why.what, why.hint);
    return RLT_OK;
}

static int read_list(cfg_reader *r, const cfg_key *k, const yaml_event_t *ev) {
    char what[256], hint[512];
    /* What the list holds, and an example to write (a list's default may be [], which shows nothing). */
    const char *kind = k->type == CFG_DEVICE_LIST ? "a list of devices" : "a list of integers";
    const char *entry = k->type == CFG_DEVICE_LIST ? "a device" : "an integer";
    const char *example = k->type == CFG_DEVICE_LIST ? "[cuda:0, cuda:1]" : k->type == CFG_SEED_LIST ? "[1, 2, 3]" : k->def;
    if (ev->type != YAML_SEQUENCE_START_EVENT) {
        if (ev->type == YAML_SCALAR_EVENT)
            snprintf(what, sizeof what, "expected %s, got '%.40s'%s", kind, (const char *)ev->data.scalar.value,
                     ev->data.scalar.length > 40 ? "..." : "");
        else
            snprintf(what, sizeof what, "expected %s, got %s", kind, node_kind(ev));
        snprintf(hint, sizeof hint, "write the entries in brackets, like %s (%s)", example, k->doc);
        return REPORT(r->e, r->src, ev->start_mark, k->key, what, hint);
    }
    int count = 0;
    for (;;) {
        yaml_event_t item;
        RLT_TRY(next_event(r, &item));
        int rc = RLT_OK, end = item.type == YAML_SEQUENCE_END_EVENT;
        if (end && count == 0 && (k->type == CFG_SEED_LIST || k->type == CFG_DEVICE_LIST)) {
            memset((char *)r->dst + k->offset, 0, k->size); /* train.seeds: [] names no seeds, devices: [] none */
        } else if (end && count == 0) {
            snprintf(hint, sizeof hint, "give 1 to %d entries, like %s (%s)", RLT_CFG_MAX_LAYERS, k->def, k->doc);
            rc = REPORT(r->e, r->src, ev->start_mark, k->key, "is an empty list", hint);
        } else if (!end && item.type != YAML_SCALAR_EVENT) {
            snprintf(what, sizeof what, "entry %d: expected %s, got %s", count + 1, entry, node_kind(&item));
            snprintf(hint, sizeof hint, "write a flat list, like %s (%s)", example, k->doc);
            rc = REPORT(r->e, r->src, item.start_mark, k->key, what, hint);
        } else if (!end) {
            cfg_why why;
            if (config_schema_set_scalar(k, r->dst, (const char *)item.data.scalar.value, item.data.scalar.length,
                                         item.data.scalar.style == YAML_PLAIN_SCALAR_STYLE, count, &why) != 0)
                rc = REPORT(r->e, r->src, item.start_mark, k->key, why.what, why.hint);
            count++;
        }
        yaml_event_delete(&item);
        if (rc != RLT_OK || end) return rc;
    }
}

/* ---- network.conv: a preset name or a list of layer mappings ------------------------------------------ */

#define CONV_EXAMPLE "[{out: 16, kernel: 3, stride: 1}]"

/* How a list item's mapping names its keys, for read_item_key's messages. */
typedef struct cfg_item {
    int (*field)(const char *name, size_t n); /* the key's field number, -1 when unknown */
    const char *noun;                         /* "a layer", "an input" */
    const char *example;                      /* "write a layer like ..." */
    const char *expected;                     /* the hint for an unknown key */
    int n_fields;
} cfg_item;

/* The next key of the mapping of item `index` of list kname (network.conv[2], network.inputs[0]): *f its field, or
 * -2 at the mapping's end. A key that is not a name, unknown or given twice (seen[f]: the line it was first given on)
 * is reported; key is left "kname[index].name" (or "kname[index]") for the messages about its value. */
static int read_item_key(cfg_reader *r, const char *kname, int index, const cfg_item *it, int *seen, char *key,
                         size_t cap, int *f) {
    char what[512], hint[512];
    yaml_event_t kev;
    RLT_TRY(next_event(r, &kev));
    *f = -1;
    if (kev.type == YAML_MAPPING_END_EVENT) {
        yaml_event_delete(&kev);
        *f = -2;
        return RLT_OK;
    }
    int rc = RLT_OK;
    snprintf(key, cap, "%s[%d]", kname, index);
    if (kev.type != YAML_SCALAR_EVENT) {
        snprintf(what, sizeof what, "%s's key must be a name, not %s", it->noun, node_kind(&kev));
        rc = REPORT(r->e, r->src, kev.start_mark, key, what, it->example);
    } else {
        const char *name = (const char *)kev.data.scalar.value;
        size_t nlen = kev.data.scalar.length;
        *f = it->field(name, nlen);
        snprintf(key, cap, "%s[%d].%.*s", kname, index, (int)(nlen > 40 ? 40 : nlen), name);
        if (*f < 0 || *f >= it->n_fields) {
            rc = REPORT(r->e, r->src, kev.start_mark, key, "unknown key", it->expected);
        } else if (seen[*f]) {
            snprintf(what, sizeof what, "duplicate key (first given on line %d)", seen[*f]);
            snprintf(hint, sizeof hint, "give each key of %s once", it->noun);
            rc = REPORT(r->e, r->src, kev.start_mark, key, what, hint);
        } else {
            seen[*f] = (int)kev.start_mark.line + 1;
        }
    }
    yaml_event_delete(&kev);
    return rc;
}

/* One layer's mapping (ev is its start) into *out; `index` names it in messages: network.conv[1].kernel. */
static int read_conv_layer(cfg_reader *r, const char *kname, int index, const yaml_event_t *ev, rlt_conv_layer *out) {
    char key[CFG_MAX_PATH + 64], what[512], hint[512];
    *out = config_conv_layer_defaults();
    int seen[CONV_F_COUNT] = {0};
    static const cfg_item item = {config_conv_field, "a layer", "write a layer like " CONV_EXAMPLE,
                                  "expected " CONV_FIELD_NAMES " (a layer is like {out: 64, kernel: 3, stride: 1, pad: 0})",
                                  CONV_F_COUNT};
    for (;;) {
        yaml_event_t vev;
        int rc = RLT_OK, f;
        RLT_TRY(read_item_key(r, kname, index, &item, seen, key, sizeof key, &f));
        if (f == -2) break;
        RLT_TRY(next_event(r, &vev));
        if (vev.type != YAML_SCALAR_EVENT) {
            snprintf(what, sizeof what, "must be an integer, not %s", node_kind(&vev));
            rc = REPORT(r->e, r->src, vev.start_mark, key, what, "write one number, like {out: 64, kernel: 3, stride: 1}");
        } else {
            cfg_why why;
            if (config_conv_set_field(out, f, (const char *)vev.data.scalar.value, vev.data.scalar.length,
                                      vev.data.scalar.style == YAML_PLAIN_SCALAR_STYLE, &why) != 0)
                rc = REPORT(r->e, r->src, vev.start_mark, key, why.what, why.hint);
        }
        yaml_event_delete(&vev);
        RLT_TRY(rc);
    }
    for (int f = 0; f < CONV_F_COUNT; f++)
        if (config_conv_field_required(f) && !seen[f]) {
            snprintf(key, sizeof key, "%s[%d]", kname, index);
            snprintf(what, sizeof what, "is missing '%s'", config_conv_field_name(f));
            snprintf(hint, sizeof hint, "every layer gives out and kernel; stride (default 1) and pad (default 0) "
                     "are optional, like {out: 64, kernel: 3, stride: 1}");
            return REPORT(r->e, r->src, ev->start_mark, key, what, hint);
        }
    return RLT_OK;
}

/* A preset name (a scalar) or a sequence of layer mappings into *out; kname names the value in messages
 * (network.conv, network.inputs[0].torso). The list is built aside and stored whole, so a list replaces the
 * previous value entirely (as network.hidden's does). */
static int read_conv_into(cfg_reader *r, const char *kname, const yaml_event_t *ev, rlt_conv_list *out) {
    char key[CFG_MAX_PATH + 64], what[256], hint[512];
    if (ev->type == YAML_SCALAR_EVENT) {
        cfg_why why;
        if (config_conv_set_preset(out, (const char *)ev->data.scalar.value, ev->data.scalar.length, &why) != 0)
            return REPORT(r->e, r->src, ev->start_mark, kname, why.what, why.hint);
        return RLT_OK;
    }
    if (ev->type != YAML_SEQUENCE_START_EVENT) {
        snprintf(what, sizeof what, "expected a preset name or a list of layers, got %s", node_kind(ev));
        snprintf(hint, sizeof hint, "write one of " CONV_PRESET_NAMES ", or a list like " CONV_EXAMPLE
                 " (a mapping needs the brackets around it)");
        return REPORT(r->e, r->src, ev->start_mark, kname, what, hint);
    }
    rlt_conv_list list;
    memset(&list, 0, sizeof list);
    for (;;) {
        yaml_event_t item;
        RLT_TRY(next_event(r, &item));
        int rc = RLT_OK, end = item.type == YAML_SEQUENCE_END_EVENT;
        snprintf(key, sizeof key, "%s[%d]", kname, (int)list.n);
        if (end && list.n == 0) {
            snprintf(hint, sizeof hint, "give 1 to %d layers, like " CONV_EXAMPLE ", or write none for no "
                     "convolutional torso", RLT_CFG_MAX_CONV);
            rc = REPORT(r->e, r->src, ev->start_mark, kname, "is an empty list", hint);
        } else if (!end && list.n == RLT_CFG_MAX_CONV) {
            snprintf(what, sizeof what, "has more than %d layers", RLT_CFG_MAX_CONV);
            snprintf(hint, sizeof hint, "give at most %d layers (RLT_CFG_MAX_CONV)", RLT_CFG_MAX_CONV);
            rc = REPORT(r->e, r->src, item.start_mark, kname, what, hint);
        } else if (!end && item.type != YAML_MAPPING_START_EVENT) {
            snprintf(what, sizeof what, "expected a layer mapping, got %s", node_kind(&item));
            rc = REPORT(r->e, r->src, item.start_mark, key, what,
                        "write each layer as {out: N, kernel: K, stride: S, pad: P} (stride and pad optional), "
                        "like " CONV_EXAMPLE);
        } else if (!end) {
            rc = read_conv_layer(r, kname, (int)list.n, &item, &list.layer[list.n]);
            list.n++;
        }
        yaml_event_delete(&item);
        if (rc != RLT_OK) return rc;
        if (end) break;
    }
    *out = list;
    return RLT_OK;
}

static int read_conv(cfg_reader *r, const cfg_key *k, const yaml_event_t *ev) {
    if (ev->type == YAML_SCALAR_EVENT) return read_scalar(r, k, ev);
    return read_conv_into(r, k->key, ev, (rlt_conv_list *)(void *)((char *)r->dst + k->offset));
}


/* ---- network.inputs: none or a list of input mappings ------------------------------------------------ */

/* One input's shape, a flow or block list of 1 or 3 integers. */
static int read_input_shape(cfg_reader *r, const char *kname, const yaml_event_t *ev, rlt_input_spec *out) {
    char what[256];
    if (ev->type != YAML_SEQUENCE_START_EVENT) {
        snprintf(what, sizeof what, "expected a list of integers, got %s", node_kind(ev));
        return REPORT(r->e, r->src, ev->start_mark, kname, what, "write [D] for a vector or [C, H, W] for an image");
    }
    memset(out->shape, 0, sizeof out->shape);
    out->ndim = 0;
    int count = 0;
    for (;;) {
        yaml_event_t item;
        RLT_TRY(next_event(r, &item));
        int rc = RLT_OK, end = item.type == YAML_SEQUENCE_END_EVENT;
        if (!end && item.type != YAML_SCALAR_EVENT) {
            snprintf(what, sizeof what, "entry %d: expected an integer, got %s", count + 1, node_kind(&item));
            rc = REPORT(r->e, r->src, item.start_mark, kname, what, "write a flat list like [1, 8, 8]");
        } else if (!end) {
            cfg_why why;
            if (config_inputs_set_dim(out, count, (const char *)item.data.scalar.value, item.data.scalar.length,
                                      item.data.scalar.style == YAML_PLAIN_SCALAR_STYLE, &why) != 0)
                rc = REPORT(r->e, r->src, item.start_mark, kname, why.what, why.hint);
            count++;
        }
        yaml_event_delete(&item);
        RLT_TRY(rc);
        if (end) break;
    }
    if (count != 1 && count != 3)
        return REPORT(r->e, r->src, ev->start_mark, kname, count ? "has 2 entries" : "is an empty list",
                      "a shape is [D] for a vector or [C, H, W] for an image");
    return RLT_OK;
}

/* One input's mapping (ev is its start) into *out: name and shape required, dtype f32 and torso none by
 * default. */
static int read_input(cfg_reader *r, const cfg_key *k, int index, const yaml_event_t *ev, rlt_input_spec *out) {
    char key[CFG_MAX_PATH + 64], what[512], hint[512];
    memset(out, 0, sizeof *out);
    out->dtype = RLT_DTYPE_F32;
    cfg_why why;
    (void)config_conv_set_preset(&out->torso, "none", 4, &why);
    int seen[INPUT_F_COUNT] = {0};
    static const cfg_item item = {config_inputs_field, "an input", "write an input like " INPUT_EXAMPLE,
                                  "expected " INPUT_FIELD_NAMES, INPUT_F_COUNT};
    for (;;) {
        yaml_event_t vev;
        int rc = RLT_OK, f;
        RLT_TRY(read_item_key(r, k->key, index, &item, seen, key, sizeof key, &f));
        if (f == -2) break;
        RLT_TRY(next_event(r, &vev));
        if (f == INPUT_F_SHAPE) {
            rc = read_input_shape(r, key, &vev, out);
        } else if (f == INPUT_F_TORSO) {
            rc = read_conv_into(r, key, &vev, &out->torso);
        } else if (vev.type != YAML_SCALAR_EVENT) {
            snprintf(what, sizeof what, "must be a single value, not %s", node_kind(&vev));
            rc = REPORT(r->e, r->src, vev.start_mark, key, what, "write an input like " INPUT_EXAMPLE);
        } else {
            const char *t = (const char *)vev.data.scalar.value;
            size_t n = vev.data.scalar.length;
            int bad = f == INPUT_F_NAME    ? config_inputs_set_name(out, t, n, &why)
                      : f == INPUT_F_HIGH  ? config_inputs_set_high(out, t, n, &why)
                                           : config_inputs_set_dtype(out, t, n, &why);
            if (bad) rc = REPORT(r->e, r->src, vev.start_mark, key, why.what, why.hint);
        }
        yaml_event_delete(&vev);
        RLT_TRY(rc);
    }
    for (int f = INPUT_F_NAME; f <= INPUT_F_SHAPE; f++)
        if (!seen[f]) {
            snprintf(key, sizeof key, "%s[%d]", k->key, index);
            snprintf(what, sizeof what, "is missing '%s'", config_inputs_field_name(f));
            snprintf(hint, sizeof hint, "every input gives a name and a shape; dtype (f32) and torso (none) are "
                     "optional, like {name: stats, shape: [4]}");
            return REPORT(r->e, r->src, ev->start_mark, key, what, hint);
        }
    return RLT_OK;
}

/* none, or a sequence of input mappings, built aside and stored whole. */
static int read_inputs(cfg_reader *r, const cfg_key *k, const yaml_event_t *ev) {
    char key[CFG_MAX_PATH + 64], what[256];
    if (ev->type == YAML_SCALAR_EVENT) return read_scalar(r, k, ev);
    if (ev->type != YAML_SEQUENCE_START_EVENT) {
        snprintf(what, sizeof what, "expected none or a list of inputs, got %s", node_kind(ev));
        return REPORT(r->e, r->src, ev->start_mark, k->key, what, "write a list like " INPUT_EXAMPLE);
    }
    rlt_input_list list;
    memset(&list, 0, sizeof list);
    for (;;) {
        yaml_event_t item;
        RLT_TRY(next_event(r, &item));
        int rc = RLT_OK, end = item.type == YAML_SEQUENCE_END_EVENT;
        snprintf(key, sizeof key, "%s[%d]", k->key, (int)list.n);
        if (end && list.n == 0) {
            rc = REPORT(r->e, r->src, ev->start_mark, k->key, "is an empty list",
                        "give 1 or more inputs, or write none for one plain observation");
        } else if (!end && list.n == RLT_CFG_MAX_INPUTS) {
            snprintf(what, sizeof what, "has more than %d inputs", RLT_CFG_MAX_INPUTS);
            rc = REPORT(r->e, r->src, item.start_mark, k->key, what, "give at most that many (RLT_CFG_MAX_INPUTS)");
        } else if (!end && item.type != YAML_MAPPING_START_EVENT) {
            snprintf(what, sizeof what, "expected an input mapping, got %s", node_kind(&item));
            rc = REPORT(r->e, r->src, item.start_mark, key, what, "write each input like " INPUT_EXAMPLE);
        } else if (!end) {
            rc = read_input(r, k, (int)list.n, &item, &list.in[list.n]);
            list.n++;
        }
        yaml_event_delete(&item);
        if (rc != RLT_OK) return rc;
        if (end) break;
    }
    /* What only the whole list shows (names given twice, too many conv layers) is refused here, at the key. */
    cfg_why why;
    if (config_inputs_check(&list, &why) != 0) return REPORT(r->e, r->src, ev->start_mark, k->key, why.what, why.hint);
    memcpy((char *)r->dst + k->offset, &list, sizeof list);
    return RLT_OK;
}

/* ---- population: per-member values (engine/config_population.c says which keys may differ) ------------------ */

#define POP_EXAMPLE "population: {td3.actor_lr: [1e-4, 3e-4, 1e-3], td3.tau: 0.005}"

/* population.name: one directory name per member (letters, digits, '.', '_', '-'; not . or ..). */
static int read_pop_names(cfg_reader *r, const yaml_event_t *ev, rlt_population *pop) {
    const char *key = "population.name";
    if (ev->type != YAML_SEQUENCE_START_EVENT)
        return REPORT(r->e, r->src, ev->start_mark, key, "expected a list of names",
                      "write one directory name per member, like [lr_small, lr_large]");
    memset(pop->name, 0, sizeof pop->name);
    int count = 0;
    for (;;) {
        yaml_event_t item;
        RLT_TRY(next_event(r, &item));
        int rc = RLT_OK, end = item.type == YAML_SEQUENCE_END_EVENT;
        char what[256];
        if (!end) {
            const char *t = item.type == YAML_SCALAR_EVENT ? (const char *)item.data.scalar.value : "";
            size_t n = item.type == YAML_SCALAR_EVENT ? item.data.scalar.length : 0;
            int ok = item.type == YAML_SCALAR_EVENT && n > 0 && n < RLT_CFG_POP_NAME &&
                     strspn(t, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == n &&
                     strcmp(t, ".") != 0 && strcmp(t, "..") != 0;
            if (count >= RLT_CFG_MAX_SEEDS) {
                snprintf(what, sizeof what, "has more than %d names", RLT_CFG_MAX_SEEDS);
                rc = REPORT(r->e, r->src, item.start_mark, key, what, "a population has at most 256 members");
            } else if (!ok) {
                snprintf(what, sizeof what, "entry %d is not a directory name", count + 1);
                rc = REPORT(r->e, r->src, item.start_mark, key, what,
                            "use 1 to 47 letters, digits, '.', '_' or '-' (each member's outputs go to out_dir/<name>/)");
            } else {
                for (int j = 0; j < count && rc == RLT_OK; j++)
                    if (strcmp(pop->name[j], t) == 0) {
                        snprintf(what, sizeof what, "entry %d ('%s') repeats entry %d", count + 1, t, j + 1);
                        rc = REPORT(r->e, r->src, item.start_mark, key, what, "give each member its own directory name");
                    }
                if (rc == RLT_OK) memcpy(pop->name[count], t, n);
            }
            count++;
        } else if (count == 0) {
            rc = REPORT(r->e, r->src, item.start_mark, key, "is an empty list", "give one name per member");
        }
        yaml_event_delete(&item);
        if (rc != RLT_OK) return rc;
        if (end) break;
    }
    pop->named = count;
    return RLT_OK;
}

/* The entries of a list value (its start event already read; `first` is its first item's event) into *out, then
 * its index in the population's table of lists (the same list once). */
static int read_pop_list(cfg_reader *r, const cfg_key *k, const char *full, yaml_event_t *first, uint64_t *index) {
    rlt_population *pop = &r->dst->population;
    rlt_int_list l;
    memset(&l, 0, sizeof l);
    char what[512];
    yaml_mark_t start = first->start_mark;
    for (int32_t count = 0;; count++) {
        yaml_event_t item;
        if (count == 0) item = *first;
        else RLT_TRY(next_event(r, &item));
        int rc = RLT_OK, end = item.type == YAML_SEQUENCE_END_EVENT;
        if (end && count == 0) {
            rc = REPORT(r->e, r->src, item.start_mark, full, "an entry is an empty list", "give each list 1 to 8 widths");
        } else if (!end && item.type != YAML_SCALAR_EVENT) {
            snprintf(what, sizeof what, "expected an integer, got %s", node_kind(&item));
            rc = REPORT(r->e, r->src, item.start_mark, full, what, "write one list per member, like [[64, 64], [256, 256]]");
        } else if (!end) {
            cfg_why cw;
            if (config_schema_set_list_entry(k, &l, (const char *)item.data.scalar.value, item.data.scalar.length,
                                             item.data.scalar.style == YAML_PLAIN_SCALAR_STYLE, count, &cw) != 0)
                rc = REPORT(r->e, r->src, item.start_mark, full, cw.what, cw.hint);
        }
        if (count > 0) yaml_event_delete(&item);
        if (rc != RLT_OK) return rc;
        if (end) break;
    }
    for (int32_t i = 0; i < pop->n_lists; i++)
        if (memcmp(&pop->lists[i], &l, sizeof l) == 0) {
            *index = (uint64_t)i;
            return RLT_OK;
        }
    if (pop->n_lists == RLT_CFG_POP_LISTS) {
        snprintf(what, sizeof what, "is one list more than the %d distinct lists a population may hold", RLT_CFG_POP_LISTS);
        return REPORT(r->e, r->src, start, full, what, "use fewer distinct values (RLT_CFG_POP_LISTS)");
    }
    pop->lists[pop->n_lists] = l;
    *index = (uint64_t)pop->n_lists++;
    return RLT_OK;
}

/* A list key's value: one list for every member ([64, 64]) or one list per member ([[64, 64], [256, 256]]). */
static int read_pop_lists(cfg_reader *r, const cfg_key *k, const char *full, const yaml_event_t *ev, rlt_pop_key *pk) {
    if (ev->type != YAML_SEQUENCE_START_EVENT)
        return REPORT(r->e, r->src, ev->start_mark, full, "expected a list like [64, 64], or one such list per member",
                      "write [[64, 64], [256, 256]] for two members, or [64, 64] for all");
    yaml_event_t item;
    RLT_TRY(next_event(r, &item));
    if (item.type != YAML_SEQUENCE_START_EVENT) { /* one list for all: item is its first entry */
        int rc = read_pop_list(r, k, full, &item, &pk->v[0]);
        yaml_event_delete(&item);
        pk->n = 1;
        return rc;
    }
    for (;;) {
        int rc = RLT_OK, end = item.type == YAML_SEQUENCE_END_EVENT;
        if (!end && item.type != YAML_SEQUENCE_START_EVENT) {
            char what[128];
            snprintf(what, sizeof what, "entry %d: expected a list like [64, 64], got %s", (int)pk->n + 1, node_kind(&item));
            rc = REPORT(r->e, r->src, item.start_mark, full, what, "write one list per member, like [[64, 64], [256, 256]]");
        } else if (!end && pk->n >= RLT_CFG_MAX_SEEDS) {
            rc = REPORT(r->e, r->src, item.start_mark, full, "has more than 256 values", "a population has at most 256 members");
        } else if (!end) {
            yaml_event_t first;
            rc = next_event(r, &first);
            if (rc == RLT_OK) {
                rc = read_pop_list(r, k, full, &first, &pk->v[pk->n]);
                yaml_event_delete(&first);
            }
            pk->n++;
        }
        yaml_event_delete(&item);
        if (rc != RLT_OK || end) return rc;
        RLT_TRY(next_event(r, &item));
    }
}

/* One "KEY: value or [values]" of the population; kev is the key's event, name (nlen) the dotted key. */
static int read_pop_key(cfg_reader *r, const char *name, size_t nlen, yaml_mark_t kmark, const yaml_event_t *ev) {
    rlt_population *pop = &r->dst->population;
    char full[CFG_MAX_PATH + 16], what[512], hint[1024], near[128];
    snprintf(full, sizeof full, "population.%.*s", (int)(nlen < CFG_MAX_PATH ? nlen : CFG_MAX_PATH), name);
    if (nlen == 4 && memcmp(name, "name", 4) == 0) return read_pop_names(r, ev, pop);
    const cfg_key *k = nlen <= CFG_MAX_PATH && !memchr(name, '\0', nlen) ? config_schema_find(name, nlen) : NULL;
    if (!k) {
        snprintf(what, sizeof what, "unknown key '%s'", full + 11);
        if (config_schema_nearest(full + 11, near, sizeof near))
            snprintf(hint, sizeof hint, "did you mean '%s'? population keys are config keys written whole, like "
                     "td3.actor_lr", near);
        else
            snprintf(hint, sizeof hint, "population keys are config keys written whole, like td3.actor_lr, or name "
                     "(the members' directories): " POP_EXAMPLE);
        return REPORT(r->e, r->src, kmark, NULL, what, hint);
    }
    char why[400];
    if (!config_population_allows(k->key, why, sizeof why)) {
        snprintf(what, sizeof what, "%s cannot differ between the members of a population", k->key);
        return REPORT(r->e, r->src, kmark, full, what, why);
    }
    int32_t slot = 0;
    while (slot < pop->n_keys && pop->key[slot].row != (int32_t)config_schema_index(k)) slot++;
    if (slot < pop->n_keys && r->population_line[slot]) {
        snprintf(what, sizeof what, "duplicate key (first given on line %d)", r->population_line[slot]);
        return REPORT(r->e, r->src, kmark, full, what, "give each key once; the second would silently win");
    }
    if (slot == RLT_CFG_POP_KEYS) {
        snprintf(what, sizeof what, "is one key more than the %d a population may vary", RLT_CFG_POP_KEYS);
        return REPORT(r->e, r->src, kmark, full, what, "vary fewer keys at once (RLT_CFG_POP_KEYS)");
    }
    rlt_pop_key pk;
    memset(&pk, 0, sizeof pk);
    pk.row = (int32_t)config_schema_index(k);
    pk.line = (int32_t)kmark.line + 1;
    pk.col = (int32_t)(kmark.column + 1 + (kmark.line == 0 ? r->src->col_offset : 0));
    pk.src = r->dst->n_sources;
    cfg_why cw;
    if (k->type == CFG_INT_LIST) {
        RLT_TRY(read_pop_lists(r, k, full, ev, &pk));
    } else if (ev->type == YAML_SCALAR_EVENT) {
        if (config_schema_parse_bits(k, (const char *)ev->data.scalar.value, ev->data.scalar.length,
                                     ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE, &pk.v[0], &cw) != 0)
            return REPORT(r->e, r->src, ev->start_mark, full, cw.what, cw.hint);
        pk.n = 1;
    } else if (ev->type == YAML_SEQUENCE_START_EVENT) {
        for (;;) {
            yaml_event_t item;
            RLT_TRY(next_event(r, &item));
            int rc = RLT_OK, end = item.type == YAML_SEQUENCE_END_EVENT;
            if (end && pk.n == 0) {
                rc = REPORT(r->e, r->src, ev->start_mark, full, "is an empty list",
                            "give one value per member, or one value for all");
            } else if (!end && item.type != YAML_SCALAR_EVENT) {
                snprintf(what, sizeof what, "entry %d: expected one value, got %s", (int)pk.n + 1, node_kind(&item));
                rc = REPORT(r->e, r->src, item.start_mark, full, what, "write a flat list of values, like [1e-4, 3e-4]");
            } else if (!end && pk.n >= RLT_CFG_MAX_SEEDS) {
                snprintf(what, sizeof what, "has more than %d values", RLT_CFG_MAX_SEEDS);
                rc = REPORT(r->e, r->src, item.start_mark, full, what, "a population has at most 256 members");
            } else if (!end) {
                if (config_schema_parse_bits(k, (const char *)item.data.scalar.value, item.data.scalar.length,
                                             item.data.scalar.style == YAML_PLAIN_SCALAR_STYLE, &pk.v[pk.n], &cw) != 0) {
                    snprintf(what, sizeof what, "entry %d: %s", (int)pk.n + 1, cw.what);
                    rc = REPORT(r->e, r->src, item.start_mark, full, what, cw.hint);
                }
                pk.n++;
            }
            yaml_event_delete(&item);
            if (rc != RLT_OK) return rc;
            if (end) break;
        }
    } else {
        snprintf(what, sizeof what, "expected a value or a list of values, got %s", node_kind(ev));
        return REPORT(r->e, r->src, ev->start_mark, full, what, "write one value per member, like [1e-4, 3e-4], or one "
                      "value for all");
    }
    pop->key[slot] = pk;
    if (slot == pop->n_keys) pop->n_keys++;
    r->population_line[slot] = pk.line;
    return RLT_OK;
}

/* The population node at path "population" (a mapping of keys; it replaces an earlier input's population whole;
 * null or {} clears it) or "population.KEY" (one key's values, from --set). */
static int read_population(cfg_reader *r, const char *path, size_t len, const yaml_event_t *ev) {
    rlt_population *pop = &r->dst->population;
    if (len > 11) return read_pop_key(r, path + 11, len - 11, ev->start_mark, ev);
    memset(pop, 0, sizeof *pop);
    if (is_plain_null(ev)) return RLT_OK;
    if (ev->type != YAML_MAPPING_START_EVENT)
        return REPORT(r->e, r->src, ev->start_mark, "population", "needs a mapping of keys to lists of values",
                      "write " POP_EXAMPLE);
    for (;;) {
        yaml_event_t kev, vev;
        RLT_TRY(next_event(r, &kev));
        if (kev.type == YAML_MAPPING_END_EVENT) {
            yaml_event_delete(&kev);
            return RLT_OK;
        }
        int rc = RLT_OK;
        if (kev.type != YAML_SCALAR_EVENT) {
            rc = REPORT(r->e, r->src, kev.start_mark, "population", "a key must be a name",
                        "write dotted config keys, like td3.actor_lr: [1e-4, 3e-4]");
        } else {
            rc = next_event(r, &vev);
            if (rc == RLT_OK) {
                rc = read_pop_key(r, (const char *)kev.data.scalar.value, kev.data.scalar.length, kev.start_mark, &vev);
                yaml_event_delete(&vev);
            }
        }
        yaml_event_delete(&kev);
        if (rc != RLT_OK) return rc;
    }
}

static int read_node(cfg_reader *r, const char *path, size_t len, const yaml_event_t *ev);

/* One "key: value" of the mapping at `path`; kev is the key's event. */
static int read_entry(cfg_reader *r, const char *path, size_t len, const yaml_event_t *kev) {
    char child[CFG_MAX_PATH + 1], what[512], hint[1024], near[128];
    const char *in = len ? path : NULL;
    if (kev->type != YAML_SCALAR_EVENT) {
        snprintf(what, sizeof what, "a key must be a name, not %s", node_kind(kev));
        return REPORT(r->e, r->src, kev->start_mark, in, what, "write 'name: value'; '?' complex keys are not used");
    }
    const char *name = (const char *)kev->data.scalar.value;
    size_t nlen = kev->data.scalar.length;
    int fits = len + 1 + nlen <= CFG_MAX_PATH && !memchr(name, '\0', nlen);
    size_t clen = 0;
    if (fits) {
        if (len) memcpy(child, path, len), child[len] = '.', clen = len + 1;
        memcpy(child + clen, name, nlen);
        clen += nlen;
    } else {
        clen = (size_t)snprintf(child, sizeof child, "%.*s%s%.60s...", (int)len, path, len ? "." : "", name);
        if (clen >= sizeof child) clen = sizeof child - 1;
    }
    child[clen] = '\0';
    if (fits && clen == 10 && memcmp(child, "population", 10) == 0) {
        if (r->population_seen) {
            snprintf(what, sizeof what, "duplicate key (first given on line %d)", r->population_seen);
            return REPORT(r->e, r->src, kev->start_mark, child, what, "give each key once; the second would silently win");
        }
        r->population_seen = (int)kev->start_mark.line + 1;
        r->n_leaves++;
        yaml_event_t pev;
        RLT_TRY(next_event(r, &pev));
        int prc = read_population(r, child, clen, &pev);
        yaml_event_delete(&pev);
        return prc;
    }
    const cfg_key *ck = fits ? config_schema_find(child, clen) : NULL;
    int sec = fits && !ck ? config_schema_section(child, clen) : -1;
    if (!ck && sec < 0) {
        char valid[512];
        snprintf(what, sizeof what, "unknown key '%s'", child);
        if (config_schema_nearest(child, near, sizeof near)) {
            snprintf(hint, sizeof hint, "did you mean '%s'?", near);
        } else {
            config_schema_children(len ? path : "", valid, sizeof valid);
            snprintf(hint, sizeof hint, "valid keys %s%.*s%s are: %s", len ? "under '" : "at the top level", (int)len,
                     path, len ? "'" : "", valid);
        }
        return REPORT(r->e, r->src, kev->start_mark, NULL, what, hint);
    }
    int line = (int)kev->start_mark.line + 1;
    int *seen = ck ? &r->leaf_line[config_schema_index(ck)] : &r->section_line[sec];
    if (*seen) {
        snprintf(what, sizeof what, "duplicate key (first given on line %d)", *seen);
        return REPORT(r->e, r->src, kev->start_mark, child, what, "give each key once; the second would silently win");
    }
    *seen = line;
    if (ck) {
        size_t i = config_schema_index(ck);
        r->dst->origin[i].line = line;
        r->dst->origin[i].col = (int32_t)(kev->start_mark.column + 1 + (kev->start_mark.line == 0 ? r->src->col_offset : 0));
        r->dst->origin[i].src = r->dst->n_sources; /* this input's serial + 1 (config_parse counted it) */
        r->n_leaves++;
    }
    yaml_event_t vev;
    RLT_TRY(next_event(r, &vev));
    int rc = read_node(r, child, clen, &vev);
    yaml_event_delete(&vev);
    return rc;
}

/* The node starting with ev, applied at `path` (len 0: the top level). */
static int read_node(cfg_reader *r, const char *path, size_t len, const yaml_event_t *ev) {
    /* --set population=... or population.KEY=... */
    if (len >= 10 && memcmp(path, "population", 10) == 0 && (len == 10 || path[10] == '.'))
        return read_population(r, path, len, ev);
    const cfg_key *k = len ? config_schema_find(path, len) : NULL;
    if (k && k->type == CFG_CONV_LIST) return read_conv(r, k, ev);
    if (k && k->type == CFG_INPUT_LIST) return read_inputs(r, k, ev);
    /* device: [cuda:0, cuda:1] is the list key devices written where one device goes. */
    if (k && k->type == CFG_DEVICE && ev->type == YAML_SEQUENCE_START_EVENT) k = config_schema_find("devices", 7);
    if (k)
        return k->type == CFG_INT_LIST || k->type == CFG_SEED_LIST || k->type == CFG_DEVICE_LIST ? read_list(r, k, ev)
                                                                                                   : read_scalar(r, k, ev);
    /* A section with nothing under it ("train:" with every key commented out) merges nothing. */
    if (len && is_plain_null(ev)) return RLT_OK;
    if (ev->type != YAML_MAPPING_START_EVENT) {
        char what[128], hint[640], valid[512];
        config_schema_children(len ? path : "", valid, sizeof valid);
        if (!len) {
            snprintf(what, sizeof what, "the top level must be a mapping of keys, not %s", node_kind(ev));
            snprintf(hint, sizeof hint, "write 'key: value' lines, like 'algo: td3'; top-level keys are: %s", valid);
            return REPORT(r->e, r->src, ev->start_mark, NULL, what, hint);
        }
        snprintf(what, sizeof what, "is a section and needs a mapping of keys, not %s", node_kind(ev));
        snprintf(hint, sizeof hint, "write its keys indented below it; valid keys under '%.*s' are: %s", (int)len, path,
                 valid);
        char key[CFG_MAX_PATH + 1];
        snprintf(key, sizeof key, "%.*s", (int)len, path);
        return REPORT(r->e, r->src, ev->start_mark, key, what, hint);
    }
    for (;;) {
        yaml_event_t kev;
        RLT_TRY(next_event(r, &kev));
        int rc = kev.type == YAML_MAPPING_END_EVENT ? RLT_OK : read_entry(r, path, len, &kev);
        int end = kev.type == YAML_MAPPING_END_EVENT;
        yaml_event_delete(&kev);
        if (rc != RLT_OK || end) return rc;
    }
}

/* Reads the one document of the stream into r->dst at root_path. *empty is set when the stream holds no
 * value at all (no document, or a document that is only a null). */
static int read_stream(cfg_reader *r, const char *root_path, int *empty) {
    yaml_event_t ev;
    *empty = 0;
    RLT_TRY(next_event(r, &ev)); /* stream start */
    yaml_event_delete(&ev);
    RLT_TRY(next_event(r, &ev));
    int no_document = ev.type == YAML_STREAM_END_EVENT;
    yaml_event_delete(&ev);
    if (no_document) {
        *empty = 1;
        return RLT_OK;
    }
    RLT_TRY(next_event(r, &ev)); /* the root node */
    int rc = RLT_OK;
    if (is_plain_null(&ev)) *empty = 1;
    else rc = read_node(r, root_path, strlen(root_path), &ev);
    yaml_event_delete(&ev);
    /* Pass 1 has seen the rest of the stream: one document end, no second document. */
    return rc;
}

/* Both passes over src, at root_path ("" for files; the key for --set), then the commit. On any error
 * cfg's values are untouched and cfg->err says why. need_keys: a file must set at least one key. */
static int config_parse(rlt_config *cfg, const cfg_src *src, const char *root_path, int need_value, int need_keys) {
    RLT_TRY(scan_structure(src, &cfg->err));
    rlt_config tmp;
    memcpy(&tmp, cfg, sizeof tmp);
    /* This input's name, for messages about the keys it sets (config_key_where). */
    snprintf(tmp.source_names[tmp.n_sources % RLT_CFG_ORIGINS], RLT_CFG_STR, "%s", src->name);
    tmp.n_sources++;
    cfg_reader r;
    memset(&r, 0, sizeof r);
    r.src = src;
    r.dst = &tmp;
    r.e = &cfg->err;
    if (!yaml_parser_initialize(&r.parser))
        RLT_FAIL(&cfg->err, RLT_ENOMEM, "%.300s: libyaml could not allocate a parser", src->name);
    yaml_parser_set_input_string(&r.parser, src->text, src->len);
    int empty = 0, rc = read_stream(&r, root_path, &empty);
    yaml_parser_delete(&r.parser);
    if (rc != RLT_OK) return rc;
    if (empty && need_value) {
        yaml_mark_t m = {0, 0, 0};
        char hint[512];
        const cfg_key *k = config_schema_find(root_path, strlen(root_path));
        snprintf(hint, sizeof hint, "write %s=VALUE, like %s=%s", root_path, root_path, k ? k->def : "{...}");
        return REPORT(&cfg->err, src, m, root_path, "missing value after '='", hint);
    }
    /* An empty config file (also /dev/null, or only comments or empty sections) would start a run of every
     * default: that is a wrong path or an unsaved file far more often than a wish. */
    if (need_keys && r.n_leaves == 0) {
        yaml_mark_t m = {0, 0, 0};
        return REPORT(&cfg->err, src, m, NULL, "the config file sets no key (it is empty, or only comments)",
                      "check the path; a config names at least its algorithm and environment, like 'algo: td3' and "
                      "'env: {name: pendulum}' (see configs/)");
    }
    if (config_population_settle(&tmp) != RLT_OK) {
        rlt_err_copy(&cfg->err, &tmp.err);
        return cfg->err.status;
    }
    rlt_err_clear(&tmp.err);
    memcpy(cfg, &tmp, sizeof tmp);
    return RLT_OK;
}

/* ---- the public API ---------------------------------------------------------------------------------- */

int rlt_config_init(rlt_config **out) {
    if (!out) return RLT_EINVAL;
    *out = NULL;
    rlt_config *cfg = rlt_mem_alloc(sizeof *cfg, 64);
    if (!cfg) return RLT_ENOMEM;
    config_set_defaults(cfg);
    *out = cfg;
    return RLT_OK;
}

void rlt_config_free(rlt_config *cfg) { rlt_mem_free(cfg); }

const char *rlt_config_errmsg(const rlt_config *cfg) { return cfg ? cfg->err.msg : "config handle is NULL"; }

/* Length up to the first NUL, or limit + 1 when there is none in the first limit + 1 bytes. */
static size_t text_len_capped(const char *s, size_t limit) {
    size_t n = 0;
    while (n <= limit && s[n]) n++;
    return n;
}

static int too_big(rlt_err *e, const char *name) {
    RLT_FAIL(e, RLT_ECONFIG, "%.300s: the input is larger than %u bytes (1 MiB), the most a config may be; a config is "
             "a few dozen lines: is this the right file?", name, CFG_MAX_BYTES);
}

int rlt_config_load_string(rlt_config *cfg, const char *yaml, const char *name_for_errors) {
    if (!cfg) return RLT_EINVAL;
    const char *name = name_for_errors ? name_for_errors : "<string>";
    if (!yaml) RLT_FAIL(&cfg->err, RLT_EINVAL, "rlt_config_load_string: yaml is NULL (%.300s)", name);
    size_t len = text_len_capped(yaml, CFG_MAX_BYTES);
    if (len > CFG_MAX_BYTES) return too_big(&cfg->err, name);
    cfg_src src = {name, (const unsigned char *)yaml, len, 0};
    RLT_TRY(config_parse(cfg, &src, "", 0, 0));
    snprintf(cfg->source, sizeof cfg->source, "%s", name);
    return RLT_OK;
}

int rlt_config_load_file(rlt_config *cfg, const char *path) {
    if (!cfg) return RLT_EINVAL;
    if (!path) RLT_FAIL(&cfg->err, RLT_EINVAL, "rlt_config_load_file: path is NULL");
    /* O_NONBLOCK: opening a FIFO that has no writer would wait for one forever. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        RLT_FAIL(&cfg->err, RLT_EIO, "%.300s: cannot open the config: %s; check the path (relative paths start "
                 "from the current directory)", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || S_ISDIR(st.st_mode)) {
        close(fd);
        RLT_FAIL(&cfg->err, RLT_EIO, "%.300s: not a config file (a directory?)", path);
    }
    /* A pipe or FIFO (`--config <(...)`, /dev/stdin) is read as it comes, but a writer that sends nothing for
     * CFG_PIPE_WAIT_S seconds is taken for none: refused, not waited on forever. */
    if (!S_ISREG(st.st_mode)) {
        struct pollfd pf = {fd, POLLIN, 0};
        int pr;
        while ((pr = poll(&pf, 1, CFG_PIPE_WAIT_S * 1000)) < 0 && errno == EINTR) {
        }
        if (pr == 0) {
            close(fd);
            RLT_FAIL(&cfg->err, RLT_EIO, "%.300s: no config text arrived within %d s (a FIFO with no writer?); give a "
                     "regular file, or start the writer first", path, CFG_PIPE_WAIT_S);
        }
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    /* One byte past the limit tells an oversized file from one of exactly 1 MiB, pipes included. */
    unsigned char *buf = rlt_mem_alloc((size_t)CFG_MAX_BYTES + 1, 64);
    if (!buf) {
        close(fd);
        RLT_FAIL(&cfg->err, RLT_ENOMEM, "%.300s: out of host memory for the config text", path);
    }
    size_t n = 0;
    int read_errno = 0;
    while (n < (size_t)CFG_MAX_BYTES + 1) {
        ssize_t k = read(fd, buf + n, (size_t)CFG_MAX_BYTES + 1 - n);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) read_errno = errno;
        if (k <= 0) break;
        n += (size_t)k;
    }
    close(fd);
    int rc;
    if (read_errno)
        rc = rlt_err_set(&cfg->err, RLT_EIO, __FILE__, __LINE__, "%.300s: cannot read the config: %s", path,
                         strerror(read_errno));
    else if (n > CFG_MAX_BYTES)
        rc = too_big(&cfg->err, path);
    else {
        cfg_src src = {path, buf, n, 0};
        rc = config_parse(cfg, &src, "", 0, 1);
    }
    rlt_mem_free(buf);
    if (rc == RLT_OK) snprintf(cfg->source, sizeof cfg->source, "%s", path);
    return rc;
}

int rlt_config_set_launch(rlt_config *cfg, int32_t rank, int32_t world, int32_t local_rank) {
    if (!cfg) return RLT_EINVAL;
    if (world < 0 || world > RLT_CFG_MAX_DEVICES || (world > 0 && (rank < 0 || rank >= world)) || local_rank < 0)
        RLT_FAIL(&cfg->err, RLT_EINVAL, "rlt_config_set_launch: rank %d of %d ranks, local rank %d (at most %d ranks)",
                 (int)rank, (int)world, (int)local_rank, RLT_CFG_MAX_DEVICES);
    cfg->launch.rank = world > 1 ? rank : 0;
    cfg->launch.world = world > 1 ? world : 0;
    cfg->launch.local_rank = world > 1 ? local_rank : 0;
    return RLT_OK;
}

int rlt_config_describe_gpu(rlt_config *cfg, uint64_t memory_bytes, int32_t arch, uint64_t others_bytes) {
    if (!cfg) return RLT_EINVAL;
    rlt_err_clear(&cfg->err);
    if (memory_bytes == 0 && arch == 0) { /* no description: plans open the real device again */
        memset(&cfg->gpu_desc, 0, sizeof cfg->gpu_desc);
        return RLT_OK;
    }
    const described_arch *row = described_arch_find(arch);
    if (!row)
        RLT_FAIL(&cfg->err, RLT_ECONFIG, "described GPU: no architecture sm_%d in the table (docs/described_gpu.md); "
                 "it has %s", (int)arch, described_arch_names());
    if (memory_bytes < (64u << 20))
        RLT_FAIL(&cfg->err, RLT_ECONFIG, "described GPU: memory of %llu bytes; give the GPU's memory, such as 6GiB",
                 (unsigned long long)memory_bytes);
    if (others_bytes >= memory_bytes)
        RLT_FAIL(&cfg->err, RLT_ECONFIG, "described GPU: other processes hold %.2f GiB of its %.2f GiB: nothing is left",
                 (double)others_bytes / (1u << 30), (double)memory_bytes / (1u << 30));
    cfg->gpu_desc = (rlt_gpu_desc){memory_bytes, others_bytes, arch, 0};
    return RLT_OK;
}

int rlt_config_set(rlt_config *cfg, const char *assignment) {
    if (!cfg) return RLT_EINVAL;
    if (!assignment) RLT_FAIL(&cfg->err, RLT_EINVAL, "rlt_config_set: assignment is NULL");
    size_t len = text_len_capped(assignment, CFG_MAX_BYTES);
    /* The assignment as messages show it: control characters as \xNN, never raw on the terminal. */
    char name[1200];
    rlt_text nt = {name, sizeof name, 0};
    rlt_text_add(&nt, "--set ");
    for (size_t i = 0; i < len && i < 280; i++) {
        unsigned char ch = (unsigned char)assignment[i];
        if (ch < 0x20 || ch == 0x7f) rlt_text_add(&nt, "\\x%02x", ch);
        else rlt_text_add(&nt, "%c", ch);
    }
    rlt_text_add(&nt, "%s", len > 280 ? "..." : "");
    if (len > CFG_MAX_BYTES) return too_big(&cfg->err, name);
    /* A raw newline in a value would be folded by YAML into a space (out_dir "a<newline>b" would become "a b",
     * another path), and other control characters would reach the terminal when echoed: refused. */
    for (size_t i = 0; i < len; i++)
        if (((unsigned char)assignment[i] < 0x20 && assignment[i] != '\t') || (unsigned char)assignment[i] == 0x7f)
            RLT_FAIL(&cfg->err, RLT_ECONFIG, "%s: contains the control character 0x%02x at byte %zu; use printable "
                     "characters only (a YAML escape such as \\n inside double quotes is refused by string keys too)",
                     name, (unsigned char)assignment[i], i);
    const char *eq = memchr(assignment, '=', len);
    if (!eq)
        RLT_FAIL(&cfg->err, RLT_ECONFIG, "%s: missing '='; write key.path=value, like train.batch_size=64", name);
    /* The key, without the spaces around it. */
    size_t k0 = 0, k1 = (size_t)(eq - assignment);
    while (k0 < k1 && assignment[k0] == ' ') k0++;
    while (k1 > k0 && assignment[k1 - 1] == ' ') k1--;
    char key[CFG_MAX_PATH + 1];
    yaml_mark_t at_key = {0, 0, 0};
    at_key.column = k0;
    cfg_src src = {name, (const unsigned char *)eq + 1, len - (size_t)(eq + 1 - assignment), (size_t)(eq + 1 - assignment)};
    if (k1 == k0) {
        cfg_src ksrc = {name, (const unsigned char *)assignment, len, 0};
        return REPORT(&cfg->err, &ksrc, at_key, NULL, "no key before '='",
                      "write key.path=value, like train.batch_size=64");
    }
    snprintf(key, sizeof key, "%.*s", (int)(k1 - k0), assignment + k0);
    int is_pop = k1 - k0 >= 10 && memcmp(key, "population", 10) == 0 && (key[10] == '\0' || key[10] == '.');
    if (k1 - k0 > CFG_MAX_PATH ||
        (!is_pop && !config_schema_find(key, strlen(key)) && config_schema_section(key, strlen(key)) < 0)) {
        char what[300], hint[1024], near[128], valid[512];
        cfg_src ksrc = {name, (const unsigned char *)assignment, len, 0};
        snprintf(what, sizeof what, "unknown key '%s'", key);
        const char *bracket = strchr(key, '[');
        const cfg_key *whole = bracket ? config_schema_find(key, (size_t)(bracket - key)) : NULL;
        if (whole) {
            /* network.conv[1].kernel=5: --set replaces a list whole; there is no per-entry path. */
            snprintf(hint, sizeof hint, "--set replaces a list whole: write the entire value, like "
                     "%s='%s' (a YAML flow list)", whole->key,
                     whole->type == CFG_CONV_LIST ? "[{out: 16, kernel: 3, stride: 1}]" : whole->def);
        } else if (config_schema_nearest(key, near, sizeof near)) {
            snprintf(hint, sizeof hint, "did you mean '%s'?", near);
        } else {
            config_schema_children("", valid, sizeof valid);
            snprintf(hint, sizeof hint, "valid keys at the top level are: %s", valid);
        }
        return REPORT(&cfg->err, &ksrc, at_key, NULL, what, hint);
    }
    RLT_TRY(config_parse(cfg, &src, key, 1, 0));
    /* A key set whole by --set is at its own column (its section's keys were recorded by the reader). */
    const cfg_key *leaf = config_schema_find(key, strlen(key));
    if (leaf) {
        size_t i = config_schema_index(leaf);
        cfg->origin[i].line = 1;
        cfg->origin[i].col = (int32_t)k0 + 1;
        cfg->origin[i].src = cfg->n_sources;
    }
    return RLT_OK;
}

const char *config_key_where(const rlt_config *cfg, const char *key, char *buf, size_t cap) {
    const cfg_key *k = config_schema_find(key, strlen(key));
    uint32_t src = k ? cfg->origin[config_schema_index(k)].src : 0;
    /* src - 1 is the input's serial; its name is kept while it is among the last RLT_CFG_ORIGINS inputs. */
    if (src && cfg->n_sources - (src - 1) <= RLT_CFG_ORIGINS) {
        size_t i = config_schema_index(k);
        snprintf(buf, cap, "%.300s:%d:%d: key '%s'", cfg->source_names[(src - 1) % RLT_CFG_ORIGINS],
                 (int)cfg->origin[i].line, (int)cfg->origin[i].col, key);
    } else {
        snprintf(buf, cap, "config: key '%s'", key);
    }
    return buf;
}

int rlt_config_validate(rlt_config *cfg) {
    if (!cfg) return RLT_EINVAL;
    rlt_err *e = &cfg->err;
    size_t n;
    const cfg_key *keys = config_schema_keys(&n);
    char where[400];
    for (size_t i = 0; i < n; i++) {
        cfg_why why;
        if (config_schema_check_value(&keys[i], cfg, &why) != 0)
            RLT_FAIL(e, RLT_ECONFIG, "%s: %s; %s", config_key_where(cfg, keys[i].key, where, sizeof where), why.what,
                     why.hint);
    }
    /* Values the parser accepts because they are planned, but that this version cannot run yet. */
    if (cfg->dqn.eps_end > cfg->dqn.eps_start)
        RLT_FAIL(e, RLT_ECONFIG, "%s: %g is above dqn.eps_start %g; epsilon only decays",
                 config_key_where(cfg, "dqn.eps_end", where, sizeof where), cfg->dqn.eps_end, cfg->dqn.eps_start);
    if (cfg->train.batch_size % cfg->train.grad_accum_steps != 0)
        RLT_FAIL(e, RLT_ECONFIG, "%s: %d does not divide train.batch_size (%d); "
                 "use a divisor of the batch size (each micro-batch is batch_size / grad_accum_steps)",
                 config_key_where(cfg, "train.grad_accum_steps", where, sizeof where), (int)cfg->train.grad_accum_steps,
                 (int)cfg->train.batch_size);
    /* network.inputs gives each image part its own torso; network.conv is the torso of a plain observation. */
    if (cfg->network.inputs.n > 0 && cfg->network.conv.n > 0)
        RLT_FAIL(e, RLT_ECONFIG, "%s: a convolutional torso is set beside network.inputs; with several inputs each "
                 "image's torso is its input's `torso`: write network.conv: none",
                 config_key_where(cfg, "network.conv", where, sizeof where));
    /* Several training environments: the loop advances num_envs steps at a time, so the step counts it acts on
     * must fall on its iterations (DQN's own schedule visits every step in between: agents/dqn.c). */
    int32_t ne = cfg->env.num_envs;
    if (ne > 1) {
        const char *keys_n[3] = {"train.total_steps", "train.eval_every", "checkpoint.every"};
        int64_t vals[3] = {cfg->train.total_steps, cfg->train.eval_every, cfg->checkpoint.every};
        for (int i = 0; i < 3; i++)
            if (vals[i] % ne != 0)
                RLT_FAIL(e, RLT_ECONFIG, "%s: %lld is not a multiple of env.num_envs (%d); each iteration steps every "
                         "environment once, so step counts are multiples of it", config_key_where(cfg, keys_n[i], where,
                         sizeof where), (long long)vals[i], (int)ne);
    }
    /* Several devices with one seed: data-parallel ranks, each with an equal share of every batch, averaging
     * their gradients every update. */
    /* A run launched as one process per device (rlt_config_set_launch): each process one rank on one device. */
    if (cfg->launch.world > 1) {
        if (cfg->train.num_seeds > 1 || cfg->train.seeds.n > 1)
            RLT_FAIL(e, RLT_ECONFIG, "%s: a seed group cannot run as the %d processes of a launched data-parallel run "
                     "(torchrun, srun, mpirun): run it in one process, or give one seed",
                     config_key_where(cfg, cfg->train.seeds.n > 1 ? "train.seeds" : "train.num_seeds", where, sizeof where),
                     (int)cfg->launch.world);
        if (cfg->devices.n > 1)
            RLT_FAIL(e, RLT_ECONFIG, "%s: %d devices in a process of a launched run of %d processes: each process is one "
                     "rank on one device (a GPU: cuda:LOCAL_RANK); write device: cuda (or cpu) instead",
                     config_key_where(cfg, "devices", where, sizeof where), (int)cfg->devices.n, (int)cfg->launch.world);
        if (cfg->device.kind == RLT_DEVICE_AUTO)
            RLT_FAIL(e, RLT_ECONFIG, "%s: auto in a process of a launched run of %d processes: every rank needs the same "
                     "kind of device; write device: cuda (each process takes cuda:LOCAL_RANK) or cpu",
                     config_key_where(cfg, "device", where, sizeof where), (int)cfg->launch.world);
    }
    if (config_is_data_parallel(cfg)) {
        int32_t R = config_world(cfg);
        if (cfg->train.batch_size % R != 0)
            RLT_FAIL(e, RLT_ECONFIG, "%s: %d does not split evenly over the %d devices of a data-parallel run (each takes "
                     "an equal share of every batch); use a multiple of %d", config_key_where(cfg, "train.batch_size",
                     where, sizeof where), (int)cfg->train.batch_size, (int)R, (int)R);
        if (cfg->memory.on_oom == RLT_ON_OOM_CPU)
            RLT_FAIL(e, RLT_ECONFIG, "%s: cpu with %d devices: one rank falling back to the CPU cannot average with the "
                     "others; use memory.on_oom: fail", config_key_where(cfg, "memory.on_oom", where, sizeof where),
                     (int)R);
    }
    /* A seed group's members: one of the two keys names them. */
    if (cfg->train.seeds.n > 0 && cfg->train.num_seeds > 1)
        RLT_FAIL(e, RLT_ECONFIG, "%s: %d, and train.seeds lists %d seeds: both name the members of a seed group; give "
                 "one of them (train.seeds: [] or train.num_seeds: 1 clears one)",
                 config_key_where(cfg, "train.num_seeds", where, sizeof where), (int)cfg->train.num_seeds,
                 (int)cfg->train.seeds.n);
    if (cfg->train.num_seeds > 1 && cfg->seed > UINT64_MAX - (uint64_t)(cfg->train.num_seeds - 1))
        RLT_FAIL(e, RLT_ECONFIG, "%s: %d seeds from seed %llu would pass the largest seed (2^64 - 1); use a smaller seed",
                 config_key_where(cfg, "train.num_seeds", where, sizeof where), (int)cfg->train.num_seeds,
                 (unsigned long long)cfg->seed);
    RLT_TRY(config_population_check(cfg));
    rlt_err_clear(e);
    return RLT_OK;
}

rlt_device config_device(const rlt_config *cfg) { return cfg->devices.n >= 1 ? cfg->devices.d[0] : cfg->device; }

int config_is_data_parallel(const rlt_config *cfg) {
    return (cfg->devices.n > 1 || cfg->launch.world > 1) && cfg->train.num_seeds <= 1 && cfg->train.seeds.n <= 1 &&
           cfg->population.n == 0;
}

int32_t config_world(const rlt_config *cfg) { return cfg->launch.world > 1 ? cfg->launch.world : cfg->devices.n; }

void config_for_rank(const rlt_config *cfg, int32_t rank, rlt_config *out) {
    const int32_t R = config_world(cfg);
    *out = *cfg;
    if (cfg->launch.world > 1) {
        /* A process of a launched run: its one device, the GPU of its local rank when the config names a GPU. */
        if (cfg->device.kind == RLT_DEVICE_CUDA) out->device.index = cfg->launch.local_rank;
    } else {
        out->device = cfg->devices.d[rank];
    }
    memset(&out->devices, 0, sizeof out->devices);
    out->rank = rank;
    out->n_ranks = R;
    out->train.batch_size = cfg->train.batch_size / R;
    out->replay.capacity = (cfg->replay.capacity + R - 1) / R;
}

/* ---- the dump ---------------------------------------------------------------------------------------- */


/* Nested mappings in table order: a section opens when a key's path leaves the previous key's sections
 * (the schema keeps each section's rows together, so each opens once). */
size_t rlt_config_dump(const rlt_config *cfg, char *buf, size_t cap) {
    if (!buf) cap = 0; /* NULL asks for the length only, as snprintf(NULL, 0, ...) does */
    rlt_text o = {buf, cap, 0};
    if (cap) buf[0] = '\0';
    if (!cfg) return 0;
    size_t n;
    const cfg_key *keys = config_schema_keys(&n);
    const char *prev = "";
    size_t prev_sec = 0; /* length of the previous key's section path, "" = 0 */
    for (size_t i = 0; i < n; i++) {
        const char *key = keys[i].key;
        const char *leaf = strrchr(key, '.');
        size_t sec = leaf ? (size_t)(leaf - key) : 0;
        leaf = leaf ? leaf + 1 : key;
        /* The sections shared with the previous key stay open; open the rest. */
        size_t depth = 0, j = 0;
        for (;;) {
            size_t ea = j, eb = j;
            while (ea < sec && key[ea] != '.') ea++;
            while (eb < prev_sec && prev[eb] != '.') eb++;
            if (j >= sec || j >= prev_sec || ea != eb || memcmp(key + j, prev + j, ea - j) != 0) break;
            depth++;
            j = ea + 1;
        }
        while (j < sec) {
            size_t end = j;
            while (end < sec && key[end] != '.') end++;
            rlt_text_add(&o, "%*s%.*s:\n", (int)(2 * depth), "", (int)(end - j), key + j);
            depth++;
            j = end + 1;
        }
        char val[4 * RLT_CFG_STR + 64];
        config_schema_format(&keys[i], cfg, val, sizeof val);
        rlt_text_add(&o, "%*s%s: %s\n", (int)(2 * depth), "", leaf, val);
        prev = key;
        prev_sec = sec;
    }
    config_population_dump(cfg, &o);
    return o.len;
}

size_t rlt_config_get(rlt_config *cfg, const char *key, char *buf, size_t cap) {
    if (!buf) cap = 0;
    if (cap) buf[0] = '\0';
    if (!cfg || !key) return 0;
    const cfg_key *k = config_schema_find(key, strlen(key));
    if (!k) {
        char near[96];
        const char *n = config_schema_nearest(key, near, sizeof near);
        rlt_err_set(&cfg->err, RLT_ECONFIG, __FILE__, __LINE__, "rlt_config_get: unknown key '%s'%s%s%s", key,
                    n ? "; did you mean '" : "", n ? n : "", n ? "'?" : "");
        return 0;
    }
    return config_schema_format(k, cfg, buf, cap);
}

rlt_config *rlt_config_clone(const rlt_config *cfg) {
    if (!cfg) return NULL;
    rlt_config *c = rlt_mem_alloc(sizeof *c, 16);
    if (c) *c = *cfg;
    return c;
}
