/* config_conv.c: network.conv's presets, layer fields, checks and YAML text (see config_conv.h). */
#include "config_conv.h"

#include <stdio.h>
#include <string.h>

/* The presets' names (from their map in config.h) and layers, indexed by rlt_conv_preset. Padding 0, ReLU
 * after each layer (qnet.c). EXPLICIT has no name and no layers of its own: it is a list written out. */
#define CONV_PRESET_NAME(c, name) [c] = name,
static const char *const preset_names[] = {RLT_CONV_PRESET_MAP(CONV_PRESET_NAME)};
#undef CONV_PRESET_NAME
#define N_PRESETS ((int32_t)(sizeof preset_names / sizeof preset_names[0]))

typedef struct conv_preset {
    int32_t n;
    rlt_conv_layer layer[3];
} conv_preset;

static const conv_preset presets[N_PRESETS] = {
    [RLT_CONV_PRESET_NONE] = {0, {{0, 0, 0, 0}}},
    [RLT_CONV_PRESET_NATURE] = {3, {{32, 8, 4, 0}, {64, 4, 2, 0}, {64, 3, 1, 0}}}, /* Mnih et al. 2015 */
    [RLT_CONV_PRESET_MINATAR] = {1, {{16, 3, 1, 0}}},                              /* Young and Tian 2019 */
};
_Static_assert(sizeof(rlt_conv_preset) == sizeof(int32_t), "the preset is an int-sized field");

/* One row per layer field: name, accepted range, default (for the optional ones), and what it means. */
typedef struct conv_field_row {
    const char *name;
    int32_t lo, hi;
    int32_t required, def;
    const char *doc;
} conv_field_row;

/* The upper bounds keep every size qnet computes from them well inside int32 before it checks the
 * products; no real torso comes near them. */
static const conv_field_row fields[CONV_F_COUNT] = {
    [CONV_F_OUT] = {"out", 1, 65536, 1, 0, "output channels of the layer"},
    [CONV_F_KERNEL] = {"kernel", 1, 1024, 1, 0, "the square kernel's size in pixels"},
    [CONV_F_STRIDE] = {"stride", 1, 1024, 0, 1, "the kernel's step in pixels (default 1)"},
    [CONV_F_PAD] = {"pad", 0, 1024, 0, 0, "zero padding on each side in pixels (default 0)"},
};

static int32_t *field_ptr(rlt_conv_layer *l, int f) {
    switch (f) {
    case CONV_F_OUT: return &l->out;
    case CONV_F_KERNEL: return &l->kernel;
    case CONV_F_STRIDE: return &l->stride;
    default: return &l->pad;
    }
}

static int32_t field_get(const rlt_conv_layer *l, int f) { return *field_ptr((rlt_conv_layer *)l, f); }

int config_conv_field(const char *name, size_t n) {
    for (int f = 0; f < CONV_F_COUNT; f++)
        if (strlen(fields[f].name) == n && memcmp(fields[f].name, name, n) == 0) return f;
    return -1;
}

const char *config_conv_field_name(int f) { return f >= 0 && f < CONV_F_COUNT ? fields[f].name : "?"; }

int config_conv_field_required(int f) { return f >= 0 && f < CONV_F_COUNT && fields[f].required; }

rlt_conv_layer config_conv_layer_defaults(void) {
    rlt_conv_layer l;
    memset(&l, 0, sizeof l);
    for (int f = 0; f < CONV_F_COUNT; f++) *field_ptr(&l, f) = fields[f].def;
    return l;
}

/* A scalar as messages show it: at most 40 bytes, control characters as '?'. */
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

int config_conv_set_field(rlt_conv_layer *l, int f, const char *t, size_t n, int plain, cfg_why *why) {
    const conv_field_row *row = &fields[f];
    char s[64];
    why->what[0] = why->hint[0] = '\0';
    /* Whole numbers only, written plainly: no quotes, '+', leading zeros (octal in YAML 1.1) or exponent. */
    size_t i = 0;
    int neg = n > 0 && t[0] == '-';
    i += (size_t)neg;
    int64_t v = 0;
    int ok = plain && i < n && n - i <= 9 && !(t[i] == '0' && n - i > 1);
    for (; ok && i < n; i++) {
        if (t[i] < '0' || t[i] > '9') ok = 0;
        else v = v * 10 + (t[i] - '0');
    }
    if (neg) v = -v;
    if (!ok || v < row->lo || v > row->hi) {
        snprintf(why->what, sizeof why->what, "must be an integer in [%d, %d] (got %s\"%s\")", (int)row->lo,
                 (int)row->hi, plain ? "" : "the quoted string ", shown(t, n, s, sizeof s));
        snprintf(why->hint, sizeof why->hint, "%s is %s; write it without quotes, like {out: 64, kernel: 3, stride: 1}",
                 row->name, row->doc);
        return -1;
    }
    *field_ptr(l, f) = (int32_t)v;
    return 0;
}

