/*
 * streamd.h - C SDK for streamd WebAssembly plugins (host ABI v1).
 *
 * The SDK implements docs/abi.md so that a plugin author writes only a
 * function from a record to records. It owns the input buffer and exports
 * streamd_abi_v1, streamd_buffer, streamd_manifest, streamd_init and
 * streamd_process; it decodes each request batch into zero-copy views of the
 * input buffer, calls the plugin's function once per record and encodes the
 * result batch into one reusable, growable output buffer.
 *
 * Build a plugin (clang with the wasi-libc sysroot):
 *
 *   clang --target=wasm32-wasi -mexec-model=reactor -O2 -Isdk/c \
 *         sdk/c/streamd.c my_plugin.c -Wl,--strip-all -o plugin.wasm
 *
 * A transform:
 *
 *   #include "streamd.h"
 *
 *   static int upper(const streamd_record *in, streamd_emitter *out,
 *                    streamd_error *err) {
 *       ...
 *       return streamd_emit(out, &rec);   // or streamd_keep(out), or
 *       // return streamd_error_set(err, "bad input");
 *   }
 *
 *   STREAMD_TRANSFORM("upper", "1.0.0", upper)
 *
 * Every function that returns int returns STREAMD_OK (0) on success. A
 * plugin function returns STREAMD_OK, STREAMD_ERR_RECORD (the record is
 * rejected; the reason is in err) or STREAMD_ERR_BATCH (the whole batch
 * fails; the reason is in err).
 *
 * Built natively (no __wasm__), the SDK replaces the host import with a
 * capture that tests read through streamd_test_reply().
 */
#ifndef STREAMD_H
#define STREAMD_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The ABI version this SDK speaks. */
#define STREAMD_ABI_VERSION 1

/* Per-record and plugin function results. */
#define STREAMD_OK 0
#define STREAMD_ERR_RECORD 1
#define STREAMD_ERR_BATCH 2

/* Call statuses (docs/abi.md section 4). */
#define STREAMD_STATUS_OK 0
#define STREAMD_STATUS_ERR_BATCH 2
#define STREAMD_STATUS_ERR_UNSUPPORTED 3
#define STREAMD_STATUS_ERR_CONFIG 4
#define STREAMD_STATUS_ERR_INTERNAL 5

/* Request ops (docs/abi.md section 7). */
#define STREAMD_OP_TRANSFORM 1
#define STREAMD_OP_ENCODE 2
#define STREAMD_OP_DECODE 3
#define STREAMD_OP_WRITE 4

/* Log levels for streamd_log. */
#define STREAMD_LOG_DEBUG 0
#define STREAMD_LOG_INFO 1
#define STREAMD_LOG_WARN 2
#define STREAMD_LOG_ERROR 3

/*
 * streamd_bytes is a byte string that may be null (a Kafka null key, value
 * or header value). data == NULL means null; an empty but present string has
 * a non-NULL data and len 0.
 */
typedef struct streamd_bytes {
    const uint8_t *data;
    size_t len;
} streamd_bytes;

/* STREAMD_NULL is the null byte string. */
#define STREAMD_NULL ((streamd_bytes){NULL, 0})
/* STREAMD_LIT makes a streamd_bytes of a string literal, without its NUL. */
#define STREAMD_LIT(s) ((streamd_bytes){(const uint8_t *)("" s), sizeof(s) - 1})

/* streamd_bytes_of returns a view of len bytes at data (never null). */
static inline streamd_bytes streamd_bytes_of(const void *data, size_t len) {
    streamd_bytes b;
    b.data = data ? (const uint8_t *)data : (const uint8_t *)"";
    b.len = len;
    return b;
}

/* streamd_bytes_eq reports whether a and b are equal (two nulls are equal). */
int streamd_bytes_eq(streamd_bytes a, streamd_bytes b);

