/* checkpoint.h: the checkpoint file format, a streaming writer and a validating reader.
 *
 * Both sides use only system calls and memory the caller owns (no malloc, no stdio FILE), because
 * checkpoints are written during training, after the arena is sealed. The writer builds `path.tmp`,
 * fsyncs it, renames it over `path` and fsyncs the directory, so a crash or a failure at any point leaves
 * an older checkpoint at `path` intact. The reader checks the whole file (every length, every CRC) before
 * it hands out anything, so a truncated or altered file is refused with a message, never half-loaded.
 * Two writers must not target the same path at once, since they would share `path.tmp`.
 *
 * File format, version 1. All integers are little-endian; offsets are from the start of the file.
 *
 *   file header, 24 bytes
 *     0   u8[8]  magic "RLTCKPT1"
 *     8   u32    format_version = 1
 *     12  u32    header_bytes = 24 (the size of this fixed header)
 *     16  u64    reserved, 0
 *   metadata block
 *     24  u64    meta_len (at most CKPT_MAX_META)
 *     32  u8[meta_len] metadata: UTF-8 text (YAML or JSON: algo, sizes, config hash), opaque here
 *   then one record per tensor (at most CKPT_MAX_TENSORS), starting right after the previous block
 *     +0   u32     record magic 0x52534e54 (the bytes "TNSR")
 *     +4   u8[64]  name, NUL-terminated and NUL-padded (1..63 bytes of name)
 *     +68  u32     dtype (rlt_dtype)
 *     +72  u32     ndim, 0..4 (0 is a scalar)
 *     +76  u64[4]  shape; entries at and beyond ndim are 0
 *     +108 u64     data_bytes = product(shape) * dtype size
 *     +116 u32     crc32 of the data
 *     +120 zero padding up to the next file offset that is a multiple of 64
 *     then data_bytes bytes of data, the tensor's host memory as-is
 *   trailer, 16 bytes, the last bytes of the file
 *     +0   u8[8]  magic "RLTEND\0\0"
 *     +8   u32    n_tensors
 *     +12  u32    crc32 of every byte of the file before the trailer
 *
 * CRC32 is the IEEE / zlib one (reflected, polynomial 0xEDB88320, initial and final xor 0xFFFFFFFF). */
#ifndef RLT_CHECKPOINT_H
#define RLT_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

#define CKPT_FORMAT_VERSION 1u
#define CKPT_MAX_TENSORS 256
#define CKPT_MAX_META 16384
#define CKPT_NAME_BYTES 64
#define CKPT_MAX_NDIM 4
#define CKPT_PATH_BYTES 1024
#define CKPT_DATA_ALIGN 64
#define CKPT_READ_BUF_BYTES 65536

/* One tensor of an open checkpoint, as the reader found it. */
typedef struct ckpt_tensor_info {
    char name[CKPT_NAME_BYTES];
    int32_t dtype; /* rlt_dtype */
    int32_t ndim;
    int64_t shape[CKPT_MAX_NDIM]; /* 0 beyond ndim */
    uint64_t offset;              /* file offset of the data, a multiple of CKPT_DATA_ALIGN */
    uint64_t bytes;
    uint32_t crc;
} ckpt_tensor_info;

/* The writer: a plain struct the caller owns; no field is meant to be touched from outside. */
typedef struct ckpt_writer {
    int fd;                 /* the temp file, -1 when none is open */
    int status;             /* RLT_OK, or the first failure (after which the temp file is gone) */
    int has_tmp;            /* 1 while the temp file exists and is ours to remove */
    int in_tensor;          /* 1 between ckpt_writer_begin and ckpt_writer_end */
    int32_t n_tensors;
    rlt_err *e;
    uint64_t offset;        /* bytes written to the temp file so far */
    uint32_t file_crc;      /* crc32 of every byte of the file before the current record */
    uint32_t tensor_crc;    /* crc32 of the current tensor's data so far */
    uint64_t record_offset; /* where the current record starts */
    uint64_t tensor_bytes;  /* data_bytes the current record declared */
    uint64_t tensor_done;   /* data bytes written to it so far */
    unsigned char record[192]; /* the current record header and its padding, rewritten with its CRC */
    uint32_t record_len;
    char path[CKPT_PATH_BYTES];
    char tmp_path[CKPT_PATH_BYTES];
    char names[CKPT_MAX_TENSORS][CKPT_NAME_BYTES]; /* to refuse duplicates the reader would refuse */
} ckpt_writer;

