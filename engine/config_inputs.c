/* config_inputs.c: network.inputs' fields, checks, YAML text and the dict row layout (see config_inputs.h). */
#include "config_inputs.h"

#include <stdio.h>
#include <string.h>

#include "config_conv.h"
#include "env.h"

static const char *const field_names[INPUT_F_COUNT] = {"name", "shape", "dtype", "torso", "high"};
/* The dict row is at most as large as any observation may be (bytes count as its elements). */
#define INPUT_MAX_ROW_BYTES ((int64_t)RLT_ENV_MAX_OBS_ELEMS)
#define INPUT_MAX_DIM 65536

int config_inputs_field(const char *name, size_t n) {
    for (int f = 0; f < INPUT_F_COUNT; f++)
        if (strlen(field_names[f]) == n && memcmp(field_names[f], name, n) == 0) return f;
    return -1;
}

const char *config_inputs_field_name(int f) { return f >= 0 && f < INPUT_F_COUNT ? field_names[f] : "?"; }

/* A scalar as messages show it: at most 40 bytes, control characters and quotes as '?'. */
static const char *shown(const char *t, size_t n, char *buf, size_t cap) {
    size_t o = 0, lim = n < 40 ? n : 40;
    for (size_t i = 0; i < lim && o + 1 < cap; i++) {
        unsigned char c = (unsigned char)t[i];
        buf[o++] = (c < 0x20 || c == 0x7f || c == '"') ? '?' : (char)c;
    }
    if (n > lim && o + 4 < cap) memcpy(buf + o, "...", 3), o += 3;
    buf[o] = '\0';
    return buf;
}

static int name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

/* Names appear in plan entries, checkpoints and messages unquoted, so they keep to a plain alphabet. */
static int name_ok(const char *t, size_t n) {
    if (n < 1 || n >= RLT_CFG_INPUT_NAME) return 0;
    for (size_t i = 0; i < n; i++)
        if (!name_char(t[i])) return 0;
    return 1;
}

int config_inputs_set_name(rlt_input_spec *s, const char *t, size_t n, cfg_why *why) {
    char b[64];
    if (!name_ok(t, n)) {
        snprintf(why->what, sizeof why->what, "'%s' is not a valid input name", shown(t, n, b, sizeof b));
        snprintf(why->hint, sizeof why->hint, "a name is 1 to %d characters of letters, digits, '_' and '-', and "
                 "matches the key of the observation's dict (like screen, minimap or player)", RLT_CFG_INPUT_NAME - 1);
        return -1;
    }
    memset(s->name, 0, sizeof s->name);
    memcpy(s->name, t, n);
    return 0;
}

int config_inputs_set_dtype(rlt_input_spec *s, const char *t, size_t n, cfg_why *why) {
    char b[64];
    if (n == 2 && memcmp(t, "u8", 2) == 0) s->dtype = RLT_DTYPE_U8;
    else if (n == 3 && memcmp(t, "f32", 3) == 0) s->dtype = RLT_DTYPE_F32;
    else {
        snprintf(why->what, sizeof why->what, "'%s' is not one of u8|f32", shown(t, n, b, sizeof b));
        snprintf(why->hint, sizeof why->hint, "u8 for uint8 images (scaled by 1/high into the network), f32 for "
                 "float32 values (the default)");
        return -1;
    }
    return 0;
}

int config_inputs_set_high(rlt_input_spec *s, const char *t, size_t n, cfg_why *why) {
    char b[64];
    long v = 0;
    size_t i = 0;
    for (; i < n && i < 4 && t[i] >= '0' && t[i] <= '9'; i++) v = v * 10 + (t[i] - '0');
    if (n == 0 || i != n || v < 1 || v > 255) {
        snprintf(why->what, sizeof why->what, "'%s' is not an integer in [1, 255]", shown(t, n, b, sizeof b));
        snprintf(why->hint, sizeof why->hint, "the largest value of the u8 part: 1 for 0/1 planes, 255 (the default) "
                 "for camera frames; the network sees value / high");
        return -1;
    }
    s->high = (int32_t)v;
    return 0;
}

float config_inputs_u8_scale(const rlt_input_spec *s) { return 1.0f / (float)(s->high > 0 ? s->high : 255); }