/*
 * streamd_copy copies n bytes from s to d, which do not overlap, like memcpy.
 * Short ones (most keys, header names and values, JSON strings) take two
 * overlapping moves of 16, 8 or 4 bytes, or three single bytes, never
 * reading past s[n-1] nor writing past d[n-1]; longer ones are a memcpy.
 * With bulk memory a memcpy is a memory.copy, which wazero compiles to a
 * call into Go's memmove (registers spilled around it); a 16-byte move is
 * one v128.load and one v128.store with SIMD.
 */
#if defined(__GNUC__) || defined(__clang__)
__attribute__((always_inline))
#endif
static inline void streamd_copy(uint8_t *d, const uint8_t *s, size_t n) {
    if (n > 32) {
        memcpy(d, s, n);
    } else if (n >= 16) {
#if defined(__GNUC__) || defined(__clang__)
        /* a vector, not a byte array: clang then reserves no stack frame */
        typedef unsigned char v16 __attribute__((vector_size(16)));
        v16 a, b;
#else
        uint8_t a[16], b[16];
#endif
        memcpy(&a, s, 16);
        memcpy(&b, s + n - 16, 16);
        memcpy(d, &a, 16);
        memcpy(d + n - 16, &b, 16);
    } else if (n >= 8) {
        uint64_t a, b;
        memcpy(&a, s, 8);
        memcpy(&b, s + n - 8, 8);
        memcpy(d, &a, 8);
        memcpy(d + n - 8, &b, 8);
    } else if (n >= 4) {
        uint32_t a, b;
        memcpy(&a, s, 4);
        memcpy(&b, s + n - 4, 4);
        memcpy(d, &a, 4);
        memcpy(d + n - 4, &b, 4);
    } else if (n) {
        uint8_t a = s[0], b = s[n >> 1], c = s[n - 1];
        d[0] = a;
        d[n >> 1] = b;
        d[n - 1] = c;
    }
}

/* streamd_header is one record header; names may repeat, order is kept. */
typedef struct streamd_header {
    streamd_bytes name; /* never null */
    streamd_bytes value;
} streamd_header;

/*
 * streamd_record is one record. In a request, every byte string is a view
 * into the SDK's input buffer, valid only during the call of the plugin
 * function.
 */
typedef struct streamd_record {
    int64_t offset;       /* -1 when unknown; ignored in output */
    int64_t timestamp_ms; /* milliseconds since the Unix epoch */
    int32_t partition;    /* -1 when unknown; ignored in output */
    streamd_bytes key;
    streamd_bytes value;
    const streamd_header *headers;
    uint32_t header_count;
} streamd_record;

/*
 * streamd_buf is a growable byte buffer. A zero value is an empty buffer.
 * Append functions return STREAMD_OK or -1 when memory runs out (after which
 * the buffer keeps its old contents).
 */
typedef struct streamd_buf {
    uint8_t *data;
    size_t len;
    size_t cap;
} streamd_buf;

/* streamd_buf_reserve makes room for n more bytes. */
int streamd_buf_reserve(streamd_buf *b, size_t n);
/* streamd_buf_append appends n bytes at p. */
int streamd_buf_append(streamd_buf *b, const void *p, size_t n);
/* streamd_buf_append_byte appends one byte. */
int streamd_buf_append_byte(streamd_buf *b, uint8_t c);
/* streamd_buf_free releases b's memory and leaves it empty. */
void streamd_buf_free(streamd_buf *b);

/* streamd_error carries the reason a record or batch failed. */
typedef struct streamd_error {
    streamd_buf msg;
} streamd_error;

/*
 * streamd_error_set sets the reason (a NUL-terminated UTF-8 string) and
 * returns STREAMD_ERR_RECORD, so a plugin function can
 * `return streamd_error_set(err, "...");`.
 */