/* The reader: about 120 KiB, so keep it in an arena or a handle, not on a small stack. */
typedef struct ckpt_reader {
    int fd;
    int32_t n_tensors;
    rlt_err *e;
    uint64_t file_bytes;
    size_t meta_len;
    char path[CKPT_PATH_BYTES];
    char meta[CKPT_MAX_META + 1]; /* always NUL-terminated */
    ckpt_tensor_info tensors[CKPT_MAX_TENSORS];
    unsigned char buf[CKPT_READ_BUF_BYTES];
} ckpt_reader;

/* CRC32 (IEEE) of len bytes, continuing from crc (start with 0). */
uint32_t ckpt_crc32(uint32_t crc, const void *data, size_t len);
/* The CRC32 of A followed by B, from crc32(A), crc32(B) and len(B), without touching the bytes. */
uint32_t ckpt_crc32_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b);
/* Bytes per element of an rlt_dtype, 0 for an unknown one. */
uint32_t ckpt_dtype_size(int32_t dtype);
const char *ckpt_dtype_name(int32_t dtype);

/* Starts `path.tmp` (truncating a stale one) and writes the header and metadata. meta may be NULL when
 * meta_len is 0. Errors go to e, which the writer keeps for its later calls: RLT_EINVAL for bad
 * arguments (path too long, meta over CKPT_MAX_META), RLT_EIO for OS errors. */
int ckpt_writer_open(ckpt_writer *w, rlt_err *e, const char *path, const char *meta, size_t meta_len);
/* Writes one whole tensor from host memory: bytes must be product(shape) * dtype size. */
int ckpt_writer_add(ckpt_writer *w, const char *name, int32_t dtype, int32_t ndim, const int64_t *shape,
                    const void *data, uint64_t bytes);
/* The same in pieces, for data that passes through a staging buffer smaller than the tensor: begin
 * declares the tensor, write appends data (any split), end checks that exactly `bytes` arrived. */
int ckpt_writer_begin(ckpt_writer *w, const char *name, int32_t dtype, int32_t ndim, const int64_t *shape,
                      uint64_t bytes);
int ckpt_writer_write(ckpt_writer *w, const void *data, uint64_t bytes);
int ckpt_writer_end(ckpt_writer *w);
/* Writes the trailer, fsyncs, renames path.tmp to path and fsyncs the directory. After any failure of
 * open/add/begin/write/end/close the temp file has been removed and path is untouched; close then
 * returns that failure's status (and leaves e as it was). The one exception is a failed fsync of the
 * directory after the rename: that is RLT_EIO too, but the new file is already in place. */
int ckpt_writer_close(ckpt_writer *w);
/* Drops the checkpoint being written: closes and unlinks the temp file. Safe after a failure or a
 * successful close (it then does nothing). */
void ckpt_writer_abort(ckpt_writer *w);

/* Opens path and validates the whole file (sizes, magics, version, every record, every CRC) using only
 * the buffer inside r; RLT_ECHECKPOINT for an invalid file, RLT_EIO for OS errors. On failure nothing
 * stays open (ckpt_reader_close is still safe to call). */
int ckpt_reader_open(ckpt_reader *r, rlt_err *e, const char *path);
/* The metadata text (NUL-terminated; *len gets its length when len is not NULL). */
const char *ckpt_reader_meta(const ckpt_reader *r, size_t *len);
/* The tensor called name, or RLT_ECHECKPOINT naming the tensors the file does have. */
int ckpt_reader_find(ckpt_reader *r, const char *name, const ckpt_tensor_info **info);
/* Checks that tensor name has this dtype and shape, with a message showing both when not. */
int ckpt_reader_expect(ckpt_reader *r, const char *name, int32_t dtype, int32_t ndim, const int64_t *shape);
/* Reads tensor name into dst; bytes must equal its size. The data's CRC is checked again after the
 * read, so a file altered since open is caught. */
int ckpt_reader_read(ckpt_reader *r, const char *name, void *dst, uint64_t bytes);
/* Reads bytes [offset, offset + bytes) of a tensor (for streaming large tensors through a staging
 * buffer). The CRCs were checked when the file was opened. */
int ckpt_reader_read_range(ckpt_reader *r, const char *name, uint64_t offset, void *dst, uint64_t bytes);
void ckpt_reader_close(ckpt_reader *r);

#endif
