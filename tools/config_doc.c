/* config_doc.c: writes docs/configuration.md, the reference of every configuration key, from the schema table
 * (engine/config_schema.c) that the parser, the defaults, the range checks and the dump walk, so the document
 * cannot say something the parser does not do. Each key gets its type, the values it accepts, its default and
 * the table's one-line doc.
 *
 *   rltrain_config_doc                 the markdown on stdout
 *   rltrain_config_doc -o FILE         the markdown into FILE (what `cmake --build build --target config_doc` runs)
 *   rltrain_config_doc --check FILE    exit 1, naming the first line that differs, when FILE is not what it
 *                                      would write (the ctest test docs_configuration_current) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "config_schema.h"
#include "text.h"

#define DOC_CAP (1u << 20)
#ifndef RLT_BINARY_DIR
#define RLT_BINARY_DIR "<build dir>" /* CMakeLists.txt names the build directory */
#endif

/* Cell text for a markdown table: '|' would end the cell and '<' would open an HTML tag ("seed_<seed>").
 * sep: what a '|' becomes (the values column lists choices "a|b" as "a, b"). */
static void add_cell(rlt_text *o, const char *s, const char *sep) {
    for (; *s; s++) {
        if (*s == '|') rlt_text_add(o, "%s", sep);
        else if (*s == '<') rlt_text_add(o, "&lt;");
        else if (*s == '\n') rlt_text_add(o, " ");
        else rlt_text_add(o, "%c", *s);
    }
}

static const char *type_name(const cfg_key *k) {
    switch (k->type) {
    case CFG_INT32:
    case CFG_INT64: return "integer";
    case CFG_UINT64: return "integer (64-bit)";
    case CFG_DOUBLE: return (k->flags & CFG_MIB) ? "number (MiB)" : "number";
    case CFG_BOOL: return "bool";
    case CFG_ENUM: return "enum";
    case CFG_DEVICE: return "device";
    case CFG_NAME: return "name";
    case CFG_STRING: return "string";
    case CFG_INT_LIST: return "list of integers";
    case CFG_CONV_LIST: return "conv layers";
    case CFG_SEED_LIST: return "list of seeds";
    case CFG_INPUT_LIST: return "list of inputs";
    case CFG_DEVICE_LIST: return "list of devices";
    }
    return "?";
}

/* What a row accepts, in the words of the parser's messages (config_schema_range_text, _choices). */
static void values_text(const cfg_key *k, char *buf, size_t cap) {
    char r[160];
    switch (k->type) {
    case CFG_INT32:
    case CFG_INT64:
    case CFG_UINT64:
    case CFG_DOUBLE: config_schema_range_text(k, buf, cap); break;
    case CFG_BOOL: snprintf(buf, cap, "true, false"); break;
    case CFG_ENUM:
    case CFG_DEVICE:
    case CFG_NAME: config_schema_choices(k, buf, cap); break;
    case CFG_STRING: snprintf(buf, cap, "%.0f to %.0f bytes", k->lo, k->hi); break;
    case CFG_INT_LIST:
        config_schema_range_text(k, r, sizeof r);
        snprintf(buf, cap, "1 to %d entries, each in %s", RLT_CFG_MAX_LAYERS, r);
        break;
    case CFG_CONV_LIST:
        snprintf(buf, cap, "nature, minatar, none, or 1 to %d layers {out, kernel, stride, pad}", RLT_CFG_MAX_CONV);
        break;
    case CFG_SEED_LIST: snprintf(buf, cap, "0 to %d distinct 64-bit integers", RLT_CFG_MAX_SEEDS); break;
    case CFG_INPUT_LIST:
        snprintf(buf, cap, "none, or 1 to %d inputs {name, shape, dtype, high, torso}", RLT_CFG_MAX_INPUTS);
        break;
    case CFG_DEVICE_LIST:
        snprintf(buf, cap, "0 to %d entries, each cpu or cuda:N, one kind, each GPU once", RLT_CFG_MAX_DEVICES);
        break;
    }
}

/* The section of a dotted key ("train" for "train.batch_size"), or 0 length for a top-level key. */
static size_t section_len(const char *key) {
    const char *dot = strchr(key, '.');
    return dot ? (size_t)(dot - key) : 0;
}

static int same_section(const char *a, const char *b) {
    size_t la = section_len(a), lb = section_len(b);
    return la == lb && (la == 0 || memcmp(a, b, la) == 0);
}

