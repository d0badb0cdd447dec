/* config_schema.h: the one table that describes every configuration key (dotted name, type, field offset,
 * range, allowed values, default, one-line doc), and the typed conversions built on it. The YAML reader
 * (config.c), the defaults, the range checks of rlt_config_validate and the dump all walk this table, so a
 * new key is one row here plus its field in config.h. */
#ifndef RLT_CONFIG_SCHEMA_H
#define RLT_CONFIG_SCHEMA_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"

typedef enum {
    CFG_INT32,    /* int32_t */
    CFG_INT64,    /* int64_t */
    CFG_UINT64,   /* uint64_t, the whole range (seeds) */
    CFG_DOUBLE,   /* double; the only type that takes 2.5 or 1e5 */
    CFG_BOOL,     /* int32_t holding 0 or 1; written true / false */
    CFG_ENUM,     /* an int-sized enum whose values are 0 .. n_names - 1; written as names[value] */
    CFG_DEVICE,   /* rlt_device: one of names (its kinds) or cuda:N (device.h) */
    CFG_NAME,     /* char[]; one of `choices`, kept as text because a registry, not an enum, owns the list */
    CFG_STRING,   /* char[]; free text of 1 .. size-1 bytes */
    CFG_INT_LIST, /* rlt_int_list; 1 .. RLT_CFG_MAX_LAYERS entries, each in [lo, hi] */
    CFG_CONV_LIST, /* rlt_conv_list; a preset name or a list of layer mappings (config_conv.h) */
    CFG_SEED_LIST, /* rlt_seed_list; 0 .. RLT_CFG_MAX_SEEDS distinct entries, each a uint64 */
    CFG_INPUT_LIST, /* rlt_input_list; none or a list of input mappings (config_inputs.h) */
    CFG_DEVICE_LIST, /* rlt_device_list; 0 .. RLT_CFG_MAX_DEVICES entries, each cpu or cuda:N, one kind, GPUs distinct */
} cfg_type;

/* Range flags: an open end excludes its bound (learning rates are in (0, 1]). CFG_MIB: a size in MiB, which
 * becomes whole bytes: a value above 0 but below one byte (2^-20 MiB) would round to 0, "no limit". */
enum { CFG_LO_OPEN = 1u, CFG_HI_OPEN = 2u, CFG_MIB = 4u };

typedef struct cfg_key {
    const char *key;     /* dotted path, "train.batch_size" */
    cfg_type type;
    size_t offset;       /* of the field in struct rlt_config */
    size_t size;         /* of the field: string capacity, integer width */
    double lo, hi;       /* numbers and list entries: the range; strings: length; exact below 2^53 */
    unsigned flags;      /* CFG_LO_OPEN | CFG_HI_OPEN */
    const char *choices; /* CFG_NAME: "td3|dqn" */
    const char *const *names; /* CFG_ENUM, CFG_DEVICE: the value table, indexed by the enum's value */
    int32_t n_names;
    const char *def;     /* the default, written as a YAML value */
    const char *doc;     /* one line for hints */
} cfg_key;

/* Fixed bounds for per-parse bookkeeping arrays; the schema asserts its table fits. */
#define CFG_MAX_KEYS RLT_CFG_MAX_KEYS
/* Files and strings above this are refused before parsing: a config is a few dozen lines. */
#define CFG_MAX_BYTES (1u << 20)
/* How long a config read from a pipe or FIFO may wait for its first bytes (rlt_config_load_file). */
#define CFG_PIPE_WAIT_S 5

/* Why a conversion failed: the message's "<what is wrong>" and "<hint>" halves. */
typedef struct cfg_why {
    char what[384];
    char hint[512];
} cfg_why;

const cfg_key *config_schema_keys(size_t *n);
/* The row whose key is exactly `path` (length len), or NULL. */
const cfg_key *config_schema_find(const char *path, size_t len);
/* The index of the first row under section `path` ("train" for "train.*"), or -1 when no key is under
 * it. The index doubles as the section's identity for duplicate detection. */
int config_schema_section(const char *path, size_t len);
size_t config_schema_index(const cfg_key *k);

/* One scalar's text (len bytes, may hold NULs) converted to k's type and stored in the struct at base.
 * plain: 1 for an unquoted YAML scalar (numbers and booleans must be plain; strings may be either). For
 * CFG_INT_LIST and CFG_SEED_LIST the text is one entry: entry_index says which, and the entry is stored in
 * the list. For CFG_CONV_LIST the text is a preset name; the reader sets explicit layers through
 * config_conv.h. */
int config_schema_set_scalar(const cfg_key *k, rlt_config *base, const char *text, size_t len, int plain,
                             int entry_index, cfg_why *why);
/* The stored value of k, checked against the row as the parser would (ranges, list length, enum, string
 * termination). For rlt_config_validate, which guards against fields written by code. */
int config_schema_check_value(const cfg_key *k, const rlt_config *base, cfg_why *why);
/* The value of k as YAML text that reads back to the identical bits. Returns the length it needs. */
size_t config_schema_format(const cfg_key *k, const rlt_config *base, char *buf, size_t cap);
/* One scalar value held outside a config, as the bytes its field would hold (the first bytes of a uint64's storage, the
 * rest zero): for the per-member values of a population (engine/config_population.c). Scalars are the
 * numbers, booleans and enums (a field of at most 8 bytes); parse, check and format work as for a config's field. */
int config_schema_is_scalar(const cfg_key *k);
int config_schema_parse_bits(const cfg_key *k, const char *text, size_t len, int plain, uint64_t *bits, cfg_why *why);
int config_schema_check_bits(const cfg_key *k, uint64_t bits, cfg_why *why);
size_t config_schema_format_bits(const cfg_key *k, uint64_t bits, char *buf, size_t cap);
/* The same for a list of integers held outside a config (a population's hidden sizes): entry entry_index of the
 * text into l (entry 0 clears it first), the check of the whole list, and its YAML text. */
int config_schema_set_list_entry(const cfg_key *k, rlt_int_list *l, const char *text, size_t len, int plain,
                                 int entry_index, cfg_why *why);
int config_schema_check_list(const cfg_key *k, const rlt_int_list *l, cfg_why *why);
size_t config_schema_format_list(const cfg_key *k, const rlt_int_list *l, char *buf, size_t cap);
/* "[1, 1048576]", "(0, 1]": the range a row accepts, for messages. */
void config_schema_range_text(const cfg_key *k, char *buf, size_t cap);
/* "fp32|bf16|fp16", "auto|cpu|cuda|cuda:N": the values an enum, device or name row accepts, for messages. */
const char *config_schema_choices(const cfg_key *k, char *buf, size_t cap);

/* The nearest key or section to an unknown dotted path ("did you mean"), or NULL when none is close. */
const char *config_schema_nearest(const char *path, char *buf, size_t cap);
/* "algo, env, seed, ...": the names valid directly under section `prefix` ("" for the top level). */
void config_schema_children(const char *prefix, char *buf, size_t cap);

/* Checks the table itself: sections contiguous (the dump relies on it), defaults that parse and pass
 * their own ranges, integer bounds within their field's width. 0, or -1 with the first problem in why. */
int config_schema_selftest(char *why, size_t cap);

#endif
