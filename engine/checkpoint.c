/* checkpoint.c: see checkpoint.h for the format. Only system calls (open, write, pread, fsync, rename)
 * and memory inside the caller's ckpt_writer / ckpt_reader are used, so saving a checkpoint in the middle
 * of training keeps the engine's promise of no allocation after init. */
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif

#include "checkpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "text.h"

/* Tensor data is written as the host holds it, and the format says little-endian: a big-endian port must
 * byte-swap the data path first, so refuse to build rather than write files that load as garbage. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "checkpoint.c writes tensor data as-is and the format is little-endian"
#endif
_Static_assert(sizeof(off_t) >= 8, "checkpoints can exceed 2 GiB: build with a 64-bit off_t");

enum {
    HEAD_BYTES = 24,           /* magic, version, header_bytes, reserved */
    PREAMBLE_BYTES = 32,       /* the header plus the u64 meta_len */
    RECORD_BYTES = 120,        /* a tensor record before its padding */
    TRAILER_BYTES = 16,
    MIN_FILE_BYTES = PREAMBLE_BYTES + TRAILER_BYTES,
    MAX_RECORD_SPAN = RECORD_BYTES + CKPT_DATA_ALIGN - 1 /* a record with the most padding it can need */
};
#define RECORD_MAGIC 0x52534e54u /* "TNSR" */
#define FILE_MAGIC "RLTCKPT1"
#define END_MAGIC "RLTEND\0\0"
/* write() and pread() are asked for at most this much at once, because Linux caps one call near 2 GiB. */
#define IO_CHUNK ((uint64_t)1 << 30)

_Static_assert(MAX_RECORD_SPAN <= (int)sizeof(((ckpt_writer *)0)->record), "record buffer too small");
_Static_assert(MAX_RECORD_SPAN <= CKPT_READ_BUF_BYTES, "read buffer too small");

/* ---------------------------------------------------------------------------------------------- */
/* CRC32                                                                                          */
/* ---------------------------------------------------------------------------------------------- */

/* The table of the reflected IEEE polynomial 0xEDB88320: entry n is n run through 8 rounds of
 * c = c & 1 ? (c >> 1) ^ 0xEDB88320 : c >> 1. It is spelled out so that it is const data with no
 * initialisation race; the test checks it against the standard check value of "123456789". */
static const uint32_t crc_table[256] = {
    0x00000000u, 0x77073096u, 0xee0e612cu, 0x990951bau, 0x076dc419u, 0x706af48fu, 0xe963a535u, 0x9e6495a3u,
    0x0edb8832u, 0x79dcb8a4u, 0xe0d5e91eu, 0x97d2d988u, 0x09b64c2bu, 0x7eb17cbdu, 0xe7b82d07u, 0x90bf1d91u,
    0x1db71064u, 0x6ab020f2u, 0xf3b97148u, 0x84be41deu, 0x1adad47du, 0x6ddde4ebu, 0xf4d4b551u, 0x83d385c7u,
    0x136c9856u, 0x646ba8c0u, 0xfd62f97au, 0x8a65c9ecu, 0x14015c4fu, 0x63066cd9u, 0xfa0f3d63u, 0x8d080df5u,
    0x3b6e20c8u, 0x4c69105eu, 0xd56041e4u, 0xa2677172u, 0x3c03e4d1u, 0x4b04d447u, 0xd20d85fdu, 0xa50ab56bu,
    0x35b5a8fau, 0x42b2986cu, 0xdbbbc9d6u, 0xacbcf940u, 0x32d86ce3u, 0x45df5c75u, 0xdcd60dcfu, 0xabd13d59u,
    0x26d930acu, 0x51de003au, 0xc8d75180u, 0xbfd06116u, 0x21b4f4b5u, 0x56b3c423u, 0xcfba9599u, 0xb8bda50fu,
    0x2802b89eu, 0x5f058808u, 0xc60cd9b2u, 0xb10be924u, 0x2f6f7c87u, 0x58684c11u, 0xc1611dabu, 0xb6662d3du,
    0x76dc4190u, 0x01db7106u, 0x98d220bcu, 0xefd5102au, 0x71b18589u, 0x06b6b51fu, 0x9fbfe4a5u, 0xe8b8d433u,
    0x7807c9a2u, 0x0f00f934u, 0x9609a88eu, 0xe10e9818u, 0x7f6a0dbbu, 0x086d3d2du, 0x91646c97u, 0xe6635c01u,
    0x6b6b51f4u, 0x1c6c6162u, 0x856530d8u, 0xf262004eu, 0x6c0695edu, 0x1b01a57bu, 0x8208f4c1u, 0xf50fc457u,
    0x65b0d9c6u, 0x12b7e950u, 0x8bbeb8eau, 0xfcb9887cu, 0x62dd1ddfu, 0x15da2d49u, 0x8cd37cf3u, 0xfbd44c65u,
    0x4db26158u, 0x3ab551ceu, 0xa3bc0074u, 0xd4bb30e2u, 0x4adfa541u, 0x3dd895d7u, 0xa4d1c46du, 0xd3d6f4fbu,
    0x4369e96au, 0x346ed9fcu, 0xad678846u, 0xda60b8d0u, 0x44042d73u, 0x33031de5u, 0xaa0a4c5fu, 0xdd0d7cc9u,
    0x5005713cu, 0x270241aau, 0xbe0b1010u, 0xc90c2086u, 0x5768b525u, 0x206f85b3u, 0xb966d409u, 0xce61e49fu,
    0x5edef90eu, 0x29d9c998u, 0xb0d09822u, 0xc7d7a8b4u, 0x59b33d17u, 0x2eb40d81u, 0xb7bd5c3bu, 0xc0ba6cadu,
    0xedb88320u, 0x9abfb3b6u, 0x03b6e20cu, 0x74b1d29au, 0xead54739u, 0x9dd277afu, 0x04db2615u, 0x73dc1683u,
    0xe3630b12u, 0x94643b84u, 0x0d6d6a3eu, 0x7a6a5aa8u, 0xe40ecf0bu, 0x9309ff9du, 0x0a00ae27u, 0x7d079eb1u,
    0xf00f9344u, 0x8708a3d2u, 0x1e01f268u, 0x6906c2feu, 0xf762575du, 0x806567cbu, 0x196c3671u, 0x6e6b06e7u,
    0xfed41b76u, 0x89d32be0u, 0x10da7a5au, 0x67dd4accu, 0xf9b9df6fu, 0x8ebeeff9u, 0x17b7be43u, 0x60b08ed5u,
    0xd6d6a3e8u, 0xa1d1937eu, 0x38d8c2c4u, 0x4fdff252u, 0xd1bb67f1u, 0xa6bc5767u, 0x3fb506ddu, 0x48b2364bu,
    0xd80d2bdau, 0xaf0a1b4cu, 0x36034af6u, 0x41047a60u, 0xdf60efc3u, 0xa867df55u, 0x316e8eefu, 0x4669be79u,
    0xcb61b38cu, 0xbc66831au, 0x256fd2a0u, 0x5268e236u, 0xcc0c7795u, 0xbb0b4703u, 0x220216b9u, 0x5505262fu,
    0xc5ba3bbeu, 0xb2bd0b28u, 0x2bb45a92u, 0x5cb36a04u, 0xc2d7ffa7u, 0xb5d0cf31u, 0x2cd99e8bu, 0x5bdeae1du,
    0x9b64c2b0u, 0xec63f226u, 0x756aa39cu, 0x026d930au, 0x9c0906a9u, 0xeb0e363fu, 0x72076785u, 0x05005713u,
    0x95bf4a82u, 0xe2b87a14u, 0x7bb12baeu, 0x0cb61b38u, 0x92d28e9bu, 0xe5d5be0du, 0x7cdcefb7u, 0x0bdbdf21u,
    0x86d3d2d4u, 0xf1d4e242u, 0x68ddb3f8u, 0x1fda836eu, 0x81be16cdu, 0xf6b9265bu, 0x6fb077e1u, 0x18b74777u,
    0x88085ae6u, 0xff0f6a70u, 0x66063bcau, 0x11010b5cu, 0x8f659effu, 0xf862ae69u, 0x616bffd3u, 0x166ccf45u,
    0xa00ae278u, 0xd70dd2eeu, 0x4e048354u, 0x3903b3c2u, 0xa7672661u, 0xd06016f7u, 0x4969474du, 0x3e6e77dbu,
    0xaed16a4au, 0xd9d65adcu, 0x40df0b66u, 0x37d83bf0u, 0xa9bcae53u, 0xdebb9ec5u, 0x47b2cf7fu, 0x30b5ffe9u,
    0xbdbdf21cu, 0xcabac28au, 0x53b39330u, 0x24b4a3a6u, 0xbad03605u, 0xcdd70693u, 0x54de5729u, 0x23d967bfu,
    0xb3667a2eu, 0xc4614ab8u, 0x5d681b02u, 0x2a6f2b94u, 0xb40bbe37u, 0xc30c8ea1u, 0x5a05df1bu, 0x2d02ef8du,
};

