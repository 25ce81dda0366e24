/*
 * Native tests of the C SDK: the request decoder, the result encoder and
 * the export protocol, built with the host compiler against streamd.c.
 * Build and run: sdk/c/test/run.sh
 *
 * Compiled three times: as a transform (default), with -DTEST_CODEC and with
 * -DTEST_SINK, since a binary holds one plugin.
 */
#include "streamd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

#define CHECK(cond, ...)                                                                   \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            failures++;                                                                    \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);       \
            fprintf(stderr, __VA_ARGS__);                                                  \
            fprintf(stderr, "\n");                                                         \
        }                                                                                  \
    } while (0)

/* ---- a little encoder of requests and a reader of results ---------------- */

static void w32(streamd_buf *b, uint32_t v) {
    uint8_t p[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    streamd_buf_append(b, p, 4);
}
static void w64(streamd_buf *b, uint64_t v) {
    w32(b, (uint32_t)v);
    w32(b, (uint32_t)(v >> 32));
}
static void wbytes(streamd_buf *b, streamd_bytes s) {
    if (s.data == NULL) {
        w32(b, UINT32_MAX);
        return;
    }
    w32(b, (uint32_t)s.len);
    streamd_buf_append(b, s.data, s.len);
}
static void wrecord(streamd_buf *b, const streamd_record *r) {
    streamd_buf body = {0};
    w64(&body, (uint64_t)r->offset);
    w64(&body, (uint64_t)r->timestamp_ms);
    w32(&body, (uint32_t)r->partition);
    wbytes(&body, r->key);
    wbytes(&body, r->value);
    w32(&body, r->header_count);
    for (uint32_t i = 0; i < r->header_count; i++) {
        w32(&body, (uint32_t)r->headers[i].name.len);
        streamd_buf_append(&body, r->headers[i].name.data, r->headers[i].name.len);
        wbytes(&body, r->headers[i].value);
    }
    w32(b, (uint32_t)body.len);
    streamd_buf_append(b, body.data, body.len);
    streamd_buf_free(&body);
}

static int32_t call_process(const streamd_buf *req) {
    uint8_t *in = streamd_buffer((int32_t)req->len);
    if (in == NULL) {
        fprintf(stderr, "streamd_buffer(%zu) returned NULL\n", req->len);
        exit(1);
    }
    memcpy(in, req->data, req->len);
    return streamd_process((int32_t)req->len);
}

typedef struct rd {
    const uint8_t *p;
    size_t n, i;
} rd;
static uint32_t r32(rd *r) {
    if (r->n - r->i < 4) {
        fprintf(stderr, "result short at %zu\n", r->i);
        exit(1);
    }
    const uint8_t *p = r->p + r->i;
    r->i += 4;
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t r64(rd *r) {
    uint64_t lo = r32(r);
    return lo | (uint64_t)r32(r) << 32;
}
static streamd_bytes rbytes(rd *r) {
    uint32_t n = r32(r);
    if (n == UINT32_MAX) {
        return STREAMD_NULL;
    }
    if (r->n - r->i < n) {
        fprintf(stderr, "result short at %zu\n", r->i);
        exit(1);
    }
    streamd_bytes b = streamd_bytes_of(r->p + r->i, n);
    r->i += n;
    return b;
}

/* one decoded output record */
typedef struct outrec {
    int64_t offset, ts;
    int32_t partition;
    streamd_bytes key, value;
    uint32_t nh;
    streamd_header h[8];
} outrec;

__attribute__((unused)) static void rrecord(rd *r, outrec *o) {
    uint32_t size = r32(r);
    size_t end = r->i + size;
    o->offset = (int64_t)r64(r);
    o->ts = (int64_t)r64(r);
    o->partition = (int32_t)r32(r);
    o->key = rbytes(r);
    o->value = rbytes(r);
    o->nh = r32(r);
    for (uint32_t i = 0; i < o->nh; i++) {
        streamd_bytes name = rbytes(r), value = rbytes(r);
        if (i < 8) {
            o->h[i].name = name;
            o->h[i].value = value;
        }
    }
    CHECK(r->i == end, "record size %u does not match its body", size);
}

static int eq_str(streamd_bytes b, const char *s) {
    return b.data != NULL && b.len == strlen(s) && memcmp(b.data, s, b.len) == 0;
}

static const streamd_header test_headers[] = {
    {STREAMD_LIT("h1"), STREAMD_LIT("v1")},
    {STREAMD_LIT("h1"), STREAMD_NULL},
    {STREAMD_LIT(""), STREAMD_LIT("")},
};

static streamd_record make(const char *value) {
    streamd_record r = {0};
    r.offset = 42;
    r.timestamp_ms = 1700000000123;
    r.partition = 7;
    r.key = STREAMD_LIT("k");
    r.value = value ? streamd_bytes_of(value, strlen(value)) : STREAMD_NULL;
    r.headers = test_headers;
    r.header_count = 3;
    return r;
}

static void test_manifest(const char *want) {
    CHECK(streamd_manifest() == 0, "status");
    streamd_bytes got = streamd_test_reply();
    CHECK(eq_str(got, want), "manifest %.*s, want %s", (int)got.len, got.data, want);
}

static void test_unsupported(uint32_t op) {
    streamd_buf req = {0};
    w32(&req, op);
    w32(&req, 0);
    CHECK(call_process(&req) == STREAMD_STATUS_ERR_UNSUPPORTED, "op %u", op);
    streamd_buf_free(&req);
}

static void test_malformed(uint8_t op) {
    static const struct {
        const char *name;
        size_t len;
        const uint8_t bytes[48];
    } cases[] = {
        {"short head", 4, {1, 0, 0, 0}},
        {"record past end", 12, {1, 0, 0, 0, 1, 0, 0, 0, 9, 0, 0, 0}},
        {"body too short", 16, {1, 0, 0, 0, 1, 0, 0, 0, 4, 0, 0, 0, 1, 2, 3, 4}},
        {"trailing bytes", 9, {1, 0, 0, 0, 0, 0, 0, 0, 0}},
        {"key_len -2", 8 + 4 + 28,
         {1, 0, 0, 0, 1, 0, 0, 0, 28, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
          0, 0, 0, 0, 0xfe, 0xff, 0xff, 0xff, 0, 0, 0, 0}},
        {"huge header count", 8 + 4 + 32,
         {1, 0, 0, 0, 1, 0, 0, 0, 32, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
          0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        streamd_buf req = {0};
        streamd_buf_append(&req, cases[i].bytes, cases[i].len);
        req.data[0] = op;
        int32_t st = call_process(&req);
        streamd_bytes msg = streamd_test_reply();
        CHECK(st == STREAMD_STATUS_ERR_INTERNAL, "%s: status %d", cases[i].name, st);
        CHECK(msg.len > 0, "%s: no message", cases[i].name);
        streamd_buf_free(&req);
    }
}

#if defined(TEST_CODEC)
/* ---- codec: encode upper-cases, decode lower-cases; "bad" fails ---------- */

static int flip(const streamd_record *in, streamd_buf *out, streamd_error *err, int upper) {
    if (eq_str(in->value, "bad")) {
        return streamd_error_setf(err, "cannot %s %s", upper ? "encode" : "decode", "bad");
    }
    for (size_t i = 0; i < in->value.len; i++) {
        uint8_t c = in->value.data[i];
        if (upper && c >= 'a' && c <= 'z') {
            c -= 32;
        } else if (!upper && c >= 'A' && c <= 'Z') {
            c += 32;
        }
        streamd_buf_append_byte(out, c);
    }
    return STREAMD_OK;
}
static int enc(const streamd_record *in, streamd_buf *out, streamd_error *err) {
    return flip(in, out, err, 1);
}
static int dec(const streamd_record *in, streamd_buf *out, streamd_error *err) {
    return flip(in, out, err, 0);
}
STREAMD_CODEC("flip", "0.1", enc, dec)

static void run(void) {
    test_manifest("{\"name\":\"flip\",\"kind\":\"codec\",\"version\":\"0.1\",\"abi\":1}");
    for (uint32_t op = STREAMD_OP_ENCODE; op <= STREAMD_OP_DECODE; op++) {
        streamd_buf req = {0};
        w32(&req, op);
        w32(&req, 4);
        streamd_record a = make("MiXed"), b = make("bad"), c = make(""), n = make("");
        n.value = STREAMD_NULL;
        wrecord(&req, &a);
        wrecord(&req, &b);
        wrecord(&req, &c);
        wrecord(&req, &n);
        CHECK(call_process(&req) == 0, "op %u status", op);
        streamd_bytes res = streamd_test_reply();
        rd r = {res.data, res.len, 0};
        CHECK(r32(&r) == 4, "count");
        outrec o;
        CHECK(r32(&r) == 0 && r32(&r) == 1, "entry 0 head");
        rrecord(&r, &o);
        CHECK(eq_str(o.value, op == STREAMD_OP_ENCODE ? "MIXED" : "mixed"), "op %u value", op);
        CHECK(r32(&r) == 1, "entry 1 status");
        streamd_bytes m = rbytes(&r);
        CHECK(eq_str(m, op == STREAMD_OP_ENCODE ? "cannot encode bad" : "cannot decode bad"),
              "msg %.*s", (int)m.len, m.data);
        CHECK(r32(&r) == 0 && r32(&r) == 1, "entry 2 head");
        rrecord(&r, &o);
        CHECK(o.value.data != NULL && o.value.len == 0, "empty payload is not null");
        CHECK(r32(&r) == 0 && r32(&r) == UINT32_MAX, "a null payload (a tombstone) is kept, not encoded");
        CHECK(r.i == r.n, "trailing result bytes");
        streamd_buf_free(&req);
    }
    test_unsupported(STREAMD_OP_TRANSFORM);
    test_unsupported(STREAMD_OP_WRITE);
}

#elif defined(TEST_SINK)
/* ---- sink: records whose value is "fail" are not written ----------------- */

static int written;
static int sink(const streamd_record *in, streamd_error *err) {
    if (eq_str(in->value, "fail")) {
        return streamd_error_set(err, "disk full");
    }
    written++;
    return STREAMD_OK;
}
static int init(streamd_bytes config, streamd_error *err) {
    if (!eq_str(config, "{}")) {
        return streamd_error_set(err, "want {}");
    }
    return STREAMD_OK;
}
STREAMD_PLUGIN(.kind = STREAMD_KIND_SINK, .name = "counter", .version = "1\"2", .init = init,
               .write = sink)

static void run(void) {
    test_manifest("{\"name\":\"counter\",\"kind\":\"sink\",\"version\":\"1\\\"2\",\"abi\":1}");
    uint8_t *in = streamd_buffer(2);
    memcpy(in, "{}", 2);
    CHECK(streamd_init(2) == 0, "init {}");
    in = streamd_buffer(3);
    memcpy(in, "{x}", 3);
    CHECK(streamd_init(3) == STREAMD_STATUS_ERR_CONFIG, "init {x}");
    CHECK(eq_str(streamd_test_reply(), "want {}"), "config reason");

    streamd_buf req = {0};
    w32(&req, STREAMD_OP_WRITE);
    w32(&req, 2);
    streamd_record a = make("fail"), b = make("ok");
    wrecord(&req, &a);
    wrecord(&req, &b);
    CHECK(call_process(&req) == 0, "status");
    streamd_bytes res = streamd_test_reply();
    rd r = {res.data, res.len, 0};
    CHECK(r32(&r) == 2, "count");
    CHECK(r32(&r) == 1 && eq_str(rbytes(&r), "disk full"), "entry 0");
    CHECK(r32(&r) == 0 && r32(&r) == 0, "entry 1 is durably written");
    CHECK(r.i == r.n, "trailing");
    CHECK(written == 1, "written %d", written);
    streamd_buf_free(&req);
    test_unsupported(STREAMD_OP_TRANSFORM);
    test_unsupported(STREAMD_OP_ENCODE);
}

#else
/* ---- transform: the value says what to do -------------------------------- */

static int t(const streamd_record *in, streamd_emitter *out, streamd_error *err) {
    if (eq_str(in->value, "keep")) {
        return streamd_keep(out);
    }
    if (eq_str(in->value, "drop")) {
        return STREAMD_OK;
    }
    if (eq_str(in->value, "err")) {
        streamd_emit(out, in); /* discarded by the error */
        return streamd_error_set(err, "bad record");
    }
    if (eq_str(in->value, "batch")) {
        return STREAMD_ERR_BATCH + 0 * streamd_error_set(err, "whole batch");
    }
    if (eq_str(in->value, "misuse")) {
        streamd_emit(out, in);
        return streamd_keep(out);
    }
    if (in->value.data && in->value.len > 0 && in->value.data[0] == '#') {
        /* the same copy, field by field (test_lengths) */
        streamd_emit_begin(out, in->timestamp_ms, in->key, in->value);
        for (uint32_t i = 0; i < in->header_count; i++) {
            streamd_emit_header(out, in->headers[i].name, in->headers[i].value);
        }
        return streamd_emit_end(out);
    }
    if (eq_str(in->value, "two")) {
        streamd_emit_begin(out, 5, STREAMD_NULL, STREAMD_LIT("first"));
        streamd_emit_header(out, STREAMD_LIT("x"), STREAMD_NULL);
        streamd_emit_end(out);
        return streamd_emit(out, in);
    }
    return streamd_emit(out, in);
}
STREAMD_TRANSFORM("t", "1.0.0", t)

/*
 * test_lengths: records whose key, value, header names and header values
 * have every length from 0 to 40 (across the 4-, 8-, 16- and 32-byte steps
 * of the decoder's and encoder's fast paths; each byte distinct, so a byte
 * copied from the wrong place shows) or are null, copied by streamd_emit and
 * by streamd_emit_begin/header/end: the reply must hold each record exactly
 * as the test's own encoder writes it (offset and partition -1).
 */
static void test_lengths(void) {
    uint8_t bytes[4][64];
    for (int k = 0; k < 4; k++) {
        for (int i = 0; i < 64; i++) {
            bytes[k][i] = (uint8_t)(k * 64 + i + 1);
        }
    }
    for (int begin = 0; begin < 2; begin++) {
        for (int len = -1; len <= 40; len++) {
            streamd_buf req = {0}, want = {0};
            streamd_header h[3];
            streamd_record recs[3];
            uint32_t nrec = 0;
            /* one record with everything len long, one with each header
             * value len long and the key null, one with no headers */
            for (int shape = 0; shape < 3; shape++) {
                size_t n = len < 0 ? 0 : (size_t)len;
                streamd_bytes v = len < 0 ? STREAMD_NULL : streamd_bytes_of(bytes[1], n);
                if (begin) {
                    bytes[1][0] = '#'; /* the transform copies field by field */
                    v = streamd_bytes_of(bytes[1], n + 1);
                }
                streamd_record r = {0};
                r.offset = 1000 + len;
                r.timestamp_ms = -5 - len;
                r.partition = 3;
                r.key = shape == 1 || len < 0 ? STREAMD_NULL : streamd_bytes_of(bytes[0], n);
                r.value = v;
                h[shape].name = streamd_bytes_of(bytes[2], n);
                h[shape].value = len < 0 ? STREAMD_NULL : streamd_bytes_of(bytes[3] + shape, n);
                r.headers = h;
                r.header_count = shape == 2 ? 0 : (uint32_t)shape + 1;
                if (shape == 1) {
                    h[1].value = streamd_bytes_of(bytes[3], n);
                }
                recs[nrec++] = r;
            }
            w32(&req, STREAMD_OP_TRANSFORM);
            w32(&req, nrec);
            w32(&want, nrec);
            for (uint32_t i = 0; i < nrec; i++) {
                wrecord(&req, &recs[i]);
                streamd_record o = recs[i];
                o.offset = -1;
                o.partition = -1;
                w32(&want, 0);
                w32(&want, 1);
                wrecord(&want, &o);
            }
            CHECK(call_process(&req) == 0, "lengths %d begin %d: status", len, begin);
            streamd_bytes got = streamd_test_reply();
            size_t at = 0;
            while (at < got.len && at < want.len && got.data[at] == want.data[at]) {
                at++;
            }
            CHECK(got.len == want.len && at == want.len,
                  "lengths %d begin %d: reply of %zu bytes differs from the %zu wanted at byte %zu", len,
                  begin, got.len, want.len, at);
            streamd_buf_free(&req);
            streamd_buf_free(&want);
        }
    }
}

static void run(void) {
    test_lengths();
    test_manifest("{\"name\":\"t\",\"kind\":\"transform\",\"version\":\"1.0.0\",\"abi\":1}");
    CHECK(streamd_init(0) == 0, "init without a config function");

    /* A big value makes the input buffer grow past its first 64 KiB. */
    size_t big_len = 300 * 1000;
    char *big = malloc(big_len + 1);
    memset(big, 'b', big_len);
    big[big_len] = 0;
    const char *values[] = {"keep", "drop", "err", "two", NULL, big};
    size_t n = sizeof values / sizeof values[0];
    streamd_buf req = {0};
    w32(&req, STREAMD_OP_TRANSFORM);
    w32(&req, (uint32_t)n);
    for (size_t i = 0; i < n; i++) {
        streamd_record rec = make(values[i]);
        wrecord(&req, &rec);
    }
    for (int round = 0; round < 2; round++) { /* the second reuses the buffers */
        CHECK(call_process(&req) == 0, "status");
        streamd_bytes res = streamd_test_reply();
        rd r = {res.data, res.len, 0};
        outrec o;
        CHECK(r32(&r) == n, "count");
        CHECK(r32(&r) == 0 && r32(&r) == UINT32_MAX, "keep");
        CHECK(r32(&r) == 0 && r32(&r) == 0, "drop");
        CHECK(r32(&r) == 1 && eq_str(rbytes(&r), "bad record"), "err");
        CHECK(r32(&r) == 0 && r32(&r) == 2, "two");
        rrecord(&r, &o);
        CHECK(o.offset == -1 && o.partition == -1 && o.ts == 5 && o.key.data == NULL &&
                  eq_str(o.value, "first") && o.nh == 1 && eq_str(o.h[0].name, "x") &&
                  o.h[0].value.data == NULL,
              "two: first record");
        rrecord(&r, &o);
        CHECK(o.ts == 1700000000123 && eq_str(o.key, "k") && eq_str(o.value, "two") && o.nh == 3 &&
                  eq_str(o.h[0].value, "v1") && o.h[1].value.data == NULL &&
                  eq_str(o.h[2].name, "") && eq_str(o.h[2].value, ""),
              "two: copy");
        CHECK(r32(&r) == 0 && r32(&r) == 1, "null value entry");
        rrecord(&r, &o);
        CHECK(o.value.data == NULL, "null value stays null");
        CHECK(r32(&r) == 0 && r32(&r) == 1, "big entry");
        rrecord(&r, &o);
        CHECK(o.value.len == big_len, "big value length %zu", o.value.len);
        CHECK(r.i == r.n, "trailing result bytes");
    }
    streamd_buf_free(&req);

    /* A batch error fails the call with the reason. */
    w32(&req, STREAMD_OP_TRANSFORM);
    w32(&req, 2);
    streamd_record a = make("x"), b = make("batch");
    wrecord(&req, &a);
    wrecord(&req, &b);
    CHECK(call_process(&req) == STREAMD_STATUS_ERR_BATCH, "batch status");
    CHECK(eq_str(streamd_test_reply(), "whole batch"), "batch reason");
    streamd_buf_free(&req);

    /* Keep after emit is a plugin bug: the call fails loudly. */
    w32(&req, STREAMD_OP_TRANSFORM);
    w32(&req, 1);
    a = make("misuse");
    wrecord(&req, &a);
    CHECK(call_process(&req) == STREAMD_STATUS_ERR_INTERNAL, "misuse status");
    streamd_buf_free(&req);

    CHECK(streamd_buffer(-1) == NULL, "negative size");
    test_unsupported(STREAMD_OP_ENCODE);
    test_unsupported(STREAMD_OP_DECODE);
    test_unsupported(STREAMD_OP_WRITE);
    test_unsupported(99);
    free(big);
}
#endif

/* ---- JSON helpers ---------------------------------------------------------- */

static streamd_bytes lit(const char *s) { return streamd_bytes_of(s, strlen(s)); }

static void test_json(void) {
    const char *doc = " {\"a\":\"x\\u00e9\\ud83d\\ude00\\n\",\"n\":-9223372036854775808,\"f\":1.5e3,"
                      "\"b\":true,\"z\":null,\"l\":[1,{\"a\":2}],\"a\":\"last\",\"e\\u0073c\":1} ";
    streamd_bytes v;
    streamd_buf b = {0};
    int64_t n;
    int t;
    CHECK(streamd_json_valid(lit(doc)), "valid");
    CHECK(streamd_json_get(lit(doc), "a", &v) == STREAMD_OK && streamd_json_string(v, &b) == STREAMD_OK &&
              b.len == 4 && memcmp(b.data, "last", 4) == 0,
          "last a wins");
    CHECK(streamd_json_get(lit(doc), "n", &v) == STREAMD_OK && streamd_json_int64(v, &n) == STREAMD_OK && n == INT64_MIN,
          "int64 min");
    CHECK(streamd_json_get(lit(doc), "f", &v) == STREAMD_OK && streamd_json_int64(v, &n) == STREAMD_JSON_INVALID,
          "1.5e3 is not an integer");
    CHECK(streamd_json_get(lit(doc), "b", &v) == STREAMD_OK && streamd_json_bool(v, &t) == STREAMD_OK && t == 1, "bool");
    CHECK(streamd_json_get(lit(doc), "z", &v) == STREAMD_OK && streamd_json_is_null(v), "null");
    CHECK(streamd_json_get(lit(doc), "l", &v) == STREAMD_OK && v.len == 11, "raw array %zu", v.len);
    CHECK(streamd_json_get(lit(doc), "esc", &v) == STREAMD_OK, "escaped name");
    CHECK(streamd_json_get(lit(doc), "nope", &v) == STREAMD_JSON_MISSING, "missing");
    CHECK(streamd_json_get(lit("[1]"), "a", &v) == STREAMD_JSON_INVALID, "not an object");
    b.len = 0;
    const char *s = "{\"s\":\"x\\u00e9\\ud83d\\ude00\\n\"}";
    CHECK(streamd_json_get(lit(s), "s", &v) == STREAMD_OK && streamd_json_string(v, &b) == STREAMD_OK && b.len == 8 &&
              memcmp(b.data, "x\xc3\xa9\xf0\x9f\x98\x80\n", 8) == 0,
          "escapes decoded");
    CHECK(streamd_json_int64(lit("9223372036854775808"), &n) == STREAMD_JSON_INVALID, "int64 overflow");
    CHECK(streamd_json_int64(lit("012"), &n) == STREAMD_JSON_INVALID, "leading zero");
    static const char *const bad[] = {"", "{", "{\"a\":1,}", "[1 2]", "01", "1.", "\"\\ud800\"", "\"\\x\"",
                                      "\"a\nb\"", "{} x", "tru", "\"\xff\"", "\"\xc0\x80\"", NULL};
    for (const char *const *d = bad; *d; d++) CHECK(!streamd_json_valid(lit(*d)), "%s is valid", *d);
    char deep[200];
    memset(deep, '[', 65);
    memset(deep + 65, ']', 65);
    CHECK(!streamd_json_valid(streamd_bytes_of(deep, 130)), "65 deep");
    CHECK(streamd_json_valid(streamd_bytes_of(deep + 1, 128)), "64 deep");
    static const char *const keys[] = {"field", "limit", NULL};
    streamd_error err = {0};
    CHECK(streamd_json_only_keys(lit("{\"field\":1,\"limit\":2}"), keys, &err) == STREAMD_OK, "only keys");
    CHECK(streamd_json_only_keys(lit("{\"field\":1,\"feild\":2}"), keys, &err) == STREAMD_JSON_INVALID &&
              err.msg.len == strlen("unknown key \"feild\"") && memcmp(err.msg.data, "unknown key \"feild\"", err.msg.len) == 0,
          "unknown key: %.*s", (int)err.msg.len, (const char *)err.msg.data);
    b.len = 0;
    CHECK(streamd_json_append_string(&b, lit("\"\\\x01\b\f\t/\xc3\xa9")) == STREAMD_OK &&
              b.len == strlen("\"\\\"\\\\\\u0001\\b\\f\\t/\xc3\xa9\"") &&
              memcmp(b.data, "\"\\\"\\\\\\u0001\\b\\f\\t/\xc3\xa9\"", b.len) == 0,
          "append string: %.*s", (int)b.len, (const char *)b.data);
    streamd_buf_free(&err.msg);
    streamd_buf_free(&b);
}

int main(void) {
    run();
    test_json();
#if defined(TEST_CODEC)
    test_malformed(STREAMD_OP_DECODE);
#elif defined(TEST_SINK)
    test_malformed(STREAMD_OP_WRITE);
#else
    test_malformed(STREAMD_OP_TRANSFORM);
#endif
    if (failures) {
        fprintf(stderr, "FAIL: %d checks failed\n", failures);
        return 1;
    }
    printf("ok\n");
    return 0;
}
