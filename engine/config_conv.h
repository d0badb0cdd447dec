/* config_conv.h: the value type of network.conv, the convolutional torso: a preset name ("nature") or an
 * explicit list of layers ([{out: 32, kernel: 8, stride: 4}, ...]). The YAML reader (config.c) walks the
 * events and calls these for each scalar; the schema (config_schema.c) calls them to set the default,
 * check a stored value and write it back. The presets live here, as named lists, so that a preset and the
 * same layers written out are one value to every consumer (qnet_define reads only the layers). */
#ifndef RLT_CONFIG_CONV_H
#define RLT_CONFIG_CONV_H

#include <stddef.h>

#include "config.h"
#include "config_schema.h"
#include "text.h"

#define CONV_PRESET_NAMES "none|nature|minatar"

/* The fields of one layer mapping, in the order the dump writes them. */
typedef enum { CONV_F_OUT = 0, CONV_F_KERNEL, CONV_F_STRIDE, CONV_F_PAD, CONV_F_COUNT } conv_field;
#define CONV_FIELD_NAMES "out, kernel, stride, pad"

/* The field called name (n bytes), or -1. */
int config_conv_field(const char *name, size_t n);
const char *config_conv_field_name(int f);
/* 1 for out and kernel, which every layer must give; stride (1) and pad (0) have defaults. */
int config_conv_field_required(int f);
/* A layer with stride and pad at their defaults, out and kernel 0 (not yet given). */
rlt_conv_layer config_conv_layer_defaults(void);
/* Field f of l from one scalar's text. -1 with why ("must be an integer in [1, 1024] (got "x")"). */
int config_conv_set_field(rlt_conv_layer *l, int f, const char *t, size_t n, int plain, cfg_why *why);
/* The preset called t (n bytes) into out, zero-padded. -1 with why when there is no such preset. */
int config_conv_set_preset(rlt_conv_list *out, const char *t, size_t n, cfg_why *why);

/* A stored value checked as the parser would have made it: a known preset holding exactly its layers, or
 * 1 .. RLT_CFG_MAX_CONV explicit layers in range. For rlt_config_validate (fields written by code). */
int config_conv_check(const rlt_conv_list *l, cfg_why *why);
/* The value as YAML that reads back to the same bytes: the preset's name, or the flow list of layers. */
void config_conv_format(rlt_text *o, const rlt_conv_list *l);
/* The layers alone, always written out ("[]" for none): equal texts mean the same torso, whether it was
 * named by a preset or listed. Checkpoints record it to refuse a file made with another torso. */
void config_conv_format_layers(rlt_text *o, const rlt_conv_list *l);

#endif
