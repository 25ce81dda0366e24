/*
 * A self-contained fuzzer of downgrade_value for memory safety: it mutates
 * seed orders at random and runs them under AddressSanitizer and UBSan (see
 * test.sh). The differential check against the Go reference downgrade is in
 * conformance/ (FuzzDowngrade); this one catches what the Wasm sandbox would
 * hide, such as reads past a buffer that stay inside linear memory.
 *
 * Usage: fuzz [SECONDS] (default 5); FUZZ_SEED picks the random sequence.
 */
#include "downgrade.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *seeds[] = {
    "{\"order_id\":\"o-1\",\"customer\":{\"id\":\"c-1\",\"name\":\"Ann\"},\"amount_cents\":1299,"
    "\"currency\":\"EUR\",\"tags\":[\"a\",1,true,null,{\"x\":[]}]}",
    " {\"order_id\" : \"\\u00e9\\/\\\"\\\\\\b\\f\\n\\r\\t\\u0001\\u001F\\ud83d\\ude00\\u007f\\u2028\","
    "\"customer\":{\"id\":\"\",\"a\":1,\"b\":2,\"c\":3,\"d\":4,\"e\":5,\"f\":6,\"g\":7,\"h\":8,\"i\":9},"
    "\"amount_cents\":-0,\"currency\":\"x\",\"n\":-1.5e+3}\n",
    "{\"order_id\":\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\",\"customer\":{\"id\":\"b\"},"
    "\"amount_cents\":-9223372036854775808,\"currency\":\"c\",\"t\":[[[[[[[[]]]]]]]]}",
};

static const char *snippets[] = {"\"", "\\", "\\u", "\\ud800", "\\udc00", "{", "}", "[", "]", ",", ":",
                                 "null", "-", "0", "1e", ".", "\xff", "\xc3", "\xe2\x82", " ",
                                 "\"id\"", "\"order_id\"", "\"customer\"", "\x01", "9223372036854775808"};

static uint64_t rng;
static uint64_t next(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 5;
    const char *s = getenv("FUZZ_SEED");
    rng = s ? strtoull(s, NULL, 10) : 1;
    if (rng == 0) {
        rng = 1;
    }
    streamd_buf in = {0}, out = {0}, scratch = {0}, err = {0}, tmp = {0};
    clock_t end = clock() + (clock_t)(seconds * CLOCKS_PER_SEC);
    unsigned long runs = 0, ok = 0;
    while (clock() < end) {
        for (int k = 0; k < 256; k++, runs++) {
            const char *sd = seeds[next() % (sizeof seeds / sizeof seeds[0])];
            in.len = 0;
            streamd_buf_append(&in, sd, strlen(sd));
            int n = (int)(next() % 4);
            for (int m = 0; m < n && in.len > 0; m++) {
                size_t at = next() % in.len;
                switch (next() % 4) {
                case 0: { /* insert a snippet */
                    const char *sn = snippets[next() % (sizeof snippets / sizeof snippets[0])];
                    tmp.len = 0;
                    streamd_buf_append(&tmp, in.data, at);
                    streamd_buf_append(&tmp, sn, strlen(sn));
                    streamd_buf_append(&tmp, in.data + at, in.len - at);
                    in.len = 0;
                    streamd_buf_append(&in, tmp.data, tmp.len);
                    break;
                }
                case 1: /* delete a few bytes */
                    {
                        size_t d = 1 + next() % 8;
                        if (d > in.len - at) {
                            d = in.len - at;
                        }
                        memmove(in.data + at, in.data + at + d, in.len - at - d);
                        in.len -= d;
                    }
                    break;
                case 2:
                    in.data[at] = (uint8_t)next();
                    break;
                default:
                    in.len = at; /* truncate */
                }
            }
            /* Copy to an exact-size allocation so ASan sees reads past the end. */
            uint8_t *exact = malloc(in.len ? in.len : 1);
            memcpy(exact, in.data, in.len);
            out.len = 0;
            int rc = downgrade_value(&out, &scratch, streamd_bytes_of(exact, in.len), &err);
            free(exact);
            if (rc == 0) {
                ok++;
                if (out.len < 14 || memcmp(out.data, "{\"order_id\":\"", 13) != 0 ||
                    out.data[out.len - 1] != '}') {
                    fprintf(stderr, "run %lu: malformed output %.*s\n", runs, (int)out.len, out.data);
                    return 1;
                }
            } else if (rc != -1 || err.len == 0) {
                fprintf(stderr, "run %lu: rc %d without a reason\n", runs, rc);
                return 1;
            }
        }
    }
    printf("fuzz: %lu runs, %lu accepted, no failure\n", runs, ok);
    streamd_buf_free(&in);
    streamd_buf_free(&out);
    streamd_buf_free(&scratch);
    streamd_buf_free(&err);
    streamd_buf_free(&tmp);
    return 0;
}