uint32_t ckpt_crc32(uint32_t crc, const void *data, size_t len) {
    const unsigned char *p = data;
    crc = ~crc;
    while (len--) crc = crc_table[(crc ^ *p++) & 0xffu] ^ (crc >> 8);
    return ~crc;
}

/* a(x) * b(x) modulo the CRC polynomial, in the reflected bit order (zlib's multmodp). a must not be 0,
 * which holds because every power of x modulo the polynomial is non-zero. */
static uint32_t crc_multmodp(uint32_t a, uint32_t b) {
    uint32_t m = 1u << 31, p = 0;
    for (;;) {
        if (a & m) {
            p ^= b;
            if ((a & (m - 1)) == 0) break;
        }
        m >>= 1;
        b = (b & 1u) ? (b >> 1) ^ 0xedb88320u : b >> 1;
    }
    return p;
}

/* The combine lets the writer and the reader run each tensor's data through the CRC once and still get
 * the whole-file CRC: crc(A || B) = crc(A) * x^(8 len(B)) + crc(B) modulo the polynomial. */
uint32_t ckpt_crc32_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b) {
    uint32_t op = 1u << 31;       /* x^0 */
    uint32_t sq = 1u << 23;       /* x^8: one byte's worth of shift (x^k is bit 31 - k) */
    for (uint64_t n = len_b; n; n >>= 1) {
        if (n & 1u) op = crc_multmodp(sq, op);
        sq = crc_multmodp(sq, sq);
    }
    return crc_multmodp(op, crc_a) ^ crc_b;
}

/* ---------------------------------------------------------------------------------------------- */
/* Shared helpers                                                                                 */
/* ---------------------------------------------------------------------------------------------- */

uint32_t ckpt_dtype_size(int32_t dtype) {
    switch (dtype) {
    case RLT_DTYPE_F32: return 4;
    case RLT_DTYPE_U8: return 1;
    case RLT_DTYPE_I32: return 4;
    case RLT_DTYPE_F16: return 2;
    case RLT_DTYPE_BF16: return 2;
    case RLT_DTYPE_I64: return 8;
    }
    return 0;
}

const char *ckpt_dtype_name(int32_t dtype) {
    switch (dtype) {
    case RLT_DTYPE_F32: return "f32";
    case RLT_DTYPE_U8: return "u8";
    case RLT_DTYPE_I32: return "i32";
    case RLT_DTYPE_F16: return "f16";
    case RLT_DTYPE_BF16: return "bf16";
    case RLT_DTYPE_I64: return "i64";
    }
    return "unknown-dtype";
}

