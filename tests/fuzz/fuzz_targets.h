/* fuzz_targets.h: the entry points the fuzz targets share with the plain corpus driver (fuzz_corpus.c). Each
 * takes arbitrary bytes and must return without crashing, hanging or leaking, whatever they are; the
 * libFuzzer targets (built with -DRLT_FUZZ=ON, clang only) call them from LLVMFuzzerTestOneInput, and
 * fuzz_corpus calls them on the seed corpus in every build. */
#ifndef RLT_FUZZ_TARGETS_H
#define RLT_FUZZ_TARGETS_H

#include <stddef.h>
#include <stdint.h>

/* The bytes as a YAML config: rlt_config_load_string, then validate, dump, get and set. Returns 1 when the
 * config loaded and validated, else 0. */
int fuzz_config_one(const uint8_t *data, size_t size);

/* The bytes as a checkpoint file: the reader's API on it, then rlt_trainer_resume into three small trainers
 * (TD3 on pendulum, DQN on cartpole and on MinAtar Breakout); each trainer that accepts it takes a step
 * (act, environment step, observe, update). The same again with both CRCs recomputed, so that mutated
 * values reach the value checks. Returns the number of trainers that accepted the bytes as they are. */
int fuzz_checkpoint_one(const uint8_t *data, size_t size);

/* Recomputes every tensor's CRC and the whole-file CRC of a checkpoint image in place, as far as its
 * structure can be followed (nothing happens to bytes that are not one). */
void fuzz_fix_crcs(uint8_t *data, size_t size);

/* Writes a valid checkpoint of each of the three trainers into dir (pendulum_td3.ckpt, cartpole_dqn.ckpt,
 * breakout_dqn.ckpt), from short runs in work_dir. Returns 0 on success. */
int fuzz_write_checkpoint_seeds(const char *dir, const char *work_dir);

#endif
