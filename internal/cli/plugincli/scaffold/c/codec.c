/*
 * @NAME@: a streamd Wasm codec: ENCODE and DECODE both reverse the bytes of
 * a payload (replace them with your encoding). A null payload (a tombstone)
 * never reaches it: the SDK keeps it null. Build it with build.sh; test it
 * with `streamd plugin test --op encode` (README.md).
 */
#include "streamd.h"

static int reverse(const streamd_record *in, streamd_buf *out, streamd_error *err) {
    (void)err;
    if (streamd_buf_reserve(out, in->value.len) != STREAMD_OK) return STREAMD_ERR_BATCH;
    for (size_t i = in->value.len; i > 0; i--) out->data[out->len++] = in->value.data[i - 1];
    return STREAMD_OK;
}

STREAMD_CODEC("@NAME@", "0.1.0", reverse, reverse)