static void put_u32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static void put_u64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get_u32(const unsigned char *p) {
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static uint64_t get_u64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static uint64_t align_up(uint64_t x) { return (x + CKPT_DATA_ALIGN - 1) & ~(uint64_t)(CKPT_DATA_ALIGN - 1); }

/* Bytes of a tensor of this shape, or -1 when a dimension or the total does not fit in an int64 (so every
 * size and offset later fits in off_t). A zero dimension makes an empty tensor whatever the others are. */
static int shape_bytes(uint32_t ndim, const uint64_t *dims, uint32_t esize, uint64_t *out) {
    uint64_t n = esize;
    for (uint32_t i = 0; i < ndim; i++) {
        if (dims[i] > (uint64_t)INT64_MAX) return -1;
        if (dims[i] == 0) n = 0;
    }
    for (uint32_t i = 0; i < ndim && n; i++) {
        if (dims[i] > (uint64_t)INT64_MAX / n) return -1;
        n *= dims[i];
    }
    *out = n;
    return 0;
}

/* "[64, 17]", or "[]" for a scalar. */
static const char *format_shape(char *buf, size_t cap, int32_t ndim, const uint64_t *dims) {
    size_t used = (size_t)snprintf(buf, cap, "[");
    for (int32_t i = 0; i < ndim && used < cap; i++)
        used += (size_t)snprintf(buf + used, cap - used, "%s%" PRIu64, i ? ", " : "", dims[i]);
    if (used < cap) snprintf(buf + used, cap - used, "]");
    return buf;
}

/* ---------------------------------------------------------------------------------------------- */
/* Writer                                                                                         */
/* ---------------------------------------------------------------------------------------------- */

/* Every failure ends the writer and removes its temp file, so callers can simply return the status and
 * the destination keeps whatever it held before. */
static int writer_fail(ckpt_writer *w, int status) {
    if (w->fd >= 0) close(w->fd);
    w->fd = -1;
    if (w->has_tmp) unlink(w->tmp_path);
    w->has_tmp = 0;
    w->in_tensor = 0;
    w->status = status;
    return status;
}

#define W_FAIL(w, status, ...) return writer_fail((w), rlt_err_set((w)->e, (status), __FILE__, __LINE__, __VA_ARGS__))

static int writer_put(ckpt_writer *w, const void *data, uint64_t len) {
    const unsigned char *p = data;
    while (len > 0) {
        size_t chunk = (size_t)(len < IO_CHUNK ? len : IO_CHUNK);
        ssize_t n = write(w->fd, p, chunk);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0)
            W_FAIL(w, RLT_EIO, "%s: write of %zu bytes at byte %" PRIu64 " failed: %s", w->tmp_path, chunk,
                   w->offset, n < 0 ? strerror(errno) : "no progress");
        p += n;
        len -= (uint64_t)n;
        w->offset += (uint64_t)n;
    }
    return RLT_OK;
}

/* A writer that failed keeps returning that failure without touching e (which holds the first message);
 * one that was closed or aborted is a state error. */
static int writer_usable(ckpt_writer *w) {
    if (w->status != RLT_OK) return w->status;
    if (w->fd < 0) RLT_FAIL(w->e, RLT_ESTATE, "%s: the checkpoint writer is already closed", w->path);
    return RLT_OK;
}

