/*
 * streamd.c - C SDK for streamd WebAssembly plugins (host ABI v1).
 * See streamd.h for the API and docs/abi.md for the wire format.
 */
#include "streamd.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- host imports ------------------------------------------------------ */

#ifdef __wasm__
#define STREAMD_EXPORT(name) __attribute__((export_name(name), visibility("default")))
__attribute__((import_module("streamd"), import_name("reply"))) void
streamd_host_reply(const uint8_t *ptr, uint32_t len);
__attribute__((import_module("streamd"), import_name("log"))) void
streamd_host_log(int32_t level, const uint8_t *ptr, uint32_t len);
#else
#define STREAMD_EXPORT(name)
static streamd_buf test_reply;
static streamd_buf test_log;
static int test_log_level = -1;
static void streamd_host_reply(const uint8_t *ptr, uint32_t len) {
    test_reply.len = 0;
    if (streamd_buf_append(&test_reply, ptr, len) != STREAMD_OK) {
        abort();
    }
}
static void streamd_host_log(int32_t level, const uint8_t *ptr, uint32_t len) {
    test_log.len = 0;
    test_log_level = level;
    if (streamd_buf_append(&test_log, ptr, len) != STREAMD_OK) {
        abort();
    }
}
streamd_bytes streamd_test_reply(void) { return streamd_bytes_of(test_reply.data, test_reply.len); }
streamd_bytes streamd_test_log(int *level) {
    if (level) {
        *level = test_log_level;
    }
    return streamd_bytes_of(test_log.data, test_log.len);
}
#endif

void streamd_log(int level, const char *msg, size_t len) {
    streamd_host_log(level, (const uint8_t *)msg, (uint32_t)len);
}

/* ---- bytes and buffers ------------------------------------------------- */

int streamd_bytes_eq(streamd_bytes a, streamd_bytes b) {
    if (a.data == NULL || b.data == NULL) {
        return a.data == NULL && b.data == NULL;
    }
    return a.len == b.len && (a.len == 0 || memcmp(a.data, b.data, a.len) == 0);
}

int streamd_buf_reserve(streamd_buf *b, size_t n) {
    if (b->cap - b->len >= n) {
        return STREAMD_OK;
    }
    if (n > SIZE_MAX / 2 - b->len) {
        return -1;
    }
    size_t need = b->len + n;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need) {
        cap *= 2;
    }
    uint8_t *p = realloc(b->data, cap);
    if (p == NULL) {
        return -1;
    }
    b->data = p;
    b->cap = cap;
    return STREAMD_OK;
}

int streamd_buf_append(streamd_buf *b, const void *p, size_t n) {
    if (streamd_buf_reserve(b, n) != STREAMD_OK) {
        return -1;
    }
    if (n) {
        memcpy(b->data + b->len, p, n);
    }
    b->len += n;
    return STREAMD_OK;
}

int streamd_buf_append_byte(streamd_buf *b, uint8_t c) {
    if (b->len == b->cap && streamd_buf_reserve(b, 1) != STREAMD_OK) {
        return -1;
    }
    b->data[b->len++] = c;
    return STREAMD_OK;
}

