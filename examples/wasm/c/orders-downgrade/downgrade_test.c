/*
 * Native table tests of downgrade.c (run by test.sh with the host compiler).
 */
#include "downgrade.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *in;  /* NULL: a null value */
    const char *out; /* NULL: an error is expected, containing err */
    const char *err;
} cases[] = {
    {"{\"order_id\":\"o-1\",\"customer\":{\"id\":\"c-1\",\"name\":\"Ann\"},\"amount_cents\":1299,"
     "\"currency\":\"EUR\",\"tags\":[\"a\",1,true,null,{\"x\":[]}]}",
     "{\"order_id\":\"o-1\",\"customer_id\":\"c-1\",\"amount_cents\":1299,\"currency\":\"EUR\"}", NULL},
    /* escapes decoded, then escaped minimally; -0 is 0 */
    {" {\"order_id\" : \"\\u00e9\\/\\\"\\\\\\b\\f\\n\\r\\t\\u0001\\u001F\\ud83d\\ude00\\u007f\\u2028\","
     "\"customer\":{\"id\":\"\"},\"amount_cents\":-0,\"currency\":\"x\"}\n",
     "{\"order_id\":\"\xc3\xa9/\\\"\\\\\\b\\f\\n\\r\\t\\u0001\\u001f\xf0\x9f\x98\x80\x7f\xe2\x80\xa8\","
     "\"customer_id\":\"\",\"amount_cents\":0,\"currency\":\"x\"}",
     NULL},
    {"{\"order_id\":\"a\",\"customer\":{\"id\":\"b\"},\"amount_cents\":-9223372036854775808,\"currency\":\"c\"}",
     "{\"order_id\":\"a\",\"customer_id\":\"b\",\"amount_cents\":-9223372036854775808,\"currency\":\"c\"}",
     NULL},
    {"{\"order_\\u0069d\":\"a\",\"customer\":{\"\\u0069d\":\"b\"},\"amount_cents\":9223372036854775807,"
     "\"currency\":\"c\"}",
     "{\"order_id\":\"a\",\"customer_id\":\"b\",\"amount_cents\":9223372036854775807,\"currency\":\"c\"}",
     NULL},
    {NULL, NULL, "null value"},
    {"", NULL, "empty value"},
    {"[]", NULL, "not a JSON object"},
    {"{\"order_id\":\"a\",\"customer\":{\"id\":\"b\"},\"amount_cents\":9223372036854775808,\"currency\":\"c\"}",
     NULL, "does not fit int64"},
    {"{\"order_id\":\"a\",\"customer\":{\"id\":\"b\"},\"amount_cents\":1.0,\"currency\":\"c\"}", NULL,
     "not an integer"},
    {"{\"order_id\":\"a\",\"customer\":{\"id\":\"b\"},\"amount_cents\":\"1\",\"currency\":\"c\"}", NULL,
     "not a number"},
    {"{\"order_id\":\"a\",\"customer\":{\"id\":\"b\",\"\\u0069d\":\"c\"},\"amount_cents\":1,\"currency\":\"c\"}",
     NULL, "duplicate key \"id\" in customer"},
    {"{\"x\":1,\"order_id\":\"a\",\"x\":2}", NULL, "duplicate key \"x\""},
    {"{\"order_id\":\"a\",\"customer\":{\"id\":\"b\"},\"amount_cents\":1,\"currency\":\"c\"} {}", NULL,
     "data after the JSON object"},
    {"{\"order_id\":\"\\ud800\"}", NULL, "unpaired surrogate"},
    {"{\"order_id\":\"\\udc00\"}", NULL, "unpaired surrogate"},
    {"{\"order_id\":\"\xed\xa0\x80\"}", NULL, "invalid UTF-8"},
    {"{\"order_id\":\"\xc0\xaf\"}", NULL, "invalid UTF-8"},
    {"{\"order_id\":\"a\x01\"}", NULL, "control character"},
    {"{\"order_id\":\"a\",\"customer\":{\"id\":7}}", NULL, "customer.id is not a string"},
    {"{\"order_id\":\"a\",\"customer\":[]}", NULL, "customer is not an object"},
    {"{\"order_id\":\"a\",\"customer\":{},\"amount_cents\":1,\"currency\":\"c\"}", NULL,
     "missing customer.id"},
    {"{\"customer\":{\"id\":\"b\"},\"amount_cents\":1,\"currency\":\"c\"}", NULL, "missing order_id"},
    {"{\"order_id\":\"a\",\"customer\":{\"id\":\"b\"},\"amount_cents\":1,\"currency\":\"c\",\"t\":tru}",
     NULL, "invalid literal"},
    {"{\"order_id\":\"a\",\"customer\":{\"id\":\"b\"},\"amount_cents\":1,\"currency\":\"c\",\"t\":01}",
     NULL, "expected ',' or '}'"},
};