int ckpt_writer_open(ckpt_writer *w, rlt_err *e, const char *path, const char *meta, size_t meta_len) {
    w->fd = -1;
    w->status = RLT_OK;
    w->has_tmp = 0;
    w->in_tensor = 0;
    w->n_tensors = 0;
    w->e = e;
    w->offset = 0;
    w->file_crc = 0;
    w->path[0] = '\0';
    w->tmp_path[0] = '\0';
    if (!path || !*path) W_FAIL(w, RLT_EINVAL, "checkpoint path is empty");
    size_t plen = strlen(path);
    /* The temporary name adds ".<pid>.<n>.tmp" (at most 48 bytes): unique to this save, so a second process
     * writing the same path (refused by the out_dir lock in the trainer, but not for rlt_agent_save) never
     * truncates or renames this one's file. */
    if (plen + 48 > CKPT_PATH_BYTES)
        W_FAIL(w, RLT_EINVAL, "checkpoint path is %zu bytes, the limit is %d: %.80s...", plen, CKPT_PATH_BYTES - 48, path);
    memcpy(w->path, path, plen + 1);
    rlt_text_tmp_path(w->tmp_path, sizeof w->tmp_path, path);
    if (meta_len > CKPT_MAX_META)
        W_FAIL(w, RLT_EINVAL, "%s: checkpoint metadata is %zu bytes, the format allows at most %d", path, meta_len,
               CKPT_MAX_META);
    if (meta_len && !meta) W_FAIL(w, RLT_EINVAL, "%s: metadata is NULL but meta_len is %zu", path, meta_len);

    w->fd = open(w->tmp_path, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
    if (w->fd < 0)
        W_FAIL(w, RLT_EIO, "%s: cannot create the temporary checkpoint file: %s (does the directory exist and is it "
               "writable?)", w->tmp_path, strerror(errno));
    w->has_tmp = 1;

    unsigned char head[PREAMBLE_BYTES];
    memcpy(head, FILE_MAGIC, 8);
    put_u32(head + 8, CKPT_FORMAT_VERSION);
    put_u32(head + 12, HEAD_BYTES);
    put_u64(head + 16, 0);
    put_u64(head + 24, meta_len);
    RLT_TRY(writer_put(w, head, sizeof head));
    w->file_crc = ckpt_crc32(0, head, sizeof head);
    if (meta_len) {
        RLT_TRY(writer_put(w, meta, meta_len));
        w->file_crc = ckpt_crc32(w->file_crc, meta, meta_len);
    }
    return RLT_OK;
}

int ckpt_writer_begin(ckpt_writer *w, const char *name, int32_t dtype, int32_t ndim, const int64_t *shape,
                      uint64_t bytes) {
    RLT_TRY(writer_usable(w));
    if (w->in_tensor)
        W_FAIL(w, RLT_ESTATE, "%s: tensor '%s' begun before the previous one was ended", w->path, name ? name : "(null)");
    size_t nlen = name ? strnlen(name, CKPT_NAME_BYTES) : 0;
    if (nlen == 0 || nlen >= CKPT_NAME_BYTES)
        W_FAIL(w, RLT_EINVAL, "%s: tensor name '%.63s%s' must be 1 to %d bytes", w->path, name ? name : "",
               nlen >= CKPT_NAME_BYTES ? "..." : "", CKPT_NAME_BYTES - 1);
    for (int32_t i = 0; i < w->n_tensors; i++)
        if (strcmp(w->names[i], name) == 0) W_FAIL(w, RLT_EINVAL, "%s: tensor '%s' is added twice", w->path, name);
    if (w->n_tensors >= CKPT_MAX_TENSORS)
        W_FAIL(w, RLT_EINVAL, "%s: tensor '%s' would be tensor %d, the format allows %d", w->path, name,
               w->n_tensors + 1, CKPT_MAX_TENSORS);
    uint32_t esize = ckpt_dtype_size(dtype);
    if (esize == 0) W_FAIL(w, RLT_EINVAL, "%s: tensor '%s' has unknown dtype %d", w->path, name, (int)dtype);
    if (ndim < 0 || ndim > CKPT_MAX_NDIM || (ndim > 0 && !shape))
        W_FAIL(w, RLT_EINVAL, "%s: tensor '%s' has ndim %d, expected 0..%d with a shape", w->path, name, (int)ndim,
               CKPT_MAX_NDIM);
    uint64_t dims[CKPT_MAX_NDIM] = {0};
    for (int32_t i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            W_FAIL(w, RLT_EINVAL, "%s: tensor '%s' has negative shape[%d] = %" PRId64, w->path, name, (int)i, shape[i]);
        dims[i] = (uint64_t)shape[i];
    }
    char sbuf[128];
    uint64_t want;
    if (shape_bytes((uint32_t)ndim, dims, esize, &want) != 0)
        W_FAIL(w, RLT_EINVAL, "%s: tensor '%s' of shape %s overflows 64 bits", w->path, name,
               format_shape(sbuf, sizeof sbuf, ndim, dims));
    if (bytes != want)
        W_FAIL(w, RLT_EINVAL, "%s: tensor '%s' is given %" PRIu64 " bytes but %s %s needs %" PRIu64, w->path, name,
               bytes, ckpt_dtype_name(dtype), format_shape(sbuf, sizeof sbuf, ndim, dims), want);

    unsigned char *rec = w->record;
    memset(rec, 0, sizeof w->record);
    put_u32(rec, RECORD_MAGIC);
    memcpy(rec + 4, name, nlen);
    put_u32(rec + 68, (uint32_t)dtype);
    put_u32(rec + 72, (uint32_t)ndim);
    for (int i = 0; i < CKPT_MAX_NDIM; i++) put_u64(rec + 76 + 8 * i, dims[i]);
    put_u64(rec + 108, bytes);
    /* The CRC at +116 is patched in by ckpt_writer_end once the data has gone through. */
    w->record_offset = w->offset;
    w->record_len = (uint32_t)(align_up(w->offset + RECORD_BYTES) - w->offset);
    RLT_TRY(writer_put(w, rec, w->record_len));
    memcpy(w->names[w->n_tensors], name, nlen + 1);
    w->in_tensor = 1;
    w->tensor_bytes = bytes;
    w->tensor_done = 0;
    w->tensor_crc = 0;
    return RLT_OK;
}

int ckpt_writer_write(ckpt_writer *w, const void *data, uint64_t bytes) {
    RLT_TRY(writer_usable(w));
    if (!w->in_tensor) W_FAIL(w, RLT_ESTATE, "%s: tensor data written with no tensor begun", w->path);
    const char *name = w->names[w->n_tensors];
    if (bytes > w->tensor_bytes - w->tensor_done)
        W_FAIL(w, RLT_EINVAL, "%s: tensor '%s' is given %" PRIu64 " more bytes after %" PRIu64 ", but it has %" PRIu64,
               w->path, name, bytes, w->tensor_done, w->tensor_bytes);
    if (bytes && !data) W_FAIL(w, RLT_EINVAL, "%s: tensor '%s' data is NULL", w->path, name);
    const unsigned char *p = data;
    for (uint64_t done = 0; done < bytes; done += IO_CHUNK) {
        size_t k = (size_t)(bytes - done < IO_CHUNK ? bytes - done : IO_CHUNK);
        w->tensor_crc = ckpt_crc32(w->tensor_crc, p + done, k);
    }
    RLT_TRY(writer_put(w, data, bytes));
    w->tensor_done += bytes;
    return RLT_OK;
}

int ckpt_writer_end(ckpt_writer *w) {
    RLT_TRY(writer_usable(w));
    if (!w->in_tensor) W_FAIL(w, RLT_ESTATE, "%s: tensor ended with no tensor begun", w->path);
    const char *name = w->names[w->n_tensors];
    if (w->tensor_done != w->tensor_bytes)
        W_FAIL(w, RLT_EINVAL, "%s: tensor '%s' ended after %" PRIu64 " of its %" PRIu64 " bytes", w->path, name,
               w->tensor_done, w->tensor_bytes);
    put_u32(w->record + 116, w->tensor_crc);
    ssize_t n;
    do n = pwrite(w->fd, w->record + 116, 4, (off_t)(w->record_offset + 116));
    while (n < 0 && errno == EINTR);
    if (n != 4)
        W_FAIL(w, RLT_EIO, "%s: writing the CRC of tensor '%s' at byte %" PRIu64 " failed: %s", w->tmp_path, name,
               w->record_offset + 116, n < 0 ? strerror(errno) : "short write");
    w->file_crc = ckpt_crc32(w->file_crc, w->record, w->record_len);
    w->file_crc = ckpt_crc32_combine(w->file_crc, w->tensor_crc, w->tensor_bytes);
    w->n_tensors++;
    w->in_tensor = 0;
    return RLT_OK;
}

int ckpt_writer_add(ckpt_writer *w, const char *name, int32_t dtype, int32_t ndim, const int64_t *shape,
                    const void *data, uint64_t bytes) {
    RLT_TRY(ckpt_writer_begin(w, name, dtype, ndim, shape, bytes));
    RLT_TRY(ckpt_writer_write(w, data, bytes));
    return ckpt_writer_end(w);
}

/* The rename is only durable once the directory entry is on disk too. Filesystems that cannot fsync a
 * directory say EINVAL; there is nothing more to do on those. */
static int fsync_parent_dir(rlt_err *e, const char *path) {
    char dir[CKPT_PATH_BYTES];
    const char *slash = strrchr(path, '/');
    if (!slash) {
        memcpy(dir, ".", 2);
    } else if (slash == path) {
        memcpy(dir, "/", 2);
    } else {
        memcpy(dir, path, (size_t)(slash - path));
        dir[slash - path] = '\0';
    }
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) RLT_FAIL(e, RLT_EIO, "%s: written, but its directory %s cannot be opened to fsync it: %s", path, dir, strerror(errno));
    int rc = fsync(fd);
    int err = errno;
    close(fd);
    if (rc != 0 && err != EINVAL)
        RLT_FAIL(e, RLT_EIO, "%s: written, but fsync of its directory %s failed: %s", path, dir, strerror(err));
    return RLT_OK;
}

