/*
 * bench_native: the C orders-downgrade plugin compiled natively (the SDK's
 * native build: streamd.c without __wasm__), driven exactly as the Wasm host
 * drives the plugin: the same request batch of 256 orders as
 * runtime.BenchmarkPlugins (runtime/helpers_test.go benchRecords) is copied
 * into streamd_buffer and streamd_process is called; the reply is copied out
 * (the native build's host_reply). Prints CPU nanoseconds per record, in
 * go test's benchmark format so that benchstat reads it beside the Wasm
 * figures (docs/benchmarks.md, issue 17):
 *
 *   cc -O2 -std=c11 -I sdk/c sdk/c/streamd.c examples/wasm/c/orders-downgrade/plugin.c \
 *      examples/wasm/c/orders-downgrade/downgrade.c examples/wasm/c/orders-downgrade/bench_native.c -o bench
 *   ./bench [SECONDS]
 */
#define _POSIX_C_SOURCE 199309L
#include "streamd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BATCH 256

static uint8_t req[BATCH * 300 + 8];
static size_t req_len;

static void put32(uint32_t v) {
    memcpy(req + req_len, &v, 4); /* little-endian host assumed (x86-64, arm64) */
    req_len += 4;
}
static void put64(int64_t v) {
    memcpy(req + req_len, &v, 8);
    req_len += 8;
}
static void put_bytes(const char *s, size_t n) {
    put32((uint32_t)n);
    memcpy(req + req_len, s, n);
    req_len += n;
}

static double cpu_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 1.0;
    put32(1); /* TRANSFORM */
    put32(BATCH);
    for (int i = 0; i < BATCH; i++) {
        char key[32], value[256];
        int kn = snprintf(key, sizeof key, "key-%012d", i);
        int vn = snprintf(value, sizeof value,
                          "{\"order_id\":\"o-%08d\",\"customer\":{\"id\":\"c-%06d\",\"name\":\"Ann Example\"},"
                          "\"amount_cents\":%d,\"currency\":\"EUR\",\"tags\":[\"a\",\"b\",\"c\"],"
                          "\"note\":\"0123456789abcdef0123456789\"}",
                          i, i % 1000, i * 7);
        size_t size_at = req_len;
        put32(0);
        put64(i);                          /* offset */
        put64(1767225600000LL + i);        /* timestamp_ms */
        put32(0);                          /* partition */
        put_bytes(key, (size_t)kn);
        put_bytes(value, (size_t)vn);
        put32(1);
        put_bytes("trace-id", 8);
        put_bytes("0123456789abcdef", 16);
        uint32_t size = (uint32_t)(req_len - size_at - 4);
        memcpy(req + size_at, &size, 4);
    }
    if (streamd_manifest() != 0) {
        fprintf(stderr, "manifest failed\n");
        return 1;
    }
    uint8_t *b = streamd_buffer(2);
    memcpy(b, "{}", 2);
    if (streamd_init(2) != 0) {
        fprintf(stderr, "init failed\n");
        return 1;
    }
    long n = 0;
    double start = cpu_seconds(), now = start;
    while (now - start < seconds) {
        for (int k = 0; k < 100; k++) {
            uint8_t *in = streamd_buffer((int32_t)req_len);
            memcpy(in, req, req_len);
            if (streamd_process((int32_t)req_len) != 0) {
                fprintf(stderr, "process failed\n");
                return 1;
            }
            n++;
        }
        now = cpu_seconds();
    }
    streamd_bytes reply = streamd_test_reply();
    uint32_t count, status, outs;
    if (reply.len < 12) {
        fprintf(stderr, "short reply\n");
        return 1;
    }
    memcpy(&count, reply.data, 4);
    memcpy(&status, reply.data + 4, 4);
    memcpy(&outs, reply.data + 8, 4);
    if (count != BATCH || status != 0 || outs != 1) {
        fprintf(stderr, "reply: count %u, first status %u, %u records: want %d, 0, 1\n", count, status, outs, BATCH);
        return 1;
    }
    double ns = (now - start) * 1e9 / ((double)n * BATCH);
    printf("BenchmarkPlugins/c-native \t%ld\t%.0f ns/op\t%.1f cpu-ns/record\t%.1f ns/record\n", n, ns * BATCH, ns, ns);
    return 0;
}
