/* test_checkpoint.c: the checkpoint format round-trips tensors and metadata bit for bit, and every kind of
 * damage (truncation anywhere, any single flipped bit, bad magic, a newer version, absurd sizes with valid
 * CRCs, wrong sizes on read, missing names) is refused with RLT_ECHECKPOINT and a message that says what
 * is wrong. Writer failures must leave an older checkpoint at the destination untouched. */
#include "harness.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint.h"
#include "text.h"

#define MAX_FILE (1u << 20)

static const char *dir;

static const char *path_in(char *buf, size_t cap, const char *name) {
    snprintf(buf, cap, "%s/%s", dir, name);
    return buf;
}

/* 1 when a temporary file of a save to the path that `tmp` names ("<path>.tmp") exists: the writer's names are
 * "<path>.<pid>.<n>.tmp" (one per save); a stale "<path>.tmp" of an earlier version does not count. */
static int tmp_exists(const char *tmp) {
    char base_path[700];
    snprintf(base_path, sizeof base_path, "%.*s", (int)(strlen(tmp) - 4), tmp);
    const char *slash = strrchr(base_path, '/');
    const char *base = slash ? slash + 1 : base_path;
    char dname[700];
    snprintf(dname, sizeof dname, "%.*s", slash ? (int)(slash - base_path) : 1, slash ? base_path : ".");
    DIR *d = opendir(dname);
    int found = 0;
    for (struct dirent *de; d && (de = readdir(d));) {
        size_t n = strlen(base);
        if (rlt_text_is_tmp_of(de->d_name, base) && strcmp(de->d_name + n, ".tmp") != 0) found = 1;
    }
    if (d) closedir(d);
    return found;
}

static void put32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static void put64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Recomputes the trailer's whole-file CRC, so that only the check under test can catch an edit. */
static void fix_file_crc(unsigned char *buf, size_t n) { put32(buf + n - 4, ckpt_crc32(0, buf, n - 16)); }

/* Opens path expecting status and a message containing want; returns 1 when both hold. */
static int open_expect(ckpt_reader *r, const char *path, int status, const char *want) {
    rlt_err e = {0};
    int rc = ckpt_reader_open(r, &e, path);
    int ok = rc == status && (status == RLT_OK || (strstr(e.msg, want) && strstr(e.msg, path) && e.status == rc));
    if (!ok) fprintf(stderr, "open %s: want %s '%s', got %s '%s'\n", path, rlt_status_name(status), want,
                     rlt_status_name(rc), e.msg);
    ckpt_reader_close(r);
    return ok;
}

static void fill(void *dst, size_t n, uint32_t seed) {
    unsigned char *p = dst;
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        p[i] = (unsigned char)(seed >> 24);
    }
}

typedef struct tensor {
    const char *name;
    int32_t dtype, ndim;
    int64_t shape[4];
    uint64_t bytes;
    unsigned char *data;
} tensor;

static const char meta_text[] = "algo: td3\nobs_dim: 17\nact_dim: 6\nconfig_hash: 9f1c2e\nnote: \"h\xc3\xa9llo\"\n";

static tensor medium[] = {
    {"actor.params", RLT_DTYPE_F32, 1, {37}, 0, NULL},
    {"critic.params", RLT_DTYPE_F32, 4, {3, 4, 5, 6}, 0, NULL},
    {"steps", RLT_DTYPE_I64, 0, {0}, 0, NULL},
    {"replay.actions", RLT_DTYPE_I32, 2, {7, 3}, 0, NULL},
    {"replay.obs", RLT_DTYPE_U8, 3, {2, 3, 5}, 0, NULL},
    {"empty", RLT_DTYPE_F32, 2, {0, 4}, 0, NULL},
};
#define N_MEDIUM (int)(sizeof medium / sizeof medium[0])

static void prepare(tensor *t, int n, uint32_t seed) {
    for (int i = 0; i < n; i++) {
        uint64_t b = ckpt_dtype_size(t[i].dtype);
        for (int d = 0; d < t[i].ndim; d++) b *= (uint64_t)t[i].shape[d];
        t[i].bytes = b;
        t[i].data = malloc(b ? b : 1);
        fill(t[i].data, b, seed + (uint32_t)i);
    }
}