int ckpt_writer_close(ckpt_writer *w) {
    RLT_TRY(writer_usable(w));
    if (w->in_tensor)
        W_FAIL(w, RLT_ESTATE, "%s: closed in the middle of tensor '%s'", w->path, w->names[w->n_tensors]);
    unsigned char trailer[TRAILER_BYTES];
    memcpy(trailer, END_MAGIC, 8);
    put_u32(trailer + 8, (uint32_t)w->n_tensors);
    put_u32(trailer + 12, w->file_crc);
    RLT_TRY(writer_put(w, trailer, sizeof trailer));
    if (fsync(w->fd) != 0) W_FAIL(w, RLT_EIO, "%s: fsync failed: %s", w->tmp_path, strerror(errno));
    int fd = w->fd;
    w->fd = -1;
    /* close can report a delayed write error (NFS), and then the data is not known to be there. */
    if (close(fd) != 0) W_FAIL(w, RLT_EIO, "%s: close failed: %s", w->tmp_path, strerror(errno));
    if (rename(w->tmp_path, w->path) != 0)
        W_FAIL(w, RLT_EIO, "cannot rename %s to %s: %s", w->tmp_path, w->path, strerror(errno));
    w->has_tmp = 0;
    int rc = fsync_parent_dir(w->e, w->path);
    if (rc != RLT_OK) w->status = rc;
    return rc;
}

void ckpt_writer_abort(ckpt_writer *w) {
    int active = w->fd >= 0 || w->has_tmp;
    writer_fail(w, w->status);
    if (active && w->status == RLT_OK) w->status = RLT_ESTATE;
}

/* ---------------------------------------------------------------------------------------------- */
/* Reader                                                                                         */
/* ---------------------------------------------------------------------------------------------- */

/* Reads exactly len bytes at off. The sizes were checked against fstat, so running short means the file
 * shrank under us, which is reported as the truncation it is. */
static int reader_pread(ckpt_reader *r, void *dst, uint64_t len, uint64_t off) {
    unsigned char *p = dst;
    uint64_t done = 0;
    while (done < len) {
        size_t k = (size_t)(len - done < IO_CHUNK ? len - done : IO_CHUNK);
        ssize_t n = pread(r->fd, p + done, k, (off_t)(off + done));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0)
            RLT_FAIL(r->e, RLT_EIO, "%s: read of %zu bytes at byte %" PRIu64 " failed: %s", r->path, k, off + done,
                     strerror(errno));
        if (n == 0)
            RLT_FAIL(r->e, RLT_ECHECKPOINT, "%s: truncated: the file ended at byte %" PRIu64 " while reading bytes %" PRIu64
                     "..%" PRIu64 " (was it changed while being read?)", r->path, off + done, off, off + len);
        done += (uint64_t)n;
    }
    return RLT_OK;
}

/* CRC of len bytes at off, streamed through the reader's buffer. */
static int reader_crc(ckpt_reader *r, uint64_t off, uint64_t len, uint32_t *crc) {
    uint32_t c = 0;
    for (uint64_t done = 0; done < len; done += CKPT_READ_BUF_BYTES) {
        uint64_t k = len - done < CKPT_READ_BUF_BYTES ? len - done : CKPT_READ_BUF_BYTES;
        RLT_TRY(reader_pread(r, r->buf, k, off + done));
        c = ckpt_crc32(c, r->buf, (size_t)k);
    }
    *crc = c;
    return RLT_OK;
}

static int reader_check_header(ckpt_reader *r, uint32_t *crc, uint64_t *pos) {
    const char *path = r->path;
    uint64_t size = r->file_bytes;
    unsigned char *b = r->buf;
    RLT_TRY(reader_pread(r, b, size < PREAMBLE_BYTES ? size : PREAMBLE_BYTES, 0));
    if (size < 8)
        RLT_FAIL(r->e, RLT_ECHECKPOINT, "%s: truncated: file has %" PRIu64 " bytes, a checkpoint has at least %d",
                 path, size, MIN_FILE_BYTES);
    if (memcmp(b, FILE_MAGIC, 8) != 0)
        RLT_FAIL(r->e, RLT_ECHECKPOINT, "%s: not an rltrain checkpoint: bad magic at byte 0 (found %02x %02x %02x %02x "
                 "%02x %02x %02x %02x, expected \"" FILE_MAGIC "\")", path, b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]);
    if (size >= 12) {
        uint32_t version = get_u32(b + 8);
        if (version > CKPT_FORMAT_VERSION)
            RLT_FAIL(r->e, RLT_ECHECKPOINT, "%s: written by a newer rltrain (format %u, this build reads %u): load it "
                     "with a newer rltrain", path, version, CKPT_FORMAT_VERSION);
        if (version != CKPT_FORMAT_VERSION)
            RLT_FAIL(r->e, RLT_ECHECKPOINT, "%s: unknown format version %u at byte 8 (this build reads %u)", path,
                     version, CKPT_FORMAT_VERSION);
    }
    if (size < MIN_FILE_BYTES)
        RLT_FAIL(r->e, RLT_ECHECKPOINT, "%s: truncated: file has %" PRIu64 " bytes, a checkpoint has at least %d",
                 path, size, MIN_FILE_BYTES);
    uint32_t header_bytes = get_u32(b + 12);
    if (header_bytes != HEAD_BYTES)
        RLT_FAIL(r->e, RLT_ECHECKPOINT, "%s: corrupted: header_bytes at byte 12 is %u, format %u has %d", path,
                 header_bytes, CKPT_FORMAT_VERSION, HEAD_BYTES);
    uint64_t reserved = get_u64(b + 16);
    if (reserved != 0)
        RLT_FAIL(r->e, RLT_ECHECKPOINT, "%s: corrupted: reserved field at byte 16 is 0x%" PRIx64 ", expected 0", path,
                 reserved);
    uint64_t meta_len = get_u64(b + 24);
    if (meta_len > size)
        RLT_FAIL(r->e, RLT_ECHECKPOINT, "%s: truncated or corrupted: metadata length %" PRIu64 " at byte 24 is larger "
                 "than the whole file (%" PRIu64 " bytes)", path, meta_len, size);
    if (meta_len > size - MIN_FILE_BYTES)
        RLT_FAIL(r->e, RLT_ECHECKPOINT, "%s: truncated: file has %" PRIu64 " bytes, the metadata needs bytes %d..%" PRIu64
                 " and a %d-byte trailer", path, size, PREAMBLE_BYTES, PREAMBLE_BYTES + meta_len, TRAILER_BYTES);
    if (meta_len > CKPT_MAX_META)
        RLT_FAIL(r->e, RLT_ECHECKPOINT, "%s: metadata is %" PRIu64 " bytes, this build reads at most %d", path,
                 meta_len, CKPT_MAX_META);
    *crc = ckpt_crc32(0, b, PREAMBLE_BYTES);
    RLT_TRY(reader_pread(r, r->meta, meta_len, PREAMBLE_BYTES));
    r->meta[meta_len] = '\0';
    r->meta_len = (size_t)meta_len;
    *crc = ckpt_crc32(*crc, r->meta, (size_t)meta_len);
    *pos = PREAMBLE_BYTES + meta_len;
    return RLT_OK;
}

