/*
 * A self-contained fuzzer of the C SDK's request decoder and result encoder:
 * it mutates valid requests at random (bit flips, byte sets, truncation,
 * splices of interesting lengths) and feeds them to streamd_process, under
 * AddressSanitizer and UBSan when built by run.sh. Every call must either
 * succeed with a result that parses and has one entry per record, or fail
 * with ERR_INTERNAL and a message.
 *
 * Usage: fuzz [SECONDS] (default 5). Deterministic for a given seed
 * (FUZZ_SEED, default 1).
 */
#include "streamd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int t(const streamd_record *in, streamd_emitter *out, streamd_error *err) {
    if (in->value.data && in->value.len > 0) {
        switch (in->value.data[0] % 4) {
        case 0:
            return streamd_keep(out);
        case 1:
            return streamd_error_set(err, "no");
        case 2:
            return STREAMD_OK; /* drop */
        }
    }
    return streamd_emit(out, in);
}
STREAMD_TRANSFORM("fuzz", "1", t)

static uint64_t rng;
static uint64_t next(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void w32(streamd_buf *b, uint32_t v) {
    uint8_t p[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    streamd_buf_append(b, p, 4);
}

static void seed(streamd_buf *b) {
    uint32_t n = (uint32_t)(next() % 5);
    b->len = 0;
    w32(b, STREAMD_OP_TRANSFORM);
    w32(b, n);
    for (uint32_t i = 0; i < n; i++) {
        streamd_buf body = {0};
        for (int k = 0; k < 20; k++) {
            streamd_buf_append_byte(&body, (uint8_t)next());
        }
        uint32_t klen = (uint32_t)(next() % 4) - 1; /* -1..2 */
        w32(&body, klen);
        for (uint32_t k = 0; klen != UINT32_MAX && k < klen; k++) {
            streamd_buf_append_byte(&body, 'k');
        }
        uint32_t vlen = (uint32_t)(next() % 6) - 1;
        w32(&body, vlen);
        for (uint32_t k = 0; vlen != UINT32_MAX && k < vlen; k++) {
            streamd_buf_append_byte(&body, (uint8_t)next());
        }
        uint32_t hn = (uint32_t)(next() % 3);
        w32(&body, hn);
        for (uint32_t h = 0; h < hn; h++) {
            w32(&body, 1);
            streamd_buf_append_byte(&body, 'h');
            w32(&body, (uint32_t)(next() % 3) - 1);
            if (body.data[body.len - 1] != 0xff) {
                for (uint32_t k = 0; k < body.data[body.len - 4]; k++) {
                    streamd_buf_append_byte(&body, 'v');
                }
            }
        }
        w32(b, (uint32_t)body.len);
        streamd_buf_append(b, body.data, body.len);
        streamd_buf_free(&body);
    }
}

static void mutate(streamd_buf *b) {
    static const uint32_t lens[] = {0, 1, 3, 4, 7, 8, 0x7fffffff, 0x80000000, 0xffffffff, 0xfffffffe};
    int n = 1 + (int)(next() % 4);
    for (int k = 0; k < n && b->len > 0; k++) {
        size_t at = next() % b->len;
        switch (next() % 4) {
        case 0:
            b->data[at] ^= (uint8_t)(1u << (next() % 8));
            break;
        case 1:
            b->data[at] = (uint8_t)next();
            break;
        case 2:
            b->len = at;
            break;
        default:
            if (b->len - at >= 4) {
                uint32_t v = lens[next() % (sizeof lens / sizeof lens[0])];
                b->data[at] = (uint8_t)v;
                b->data[at + 1] = (uint8_t)(v >> 8);
                b->data[at + 2] = (uint8_t)(v >> 16);
                b->data[at + 3] = (uint8_t)(v >> 24);
            }
        }
    }
}

static uint32_t get32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* check_result walks a result batch; it returns its entry count or -1. */
static long check_result(streamd_bytes r) {
    size_t i = 0, n = r.len;
    if (n < 4) {
        return -1;
    }
    uint32_t count = get32(r.data);
    i = 4;
    for (uint32_t e = 0; e < count; e++) {
        if (n - i < 8) {
            return -1;
        }
        uint32_t st = get32(r.data + i), x = get32(r.data + i + 4);
        i += 8;
        if (st == 1) {
            if (n - i < x) {
                return -1;
            }
            i += x;
        } else if (st == 0 && x != UINT32_MAX) {
            for (uint32_t k = 0; k < x; k++) {
                if (n - i < 4 || n - i - 4 < get32(r.data + i)) {
                    return -1;
                }
                i += 4 + get32(r.data + i);
            }
        } else if (st != 0) {
            return -1;
        }
    }
    return i == n ? (long)count : -1;
}

/* fuzz_json mutates a JSON document and runs the JSON helpers over it:
 * no crash or sanitizer report, and a document they call valid has every
 * member streamd_json_get finds. */
static int fuzz_json(double seconds) {
    static const char seedDoc[] = "{\"a\":\"x\\u00e9\\ud83d\\ude00\",\"n\":-12,\"f\":1.5e3,\"l\":[true,false,null,{\"b\":[]}]}";
    uint8_t doc[256];
    streamd_buf out = {0};
    clock_t end = clock() + (clock_t)(seconds * CLOCKS_PER_SEC);
    unsigned long runs = 0, valid = 0;
    while (clock() < end) {
        for (int k = 0; k < 256; k++, runs++) {
            size_t n = sizeof seedDoc - 1;
            memcpy(doc, seedDoc, n);
            for (int m = (int)(next() % 4); m >= 0 && n > 0; m--) {
                switch (next() % 3) {
                case 0: doc[next() % n] = (uint8_t)next(); break;
                case 1: n = next() % (n + 1); break;
                default: {
                    static const char punct[] = "{}[]\",:\\u0e-.";
                    doc[next() % n] = (uint8_t)punct[next() % (sizeof punct - 1)];
                    break;
                }
                }
            }
            streamd_bytes d = streamd_bytes_of(doc, n), v;
            int ok = streamd_json_valid(d);
            valid += ok;
            int64_t i;
            int b;
            static const char *const keys[] = {"a", "n", "f", "l", NULL};
            streamd_error err = {0};
            streamd_json_only_keys(d, keys, &err);
            streamd_buf_free(&err.msg);
            for (const char *const *key = keys; *key; key++) {
                int rc = streamd_json_get(d, *key, &v);
                if (rc == STREAMD_JSON_INVALID && ok && n > 0 && doc[0] == '{') {
                    fprintf(stderr, "json run %lu: a valid object fails streamd_json_get\n", runs);
                    return 1;
                }
                if (rc == STREAMD_OK) {
                    out.len = 0;
                    streamd_json_string(v, &out);
                    streamd_json_int64(v, &i);
                    streamd_json_bool(v, &b);
                    if (!streamd_json_valid(v)) {
                        fprintf(stderr, "json run %lu: a member's value is not valid JSON\n", runs);
                        return 1;
                    }
                }
            }
        }
    }
    streamd_buf_free(&out);
    printf("fuzz json: %lu runs, %lu valid, no failure\n", runs, valid);
    return 0;
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 5;
    const char *s = getenv("FUZZ_SEED");
    rng = s ? strtoull(s, NULL, 10) : 1;
    if (rng == 0) {
        rng = 1;
    }
    streamd_buf req = {0};
    clock_t end = clock() + (clock_t)(seconds * CLOCKS_PER_SEC);
    unsigned long runs = 0, ok = 0;
    while (clock() < end) {
        for (int k = 0; k < 256; k++, runs++) {
            seed(&req);
            if (next() % 8) {
                mutate(&req);
            }
            uint8_t *in = streamd_buffer((int32_t)req.len);
            if (in == NULL) {
                fprintf(stderr, "streamd_buffer failed\n");
                return 1;
            }
            if (req.len) {
                memcpy(in, req.data, req.len);
            }
            int32_t st = streamd_process((int32_t)req.len);
            streamd_bytes r = streamd_test_reply();
            if (st == STREAMD_STATUS_OK) {
                long c = check_result(r);
                if (c < 0 || (uint32_t)c != get32(req.data + 4)) {
                    fprintf(stderr, "run %lu: bad result for a request of %zu bytes\n", runs, req.len);
                    return 1;
                }
                ok++;
            } else if ((st != STREAMD_STATUS_ERR_INTERNAL && st != STREAMD_STATUS_ERR_UNSUPPORTED) ||
                       r.len == 0) {
                fprintf(stderr, "run %lu: status %d with %zu-byte message\n", runs, st, r.len);
                return 1;
            }
        }
    }
    streamd_buf_free(&req);
    printf("fuzz: %lu runs, %lu accepted, no failure\n", runs, ok);
    return fuzz_json(seconds / 2);
}