static int write_file(const char *path, const char *meta, tensor *t, int n) {
    ckpt_writer w;
    rlt_err e = {0};
    int rc = ckpt_writer_open(&w, &e, path, meta, meta ? strlen(meta) : 0);
    for (int i = 0; i < n && rc == RLT_OK; i++)
        rc = ckpt_writer_add(&w, t[i].name, t[i].dtype, t[i].ndim, t[i].shape, t[i].data, t[i].bytes);
    if (rc == RLT_OK) rc = ckpt_writer_close(&w);
    else ckpt_writer_abort(&w);
    if (rc != RLT_OK) fprintf(stderr, "write %s: %s\n", path, e.msg);
    return rc;
}

static void test_crc(void) {
    CHECK(ckpt_crc32(0, "123456789", 9) == 0xcbf43926u, "crc32 check value: 0x%08x", ckpt_crc32(0, "123456789", 9));
    CHECK(ckpt_crc32(0, "", 0) == 0, "crc32 of nothing");
    unsigned char buf[3000];
    fill(buf, sizeof buf, 7);
    uint32_t whole = ckpt_crc32(0, buf, sizeof buf);
    size_t cuts[] = {0, 1, 5, 64, 1000, 2999, 3000};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        size_t c = cuts[i];
        uint32_t a = ckpt_crc32(0, buf, c), b = ckpt_crc32(0, buf + c, sizeof buf - c);
        CHECK(ckpt_crc32(a, buf + c, sizeof buf - c) == whole, "incremental crc split at %zu", c);
        CHECK(ckpt_crc32_combine(a, b, sizeof buf - c) == whole, "crc combine split at %zu", c);
    }
}

static void test_round_trip(ckpt_reader *r) {
    char path[600], tmp[700];
    path_in(path, sizeof path, "medium.ckpt");
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    /* A crashed earlier version's save left one; the writer's own names never collide with it. */
    CHECK(test_write_file(tmp, "stale junk", 10) == 0, "stale temp file");
    CHECK(write_file(path, meta_text, medium, N_MEDIUM) == RLT_OK, "write medium");
    CHECK(!tmp_exists(tmp), "no .tmp after close");

    /* The trailer, checked here without the reader: count, and CRC of every byte before it. */
    static unsigned char file[MAX_FILE];
    long n = test_read_file(path, file, sizeof file);
    CHECK(n > 64 && memcmp(file, "RLTCKPT1", 8) == 0, "file magic");
    CHECK(memcmp(file + n - 16, "RLTEND\0\0", 8) == 0, "trailer magic");
    CHECK(get32(file + n - 8) == N_MEDIUM, "trailer count");
    CHECK(get32(file + n - 4) == ckpt_crc32(0, file, (size_t)n - 16), "trailer crc");

    rlt_err e = {0};
    int rc = ckpt_reader_open(r, &e, path);
    CHECK(rc == RLT_OK, "open medium: %s", e.msg);
    if (rc != RLT_OK) return;
    size_t mlen = 0;
    const char *meta = ckpt_reader_meta(r, &mlen);
    CHECK(mlen == strlen(meta_text) && strcmp(meta, meta_text) == 0, "meta round trip: '%s'", meta);
    CHECK(r->n_tensors == N_MEDIUM, "tensor count %d", r->n_tensors);
    for (int i = 0; i < N_MEDIUM; i++) {
        const tensor *t = &medium[i];
        const ckpt_tensor_info *info = NULL;
        CHECK(ckpt_reader_find(r, t->name, &info) == RLT_OK, "find %s: %s", t->name, e.msg);
        if (!info) continue;
        int same = info->dtype == t->dtype && info->ndim == t->ndim && info->bytes == t->bytes;
        for (int d = 0; d < 4; d++) same = same && info->shape[d] == (d < t->ndim ? t->shape[d] : 0);
        CHECK(same, "info of %s", t->name);
        CHECK(info->offset % CKPT_DATA_ALIGN == 0, "%s data at %llu is 64-byte aligned", t->name,
              (unsigned long long)info->offset);
        CHECK(ckpt_reader_expect(r, t->name, t->dtype, t->ndim, t->shape) == RLT_OK, "expect %s: %s", t->name, e.msg);
        unsigned char *got = malloc(t->bytes + 1);
        memset(got, 0xAB, t->bytes + 1);
        CHECK(ckpt_reader_read(r, t->name, got, t->bytes) == RLT_OK, "read %s: %s", t->name, e.msg);
        CHECK(memcmp(got, t->data, t->bytes) == 0, "bytes of %s identical", t->name);
        CHECK(got[t->bytes] == 0xAB, "read of %s stays inside its destination", t->name);
        free(got);
    }

    /* Reading with the wrong size names the tensor, its shape and both sizes. */
    float small[10];
    rc = ckpt_reader_read(r, "critic.params", small, sizeof small);
    CHECK(rc == RLT_ECHECKPOINT && strstr(e.msg, "'critic.params'") && strstr(e.msg, "f32 [3, 4, 5, 6] = 1440 bytes") &&
          strstr(e.msg, "has 40 bytes"), "wrong-size read: %s", e.msg);
    int64_t other[4] = {3, 4, 5, 7};
    rc = ckpt_reader_expect(r, "critic.params", RLT_DTYPE_F32, 4, other);
    CHECK(rc == RLT_ECHECKPOINT && strstr(e.msg, "[3, 4, 5, 6]") && strstr(e.msg, "[3, 4, 5, 7]"), "expect: %s", e.msg);
    rc = ckpt_reader_expect(r, "steps", RLT_DTYPE_I32, 0, NULL);
    CHECK(rc == RLT_ECHECKPOINT && strstr(e.msg, "i64 []") && strstr(e.msg, "i32 []"), "expect dtype: %s", e.msg);
    const ckpt_tensor_info *info = NULL;
    rc = ckpt_reader_find(r, "target.params", &info);
    CHECK(rc == RLT_ECHECKPOINT && strstr(e.msg, "no tensor named 'target.params'") && strstr(e.msg, "'actor.params'"),
          "missing tensor: %s", e.msg);
    rc = ckpt_reader_read(r, "nope", small, sizeof small);
    CHECK(rc == RLT_ECHECKPOINT && strstr(e.msg, "no tensor named 'nope'"), "read of a missing tensor: %s", e.msg);
    ckpt_reader_close(r);
    CHECK(ckpt_reader_find(r, "steps", &info) == RLT_ESTATE, "find after close");
}