/* Checks the record that starts at pos (its first bytes already in r->buf, `have` of them) and its data,
 * and adds it to the directory. *next gets where the following record or the trailer starts. */
static int reader_check_record(ckpt_reader *r, uint64_t pos, uint64_t have, uint32_t *crc, uint64_t *next) {
    const char *path = r->path;
    uint64_t size = r->file_bytes;
    const unsigned char *b = r->buf;
    int32_t k = r->n_tensors;
    if (k >= CKPT_MAX_TENSORS)
        RLT_FAIL(r->e, RLT_ECHECKPOINT, "%s: more than %d tensors (record %d at byte %" PRIu64 ")", path,
                 CKPT_MAX_TENSORS, k + 1, pos);
    if (have < RECORD_BYTES)
        RLT_FAIL(r->e, RLT_ECHECKPOINT, "%s: truncated: file has %" PRIu64 " bytes, the record of tensor #%d needs "
                 "bytes %" PRIu64 "..%" PRIu64, path, size, k, pos, pos + RECORD_BYTES);

    ckpt_tensor_info *t = &r->tensors[k];
    const unsigned char *name = b + 4;
    const unsigned char *nul = memchr(name, 0, CKPT_NAME_BYTES);
    if (!nul)
        RLT_FAIL(r->e, RLT_ECHECKPOINT, "%s: corrupted: the name of tensor #%d at byte %" PRIu64 " is not NUL-terminated",
                 path, k, pos + 4);
    size_t nlen = (size_t)(nul - name);
    if (nlen == 0)
        RLT_FAIL(r->e, RLT_ECHECKPOINT, "%s: corrupted: tensor #%d at byte %" PRIu64 " has an empty name", path, k, pos + 4);
    for (size_t i = nlen; i < CKPT_NAME_BYTES; i++)
        if (name[i] != 0)
            RLT_FAIL(r->e, RLT_ECHECKPOINT, "%s: corrupted: the name of tensor '%s' has a non-zero byte after its end at "
                     "byte %" PRIu64, path, (const char *)name, pos + 4 + i);
    memcpy(t->name, name, nlen + 1);
    for (int32_t i = 0; i < k; i++)
        if (strcmp(r->tensors[i].name, t->name) == 0)
            RLT_FAIL(r->e, RLT_ECHECKPOINT, "%s: corrupted: tensor '%s' appears twice (again at byte %" PRIu64 ")", path,
                     t->name, pos);

    uint32_t dtype = get_u32(b + 68);
    uint32_t esize = dtype <= (uint32_t)INT32_MAX ? ckpt_dtype_size((int32_t)dtype) : 0;
    if (esize == 0)
        RLT_FAIL(r->e, RLT_ECHECKPOINT, "%s: corrupted: tensor '%s' has unknown dtype %u at byte %" PRIu64, path,
                 t->name, dtype, pos + 68);
    uint32_t ndim = get_u32(b + 72);
    if (ndim > CKPT_MAX_NDIM)
        RLT_FAIL(r->e, RLT_ECHECKPOINT, "%s: corrupted: tensor '%s' has ndim %u at byte %" PRIu64 ", at most %d", path,
                 t->name, ndim, pos + 72, CKPT_MAX_NDIM);
    uint64_t dims[CKPT_MAX_NDIM];
    for (uint32_t i = 0; i < CKPT_MAX_NDIM; i++) {
        dims[i] = get_u64(b + 76 + 8 * i);
        if (i >= ndim && dims[i] != 0)
            RLT_FAIL(r->e, RLT_ECHECKPOINT, "%s: corrupted: tensor '%s' has ndim %u but shape[%u] = %" PRIu64 " at byte %"
                     PRIu64 ", expected 0", path, t->name, ndim, i, dims[i], pos + 76 + 8 * i);
    }
    char sbuf[160];
    uint64_t want;
    if (shape_bytes(ndim, dims, esize, &want) != 0)
        RLT_FAIL(r->e, RLT_ECHECKPOINT, "%s: corrupted: the size of tensor '%s' (%s %s at byte %" PRIu64 ") overflows "
                 "64 bits", path, t->name, ckpt_dtype_name((int32_t)dtype),
                 format_shape(sbuf, sizeof sbuf, (int32_t)ndim, dims), pos + 76);
    uint64_t data_bytes = get_u64(b + 108);
    if (data_bytes != want)
        RLT_FAIL(r->e, RLT_ECHECKPOINT, "%s: corrupted: tensor '%s' at byte %" PRIu64 " says data_bytes %" PRIu64
                 " but %s %s needs %" PRIu64, path, t->name, pos, data_bytes, ckpt_dtype_name((int32_t)dtype),
                 format_shape(sbuf, sizeof sbuf, (int32_t)ndim, dims), want);

    /* Sizes are checked against the file before any data is read, so an absurd shape costs nothing. */
    uint64_t data_off = align_up(pos + RECORD_BYTES);
    if (data_off > size || data_bytes > size - data_off)
        RLT_FAIL(r->e, RLT_ECHECKPOINT, "%s: truncated: file has %" PRIu64 " bytes, tensor '%s' needs bytes %" PRIu64
                 "..%" PRIu64, path, size, t->name, data_off, data_off + data_bytes);
    uint64_t data_end = data_off + data_bytes;
    if (size - data_end < TRAILER_BYTES)
        RLT_FAIL(r->e, RLT_ECHECKPOINT, "%s: truncated: file has %" PRIu64 " bytes, the trailer after tensor '%s' "
                 "needs bytes %" PRIu64 "..%" PRIu64, path, size, t->name, data_end, data_end + TRAILER_BYTES);
    uint64_t span = data_off - pos;
    for (uint64_t i = RECORD_BYTES; i < span; i++)
        if (b[i] != 0)
            RLT_FAIL(r->e, RLT_ECHECKPOINT, "%s: corrupted: padding byte %" PRIu64 " before tensor '%s' is 0x%02x, "
                     "expected 0", path, pos + i, t->name, b[i]);
    uint32_t stored = get_u32(b + 116);
    t->dtype = (int32_t)dtype;
    t->ndim = (int32_t)ndim;
    for (int i = 0; i < CKPT_MAX_NDIM; i++) t->shape[i] = (int64_t)dims[i];
    t->offset = data_off;
    t->bytes = data_bytes;
    t->crc = stored;
    *crc = ckpt_crc32(*crc, b, (size_t)span); /* b is reused by reader_crc below */

    uint32_t got;
    RLT_TRY(reader_crc(r, data_off, data_bytes, &got));
    if (got != stored)
        RLT_FAIL(r->e, RLT_ECHECKPOINT, "%s: corrupted: the data of tensor '%s' (bytes %" PRIu64 "..%" PRIu64 ") fails "
                 "its CRC (stored 0x%08x, computed 0x%08x)", path, t->name, data_off, data_end, stored, got);
    *crc = ckpt_crc32_combine(*crc, got, data_bytes);
    r->n_tensors = k + 1;
    *next = data_end;
    return RLT_OK;
}

