/* fuzz_config.c: the config parser over arbitrary bytes. The bytes (made a C string: the API takes one, so
 * anything after a NUL byte is not seen) go through rlt_config_load_string, and whatever it leaves through
 * validate, dump and get; the same bytes are also tried as one `--set` assignment. Nothing may crash, hang,
 * leak or read out of bounds, whatever the input. With RLT_LIBFUZZER this file is a libFuzzer target. */
#include <stdlib.h>
#include <string.h>

#include "fuzz_targets.h"
#include "rltrain.h"

static void quiet(void *user, int level, const char *message) {
    (void)user;
    (void)level;
    (void)message;
}

int fuzz_config_one(const uint8_t *data, size_t size) {
    rlt_log_set_callback(quiet, NULL);
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    rlt_config *cfg = NULL;
    int ok = 0;
    if (rlt_config_init(&cfg) == RLT_OK) {
        int rc = rlt_config_load_string(cfg, text, "fuzz.yaml");
        (void)rlt_config_errmsg(cfg);
        if (rc == RLT_OK) ok = rlt_config_validate(cfg) == RLT_OK;
        static char dump[1 << 16];
        rlt_config_dump(cfg, dump, sizeof dump);
        char value[256];
        static const char *keys[] = {"algo", "env.name", "network.conv", "network.hidden", "td3.actor_hidden",
                                     "replay.capacity", "memory.budget_mb", "out_dir", "no.such.key"};
        for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) rlt_config_get(cfg, keys[i], value, sizeof value);
        rlt_config *copy = rlt_config_clone(cfg);
        if (copy) {
            rlt_config_set(copy, text);
            rlt_config_validate(copy);
            rlt_config_free(copy);
        }
        rlt_config_free(cfg);
    }
    free(text);
    return ok;
}

#ifdef RLT_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_config_one(data, size);
    return 0;
}
#endif