void streamd_buf_free(streamd_buf *b) {
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

/* ---- errors -------------------------------------------------------------- */

int streamd_error_setn(streamd_error *err, const char *msg, size_t len) {
    err->msg.len = 0;
    (void)streamd_buf_append(&err->msg, msg, len);
    return STREAMD_ERR_RECORD;
}

int streamd_error_set(streamd_error *err, const char *msg) {
    return streamd_error_setn(err, msg, strlen(msg));
}

int streamd_error_setf(streamd_error *err, const char *fmt, ...) {
    char tmp[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) {
        n = 0;
    }
    if ((size_t)n >= sizeof tmp) {
        n = sizeof tmp - 1;
    }
    return streamd_error_setn(err, tmp, (size_t)n);
}

/* ---- little-endian encoding -------------------------------------------- */

#if defined(__GNUC__) || defined(__clang__)
#define STREAMD_INLINE static inline __attribute__((always_inline))
#else
#define STREAMD_INLINE static inline
#endif

STREAMD_INLINE void put32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

STREAMD_INLINE void put64(uint8_t *p, uint64_t v) {
    put32(p, (uint32_t)v);
    put32(p + 4, (uint32_t)(v >> 32));
}

STREAMD_INLINE uint32_t get32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

STREAMD_INLINE uint64_t get64(const uint8_t *p) { return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32; }

static int append32(streamd_buf *b, uint32_t v) {
    if (streamd_buf_reserve(b, 4) != STREAMD_OK) {
        return -1;
    }
    put32(b->data + b->len, v);
    b->len += 4;
    return STREAMD_OK;
}

static int append64(streamd_buf *b, uint64_t v) {
    if (streamd_buf_reserve(b, 8) != STREAMD_OK) {
        return -1;
    }
    put64(b->data + b->len, v);
    b->len += 8;
    return STREAMD_OK;
}

/* append_nbytes writes a nullable byte string: i32 length (-1 null), bytes. */
static int append_nbytes(streamd_buf *b, streamd_bytes s) {
    if (s.data == NULL) {
        return append32(b, UINT32_MAX);
    }
    if (s.len > INT32_MAX) {
        return -1;
    }
    if (streamd_buf_reserve(b, 4 + s.len) != STREAMD_OK) {
        return -1;
    }
    put32(b->data + b->len, (uint32_t)s.len);
    if (s.len) {
        memcpy(b->data + b->len + 4, s.data, s.len);
    }
    b->len += 4 + s.len;
    return STREAMD_OK;
}

/* put_nbytes writes a nullable byte string at p (room reserved) and returns
 * the end. */
STREAMD_INLINE uint8_t *put_nbytes(uint8_t *p, streamd_bytes s) {
    if (s.data == NULL) {
        put32(p, UINT32_MAX);
        return p + 4;
    }
    put32(p, (uint32_t)s.len);
    streamd_copy(p + 4, s.data, s.len);
    return p + 4 + s.len;
}

/* nlen is the length put_nbytes writes after the length field (0 for null). */
STREAMD_INLINE size_t nlen(streamd_bytes s) { return s.data ? s.len : 0; }

/* room makes room for n more bytes in b: the common case inline. */
STREAMD_INLINE int room(streamd_buf *b, uint64_t n) {
    if (n <= b->cap - b->len) {
        return STREAMD_OK;
    }
    if (n > SIZE_MAX / 2) {
        return -1;
    }
    return streamd_buf_reserve(b, (size_t)n);
}

/* ---- the instance's state ---------------------------------------------- */

static uint8_t *in_buf;
static size_t in_cap;
static streamd_buf out_buf;   /* replies */
static streamd_buf codec_buf; /* a codec's payload */
static streamd_error call_err;
static streamd_header *hdrs;
static size_t hdrs_cap;

struct streamd_emitter {
    streamd_buf *buf;
    size_t entry_start; /* where this entry's status is */
    size_t count_pos;   /* where out_count is */
    uint32_t count;
    int kept;
    int open;         /* a record is begun and not ended */
    size_t rec_start; /* where the open record's size is */
    size_t hcount_pos;
    uint32_t hcount;
    int failed; /* out of memory or misuse */
    const char *why;
};

static int emitter_fail(streamd_emitter *e, const char *why) {
    if (!e->failed) {
        e->failed = 1;
        e->why = why;
    }
    return -1;
}

/*
 * The emit functions below have a fast path, taken when the emitter is in
 * order and one reservation of the record's (or header's) whole size
 * succeeds; anything else (misuse, a length over 2 GiB, out of memory) goes
 * to the *_checked version, which writes field by field and fails with the
 * message of the step that fails.
 */
static int emit_begin_checked(streamd_emitter *e, int64_t timestamp_ms, streamd_bytes key,
                              streamd_bytes value) {
    if (e->failed) {
        return -1;
    }
    if (e->kept) {
        return emitter_fail(e, "streamd_emit after streamd_keep");
    }
    if (e->open) {
        return emitter_fail(e, "streamd_emit_begin before streamd_emit_end");
    }
    streamd_buf *b = e->buf;
    size_t start = b->len;
    if (streamd_buf_reserve(b, 4 + 8 + 8 + 4) != STREAMD_OK) {
        return emitter_fail(e, "out of memory");
    }
    uint8_t *p = b->data + b->len;
    put32(p, 0); /* size, patched by streamd_emit_end */
    put64(p + 4, UINT64_MAX); /* offset -1 */
    put64(p + 12, (uint64_t)timestamp_ms);
    put32(p + 20, UINT32_MAX); /* partition -1 */
    b->len += 24;
    if (append_nbytes(b, key) != STREAMD_OK || append_nbytes(b, value) != STREAMD_OK) {
        b->len = start;
        return emitter_fail(e, "out of memory or key/value over 2 GiB");
    }
    e->hcount_pos = b->len;
    if (append32(b, 0) != STREAMD_OK) {
        b->len = start;
        return emitter_fail(e, "out of memory");
    }
    e->hcount = 0;
    e->rec_start = start;
    e->open = 1;
    return STREAMD_OK;
}

static int emit_header_checked(streamd_emitter *e, streamd_bytes name, streamd_bytes value) {
    if (e->failed) {
        return -1;
    }
    if (!e->open) {
        return emitter_fail(e, "streamd_emit_header without streamd_emit_begin");
    }
    streamd_buf *b = e->buf;
    size_t start = b->len;
    if (name.len > INT32_MAX || append32(b, (uint32_t)name.len) != STREAMD_OK ||
        streamd_buf_append(b, name.data, name.len) != STREAMD_OK ||
        append_nbytes(b, value) != STREAMD_OK) {
        b->len = start;
        return emitter_fail(e, "out of memory");
    }
    e->hcount++;
    return STREAMD_OK;
}

int streamd_emit_end(streamd_emitter *e) {
    if (e->failed) {
        return -1;
    }
    if (!e->open) {
        return emitter_fail(e, "streamd_emit_end without streamd_emit_begin");
    }
    streamd_buf *b = e->buf;
    put32(b->data + e->hcount_pos, e->hcount);
    put32(b->data + e->rec_start, (uint32_t)(b->len - e->rec_start - 4));
    e->open = 0;
    e->count++;
    return STREAMD_OK;
}

static int emit_checked(streamd_emitter *e, const streamd_record *r) {
    if (streamd_emit_begin(e, r->timestamp_ms, r->key, r->value) != STREAMD_OK) {
        return -1;
    }
    for (uint32_t i = 0; i < r->header_count; i++) {
        if (streamd_emit_header(e, r->headers[i].name, r->headers[i].value) != STREAMD_OK) {
            return -1;
        }
    }
    return streamd_emit_end(e);
}

/* put_head writes a record's size, offset -1, timestamp, partition -1, key
 * and value at p and returns the end. */
STREAMD_INLINE uint8_t *put_head(uint8_t *p, uint32_t size, int64_t timestamp_ms, streamd_bytes key,
                                 streamd_bytes value) {
    put32(p, size);
    put64(p + 4, UINT64_MAX); /* offset -1 */
    put64(p + 12, (uint64_t)timestamp_ms);
    put32(p + 20, UINT32_MAX); /* partition -1 */
    return put_nbytes(put_nbytes(p + 24, key), value);
}

int streamd_emit_begin(streamd_emitter *e, int64_t timestamp_ms, streamd_bytes key,
                       streamd_bytes value) {
    streamd_buf *b = e->buf;
    uint64_t n = 24 + 4 + (uint64_t)nlen(key) + 4 + (uint64_t)nlen(value) + 4;
    if ((e->failed | e->kept | e->open) || nlen(key) > INT32_MAX || nlen(value) > INT32_MAX ||
        room(b, n) != STREAMD_OK) {
        return emit_begin_checked(e, timestamp_ms, key, value);
    }
    size_t start = b->len;
    uint8_t *p = put_head(b->data + start, 0, timestamp_ms, key, value);
    put32(p, 0); /* header count, patched by streamd_emit_end */
    e->rec_start = start;
    e->hcount_pos = start + (size_t)n - 4;
    e->hcount = 0;
    e->open = 1;
    b->len = start + (size_t)n;
    return STREAMD_OK;
}

int streamd_emit_header(streamd_emitter *e, streamd_bytes name, streamd_bytes value) {
    streamd_buf *b = e->buf;
    uint64_t n = 4 + (uint64_t)name.len + 4 + (uint64_t)nlen(value);
    if (e->failed || !e->open || name.len > INT32_MAX || nlen(value) > INT32_MAX ||
        room(b, n) != STREAMD_OK) {
        return emit_header_checked(e, name, value);
    }
    uint8_t *p = b->data + b->len;
    put32(p, (uint32_t)name.len);
    streamd_copy(p + 4, name.data, name.len);
    put_nbytes(p + 4 + name.len, value);
    b->len += (size_t)n;
    e->hcount++;
    return STREAMD_OK;
}

int streamd_emit(streamd_emitter *e, const streamd_record *r) {
    if ((e->failed | e->kept | e->open) || nlen(r->key) > INT32_MAX || nlen(r->value) > INT32_MAX) {
        return emit_checked(e, r);
    }
    /* The whole record's size, then one reservation. */
    uint64_t n = 24 + 4 + (uint64_t)nlen(r->key) + 4 + (uint64_t)nlen(r->value) + 4;
    for (uint32_t i = 0; i < r->header_count; i++) {
        const streamd_header *h = &r->headers[i];
        if (h->name.len > INT32_MAX || nlen(h->value) > INT32_MAX) {
            return emit_checked(e, r);
        }
        n += 4 + (uint64_t)h->name.len + 4 + (uint64_t)nlen(h->value);
    }
    streamd_buf *b = e->buf;
    if (n - 4 > UINT32_MAX || room(b, n) != STREAMD_OK) {
        return emit_checked(e, r);
    }
    uint8_t *p = put_head(b->data + b->len, (uint32_t)(n - 4), r->timestamp_ms, r->key, r->value);
    put32(p, r->header_count);
    p += 4;
    for (uint32_t i = 0; i < r->header_count; i++) {
        const streamd_header *h = &r->headers[i];
        put32(p, (uint32_t)h->name.len);
        streamd_copy(p + 4, h->name.data, h->name.len);
        p = put_nbytes(p + 4 + h->name.len, h->value);
    }
    b->len += (size_t)n;
    e->count++;
    return STREAMD_OK;
}

int streamd_keep(streamd_emitter *e) {
    if (e->failed) {
        return -1;
    }
    if (e->count || e->open) {
        return emitter_fail(e, "streamd_keep after streamd_emit");
    }
    e->kept = 1;
    return STREAMD_OK;
}

/* ---- exports ------------------------------------------------------------- */

STREAMD_EXPORT("streamd_abi_v1") void streamd_abi_v1(void) {}

STREAMD_EXPORT("streamd_buffer") uint8_t *streamd_buffer(int32_t size) {
    if (size < 0) {
        return NULL;
    }
    if ((size_t)size <= in_cap && in_buf != NULL) {
        return in_buf;
    }
    size_t cap = 64 * 1024;
    while (cap < (size_t)size) {
        cap *= 2;
    }
    /* The old contents need not be kept: free first so memory is reused. */
    free(in_buf);
    in_buf = malloc(cap);
    in_cap = in_buf ? cap : 0;
    return in_buf;
}

static int32_t reply_status(int32_t status, const uint8_t *msg, size_t len) {
    streamd_host_reply(msg, (uint32_t)len);
    return status;
}

static int32_t reply_text(int32_t status, const char *msg) {
    return reply_status(status, (const uint8_t *)msg, strlen(msg));
}

/* append_json_string appends s as a JSON string (for the manifest). */
static int append_json_string(streamd_buf *b, const char *s) {
    static const char hex[] = "0123456789abcdef";
    int rc = streamd_buf_append_byte(b, '"');
    for (; *s && rc == STREAMD_OK; s++) {
        uint8_t c = (uint8_t)*s;
        if (c == '"' || c == '\\') {
            uint8_t esc[2] = {'\\', c};
            rc = streamd_buf_append(b, esc, 2);
        } else if (c < 0x20) {
            uint8_t esc[6] = {'\\', 'u', '0', '0', (uint8_t)hex[c >> 4], (uint8_t)hex[c & 15]};
            rc = streamd_buf_append(b, esc, 6);
        } else {
            rc = streamd_buf_append_byte(b, c);
        }
    }
    if (rc == STREAMD_OK) {
        rc = streamd_buf_append_byte(b, '"');
    }
    return rc;
}

static const char *kind_name(streamd_kind k) {
    switch (k) {
    case STREAMD_KIND_TRANSFORM:
        return "transform";
    case STREAMD_KIND_CODEC:
        return "codec";
    case STREAMD_KIND_SINK:
        return "sink";
    }
    return "unknown";
}

STREAMD_EXPORT("streamd_manifest") int32_t streamd_manifest(void) {
    const streamd_plugin *pl = &streamd_plugin_main;
    streamd_buf *b = &out_buf;
    b->len = 0;
    int rc = streamd_buf_append(b, "{\"name\":", 8);
    rc |= append_json_string(b, pl->name ? pl->name : "");
    rc |= streamd_buf_append(b, ",\"kind\":\"", 9);
    const char *kind = kind_name(pl->kind);
    rc |= streamd_buf_append(b, kind, strlen(kind));
    rc |= streamd_buf_append(b, "\",\"version\":", 12);
    rc |= append_json_string(b, pl->version ? pl->version : "");
    rc |= streamd_buf_append(b, ",\"abi\":1}", 9);
    if (rc != STREAMD_OK) {
        return reply_text(STREAMD_STATUS_ERR_INTERNAL, "streamd_manifest: out of memory");
    }
    return reply_status(STREAMD_STATUS_OK, b->data, b->len);
}

STREAMD_EXPORT("streamd_init") int32_t streamd_init(int32_t len) {
    const streamd_plugin *pl = &streamd_plugin_main;
    if (len < 0 || (size_t)len > in_cap) {
        return reply_text(STREAMD_STATUS_ERR_INTERNAL,
                          "streamd_init: config length is past the input buffer");
    }
    if (pl->init == NULL) {
        return STREAMD_STATUS_OK;
    }
    call_err.msg.len = 0;
    int rc = pl->init(streamd_bytes_of(in_buf, (size_t)len), &call_err);
    if (rc == STREAMD_OK) {
        return STREAMD_STATUS_OK;
    }
    if (call_err.msg.len == 0) {
        return reply_text(STREAMD_STATUS_ERR_CONFIG, "config refused");
    }
    return reply_status(STREAMD_STATUS_ERR_CONFIG, call_err.msg.data, call_err.msg.len);
}

/* reader walks the request with bounds checks. */
typedef struct reader {
    const uint8_t *p;
    size_t pos, end;
    int bad;
} reader;

static uint32_t rd32(reader *r) {
    if (r->bad || r->end - r->pos < 4) {
        r->bad = 1;
        return 0;
    }
    uint32_t v = get32(r->p + r->pos);
    r->pos += 4;
    return v;
}

static uint64_t rd64(reader *r) {
    if (r->bad || r->end - r->pos < 8) {
        r->bad = 1;
        return 0;
    }
    uint64_t v = get64(r->p + r->pos);
    r->pos += 8;
    return v;
}

/* rdbytes reads len bytes (len -1 is null when nullable). */
static streamd_bytes rdbytes(reader *r, int32_t len, int nullable) {
    if (r->bad) {
        return STREAMD_NULL;
    }
    if (len < 0) {
        if (len != -1 || !nullable) {
            r->bad = 1;
        }
        return STREAMD_NULL;
    }
    if (r->end - r->pos < (size_t)len) {
        r->bad = 1;
        return STREAMD_NULL;
    }
    streamd_bytes b = streamd_bytes_of(r->p + r->pos, (size_t)len);
    r->pos += (size_t)len;
    return b;
}

/*
 * read_record_fast decodes a well-formed record body p[0:n] into rec with
 * one bounds test per field and no reader state; it returns -1 for anything
 * else (a bad length, a null name, more headers than hdrs holds), for which
 * read_record decodes it again and says what is wrong.
 */
STREAMD_INLINE int read_record_fast(const uint8_t *p, size_t n, streamd_record *rec) {
    if (n < 36) { /* the fixed fields and the three counts */
        return -1;
    }
    rec->offset = (int64_t)get64(p);
    rec->timestamp_ms = (int64_t)get64(p + 8);
    rec->partition = (int32_t)get32(p + 16);
    size_t q = 24;
    uint32_t len = get32(p + 20);
    if (len == UINT32_MAX) {
        rec->key = STREAMD_NULL;
    } else if (len > n - 32) { /* room for it, the value's length and the count */
        return -1;
    } else {
        rec->key = streamd_bytes_of(p + q, len);
        q += len;
    }
    len = get32(p + q);
    q += 4;
    if (len == UINT32_MAX) {
        rec->value = STREAMD_NULL;
    } else if (len > n - q - 4) {
        return -1;
    } else {
        rec->value = streamd_bytes_of(p + q, len);
        q += len;
    }
    uint32_t count = get32(p + q);
    q += 4;
    if (count > hdrs_cap) {
        return -1;
    }
    for (uint32_t i = 0; i < count; i++) {
        if (n - q < 8) {
            return -1;
        }
        len = get32(p + q);
        if (len > n - q - 8) {
            return -1;
        }
        hdrs[i].name = streamd_bytes_of(p + q + 4, len);
        q += 4 + len;
        len = get32(p + q);
        q += 4;
        if (len == UINT32_MAX) {
            hdrs[i].value = STREAMD_NULL;
        } else if (len > n - q) {
            return -1;
        } else {
            hdrs[i].value = streamd_bytes_of(p + q, len);
            q += len;
        }
    }
    rec->headers = hdrs;
    rec->header_count = count;
    return q == n ? 0 : -1;
}

/* read_record decodes one record body in r->[pos, end) into rec. */
static int read_record(reader *r, streamd_record *rec) {
    rec->offset = (int64_t)rd64(r);
    rec->timestamp_ms = (int64_t)rd64(r);
    rec->partition = (int32_t)rd32(r);
    rec->key = rdbytes(r, (int32_t)rd32(r), 1);
    rec->value = rdbytes(r, (int32_t)rd32(r), 1);
    uint32_t n = rd32(r);
    if (r->bad) {
        return -1;
    }
    /* Each header takes at least 8 bytes: refuse counts the body cannot hold. */
    if (n > (r->end - r->pos) / 8) {
        r->bad = 1;
        return -1;
    }
    if (n > hdrs_cap) {
        size_t cap = hdrs_cap ? hdrs_cap : 16;
        while (cap < n) {
            cap *= 2;
        }
        streamd_header *h = realloc(hdrs, cap * sizeof *h);
        if (h == NULL) {
            return -2;
        }
        hdrs = h;
        hdrs_cap = cap;
    }
    for (uint32_t i = 0; i < n; i++) {
        uint32_t nl = rd32(r);
        if (nl > INT32_MAX) {
            r->bad = 1;
        }
        hdrs[i].name = rdbytes(r, (int32_t)nl, 0);
        hdrs[i].value = rdbytes(r, (int32_t)rd32(r), 1);
    }
    rec->headers = hdrs;
    rec->header_count = n;
    if (r->bad || r->pos != r->end) {
        r->bad = 1;
        return -1;
    }
    return 0;
}

/* msg builds the SDK's own error messages without printf. */
static streamd_buf msg_buf;

static void msg_str(const char *s) { (void)streamd_buf_append(&msg_buf, s, strlen(s)); }

static void msg_num(uint64_t v) {
    char d[20];
    int n = 0;
    do {
        d[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n) {
        (void)streamd_buf_append_byte(&msg_buf, (uint8_t)d[--n]);
    }
}

static int32_t msg_reply(int32_t status) {
    return reply_status(status, msg_buf.data, msg_buf.len);
}

static int32_t batch_failure(int32_t status) {
    if (call_err.msg.len == 0) {
        return msg_reply(status);
    }
    return reply_status(status, call_err.msg.data, call_err.msg.len);
}

STREAMD_EXPORT("streamd_process") int32_t streamd_process(int32_t len) {
    const streamd_plugin *pl = &streamd_plugin_main;
    if (len < 0 || (size_t)len > in_cap) {
        return reply_text(STREAMD_STATUS_ERR_INTERNAL,
                          "streamd_process: request length is past the input buffer");
    }
    reader rq = {in_buf, 0, (size_t)len, 0};
    uint32_t op = rd32(&rq);
    uint32_t count = rd32(&rq);
    if (rq.bad) {
        return reply_text(STREAMD_STATUS_ERR_INTERNAL,
                          "streamd_process: request shorter than its 8-byte head");
    }
    int served = (op == STREAMD_OP_TRANSFORM && pl->kind == STREAMD_KIND_TRANSFORM &&
                  pl->transform) ||
                 (op == STREAMD_OP_ENCODE && pl->kind == STREAMD_KIND_CODEC && pl->encode) ||
                 (op == STREAMD_OP_DECODE && pl->kind == STREAMD_KIND_CODEC && pl->decode) ||
                 (op == STREAMD_OP_WRITE && pl->kind == STREAMD_KIND_SINK && pl->write);
    if (!served) {
        msg_buf.len = 0;
        msg_str("op ");
        msg_num(op);
        msg_str(" is not served by ");
        msg_str(kind_name(pl->kind));
        msg_str(" plugin ");
        msg_str(pl->name ? pl->name : "");
        return msg_reply(STREAMD_STATUS_ERR_UNSUPPORTED);
    }
    streamd_buf *b = &out_buf;
    b->len = 0;
    if (append32(b, count) != STREAMD_OK) {
        return reply_text(STREAMD_STATUS_ERR_INTERNAL, "streamd_process: out of memory");
    }
    for (uint32_t i = 0; i < count; i++) {
        size_t at = rq.pos;
        uint32_t size = rd32(&rq);
        if (rq.bad || size > rq.end - rq.pos) {
            msg_buf.len = 0;
            msg_str("streamd_process: malformed request: record ");
            msg_num(i);
            msg_str(" at byte ");
            msg_num(at);
            msg_str(" runs past the end");
            return msg_reply(STREAMD_STATUS_ERR_INTERNAL);
        }
        reader body = {in_buf, rq.pos, rq.pos + size, 0};
        rq.pos += size;
        streamd_record rec;
        int rrc = read_record_fast(in_buf + body.pos, size, &rec);
        if (rrc != 0) {
            rrc = read_record(&body, &rec);
        }
        if (rrc == -2) {
            return reply_text(STREAMD_STATUS_ERR_INTERNAL, "streamd_process: out of memory");
        }
        if (rrc != 0) {
            msg_buf.len = 0;
            msg_str("streamd_process: malformed request: record ");
            msg_num(i);
            msg_str(" at byte ");
            msg_num(at);
            msg_str(": bad field near byte ");
            msg_num(body.pos);
            return msg_reply(STREAMD_STATUS_ERR_INTERNAL);
        }

        streamd_emitter e;
        memset(&e, 0, sizeof e);
        e.buf = b;
        e.entry_start = b->len;
        call_err.msg.len = 0;
        int rc;
        if (append64(b, 0) != STREAMD_OK) { /* status 0, out_count placeholder */
            return reply_text(STREAMD_STATUS_ERR_INTERNAL, "streamd_process: out of memory");
        }
        e.count_pos = e.entry_start + 4;
        switch (op) {
        case STREAMD_OP_TRANSFORM:
            rc = pl->transform(&rec, &e, &call_err);
            if (rc == STREAMD_OK && e.open) {
                emitter_fail(&e, "streamd_emit_begin without streamd_emit_end");
            }
            break;
        case STREAMD_OP_ENCODE:
        case STREAMD_OP_DECODE:
            if (rec.value.data == NULL) { /* a null payload (a tombstone) stays null */
                rc = streamd_keep(&e);
                break;
            }
            codec_buf.len = 0;
            rc = (op == STREAMD_OP_ENCODE ? pl->encode : pl->decode)(&rec, &codec_buf, &call_err);
            if (rc == STREAMD_OK) {
                streamd_bytes v = streamd_bytes_of(codec_buf.data, codec_buf.len);
                if (streamd_emit_begin(&e, rec.timestamp_ms, STREAMD_NULL, v) == STREAMD_OK) {
                    streamd_emit_end(&e);
                }
            }
            break;
        default: /* STREAMD_OP_WRITE */
            rc = pl->write(&rec, &call_err);
            break;
        }
        if (e.failed) {
            msg_buf.len = 0;
            msg_str("plugin ");
            msg_str(pl->name ? pl->name : "");
            msg_str(": ");
            msg_str(e.why);
            return msg_reply(STREAMD_STATUS_ERR_INTERNAL);
        }
        switch (rc) {
        case STREAMD_OK:
            if (e.kept) {
                b->len = e.count_pos;
                append32(b, UINT32_MAX); /* fits: the placeholder was there */
            } else {
                put32(b->data + e.count_pos, e.count);
            }
            break;
        case STREAMD_ERR_RECORD:
            b->len = e.entry_start;
            if (append32(b, 1) != STREAMD_OK || append32(b, (uint32_t)call_err.msg.len) != STREAMD_OK ||
                streamd_buf_append(b, call_err.msg.data, call_err.msg.len) != STREAMD_OK) {
                return reply_text(STREAMD_STATUS_ERR_INTERNAL, "streamd_process: out of memory");
            }
            break;
        case STREAMD_ERR_BATCH:
            msg_buf.len = 0;
            msg_str("batch failed");
            return batch_failure(STREAMD_STATUS_ERR_BATCH);
        default:
            msg_buf.len = 0;
            msg_str("plugin ");
            msg_str(pl->name ? pl->name : "");
            msg_str(": function returned an unknown result");
            return batch_failure(STREAMD_STATUS_ERR_INTERNAL);
        }
    }
    if (rq.pos != rq.end) {
        msg_buf.len = 0;
        msg_str("streamd_process: malformed request: ");
        msg_num(rq.end - rq.pos);
        msg_str(" bytes after the last record");
        return msg_reply(STREAMD_STATUS_ERR_INTERNAL);
    }
    return reply_status(STREAMD_STATUS_OK, b->data, b->len);
}

/* ---- JSON helpers ---------------------------------------------------------- */

typedef struct json_scan {
    const uint8_t *p, *end;
} json_scan;

static void json_ws(json_scan *s) {
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r')) s->p++;
}

static int json_hex4(json_scan *s, uint32_t *v) {
    if (s->end - s->p < 4) return -1;
    *v = 0;
    for (int k = 0; k < 4; k++) {
        uint8_t c = s->p[k];
        uint32_t d;
        if (c >= '0' && c <= '9') d = (uint32_t)(c - '0');
        else if (c >= 'a' && c <= 'f') d = (uint32_t)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') d = (uint32_t)(c - 'A' + 10);
        else return -1;
        *v = *v * 16 + d;
    }
    s->p += 4;
    return 0;
}

/* json_utf8 checks one UTF-8 sequence at s->p and steps over it. */
static int json_utf8(json_scan *s) {
    uint8_t c = *s->p;
    size_t n;
    uint32_t cp, min;
    if (c < 0x80) {
        s->p++;
        return 0;
    } else if ((c & 0xE0) == 0xC0) {
        n = 1, cp = c & 0x1F, min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
        n = 2, cp = c & 0x0F, min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
        n = 3, cp = c & 0x07, min = 0x10000;
    } else {
        return -1;
    }
    if ((size_t)(s->end - s->p) <= n) return -1;
    for (size_t k = 1; k <= n; k++) {
        if ((s->p[k] & 0xC0) != 0x80) return -1;
        cp = cp << 6 | (s->p[k] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp < 0xE000)) return -1;
    s->p += n + 1;
    return 0;
}

/* json_str scans a string at s->p (the opening quote); with out, appends
 * its decoded text. */
static int json_str(json_scan *s, streamd_buf *out) {
    s->p++;
    for (;;) {
        const uint8_t *run = s->p;
        while (s->p < s->end && *s->p != '"' && *s->p != '\\' && *s->p >= 0x20) {
            if (json_utf8(s) != 0) return -1;
        }
        if (out && streamd_buf_append(out, run, (size_t)(s->p - run)) != 0) return -1;
        if (s->p >= s->end || *s->p < 0x20) return -1;
        if (*s->p == '"') {
            s->p++;
            return 0;
        }
        s->p++; /* backslash */
        if (s->p >= s->end) return -1;
        uint8_t c = *s->p++, one = 0;
        switch (c) {
        case '"': one = '"'; break;
        case '\\': one = '\\'; break;
        case '/': one = '/'; break;
        case 'b': one = 8; break;
        case 'f': one = 12; break;
        case 'n': one = '\n'; break;
        case 'r': one = '\r'; break;
        case 't': one = '\t'; break;
        case 'u': {
            uint32_t cp, lo;
            if (json_hex4(s, &cp) != 0) return -1;
            if (cp >= 0xD800 && cp < 0xDC00) {
                if (s->end - s->p < 2 || s->p[0] != '\\' || s->p[1] != 'u') return -1;
                s->p += 2;
                if (json_hex4(s, &lo) != 0 || lo < 0xDC00 || lo >= 0xE000) return -1;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else if (cp >= 0xDC00 && cp < 0xE000) {
                return -1;
            }
            if (out) {
                uint8_t u[4];
                size_t n;
                if (cp < 0x80) {
                    u[0] = (uint8_t)cp, n = 1;
                } else if (cp < 0x800) {
                    u[0] = (uint8_t)(0xC0 | cp >> 6), u[1] = (uint8_t)(0x80 | (cp & 0x3F)), n = 2;
                } else if (cp < 0x10000) {
                    u[0] = (uint8_t)(0xE0 | cp >> 12), u[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
                    u[2] = (uint8_t)(0x80 | (cp & 0x3F)), n = 3;
                } else {
                    u[0] = (uint8_t)(0xF0 | cp >> 18), u[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
                    u[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F)), u[3] = (uint8_t)(0x80 | (cp & 0x3F)), n = 4;
                }
                if (streamd_buf_append(out, u, n) != 0) return -1;
            }
            continue;
        }
        default:
            return -1;
        }
        if (out && streamd_buf_append_byte(out, one) != 0) return -1;
    }
}

static int json_digits(json_scan *s) {
    const uint8_t *d = s->p;
    while (s->p < s->end && *s->p >= '0' && *s->p <= '9') s->p++;
    return (int)(s->p - d);
}

/* json_value scans one value at s->p (no leading whitespace). */
static int json_value(json_scan *s, int depth) {
    if (s->p >= s->end) return -1;
    uint8_t c = *s->p;
    if ((c == '{' || c == '[') && depth >= 64) return -1;
    if (c == '{' || c == '[') {
        uint8_t close = c == '{' ? '}' : ']';
        s->p++;
        json_ws(s);
        if (s->p < s->end && *s->p == close) {
            s->p++;
            return 0;
        }
        for (;;) {
            json_ws(s);
            if (c == '{') {
                if (s->p >= s->end || *s->p != '"' || json_str(s, NULL) != 0) return -1;
                json_ws(s);
                if (s->p >= s->end || *s->p != ':') return -1;
                s->p++;
                json_ws(s);
            }
            if (json_value(s, depth + 1) != 0) return -1;
            json_ws(s);
            if (s->p >= s->end) return -1;
            if (*s->p == ',') {
                s->p++;
                continue;
            }
            if (*s->p != close) return -1;
            s->p++;
            return 0;
        }
    }
    if (c == '"') return json_str(s, NULL);
    if (c == '-' || (c >= '0' && c <= '9')) {
        if (c == '-') s->p++;
        const uint8_t *first = s->p;
        int n = json_digits(s);
        if (n == 0 || (n > 1 && *first == '0')) return -1;
        if (s->p < s->end && *s->p == '.') {
            s->p++;
            if (json_digits(s) == 0) return -1;
        }
        if (s->p < s->end && (*s->p == 'e' || *s->p == 'E')) {
            s->p++;
            if (s->p < s->end && (*s->p == '+' || *s->p == '-')) s->p++;
            if (json_digits(s) == 0) return -1;
        }
        return 0;
    }
    static const char *const words[] = {"true", "false", "null"};
    for (int k = 0; k < 3; k++) {
        size_t n = strlen(words[k]);
        if ((size_t)(s->end - s->p) >= n && memcmp(s->p, words[k], n) == 0) {
            s->p += n;
            return 0;
        }
    }
    return -1;
}

/* json_raw trims whitespace around a value. */
static json_scan json_raw(streamd_bytes v) {
    json_scan s = {v.data ? v.data : (const uint8_t *)"", (v.data ? v.data : (const uint8_t *)"") + v.len};
    json_ws(&s);
    while (s.end > s.p && (s.end[-1] == ' ' || s.end[-1] == '\t' || s.end[-1] == '\n' || s.end[-1] == '\r')) s.end--;
    return s;
}

int streamd_json_valid(streamd_bytes json) {
    json_scan s = json_raw(json);
    return json_value(&s, 0) == 0 && s.p == s.end;
}

/* json_members calls fn for each member of the object json; -1 when json
 * is not a valid object. */
static int json_members(streamd_bytes json, int (*fn)(void *ctx, json_scan name, streamd_bytes value), void *ctx) {
    if (!streamd_json_valid(json)) return STREAMD_JSON_INVALID;
    json_scan s = json_raw(json);
    if (*s.p != '{') return STREAMD_JSON_INVALID;
    s.p++;
    json_ws(&s);
    if (*s.p == '}') return STREAMD_OK;
    for (;;) {
        json_ws(&s);
        json_scan name = {s.p, NULL};
        json_str(&s, NULL);
        name.end = s.p;
        json_ws(&s);
        s.p++; /* ':' */
        json_ws(&s);
        const uint8_t *v = s.p;
        json_value(&s, 1);
        int rc = fn(ctx, name, streamd_bytes_of(v, (size_t)(s.p - v)));
        if (rc != 0) return rc;
        json_ws(&s);
        if (*s.p++ == '}') return STREAMD_OK;
    }
}

/* json_name_is reports whether the raw JSON string name decodes to key. */
static int json_name_is(json_scan name, const char *key, size_t keylen) {
    /* The common case, no escapes: compare in place. */
    size_t n = (size_t)(name.end - name.p) - 2;
    if (memchr(name.p + 1, '\\', n) == NULL) return n == keylen && memcmp(name.p + 1, key, n) == 0;
    streamd_buf b = {0};
    json_scan s = name;
    int eq = json_str(&s, &b) == 0 && b.len == keylen && memcmp(b.data, key, keylen) == 0;
    streamd_buf_free(&b);
    return eq;
}

typedef struct json_get_ctx {
    const char *key;
    size_t keylen;
    streamd_bytes *value;
    int found;
} json_get_ctx;

static int json_get_fn(void *ctx, json_scan name, streamd_bytes value) {
    json_get_ctx *g = ctx;
    if (json_name_is(name, g->key, g->keylen)) {
        *g->value = value;
        g->found = 1;
    }
    return 0;
}

int streamd_json_get(streamd_bytes json, const char *key, streamd_bytes *value) {
    json_get_ctx g = {key, strlen(key), value, 0};
    int rc = json_members(json, json_get_fn, &g);
    if (rc != STREAMD_OK) return rc;
    return g.found ? STREAMD_OK : STREAMD_JSON_MISSING;
}

int streamd_json_string(streamd_bytes value, streamd_buf *out) {
    json_scan s = json_raw(value);
    if (s.p >= s.end || *s.p != '"') return STREAMD_JSON_INVALID;
    size_t before = out->len;
    if (json_str(&s, out) != 0 || s.p != s.end) {
        out->len = before;
        return STREAMD_JSON_INVALID;
    }
    return STREAMD_OK;
}

int streamd_json_int64(streamd_bytes value, int64_t *out) {
    json_scan s = json_raw(value);
    int neg = s.p < s.end && *s.p == '-';
    if (neg) s.p++;
    const uint8_t *d = s.p;
    int n = json_digits(&s);
    if (n == 0 || s.p != s.end || (n > 1 && *d == '0')) return STREAMD_JSON_INVALID;
    uint64_t v = 0, limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    for (int k = 0; k < n; k++) {
        uint64_t digit = (uint64_t)(d[k] - '0');
        if (v > (limit - digit) / 10) return STREAMD_JSON_INVALID;
        v = v * 10 + digit;
    }
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return STREAMD_OK;
}

int streamd_json_bool(streamd_bytes value, int *out) {
    json_scan s = json_raw(value);
    size_t n = (size_t)(s.end - s.p);
    if (n == 4 && memcmp(s.p, "true", 4) == 0) return *out = 1, STREAMD_OK;
    if (n == 5 && memcmp(s.p, "false", 5) == 0) return *out = 0, STREAMD_OK;
    return STREAMD_JSON_INVALID;
}

int streamd_json_is_null(streamd_bytes value) {
    json_scan s = json_raw(value);
    return s.end - s.p == 4 && memcmp(s.p, "null", 4) == 0;
}

typedef struct json_keys_ctx {
    const char *const *allowed;
    streamd_error *err;
} json_keys_ctx;

static int json_keys_fn(void *ctx, json_scan name, streamd_bytes value) {
    (void)value;
    json_keys_ctx *k = ctx;
    for (const char *const *a = k->allowed; *a; a++) {
        if (json_name_is(name, *a, strlen(*a))) return 0;
    }
    streamd_error_setf(k->err, "unknown key %.*s", (int)(name.end - name.p), (const char *)name.p);
    return STREAMD_JSON_INVALID;
}

int streamd_json_only_keys(streamd_bytes json, const char *const *allowed, streamd_error *err) {
    json_keys_ctx k = {allowed, err};
    int rc = json_members(json, json_keys_fn, &k);
    if (rc == STREAMD_JSON_INVALID && err->msg.len == 0) streamd_error_set(err, "want a JSON object");
    return rc;
}

int streamd_json_append_string(streamd_buf *out, streamd_bytes s) {
    static const char hex[] = "0123456789abcdef";
    if (streamd_buf_reserve(out, s.len + 2) != 0 || streamd_buf_append_byte(out, '"') != 0) return -1;
    for (size_t i = 0; i < s.len; i++) {
        uint8_t c = s.data[i];
        const char *esc = NULL;
        char u[7];
        switch (c) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        case 8: esc = "\\b"; break;
        case 12: esc = "\\f"; break;
        default:
            if (c < 0x20) {
                u[0] = '\\', u[1] = 'u', u[2] = '0', u[3] = '0', u[4] = hex[c >> 4], u[5] = hex[c & 15], u[6] = 0;
                esc = u;
            }
        }
        int rc = esc ? streamd_buf_append(out, esc, strlen(esc)) : streamd_buf_append_byte(out, c);
        if (rc != 0) return -1;
    }
    return streamd_buf_append_byte(out, '"');
}