static int reader_check_file(ckpt_reader *r) {
    const char *path = r->path;
    uint64_t size = r->file_bytes;
    uint32_t crc = 0;
    uint64_t pos = 0;
    RLT_TRY(reader_check_header(r, &crc, &pos));
    for (;;) {
        uint64_t left = size - pos;
        if (left < TRAILER_BYTES)
            RLT_FAIL(r->e, RLT_ECHECKPOINT, "%s: truncated: file has %" PRIu64 " bytes, the trailer (or tensor record #%d) "
                     "needs bytes %" PRIu64 "..%" PRIu64, path, size, r->n_tensors, pos, pos + TRAILER_BYTES);
        uint64_t have = left < MAX_RECORD_SPAN ? left : MAX_RECORD_SPAN;
        RLT_TRY(reader_pread(r, r->buf, have, pos));
        if (memcmp(r->buf, END_MAGIC, 8) == 0) break;
        uint32_t magic = get_u32(r->buf);
        if (magic != RECORD_MAGIC)
            RLT_FAIL(r->e, RLT_ECHECKPOINT, "%s: corrupted: bad record magic 0x%08x at byte %" PRIu64 ", expected tensor "
                     "record #%d (\"TNSR\") or the trailer (\"RLTEND\")", path, magic, pos, r->n_tensors);
        RLT_TRY(reader_check_record(r, pos, have, &crc, &pos));
    }
    const unsigned char *b = r->buf;
    uint32_t count = get_u32(b + 8);
    uint32_t stored = get_u32(b + 12);
    if (count != (uint32_t)r->n_tensors)
        RLT_FAIL(r->e, RLT_ECHECKPOINT, "%s: corrupted: the trailer at byte %" PRIu64 " counts %u tensors, the file "
                 "holds %d", path, pos, count, r->n_tensors);
    if (stored != crc)
        RLT_FAIL(r->e, RLT_ECHECKPOINT, "%s: corrupted: whole-file CRC mismatch (trailer at byte %" PRIu64 " says "
                 "0x%08x, bytes 0..%" PRIu64 " give 0x%08x)", path, pos, stored, pos, crc);
    if (size - pos != TRAILER_BYTES)
        RLT_FAIL(r->e, RLT_ECHECKPOINT, "%s: corrupted: %" PRIu64 " unexpected bytes after the trailer, which ends at "
                 "byte %" PRIu64, path, size - pos - TRAILER_BYTES, pos + TRAILER_BYTES);
    return RLT_OK;
}

int ckpt_reader_open(ckpt_reader *r, rlt_err *e, const char *path) {
    r->fd = -1;
    r->n_tensors = 0;
    r->e = e;
    r->file_bytes = 0;
    r->meta_len = 0;
    r->meta[0] = '\0';
    r->path[0] = '\0';
    if (!path || !*path) RLT_FAIL(e, RLT_EINVAL, "checkpoint path is empty");
    size_t plen = strlen(path);
    if (plen >= CKPT_PATH_BYTES)
        RLT_FAIL(e, RLT_EINVAL, "checkpoint path is %zu bytes, the limit is %d: %.80s...", plen, CKPT_PATH_BYTES - 1, path);
    memcpy(r->path, path, plen + 1);
    /* O_NONBLOCK: opening a FIFO must not wait for a writer; it is then refused as not a regular file. */
    r->fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (r->fd < 0) RLT_FAIL(e, RLT_EIO, "%s: cannot open the checkpoint: %s", path, strerror(errno));
    struct stat st;
    int rc;
    if (fstat(r->fd, &st) != 0) {
        rc = rlt_err_set(e, RLT_EIO, __FILE__, __LINE__, "%s: fstat failed: %s", path, strerror(errno));
    } else if (!S_ISREG(st.st_mode)) {
        rc = rlt_err_set(e, RLT_ECHECKPOINT, __FILE__, __LINE__, "%s: not a regular file", path);
    } else {
        r->file_bytes = (uint64_t)st.st_size;
        rc = reader_check_file(r);
    }
    if (rc != RLT_OK) ckpt_reader_close(r);
    return rc;
}