static int nested(int levels, char *buf, size_t cap) {
    /* top-level object (level 1) holding levels-1 nested arrays */
    const char *head = "{\"order_id\":\"a\",\"customer\":{\"id\":\"b\"},\"amount_cents\":1,\"currency\":\"c\",\"t\":";
    size_t n = strlen(head);
    if (n + 2 * (size_t)levels + 2 > cap) {
        return -1;
    }
    memcpy(buf, head, n);
    for (int i = 1; i < levels; i++) {
        buf[n++] = '[';
    }
    for (int i = 1; i < levels; i++) {
        buf[n++] = ']';
    }
    buf[n++] = '}';
    buf[n] = 0;
    return 0;
}

/*
 * Each byte class str treats apart from plain bytes (and the plain bytes
 * next to them), at every position of strings of 0-39 bytes: str reads
 * sixteen bytes at a time while none of them needs a look, and the last
 * sixteen of the value for the rest, so a byte at each position of a
 * vector, across the 16- and 32-byte steps, and a vector cut short by the
 * end of the value, must be seen.
 */
static const struct {
    const char *in, *out; /* out NULL: an error containing err */
    const char *err;
} special[] = {
    {" ", " ", NULL},             /* 0x20: plain */
    {"\x7f", "\x7f", NULL},       /* plain */
    {"!", "!", NULL},             /* plain: 0x21, next to '"' */
    {"#", "#", NULL},             /* plain: 0x23 */
    {"[", "[", NULL},             /* plain: 0x5b, next to '\\' */
    {"]", "]", NULL},             /* plain: 0x5d */
    {"\xc3\xa9", "\xc3\xa9", NULL}, /* UTF-8 */
    {"\\n", "\\n", NULL},         /* an escape */
    {"\\\"", "\\\"", NULL},       /* an escaped quote */
    {"\\\\", "\\\\", NULL},       /* an escaped backslash (escaped again on output) */
    {"\\u0001", "\\u0001", NULL},   /* a control byte, escaped again on output */
    {"\x1f", NULL, "control character"},
    {"\x80", NULL, "invalid UTF-8"},
    {"\"", NULL, "expected ','"}, /* the string ends early */
};