/* A tensor that arrives in pieces through a staging buffer, and one larger than the reader's buffer. */
static void test_pieces(ckpt_reader *r) {
    char path[600];
    path_in(path, sizeof path, "pieces.ckpt");
    enum { N = 100003 };
    static float big[N], back[N];
    fill(big, sizeof big, 99);
    int64_t shape[1] = {N};
    ckpt_writer w;
    rlt_err e = {0};
    int rc = ckpt_writer_open(&w, &e, path, NULL, 0);
    if (rc == RLT_OK) rc = ckpt_writer_begin(&w, "big", RLT_DTYPE_F32, 1, shape, sizeof big);
    size_t piece[] = {1, 1000, 33333, 4096, 0, 65536, 7};
    size_t done = 0;
    for (size_t i = 0; rc == RLT_OK && done < sizeof big; i = (i + 1) % 7) {
        size_t k = piece[i] < sizeof big - done ? piece[i] : sizeof big - done;
        rc = ckpt_writer_write(&w, (unsigned char *)big + done, k);
        done += k;
    }
    if (rc == RLT_OK) rc = ckpt_writer_end(&w);
    if (rc == RLT_OK) rc = ckpt_writer_add(&w, "after", RLT_DTYPE_F32, 1, shape, big, sizeof big);
    if (rc == RLT_OK) rc = ckpt_writer_close(&w);
    CHECK(rc == RLT_OK, "write in pieces: %s", e.msg);
    rc = ckpt_reader_open(r, &e, path);
    CHECK(rc == RLT_OK, "open pieces: %s", e.msg);
    CHECK(ckpt_reader_meta(r, NULL)[0] == '\0', "empty meta");
    CHECK(ckpt_reader_read(r, "big", back, sizeof back) == RLT_OK && memcmp(back, big, sizeof big) == 0, "big in pieces");
    CHECK(ckpt_reader_read(r, "after", back, sizeof back) == RLT_OK && memcmp(back, big, sizeof big) == 0, "big whole");
    ckpt_reader_close(r);

    /* Truncations inside data that spans several reader buffers. */
    static unsigned char file[MAX_FILE];
    long n = test_read_file(path, file, sizeof file);
    char cut[600];
    path_in(cut, sizeof cut, "pieces_cut.ckpt");
    long offs[] = {200, 70000, 200000, 400100, n / 2 + 3, n - 17, n - 1};
    for (size_t i = 0; i < sizeof offs / sizeof offs[0]; i++) {
        CHECK(test_write_file(cut, file, (size_t)offs[i]) == 0, "write cut");
        CHECK(open_expect(r, cut, RLT_ECHECKPOINT, "truncated"), "big file cut at %ld", offs[i]);
    }

    /* A tensor ended early, or given too much, is refused and leaves no temp file. */
    rc = ckpt_writer_open(&w, &e, path, NULL, 0);
    if (rc == RLT_OK) rc = ckpt_writer_begin(&w, "big", RLT_DTYPE_F32, 1, shape, sizeof big);
    if (rc == RLT_OK) rc = ckpt_writer_write(&w, big, 100);
    if (rc == RLT_OK) rc = ckpt_writer_end(&w);
    CHECK(rc == RLT_EINVAL && strstr(e.msg, "after 100 of its 400012 bytes"), "early end: %s", e.msg);
    CHECK(ckpt_writer_close(&w) == RLT_EINVAL, "close after a failure returns it");
    rc = ckpt_writer_open(&w, &e, path, NULL, 0);
    if (rc == RLT_OK) rc = ckpt_writer_begin(&w, "x", RLT_DTYPE_U8, 1, (int64_t[]){3}, 3);
    if (rc == RLT_OK) rc = ckpt_writer_write(&w, "abcd", 4);
    CHECK(rc == RLT_EINVAL && strstr(e.msg, "'x' is given 4 more bytes"), "too much data: %s", e.msg);
    ckpt_writer_abort(&w);
    char tmp[700];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    CHECK(!tmp_exists(tmp), "no temp file after failed writes");
    CHECK(open_expect(r, path, RLT_OK, ""), "the earlier pieces.ckpt survives");
}