int config_inputs_set_dim(rlt_input_spec *s, int index, const char *t, size_t n, int plain, cfg_why *why) {
    char b[64];
    if (index >= 3) {
        snprintf(why->what, sizeof why->what, "has more than 3 entries");
        snprintf(why->hint, sizeof why->hint, "a shape is [D] for a vector or [C, H, W] for an image");
        return -1;
    }
    int64_t v = 0;
    int ok = plain && n >= 1 && n <= 6 && !(t[0] == '0' && n > 1);
    for (size_t i = 0; ok && i < n; i++) {
        if (t[i] < '0' || t[i] > '9') ok = 0;
        else v = v * 10 + (t[i] - '0');
    }
    if (!ok || v < 1 || v > INPUT_MAX_DIM) {
        snprintf(why->what, sizeof why->what, "entry %d must be an integer in [1, %d] (got %s\"%s\")", index + 1,
                 INPUT_MAX_DIM, plain ? "" : "the quoted string ", shown(t, n, b, sizeof b));
        snprintf(why->hint, sizeof why->hint, "write the shape without quotes, like [4] or [1, 8, 8]");
        return -1;
    }
    s->shape[index] = (int32_t)v;
    s->ndim = index + 1;
    return 0;
}

int config_inputs_set_scalar(rlt_input_list *l, const char *t, size_t n, cfg_why *why) {
    char b[64];
    if (n == 4 && memcmp(t, "none", 4) == 0) {
        memset(l, 0, sizeof *l);
        return 0;
    }
    snprintf(why->what, sizeof why->what, "expected none or a list of inputs, got '%s'", shown(t, n, b, sizeof b));
    snprintf(why->hint, sizeof why->hint, "write none (one plain observation) or a list like " INPUT_EXAMPLE);
    return -1;
}

static int64_t part_elems(const rlt_input_spec *s) {
    int64_t e = 1;
    for (int32_t i = 0; i < s->ndim && i < 3; i++) e *= s->shape[i];
    return e;
}

static int64_t dtype_size(int32_t dtype) { return dtype == RLT_DTYPE_U8 ? 1 : 4; }

void config_inputs_layout(const rlt_input_list *l, rlt_input_layout *out) {
    memset(out, 0, sizeof *out);
    int32_t n = l->n < 0 ? 0 : (l->n > RLT_CFG_MAX_INPUTS ? RLT_CFG_MAX_INPUTS : l->n);
    int64_t off = 0;
    for (int32_t i = 0; i < n; i++) {
        out->offset[i] = off;
        out->elems[i] = part_elems(&l->in[i]);
        off += out->elems[i] * dtype_size(l->in[i].dtype);
        off = (off + 3) & ~(int64_t)3;
    }
    out->n = n;
    out->row_bytes = off;
}

static const char *dtype_name(int32_t d) { return d == RLT_DTYPE_U8 ? "u8" : "f32"; }

static void shape_add(rlt_text *o, const rlt_input_spec *s) {
    rlt_text_add(o, "[");
    for (int32_t i = 0; i < s->ndim && i < 3; i++) rlt_text_add(o, "%s%d", i ? ", " : "", (int)s->shape[i]);
    rlt_text_add(o, "]");
}

void config_inputs_layout_text(rlt_text *o, const rlt_input_list *l) {
    rlt_input_layout lay;
    config_inputs_layout(l, &lay);
    for (int32_t i = 0; i < lay.n; i++) {
        rlt_text_add(o, "%s%s: %s ", i ? ", " : "", l->in[i].name, dtype_name(l->in[i].dtype));
        shape_add(o, &l->in[i]);
        rlt_text_add(o, " at byte %lld", (long long)lay.offset[i]);
    }
    rlt_text_add(o, " (%lld bytes a row)", (long long)lay.row_bytes);
}