static int special_positions(streamd_buf *out, streamd_buf *scratch, streamd_buf *err) {
    int failures = 0;
    static const char lower[] = "abcdefghijklmnopqrstuvwxyz0123456789abcd",
                      upper[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789ABCD";
    char in[512], want[512], s[128], w[128];
    for (size_t c = 0; c < sizeof special / sizeof special[0]; c++) {
        for (int len = 0; len < 40; len++) {
            for (int k = 0; k <= len; k++) {
                snprintf(s, sizeof s, "%.*s%s%.*s", k, lower, special[c].in, len - k, upper);
                snprintf(in, sizeof in,
                         "{\"order_id\":\"%s\",\"customer\":{\"id\":\"b\"},\"amount_cents\":1,\"currency\":\"%s\"}", s, s);
                /* exactly the value's bytes, so that a read past them is caught
                 * (ASan): the currency, the same string, ends 2 bytes before
                 * the value does, so every word read near the end is tried */
                size_t n = strlen(in);
                char *v = malloc(n);
                if (!v) {
                    return failures + 1;
                }
                memcpy(v, in, n);
                out->len = 0;
                int rc = downgrade_value(out, scratch, streamd_bytes_of(v, n), err);
                free(v);
                if (special[c].out) {
                    snprintf(w, sizeof w, "%.*s%s%.*s", k, lower, special[c].out, len - k, upper);
                    snprintf(want, sizeof want,
                             "{\"order_id\":\"%s\",\"customer_id\":\"b\",\"amount_cents\":1,\"currency\":\"%s\"}", w, w);
                    if (rc != 0 || out->len != strlen(want) || memcmp(out->data, want, out->len) != 0) {
                        fprintf(stderr, "special %zu at %d of %d: rc %d, got %.*s\n  want %s\n", c, k, len, rc,
                                (int)out->len, out->data, want);
                        failures++;
                    }
                    continue;
                }
                int found = 0;
                size_t el = strlen(special[c].err);
                for (size_t j = 0; rc == -1 && j + el <= err->len; j++) {
                    found |= memcmp(err->data + j, special[c].err, el) == 0;
                }
                if (!found) {
                    fprintf(stderr, "special %zu at %d of %d: rc %d, error %.*s, want one containing %s\n", c, k,
                            len, rc, (int)err->len, err->data, special[c].err);
                    failures++;
                }
            }
        }
    }
    return failures;
}

/*
 * Duplicate keys at every position of objects of 1-21 extra keys, starting at each of them (so the
 * top-level object, which has 4 keys already, crosses the key list's 8 into
 * the hash table), in the top-level object and in customer: keys of 0-10
 * bytes, some of one length differing in one byte only, some sharing their
 * first 8 bytes and their length, the duplicate
 * written raw or with an escape (so that it is decoded into the arena).
 */
static int duplicate_positions(streamd_buf *out, streamd_buf *scratch, streamd_buf *err) {
    static const char *const keys[] = {"",           "a",          "aa",        "aaa",        "ab",
                                       "abc",        "aXc",        "abcd",      "abcde",      "abcdX",
                                       "abcdefg",    "abcXefg",    "abcdefgh",  "abcdefgX",   "abcdefghi",
                                       "abcdefghX",  "abcdefghiX", "abcdefghiY", "abcdefgh-1", "abcdefgh-2",
                                       "order_i"};
    const int nk = (int)(sizeof keys / sizeof keys[0]);
    int failures = 0;
    char in[1024], extra[512], want[128];
    for (int c = 0; c < 2 * nk * nk; c++) {
        int where = c / (nk * nk), start = c / nk % nk, n = c % nk + 1; /* keys[start], keys[start+1], ... */
        for (int d = -1; d < n; d++) { /* the duplicate of the d-th; -1: none */
            for (int esc = 0; esc < 2; esc++) {
                size_t m = 0;
                for (int j = 0; j < n; j++) {
                    m += (size_t)snprintf(extra + m, sizeof extra - m, ",\"%s\":%d", keys[(start + j) % nk], j);
                }
                const char *k = d >= 0 ? keys[(start + d) % nk] : "";
                if (d >= 0 && esc && k[0] == 'a') {
                    m += (size_t)snprintf(extra + m, sizeof extra - m, ",\"\\u0061%s\":0", k + 1);
                } else if (d >= 0) {
                    m += (size_t)snprintf(extra + m, sizeof extra - m, ",\"%s\":0", k);
                }
                snprintf(in, sizeof in,
                         where ? "{\"order_id\":\"a\",\"customer\":{\"id\":\"b\"%s},\"amount_cents\":1,\"currency\":\"c\"}"
                               : "{\"order_id\":\"a\",\"customer\":{\"id\":\"b\"},\"amount_cents\":1,\"currency\":\"c\"%s}",
                         extra);
                out->len = 0;
                int rc = downgrade_value(out, scratch, streamd_bytes_of(in, strlen(in)), err);
                if (d < 0) {
                    const char *w = "{\"order_id\":\"a\",\"customer_id\":\"b\",\"amount_cents\":1,\"currency\":\"c\"}";
                    if (rc != 0 || out->len != strlen(w) || memcmp(out->data, w, out->len) != 0) {
                        fprintf(stderr, "keys: rc %d, got %.*s for %s\n", rc, (int)out->len, out->data, in);
                        failures++;
                    }
                    continue;
                }
                snprintf(want, sizeof want, "duplicate key \"%s\"%s", k, where ? " in customer" : "");
                if (rc != -1 || err->len != strlen(want) || memcmp(err->data, want, err->len) != 0) {
                    fprintf(stderr, "keys: rc %d, error %.*s, want %s for %s\n", rc, (int)err->len, err->data, want,
                            in);
                    failures++;
                }
            }
        }
    }
    return failures;
}

/*
 * The picked keys compared a word at a time: each of them with any one of
 * its bytes changed (to the next byte value) is just another key, so the
 * field counts as missing.
 */
static int near_keys(streamd_buf *out, streamd_buf *scratch, streamd_buf *err) {
    static const struct {
        const char *key, *missing;
    } picked[] = {{"order_id", "missing order_id"},
                  {"customer", "missing customer"},
                  {"amount_cents", "missing amount_cents"},
                  {"currency", "missing currency"},
                  {"id", "missing customer.id"}};
    int failures = 0;
    char in[256], key[16];
    for (size_t c = 0; c < sizeof picked / sizeof picked[0]; c++) {
        size_t n = strlen(picked[c].key);
        for (size_t k = 0; k < n; k++) {
            memcpy(key, picked[c].key, n + 1);
            key[k]++;
            const char *ks[5] = {"order_id", "customer", "amount_cents", "currency", "id"};
            ks[c] = key;
            snprintf(in, sizeof in, "{\"%s\":\"a\",\"%s\":{\"%s\":\"b\"},\"%s\":1,\"%s\":\"c\"}", ks[0], ks[1], ks[4],
                     ks[2], ks[3]);
            out->len = 0;
            int rc = downgrade_value(out, scratch, streamd_bytes_of(in, strlen(in)), err);
            if (rc != -1 || err->len != strlen(picked[c].missing) ||
                memcmp(err->data, picked[c].missing, err->len) != 0) {
                fprintf(stderr, "near key %s: rc %d, error %.*s, want %s\n", key, rc, (int)err->len, err->data,
                        picked[c].missing);
                failures++;
            }
        }
    }
    return failures;
}

int main(void) {
    int failures = 0;
    streamd_buf out = {0}, scratch = {0}, err = {0};
    failures += special_positions(&out, &scratch, &err);
    failures += duplicate_positions(&out, &scratch, &err);
    failures += near_keys(&out, &scratch, &err);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        streamd_bytes in = cases[i].in ? streamd_bytes_of(cases[i].in, strlen(cases[i].in)) : STREAMD_NULL;
        out.len = 0;
        int rc = downgrade_value(&out, &scratch, in, &err);
        if (cases[i].out) {
            if (rc != 0 || out.len != strlen(cases[i].out) || memcmp(out.data, cases[i].out, out.len) != 0) {
                fprintf(stderr, "case %zu: rc %d, got %.*s\n  want %s\n  err %.*s\n", i, rc, (int)out.len,
                        out.data, cases[i].out, (int)err.len, err.data);
                failures++;
            }
            continue;
        }
        int found = 0;
        size_t el = strlen(cases[i].err);
        for (size_t k = 0; rc == -1 && k + el <= err.len; k++) {
            found |= memcmp(err.data + k, cases[i].err, el) == 0;
        }
        if (!found) {
            fprintf(stderr, "case %zu: rc %d, error %.*s, want one containing %s\n", i, rc, (int)err.len,
                    err.data, cases[i].err);
            failures++;
        }
    }
    char deep[256];
    for (int levels = 63; levels <= 66; levels++) {
        nested(levels, deep, sizeof deep);
        out.len = 0;
        int rc = downgrade_value(&out, &scratch, streamd_bytes_of(deep, strlen(deep)), &err);
        int want = levels <= 64 ? 0 : -1;
        if (rc != want) {
            fprintf(stderr, "nesting %d: rc %d, want %d (%.*s)\n", levels, rc, want, (int)err.len, err.data);
            failures++;
        }
    }
    streamd_buf_free(&out);
    streamd_buf_free(&scratch);
    streamd_buf_free(&err);
    if (failures) {
        fprintf(stderr, "FAIL: %d cases\n", failures);
        return 1;
    }
    printf("ok\n");
    return 0;
}