/* The small file whose every bit gets flipped: three tensors, short metadata. */
static tensor smallt[] = {
    {"a", RLT_DTYPE_F32, 1, {5}, 0, NULL},
    {"b", RLT_DTYPE_I32, 2, {2, 3}, 0, NULL},
    {"c", RLT_DTYPE_U8, 1, {3}, 0, NULL},
};

static void test_corruption(ckpt_reader *r) {
    char good[600], bad[600];
    path_in(good, sizeof good, "small.ckpt");
    path_in(bad, sizeof bad, "bad.ckpt");
    CHECK(write_file(good, "algo: dqn\n", smallt, 3) == RLT_OK, "write small");
    static unsigned char file[MAX_FILE], edit[MAX_FILE];
    long n = test_read_file(good, file, sizeof file);
    CHECK(open_expect(r, good, RLT_OK, ""), "small reads");

    /* Truncation at every 7th byte, and at each of the last 20 bytes, of the medium and small files. */
    static unsigned char med[MAX_FILE];
    char medium_path[600];
    long mn = test_read_file(path_in(medium_path, sizeof medium_path, "medium.ckpt"), med, sizeof med);
    /* The file is written once and shrunk step by step: cheaper than rewriting it for every cut. */
    int cuts = 0, cut_ok = 0;
    for (int which = 0; which < 2; which++) {
        const unsigned char *src = which ? file : med;
        long len = which ? n : mn;
        test_write_file(bad, src, (size_t)len);
        for (long c = len - 1; c >= 0; c -= (c >= len - 20 ? 1 : 7)) {
            CHECK(truncate(bad, c) == 0, "truncate to %ld", c);
            cuts++;
            cut_ok += open_expect(r, bad, RLT_ECHECKPOINT, "truncated");
        }
    }
    CHECK(cut_ok == cuts, "%d of %d truncations refused as truncated", cut_ok, cuts);

    /* Every single-bit flip anywhere in the file is refused. */
    /* Each flip is written in place and undone, rather than rewriting the file 8 times per byte. */
    int flips = 0, flip_ok = 0;
    test_write_file(bad, file, (size_t)n);
    int fd = open(bad, O_WRONLY);
    CHECK(fd >= 0, "open %s for flips", bad);
    for (long i = 0; i < n && fd >= 0; i++) {
        for (int bit = 0; bit < 8; bit++) {
            unsigned char flipped = (unsigned char)(file[i] ^ (1u << bit));
            CHECK(pwrite(fd, &flipped, 1, i) == 1, "flip byte %ld", i);
            flips++;
            int ok = open_expect(r, bad, RLT_ECHECKPOINT, "");
            flip_ok += ok;
            if (!ok) fprintf(stderr, "  flip of bit %d at byte %ld went undetected\n", bit, i);
        }
        CHECK(pwrite(fd, &file[i], 1, i) == 1, "restore byte %ld", i);
    }
    if (fd >= 0) close(fd);
    CHECK(open_expect(r, bad, RLT_OK, ""), "every flip was undone");
    CHECK(flip_ok == flips, "%d of %d bit flips refused", flip_ok, flips);
    printf("refused %d of %d truncations and %d of %d single-bit flips\n", cut_ok, cuts, flip_ok, flips);

    /* Specific damage, each with the message that should point at it. The first record starts at 32 +
     * meta_len; its shape is at +76 and data_bytes at +108. */
    const long rec = 32 + (long)strlen("algo: dqn\n");
    struct {
        const char *what, *want;
        int status;
    } cases[] = {
        {"wrong magic", "bad magic at byte 0", RLT_ECHECKPOINT},
        {"newer version", "written by a newer rltrain (format 2, this build reads 1)", RLT_ECHECKPOINT},
        {"absurd shape", "tensor 'a' needs bytes 192..4611686018427388096", RLT_ECHECKPOINT},
        {"shape overflow", "overflows 64 bits", RLT_ECHECKPOINT},
        {"data_bytes inconsistent", "says data_bytes 20 but f32 [6] needs 24", RLT_ECHECKPOINT},
        {"absurd meta length", "metadata length 1152921504606846976 at byte 24 is larger than the whole file", RLT_ECHECKPOINT},
        {"duplicate name", "tensor 'a' appears twice", RLT_ECHECKPOINT},
        {"data crc", "the data of tensor 'b' (bytes 384..408) fails its CRC", RLT_ECHECKPOINT},
        {"meta altered", "whole-file CRC mismatch", RLT_ECHECKPOINT},
        {"trailing bytes", "5 unexpected bytes after the trailer", RLT_ECHECKPOINT},
        {"name not terminated", "is not NUL-terminated", RLT_ECHECKPOINT},
        {"bad record magic", "bad record magic", RLT_ECHECKPOINT},
        {"trailer count", "counts 4 tensors, the file holds 3", RLT_ECHECKPOINT},
        {"not a file", "not a regular file", RLT_ECHECKPOINT},
        {"missing file", "cannot open the checkpoint", RLT_EIO},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        memcpy(edit, file, (size_t)n);
        size_t len = (size_t)n;
        const char *target = bad;
        switch (k) {
        case 0: edit[0] = 'X'; break;
        case 1: put32(edit + 8, 2); fix_file_crc(edit, len); break;
        case 2: put64(edit + rec + 76, (uint64_t)1 << 60); put64(edit + rec + 108, (uint64_t)1 << 62);
                fix_file_crc(edit, len); break;
        case 3: put32(edit + rec + 72, 3);
                for (int d = 0; d < 3; d++) put64(edit + rec + 76 + 8 * d, (uint64_t)1 << 32);
                fix_file_crc(edit, len); break;
        case 4: put64(edit + rec + 76, 6); fix_file_crc(edit, len); break;
        case 5: put64(edit + 24, (uint64_t)1 << 60); fix_file_crc(edit, len); break;
        case 6: {
            /* Rename the second tensor 'b' to 'a'; its record follows the first tensor's padded data. */
            long rec_b = 192 + 20;
            CHECK(edit[rec_b + 4] == 'b', "record b found at %ld", rec_b);
            edit[rec_b + 4] = 'a';
            fix_file_crc(edit, len);
            break;
        }
        case 7: edit[385] ^= 0x10; fix_file_crc(edit, len); break;
        case 8: edit[35] ^= 0x01; break;
        case 9: memcpy(edit + len, "junk!", 5); len += 5; break;
        case 10: memset(edit + rec + 4, 'n', 64); fix_file_crc(edit, len); break;
        case 11: edit[rec] = 'X'; fix_file_crc(edit, len); break;
        case 12: put32(edit + len - 8, 4); break;
        case 13: target = dir; break;
        case 14: target = "no/such/file.ckpt"; break;
        }
        if (target == bad) test_write_file(bad, edit, len);
        CHECK(open_expect(r, target, cases[k].status, cases[k].want), "%s", cases[k].what);
    }
}