int config_inputs_check(const rlt_input_list *l, cfg_why *why) {
    why->what[0] = why->hint[0] = '\0';
    if (l->n < 0 || l->n > RLT_CFG_MAX_INPUTS) {
        snprintf(why->what, sizeof why->what, "has %d inputs", (int)l->n);
        snprintf(why->hint, sizeof why->hint, "give 1 to %d inputs, or none", RLT_CFG_MAX_INPUTS);
        return -1;
    }
    int32_t convs = 0;
    int64_t row = 0;
    for (int32_t i = 0; i < l->n; i++) {
        const rlt_input_spec *s = &l->in[i];
        const char *nul = memchr(s->name, '\0', sizeof s->name);
        size_t nl = nul ? (size_t)(nul - s->name) : sizeof s->name;
        if (!nul || !name_ok(s->name, nl)) {
            snprintf(why->what, sizeof why->what, "input [%d] has no valid name", (int)i);
            snprintf(why->hint, sizeof why->hint, "give each input a name of 1 to %d letters, digits, '_' or '-'",
                     RLT_CFG_INPUT_NAME - 1);
            return -1;
        }
        for (int32_t j = 0; j < i; j++)
            if (strncmp(l->in[j].name, s->name, sizeof s->name) == 0) {
                snprintf(why->what, sizeof why->what, "input [%d] is named '%s' like input [%d]", (int)i, s->name, (int)j);
                snprintf(why->hint, sizeof why->hint, "each input's name is the key of one part of the observation's "
                         "dict; give each a different name");
                return -1;
            }
        if (s->ndim != 1 && s->ndim != 3) {
            snprintf(why->what, sizeof why->what, "input '%s' has a shape of %d entries", s->name, (int)s->ndim);
            snprintf(why->hint, sizeof why->hint, "a shape is [D] for a vector or [C, H, W] for an image");
            return -1;
        }
        for (int32_t d = 0; d < 3; d++)
            if ((d < s->ndim && (s->shape[d] < 1 || s->shape[d] > INPUT_MAX_DIM)) || (d >= s->ndim && s->shape[d] != 0)) {
                snprintf(why->what, sizeof why->what, "input '%s' has shape entry %d = %d", s->name, (int)d + 1,
                         (int)s->shape[d]);
                snprintf(why->hint, sizeof why->hint, "each entry is in [1, %d]; code wrote the field directly? set "
                         "it through rlt_config_set", INPUT_MAX_DIM);
                return -1;
            }
        if (s->dtype != RLT_DTYPE_U8 && s->dtype != RLT_DTYPE_F32) {
            snprintf(why->what, sizeof why->what, "input '%s' has dtype %d", s->name, (int)s->dtype);
            snprintf(why->hint, sizeof why->hint, "dtype is u8 or f32");
            return -1;
        }
        if (s->high < 0 || s->high > 255 || (s->high != 0 && s->dtype != RLT_DTYPE_U8)) {
            snprintf(why->what, sizeof why->what, "input '%s' has high %d with dtype %s", s->name, (int)s->high,
                     s->dtype == RLT_DTYPE_U8 ? "u8" : "f32");
            snprintf(why->hint, sizeof why->hint, "high (1..255) is for u8 parts only; f32 parts enter unscaled");
            return -1;
        }
        if (s->torso.n > 0 && s->ndim != 3) {
            snprintf(why->what, sizeof why->what, "input '%s' is a vector of shape [%d] but has a convolutional torso",
                     s->name, (int)s->shape[0]);
            snprintf(why->hint, sizeof why->hint, "a vector goes straight to the head: write torso: none (or leave "
                     "it out); a torso needs an image shape [C, H, W]");
            return -1;
        }
        if (s->torso.preset != RLT_CONV_PRESET_NONE || s->torso.n != 0) {
            cfg_why cw;
            if (config_conv_check(&s->torso, &cw) != 0) {
                snprintf(why->what, sizeof why->what, "input '%s': torso %.300s", s->name, cw.what);
                snprintf(why->hint, sizeof why->hint, "%.480s", cw.hint);
                return -1;
            }
        }
        convs += s->torso.n;
        row += part_elems(s) * dtype_size(s->dtype);
        row = (row + 3) & ~(int64_t)3;
    }
    for (int32_t i = l->n; i < RLT_CFG_MAX_INPUTS; i++) {
        static const rlt_input_spec zero;
        if (memcmp(&l->in[i], &zero, sizeof zero) != 0) {
            snprintf(why->what, sizeof why->what, "holds data past its %d inputs", (int)l->n);
            snprintf(why->hint, sizeof why->hint, "code wrote the field directly; set it through rlt_config_set");
            return -1;
        }
    }
    if (convs > RLT_CFG_MAX_CONV) {
        snprintf(why->what, sizeof why->what, "has %d convolution layers over all its torsos", (int)convs);
        snprintf(why->hint, sizeof why->hint, "use at most %d in all (the training and acting copies share the "
                 "backend's %d prepared convolution slots)", RLT_CFG_MAX_CONV, 2 * RLT_CFG_MAX_CONV);
        return -1;
    }
    if (row > INPUT_MAX_ROW_BYTES) {
        snprintf(why->what, sizeof why->what, "makes observation rows of %lld bytes", (long long)row);
        snprintf(why->hint, sizeof why->hint, "a row holds at most %lld bytes; use smaller parts or u8 images",
                 (long long)INPUT_MAX_ROW_BYTES);
        return -1;
    }
    return 0;
}

