/* config_inputs.h: the value type of network.inputs, the named parts of a dict observation:
 *     network:
 *       inputs:
 *         - {name: screen, shape: [1, 8, 8], dtype: u8, torso: [{out: 8, kernel: 3}]}
 *         - {name: stats, shape: [4], dtype: f32, torso: none}
 * The YAML reader (config.c) walks the events and calls these for each scalar; the schema (config_schema.c)
 * calls them to set the default (none), check a stored value and write it back. The row layout lives here
 * too, because the agent, the algorithms and the adapters must all agree on it:
 *
 * One observation is one flat row of bytes: the parts one after another in the order network.inputs lists
 * them, each in its own dtype (uint8 or float32) and starting at an offset that is a multiple of 4 (so a
 * float32 part is aligned), the row's size rounded up to a multiple of 4 as well. A uint8 part costs one
 * byte per element in the replay, a float32 part four, plus at most 3 bytes of padding per part. */
#ifndef RLT_CONFIG_INPUTS_H
#define RLT_CONFIG_INPUTS_H

#include <stddef.h>

#include "config.h"
#include "config_schema.h"
#include "text.h"

/* The fields of one input mapping, in the order the dump writes them. */
typedef enum { INPUT_F_NAME = 0, INPUT_F_SHAPE, INPUT_F_DTYPE, INPUT_F_TORSO, INPUT_F_HIGH, INPUT_F_COUNT } input_field;
#define INPUT_FIELD_NAMES "name, shape, dtype, torso, high"
#define INPUT_EXAMPLE "[{name: screen, shape: [1, 8, 8], dtype: u8, torso: [{out: 8, kernel: 3}]}, {name: stats, shape: [4]}]"

/* The field called name (n bytes), or -1. */
int config_inputs_field(const char *name, size_t n);
const char *config_inputs_field_name(int f);
/* One scalar into a part: its name, its dtype (u8 | f32), or entry `index` of its shape. -1 with why. */
int config_inputs_set_name(rlt_input_spec *s, const char *t, size_t n, cfg_why *why);
int config_inputs_set_dtype(rlt_input_spec *s, const char *t, size_t n, cfg_why *why);
/* A u8 part's largest value, 1..255 (0/1 planes: 1; camera frames: 255, the default). */
int config_inputs_set_high(rlt_input_spec *s, const char *t, size_t n, cfg_why *why);
/* The factor a part's uint8 values are multiplied by on their way into the network: 1 / high. */
float config_inputs_u8_scale(const rlt_input_spec *s);
int config_inputs_set_dim(rlt_input_spec *s, int index, const char *t, size_t n, int plain, cfg_why *why);
/* A scalar value of the whole key: only "none" (no parts) is one. */
int config_inputs_set_scalar(rlt_input_list *l, const char *t, size_t n, cfg_why *why);
/* A stored value checked as a whole: names (1..31 of [A-Za-z0-9_-]) unique, shapes [D] or [C, H, W] of
 * 1..65536 each, a row of at most 2^24 bytes, dtypes u8 or f32, a torso only on an image, every torso a valid
 * conv list, at most RLT_CFG_MAX_CONV conv layers over all parts (training and acting copies share the
 * backend's 16 conv slots). */
int config_inputs_check(const rlt_input_list *l, cfg_why *why);
/* The value as YAML that reads back to the same bytes: none, or the flow list of mappings. layers_only
 * writes each torso as its layers (equal texts mean equal networks; checkpoints record that form). */
void config_inputs_format(rlt_text *o, const rlt_input_list *l, int layers_only);

/* The row layout (see the header comment). */
typedef struct rlt_input_layout {
    int32_t n;
    int64_t offset[RLT_CFG_MAX_INPUTS]; /* byte offset of each part in the row */
    int64_t elems[RLT_CFG_MAX_INPUTS];  /* elements of each part */
    int64_t row_bytes;                  /* the whole row, a multiple of 4 */
} rlt_input_layout;
void config_inputs_layout(const rlt_input_list *l, rlt_input_layout *out);
/* "screen: u8 [1, 8, 8] at byte 0, stats: f32 [4] at byte 64 (80 bytes)": for messages. */
void config_inputs_layout_text(rlt_text *o, const rlt_input_list *l);

#endif