static void write_doc(rlt_text *o) {
    size_t n = 0;
    const cfg_key *keys = config_schema_keys(&n);
    rlt_text_add(o, "# Configuration reference\n\n");
    rlt_text_add(o,
                 "Every key a config file or `--set` can give, in the order of the schema table: its type, the values it "
                 "accepts, its default (as YAML) and what it does. %zu keys.\n\n",
                 n);
    rlt_text_add(o,
                 "This file is generated from `engine/config_schema.c` by `tools/config_doc.c`; do not edit it. After "
                 "changing the table, regenerate it with\n\n"
                 "```sh\ncmake --build build --target config_doc\n```\n\n"
                 "(the ctest test `docs_configuration_current` fails until it matches). How configs are read, the ready "
                 "configs in `configs/` and the keys that need more than a line: [config_guide.md](config_guide.md). "
                 "`rltrain --config X --dry-run` prints every key with its resolved value.\n");
    size_t i = 0;
    while (i < n) {
        /* One table per run of rows of one section; a run of top-level keys is headed by their names. */
        size_t end = i + 1;
        while (end < n && same_section(keys[end].key, keys[i].key)) end++;
        rlt_text_add(o, "\n## ");
        size_t sl = section_len(keys[i].key);
        if (sl) rlt_text_add(o, "%.*s\n", (int)sl, keys[i].key);
        else
            for (size_t j = i; j < end; j++) rlt_text_add(o, "%s%s", keys[j].key, j + 1 < end ? ", " : "\n");
        rlt_text_add(o, "\n| key | type | values | default | meaning |\n|---|---|---|---|---|\n");
        for (size_t j = i; j < end; j++) {
            const cfg_key *k = &keys[j];
            char values[256];
            values_text(k, values, sizeof values);
            rlt_text_add(o, "| `%s` | %s | ", k->key, type_name(k));
            add_cell(o, values, ", ");
            rlt_text_add(o, " | `");
            add_cell(o, k->def, "\\|");
            rlt_text_add(o, "` | ");
            add_cell(o, k->doc, "\\|");
            rlt_text_add(o, " |\n");
        }
        i = end;
    }
}

/* The whole of path into a malloc'd buffer, NUL-terminated; NULL when it cannot be read. */
static char *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = DOC_CAP + 1, n = 0;
    char *b = malloc(cap + 1);
    if (b) n = fread(b, 1, cap, f);
    fclose(f);
    if (!b) return NULL;
    b[n] = '\0';
    *len = n;
    return b;
}

/* 0 when the file holds exactly doc; otherwise the first line that differs goes to stderr. */
static int check_file(const char *path, const char *doc, size_t len) {
    size_t flen = 0;
    char *have = read_all(path, &flen);
    if (!have) {
        fprintf(stderr, "config_doc: cannot read %s\n", path);
        return 1;
    }
    int same = flen == len && memcmp(have, doc, len) == 0;
    if (!same) {
        size_t line = 1, p = 0;
        while (p < len && p < flen && doc[p] == have[p]) line += doc[p++] == '\n';
        size_t a = p, b = p;
        while (a > 0 && doc[a - 1] != '\n') a--;
        while (b < len && doc[b] != '\n') b++;
        const char *h = have + a, *he = strchr(h, '\n'); /* a <= p <= flen: a line start in the file too */
        int hl = (int)(he ? (size_t)(he - h) : strlen(h));
        fprintf(stderr,
                "config_doc: %s is not what the schema (engine/config_schema.c) generates; first difference at line %zu:\n"
                "  file:      %.*s\n  generated: %.*s\n",
                path, line, hl ? hl : 5, hl ? h : "(end)", b > a ? (int)(b - a) : 5, b > a ? doc + a : "(end)");
    }
    free(have);
    return same ? 0 : 1;
}

int main(int argc, char **argv) {
    const char *out = NULL, *check = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-o") == 0 && i + 1 < argc) out = argv[++i];
        else if (strcmp(argv[i], "--check") == 0 && i + 1 < argc) check = argv[++i];
        else {
            fprintf(stderr, "usage: rltrain_config_doc [-o FILE | --check FILE]\n");
            return 2;
        }
    }
    char why[256];
    if (config_schema_selftest(why, sizeof why) != 0) {
        fprintf(stderr, "config_doc: the schema table is inconsistent: %s\n", why);
        return 1;
    }
    char *buf = malloc(DOC_CAP);
    if (!buf) return 1;
    rlt_text o = {buf, DOC_CAP, 0};
    write_doc(&o);
    if (o.len >= DOC_CAP) {
        fprintf(stderr, "config_doc: the document is larger than %u bytes; raise DOC_CAP\n", DOC_CAP);
        free(buf);
        return 1;
    }
    int rc = 0;
    if (check) {
        rc = check_file(check, buf, o.len);
        if (rc)
            fprintf(stderr, "regenerate it with: cmake --build %s --target config_doc\n"
                            "  (or: %s -o %s), and commit the result\n", RLT_BINARY_DIR, argv[0], check);
    } else {
        FILE *f = out ? fopen(out, "wb") : stdout;
        int ok = f && fwrite(buf, 1, o.len, f) == o.len;
        if (out && f && fclose(f) != 0) ok = 0;
        if (!ok) {
            fprintf(stderr, "config_doc: cannot write %s\n", out ? out : "stdout");
            rc = 1;
        }
    }
    free(buf);
    return rc;
}