const char *config_conv_preset_name(rlt_conv_preset p) {
    return (int32_t)p >= 0 && (int32_t)p < N_PRESETS ? preset_names[p] : "?";
}

/* The preset called t (n bytes), or -1; EXPLICIT is not a name one can give. */
static int32_t preset_find(const char *t, size_t n) {
    for (int32_t i = 0; i < N_PRESETS; i++)
        if (i != RLT_CONV_PRESET_EXPLICIT && strlen(preset_names[i]) == n && memcmp(preset_names[i], t, n) == 0)
            return i;
    return -1;
}

int config_conv_set_preset(rlt_conv_list *out, const char *t, size_t n, cfg_why *why) {
    char s[64];
    int32_t id = preset_find(t, n);
    if (id < 0) {
        snprintf(why->what, sizeof why->what, "'%s' is not one of the presets %s", shown(t, n, s, sizeof s),
                 CONV_PRESET_NAMES);
        snprintf(why->hint, sizeof why->hint,
                 "write a preset name, or the layers as a list of mappings like [{out: 16, kernel: 3, stride: 1}] "
                 "(keys " CONV_FIELD_NAMES ")");
        return -1;
    }
    const conv_preset *p = &presets[id];
    memset(out, 0, sizeof *out);
    out->preset = (rlt_conv_preset)id;
    out->n = p->n;
    for (int32_t i = 0; i < p->n; i++) out->layer[i] = p->layer[i];
    return 0;
}

static int same_layers(const rlt_conv_list *a, int32_t n, const rlt_conv_layer *layers) {
    if (a->n != n) return 0;
    for (int32_t i = 0; i < n; i++)
        for (int f = 0; f < CONV_F_COUNT; f++)
            if (field_get(&a->layer[i], f) != field_get(&layers[i], f)) return 0;
    return 1;
}

int config_conv_check(const rlt_conv_list *l, cfg_why *why) {
    why->what[0] = why->hint[0] = '\0';
    int32_t id = (int32_t)l->preset;
    if (id < 0 || id >= N_PRESETS) {
        snprintf(why->what, sizeof why->what, "holds preset %d, which is not one of " CONV_PRESET_NAMES " or a list",
                 (int)id);
        snprintf(why->hint, sizeof why->hint, "code wrote the field directly; set it through rlt_config_set");
        return -1;
    }
    if (id != RLT_CONV_PRESET_EXPLICIT) {
        const conv_preset *p = &presets[id];
        if (!same_layers(l, p->n, p->layer)) {
            snprintf(why->what, sizeof why->what, "is named '%s' but does not hold that preset's layers",
                     preset_names[id]);
            snprintf(why->hint, sizeof why->hint, "code wrote the field directly; set it through rlt_config_set "
                     "(presets: " CONV_PRESET_NAMES ")");
            return -1;
        }
        return 0;
    }
    if (l->n < 1 || l->n > RLT_CFG_MAX_CONV) {
        snprintf(why->what, sizeof why->what, "has %d layers", (int)l->n);
        snprintf(why->hint, sizeof why->hint, "give 1 to %d layers, or a preset (" CONV_PRESET_NAMES ")",
                 RLT_CFG_MAX_CONV);
        return -1;
    }
    for (int32_t i = 0; i < l->n; i++)
        for (int f = 0; f < CONV_F_COUNT; f++) {
            int32_t v = field_get(&l->layer[i], f);
            if (v < fields[f].lo || v > fields[f].hi) {
                snprintf(why->what, sizeof why->what, "layer [%d] %s is %d, outside [%d, %d]", (int)i, fields[f].name,
                         (int)v, (int)fields[f].lo, (int)fields[f].hi);
                snprintf(why->hint, sizeof why->hint, "%s is %s", fields[f].name, fields[f].doc);
                return -1;
            }
        }
    return 0;
}

void config_conv_format_layers(rlt_text *o, const rlt_conv_list *l) {
    int32_t n = l->n < 0 ? 0 : (l->n > RLT_CFG_MAX_CONV ? RLT_CFG_MAX_CONV : l->n);
    rlt_text_add(o, "[");
    for (int32_t i = 0; i < n; i++) {
        rlt_text_add(o, "%s{", i ? ", " : "");
        for (int f = 0; f < CONV_F_COUNT; f++)
            rlt_text_add(o, "%s%s: %d", f ? ", " : "", fields[f].name, (int)field_get(&l->layer[i], f));
        rlt_text_add(o, "}");
    }
    rlt_text_add(o, "]");
}

void config_conv_format(rlt_text *o, const rlt_conv_list *l) {
    int32_t id = (int32_t)l->preset;
    if (id > 0 && id < N_PRESETS) rlt_text_add(o, "%s", preset_names[id]);
    else config_conv_format_layers(o, l);
}