int streamd_error_set(streamd_error *err, const char *msg);
/* streamd_error_setn is streamd_error_set for len bytes at msg. */
int streamd_error_setn(streamd_error *err, const char *msg, size_t len);
/* streamd_error_setf formats the reason like snprintf (truncated at 1 KiB). */
int streamd_error_setf(streamd_error *err, const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/*
 * streamd_emitter receives a transform's output records for one input
 * record. A transform either emits zero or more records (zero drops the
 * input), or calls streamd_keep once to pass the input on unchanged.
 */
typedef struct streamd_emitter streamd_emitter;

/* streamd_emit appends a copy of rec (offset and partition are ignored). */
int streamd_emit(streamd_emitter *out, const streamd_record *rec);
/* streamd_keep answers with the input record, unchanged (KEEP). */
int streamd_keep(streamd_emitter *out);
/*
 * streamd_emit_begin starts an output record with its timestamp, key and
 * value; append headers with streamd_emit_header and finish with
 * streamd_emit_end. Nothing is copied twice and nothing is allocated.
 */
int streamd_emit_begin(streamd_emitter *out, int64_t timestamp_ms, streamd_bytes key,
                       streamd_bytes value);
/* streamd_emit_header appends a header to the record begun last. */
int streamd_emit_header(streamd_emitter *out, streamd_bytes name, streamd_bytes value);
/* streamd_emit_end finishes the record begun last. */
int streamd_emit_end(streamd_emitter *out);

/*
 * JSON helpers (RFC 8259), for the plugin's config and for JSON values.
 * They read a document where it is, without allocating; a value is handed
 * out as its raw JSON text (a view into the document).
 *
 *   static int init(streamd_bytes config, streamd_error *err) {
 *       static const char *const keys[] = {"field", NULL};
 *       streamd_bytes v;
 *       if (streamd_json_only_keys(config, keys, err) != STREAMD_OK) return STREAMD_ERR_RECORD;
 *       if (streamd_json_get(config, "field", &v) == STREAMD_OK &&
 *           streamd_json_string(v, &field) != STREAMD_OK)
 *           return streamd_error_set(err, "field: want a string");
 *       return STREAMD_OK;
 *   }
 */

/* streamd_json_get returned: the document has no such member. */
#define STREAMD_JSON_MISSING 1
/* streamd_json_*: not valid JSON, or not of the type asked for. */
#define STREAMD_JSON_INVALID (-1)

/* streamd_json_valid reports whether json is one valid JSON document
 * (whitespace around it allowed; nesting at most 64 deep). */
int streamd_json_valid(streamd_bytes json);

/* streamd_json_get finds the member named key of the JSON object json and
 * sets *value to its raw JSON text (the last one when the name repeats).
 * Returns STREAMD_OK, STREAMD_JSON_MISSING, or STREAMD_JSON_INVALID when
 * json is not a valid JSON object. */
int streamd_json_get(streamd_bytes json, const char *key, streamd_bytes *value);

/* streamd_json_string appends the text of the raw JSON string value (as
 * streamd_json_get gives it) to out, escapes decoded, as UTF-8. Returns
 * STREAMD_OK or STREAMD_JSON_INVALID (not a string). */
int streamd_json_string(streamd_bytes value, streamd_buf *out);

/* streamd_json_int64 reads the raw JSON value as an integer: an integer
 * literal (no fraction, no exponent) that fits. */
int streamd_json_int64(streamd_bytes value, int64_t *out);

/* streamd_json_bool reads true or false. */
int streamd_json_bool(streamd_bytes value, int *out);

/* streamd_json_is_null reports whether the raw JSON value is null. */
int streamd_json_is_null(streamd_bytes value);

/* streamd_json_only_keys checks that json is an object whose member names
 * are all in allowed (a NULL-terminated list), so that a misspelt config
 * key can be refused; otherwise it sets err ("unknown key \"x\"") and
 * returns STREAMD_JSON_INVALID. */
int streamd_json_only_keys(streamd_bytes json, const char *const *allowed, streamd_error *err);

/* streamd_json_append_string appends s to out as a JSON string: quotes,
 * '"' and '\\' escaped, control characters as \n \r \t \b \f or \u00xx,
 * all else as it is. */
int streamd_json_append_string(streamd_buf *out, streamd_bytes s);

/* Plugin function types. */

/* streamd_init_fn receives the plugin's config as a JSON object. */
typedef int (*streamd_init_fn)(streamd_bytes config_json, streamd_error *err);
/* streamd_transform_fn turns one record into records (see streamd_emitter). */
typedef int (*streamd_transform_fn)(const streamd_record *in, streamd_emitter *out,
                                    streamd_error *err);
/*
 * streamd_codec_fn encodes or decodes in->value, appending the resulting
 * payload to out (which is empty when called; appending nothing gives an
 * empty payload). It is not called for a null payload (a tombstone), which
 * stays null.
 */
typedef int (*streamd_codec_fn)(const streamd_record *in, streamd_buf *out, streamd_error *err);
/* streamd_sink_fn writes one record durably; STREAMD_OK means written. */
typedef int (*streamd_sink_fn)(const streamd_record *in, streamd_error *err);

/* Plugin kinds. */
typedef enum streamd_kind {
    STREAMD_KIND_TRANSFORM = 1,
    STREAMD_KIND_CODEC = 2,
    STREAMD_KIND_SINK = 3
} streamd_kind;

/*
 * streamd_plugin describes the plugin. Exactly one must be defined, with
 * one of the STREAMD_* macros below.
 */
typedef struct streamd_plugin {
    streamd_kind kind;
    const char *name;    /* [a-z0-9._-]{1,64} */
    const char *version; /* free text, e.g. "1.0.0" */
    streamd_init_fn init; /* optional: NULL accepts any config */
    streamd_transform_fn transform; /* kind transform */
    streamd_codec_fn encode;        /* kind codec (NULL: op unsupported) */
    streamd_codec_fn decode;        /* kind codec (NULL: op unsupported) */
    streamd_sink_fn write;          /* kind sink */
} streamd_plugin;

/* streamd_plugin_main is the plugin the SDK serves. */
extern const streamd_plugin streamd_plugin_main;

/* STREAMD_PLUGIN defines the plugin from designated initializers. */
#define STREAMD_PLUGIN(...) const streamd_plugin streamd_plugin_main = {__VA_ARGS__};
/* STREAMD_TRANSFORM defines a transform plugin. */
#define STREAMD_TRANSFORM(NAME, VERSION, FN)                                                  \
    STREAMD_PLUGIN(.kind = STREAMD_KIND_TRANSFORM, .name = (NAME), .version = (VERSION),     \
                   .transform = (FN))
/* STREAMD_CODEC defines a codec plugin. */
#define STREAMD_CODEC(NAME, VERSION, ENCODE, DECODE)                                          \
    STREAMD_PLUGIN(.kind = STREAMD_KIND_CODEC, .name = (NAME), .version = (VERSION),         \
                   .encode = (ENCODE), .decode = (DECODE))
/* STREAMD_SINK defines a sink plugin. */
#define STREAMD_SINK(NAME, VERSION, WRITE)                                                    \
    STREAMD_PLUGIN(.kind = STREAMD_KIND_SINK, .name = (NAME), .version = (VERSION),          \
                   .write = (WRITE))

/* streamd_log sends a UTF-8 message to streamd's log at level. */
void streamd_log(int level, const char *msg, size_t len);

/* The ABI exports, declared for native tests (the host calls them). */
void streamd_abi_v1(void);
uint8_t *streamd_buffer(int32_t size);
int32_t streamd_manifest(void);
int32_t streamd_init(int32_t len);
int32_t streamd_process(int32_t len);

#ifndef __wasm__
/* streamd_test_reply returns the last reply (native builds only). */
streamd_bytes streamd_test_reply(void);
/* streamd_test_log returns the last log message (native builds only). */
streamd_bytes streamd_test_log(int *level);
#endif

#ifdef __cplusplus
}
#endif

#endif /* STREAMD_H */