static void test_writer_failures(ckpt_reader *r) {
    char path[600], tmp[700];
    path_in(path, sizeof path, "keep.ckpt");
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    CHECK(write_file(path, "v: 1\n", smallt, 3) == RLT_OK, "write keep");
    static unsigned char before[MAX_FILE], after[MAX_FILE];
    long n0 = test_read_file(path, before, sizeof before);
    rlt_err e = {0};
    ckpt_writer w;

    /* A directory that does not exist: RLT_EIO at open, nothing created. */
    char nodir[600];
    path_in(nodir, sizeof nodir, "no/such/dir/x.ckpt");
    int rc = ckpt_writer_open(&w, &e, nodir, "m", 1);
    CHECK(rc == RLT_EIO && strstr(e.msg, "cannot create") && strstr(e.msg, "x.ckpt.") && strstr(e.msg, ".tmp"), "missing dir: %s", e.msg);
    CHECK(ckpt_writer_add(&w, "a", RLT_DTYPE_U8, 1, (int64_t[]){1}, "z", 1) == RLT_EIO, "add after failed open");
    CHECK(ckpt_writer_close(&w) == RLT_EIO, "close after failed open");

    /* Aborted midway: the old file is untouched and no temp file is left. */
    rc = ckpt_writer_open(&w, &e, path, "v: 2\n", 5);
    if (rc == RLT_OK) rc = ckpt_writer_add(&w, "a", RLT_DTYPE_F32, 1, smallt[0].shape, smallt[1].data, 20);
    CHECK(rc == RLT_OK && tmp_exists(tmp), "second writer midway: %s", e.msg);
    ckpt_writer_abort(&w);
    ckpt_writer_abort(&w);
    CHECK(!tmp_exists(tmp), "abort removes the temp file");
    CHECK(ckpt_writer_close(&w) != RLT_OK, "close after abort fails");
    long n1 = test_read_file(path, after, sizeof after);
    CHECK(n1 == n0 && memcmp(before, after, (size_t)n0) == 0, "old checkpoint untouched after abort");
    CHECK(open_expect(r, path, RLT_OK, ""), "old checkpoint still reads");

    /* Bad arguments end the writer the same way. */
    struct {
        const char *name;
        int32_t dtype, ndim;
        int64_t shape[4];
        uint64_t bytes;
        const char *want;
    } bad_adds[] = {
        {"a", RLT_DTYPE_F32, 1, {5}, 16, "is given 16 bytes but f32 [5] needs 20"},
        {"", RLT_DTYPE_F32, 1, {5}, 20, "must be 1 to 63 bytes"},
        {"0123456789012345678901234567890123456789012345678901234567890123", RLT_DTYPE_F32, 1, {5}, 20, "must be 1 to 63"},
        {"a", 42, 1, {5}, 20, "unknown dtype 42"},
        {"a", RLT_DTYPE_F32, 5, {5}, 20, "has ndim 5"},
        {"a", RLT_DTYPE_F32, 1, {-5}, 20, "negative shape[0]"},
        {"a", RLT_DTYPE_F32, 4, {INT64_MAX, INT64_MAX, 2, 2}, 20, "overflows 64 bits"},
        {"b", RLT_DTYPE_I32, 2, {2, 3}, 24, "tensor 'b' is added twice"},
    };
    for (size_t k = 0; k < sizeof bad_adds / sizeof bad_adds[0]; k++) {
        rc = ckpt_writer_open(&w, &e, path, NULL, 0);
        if (rc == RLT_OK) rc = ckpt_writer_add(&w, "b", RLT_DTYPE_I32, 2, smallt[1].shape, smallt[1].data, 24);
        if (rc == RLT_OK)
            rc = ckpt_writer_add(&w, bad_adds[k].name, bad_adds[k].dtype, bad_adds[k].ndim, bad_adds[k].shape,
                                 smallt[1].data, bad_adds[k].bytes);
        CHECK(rc == RLT_EINVAL && strstr(e.msg, bad_adds[k].want), "bad add %zu: %s", k, e.msg);
        CHECK(!tmp_exists(tmp), "bad add %zu leaves no temp file", k);
        CHECK(ckpt_writer_close(&w) == RLT_EINVAL, "close after bad add %zu", k);
    }
    n1 = test_read_file(path, after, sizeof after);
    CHECK(n1 == n0 && memcmp(before, after, (size_t)n0) == 0, "old checkpoint untouched after bad adds");

    /* A write that fails midway (file size limit, like a full disk) is RLT_EIO and changes nothing. */
    struct rlimit old_lim, lim;
    getrlimit(RLIMIT_FSIZE, &old_lim);
    lim = old_lim;
    lim.rlim_cur = 4096;
    void (*old_sig)(int) = signal(SIGXFSZ, SIG_IGN);
    if (setrlimit(RLIMIT_FSIZE, &lim) == 0) {
        static float big[10000];
        rc = ckpt_writer_open(&w, &e, path, NULL, 0);
        if (rc == RLT_OK) rc = ckpt_writer_add(&w, "big", RLT_DTYPE_F32, 1, (int64_t[]){10000}, big, sizeof big);
        setrlimit(RLIMIT_FSIZE, &old_lim);
        CHECK(rc == RLT_EIO && strstr(e.msg, "write of") && strstr(e.msg, "keep.ckpt.") && strstr(e.msg, ".tmp"), "write failure: %s", e.msg);
        CHECK(!tmp_exists(tmp), "failed write leaves no temp file");
        CHECK(ckpt_writer_close(&w) == RLT_EIO, "close after a write failure");
        n1 = test_read_file(path, after, sizeof after);
        CHECK(n1 == n0 && memcmp(before, after, (size_t)n0) == 0, "old checkpoint untouched after a failed write");
    }
    signal(SIGXFSZ, old_sig);

    /* rename fails when the destination is a non-empty directory: RLT_EIO, and the temp file is removed. */
    char as_dir[600], inside[700];
    path_in(as_dir, sizeof as_dir, "is_a_dir.ckpt");
    mkdir(as_dir, 0755);
    snprintf(inside, sizeof inside, "%s/x", as_dir);
    test_write_file(inside, "x", 1);
    rc = ckpt_writer_open(&w, &e, as_dir, NULL, 0);
    if (rc == RLT_OK) rc = ckpt_writer_close(&w);
    snprintf(tmp, sizeof tmp, "%s.tmp", as_dir);
    CHECK(rc == RLT_EIO && strstr(e.msg, "cannot rename"), "rename failure: %s", e.msg);
    CHECK(!tmp_exists(tmp), "failed rename leaves no temp file");
    CHECK(ckpt_writer_add(&w, "a", RLT_DTYPE_U8, 1, (int64_t[]){1}, "z", 1) == RLT_EIO, "add after failed close");

    /* Close twice, and a bare file name (its directory is "."). */
    CHECK(chdir(dir) == 0, "chdir");
    rc = ckpt_writer_open(&w, &e, "bare.ckpt", "x", 1);
    if (rc == RLT_OK) rc = ckpt_writer_close(&w);
    CHECK(rc == RLT_OK, "bare name: %s", e.msg);
    CHECK(ckpt_writer_close(&w) == RLT_ESTATE && strstr(e.msg, "already closed"), "second close: %s", e.msg);
    ckpt_writer_abort(&w);
    CHECK(open_expect(r, "bare.ckpt", RLT_OK, ""), "abort after close keeps the file");
    CHECK(chdir("..") == 0, "chdir back");

    /* Metadata over the limit is refused by the writer, since the reader would refuse it. */
    static char long_meta[CKPT_MAX_META + 1];
    memset(long_meta, 'm', sizeof long_meta);
    rc = ckpt_writer_open(&w, &e, path, long_meta, sizeof long_meta);
    CHECK(rc == RLT_EINVAL && strstr(e.msg, "16385 bytes"), "long meta: %s", e.msg);
    rc = ckpt_writer_open(&w, &e, path, long_meta, CKPT_MAX_META);
    if (rc == RLT_OK) rc = ckpt_writer_close(&w);
    CHECK(rc == RLT_OK && open_expect(r, path, RLT_OK, ""), "meta at the limit: %s", e.msg);
}

int main(void) {
    dir = test_tmpdir("checkpoint");
    if (!dir) {
        fprintf(stderr, "cannot make the temp directory\n");
        return 1;
    }
    ckpt_reader *r = calloc(1, sizeof *r); /* about 120 KiB: kept off the stack */
    prepare(medium, N_MEDIUM, 1);
    prepare(smallt, 3, 100);
    test_crc();
    test_round_trip(r);
    test_pieces(r);
    test_corruption(r);
    test_writer_failures(r);
    for (int i = 0; i < N_MEDIUM; i++) free(medium[i].data);
    for (int i = 0; i < 3; i++) free(smallt[i].data);
    free(r);
    return test_summary("test_checkpoint");
}