void config_inputs_format(rlt_text *o, const rlt_input_list *l, int layers_only) {
    int32_t n = l->n < 0 ? 0 : (l->n > RLT_CFG_MAX_INPUTS ? RLT_CFG_MAX_INPUTS : l->n);
    if (n == 0) {
        rlt_text_add(o, "none");
        return;
    }
    rlt_text_add(o, "[");
    for (int32_t i = 0; i < n; i++) {
        const rlt_input_spec *s = &l->in[i];
        const char *nul = memchr(s->name, '\0', sizeof s->name);
        int nl = nul ? (int)(nul - s->name) : (int)sizeof s->name;
        rlt_text_add(o, "%s{name: %.*s, shape: ", i ? ", " : "", nl, s->name);
        shape_add(o, s);
        rlt_text_add(o, ", dtype: %s, torso: ", dtype_name(s->dtype));
        if (s->torso.n == 0) rlt_text_add(o, "none");
        else if (layers_only) config_conv_format_layers(o, &s->torso);
        else config_conv_format(o, &s->torso);
        if (s->high) rlt_text_add(o, ", high: %d", (int)s->high); /* written only when given: older texts stay */
        rlt_text_add(o, "}");
    }
    rlt_text_add(o, "]");
}

/* ---- the public helpers (include/rltrain.h) ---- */

int rlt_config_dict_space(const rlt_config *cfg, rlt_space *space) {
    if (!cfg || !space) return RLT_EINVAL;
    const rlt_input_list *l = &cfg->network.inputs;
    if (l->n < 1 || l->n > RLT_CFG_MAX_INPUTS) return RLT_ECONFIG;
    rlt_input_layout lay;
    config_inputs_layout(l, &lay);
    memset(space, 0, sizeof *space);
    space->kind = RLT_SPACE_DICT;
    space->dtype = RLT_DTYPE_U8;
    space->ndim = 1;
    space->shape[0] = (int32_t)lay.row_bytes;
    space->n = lay.n;
    return RLT_OK;
}

int rlt_config_input_high(const rlt_config *cfg, const char *name, int32_t *high) {
    if (!cfg || !name || !high) return RLT_EINVAL;
    const rlt_input_list *l = &cfg->network.inputs;
    for (int32_t i = 0; i < l->n && i < RLT_CFG_MAX_INPUTS; i++)
        if (strncmp(l->in[i].name, name, sizeof l->in[i].name) == 0 && strlen(name) < sizeof l->in[i].name) {
            *high = l->in[i].dtype != RLT_DTYPE_U8 ? 0 : (l->in[i].high > 0 ? l->in[i].high : 255);
            return RLT_OK;
        }
    return RLT_ECONFIG;
}

int rlt_config_input_part(const rlt_config *cfg, const char *name, int64_t *offset, int32_t *dtype, int64_t *elems) {
    if (!cfg || !name) return RLT_EINVAL;
    const rlt_input_list *l = &cfg->network.inputs;
    rlt_input_layout lay;
    config_inputs_layout(l, &lay);
    for (int32_t i = 0; i < lay.n; i++)
        if (strncmp(l->in[i].name, name, sizeof l->in[i].name) == 0 && strlen(name) < sizeof l->in[i].name) {
            if (offset) *offset = lay.offset[i];
            if (dtype) *dtype = l->in[i].dtype;
            if (elems) *elems = lay.elems[i];
            return RLT_OK;
        }
    return RLT_ECONFIG;
}