const char *ckpt_reader_meta(const ckpt_reader *r, size_t *len) {
    if (len) *len = r->meta_len;
    return r->meta;
}

int ckpt_reader_find(ckpt_reader *r, const char *name, const ckpt_tensor_info **info) {
    if (r->fd < 0) RLT_FAIL(r->e, RLT_ESTATE, "%s: the checkpoint reader is not open", r->path);
    for (int32_t i = 0; i < r->n_tensors; i++) {
        if (name && strcmp(r->tensors[i].name, name) == 0) {
            if (info) *info = &r->tensors[i];
            return RLT_OK;
        }
    }
    /* Listing what is there makes a renamed or missing network part obvious. */
    char list[768];
    size_t used = 0;
    list[0] = '\0';
    for (int32_t i = 0; i < r->n_tensors && used < sizeof list; i++)
        used += (size_t)snprintf(list + used, sizeof list - used, "%s'%s'", i ? ", " : "", r->tensors[i].name);
    RLT_FAIL(r->e, RLT_ECHECKPOINT, "%s: no tensor named '%s' (the checkpoint has %d: %s); was it saved by a different "
             "algorithm or network layout?", r->path, name ? name : "(null)", r->n_tensors, list);
}

int ckpt_reader_expect(ckpt_reader *r, const char *name, int32_t dtype, int32_t ndim, const int64_t *shape) {
    const ckpt_tensor_info *t = NULL;
    RLT_TRY(ckpt_reader_find(r, name, &t));
    int same = t->dtype == dtype && t->ndim == ndim;
    for (int32_t i = 0; same && i < ndim; i++) same = shape && t->shape[i] == shape[i];
    if (same) return RLT_OK;
    uint64_t have[CKPT_MAX_NDIM], want[CKPT_MAX_NDIM] = {0};
    int32_t wdim = ndim < 0 ? 0 : ndim > CKPT_MAX_NDIM ? CKPT_MAX_NDIM : ndim;
    for (int i = 0; i < CKPT_MAX_NDIM; i++) have[i] = (uint64_t)t->shape[i];
    for (int32_t i = 0; i < wdim && shape; i++) want[i] = (uint64_t)shape[i];
    char a[160], b[160];
    RLT_FAIL(r->e, RLT_ECHECKPOINT, "%s: tensor '%s' is %s %s in the checkpoint but %s %s here; was it saved with a "
             "different config?", r->path, name, ckpt_dtype_name(t->dtype), format_shape(a, sizeof a, t->ndim, have),
             ckpt_dtype_name(dtype), format_shape(b, sizeof b, wdim, want));
}

int ckpt_reader_read(ckpt_reader *r, const char *name, void *dst, uint64_t bytes) {
    const ckpt_tensor_info *t = NULL;
    RLT_TRY(ckpt_reader_find(r, name, &t));
    if (bytes != t->bytes) {
        uint64_t dims[CKPT_MAX_NDIM];
        for (int i = 0; i < CKPT_MAX_NDIM; i++) dims[i] = (uint64_t)t->shape[i];
        char s[160];
        RLT_FAIL(r->e, RLT_ECHECKPOINT, "%s: size mismatch: tensor '%s' is %s %s = %" PRIu64 " bytes in the checkpoint, "
                 "but the destination has %" PRIu64 " bytes", r->path, name, ckpt_dtype_name(t->dtype),
                 format_shape(s, sizeof s, t->ndim, dims), t->bytes, bytes);
    }
    if (bytes && !dst) RLT_FAIL(r->e, RLT_EINVAL, "%s: destination for tensor '%s' is NULL", r->path, name);
    RLT_TRY(reader_pread(r, dst, bytes, t->offset));
    uint32_t got = 0;
    for (uint64_t done = 0; done < bytes; done += IO_CHUNK) {
        size_t k = (size_t)(bytes - done < IO_CHUNK ? bytes - done : IO_CHUNK);
        got = ckpt_crc32(got, (const unsigned char *)dst + done, k);
    }
    if (got != t->crc)
        RLT_FAIL(r->e, RLT_ECHECKPOINT, "%s: tensor '%s' (bytes %" PRIu64 "..%" PRIu64 ") fails its CRC on read (stored "
                 "0x%08x, read 0x%08x): the file changed after it was opened", r->path, name, t->offset,
                 t->offset + t->bytes, t->crc, got);
    return RLT_OK;
}

int ckpt_reader_read_range(ckpt_reader *r, const char *name, uint64_t offset, void *dst, uint64_t bytes) {
    const ckpt_tensor_info *t = NULL;
    RLT_TRY(ckpt_reader_find(r, name, &t));
    if (offset > t->bytes || bytes > t->bytes - offset)
        RLT_FAIL(r->e, RLT_ECHECKPOINT, "%s: tensor '%s' has %" PRIu64 " bytes; bytes %" PRIu64 "..%" PRIu64 " were asked for",
                 r->path, name, t->bytes, offset, offset + bytes);
    if (bytes && !dst) RLT_FAIL(r->e, RLT_EINVAL, "%s: destination for tensor '%s' is NULL", r->path, name);
    /* The whole file's CRCs were checked at open; a range read trusts that. */
    return reader_pread(r, dst, bytes, t->offset + offset);
}

void ckpt_reader_close(ckpt_reader *r) {
    if (r->fd >= 0) close(r->fd);
    r->fd = -1;
    r->n_tensors = 0;
}
